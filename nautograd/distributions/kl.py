"""``kl_divergence(p, q)``: KL(p || q) by the pair of distribution types (torch's registry)."""

import math

import numpy as np

from .. import special
from ..tensor import NN_FUNCTIONAL
from .continuous import Beta, Dirichlet, Exponential, Gamma, Laplace, LogNormal
from .distributions import (
    Bernoulli,
    Categorical,
    Independent,
    MultivariateNormal,
    Normal,
    Uniform,
    _sum_rightmost,
)

_KL = {}


def register_kl(type_p, type_q):
    """Decorator: register ``fn(p, q)`` as KL(p || q) for ``type_p`` and ``type_q``."""

    def register(fn):
        _KL[type_p, type_q] = fn
        return fn

    return register


def kl_divergence(p, q):
    """KL(p || q), for the registered pairs of types (subclasses match their bases)."""
    for tp in type(p).__mro__:
        for tq in type(q).__mro__:
            fn = _KL.get((tp, tq))
            if fn is not None:
                return fn(p, q)
    raise NotImplementedError(
        f"No KL(p || q) is implemented for p type {type(p).__name__} and q type {type(q).__name__}"
    )


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    from .. import linalg

    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes "
            "cannot be computed"
        )
    k = p.event_shape[0]
    lq, lp = q._unbroadcasted_scale_tril, p._unbroadcasted_scale_tril
    shape = np.broadcast_shapes(tuple(lq.shape[:-2]), tuple(lp.shape[:-2]))
    lq = lq.expand(*shape, k, k)
    lp = lp.expand(*shape, k, k)
    # tr(Sq^-1 Sp) = |Lq^-1 Lp|_F^2; (mq - mp)' Sq^-1 (mq - mp) = |Lq^-1 (mq - mp)|^2
    trace = (linalg.solve(lq, lp) ** 2).sum((-2, -1))
    diff = (q.loc - p.loc).expand(*shape, k) if shape else q.loc - p.loc
    m = (linalg.solve(lq, diff.unsqueeze(-1)).squeeze(-1) ** 2).sum(-1)
    return q._half_log_det() - p._half_log_det() + 0.5 * (trace + m - k)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    softplus = NN_FUNCTIONAL["softplus"]
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = t1.masked_fill(q.probs == 0, math.inf).masked_fill(p.probs == 0, 0.0)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = t2.masked_fill(q.probs == 1, math.inf).masked_fill(p.probs == 1, 0.0)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = t.masked_fill((q.probs == 0).expand(*t.shape), math.inf)
    return t.masked_fill((p.probs == 0).expand(*t.shape), 0.0).sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low) | (q.high < p.high)
    return result.masked_fill(outside, math.inf)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return rate_ratio - rate_ratio.log() - 1


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = special.gammaln(q.concentration) - special.gammaln(p.concentration)
    t3 = (p.concentration - q.concentration) * special.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    gammaln, digamma = special.gammaln, special.digamma
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = gammaln(q.concentration1) + gammaln(q.concentration0) + gammaln(sum_p)
    t2 = gammaln(p.concentration1) + gammaln(p.concentration0) + gammaln(sum_q)
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (sum_q - sum_p) * digamma(sum_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    gammaln, digamma = special.gammaln, special.digamma
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = gammaln(sum_p) - gammaln(sum_q)
    t2 = (gammaln(p.concentration) - gammaln(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    # an invertible map of both leaves the divergence as it is
    return kl_divergence(p.base_dist, q.base_dist)
