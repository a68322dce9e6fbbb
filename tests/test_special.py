"""nautograd.special against torch.special: values at ordinary and edge points, gradients,
second derivatives, forward mode, the function and method forms, and torch's errors."""

import numpy as np
import pytest
import torch

import nautograd as ng

# every function of ng.special, with the points it is compared at: (ordinary, edge)
_ANY = np.linspace(-4.0, 4.0, 17)
_EDGE = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-8, 30.0, -30.0])
_POSITIVE = np.linspace(0.05, 6.0, 13)
_UNIT = np.linspace(0.02, 0.98, 13)
_UNIT_EDGE = np.array([0.0, 1.0, -0.5, 1.5, np.nan])
POINTS = {
    "gammaln": (_POSITIVE, np.array([0.0, -1.0, -2.5, -0.5, np.inf, -np.inf, np.nan, 1e-300])),
    "digamma": (_POSITIVE, np.array([0.0, -0.0, -1.0, -2.5, -0.5, 1e20, np.inf, np.nan, 10.0])),
    "psi": (_POSITIVE, np.array([0.0, -1.0, -2.5])),
    "erf": (_ANY, _EDGE),
    "erfc": (_ANY, _EDGE),
    "erfcx": (_ANY, _EDGE),
    "erfinv": (np.linspace(-0.95, 0.95, 13), np.array([-1.0, 1.0, 1.5, -2.0, 0.0, np.nan])),
    "ndtr": (_ANY, _EDGE),
    "log_ndtr": (np.linspace(-30.0, 6.0, 13), _EDGE),
    "ndtri": (_UNIT, _UNIT_EDGE),
    "expit": (_ANY, _EDGE),
    "logit": (_UNIT, _UNIT_EDGE),
    "sinc": (_ANY, _EDGE),
    "entr": (_POSITIVE, np.array([0.0, -1.0, np.inf, np.nan])),
    "i0": (_ANY * 6, _EDGE),
    "i0e": (_ANY * 6, _EDGE),
    "i1": (_ANY * 6, _EDGE),
    "i1e": (_ANY * 6, _EDGE),
    "exp2": (_ANY, _EDGE),
    "expm1": (_ANY, _EDGE),
    "log1p": (_POSITIVE, np.array([-1.0, -2.0, 0.0, np.inf, np.nan])),
    "round": (_ANY, _EDGE),
}
UNARY = sorted(POINTS)


def test_every_special_function_is_torchs():
    assert set(ng.special.__all__) <= set(dir(torch.special))
    assert set(UNARY) | {
        "polygamma",
        "multigammaln",
        "xlogy",
        "xlog1py",
        "logsumexp",
        "softmax",
        "log_softmax",
    } == set(ng.special.__all__)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_match_torch_at_ordinary_and_edge_points(name, dtype):
    for points in POINTS[name]:
        a = points.astype(dtype)
        ours = getattr(ng.special, name)(ng.tensor(a)).numpy()
        ref = getattr(torch.special, name)(torch.from_numpy(a)).numpy()
        assert ours.dtype == ref.dtype
        tol = 1e-13 if dtype == np.float64 else 2e-6
        np.testing.assert_allclose(ours, ref, rtol=tol, atol=tol, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("name", UNARY)
def test_first_and_second_derivatives_match_torch(name, rng):
    if name == "round":
        pytest.skip("zero gradient: the op table covers it")
    a = POINTS[name][0]
    x = ng.tensor(a, requires_grad=True)
    (g,) = ng.autograd.grad(getattr(ng.special, name)(x).sum(), x, create_graph=True)
    (h,) = ng.autograd.grad((g * g).sum(), x)
    xt = torch.tensor(a, requires_grad=True)
    (gt,) = torch.autograd.grad(getattr(torch.special, name)(xt).sum(), xt, create_graph=True)
    (ht,) = torch.autograd.grad((gt * gt).sum(), xt)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("name", ["gammaln", "digamma", "erfinv", "i1e", "log_ndtr", "xlogy"])
def test_forward_mode_matches_torch(name):
    args = (np.linspace(0.1, 0.9, 5),) if name != "xlogy" else (np.linspace(0.1, 0.9, 5),) * 2
    tangents = tuple(np.linspace(-1.0, 1.0, 5) for _ in args)
    out, jvp = ng.func.jvp(
        getattr(ng.special, name),
        tuple(ng.tensor(a) for a in args),
        tuple(ng.tensor(t) for t in tangents),
    )
    out_t, jvp_t = torch.func.jvp(
        getattr(torch.special, name),
        tuple(torch.tensor(a) for a in args),
        tuple(torch.tensor(t) for t in tangents),
    )
    np.testing.assert_allclose(out.numpy(), out_t.numpy(), rtol=1e-12)
    np.testing.assert_allclose(jvp.numpy(), jvp_t.numpy(), rtol=1e-10)


def test_polygamma_as_function_method_and_in_place_as_torch():
    a = np.array([0.3, 1.7, 4.0, -0.5, -2.0, 0.0])
    for n in range(5):
        ref = torch.polygamma(n, torch.tensor(a)).numpy()
        np.testing.assert_allclose(ng.polygamma(n, ng.tensor(a)).numpy(), ref, rtol=1e-13)
        np.testing.assert_allclose(ng.special.polygamma(n, ng.tensor(a)).numpy(), ref, rtol=1e-13)
        np.testing.assert_allclose(ng.tensor(a).polygamma(n).numpy(), ref, rtol=1e-13)
        x = ng.tensor(a)
        assert x.polygamma_(n) is x
        np.testing.assert_allclose(x.numpy(), ref, rtol=1e-13)
    x = ng.tensor(a[:3], requires_grad=True)
    (g,) = ng.autograd.grad(ng.polygamma(2, x).sum(), x, create_graph=True)
    (h,) = ng.autograd.grad(g.sum(), x)
    xt = torch.tensor(a[:3], requires_grad=True)
    (gt,) = torch.autograd.grad(torch.polygamma(2, xt).sum(), xt, create_graph=True)
    (ht,) = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-12)
    assert x.polygamma(1).grad_fn.name() == "PolygammaBackward0"


def test_polygamma_bad_orders_raise_as_torch():
    x = ng.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"polygamma\(n, x\) does not support negative n"):
        ng.polygamma(-1, x)
    with pytest.raises(RuntimeError, match=r"does not support negative n"):
        torch.polygamma(-1, torch.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="must be int"):
        ng.polygamma(1.5, x)


def test_multigammaln_and_mvlgamma_as_torch():
    a = np.array([[2.5, 3.0, 7.25], [1.6, 4.0, 2.2]])
    for p in (1, 2, 3):
        x = ng.tensor(a, requires_grad=True)
        y = ng.special.multigammaln(x, p)
        xt = torch.tensor(a, requires_grad=True)
        yt = torch.special.multigammaln(xt, p)
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-13)
        (g,) = ng.autograd.grad(y.sum(), x)
        (gt,) = torch.autograd.grad(yt.sum(), xt)
        np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-12)
        np.testing.assert_allclose(
            ng.tensor(a).mvlgamma(p).numpy(), torch.tensor(a).mvlgamma(p).numpy(), rtol=1e-13
        )
    # torch 2.13 no longer checks the domain (elements <= (p - 1) / 2 give lgamma's values)
    np.testing.assert_allclose(
        ng.mvlgamma(ng.tensor(a - 1.0), 3).numpy(), torch.mvlgamma(torch.tensor(a - 1.0), 3)
    )
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        ng.special.multigammaln(ng.tensor(a), 0)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        torch.special.multigammaln(torch.tensor(a), 0)


def test_logit_with_eps_clamps_and_stops_the_gradient_outside_as_torch():
    a = np.array([0.01, 0.1, 0.5, 0.9, 0.99, 0.2])
    for eps in (None, 0.05, 0.2):
        x = ng.tensor(a, requires_grad=True)
        y = x.logit(eps) if eps is not None else x.logit()
        xt = torch.tensor(a, requires_grad=True)
        yt = xt.logit(eps)
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-13)
        (g,) = ng.autograd.grad(y.sum(), x)
        (gt,) = torch.autograd.grad(yt.sum(), xt)
        np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_at_zero_and_nan_and_its_gradients_as_torch(name):
    x = np.array([0.0, 0.0, 0.0, 2.0, 1.5, 0.0, -1.0])
    y = np.array([0.0, 2.0, np.nan, 0.5, 3.0, -0.5, 0.25])
    ours_f, ref_f = getattr(ng.special, name), getattr(torch.special, name)
    xs, ys = ng.tensor(x, requires_grad=True), ng.tensor(y, requires_grad=True)
    r = ours_f(xs, ys)
    xt, yt = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    rt = ref_f(xt, yt)
    np.testing.assert_allclose(r.detach().numpy(), rt.detach().numpy(), equal_nan=True)
    gx, gy = ng.autograd.grad(r.sum(), (xs, ys))
    gxt, gyt = torch.autograd.grad(rt.sum(), (xt, yt))
    np.testing.assert_allclose(gx.numpy(), gxt.numpy(), equal_nan=True)
    np.testing.assert_allclose(gy.numpy(), gyt.numpy(), equal_nan=True)
    # a number on either side
    np.testing.assert_allclose(
        ours_f(2.0, ng.tensor(y)).numpy(), ref_f(2.0, torch.tensor(y)).numpy(), equal_nan=True
    )
    np.testing.assert_allclose(
        ours_f(ng.tensor(x), 3.0).numpy(), ref_f(torch.tensor(x), 3.0).numpy(), equal_nan=True
    )


def test_method_and_in_place_forms_as_torch():
    a = np.array([0.2, 0.45, 0.7])
    for name in ("lgamma", "digamma", "erfinv", "logit", "sinc", "i0"):
        ref = getattr(torch.tensor(a), name)().numpy()
        np.testing.assert_allclose(getattr(ng.tensor(a), name)().numpy(), ref, rtol=1e-13)
        x = ng.tensor(a)
        getattr(x, name + "_")()
        np.testing.assert_allclose(x.numpy(), ref, rtol=1e-13)
        np.testing.assert_allclose(getattr(ng, name)(ng.tensor(a)).numpy(), ref, rtol=1e-13)
    x = ng.tensor(a)
    x.xlogy_(ng.tensor(a[::-1].copy()))
    np.testing.assert_allclose(x.numpy(), torch.tensor(a).xlogy(torch.tensor(a[::-1].copy())))


def test_integer_inputs_are_promoted_to_floating_as_torch():
    y = ng.special.gammaln(ng.tensor([1, 2, 5]))
    assert y.dtype.kind == "f"
    np.testing.assert_allclose(y.numpy(), torch.special.gammaln(torch.tensor([1, 2, 5])).numpy())


def test_softmax_and_logsumexp_of_special_as_torch():
    a = np.random.default_rng(0).standard_normal((3, 4))
    for name in ("softmax", "log_softmax"):
        ours = getattr(ng.special, name)(ng.tensor(a), 1, dtype=ng.float32)
        ref = getattr(torch.special, name)(torch.tensor(a), 1, dtype=torch.float32)
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-6)
    np.testing.assert_allclose(
        ng.special.logsumexp(ng.tensor(a), 0).numpy(),
        torch.special.logsumexp(torch.tensor(a), 0).numpy(),
    )


def test_special_functions_under_vmap_as_torch():
    a = np.random.default_rng(1).uniform(0.2, 3.0, (5, 4))

    def f(x):
        return ng.special.gammaln(x).sum() + ng.special.i1e(x).sum() + ng.polygamma(1, x).sum()

    def ft(x):
        return (
            torch.special.gammaln(x).sum()
            + torch.special.i1e(x).sum()
            + torch.polygamma(1, x).sum()
        )

    ours = ng.func.vmap(ng.func.grad(f))(ng.tensor(a))
    ref = torch.func.vmap(torch.func.grad(ft))(torch.tensor(a))
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)
