"""Exponential, Laplace, LogNormal, Gamma, Chi2, Beta, Dirichlet and StudentT against
torch.distributions: densities, distribution functions, moments, entropies and KL divergences
with their gradients; reparameterized samples (their gradients against torch's and against
the moments they must reproduce in expectation); the checks' errors."""

import math

import numpy as np
import pytest
import torch
from test_distributions import matches_torch_with_gradients

import nautograd as ng

RS = np.random.RandomState(3)
POS = RS.rand(3) + 0.5  # a positive parameter
POS2 = RS.rand(3) * 2 + 0.3
LOC = RS.randn(3)
VALUES = RS.rand(4, 3) * 2 + 0.05  # positive values
REAL = RS.randn(4, 3)
UNIT = RS.rand(4, 3) * 0.9 + 0.05
CONC = RS.rand(2, 4) * 2 + 0.4
SIMPLEX = RS.dirichlet(np.ones(4), size=3)


def _t(lib, a, rg=True):
    return lib.tensor(a, dtype=lib.float64, requires_grad=rg)


def _exponential(lib):
    rate = _t(lib, POS)
    d = lib.distributions.Exponential(rate)
    v = _t(lib, VALUES, False)
    u = _t(lib, UNIT, False)
    outs = [d.log_prob(v), d.cdf(v), d.icdf(u), d.entropy(), d.mean, d.variance, d.stddev, d.mode]
    return outs, [rate]


def _laplace(lib):
    loc, scale = _t(lib, LOC), _t(lib, POS)
    d = lib.distributions.Laplace(loc, scale)
    v, u = _t(lib, REAL, False), _t(lib, UNIT, False)
    outs = [d.log_prob(v), d.cdf(v), d.icdf(u), d.entropy(), d.mean, d.variance, d.stddev]
    return outs, [loc, scale]


def _lognormal(lib):
    loc, scale = _t(lib, LOC), _t(lib, POS)
    d = lib.distributions.LogNormal(loc, scale)
    v = _t(lib, VALUES, False)
    outs = [d.log_prob(v), d.cdf(v), d.entropy(), d.mean, d.variance, d.mode]
    return outs, [loc, scale]


def _gamma(lib):
    c, rate = _t(lib, POS2), _t(lib, POS)
    d = lib.distributions.Gamma(c, rate)
    v = _t(lib, VALUES, False)
    return [d.log_prob(v), d.entropy(), d.mean, d.variance, d.mode], [c, rate]


def _chi2(lib):
    df = _t(lib, POS2 * 3)
    d = lib.distributions.Chi2(df)
    v = _t(lib, VALUES, False)
    return [d.log_prob(v), d.entropy(), d.mean, d.variance, d.df], [df]


def _beta(lib):
    a, b = _t(lib, POS2), _t(lib, POS + 0.7)
    d = lib.distributions.Beta(a, b)
    v = _t(lib, UNIT, False)
    return [d.log_prob(v), d.entropy(), d.mean, d.variance, d.mode], [a, b]


def _dirichlet(lib):
    c = _t(lib, CONC)
    d = lib.distributions.Dirichlet(c)
    v = _t(lib, SIMPLEX[:, None, :], False)  # (3, 1, 4) against batch (2,)
    return [d.log_prob(v), d.entropy(), d.mean, d.variance, d.mode], [c]


def _student_t(lib):
    df, loc, scale = _t(lib, POS2 * 3), _t(lib, LOC), _t(lib, POS)
    d = lib.distributions.StudentT(df, loc, scale)
    v = _t(lib, REAL, False)
    return [d.log_prob(v), d.entropy(), d.mean, d.variance], [df, loc, scale]


def _kl(lib, which):
    D = lib.distributions
    a, b = _t(lib, POS), _t(lib, POS2)
    if which == "exponential":
        p, q = D.Exponential(a), D.Exponential(b)
    elif which == "gamma":
        p, q = D.Gamma(a, b), D.Gamma(b, a * 2)
    elif which == "beta":
        p, q = D.Beta(a, b), D.Beta(b + 1, a)
    elif which == "laplace":
        p, q = D.Laplace(a - 1, b), D.Laplace(b, a)
    elif which == "lognormal":
        p, q = D.LogNormal(a, b), D.LogNormal(b, a + 1)
    else:
        a, b = _t(lib, CONC), _t(lib, CONC[::-1].copy() + 0.5)
        p, q = D.Dirichlet(a), D.Dirichlet(b)
    return [D.kl_divergence(p, q)], [a, b]


CASES = {
    "exponential": _exponential,
    "laplace": _laplace,
    "lognormal": _lognormal,
    "gamma": _gamma,
    "chi2": _chi2,
    "beta": _beta,
    "dirichlet": _dirichlet,
    "student_t": _student_t,
    **{f"kl_{w}": (lambda lib, w=w: _kl(lib, w)) for w in
       ["exponential", "gamma", "beta", "laplace", "lognormal", "dirichlet"]},
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_distribution_matches_torch_with_gradients(case):
    matches_torch_with_gradients(CASES[case])


def test_the_gamma_reparameterization_gradient_is_torchs():
    # torch approximates the implicit derivative (within ~2e-3); nautograd computes it
    from nautograd.distributions.continuous import gamma_sample_grad

    rng = np.random.default_rng(0)
    for alpha in (0.05, 0.7, 1.0, 4.0, 9.0, 60.0):
        a = np.full(500, alpha)
        x = rng.standard_gamma(a)
        ref = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
        np.testing.assert_allclose(gamma_sample_grad(a, x), ref, rtol=5e-3, atol=1e-12)


def test_gamma_rsample_gradient_is_the_derivative_at_a_fixed_quantile():
    import scipy.special

    ng.manual_seed(4)
    alpha = ng.tensor([0.3, 1.0, 2.5, 12.0], requires_grad=True)
    rate = ng.tensor([1.0, 2.0, 0.5, 3.0], requires_grad=True)
    x = ng.distributions.Gamma(alpha, rate).rsample()
    (ga, gr) = ng.autograd.grad(x.sum(), (alpha, rate))
    # hold each sample's quantile u = P(alpha, rate x) fixed and move alpha
    a, r, v = alpha.detach().numpy(), rate.detach().numpy(), x.detach().numpy()
    u = scipy.special.gammainc(a, r * v)
    h = 1e-6
    fd = (scipy.special.gammaincinv(a + h, u) - scipy.special.gammaincinv(a - h, u)) / (2 * h * r)
    np.testing.assert_allclose(ga.numpy(), fd, rtol=1e-5)
    np.testing.assert_allclose(gr.numpy(), -v / r, rtol=1e-12)


def test_gamma_rsample_second_derivative_raises_as_torch():
    alpha = ng.tensor([1.5, 2.0], requires_grad=True)
    x = ng.distributions.Gamma(alpha, 1.0).rsample()
    (g,) = ng.autograd.grad(x.sum(), alpha, create_graph=True)
    with pytest.raises(NotImplementedError, match="_standard_gamma_grad"):
        ng.autograd.grad(g.sum(), alpha)


@pytest.mark.parametrize(
    "make, param_of, mean_of",
    [
        (lambda c: ng.distributions.Gamma(c, 2.0), lambda d: d.concentration, lambda c: c / 2),
        (
            lambda c: ng.distributions.Beta(c, c[::-1] * 1.0),
            lambda d: d.concentration1,
            None,
        ),
        (
            lambda c: ng.distributions.Dirichlet(c),
            lambda d: d.concentration,
            lambda c: c / c.sum(),
        ),
    ],
    ids=["gamma", "beta", "dirichlet"],
)
def test_reparameterized_gradients_reproduce_the_mean_in_expectation(make, param_of, mean_of):
    # d E[f(x)] / d theta = E[d f(x) / d theta]: with f = sum(w x) both sides are known exactly
    ng.manual_seed(7)
    c = ng.tensor([0.6, 1.5, 3.0], requires_grad=True)
    d = make(c)
    w = ng.tensor([1.0, -2.0, 0.5])
    n = 40000
    (mc,) = ng.autograd.grad((d.rsample((n,)) * w).sum() / n, c)
    cc = ng.tensor([0.6, 1.5, 3.0], requires_grad=True)
    exact_mean = mean_of(cc) if mean_of is not None else make(cc).mean
    (exact,) = ng.autograd.grad((exact_mean * w).sum(), cc)
    np.testing.assert_allclose(mc.numpy(), exact.numpy(), rtol=0.05, atol=0.01)


def test_samples_have_torchs_shapes_dtypes_and_moments():
    D = ng.distributions
    ng.manual_seed(2)
    n = 40000
    checks = [
        (D.Exponential(ng.tensor([0.5, 2.0])), (n, 2)),
        (D.Laplace(ng.tensor([0.0, 1.0]), ng.tensor([1.0, 0.5])), (n, 2)),
        (D.LogNormal(ng.tensor([0.0, 0.3]), ng.tensor([0.25, 0.5])), (n, 2)),
        (D.Gamma(ng.tensor([0.5, 4.0]), ng.tensor([1.0, 2.0])), (n, 2)),
        (D.Chi2(ng.tensor([3.0, 7.0])), (n, 2)),
        (D.Beta(ng.tensor([0.5, 2.0]), ng.tensor([1.5, 3.0])), (n, 2)),
        (D.Dirichlet(ng.tensor([[0.5, 2.0, 1.0]])), (n, 1, 3)),
        (D.StudentT(ng.tensor([5.0, 9.0]), 1.0, 2.0), (n, 2)),
    ]
    for d, shape in checks:
        x = d.sample((n,))
        assert tuple(x.shape) == shape and x.dtype == ng.float64 and not x.requires_grad
        np.testing.assert_allclose(x.numpy().mean(0), d.mean.numpy(), rtol=0.05, atol=0.03)
        np.testing.assert_allclose(x.numpy().var(0), d.variance.numpy(), rtol=0.1, atol=0.03)
        assert d.has_rsample
    f32 = D.Gamma(ng.tensor([2.0], dtype=ng.float32), ng.tensor([1.0], dtype=ng.float32))
    assert f32.rsample((3,)).dtype == ng.float32


@pytest.mark.parametrize("lib", [torch, ng], ids=["torch", "nautograd"])
def test_checks_raise_torchs_errors(lib):
    D = lib.distributions
    with pytest.raises(ValueError, match=r"Expected parameter rate \(Tensor of shape \(\)\)"):
        D.Exponential(-1.0)
    with pytest.raises(ValueError, match=r"Expected parameter concentration \(Tensor of shape"):
        D.Gamma(-1.0, 1.0)
    # (torch checks a Beta's parameters as its Dirichlet's)
    with pytest.raises(
        ValueError, match=r"concentration \(Tensor of shape \(2,\)\) of distribution Dir"
    ):
        D.Beta(1.0, 0.0)
    with pytest.raises(ValueError, match=r"Expected parameter concentration"):
        D.Dirichlet(lib.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="must be at least one-dimensional"):
        D.Dirichlet(lib.tensor(1.0))
    with pytest.raises(ValueError, match=r"support \(GreaterThanEq\(lower_bound=0.0\)\)"):
        D.Gamma(1.0, 1.0).log_prob(lib.tensor(-1.0))
    with pytest.raises(ValueError, match=r"support \(Simplex\(\)\)"):
        D.Dirichlet(lib.tensor([1.0, 2.0])).log_prob(lib.tensor([0.3, 0.3]))
    with pytest.raises(ValueError, match=r"support \(GreaterThan\(lower_bound=0.0\)\)"):
        D.LogNormal(0.0, 1.0).log_prob(lib.tensor(-2.0))
    assert repr(D.Gamma(2.0, 1.0)) == "Gamma(concentration: 2.0, rate: 1.0)"
    assert repr(D.Chi2(3.0)) == "Chi2()"
    assert math.isnan(float(D.StudentT(0.5).mean))
