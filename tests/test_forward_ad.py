"""Forward-mode AD (autograd.forward_ad) against torch 2.13: the API's semantics and errors,
and every op of the table's tangents, against torch's forward AD and against reverse mode."""

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw
from op_cases import CASES, case_id, make_inputs, run_torch

import nautograd as ng
import nautograd.autograd.forward_ad as fw
from nautograd.kernels.registry import Case, run_case
from nautograd.tensor import FUNCTIONS, NN_FUNCTIONAL

DIFF_CASES = [c for c in CASES if c[0].differentiable]


def _outputs(out):
    return list(out) if isinstance(out, tuple) else [out]


def _torch_jvp(op, arrays, kwargs, tangents, call):
    """torch's tangents of the op's floating outputs, or None where torch has no forward
    formula for it."""
    with tfw.dual_level():
        duals = [
            tfw.make_dual(torch.tensor(a), torch.tensor(t)) if t is not None else a
            for a, t in zip(arrays, tangents, strict=True)
        ]
        try:
            _, out = run_torch(op, duals, kwargs, requires_grad=False, call=call)
        except (NotImplementedError, RuntimeError) as e:
            if "forward AD" in str(e) or "forward-mode" in str(e) or "not implemented" in str(e):
                return None
            raise
        return [
            tfw.unpack_dual(o).tangent if o.is_floating_point() else None for o in _outputs(out)
        ]


def _ng_jvp(op, arrays, kwargs, tangents, call):
    with fw.dual_level():
        inputs = [
            fw.make_dual(ng.tensor(a), ng.tensor(t)) if t is not None else _plain(a)
            for a, t in zip(arrays, tangents, strict=True)
        ]
        kw = {k: (ng.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
        out = _public_call(op, call, inputs, kw)
        return [fw.unpack_dual(o).tangent for o in _outputs(out)], _outputs(out)


def _public_call(op, call, inputs, kw):
    """The op called through its public function (a composite's frontend has forward-AD
    behaviour of its own: embedding's padding rows), as ``run_case`` calls the others."""
    if not op.composite:
        return run_case(op, Case((), call=call), ng.tensor_apply, inputs, kw)
    f = FUNCTIONS.get(op.name) or NN_FUNCTIONAL[op.name]
    args = (inputs,) if op.nin == -1 else inputs
    return call(f, *args, **kw) if call is not None else f(*args, **kw)


def _flat(j):
    """The tensors of a Jacobian or Hessian (nested tuples or lists), in order."""
    return [j] if not isinstance(j, (tuple, list)) else [x for y in j for x in _flat(y)]


def _plain(a):
    return ng.tensor(a) if isinstance(a, np.ndarray) else a


def _tangents(arrays, rng):
    return [
        rng.standard_normal(a.shape) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else None
        for a in arrays
    ]


@pytest.mark.parametrize("op,i,case", DIFF_CASES, ids=[case_id(c) for c in DIFF_CASES])
def test_tangents_match_torch_forward_ad_and_reverse_mode(op, i, case, rng):
    arrays, kwargs = make_inputs(case, rng)
    tangents = _tangents(arrays, rng)
    ours, outs = _ng_jvp(op, arrays, kwargs, tangents, case.call)
    floating = [o.dtype.kind == "f" if hasattr(o.dtype, "kind") else True for o in outs]
    # reverse mode: u . (J v) == (u J) . v for a random u per output
    inputs = [ng.tensor(a, requires_grad=t is not None) if isinstance(a, np.ndarray) else a
              for a, t in zip(arrays, tangents, strict=True)]  # fmt: skip
    kw = {k: (ng.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    rev = _outputs(run_case(op, Case((), call=case.call), ng.tensor_apply, inputs, kw))
    leaves = [x for x in inputs if isinstance(x, ng.Tensor) and x.requires_grad]
    us = [rng.standard_normal(o.shape) for o in rev]
    pairs = [(o, u) for o, u in zip(rev, us, strict=True) if o.requires_grad]
    lhs = 0.0
    for t, u, o in zip(ours, us, rev, strict=True):
        if o.requires_grad:
            assert t is not None, "a floating output without a tangent"
            assert tuple(t.shape) == tuple(o.shape)
            lhs += float((t.numpy() * u).sum())
    if pairs and case.gradcheck:  # (not where the backward stops a gradient by design)
        gs = ng.autograd.grad(
            [o for o, _ in pairs], leaves, [ng.tensor(u) for _, u in pairs], allow_unused=True
        )
        vs = [t for t in tangents if t is not None]
        rhs = sum(
            float((g.numpy() * v).sum()) for g, v in zip(gs, vs, strict=True) if g is not None
        )
        single = any(o.dtype == ng.float32 for o in rev)
        assert lhs == pytest.approx(rhs, rel=1e-5 if single else 1e-8, abs=1e-9)
    theirs = _torch_jvp(op, arrays, kwargs, tangents, case.call)
    if theirs is None:
        return  # (torch has no forward formula for it: reverse mode above is the check)
    for k, (t, r, isf) in enumerate(zip(ours, theirs, floating, strict=True)):
        if r is None or not isf:
            continue
        assert t is not None
        if not np.allclose(t.numpy(), r.numpy(), rtol=1e-9, atol=1e-10):
            # torch's forward formula is not always right (logcumsumexp over a wide range):
            # the directional derivative by central differences decides
            fd = _central_difference(op, arrays, kwargs, tangents, case.call, k)
            np.testing.assert_allclose(t.numpy(), fd, rtol=1e-5, atol=1e-6)
            assert not np.allclose(r.numpy(), fd, rtol=1e-5, atol=1e-6)


def _central_difference(op, arrays, kwargs, tangents, call, k, eps=1e-6):
    """(f(x + eps v) - f(x - eps v)) / 2 eps for output k."""
    values = []
    for sign in (1.0, -1.0):
        moved = [a + sign * eps * t if t is not None else a
                 for a, t in zip(arrays, tangents, strict=True)]  # fmt: skip
        kw = {k2: (ng.tensor(v) if isinstance(v, np.ndarray) else v) for k2, v in kwargs.items()}
        out = run_case(op, Case((), call=call), ng.tensor_apply, [_plain(a) for a in moved], kw)
        values.append(_outputs(out)[k].numpy())
    return (values[0] - values[1]) / (2 * eps)


def test_outside_a_level_there_is_no_tangent_and_no_dual():
    x = ng.tensor([1.0, 2.0])
    assert fw.unpack_dual(x).tangent is None
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        fw.make_dual(x, ng.ones(2))
    with pytest.raises(RuntimeError, match="Dual level must be a positive number."):
        fw.exit_dual_level()


def test_make_dual_aliases_the_primal_and_keeps_the_tangent_as_it_is():
    x = ng.tensor([1.0, 2.0])
    t = ng.tensor([0.5, -1.0])
    with fw.dual_level():
        d = fw.make_dual(x, t)
        primal, tangent = fw.unpack_dual(d)
        assert tangent is t
        assert isinstance(fw.unpack_dual(d), fw.UnpackedDualTensor)
        assert fw.unpack_dual(primal).tangent is None
        x.add_(1.0)  # shared memory and version counter, as torch's view
        assert d.tolist() == [2.0, 3.0] and d._version == x._version
        y = d * 3.0
    # leaving the level drops every tangent
    assert fw.unpack_dual(y).tangent is None
    assert fw.unpack_dual(d).tangent is None


def test_make_dual_errors_match_torch():
    for lib, mod in ((ng, fw), (torch, tfw)):
        with mod.dual_level():
            x = lib.tensor([1.0, 2.0], dtype=lib.float64)
            with pytest.raises(
                RuntimeError,
                match=r"different size .* of size \[2\] while the given forward gradient is of size \[3\]",
            ):  # noqa: E501
                mod.make_dual(x, lib.ones(3, dtype=lib.float64))
            with pytest.raises(
                ValueError,
                match="Expected tangent to be floating point or complex, but got: torch.int64",
            ):  # noqa: E501
                mod.make_dual(x, lib.tensor([1, 2]))
            with pytest.raises(
                ValueError,
                match="Expected primal to be floating point or complex, but got: torch.int64",
            ):  # noqa: E501
                mod.make_dual(lib.tensor([1, 2]), x)
            d = mod.make_dual(x, lib.ones(2, dtype=lib.float64))
            with pytest.raises(
                RuntimeError, match="already has a forward gradient at the same level 0"
            ):  # noqa: E501
                mod.make_dual(d, lib.ones(2, dtype=lib.float64))
            with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
                mod.enter_dual_level()
        with pytest.raises(RuntimeError, match="not the last one that was created"):
            mod.exit_dual_level(level=3)


def test_tangents_pass_no_grad_and_are_dropped_by_detach_like_torch():
    results = []
    for lib, mod in ((ng, fw), (torch, tfw)):
        with mod.dual_level():
            d = mod.make_dual(lib.tensor([1.0, 2.0], dtype=lib.float64),
                              lib.tensor([1.0, 0.5], dtype=lib.float64))  # fmt: skip
            with lib.no_grad():
                y = (d * d).sin()
            results.append(
                (mod.unpack_dual(y).tangent.tolist(), mod.unpack_dual((d * 2).detach()).tangent)
            )
    assert results[0][1] is None and results[1][1] is None
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)


def test_dual_level_is_a_decorator_too():
    @fw.dual_level()
    def jvp_of_exp(x, t):
        return fw.unpack_dual(fw.make_dual(x, t).exp()).tangent

    x = ng.tensor([0.0, 1.0])
    np.testing.assert_allclose(jvp_of_exp(x, ng.ones(2)).numpy(), np.exp([0.0, 1.0]))
    assert fw.unpack_dual(x).tangent is None


def test_a_tangent_can_be_differentiated_in_reverse_mode_like_torch():
    # reverse over forward: d/dx of the directional derivative of sum(sin(x) * x^2)
    out = []
    for lib, mod in ((ng, fw), (torch, tfw)):
        x = lib.tensor([0.3, -1.2, 2.0], dtype=lib.float64, requires_grad=True)
        v = lib.tensor([1.0, 0.5, -2.0], dtype=lib.float64)
        with mod.dual_level():
            y = (mod.make_dual(x, v).sin() * mod.make_dual(x, v) ** 2).sum()
            jvp = mod.unpack_dual(y).tangent
        (g,) = lib.autograd.grad(jvp, x)
        out.append((jvp.item(), g.detach().numpy()))
    assert out[0][0] == pytest.approx(out[1][0], rel=1e-12)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-11)


def test_in_place_ops_on_a_dual_update_its_tangent_like_torch():
    out = []
    for lib, mod in ((ng, fw), (torch, tfw)):
        with mod.dual_level():
            d = mod.make_dual(lib.tensor([1.0, 2.0], dtype=lib.float64),
                              lib.tensor([1.0, -1.0], dtype=lib.float64)) * 1.0  # fmt: skip
            e = mod.make_dual(lib.tensor([0.5, 3.0], dtype=lib.float64),
                              lib.tensor([2.0, 1.0], dtype=lib.float64))  # fmt: skip
            d.mul_(e)
            d.add_(3.0)
            d.exp_()
            out.append(mod.unpack_dual(d).tangent.tolist())
    np.testing.assert_allclose(out[0], out[1])


def _custom_square(lib, with_jvp):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_forward(x)
            ctx.k = k
            return x * x * k

        @staticmethod
        def backward(ctx, grad):
            return None, None

        if with_jvp:

            @staticmethod
            def jvp(ctx, x_t, k_t):
                assert k_t is None  # (not a tensor)
                (x,) = ctx.saved_tensors
                return 2.0 * x * x_t * ctx.k

    return Square


def test_a_custom_functions_jvp_gives_its_outputs_tangents_like_torch():
    out = []
    for lib, mod in ((ng, fw), (torch, tfw)):
        with mod.dual_level():
            x = mod.make_dual(lib.tensor([1.0, -2.0], dtype=lib.float64),
                              lib.tensor([0.5, 1.0], dtype=lib.float64))  # fmt: skip
            y = _custom_square(lib, True).apply(x, 3.0)
            out.append((y.tolist(), mod.unpack_dual(y).tangent.tolist()))
            with pytest.raises(NotImplementedError, match="must implement the jvp function"):
                _custom_square(lib, False).apply(x, 3.0)
    assert out[0] == out[1]


@pytest.mark.parametrize("several", [False, True])
def test_jacobian_in_forward_mode_matches_torch(several):
    def f(lib):
        if several:
            return lambda x, w: ((x * w).tanh(), (x.sin() * w.sum()).exp())
        return lambda x: (x.sin() * x.sum()).exp()

    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(3), rng.standard_normal(3)] if several else [rng.standard_normal(4)]
    ours = ng.autograd.functional.jacobian(
        f(ng), tuple(ng.tensor(a) for a in xs) if several else ng.tensor(xs[0]),
        vectorize=True, strategy="forward-mode",
    )  # fmt: skip
    theirs = torch.autograd.functional.jacobian(
        f(torch), tuple(torch.tensor(a) for a in xs) if several else torch.tensor(xs[0]),
        vectorize=True, strategy="forward-mode",
    )  # fmt: skip
    assert isinstance(ours, ng.Tensor) or type(ours) is type(theirs)
    for a, b in zip(_flat(ours), _flat(theirs), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)


def test_jacobian_in_forward_mode_errors_match_torch():
    for lib in (ng, torch):
        x = lib.ones(2, dtype=lib.float64)
        with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
            lib.autograd.functional.jacobian(lambda x: x * 2, x, strategy="forward-mode")
        with pytest.raises(RuntimeError, match='`strict=True` and `strategy="forward-mode"`'):
            lib.autograd.functional.jacobian(
                lambda x: x * 2, x, strict=True, strategy="forward-mode"
            )


def test_gradcheck_checks_forward_mode_jacobians():
    x = ng.tensor(np.linspace(0.2, 1.4, 5), requires_grad=True)
    w = ng.tensor(np.linspace(-1.0, 1.0, 5), requires_grad=True)
    f = lambda x, w: ((x * w).tanh() @ x.exp(), x.log().cumsum(0))  # noqa: E731
    assert ng.autograd.gradcheck(f, (x, w), check_forward_ad=True)

    class WrongJvp(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, grad):
            return grad * 2.0

        @staticmethod
        def jvp(ctx, x_t):
            return x_t * 3.0

    with pytest.raises(ng.autograd.GradcheckError, match="computed with forward mode mismatch"):
        ng.autograd.gradcheck(WrongJvp.apply, (x,), check_forward_ad=True)
    assert not ng.autograd.gradcheck(
        WrongJvp.apply, (x,), check_forward_ad=True, raise_exception=False
    )


def test_a_backward_without_create_graph_from_a_tensor_with_a_tangent_says_it_needs_one():
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    with fw.dual_level():
        y = (fw.make_dual(x, ng.ones(2)) ** 2).sum()
        with pytest.raises(NotImplementedError, match="create_graph=True only"):
            ng.autograd.grad(y, x)


def _scalar_function(lib, x):
    return (x.sin() * x**2).sum() + (x.exp() * x).prod() + (x.tanh() / (1.5 + x.cos())).sum()


def test_forward_over_reverse_gives_torchs_hessian_vector_product():
    out = []
    for lib, mod in ((ng, fw), (torch, tfw)):
        x = lib.tensor([0.3, -1.2, 2.0], dtype=lib.float64, requires_grad=True)
        v = lib.tensor([1.0, 0.5, -2.0], dtype=lib.float64)
        with mod.dual_level():
            d = mod.make_dual(x, v)
            (g,) = lib.autograd.grad(_scalar_function(lib, d), d, create_graph=True)
            out.append(mod.unpack_dual(g).tangent.detach().numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("several", [False, True])
def test_hessian_by_forward_over_reverse_matches_torch(several):
    def f(lib):
        if several:
            return lambda x, y: ((x * y).tanh() * x).sum() + (y.exp() * x).prod()
        return lambda x: _scalar_function(lib, x)

    values = (
        [np.array([0.5, -1.0]), np.array([1.5, 0.25])] if several else [np.array([0.3, -1.2, 2.0])]
    )  # noqa: E501
    results = []
    for lib in (ng, torch):
        inputs = tuple(lib.tensor(a) for a in values) if several else lib.tensor(values[0])
        results.append(lib.autograd.functional.hessian(
            f(lib), inputs, vectorize=True, outer_jacobian_strategy="forward-mode"
        ))  # fmt: skip
    for a, b in zip(_flat(results[0]), _flat(results[1]), strict=True):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-13)


def test_gradgradcheck_checks_forward_over_reverse():
    x = ng.tensor(np.linspace(0.2, 1.4, 4), requires_grad=True)
    w = ng.tensor(np.linspace(-1.0, 1.0, 4), requires_grad=True)
    f = lambda x, w: ((x * w).tanh() * x.exp()).sum() + (x * x * w).softmax(0)  # noqa: E731
    assert ng.autograd.gradgradcheck(f, (x, w), check_fwd_over_rev=True)


def test_a_deferred_result_from_before_the_level_meets_a_dual_with_its_tangent():
    x = ng.tensor([1.0, 2.0], dtype=ng.float64, requires_grad=True)
    y = x * 3.0  # (small float64: a deferred result, its batch still open)
    with fw.dual_level():
        d = fw.make_dual(ng.tensor([0.5, 1.0], dtype=ng.float64), ng.tensor([1.0, -1.0]))
        z = (y * d).exp()
        tangent = fw.unpack_dual(z).tangent
    np.testing.assert_allclose(tangent.detach().numpy(), np.exp([1.5, 6.0]) * [3.0, -6.0])
    w = x * 2.0  # (the deferred forward again after the level)
    w.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_embedding_padding_rows_carry_the_weights_tangent_as_torch():
    rng = np.random.default_rng(9)
    W, T = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    out = {}
    for lib, f in ((ng, fw), (torch, tfw)):
        with f.dual_level():
            w = f.make_dual(lib.tensor(W), lib.tensor(T))
            y = lib.nn.functional.embedding(lib.tensor([1, 0, 1, 4]), w, padding_idx=1)
            out[lib.__name__] = f.unpack_dual(y).tangent.detach().numpy()
    np.testing.assert_allclose(out["nautograd"], out["torch"])
    np.testing.assert_allclose(out["nautograd"][0], T[1])  # (a padding row)


def test_only_the_known_ops_take_their_tangents_from_the_double_vjp_fallback():
    # the fallback is exact but ~10x a declared rule: a new op should declare its rule
    from nautograd.kernels import OPS

    fallback = sorted(
        op.name
        for op in OPS
        if op.differentiable
        and op.jvp is None
        and getattr(op, "d", None) is None
        and not hasattr(op.formula, "partials")
    )
    assert fallback == [
        "_nll",
        "cumprod",
        "det",
        "logcumsumexp",
        "max",
        "min",
        "pad",
        "prod",
        "solve",
        "solve_triangular",
    ]
