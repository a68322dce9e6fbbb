"""Op-table-driven tests: every case of every op, against torch and finite differences."""

import numpy as np
import pytest
import torch
from op_cases import CASES, apply_op, case_id, make_inputs, run_ng, run_torch

import nautograd as ng

DIFF_CASES = [c for c in CASES if c[0].differentiable]
# finite differences see every input's effect; cases whose op stops a gradient by design
# (embedding's padding_idx) are checked against torch only
FD_CASES = [c for c in DIFF_CASES if c[2].gradcheck]


def _outputs(out):
    return list(out) if isinstance(out, tuple) else [out]


def _float_inputs(inputs):
    return [t for t in inputs if isinstance(t, ng.Tensor) and t.requires_grad]


@pytest.mark.parametrize("op,i,case", CASES, ids=[case_id(c) for c in CASES])
def test_forward_and_vjp_match_torch(op, i, case, rng):
    arrays, kwargs = make_inputs(case, rng)
    ours_in, ours = run_ng(op, arrays, kwargs, call=case.call)
    ref_in, ref = run_torch(op, arrays, kwargs, call=case.call)
    ours_out, ref_out = _outputs(ours), _outputs(ref)
    assert len(ours_out) == len(ref_out)
    for a, b in zip(ours_out, ref_out, strict=True):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    if not op.differentiable:
        assert not any(o.requires_grad for o in ours_out)
        return
    # a random cotangent per output (a .sum() would hide transposition bugs)
    cot = [rng.standard_normal(o.shape) for o in ours_out]
    ours_g = ng.autograd.grad(
        ours_out, _float_inputs(ours_in), [ng.tensor(c) for c in cot], allow_unused=True
    )
    ref_leaves = [t for t in ref_in if isinstance(t, torch.Tensor)]
    ref_g = torch.autograd.grad(
        ref_out, ref_leaves, [torch.tensor(c) for c in cot], allow_unused=True
    )
    for a, b in zip(ours_g, ref_g, strict=True):
        if b is None:
            assert a is None or not np.any(a.numpy())
            continue
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("op,i,case", FD_CASES, ids=[case_id(c) for c in FD_CASES])
def test_gradcheck_finite_differences(op, i, case, rng):
    arrays, kwargs = make_inputs(case, rng)
    ours_in, ours = run_ng(op, arrays, kwargs, call=case.call)
    outs = _outputs(ours)
    if any(o.dtype != np.float64 for o in outs):
        pytest.skip("finite differences need a float64 result (torch parity covers casts)")
    cot = [rng.standard_normal(o.shape) for o in outs]
    leaves = _float_inputs(ours_in)
    analytic = ng.autograd.grad(outs, leaves, [ng.tensor(c) for c in cot], allow_unused=True)

    def objective(arrs):
        with ng.no_grad():
            _, out = run_ng(op, arrs, kwargs, requires_grad=False, call=case.call)
        return sum(float(np.sum(o.numpy() * c)) for o, c in zip(_outputs(out), cot, strict=True))

    eps = 1e-6
    k = 0
    for j, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            continue
        num = np.zeros(a.shape)
        for idx in np.ndindex(a.shape):
            plus = [x.copy() if isinstance(x, np.ndarray) else x for x in arrays]
            minus = [x.copy() if isinstance(x, np.ndarray) else x for x in arrays]
            plus[j][idx] += eps
            minus[j][idx] -= eps
            num[idx] = (objective(plus) - objective(minus)) / (2 * eps)
        got = analytic[k].numpy() if analytic[k] is not None else np.zeros(a.shape)
        np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-6)
        k += 1


@pytest.mark.parametrize("op,i,case", DIFF_CASES, ids=[case_id(c) for c in DIFF_CASES])
def test_float32_matches_float64(op, i, case, rng):
    arrays, kwargs = make_inputs(case, rng)
    arrays32 = [a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in arrays]
    kwargs = {
        k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
        for k, v in kwargs.items()
    }
    arrays64 = [a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in arrays32]
    in32, out32 = run_ng(op, arrays32, kwargs, call=case.call)
    in64, out64 = run_ng(op, arrays64, kwargs, call=case.call)
    outs32, outs64 = _outputs(out32), _outputs(out64)
    for a, b in zip(outs32, outs64, strict=True):
        if kwargs.get("dtype") is None:
            assert a.dtype == np.float32
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-5, atol=2e-5)
    cot = [rng.standard_normal(o.shape) for o in outs64]
    g32 = ng.autograd.grad(
        outs32,
        _float_inputs(in32),
        [ng.tensor(c).to(o.dtype) for c, o in zip(cot, outs32, strict=True)],
        allow_unused=True,
    )
    g64 = ng.autograd.grad(
        outs64, _float_inputs(in64), [ng.tensor(c) for c in cot], allow_unused=True
    )
    for a, b in zip(g32, g64, strict=True):
        if b is None:
            continue
        assert a.dtype == np.float32
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-4)


def test_every_op_has_cases_and_public_names():
    from nautograd.kernels import OPS

    for op in OPS:
        if op.library:  # (declared by tests/test_library.py, if it ran first)
            continue
        assert op.cases, f"op {op.name} has no test cases"
        for name in op.functions:
            assert callable(getattr(ng, name)), name
        for name in op.methods:
            assert callable(getattr(ng.Tensor, name)), name


NONCONTIG_CASES = [
    c
    for c in DIFF_CASES
    if any(isinstance(s, tuple) and len(s) >= 2 for s in c[2].shapes)
    and c[0].nin != -1
    and c[2].call is None
]


@pytest.mark.parametrize("op,i,case", NONCONTIG_CASES, ids=[case_id(c) for c in NONCONTIG_CASES])
def test_noncontiguous_inputs_match_torch(op, i, case, rng):
    """Every operand of 2 or more dims enters as the transpose of a leaf (a strided view)."""
    arrays, kwargs = make_inputs(case, rng)

    def run(lib, tensor):
        leaves, inputs = [], []
        for a in arrays:
            if isinstance(a, np.ndarray) and a.ndim >= 2:
                leaf = tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), requires_grad=True)
                leaves.append(leaf)
                inputs.append(leaf.transpose(-1, -2))
            elif isinstance(a, np.ndarray):
                leaf = tensor(a, requires_grad=True)
                leaves.append(leaf)
                inputs.append(leaf)
            else:
                inputs.append(a)
        return leaves, inputs

    ours_leaves, ours_in = run(ng, ng.tensor)
    kw = {k: (ng.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    ours = _outputs(apply_op(op, *ours_in, **kw))
    ref_leaves, ref_in = run(torch, torch.tensor)
    try:
        _, ref = run_torch(op, ref_in, kwargs)
    except RuntimeError as e:  # torch's view() rejects these strides; the values are the same
        assert "view size is not compatible" in str(e)
        _, ref = run_torch(
            op, [t.contiguous() if hasattr(t, "contiguous") else t for t in ref_in], kwargs
        )
    ref = _outputs(ref)
    for a, b in zip(ours, ref, strict=True):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    cot = [rng.standard_normal(tuple(o.shape)) for o in ours]
    ours_g = ng.autograd.grad(ours, ours_leaves, [ng.tensor(c) for c in cot], allow_unused=True)
    ref_g = torch.autograd.grad(ref, ref_leaves, [torch.tensor(c) for c in cot], allow_unused=True)
    for a, b in zip(ours_g, ref_g, strict=True):
        if b is None:
            assert a is None or not np.any(a.numpy())
            continue
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("size", [16, 64, 65, 1000])
@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 3.0), (-1.5, 3.0), (0.5, 1.0)])
def test_softplus_matches_torch_on_both_sides_of_its_compiled_size(size, beta, threshold, rng):
    # float64 softplus of up to 64 elements runs one compiled loop (max(z, 0) +
    # log1p(exp(-|z|))), larger ones numpy's calls: values across the threshold and far into
    # both tails, nan and infinities, forward and a VJP with a random cotangent
    x0 = rng.standard_normal(size) * 30
    x0[:4] = [np.nan, np.inf, -np.inf, threshold / beta]
    cot = rng.standard_normal(size)
    out = []
    for lib in (ng, torch):
        x = lib.tensor(x0, requires_grad=True)
        y = lib.nn.functional.softplus(x, beta=beta, threshold=threshold)
        (g,) = lib.autograd.grad(y, x, lib.tensor(cot))
        out.append((y.detach().numpy(), g.numpy()))
    for a, b in zip(out[0], out[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-300)


def test_lerp_rejects_addcmuls_value_argument():
    # regression: the three-operand ops shared one forward signature, so lerp accepted (and
    # ignored) addcmul's value=
    x, end = ng.zeros(3), ng.ones(3)
    np.testing.assert_allclose(ng.lerp(x, end, 0.25).numpy(), 0.25)
    with pytest.raises(TypeError, match="value"):
        ng.lerp(x, end, 0.25, value=2.0)
    np.testing.assert_allclose(ng.addcmul(x, end, end, value=2.0).numpy(), 2.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [3, 1024])
@pytest.mark.parametrize("ops", ["add_sub", "mul_div"])
def test_bias_row_gradients_match_torch(dtype, rows, ops, rng):
    # x + b and x - alpha * b (or x * b and x / b) with b of shape (128,): the row loops of
    # add/sub's and of the binary ops' backward, storing into b's fresh buffer, then adding to
    # it; 1024 rows are above the size from which the backward runs in parts (each part sums
    # the rows of its own columns)
    arrays = [rng.standard_normal(s).astype(dtype) for s in ((rows, 128), (128,))]
    arrays[1] = np.abs(arrays[1]) + dtype(0.5)  # a divisor away from 0
    cot = rng.standard_normal((rows, 128)).astype(dtype)

    def grads(lib, tensor):
        x, b = (tensor(a, requires_grad=True) for a in arrays)
        if ops == "add_sub":
            out = (x + b) * 0.5 + lib.sub(x, b, alpha=2.0)
        else:
            out = (x * b) * 0.5 + x / b
        return [g.detach().numpy() for g in lib.autograd.grad(out, (x, b), tensor(cot))]

    ours = grads(ng, ng.tensor)
    ref = grads(torch, torch.tensor)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    for a, b in zip(ours, ref, strict=True):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * rows)


@pytest.mark.parametrize("name", ["stack", "cat"])
@pytest.mark.parametrize(
    "items",
    [
        "f64 f64 f64",  # one floating dtype: the fast path
        "f32 f32",
        "f32 f64",  # promoted
        "f64 i64",  # an integer tensor among them: promoted, no gradient for it
        "f64 np",  # a numpy array among them
        "f64 const f64",  # a tensor that does not require grad
    ],
)
@pytest.mark.parametrize("container", [list, tuple])
def test_stack_and_cat_of_each_kind_of_sequence_match_torch(name, items, container, rng):
    # sequences of tensors of one floating dtype take a short path in apply; any other item
    # (another dtype, an integer tensor, a numpy array) the general one: values, dtypes and a
    # VJP with a random cotangent against torch
    values = [rng.standard_normal((2, 3)) for _ in items.split()]
    out = []
    for lib in (ng, torch):
        seq, leaves = [], []
        for kind, v in zip(items.split(), values, strict=True):
            if kind == "np":
                seq.append(v)
                continue
            dtype = {"f64": lib.float64, "f32": lib.float32, "i64": lib.int64, "const": lib.float64}
            t = lib.tensor(np.round(v * 3) if kind == "i64" else v, dtype=dtype[kind])
            if kind in ("f64", "f32"):
                t.requires_grad_(True)
                leaves.append(t)
            seq.append(t)
        if lib is torch:  # (torch takes tensors only)
            seq = [lib.tensor(x) if isinstance(x, np.ndarray) else x for x in seq]
        y = getattr(lib, name)(container(seq), 0)
        cot = rng.standard_normal(tuple(y.shape)) if lib is ng else out[0][2]
        grads = lib.autograd.grad(y, leaves, lib.tensor(cot, dtype=y.dtype))
        out.append(
            (y.detach().numpy(), str(y.dtype).split(".")[-1], cot, [g.numpy() for g in grads])
        )
    (y, dt, _, grads), (ty, tdt, _, tgrads) = out
    assert dt == tdt
    np.testing.assert_allclose(y, ty, rtol=1e-6)
    for g, tg in zip(grads, tgrads, strict=True):
        np.testing.assert_allclose(g, tg, rtol=1e-6)


def test_stack_of_an_empty_list_raises_torchs_error():
    with pytest.raises(RuntimeError, match="expected a non-empty list of Tensors"):
        ng.stack([])


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("tanh", {}),
        ("exp", {}),
        ("sigmoid", {}),
        ("relu", {}),
        ("sqrt", {}),
        ("sum", {}),
        ("sum", {"dim": 0}),
        ("mean", {"dim": 1}),
        ("softmax", {"dim": 0}),
        ("log_softmax", {"dim": 1}),
    ],
)
def test_one_input_functions_take_torchs_input_keyword(name, kwargs):
    # torch.tanh(input=x): the frontends took the tensor positionally only ("takes 1 tensor
    # argument(s), got 0")
    x0 = np.random.default_rng(3).uniform(0.2, 0.8, (3, 4))
    results = []
    for lib in (ng, torch):
        x = lib.tensor(x0, requires_grad=True)
        y = getattr(lib, name)(input=x, **kwargs)
        y.backward(lib.ones_like(y))
        results.append((y.detach().numpy(), x.grad.numpy()))
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "xs,ys",
    [
        ((200, 64), (64,)),  # a bias row
        ((64,), (200, 64)),  # the row on the left
        ((200, 64), (200, 1)),  # a column
        ((200, 1), (200, 64)),
        ((200, 1), (1, 64)),  # an outer product's layout
        ((4, 50, 64), (64,)),  # rows coalesced over the leading dims
        ((1025, 600), (600,)),  # above ROWS_MIN: rows split over the threads
    ],
)
def test_two_dim_broadcasting_forward_equals_numpy_to_the_bit(dtype, xs, ys, rng):
    # add, sub, mul, div of a broadcast pair of at least _ROWS_MIN elements run a compiled
    # row loop (kernels/elementwise.py _rows) instead of numpy's: the same IEEE operations,
    # so the same bits, and the gradients of torch
    from nautograd.kernels import elementwise

    x0 = rng.standard_normal(xs).astype(dtype)
    y0 = (np.abs(rng.standard_normal(ys)) + 0.5).astype(dtype)
    assert np.prod(np.broadcast_shapes(xs, ys)) >= elementwise._ROWS_MIN
    for name, f in (
        ("add", np.add),
        ("sub", np.subtract),
        ("mul", np.multiply),
        ("div", np.divide),
    ):
        x, y = ng.tensor(x0, requires_grad=True), ng.tensor(y0, requires_grad=True)
        result = getattr(ng, name)(x, y)
        assert result.dtype == dtype
        np.testing.assert_array_equal(result.detach().numpy(), f(x0, y0))
        xt, yt = torch.tensor(x0, requires_grad=True), torch.tensor(y0, requires_grad=True)
        cot = rng.standard_normal(result.shape).astype(dtype)
        ours = ng.autograd.grad(result, (x, y), ng.tensor(cot))
        ref = torch.autograd.grad(getattr(torch, name)(xt, yt), (xt, yt), torch.tensor(cot))
        tol = 2e-4 if dtype == np.float32 else 1e-11
        for a, b in zip(ours, ref, strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol * 100)


def test_two_dim_broadcasting_loop_is_taken(monkeypatch):
    from nautograd.kernels import elementwise

    calls = []
    real = elementwise._rows_loop
    monkeypatch.setattr(elementwise, "_rows_loop", lambda *a: (calls.append(a[0]), real(*a)))
    x, b = ng.ones((128, 256), dtype=ng.float32), ng.ones(256, dtype=ng.float32)
    _ = x + b, x - b, x * b, x / b, b * x
    assert calls == [
        elementwise.ROWS_ADD,
        elementwise.ROWS_SUB,
        elementwise.ROWS_MUL,
        elementwise.ROWS_DIV,
        elementwise.ROWS_MUL,
    ]
    calls.clear()
    _ = x[:8, :8] + b[:8], ng.ones((128, 256), dtype=ng.int64) + 1, x + x  # small, int, same shape
    assert calls == []
