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


def test_per_sample_gradients_of_a_model_as_torchs_tutorial():
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
    ours = nf.vmap(nf.grad(compute(ng, n)), in_dims=(None, 0, 0))(pn, X, yn)
    ref = tf.vmap(tf.grad(compute(torch, t)), in_dims=(None, 0, 0))(pt, Xt, yt)
    close(ours, ref)


def test_stack_module_state_and_an_ensemble_by_vmap_as_torch():
    models = [_models(seed) for seed in range(3)]
    x, xt = pair(5, 4)
    pn, bn = nf.stack_module_state([m for m, _ in models])
    pt, bt = tf.stack_module_state([m for _, m in models])
    close(pn, {k: v.detach() for k, v in pt.items()})
    assert all(p.requires_grad for p in pn.values())
    base_n, base_t = models[0]

    def run(lib, base, x):
        return lambda p, b: lib.func.functional_call(base, (p, b), (x,))

    close(nf.vmap(run(ng, base_n, x))(pn, bn), tf.vmap(run(torch, base_t, xt))(pt, bt))
    with pytest.raises(RuntimeError, match="Expected at least one model, got 0."):
        nf.stack_module_state([])
