"""Exponential, Laplace, LogNormal, Gamma, Chi2, Beta, Dirichlet and StudentT, with torch's
parameterizations, shapes, checks and formulas.

Gamma samples are reparameterized implicitly (Figurnov et al., "Implicit Reparameterization
Gradients", 2018): a sample x of Gamma(alpha, 1) is held at its quantile u = P(alpha, x), so
dx/dalpha = -(dP/dalpha) / p(x; alpha), with P the regularized lower incomplete gamma function
and p the density. torch approximates that derivative (series, a saddle-point expansion and a
rational fit, within ~2e-3 of it); here it is computed to ~1e-9 from scipy.special's gammainc.
Beta and Dirichlet samples are normalized Gamma samples, so their gradients come from the same
derivative through the normalization (an unbiased reparameterization like torch's, whose
per-sample values differ).
"""

import math

import numpy as np

from .. import _random, special
from ..autograd.function import Function
from ..tensor import FUNCTIONS, Size, _wrap
from . import constraints
from .distribution import Distribution, broadcast_all, draw
from .distributions import Normal


def _tiny(dtype):
    return float(np.finfo(np.dtype(dtype)).tiny)


def _eps(dtype):
    return float(np.finfo(np.dtype(dtype)).eps)


def gamma_sample_grad(alpha, x):
    """d x / d alpha for samples ``x`` of Gamma(``alpha``, 1) (numpy arrays): the implicit
    reparameterization derivative -(dP(alpha, x) / dalpha) / p(x; alpha); 0 where it is not
    finite (a sample that underflowed to the smallest normal number), as torch."""
    import scipy.special  # (at the first sample: it added 30-70 ms to ``import nautograd``)

    a = np.asarray(alpha, np.float64)
    v = np.asarray(x, np.float64)
    h = 1e-5 * a  # central differences: truncation ~h^2, rounding ~1e-16 / h, both ~1e-10
    with np.errstate(all="ignore"):
        # the tail whose probability is below 1/2, so the difference keeps its digits
        upper = scipy.special.gammainc(a, v) > 0.5
        dp = (scipy.special.gammainc(a + h, v) - scipy.special.gammainc(a - h, v)) / (2 * h)
        dq = (scipy.special.gammaincc(a + h, v) - scipy.special.gammaincc(a - h, v)) / (2 * h)
        dp = np.where(upper, -dq, dp)
        density = np.exp((a - 1) * np.log(v) - v - scipy.special.gammaln(a))
        grad = -dp / density
    return np.where(np.isfinite(grad), grad, 0.0)


class _StandardGammaGrad(Function):
    """The reparameterization derivative as a node of the graph: like torch's
    ``_standard_gamma_grad`` it has no derivative of its own."""

    @staticmethod
    def forward(ctx, alpha, x):
        dtype = np.dtype(alpha.dtype)
        return _wrap(gamma_sample_grad(alpha._data, x._data).astype(dtype))

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("the derivative for '_standard_gamma_grad' is not implemented.")


class _StandardGamma(Function):
    """Samples of Gamma(alpha, 1), differentiable in alpha (see the module docstring)."""

    @staticmethod
    def forward(ctx, alpha):
        dtype = np.dtype(alpha.dtype)
        a = alpha._data
        x = _random.generator().standard_gamma(np.asarray(a, np.float64))
        x = np.maximum(x, _tiny(dtype)).astype(
            dtype
        )  # (torch clamps to the smallest normal number)
        result = _wrap(x)
        ctx.save_for_backward(alpha, result)
        return result

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * _StandardGammaGrad.apply(alpha, x)


def _standard_gamma(alpha):
    return _StandardGamma.apply(alpha)


class Exponential(Distribution):
    """The exponential distribution with ``rate`` (mean 1 / rate)."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, Size(), validate_args)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return self.rate * 0.0

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        return draw("standard_exponential", shape, self.rate.dtype) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()


class Laplace(Distribution):
    """The Laplace distribution with ``loc`` and ``scale``: density e^(-|x - loc| / scale) /
    (2 scale)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, Size(), validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        dtype = self.loc.dtype
        # u uniform on (eps - 1, 1), as torch: log1p(-|u|) stays finite
        u = draw("uniform", shape, dtype, low=_eps(dtype) - 1, high=1.0)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = value - self.loc
        return 0.5 - 0.5 * z.sign() * (-z.abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


class LogNormal(Distribution):
    """exp(X) for X ~ Normal(``loc``, ``scale``)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.base_dist = Normal(loc, scale, validate_args=validate_args)
        self.loc, self.scale = self.base_dist.loc, self.base_dist.scale
        super().__init__(self.loc.shape, Size(), validate_args)

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.pow(2)).exp()

    @property
    def variance(self):
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = value.log()
        return self.base_dist.log_prob(y) - y

    def cdf(self, value):
        return self.base_dist.cdf(value.log())

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class Gamma(Distribution):
    """The gamma distribution with ``concentration`` (shape) and ``rate`` (1 / scale)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, Size(), validate_args)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        value = _standard_gamma(self.concentration.expand(*shape)) / self.rate.expand(*shape)
        return value.clamp(min=_tiny(value.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c, rate = self.concentration, self.rate
        return (
            special.xlogy(c, rate) + special.xlogy(c - 1, value) - rate * value - special.gammaln(c)
        )

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + special.gammaln(c) + (1.0 - c) * special.digamma(c)


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom, Gamma(df / 2, 1 / 2)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    @property
    def df(self):
        """The degrees of freedom."""
        return self.concentration * 2


class Dirichlet(Distribution):
    """The Dirichlet distribution on the simplex, with ``concentration`` (the last dim)."""

    arg_constraints = {
        "concentration": constraints.independent(constraints.positive, 1),
    }
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        c = self.concentration
        excess = (c - 1).clamp(min=0.0)
        with np.errstate(invalid="ignore"):  # (0 / 0 where every concentration is below 1)
            mode = excess / excess.sum(-1, keepdim=True)
        below = np.all(c._data < 1, axis=-1, keepdims=True)
        if not below.any():
            return mode
        # every concentration below 1: torch takes the one-hot argmax of that row of 0 / 0,
        # its first entry
        vertex = np.zeros(mode.shape, np.dtype(mode.dtype))
        vertex[..., 0] = 1
        return FUNCTIONS["where"](_wrap(np.broadcast_to(below, mode.shape)), _wrap(vertex), mode)

    @property
    def variance(self):
        c = self.concentration
        total = c.sum(-1, keepdim=True)
        return c * (total - c) / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        gammas = _standard_gamma(self.concentration.expand(*shape))
        x = gammas / gammas.sum(-1, keepdim=True)
        tiny = _tiny(x.dtype)
        return x.clamp(min=tiny, max=1 - _eps(x.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return (
            special.xlogy(c - 1.0, value).sum(-1)
            + special.gammaln(c.sum(-1))
            - special.gammaln(c).sum(-1)
        )

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        total = c.sum(-1)
        return (
            special.gammaln(c).sum(-1)
            - special.gammaln(total)
            - (k - total) * special.digamma(total)
            - ((c - 1.0) * special.digamma(c)).sum(-1)
        )


class Beta(Distribution):
    """The beta distribution on [0, 1] with ``concentration1`` (alpha) and
    ``concentration0`` (beta)."""

    arg_constraints = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        c1, c0 = broadcast_all(concentration1, concentration0)
        self.concentration1, self.concentration0 = c1, c0
        self._dirichlet = Dirichlet(_pair(c1, c0), validate_args=validate_args)
        super().__init__(c1.shape, Size(), validate_args)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=Size()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(_pair(value, 1.0 - value))

    def entropy(self):
        return self._dirichlet.entropy()


def _pair(a, b):
    a, b = broadcast_all(a, b)
    return FUNCTIONS["stack"]([a, b], -1)


class StudentT(Distribution):
    """Student's t distribution with ``df`` degrees of freedom, ``loc`` and ``scale``."""

    arg_constraints = {
        "df": constraints.positive,
        "loc": constraints.real,
        "scale": constraints.positive,
    }
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.shape, Size(), validate_args)

    @property
    def mean(self):
        return FUNCTIONS["where"](self.df > 1, self.loc, self._constant(math.nan))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        var = self.scale.pow(2) * df / (df - 2)
        where = FUNCTIONS["where"]
        # inf where 1 < df <= 2, NaN where df <= 1: constants (no gradient), as torch's
        var = where(df > 2, var, self._constant(math.inf))
        return where(df > 1, var, self._constant(math.nan))

    def _constant(self, value):
        return _wrap(np.full(tuple(self.df.shape), value, np.dtype(self.df.dtype)))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        x = draw("standard_normal", shape, self.df.dtype)
        z = self._chi2.rsample(sample_shape)
        y = x * (z / self.df).rsqrt()
        return self.loc + self.scale * y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (
            self.scale.log()
            + 0.5 * self.df.log()
            + 0.5 * math.log(math.pi)
            + special.gammaln(0.5 * self.df)
            - special.gammaln(0.5 * (self.df + 1.0))
        )
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - z

    def entropy(self):
        df = self.df
        lbeta = special.gammaln(0.5 * df) + math.lgamma(0.5) - special.gammaln(0.5 * (df + 1))
        return (
            self.scale.log()
            + 0.5 * (df + 1) * (special.digamma(0.5 * (df + 1)) - special.digamma(0.5 * df))
            + 0.5 * df.log()
            + lbeta
        )
