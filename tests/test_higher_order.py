"""create_graph=True: gradients that are themselves differentiable.

Op-table-driven: for every case of every differentiable op, the first-order VJP computed with
create_graph (the op's differentiable formula) and its derivative with respect to both the
inputs and the cotangent, against torch 2.13 with random cotangents. Then the engine's
behaviour under create_graph as named tests (torch 2.13's semantics, and scenarios of its
test_autograd.py).
"""

import threading

import numpy as np
import pytest
import torch
from op_cases import CASES, case_id, make_inputs, run_ng, run_torch

import nautograd as ng
from nautograd.kernels import OPS
from nautograd.kernels.registry import OP_BY_NAME

# Ops whose backward has no differentiable formula yet: create_graph through them raises
# NotImplementedError naming the node (test_an_op_without_a_formula_raises_naming_the_node)
NO_FORMULA = set()

DIFF_CASES = [c for c in CASES if c[0].differentiable]


def _outputs(out):
    return list(out) if isinstance(out, tuple) else [out]


def _uses_op_without_formula(op):
    return op.name in NO_FORMULA


def test_the_list_of_ops_without_a_formula_is_exact():
    assert {op.name for op in OPS if op.differentiable and op.formula is None} == NO_FORMULA


def _second_order(lib, outs, xs, rng_seed):
    """(first-order grads, grads of sum(w * first-order) w.r.t. inputs and cotangents)."""
    rng = np.random.default_rng(rng_seed)
    tensor = ng.tensor if lib is ng else torch.tensor
    cots = [tensor(rng.standard_normal(tuple(o.shape)), requires_grad=True) for o in outs]
    cots = [c.to(o.dtype) for c, o in zip(cots, outs, strict=True)]
    # (a cast keeps a leaf's graph: differentiate with respect to the cast's input)
    g = lib.autograd.grad(outs, xs, cots, create_graph=True, allow_unused=True)
    terms = []
    for gi in g:
        if gi is None:
            continue
        w = tensor(rng.standard_normal(tuple(gi.shape))).to(gi.dtype)
        terms.append((gi * w).sum())
    targets = list(xs) + [c for c in cots if c.requires_grad]
    if not terms:
        return g, [None] * len(targets)
    loss = terms[0]
    for t in terms[1:]:
        loss = loss + t
    if not loss.requires_grad:
        return g, [None] * len(targets)
    return g, lib.autograd.grad(loss, targets, allow_unused=True)


def _close(a, b, what):
    a = None if a is None else a.detach().numpy(force=True)
    b = None if b is None else b.detach().numpy(force=True)  # (force: torch's ZeroTensors)
    if a is None or b is None:
        other = b if a is None else a
        assert other is None or not np.any(other), f"{what}: one side is None, the other not 0"
        return
    np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10, err_msg=what)


@pytest.mark.parametrize("op,i,case", DIFF_CASES, ids=[case_id(c) for c in DIFF_CASES])
def test_double_backward_matches_torch(op, i, case, rng):
    arrays, kwargs = make_inputs(case, rng)
    ours_in, ours = run_ng(op, arrays, kwargs, call=case.call)
    ref_in, ref = run_torch(op, arrays, kwargs, call=case.call)
    xs = [t for t in ours_in if isinstance(t, ng.Tensor)]
    rxs = [t for t in ref_in if isinstance(t, torch.Tensor)]
    if _uses_op_without_formula(op):
        with pytest.raises(NotImplementedError, match="create_graph=True"):
            _second_order(ng, _outputs(ours), xs, 7)
        return
    g, gg = _second_order(ng, _outputs(ours), xs, 7)
    rg, rgg = _second_order(torch, _outputs(ref), rxs, 7)
    for k, (a, b) in enumerate(zip(g, rg, strict=True)):
        _close(a, b, f"first-order gradient {k}")
    assert len(gg) == len(rgg)
    for k, (a, b) in enumerate(zip(gg, rgg, strict=True)):
        _close(a, b, f"second-order gradient {k}")


def _with_zeros(shape, at, seed=3):
    x = np.random.default_rng(seed).standard_normal(shape)
    for idx in at:
        x[idx] = 0.0
    return x


@pytest.mark.parametrize(
    "f,x",
    [
        (lambda t: t.prod(), _with_zeros((3, 4), [(0, 1), (2, 0)])),
        (lambda t: t.prod(), _with_zeros((5,), [(2,)])),
        (lambda t: t.prod(1), _with_zeros((3, 4), [(0, 1), (2, 0), (2, 3)])),
        (lambda t: t.prod(0, keepdim=True), _with_zeros((3, 4), [(0, 1)])),
        (lambda t: t.cumprod(1), _with_zeros((3, 4), [(0, 1), (2, 0), (2, 3)])),
        (lambda t: t.cumprod(0), _with_zeros((3, 4), [(1, 1)])),
        (lambda t: t.cumprod(2), _with_zeros((2, 3, 4), [(1, 1, 2), (0, 0, 0)])),
        (lambda t: t.cumprod(1), _with_zeros((3, 1), [(1, 0)])),
    ],
    ids=[
        "prod",
        "prod-1d",
        "prod-dim",
        "prod-keepdim",
        "cumprod",
        "cumprod-0",
        "cumprod-3d",
        "cumprod-length-1",
    ],
)
def test_prod_and_cumprod_of_tensors_with_zeros_differentiate_twice_as_torch(f, x):
    ours_x = ng.tensor(x, requires_grad=True)
    ref_x = torch.tensor(x, requires_grad=True)
    g, gg = _second_order(ng, [f(ours_x)], [ours_x], 5)
    rg, rgg = _second_order(torch, [f(ref_x)], [ref_x], 5)
    for a, b in zip(g + gg, rg + rgg, strict=True):
        _close(a, b, "prod/cumprod with zeros")


@pytest.mark.parametrize("scale", [1.0, 800.0])
def test_logcumsumexp_of_large_values_differentiates_twice_without_overflow(scale):
    x = np.random.default_rng(4).standard_normal((3, 5)) * scale
    ours_x = ng.tensor(x, requires_grad=True)
    ref_x = torch.tensor(x, requires_grad=True)
    g, gg = _second_order(ng, [ours_x.logcumsumexp(1)], [ours_x], 5)
    rg, rgg = _second_order(torch, [ref_x.logcumsumexp(1)], [ref_x], 5)
    for a, b in zip(g + gg, rg + rgg, strict=True):
        assert np.isfinite(a.detach().numpy()).all()
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-8, atol=1e-9)


def test_an_op_without_a_formula_raises_naming_the_node(monkeypatch):
    monkeypatch.setattr(OP_BY_NAME["convolution"], "formula", None)
    x = ng.tensor(np.ones((1, 1, 4, 4)), requires_grad=True)
    w = ng.tensor(np.ones((2, 1, 3, 3)), requires_grad=True)
    y = ng.nn.functional.conv2d(x, w).sum()
    with pytest.raises(NotImplementedError, match="ConvolutionBackward0"):
        ng.autograd.grad(y, [x, w], create_graph=True)


# ---------------------------------------------------------------------------------------------
# the engine under create_graph (torch's test_autograd scenarios, reference section 5)


def _pair(values, lib):
    if lib is ng:
        return [ng.tensor(v, requires_grad=True) for v in values]
    return [torch.tensor(v, requires_grad=True, dtype=torch.float64) for v in values]


def test_hessian_vector_through_backward_create_graph():
    # z = x^2 + xy + y^2: x.grad = 2x + y, y.grad = x + 2y; then d(2 x.grad + y.grad) = (5, 4)
    x, y = _pair([[1.0, -2.0], [0.5, 3.0]], ng)
    z = x * x + x * y + y * y
    with pytest.warns(UserWarning, match="reference cycle"):
        z.backward(ng.ones(2), create_graph=True)
    first_x = (2 * x + y).detach().numpy().copy()
    first_y = (x + 2 * y).detach().numpy().copy()
    np.testing.assert_allclose(x.grad.detach().numpy(), first_x)
    assert x.grad.requires_grad and x.grad.grad_fn is not None
    (2 * x.grad + y.grad).backward(ng.ones(2))
    np.testing.assert_allclose(x.grad.detach().numpy(), first_x + 5)
    np.testing.assert_allclose(y.grad.detach().numpy(), first_y + 4)


def test_grad_create_graph_leaves_grad_untouched():
    x, y = _pair([[1.0, -2.0], [0.5, 3.0]], ng)
    z = x * x + x * y + y * y
    gx, gy = ng.autograd.grad(z, [x, y], ng.ones(2), create_graph=True)
    (h,) = ng.autograd.grad(2 * gx + gy, x, ng.ones(2), create_graph=True)
    np.testing.assert_allclose(h.detach().numpy(), np.full(2, 5.0))
    assert x.grad is None and y.grad is None


def test_grad_of_grad_with_a_non_leaf_input_matches_torch():
    # five steps of x <- x - 0.1 grad(f(x), x, create_graph=True), then backward to x_init
    def run(lib):
        (x_init,) = _pair([[0.3, -1.2, 2.0]], lib)
        x = x_init * 1.0
        for _ in range(5):
            f = (x.sin() * x * x).sum()
            (g,) = lib.autograd.grad(f, x, create_graph=True)
            x = x - 0.1 * g
        x.sum().backward()
        return x.detach().numpy(), x_init.grad.numpy()

    for a, b in zip(run(ng), run(torch), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_accumulate_under_create_graph_assigns_a_new_grad():
    (x,) = _pair([[1.0, 2.0]], ng)
    y = x + 2
    y.backward(ng.ones(2), create_graph=True)
    first = x.grad
    y.backward(ng.ones(2), create_graph=True)
    assert x.grad is not first  # out of place: the old .grad is unchanged
    np.testing.assert_allclose(first.detach().numpy(), [1.0, 1.0])
    np.testing.assert_allclose(x.grad.detach().numpy(), [2.0, 2.0])


def test_backward_create_graph_warns_and_grad_does_not():
    import warnings

    (x,) = _pair([[1.0, 2.0]], ng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ng.autograd.grad((x * x).sum(), x, create_graph=True)
    with pytest.warns(UserWarning, match="create_graph=True will create a reference cycle"):
        (x * x).sum().backward(create_graph=True)


def test_second_derivative_of_a_linear_function_is_none_or_materialized_zeros():
    (x,) = _pair([[1.0, 2.0]], ng)
    a = ng.tensor([3.0, -1.0])
    (g,) = ng.autograd.grad((x * a).sum(), x, create_graph=True)
    assert not g.requires_grad  # it depends on a only
    (x2,) = _pair([[1.0, 2.0]], ng)
    (g2,) = ng.autograd.grad((x2 * x2 * a).sum() + (x * a).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        ng.autograd.grad(g2.sum() + (x2 * 1.0).sum(), x, allow_unused=False)
    (none,) = ng.autograd.grad((x2 * x2).sum(), x, allow_unused=True, create_graph=True)
    assert none is None
    (zeros,) = ng.autograd.grad((x2 * x2).sum(), x, materialize_grads=True, create_graph=True)
    np.testing.assert_array_equal(zeros.detach().numpy(), [0.0, 0.0])
    assert zeros.requires_grad  # zeros_like(input, requires_grad=create_graph), as torch


def test_create_graph_retains_the_graph_unless_told_not_to():
    (x,) = _pair([[1.0, 2.0]], ng)
    y = (x.exp() * x).sum()
    ng.autograd.grad(y, x, create_graph=True)
    ng.autograd.grad(y, x, create_graph=True)  # retain_graph defaults to create_graph
    ng.autograd.grad(y, x, create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        ng.autograd.grad(y, x, create_graph=True)


def test_hooks_and_retain_grad_under_create_graph():
    def run(lib):
        (x,) = _pair([[1.0, 2.0]], lib)
        h = x * x
        h.retain_grad()
        h.register_hook(lambda g: g * 3)
        y = (h * x).sum()
        y.backward(create_graph=True)
        first = h.grad.detach().numpy().copy(), x.grad.detach().numpy()
        # the hook is recorded, and fires again in the second pass through h, whose
        # retained .grad accumulates (also under grad(), as torch's retains_grad hook)
        (gg,) = lib.autograd.grad(x.grad.sum(), x)
        return *first, gg.numpy(), h.grad.detach().numpy()

    ours = run(ng)
    # dy/dh = x, tripled by the hook; dy/dx = h + (3 x) 2 x = 7 x^2; then 2x * 3 + 12 x
    np.testing.assert_allclose(ours[0], [3.0, 6.0])
    np.testing.assert_allclose(ours[1], [7.0, 28.0])
    np.testing.assert_allclose(ours[2], [18.0, 36.0])
    np.testing.assert_allclose(ours[3], [6.0, 9.0])
    for a, b in zip(ours, run(torch), strict=True):
        np.testing.assert_allclose(a, b)


def test_backward_create_graph_with_inputs_fills_only_them():
    x, y = _pair([[1.0, 2.0], [3.0, 4.0]], ng)
    z = (x * x * y).sum()
    z.backward(inputs=[x], create_graph=True)
    assert y.grad is None
    np.testing.assert_allclose(x.grad.detach().numpy(), [6.0, 16.0])
    (gy,) = ng.autograd.grad(x.grad.sum(), y)
    np.testing.assert_allclose(gy.numpy(), [2.0, 4.0])


def test_custom_function_backward_is_differentiated_under_create_graph():
    class Cube(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x * x

    x = ng.tensor([1.0, -2.0], requires_grad=True)
    y = x * 1.0  # a saved non-leaf input
    (g,) = ng.autograd.grad(Cube.apply(y).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [3.0, 12.0])
    # the saved input is attached to the graph again under create_graph: d(3 x^2) = 6 x
    (gg,) = ng.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [6.0, -12.0])


def test_custom_function_saved_output_is_differentiated_under_create_graph():
    class Exp(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = x.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad):
            (result,) = ctx.saved_tensors
            return grad * result

    def run(lib, fn):
        (x,) = _pair([[0.5, -1.0, 2.0]], lib)
        (g,) = lib.autograd.grad((fn(x) * x).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), x)
        return g.detach().numpy(), gg.numpy()

    class TorchExp(torch.autograd.Function):
        forward = Exp.forward
        backward = Exp.backward

    ours, ref = run(ng, Exp.apply), run(torch, TorchExp.apply)
    for a, b in zip(ours, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_gradient_penalty_matches_torch():
    # WGAN-GP style: the norm of a network's input gradient, differentiated w.r.t. the weights
    rng = np.random.default_rng(3)
    w1, b1, w2 = rng.standard_normal((4, 6)), rng.standard_normal(6), rng.standard_normal((6, 1))
    xv = rng.standard_normal((5, 4))

    def run(lib):
        t = ng.tensor if lib is ng else (lambda a, **k: torch.tensor(a, **k))
        W1, B1, W2 = (t(a, requires_grad=True) for a in (w1, b1, w2))
        x = t(xv, requires_grad=True)
        out = (lib.tanh(x @ W1 + B1) @ W2).sum()
        (gx,) = lib.autograd.grad(out, x, create_graph=True)
        penalty = ((gx * gx).sum(1).sqrt() - 1.0).pow(2).mean()
        return [g.numpy() for g in lib.autograd.grad(penalty, [W1, B1, W2])]

    for a, b in zip(run(ng), run(torch), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_repeated_hessian_vector_products_keep_the_tape_bounded():
    from nautograd.graph.tape import current_tape

    # on a thread of its own: a new tape, whose deferred-forward heuristics (the eager spells
    # after small batches) start afresh, whatever the tests before left on this thread's tape
    sizes = []
    live = []

    def loop():
        x = ng.tensor(np.linspace(-1, 1, 8), requires_grad=True)
        v = ng.tensor(np.ones(8))
        for _ in range(600):
            y = (x.tanh() * x).sum()
            (g,) = ng.autograd.grad(y, x, create_graph=True)
            (hv,) = ng.autograd.grad((g * v).sum(), x)
            sizes.append((current_tape().n, len(current_tape().op)))
        live.append(current_tape().live)

    thread = threading.Thread(target=loop)
    thread.start()
    thread.join()
    # the node columns do not grow after the first half (they may grow once while a walk
    # records, when compaction must wait); where in an iteration the tape restarts depends on
    # which ops were deferred, so the node counts' peaks differ, below the columns' size
    nodes, capacity = np.array(sizes).T
    assert capacity[300:].max() <= capacity[:300].max()
    assert nodes[300:].max() <= capacity[:300].max()
    assert nodes.min() < nodes.max() // 4  # (it restarted)
    assert live[0] <= 4
