"""Indexing and gathering ops: scenarios the op table's random cases do not reach."""

import numpy as np
import pytest
import torch

import nautograd as ng


def _pair(a):
    return ng.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _check(fn, a, rng, index_fn=None):
    x, tx = _pair(a)
    out, ref = fn(x), fn(tx)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy())
    cot = rng.standard_normal(tuple(ref.shape))
    (gx,) = ng.autograd.grad(out, [x], ng.tensor(cot))
    (tg,) = torch.autograd.grad(ref, [tx], torch.tensor(cot))
    np.testing.assert_allclose(gx.numpy(), tg.numpy(), rtol=1e-12, atol=1e-12)
    return gx


def test_getitem_repeated_integer_indices_accumulate(rng):
    idx = [0, 2, 2, 2, 1]
    gx = _check(
        lambda x: x[torch.tensor(idx) if isinstance(x, torch.Tensor) else idx],
        rng.standard_normal((3, 2)),
        rng,
    )
    assert gx.shape == (3, 2)


def test_getitem_bool_mask_and_int_tensor_index(rng):
    a = rng.standard_normal((4, 3))
    mask = a > 0
    _check(
        lambda x: x[torch.tensor(mask) if isinstance(x, torch.Tensor) else ng.tensor(mask)], a, rng
    )
    _check(lambda x: x[1:, [2, 0, 2]], a, rng)
    _check(lambda x: x[None, ..., 1], a, rng)


def test_getitem_zero_size_and_empty_slices(rng):
    _check(lambda x: x[:, 1], np.zeros((0, 3)), rng)
    _check(lambda x: x[2:2], rng.standard_normal((4, 3)), rng)
    x = ng.zeros(0, 3, requires_grad=True)
    (x.sum() * 2).backward()
    assert x.grad.shape == (0, 3)


def test_getitem_negative_step_gradient_lands_reversed():
    x = ng.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = x[::-2]  # torch rejects negative steps; numpy semantics: elements 3 and 1
    np.testing.assert_array_equal(y.detach().numpy(), [4.0, 2.0])
    (y * ng.tensor([10.0, 1.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 0.0, 10.0])


def test_getitem_basic_index_is_a_view_of_the_value():
    x = ng.arange(6.0).reshape(2, 3)
    row = x[1]
    with ng.no_grad():
        x.add_(1.0)
    np.testing.assert_array_equal(row.numpy(), [4.0, 5.0, 6.0])


def test_integer_index_out_of_bounds_raises_index_error():
    x = ng.ones(3, 2, requires_grad=True)
    with pytest.raises(IndexError, match=r"index\(\).*out of bounds.*\(3, 2\)"):
        x[3]
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 5]]
    with pytest.raises(
        IndexError, match=r"index_select\(\): index 4 is out of bounds for dimension 0 with size 3"
    ):
        ng.index_select(x, 0, ng.tensor([0, 4]))


def test_float_index_tensor_raises_naming_the_dtype():
    x = ng.ones(3, requires_grad=True)
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        x[ng.tensor([0.0, 1.0])]
    with pytest.raises(IndexError, match=r"gather\(\): index must be an integer tensor"):
        ng.gather(ng.ones(2, 2), 1, ng.tensor([[0.5, 1.0]]))


def test_out_of_range_dim_raises_naming_the_op():
    with pytest.raises(IndexError, match=r"gather\(\): Dimension out of range"):
        ng.gather(ng.ones(2, 2), 2, ng.tensor([[0]]))
    with pytest.raises(IndexError, match=r"flip\(\): Dimension out of range"):
        ng.flip(ng.ones(2, 2), (3,))


def test_expand_to_incompatible_shape_raises():
    with pytest.raises(
        RuntimeError, match=r"expand\(\): the expanded size of the tensor \(4\) must match"
    ):
        ng.ones(3, 1).expand(2, 4, 5)


def test_scatter_add_duplicate_targets_sum_and_src_gradient(rng):
    index = [[0, 0, 1, 0]]
    x, tx = _pair(rng.standard_normal((2, 4)))
    s, ts = _pair(rng.standard_normal((1, 4)))
    out = x.scatter_add(0, ng.tensor(index), s)
    ref = tx.scatter_add(0, torch.tensor(index), ts)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy())
    cot = rng.standard_normal((2, 4))
    g = ng.autograd.grad(out, [x, s], ng.tensor(cot))
    tg = torch.autograd.grad(ref, [tx, ts], torch.tensor(cot))
    for a, b in zip(g, tg, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy())


def test_large_gather_index_beyond_float32_precision_is_exact():
    # index maps are saved as int64 by address: a float32 arena would round 2**24 + 1
    n = 2**24 + 3
    x = ng.zeros(n, dtype=ng.float32, requires_grad=True)
    y = x[ng.tensor([n - 2])]
    y.sum().backward()
    assert x.grad.numpy()[n - 2] == 1.0 and x.grad.numpy().sum() == 1.0


def test_nan_to_num_with_nan_and_inf_matches_torch(rng):
    a = np.array([np.nan, 1.5, np.inf, -np.inf, -0.5])
    _check(lambda x: x.nan_to_num(nan=0.5, posinf=9.0), a, rng)
    x = ng.tensor(a)
    np.testing.assert_array_equal(ng.isnan(x).numpy(), np.isnan(a))
    np.testing.assert_array_equal(ng.isfinite(x).numpy(), np.isfinite(a))
    np.testing.assert_array_equal(ng.isposinf(x).numpy(), np.isposinf(a))


def test_masked_fill_and_pad_fill_values_get_no_gradient(rng):
    a = rng.standard_normal((3, 4))
    mask = rng.random((3, 4)) > 0.5
    _check(
        lambda x: x.masked_fill(
            torch.tensor(mask) if isinstance(x, torch.Tensor) else ng.tensor(mask), 7.0
        ),
        a,
        rng,
    )
    _check(
        lambda x: (torch.nn.functional if isinstance(x, torch.Tensor) else ng.nn.functional).pad(
            x, (2, 1, 1, 0), value=3.0
        ),
        a,
        rng,
    )


@pytest.mark.parametrize(
    "expr", ["b[7]", "b.reshape(3, 100)[1][2]", "b.reshape(3, 100)[2, 5]", "b[-1] * b[0]"]
)
def test_integer_index_to_a_single_element_backward_does_not_segfault(expr):
    # numpy returns a scalar copy (not a view) for an all-integer index, and its address was
    # taken as the element's offset: backward wrote far outside the gradient buffer
    b0 = np.linspace(-1, 1, 300)
    grads = []
    for lib in (ng, torch):
        b = lib.tensor(b0, requires_grad=True)
        (eval(expr) * 2.0).backward()
        grads.append(b.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_indexing_a_large_tensor_far_from_its_start_does_not_segfault():
    # the index was checked on a fake array of x's shape over one byte of memory: an integer
    # array index (numpy copies the selected fake elements) or an all-integer index (numpy
    # reads the element) read ~200 MB past that byte and crashed the interpreter
    x = ng.zeros(200000, 1000, requires_grad=True)
    y = x[ng.tensor([199999, 5])]
    (y.sum() + x[199999, 5] * 2.0 + x[-1].sum()).backward()
    g = x.grad.numpy()
    assert y.shape == (2, 1000)
    assert g[199999, 5] == 4.0 and g[5].sum() == 1000.0 and g.sum() == 3002.0


def test_a_row_gather_from_a_tensor_with_no_rows_gives_torchs_empty_result():
    # regression: the row size was numel // rows, a ZeroDivisionError for no rows
    from nautograd.kernels.registry import OP_BY_NAME

    x = ng.zeros((0, 5), dtype=ng.float64, requires_grad=True)
    y = ng.tensor_apply(OP_BY_NAME["_index_rows"], x, rows=np.array([], np.int64))
    t = torch.zeros((0, 5), dtype=torch.float64)[torch.tensor([], dtype=torch.int64)]
    assert tuple(y.shape) == tuple(t.shape)
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 5)
