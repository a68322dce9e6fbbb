"""In-place ops on tensors in a graph, views and index assignment, against torch."""

import numpy as np
import pytest
import torch

import nautograd as ng

RS = np.random.RandomState(0)
X = RS.rand(2, 3) + 0.2
O = RS.rand(2, 3) + 0.5
P = O + 1.0


def _compare(program, *arrays, dtype="float64"):
    """Run ``program(lib, *tensors)`` on torch and nautograd; compare the result, and the
    gradients of the sum of its squares with respect to the (leaf) tensors."""
    results = []
    for lib in (torch, ng):
        leaves = [lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True) for a in arrays]
        out = program(lib, *leaves)
        (out * out).sum().backward()
        grads = [None if t.grad is None else np.asarray(t.grad) for t in leaves]
        results.append((np.asarray(out.detach()).copy(), grads))
    (want, want_grads), (got, got_grads) = results
    rtol = 1e-5 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    for g, w in zip(got_grads, want_grads, strict=True):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


IN_PLACE = [
    ("exp_", ()), ("tanh_", ()), ("sigmoid_", ()), ("relu_", ()), ("pow_", (2,)),
    ("clamp_", (0.2, 0.9)), ("sqrt_", ()), ("neg_", ()), ("abs_", ()), ("sin_", ()),
    ("log1p_", ()), ("square_", ()), ("reciprocal_", ()), ("cumsum_", (1,)), ("tril_", ()),
    ("floor_", ()), ("mul_", (3.0,)), ("div_", (2.0,)), ("add_", (1.5,)), ("sub_", (0.5,)),
    ("zero_", ()), ("fill_", (2.0,)), ("masked_fill_", ("M", 0.3)), ("nan_to_num_", ()),
    ("sign_", ()), ("round_", ()), ("lerp_", ("O", 0.3)), ("addcmul_", ("O", "O")),
    ("addcdiv_", ("O", "P")), ("copy_", ("O",)), ("atan2_", ("O",)), ("hypot_", ("O",)),
    ("mul_", ("O",)), ("div_", ("O",)), ("pow_", ("O",)), ("clamp_", ("O", "P")),
    ("add_", ("O",)), ("sub_", ("O",)), ("fill_", ("S",)),
]  # fmt: skip


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("name", "args"), IN_PLACE, ids=lambda v: str(v))
def test_in_place_op_on_a_tensor_in_a_graph_matches_torch(name, args, dtype):
    def program(lib, x, o, p):
        def operand(a):
            return {"O": o, "P": p.detach(), "M": x > 0.5, "S": o[0, 1]}.get(a, a)

        y = x * 1
        result = getattr(y, name)(*[operand(a) for a in args])
        assert result is y
        return y * 1

    _compare(program, X, O, P, dtype=dtype)


def _setitem_column(lib, x, o):
    y = x * 1
    y[:, 0] += o[:2, 0]
    return y


def _fill_a_buffer(lib, x, o):
    out = lib.zeros(3, dtype=x.dtype)
    for i in range(3):
        out[i] = (x[:, i] ** 2).sum()
    return out * o[0]


def _boolean_mask(lib, x, o):
    y = x * 2
    y[y > 1.0] = 0.0
    return y


def _tensor_index(lib, x, o):
    y = x.t() * 2
    y[lib.tensor([0, 2])] = o[0, :2]
    return y


def _advanced_pairs_with_duplicates(lib, x, o):
    y = x * 1
    y[lib.tensor([0, 1, 0]), lib.tensor([2, 2, 2])] = o[1]
    return y


def _ellipsis_slice_in_place(lib, x, o):
    y = x * 2
    y[..., 1:] *= 2
    return y


def _transposed_view_in_place(lib, x, o):
    y = x * 2
    v = y.t()
    v.add_(o[:, 0])
    return y + v.sum()


def _view_of_a_view(lib, x, o):
    y = x * 2
    v = y[0]
    w = v[1:]
    w.mul_(o[1, :2])
    return y * 1 + v.sum() + w.sum()


def _base_changed_under_a_live_view(lib, x, o):
    y = x * 2
    v = y[1]
    y.mul_(o)
    return v * 3 + y.sum()


def _value_from_another_graph(lib, x, o):
    y = x.exp()
    y = y * 1
    y[1:, :2] = o[0, :2] * 4
    return y.log()


def _view_ops_in_place(lib, x, o):
    y = x * 1
    y.unsqueeze_(0)
    y.transpose_(1, 2)
    return y * o.t().reshape(1, 3, 2)


def _rows_of_a_zero_buffer(lib, x, o):
    y = lib.zeros(2, 3, dtype=x.dtype)
    y[1] = o[0]
    y[:, 2] = x[:, 0]
    y += x
    return y


def _scalar_and_number(lib, x, o):
    y = x * 1
    y[0, 0] = o[0, 0]
    y[1] = 5.0
    return y


def _accumulate_in_a_loop(lib, x, o):
    acc = x * 0
    for k in range(5):
        acc += x * o * (k + 1)
        acc *= 0.5
    return acc


def _in_place_activations(lib, x, o):
    y = x - 0.6
    out = lib.nn.functional.relu(y, inplace=True)
    assert out is y
    z = lib.nn.ReLU(inplace=True)(x - 0.9)
    return y * 2 + z + lib.nn.functional.elu(x - 1.0, inplace=True)


SCENARIOS = [
    _setitem_column, _fill_a_buffer, _boolean_mask, _tensor_index,
    _advanced_pairs_with_duplicates, _ellipsis_slice_in_place, _transposed_view_in_place,
    _view_of_a_view, _base_changed_under_a_live_view, _value_from_another_graph,
    _view_ops_in_place, _rows_of_a_zero_buffer, _scalar_and_number, _accumulate_in_a_loop,
    _in_place_activations,
]  # fmt: skip


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("program", SCENARIOS, ids=lambda f: f.__name__.strip("_"))
def test_views_and_index_assignment_in_a_graph_match_torch(program, dtype):
    _compare(program, X, O, dtype=dtype)


def test_index_assignment_makes_a_buffer_part_of_the_graph():
    x = ng.rand(3, requires_grad=True)
    out = ng.zeros(3)
    out[0] = x[1]
    assert out.requires_grad and not out.is_leaf and out.grad_fn is not None


def test_in_place_op_writes_the_tensors_own_memory():
    x = ng.rand(4, dtype=ng.float64, requires_grad=True)
    y = x * 1
    alias = y.detach().numpy()
    y.add_(x)
    np.testing.assert_allclose(alias, 2 * x.detach().numpy())
    assert y._version >= 1


# (eager-sized tensors: a deferred result's old value stays in its batch's store, so where
# torch raises for a saved value changed in place nautograd computes the gradient)
BIG = 5000


@pytest.mark.parametrize("lib", [torch, ng], ids=["torch", "nautograd"])
def test_in_place_errors_are_torchs(lib):
    x = lib.rand(3, dtype=lib.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match"):
        (x * 1).add_(lib.ones(2, 3, dtype=lib.float64))
    with pytest.raises(RuntimeError, match="result type Double can't be cast to the desired"):
        lib.zeros(3, dtype=lib.int64).add_(x)
    x = lib.rand(BIG, dtype=lib.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[:2].mul_(2)
    y = x * 1
    z = y * y
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


@pytest.mark.parametrize("lib", [torch, ng], ids=["torch", "nautograd"])
def test_a_result_saved_by_its_node_then_changed_in_place_raises(lib):
    x = lib.rand(BIG, dtype=lib.float64, requires_grad=True)
    y = x * 1
    y.exp_()  # exp saves its result: y itself
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_a_deferred_result_changed_in_place_after_use_keeps_its_old_value_for_backward():
    # torch raises here (z saved y's old value); nautograd's deferred forward still has it
    x = ng.tensor([0.5, 1.5, 2.0], dtype=ng.float64, requires_grad=True)
    y = x * 1
    z = y * y
    y.add_(1)
    (z.sum() + y.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy() + 1)


def test_in_place_ops_on_leaves_under_no_grad_still_update_them():
    w = ng.ones(3, requires_grad=True)
    with ng.no_grad():
        w.mul_(2).add_(1)
        w[0] = 7.0
    assert w.is_leaf and w.requires_grad
    np.testing.assert_allclose(w.detach().numpy(), [7.0, 3.0, 3.0])


def test_second_derivatives_flow_through_in_place_ops():
    grads = []
    for lib in (torch, ng):
        x = lib.tensor([0.5, 1.5, -2.0], dtype=lib.float64, requires_grad=True)
        y = x * x
        y.mul_(x)
        y[0] = x[1] * x[2]
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        g.pow(2).sum().backward()
        grads.append(np.asarray(x.grad))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_in_place_ops_on_tensors_not_in_a_graph_are_plain():
    a = ng.ones(3)
    a.exp_()
    a[1] = 0.0
    np.testing.assert_allclose(a.numpy(), [np.e, 0.0, np.e])
    assert not a.requires_grad and a.is_leaf


def test_dropout_in_place_in_eval_mode_returns_the_input():
    x = ng.rand(4, dtype=ng.float64, requires_grad=True) * 1
    layer = ng.nn.Dropout(0.5, inplace=True).eval()
    assert layer(x) is x


@pytest.mark.parametrize("lib", [torch, ng], ids=["torch", "nautograd"])
def test_unbind_outputs_used_after_their_base_changed_in_place_raise(lib):
    x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
    y = x * 1
    a, b, c = y.unbind(0)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="Output 0 of Unbind is a view and its base"):
        (a * b).backward()
