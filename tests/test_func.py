"""ng.func against torch.func: the same functions, the same arguments, the same results
(values, gradients, Jacobians, structure) and torch's errors."""

import numpy as np
import pytest
import torch
import torch.func as tf

import nautograd as ng
from nautograd import func as nf

RNG = np.random.default_rng(0)


def pair(*shape, dtype=np.float64):
    a = RNG.standard_normal(shape).astype(dtype)
    return ng.tensor(a), torch.tensor(a)


def close(ours, ref, tol=1e-10):
    """Same pytree structure and values."""
    if isinstance(ref, torch.Tensor):
        assert isinstance(ours, ng.Tensor), type(ours)
        assert tuple(ours.shape) == tuple(ref.shape)
        assert str(ours.dtype) == str(ref.dtype).removeprefix("torch.")
        np.testing.assert_allclose(ours.detach().numpy(), ref.detach().numpy(), rtol=tol, atol=tol)
    elif isinstance(ref, dict):
        assert isinstance(ours, dict) and list(ours) == list(ref)
        for k in ref:
            close(ours[k], ref[k], tol)
    elif isinstance(ref, (tuple, list)):
        assert type(ours) is type(ref) and len(ours) == len(ref), (type(ours), ours)
        for a, b in zip(ours, ref, strict=True):
            close(a, b, tol)
    else:
        assert ours == ref


def both(build):
    """``build(lib)`` for nautograd and torch."""
    return build(ng), build(torch)


# functions written once for both libraries
def f_scalar(lib):
    return lambda x: (x.sin() * x).sum() + (x * x).exp().mean()


def f_two(lib):
    return lambda x, y: (x.tanh() * y).sum() + (x * y * y).sum()


def f_vector(lib):
    return lambda x: (x.sin() * x.exp()).reshape(-1)[:3] * 2.0


def f_multi_out(lib):
    return lambda x, y: (x * y, (x.exp() + y).sum(0))


# -- grad, grad_and_value ------------------------------------------------------------------


def test_grad_matches_torch_func_grad():
    x, xt = pair(5)
    close(nf.grad(f_scalar(ng))(x), tf.grad(f_scalar(torch))(xt))


@pytest.mark.parametrize("argnums", [0, 1, -1, (0, 1), (1, 0)])
def test_grad_argnums_as_torch(argnums):
    (x, xt), (y, yt) = pair(3), pair(3)
    close(nf.grad(f_two(ng), argnums)(x, y), tf.grad(f_two(torch), argnums)(xt, yt))


def test_grad_of_a_dict_of_parameters_keeps_the_dict():
    (w, wt), (b, bt), (x, xt) = pair(3, 2), pair(2), pair(4, 3)

    def loss(lib):
        return lambda p, x: ((x @ p["w"] + p["b"]).tanh() ** 2).sum()

    close(nf.grad(loss(ng))({"w": w, "b": b}, x), tf.grad(loss(torch))({"w": wt, "b": bt}, xt))


def test_grad_and_value_and_has_aux():
    x, xt = pair(4)

    def f(x):
        y = (x * x).sum()
        return y, {"y": y, "x2": x * 2}

    ours = nf.grad_and_value(f, has_aux=True)(x)
    ref = tf.grad_and_value(f, has_aux=True)(xt)
    close(ours, ref)
    close(nf.grad(f, has_aux=True)(x), tf.grad(f, has_aux=True)(xt))
    close(
        nf.grad_and_value(lambda x: (x**3).sum())(x), tf.grad_and_value(lambda x: (x**3).sum())(xt)
    )


def test_grad_of_a_function_independent_of_its_input_is_zeros():
    x, xt = pair(3)
    close(
        nf.grad(lambda x: ng.ones(()))(x),
        tf.grad(lambda x: torch.ones((), dtype=torch.float64))(xt),
    )
    close(nf.grad(lambda x, y: (y * 2).sum())(x, x), tf.grad(lambda x, y: (y * 2).sum())(xt, xt))


def test_grad_at_top_level_returns_plain_tensors():
    x, _ = pair(3)
    g = nf.grad(f_scalar(ng))(x)
    assert not g.requires_grad and g.grad_fn is None


def test_grad_of_an_input_that_requires_grad_is_differentiable_as_torch():
    # torch.func.grad's result takes part in the caller's autograd: d/dx sum(grad f) = H 1
    (x, xt) = pair(4)
    x.requires_grad_()
    xt.requires_grad_()
    g, gt = nf.grad(f_scalar(ng))(x), tf.grad(f_scalar(torch))(xt)
    assert g.requires_grad and gt.requires_grad
    g.pow(2).sum().backward()
    gt.pow(2).sum().backward()
    close(x.grad, xt.grad)


def test_grad_of_a_closure_over_a_tensor_that_requires_grad_flows_back_to_it():
    (x, xt), (w, wt) = pair(4), pair(4)
    w.requires_grad_()
    wt.requires_grad_()
    g = nf.grad(lambda x: (w * x.sin()).sum())(x)
    gt = tf.grad(lambda x: (wt * x.sin()).sum())(xt)
    (g * g).sum().backward()
    (gt * gt).sum().backward()
    close(w.grad, wt.grad)


def test_grad_under_no_grad_works_and_is_not_differentiable():
    x, xt = pair(3)
    x.requires_grad_()
    xt.requires_grad_()
    with ng.no_grad():
        g = nf.grad(f_scalar(ng))(x)
    with torch.no_grad():
        gt = tf.grad(f_scalar(torch))(xt)
    close(g, gt)
    assert g.requires_grad == gt.requires_grad


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda g: g(lambda x: x * 2)(ng.ones(3)),
            "Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims",
        ),
        (
            lambda g: g(lambda x: 3.0)(ng.ones(3)),
            "Expected f\\(\\*args\\) to return a Tensor, got <class 'float'>",
        ),
        (
            lambda g: g(lambda x: x.sum(), argnums=2)(ng.ones(3)),
            "Got argnum=2, but only 1 positional inputs",
        ),
        (lambda g: g(lambda x: x.sum(), argnums=())(ng.ones(3)), "argnums must be non-empty"),
        (
            lambda g: g(lambda x, y: x.sum(), argnums=(0, 0))(ng.ones(3), ng.ones(3)),
            "argnums elements must be unique",
        ),
        (lambda g: g(lambda x: x.sum(), argnums=[0])(ng.ones(3)), "argnums must be int or Tuple"),
        (
            lambda g: g(lambda x: x.sum(), has_aux=True)(ng.ones(3)),
            "output of function f should be a tuple: \\(output, aux\\)",
        ),
    ],
)
def test_grad_errors_as_torch(call, match):
    with pytest.raises(RuntimeError, match=match):
        call(nf.grad)


def test_grad_of_a_non_tensor_argument_raises_as_torch():
    with pytest.raises(
        ValueError, match="Thing passed to transform API must be Tensor, got <class 'float'>"
    ):
        nf.grad(lambda x: x)(1.0)


# -- vjp, jvp, linearize -------------------------------------------------------------------


def test_vjp_of_two_primals_and_two_outputs_as_torch():
    (x, xt), (y, yt) = pair(2, 3), pair(2, 3)
    out, fn = nf.vjp(f_multi_out(ng), x, y)
    out_t, fn_t = tf.vjp(f_multi_out(torch), xt, yt)
    close(out, out_t)
    (u, ut), (v, vt) = pair(2, 3), pair(3)
    close(fn((u, v)), fn_t((ut, vt)))
    close(fn((u, v)), fn_t((ut, vt)))  # (callable again)
    assert not out[0].requires_grad


def test_vjp_has_aux_and_its_errors():
    x, xt = pair(3)
    out, fn, aux = nf.vjp(lambda x: (x.exp(), x * 3), x, has_aux=True)
    out_t, fn_t, aux_t = tf.vjp(lambda x: (x.exp(), x * 3), xt, has_aux=True)
    close((out, aux), (out_t, aux_t))
    u, ut = pair(3)
    close(fn(u), fn_t(ut))
    with pytest.raises(
        RuntimeError, match="Expected pytree structure of cotangents to be the same"
    ):
        fn((u, u))
    with pytest.raises(RuntimeError, match="All outputs of f must be floating-point"):
        nf.vjp(lambda x: x > 0, x)


def test_jvp_matches_torch_func_jvp():
    (x, xt), (y, yt), (u, ut), (v, vt) = pair(3), pair(3), pair(3), pair(3)
    close(nf.jvp(f_two(ng), (x, y), (u, v)), tf.jvp(f_two(torch), (xt, yt), (ut, vt)))
    close(nf.jvp(f_multi_out(ng), (x, y), (u, v)), tf.jvp(f_multi_out(torch), (xt, yt), (ut, vt)))
    f = lambda x: (x.sin(), {"a": x * 2})  # noqa: E731
    close(nf.jvp(f, (x,), (u,), has_aux=True), tf.jvp(f, (xt,), (ut,), has_aux=True))


def test_jvp_errors_as_torch():
    x, u = ng.ones(3, dtype=ng.float64), ng.ones(3, dtype=ng.float64)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        nf.jvp(lambda x: x, x, (u,))
    with pytest.raises(
        RuntimeError, match="Expected primals and tangents to have the same python structure"
    ):
        nf.jvp(lambda x: x, (x,), (u, u))
    with pytest.raises(RuntimeError, match="tangent:0 with shape torch.Size\\(\\[2\\]\\)"):
        nf.jvp(lambda x: x, (x,), (ng.ones(2, dtype=ng.float64),))
    with pytest.raises(RuntimeError, match="The output of f is independent of the inputs"):
        nf.jvp(lambda x: ng.ones(3), (x,), (u,), strict=True)
    close(
        nf.jvp(lambda x: ng.ones(3, dtype=ng.float64), (x,), (u,))[1],
        torch.zeros(3, dtype=torch.float64),
    )


def test_jvp_inside_an_open_forward_level_uses_reverse_mode():
    (x, xt), (u, ut) = pair(4), pair(4)
    with ng.autograd.forward_ad.dual_level():
        out = nf.jvp(lambda x: x.exp() * x, (x,), (u,))
    close(out, tf.jvp(lambda x: x.exp() * x, (xt,), (ut,)))


def test_linearize_as_torch_without_a_new_forward():
    (x, xt), (u, ut) = pair(2, 2), pair(2, 2)
    calls = []

    def f(lib):
        def g(x):
            calls.append(1)
            return (x.exp() * x.sin()).sum(0)

        return g

    out, fn = nf.linearize(f(ng), x)
    n = len(calls)
    out_t, fn_t = tf.linearize(f(torch), xt)
    close(out, out_t)
    close(fn(u), fn_t(ut))
    close(fn(u * 2), fn_t(ut * 2))
    assert n == 1
    with pytest.raises(RuntimeError, match="tangent:0 with shape"):
        fn(ng.ones(3, dtype=ng.float64))
    for f, m in ((fn, ng), (fn_t, torch)):  # (torch's linearize checks the dtype too)
        with pytest.raises(RuntimeError, match="tangent:0 with dtype torch.float32 in flattened"):
            f(m.ones(2, 2, dtype=m.float32))


# -- Jacobians and Hessians ----------------------------------------------------------------


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
def test_jacobian_of_a_vector_function_as_torch(transform):
    x, xt = pair(2, 3)
    close(getattr(nf, transform)(f_vector(ng))(x), getattr(tf, transform)(f_vector(torch))(xt))


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_jacobian_structure_of_outputs_and_argnums_as_torch(transform, argnums):
    (x, xt), (y, yt) = pair(2, 3), pair(2, 3)
    ours = getattr(nf, transform)(f_multi_out(ng), argnums)(x, y)
    ref = getattr(tf, transform)(f_multi_out(torch), argnums)(xt, yt)
    close(ours, ref)


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
def test_jacobian_of_a_dict_input_with_aux_as_torch(transform):
    (w, wt), (b, bt) = pair(3, 2), pair(2)

    def f(p):
        y = (p["w"].sum(0) * p["b"]).tanh()
        return y, y.sum()

    close(getattr(nf, transform)(f, has_aux=True)({"w": w, "b": b}),
          getattr(tf, transform)(f, has_aux=True)({"w": wt, "b": bt}))  # fmt: skip


@pytest.mark.parametrize(
    "compose",
    [
        lambda m: m.hessian,
        lambda m: lambda f: m.jacrev(m.jacrev(f)),
        lambda m: lambda f: m.jacfwd(m.jacrev(f)),
        lambda m: lambda f: m.jacrev(m.jacfwd(f)),
        lambda m: lambda f: m.jacfwd(m.jacfwd(f)),
    ],
    ids=["hessian", "jacrev-jacrev", "jacfwd-jacrev", "jacrev-jacfwd", "jacfwd-jacfwd"],
)
def test_second_derivatives_by_every_composition_as_torch(compose):
    x, xt = pair(4)
    close(compose(nf)(f_scalar(ng))(x), tf.hessian(f_scalar(torch))(xt), tol=1e-9)


def test_hessian_of_two_arguments_as_torch():
    (x, xt), (y, yt) = pair(3), pair(3)
    close(nf.hessian(f_two(ng), (0, 1))(x, y), tf.hessian(f_two(torch), (0, 1))(xt, yt))


def test_jacrev_of_a_grad_as_torch():
    x, xt = pair(3)
    close(nf.jacrev(nf.grad(f_scalar(ng)))(x), tf.jacrev(tf.grad(f_scalar(torch)))(xt))


def test_jacrev_chunk_size_must_be_positive():
    with pytest.raises(ValueError, match="jacrev: `chunk_size` should be greater than 0."):
        nf.jacrev(lambda x: x, chunk_size=0)


# -- vmap ----------------------------------------------------------------------------------


def test_vmap_of_grad_gives_torchs_per_sample_gradients():
    (w, wt), (X, Xt), (y, yt) = pair(6), pair(20, 6), pair(20)

    def loss(lib):
        F = lib.nn.functional

        def f(w, x, y):
            z = x @ w
            return F.softplus(z) - y * z

        return f

    close(nf.vmap(nf.grad(loss(ng)), in_dims=(None, 0, 0))(w, X, y),
          tf.vmap(tf.grad(loss(torch)), in_dims=(None, 0, 0))(wt, Xt, yt))  # fmt: skip


@pytest.mark.parametrize("in_dims", [0, 1, -1, (1, None), (0, (None, 1))])
def test_vmap_in_dims_as_torch(in_dims):
    (x, xt), (y, yt) = pair(3, 3), pair(3, 3)
    if isinstance(in_dims, tuple) and isinstance(in_dims[1], tuple):

        def f(x, pair_):
            return x * pair_[0] + pair_[1].sum()

        close(
            nf.vmap(f, in_dims=in_dims)(x, (y, y * 2)),
            tf.vmap(f, in_dims=in_dims)(xt, (yt, yt * 2)),
        )
    else:
        f = lambda x, y: x.exp() * y  # noqa: E731
        close(nf.vmap(f, in_dims=in_dims)(x, y), tf.vmap(f, in_dims=in_dims)(xt, yt))


@pytest.mark.parametrize("out_dims", [0, -1, (1, 0), (1, None)])
def test_vmap_out_dims_and_several_outputs_as_torch(out_dims):
    (x, xt), (c, ct) = pair(4, 3), pair(2)

    def f(c):
        return lambda x: (x * 2, c) if out_dims == (1, None) else (x * 2, x.sum())

    close(nf.vmap(f(c), out_dims=out_dims)(x), tf.vmap(f(ct), out_dims=out_dims)(xt))


@pytest.mark.parametrize("out_dims", [1, (0, 1)])
def test_vmap_out_dim_out_of_range_raises_as_torch(out_dims):
    (x, xt) = pair(4, 3)
    match = "Dimension out of range \\(expected to be in range of \\[-1, 0\\], but got 1\\)"
    with pytest.raises(IndexError, match=match):
        nf.vmap(lambda x: (x * 2, x.sum()), out_dims=out_dims)(x)
    with pytest.raises(IndexError, match=match):
        tf.vmap(lambda x: (x * 2, x.sum()), out_dims=out_dims)(xt)


def test_vmap_of_vmap_and_of_jacrev_as_torch():
    x, xt = pair(3, 4, 2)
    f = lambda v: (v * v.sin()).sum()  # noqa: E731
    close(nf.vmap(nf.vmap(f))(x), tf.vmap(tf.vmap(f))(xt))
    g = lambda v: v.exp() * v.sum()  # noqa: E731
    close(nf.vmap(nf.jacrev(g))(x[0]), tf.vmap(tf.jacrev(g))(xt[0]))


def test_vmap_result_is_differentiable_as_torch():
    (x, xt) = pair(5, 3)
    x.requires_grad_()
    xt.requires_grad_()
    nf.vmap(lambda v: (v.sin() * v).sum())(x).sum().backward()
    tf.vmap(lambda v: (v.sin() * v).sum())(xt).sum().backward()
    close(x.grad, xt.grad)


def _ones(lib, n):
    return lib.ones(n, dtype=lib.float64)


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda v, o: v(lambda x: x, in_dims=[0])(o(3)),
            "expected `in_dims` to be int or a \\(potentially nested\\) tuple",
        ),
        (lambda v, o: v(lambda x: x)(), "got no inputs"),
        (
            lambda v, o: v(lambda x, y: x, in_dims=(0,))(o(3), o(3)),
            "in_dims is not compatible with the structure of `inputs`",
        ),
        (
            lambda v, o: v(lambda x: x, in_dims=2)(o(3)),
            "Got in_dim=2 for some input, but that input is a Tensor of dimensionality 1",
        ),
        (
            lambda v, o: v(lambda x, y: x, in_dims=(0, 0))(o(3), 2.0),
            "We cannot vmap over non-Tensor arguments",
        ),
        (
            lambda v, o: v(lambda x, y: x + y)(o(3), o(4)),
            "Expected all tensors to have the same size in the mapped dimension, got sizes \\[3, 4\\]",
        ),
        (
            lambda v, o: v(lambda x: x, in_dims=(None,))(o(3)),
            "Expected at least one Tensor to vmap over",
        ),
        (lambda v, o: v(lambda x: 1.0)(o(3)), "must only return Tensors, got type <class 'float'>"),
        (
            lambda v, o: v(lambda x: (x, x), out_dims=(0, 0, 0))(o(3)),
            "out_dims is not compatible with the structure of `outputs`",
        ),
        (
            lambda v, o: v(lambda x: x, chunk_size=0)(o(3)),
            "chunk_size should be None or greater than 0",
        ),
    ],
)
def test_vmap_errors_as_torch(call, match):
    with pytest.raises(ValueError, match=match):
        call(nf.vmap, lambda n: _ones(ng, n))
    with pytest.raises(ValueError, match=match):
        call(tf.vmap, lambda n: _ones(torch, n))


def test_vmap_randomness_error_same_and_different():
    x = ng.ones(4, 3)
    with pytest.raises(
        RuntimeError, match="vmap: called random operation while in randomness error mode"
    ):
        nf.vmap(lambda v: v * ng.rand(3))(x)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness are"):
        nf.vmap(lambda v: v, randomness="maybe")
    same = nf.vmap(lambda v: v * ng.rand(3), randomness="same")(x)
    assert np.all(same.numpy() == same.numpy()[0])
    different = nf.vmap(lambda v: v * ng.rand(3), randomness="different")(x)
    assert len({tuple(r) for r in different.numpy().tolist()}) == 4
    ng.rand(2)  # (random ops work again after it)


# -- functional_call, stack_module_state ---------------------------------------------------


def _models(seed=0):
    torch.manual_seed(seed)
    t = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()
    n = ng.nn.Sequential(ng.nn.Linear(4, 8), ng.nn.Tanh(), ng.nn.Linear(8, 3)).double()
    with torch.no_grad(), ng.no_grad():
        for (_, p), (_, q) in zip(n.named_parameters(), t.named_parameters(), strict=True):
            p.copy_(ng.tensor(q.detach().numpy()))
    return n, t


def test_functional_call_replaces_parameters_for_the_call_only():
    n, t = _models()
    (w, wt), (x, xt) = pair(3, 8), pair(5, 4)
    close(
        nf.functional_call(n, {"2.weight": w}, (x,)), tf.functional_call(t, {"2.weight": wt}, (xt,))
    )
    close(nf.functional_call(n, ({"2.weight": w}, {"2.bias": w[:, 0]}), x),
          tf.functional_call(t, ({"2.weight": wt}, {"2.bias": wt[:, 0]}), xt))  # fmt: skip
    close(n(x), t(xt))  # (the module's own parameters are back)
    assert isinstance(n[2].weight, ng.nn.Parameter)


def test_functional_call_strict_and_tied_weights_as_torch():
    n, t = _models()
    x, xt = pair(5, 4)
    for lib, m, inp in ((nf, n, x), (tf, t, xt)):
        with pytest.raises(
            RuntimeError, match="Missing key\\(s\\): '0.bias', '2.bias', '2.weight'."
        ):
            lib.functional_call(m, {"0.weight": m[0].weight}, (inp,), strict=True)
    n[2].extra = n[2].weight  # (not a member: an attribute)
    tied = ng.nn.Linear(3, 3).double()
    tied.register_parameter("other", tied.weight)
    w = ng.zeros(3, 3, dtype=ng.float64)
    assert nf.functional_call(
        tied, {"weight": w}, ng.ones(1, 3, dtype=ng.float64)
    ).sum().item() == pytest.approx(tied.bias.sum().item())
    with pytest.raises(
        ValueError, match="functional_call got multiple values for keys \\['other', 'weight'\\]"
    ):
        nf.functional_call(tied, {"weight": w, "other": w + 1}, ng.ones(1, 3, dtype=ng.float64))


def test_per_sample_gradients_of_a_model_as_torchs_tutorial(caplog):
    n, t = _models()
    (X, Xt) = pair(6, 4)
    y = RNG.integers(0, 3, 6)
    yn, yt = ng.tensor(y), torch.tensor(y)

    def compute(lib, model):
        def loss(params, sample, target):
            out = lib.func.functional_call(model, params, (sample.unsqueeze(0),))
            return lib.nn.functional.cross_entropy(out, target.unsqueeze(0))

        return loss

    pn = {k: v.detach() for k, v in n.named_parameters()}
    pt = {k: v.detach() for k, v in t.named_parameters()}
    with caplog.at_level("DEBUG", logger="nautograd"):
        ours = nf.vmap(nf.grad(compute(ng, n)), in_dims=(None, 0, 0))(pn, X, yn)
    assert "no batching rule" not in caplog.text
    ref = tf.vmap(tf.grad(compute(torch, t)), in_dims=(None, 0, 0))(pt, Xt, yt)
    close(ours, ref)


def test_stack_module_state_and_an_ensemble_by_vmap_as_torch(caplog):
    models = [_models(seed) for seed in range(3)]
    x, xt = pair(5, 4)
    pn, bn = nf.stack_module_state([m for m, _ in models])
    pt, bt = tf.stack_module_state([m for _, m in models])
    close(pn, {k: v.detach() for k, v in pt.items()})
    assert all(p.requires_grad for p in pn.values())
    base_n, base_t = models[0]

    def run(lib, base, x):
        return lambda p, b: lib.func.functional_call(base, (p, b), (x,))

    with caplog.at_level("DEBUG", logger="nautograd"):
        ours = nf.vmap(run(ng, base_n, x))(pn, bn)
    assert "no batching rule" not in caplog.text
    close(ours, tf.vmap(run(torch, base_t, xt))(pt, bt))
    with pytest.raises(RuntimeError, match="Expected at least one model, got 0."):
        nf.stack_module_state([])


# -- vmap's batching rules: each function runs batched (no per-sample fallback) ---------------

C = RNG.standard_normal((4,))
W = RNG.standard_normal((4, 5))
IDX = np.array([2, 0, 1])


def _consts(m):
    return m.tensor(C), m.tensor(W), m.tensor(IDX)


BATCHED_CASES = {
    "elementwise": lambda m, F, c, w, i: lambda x: x.sin() * x.exp() + 2 - x / 3 + (-x).abs() ** 2,
    "where": lambda m, F, c, w, i: lambda x: m.where(x > 0, x, 0.5 * x),
    "broadcast to a higher rank": lambda m, F, c, w, i: lambda x: x[0] * m.stack([c, c * 2]),
    "activations": lambda m, F, c, w, i: lambda x: F.softplus(x) + F.gelu(x) + F.elu(x) + m.sigmoid(x) + F.leaky_relu(x, 0.2),
    "clamp and maximum": lambda m, F, c, w, i: lambda x: x.clamp(min=-0.5, max=0.5) + m.maximum(x, c) + x.clamp(min=c),
    "pow and square": lambda m, F, c, w, i: lambda x: m.pow(x, 2) + x.square() + 2.0**x,
    "sum": lambda m, F, c, w, i: lambda x: (x.sum(), x.sum(0), x.sum((0, 1)), x.mean(-1, keepdim=True)),
    "var std amax prod": lambda m, F, c, w, i: lambda x: (x.var(0), x.std(), x.amax(1), x.prod(), x.prod(1), x.amin()),
    "logsumexp norm argmax": lambda m, F, c, w, i: lambda x: (x.logsumexp(1), x.norm(), x.argmax(), x.argmax(1)),
    "max and min": lambda m, F, c, w, i: lambda x: (x.max(), x.max(1)[0], x.max(1)[1], x.min(0).values, m.max(x, c)),
    "softmax cumsum": lambda m, F, c, w, i: lambda x: (F.softmax(x, -1), F.log_softmax(x, 0), x.cumsum(1)),
    "reshape view permute": lambda m, F, c, w, i: lambda x: (x.reshape(-1), x.view(2, -1), x.permute(1, 0), x.t(), x.T),
    "transpose unsqueeze squeeze": lambda m, F, c, w, i: lambda x: (x.transpose(0, 1), x.unsqueeze(0), x.unsqueeze(-1).squeeze(), x[:1].squeeze(0)),
    "flatten flip narrow movedim": lambda m, F, c, w, i: lambda x: (x.flatten(), x.flip(0), x.narrow(1, 1, 2), x.movedim(0, 1), x.diagonal(), x.tril()),
    "indexing": lambda m, F, c, w, i: lambda x: (x[0], x[:, 1], x[..., None], x[1:, ::2], x[i], x[:, i], x[-1, -2]),
    "unbind split chunk": lambda m, F, c, w, i: lambda x: (*x.unbind(0), *x.split(1, 0), *x.chunk(2, 1)),
    "cat and stack": lambda m, F, c, w, i: lambda x: (m.cat([x, x * 2], 0), m.cat([x, c[None].expand(3, 4)], 0), m.stack([x, x * 2], 1)),
    "expand": lambda m, F, c, w, i: lambda x: (x[:1].expand(2, 3, 4), x.unsqueeze(0).expand(2, -1, -1)),
    "gather index_select": lambda m, F, c, w, i: lambda x: (x.index_select(0, i), m.gather(x, 1, i.reshape(3, 1))),
    "matmul with a matrix": lambda m, F, c, w, i: lambda x: (x @ w, x[0] @ w, w.t() @ x[0], x @ x.t(), x[0] @ x[1]),
    "mm mv dot outer": lambda m, F, c, w, i: lambda x: (m.mm(x, w), m.mv(w.t(), x[0]), m.dot(x[0], c), m.outer(x[0], c)),
    "linear and layer_norm": lambda m, F, c, w, i: lambda x: (F.linear(x, w.t(), c[:1].expand(5)), F.layer_norm(x, (4,))),
    "losses": lambda m, F, c, w, i: lambda x: (F.mse_loss(x, x.sin()), F.l1_loss(x, x * 0, reduction="sum"), F.smooth_l1_loss(x, x.cos(), reduction="none"), F.binary_cross_entropy_with_logits(x, x.sigmoid())),
    "cross_entropy": lambda m, F, c, w, i: lambda x: (F.cross_entropy(x, i), F.cross_entropy(x[0], i[0]), F.nll_loss(F.log_softmax(x, 1), i, reduction="sum")),
    "count_nonzero all any": lambda m, F, c, w, i: lambda x: (m.count_nonzero(x > 0), (x > -3).all(), (x > 0.9).any(1)),
    "vector_norm var std": lambda m, F, c, w, i: lambda x: (m.linalg.vector_norm(x, dim=1), x.var(0, unbiased=False), x.std(correction=0)),
    "0-d samples": lambda m, F, c, w, i: lambda x: (m.softmax(x.sum(), 0), x.sum().sum(0, keepdim=True), x.mean().exp().sum()),
    "default dims": lambda m, F, c, w, i: lambda x: (x.unbind()[1], x.diagonal(1), x.split([1, 2])[1], x.select(1, 2), x.flatten(1)),
    "matmul of stacks": lambda m, F, c, w, i: lambda x: (x[0] @ m.stack([x, x]).transpose(1, 2), m.stack([w.t(), w.t()]) @ x.t(), x.expand(2, 3, 4) @ x.t().unsqueeze(0)),
    "reflected operators": lambda m, F, c, w, i: lambda x: (1 - x, 1 / (x.abs() + 1), 2 * x, c @ x.t()),
    "masks and conversions": lambda m, F, c, w, i: lambda x: (x.masked_fill(x > 0.5, 0.0), (x * 3).long().double(), x.to(m.float32) * 2, x[:1].expand_as(x), F.pad(x, (1, 2))),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BATCHED_CASES))
def test_vmap_runs_each_op_batched_as_torch(case, caplog):
    x, xt = pair(5, 3, 4)
    f_ng = BATCHED_CASES[case](ng, ng.nn.functional, *_consts(ng))
    f_t = BATCHED_CASES[case](torch, torch.nn.functional, *_consts(torch))
    with caplog.at_level("DEBUG", logger="nautograd"):
        ours = nf.vmap(f_ng)(x)
    assert not [r for r in caplog.records if "no batching rule" in r.getMessage()], caplog.text
    close(ours, tf.vmap(f_t)(xt))


@pytest.mark.parametrize(
    "case", ["elementwise", "sum", "matmul with a matrix", "cross_entropy", "indexing"]
)
def test_vmap_of_grad_through_each_rule_as_torch(case, caplog):
    x, xt = pair(5, 3, 4)

    def scalar(f):
        def g(x):
            out = f(x)
            outs = out if isinstance(out, tuple) else (out,)
            return sum((o * o).sum() for o in outs if o.is_floating_point())

        return g

    f_ng = scalar(BATCHED_CASES[case](ng, ng.nn.functional, *_consts(ng)))
    f_t = scalar(BATCHED_CASES[case](torch, torch.nn.functional, *_consts(torch)))
    with caplog.at_level("DEBUG", logger="nautograd"):
        ours = nf.vmap(nf.grad(f_ng))(x)
    assert "no batching rule" not in caplog.text
    close(ours, tf.vmap(tf.grad(f_t))(xt))


def test_vmap_of_an_op_without_a_batching_rule_runs_per_sample(caplog):
    x, xt = pair(4, 3, 3)
    with caplog.at_level("DEBUG", logger="nautograd"):
        ours = nf.vmap(lambda a: ng.linalg.inv(a) * a.sum())(x)
    assert "no batching rule" in caplog.text
    close(ours, tf.vmap(lambda a: torch.linalg.inv(a) * a.sum())(xt))


def test_vmap_in_dims_and_chunks_run_batched_as_torch(caplog):
    (x, xt), (y, yt) = pair(3, 5, 2), pair(2, 5)
    f = lambda a, b: ((a * b.sum()).exp(), a @ b)  # noqa: E731
    for kw in ({}, {"chunk_size": 2}, {"chunk_size": 5}):
        with caplog.at_level("DEBUG", logger="nautograd"):
            ours = nf.vmap(f, in_dims=(1, 1), out_dims=(1, 0), **kw)(x, y)
        assert "no batching rule" not in caplog.text
        close(ours, tf.vmap(f, in_dims=(1, 1), out_dims=(1, 0), **kw)(xt, yt))


def test_vmap_returning_a_value_that_is_not_batched_expands_it_as_torch():
    (x, xt), (c, ct) = pair(4, 3), pair(3)
    close(nf.vmap(lambda a: (a, c * 2))(x), tf.vmap(lambda a: (a, ct * 2))(xt))
    close(
        nf.vmap(lambda a: (a, c), out_dims=(0, None))(x),
        tf.vmap(lambda a: (a, ct), out_dims=(0, None))(xt),
    )
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        nf.vmap(lambda a: a, out_dims=None)(x)


def test_vmap_reading_a_value_raises_as_torch():
    x, xt = pair(4, 3)
    for lib, v in ((nf, x), (tf, xt)):
        with pytest.raises(RuntimeError, match="We don't support vmap over calling .item\\(\\)"):
            lib.vmap(lambda a: a.sum().item())(v)
        with pytest.raises(RuntimeError, match="data-dependent control flow"):
            lib.vmap(lambda a: a if a.sum() > 0 else -a)(v)


def test_vmap_of_a_function_calling_autograd_itself_runs_per_sample_as_torch(caplog):
    x, xt = pair(4, 3)

    def f(lib):
        def g(v):
            v = v.detach().requires_grad_()
            (gv,) = lib.autograd.grad((v.sin() * v).sum(), v)
            return gv

        return g

    with caplog.at_level("DEBUG", logger="nautograd"):
        ours = nf.vmap(f(ng))(x)
    assert "autograd.grad / backward of a batched value" in caplog.text
    close(ours, torch.stack([f(torch)(r) for r in xt]))


def test_jacrev_differentiates_every_basis_cotangent_in_one_batched_backward(caplog):
    (x, xt), (a, at) = pair(16), pair(16, 16)

    def f(m, a):
        return lambda v: (m.tanh(a @ v) * v, (v * v).sum())

    with caplog.at_level("DEBUG", logger="nautograd"):
        ours = nf.jacrev(f(ng, a))(x)
    assert "one backward per cotangent" not in caplog.text
    close(ours, tf.jacrev(f(torch, at))(xt))
    x.requires_grad_()
    xt.requires_grad_()
    nf.jacrev(f(ng, a))(x)[0].sum().backward()  # (differentiable for an outer graph)
    tf.jacrev(f(torch, at))(xt)[0].sum().backward()
    close(x.grad, xt.grad)


JACFWD_CASES = {
    "tanh layer": lambda m, a: lambda x: m.tanh(a @ x) * x,
    "linear": lambda m, a: lambda x: m.nn.functional.linear(x, a, a[0]).tanh(),
    "softmax and indexing": lambda m, a: lambda x: (
        m.softmax(x.reshape(4, 4), 1).reshape(-1)[2:9] * x[:7].sum() + x[[1, 3, 5, 7, 9, 11, 13]]
    ),
    "reductions": lambda m, a: lambda x: m.stack([x.logsumexp(0), x.norm(), x.var(), (x * a[0]).max()]),
    "forward over reverse": lambda m, a: m.func.jacrev(lambda x: (m.exp(x * x.sum() * 0.1).sum()).log()),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(JACFWD_CASES))
def test_jacfwd_pushes_every_basis_tangent_in_one_batched_pass_as_torch(case, caplog):
    (x, xt), (a, at) = pair(16), pair(16, 16)
    with caplog.at_level("DEBUG", logger="nautograd"):
        ours = nf.jacfwd(JACFWD_CASES[case](ng, a))(x)
    assert "one forward pass per input element" not in caplog.text
    close(ours, tf.jacfwd(JACFWD_CASES[case](torch, at))(xt), tol=1e-9)


def test_jacfwd_through_an_op_without_a_batching_rule_as_torch():
    x, xt = pair(3, 3)
    f = lambda m: lambda a: m.linalg.det(a @ a.t() + m.eye(3, dtype=a.dtype))  # noqa: E731
    close(nf.jacfwd(f(ng))(x), tf.jacfwd(f(torch))(xt), tol=1e-9)


def test_vmap_over_an_empty_batch_as_torch():
    x, xt = pair(0, 3)
    for f in (lambda v: v * 2, lambda v: (v.sum(), v @ v)):
        close(nf.vmap(f)(x), tf.vmap(f)(xt))


_R = np.random.default_rng(3)
SPATIAL = {
    "X": _R.standard_normal((4, 2, 6, 6)),
    "W": _R.standard_normal((3, 2, 3, 3)),
    "W1": _R.standard_normal((3, 6, 3)),
    "bias": _R.standard_normal(3),
    "E": _R.standard_normal((10, 3)),
    "I": _R.integers(0, 10, (4, 5)),
    "A": _R.standard_normal((4, 3, 5)),
    "B": _R.standard_normal((5, 2)),
    "rm": _R.standard_normal(2),
    "rv": _R.random(2) + 0.5,
}
MODEL_CASES = {
    "conv2d": (lambda m, F, k: lambda x: F.conv2d(x, k["W"], k["bias"], padding=1), "X"),
    "conv2d of a sample batch": (lambda m, F, k: lambda x: F.conv2d(x.unsqueeze(0).expand(2, -1, -1, -1), k["W"], stride=2), "X"),
    "conv1d": (lambda m, F, k: lambda x: F.conv1d(x[0], k["W1"], padding=1), "X"),
    "pools": (lambda m, F, k: lambda x: (F.max_pool2d(x, 2), F.avg_pool2d(x, 3, stride=1)), "X"),
    "embedding": (lambda m, F, k: lambda i: F.embedding(i, k["E"], padding_idx=2), "I"),
    "batch_norm in eval mode": (lambda m, F, k: lambda x: F.batch_norm(x.unsqueeze(0), k["rm"], k["rv"]), "X"),
    "einsum": (lambda m, F, k: lambda a: m.einsum("ij,jk->ik", a, k["B"]) + m.einsum("ij,ij->i", a, a)[:, None], "A"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(MODEL_CASES))
def test_vmap_runs_model_ops_batched_as_torch(case, caplog):
    build, data = MODEL_CASES[case]
    f_ng = build(ng, ng.nn.functional, {k: ng.tensor(v) for k, v in SPATIAL.items()})
    f_t = build(torch, torch.nn.functional, {k: torch.tensor(v) for k, v in SPATIAL.items()})
    with caplog.at_level("DEBUG", logger="nautograd"):
        ours = nf.vmap(f_ng)(ng.tensor(SPATIAL[data]))
    assert "no batching rule" not in caplog.text
    close(ours, tf.vmap(f_t)(torch.tensor(SPATIAL[data])))


def test_vmap_dropout_draws_as_its_randomness_says_without_running_per_sample(caplog):
    x = ng.ones(6, 2000, dtype=ng.float64)
    F = ng.nn.functional
    with caplog.at_level("DEBUG", logger="nautograd"):
        different = nf.vmap(lambda v: F.dropout(v, 0.3), randomness="different")(x).numpy()
        same = nf.vmap(lambda v: F.dropout(v, 0.3), randomness="same")(x).numpy()
        off = nf.vmap(lambda v: F.dropout(v, 0.3, training=False))(x)
    assert "no batching rule" not in caplog.text
    assert len({r.tobytes() for r in different}) == 6
    assert len({r.tobytes() for r in same}) == 1
    for d in (different, same):
        assert set(np.unique(d)) <= {0.0, 1 / 0.7}
        assert abs((d > 0).mean() - 0.7) < 0.05
    close(off, torch.ones(6, 2000, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="randomness error mode"):
        nf.vmap(lambda v: F.dropout(v, 0.3))(x)
    w = ng.tensor(np.linspace(1, 2, 2000))
    g = nf.vmap(
        nf.grad(lambda w, v: F.dropout(v * w, 0.5).sum()), (None, 0), randomness="different"
    )(w, x)
    assert set(np.unique(g.numpy())) <= {0.0, 2.0} and len({r.tobytes() for r in g.numpy()}) == 6


def test_vmap_indexing_with_a_batched_index_runs_batched_as_torch(caplog):
    rng = np.random.default_rng(5)
    X, idx, E = (
        rng.standard_normal((5, 6, 3)),
        rng.integers(0, 6, (5, 2)),
        rng.standard_normal((6, 3)),
    )
    L, t = rng.standard_normal((5, 4)), rng.integers(0, 4, 5)
    with caplog.at_level("DEBUG", logger="nautograd"):
        ours = (
            nf.vmap(lambda x, i: x[i])(ng.tensor(X), ng.tensor(idx)),
            nf.vmap(lambda x, i: x[i, :])(ng.tensor(X), ng.tensor(idx)),
            nf.vmap(lambda i: ng.tensor(E)[i])(ng.tensor(idx)),
            nf.vmap(nf.grad(lambda l, k: l[k].exp()))(ng.tensor(L), ng.tensor(t)),
        )
    assert "no batching rule" not in caplog.text
    ref = (
        tf.vmap(lambda x, i: x[i])(torch.tensor(X), torch.tensor(idx)),
        tf.vmap(lambda x, i: x[i, :])(torch.tensor(X), torch.tensor(idx)),
        tf.vmap(lambda i: torch.tensor(E)[i])(torch.tensor(idx)),
        # (torch's vmap reads a 0-d index's value here and raises: one grad per sample)
        torch.stack([torch.func.grad(lambda l, k: l[k].exp())(a, k) for a, k in zip(torch.tensor(L), torch.tensor(t), strict=True)]),
    )  # fmt: skip
    close(ours, ref)


def test_a_vmap_inside_another_pairs_their_batches_as_torch():
    # the inner function uses the outer sample: an outer product over the two batches (the
    # two batches once had their dims paired, a wrong answer of the right shape)
    (x, xt), (y, yt) = pair(4, 3), pair(4, 3)

    def f(m, y):
        return lambda a: m.func.vmap(lambda b: (a * b).sum() + a[0])(y)

    close(nf.vmap(f(ng, y))(x), tf.vmap(f(torch, yt))(xt))
    (z, zt) = pair(5, 3)
    close(nf.vmap(nf.vmap(lambda a, b: a * b, (None, 0)), (0, None))(x, z),
          tf.vmap(tf.vmap(lambda a, b: a * b, (None, 0)), (0, None))(xt, zt))  # fmt: skip


@pytest.mark.parametrize("outer", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("inner", ["jacrev", "jacfwd"])
def test_jacobians_of_jacobians_of_a_vector_function_as_torch(outer, inner):
    x, xt = pair(3)

    def g(m):
        return lambda v: m.sin(v) * v.sum() + v.exp()

    ours = getattr(nf, outer)(getattr(nf, inner)(g(ng)))(x)
    ref = getattr(tf, outer)(getattr(tf, inner)(g(torch)))(xt)
    close(ours, ref, tol=1e-9)
    X, Xt = pair(4, 3)
    close(nf.vmap(getattr(nf, inner)(g(ng)))(X), tf.vmap(getattr(tf, inner)(g(torch)))(Xt))
