"""distributions against torch.distributions: densities, moments, entropies, KL divergences,
their gradients with respect to the parameters, sample shapes and the checks' errors."""

import numpy as np
import pytest
import torch

import nautograd as ng

RS = np.random.RandomState(0)
LOC = RS.randn(3)
SCALE = RS.rand(3) + 0.5
VALUES = RS.randn(4, 3)
A = RS.randn(3, 3)
COV = A @ A.T + 3 * np.eye(3)
COV2 = np.eye(3) * 2 + 0.3
PROBS = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])


def _t(lib, a, rg=True):
    return lib.tensor(a, dtype=lib.float64, requires_grad=rg)


def _normal(lib):
    loc, scale = _t(lib, LOC), _t(lib, SCALE)
    d = lib.distributions.Normal(loc, scale)
    v = _t(lib, VALUES, False)
    return [d.log_prob(v), d.entropy(), d.cdf(v), d.mean, d.variance, d.stddev], [loc, scale]


def _mvn(lib, how):
    loc, cov = _t(lib, LOC), _t(lib, COV)
    if how == "covariance_matrix":
        d = lib.distributions.MultivariateNormal(loc, covariance_matrix=cov)
    elif how == "scale_tril":
        d = lib.distributions.MultivariateNormal(loc, scale_tril=lib.linalg.cholesky(cov))
    else:
        d = lib.distributions.MultivariateNormal(loc, precision_matrix=lib.linalg.inv(cov))
    v = _t(lib, VALUES, False)
    return [d.log_prob(v), d.entropy(), d.variance, d.covariance_matrix], [loc, cov]


def _uniform(lib):
    low, high = _t(lib, LOC), _t(lib, LOC + SCALE * 3)
    d = lib.distributions.Uniform(low, high)
    v = _t(lib, LOC + SCALE, False)
    return [d.log_prob(v), d.entropy(), d.cdf(v), d.mean, d.variance], [low, high]


def _bernoulli(lib, by):
    p = _t(lib, PROBS[0]) if by == "probs" else _t(lib, np.log(PROBS[0] / (1 - PROBS[0])))
    d = lib.distributions.Bernoulli(**{by: p})
    v = _t(lib, [1.0, 0.0, 1.0], False)
    return [d.log_prob(v), d.entropy(), d.mean, d.variance], [p]


def _categorical(lib, by):
    p = _t(lib, PROBS) if by == "probs" else _t(lib, np.log(PROBS) + 0.7)
    d = lib.distributions.Categorical(**{by: p})
    v = lib.tensor([[2, 0], [1, 1]])
    return [d.log_prob(v), d.entropy(), d.probs, d.logits], [p]


def _independent(lib):
    loc, scale = _t(lib, LOC), _t(lib, SCALE)
    d = lib.distributions.Independent(lib.distributions.Normal(loc, scale), 1)
    assert tuple(d.batch_shape) == () and tuple(d.event_shape) == (3,)
    return [d.log_prob(_t(lib, VALUES, False)), d.entropy()], [loc, scale]


def _kl(lib, which):
    D = lib.distributions
    if which == "normal":
        a, b = _t(lib, LOC), _t(lib, SCALE)
        p, q = D.Normal(a, b), D.Normal(a * 0.5 + 1, b * 2)
    elif which == "mvn":
        a, b = _t(lib, LOC), _t(lib, COV)
        p, q = D.MultivariateNormal(a, b), D.MultivariateNormal(a * 0, _t(lib, COV2, False))
    elif which == "bernoulli":
        a, b = _t(lib, PROBS[0]), _t(lib, PROBS[1])
        p, q = D.Bernoulli(a), D.Bernoulli(b)
    elif which == "categorical":
        a, b = _t(lib, PROBS), _t(lib, PROBS[::-1].copy())
        p, q = D.Categorical(a), D.Categorical(b)
    else:
        a, b = _t(lib, LOC), _t(lib, LOC + 2)
        p, q = D.Uniform(a, b), D.Uniform(a - 1, b + 1)
    return [D.kl_divergence(p, q)], [a, b]


CASES = {
    "normal": _normal,
    "mvn_covariance": lambda lib: _mvn(lib, "covariance_matrix"),
    "mvn_scale_tril": lambda lib: _mvn(lib, "scale_tril"),
    "mvn_precision": lambda lib: _mvn(lib, "precision_matrix"),
    "uniform": _uniform,
    "bernoulli_probs": lambda lib: _bernoulli(lib, "probs"),
    "bernoulli_logits": lambda lib: _bernoulli(lib, "logits"),
    "categorical_probs": lambda lib: _categorical(lib, "probs"),
    "categorical_logits": lambda lib: _categorical(lib, "logits"),
    "independent": _independent,
    **{f"kl_{w}": (lambda lib, w=w: _kl(lib, w)) for w in
       ["normal", "mvn", "bernoulli", "categorical", "uniform"]},
}  # fmt: skip


def matches_torch_with_gradients(make):
    """``make(lib) -> (outputs, params)`` gives the same outputs and gradients of a weighted
    sum of them with respect to the params on torch and nautograd."""
    results = []
    for lib in (torch, ng):
        outputs, params = make(lib)
        total = sum((o * (k + 1)).sum() for k, o in enumerate(outputs) if o.requires_grad)
        grads = lib.autograd.grad(total, params, allow_unused=True)
        results.append(
            (
                [np.asarray(o.detach()) for o in outputs],
                [None if g is None else np.asarray(g) for g in grads],
            )
        )
    (want, want_grads), (got, got_grads) = results
    for g, w in zip(got + got_grads, want + want_grads, strict=True):
        if w is None:
            assert g is None or not np.any(g)
            continue
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_distribution_matches_torch_with_gradients(case):
    matches_torch_with_gradients(CASES[case])


def test_reparameterized_samples_have_the_right_shapes_and_gradients():
    D = ng.distributions
    loc = ng.zeros(3, dtype=ng.float64, requires_grad=True)
    scale = ng.ones(3, dtype=ng.float64, requires_grad=True)
    ng.manual_seed(0)
    x = D.Normal(loc, scale).rsample((5,))
    assert tuple(x.shape) == (5, 3) and x.requires_grad
    x.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [5.0, 5.0, 5.0])
    np.testing.assert_allclose(scale.grad.numpy(), x.detach().numpy().sum(0))
    assert not D.Normal(loc, scale).sample((2,)).requires_grad
    mvn = D.MultivariateNormal(loc, ng.tensor(COV))
    assert tuple(mvn.rsample((4, 2)).shape) == (4, 2, 3)
    assert tuple(D.Uniform(0.0, 1.0).sample((7,)).shape) == (7,)
    c = D.Categorical(ng.tensor(PROBS)).sample((6,))
    assert tuple(c.shape) == (6, 2) and c.dtype == ng.int64
    assert set(np.unique(D.Bernoulli(0.5).sample((50,)).numpy())) <= {0.0, 1.0}


def test_sample_moments_match_the_distribution():
    ng.manual_seed(1)
    D = ng.distributions
    x = D.MultivariateNormal(ng.tensor(LOC), ng.tensor(COV)).sample((20000,)).numpy()
    np.testing.assert_allclose(x.mean(0), LOC, atol=0.1)
    np.testing.assert_allclose(np.cov(x.T), COV, rtol=0.1, atol=0.1)
    c = D.Categorical(ng.tensor(PROBS[0])).sample((20000,)).numpy()
    np.testing.assert_allclose(np.bincount(c, minlength=3) / 20000, PROBS[0], atol=0.02)


@pytest.mark.parametrize("lib", [torch, ng], ids=["torch", "nautograd"])
def test_distribution_checks_raise_torchs_errors(lib):
    D = lib.distributions
    with pytest.raises(ValueError, match=r"Expected parameter scale \(Tensor of shape \(\)\)"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match=r"within the support \(Real\(\)\)"):
        D.Normal(0.0, 1.0).log_prob(lib.tensor(float("nan")))
    with pytest.raises(ValueError, match=r"support \(Interval\(lower_bound=0.0, upper_bound=1.0"):
        D.Uniform(0.0, 1.0).log_prob(lib.tensor(2.0))
    with pytest.raises(ValueError, match=r"support \(Boolean\(\)\)"):
        D.Bernoulli(probs=0.3).log_prob(lib.tensor(0.5))
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix or precision_matrix"):
        D.MultivariateNormal(lib.zeros(2))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        D.Bernoulli()
    assert repr(D.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(D.Normal(lib.zeros(3), 1.0)) == (
        "Normal(loc: torch.Size([3]), scale: torch.Size([3]))"
    )
    out = D.Uniform(0.0, 1.0, validate_args=False).log_prob(lib.tensor([2.0, 0.5]))
    assert np.isneginf(np.asarray(out)[0]) and np.asarray(out)[1] == 0.0
