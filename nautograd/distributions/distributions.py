"""Normal, MultivariateNormal, Uniform, Bernoulli, Categorical and Independent, with torch's
parameterizations, shapes, checks and formulas."""

import math

import numpy as np

from .. import linalg
from ..autograd.grad_mode import no_grad
from ..kernels.registry import OP_BY_NAME
from ..tensor import NN_FUNCTIONAL, Size, Tensor, _wrap, apply
from . import constraints
from .distribution import Distribution, broadcast_all, draw

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


def _sum_rightmost(value, dims):
    return value.reshape(*value.shape[: value.ndim - dims], -1).sum(-1) if dims else value


def _clamp_probs(probs):
    eps = float(np.finfo(np.dtype(probs.dtype)).eps)
    return probs.clamp(min=eps, max=1 - eps)


class Normal(Distribution):
    """The normal distribution N(loc, scale^2)."""

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
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = draw("standard_normal", shape, self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale**2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - _LOG_SQRT_2PI

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) / (self.scale * math.sqrt(2))).erf())

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


def _lazy_matrix(name, compute, doc):
    def get(self):
        if name not in self.__dict__:
            self.__dict__[name] = compute(self)
        return self.__dict__[name]

    return property(get, doc=doc)


class MultivariateNormal(Distribution):
    """The multivariate normal distribution, by ``covariance_matrix``, ``precision_matrix``
    or ``scale_tril`` (a lower-triangular factor of the covariance)."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc,
        covariance_matrix=None,
        precision_matrix=None,
        scale_tril=None,
        validate_args=None,
    ):
        if (covariance_matrix is not None) + (scale_tril is not None) + (
            precision_matrix is not None
        ) != 1:
            raise ValueError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                "specified."
            )
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        matrix = next(m for m in (scale_tril, covariance_matrix, precision_matrix) if m is not None)
        if matrix.ndim < 2:
            which = (
                "scale_tril"
                if scale_tril is not None
                else "covariance_matrix"
                if covariance_matrix is not None
                else "precision_matrix"
            )
            raise ValueError(
                f"{which} matrix must be at least two-dimensional, with optional leading batch "
                "dimensions"
            )
        batch_shape = np.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        k = loc.shape[-1]
        expanded = matrix.expand(*batch_shape, -1, -1)
        # (the matrix given is kept in __dict__, where the properties below look first)
        if scale_tril is not None:
            self.__dict__["scale_tril"] = expanded
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.__dict__["covariance_matrix"] = expanded
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self.__dict__["precision_matrix"] = expanded
            # the covariance's factor from the precision's: L = chol(P^-1)
            self._unbroadcasted_scale_tril = linalg.cholesky(linalg.inv(precision_matrix))
        self.loc = loc.expand(*batch_shape, -1)
        super().__init__(batch_shape, Size((k,)), validate_args)

    scale_tril = _lazy_matrix(
        "scale_tril",
        lambda self: self._unbroadcasted_scale_tril.expand(*self._batch_shape, -1, -1),
        "The lower Cholesky factor of the covariance matrix.",
    )
    covariance_matrix = _lazy_matrix(
        "covariance_matrix",
        lambda self: (
            self._unbroadcasted_scale_tril @ self._unbroadcasted_scale_tril.transpose(-1, -2)
        ).expand(*self._batch_shape, -1, -1),
        "The covariance matrix.",
    )
    precision_matrix = _lazy_matrix(
        "precision_matrix",
        lambda self: linalg.inv(self.covariance_matrix),
        "The inverse of the covariance matrix.",
    )

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return (
            (self._unbroadcasted_scale_tril**2)
            .sum(-1)
            .expand(*self._batch_shape, *self._event_shape)
        )

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = draw("standard_normal", shape, self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        k = self._event_shape[0]
        tril = self._unbroadcasted_scale_tril.expand(*diff.shape[:-1], k, k)
        # Mahalanobis distance |L^-1 (x - mu)|^2
        y = linalg.solve(tril, diff.unsqueeze(-1)).squeeze(-1)
        m = (y**2).sum(-1)
        return -0.5 * (k * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        k = self._event_shape[0]
        h = 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(*self._batch_shape) if self._batch_shape else h


class Uniform(Distribution):
    """The uniform distribution on [low, high)."""

    arg_constraints = {"low": constraints._Dependent(), "high": constraints._Dependent()}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, Size(), validate_args)
        if self._validate_args and not np.all(self.low._data < self.high._data):
            raise ValueError(
                f"Expected parameter low (Tensor of shape {tuple(self.low.shape)}) of "
                f"distribution {self!r} to satisfy the constraint LessThan(upper_bound="
                f"{self.high}), but found invalid values:\n{self.low}"
            )

    @property
    def support(self):
        """The constraint the values satisfy."""
        low, high = self.low._data, self.high._data
        return constraints.interval(
            low.item() if low.size == 1 else low, high.item() if high.size == 1 else high
        )

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return self.low * float("nan")

    @property
    def stddev(self):
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = draw("random", shape, self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = (self.low <= value) & (self.high > value)
        return inside.to(self.low.dtype).log() - (self.high - self.low).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()

    def __repr__(self):
        return Distribution.__repr__(self)


def _probs_and_logits(probs, logits, categorical):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    if probs is not None:
        (probs,) = broadcast_all(probs)
        return (probs / probs.sum(-1, keepdim=True) if categorical else probs), None
    (logits,) = broadcast_all(logits)
    if categorical:
        logits = logits - logits.logsumexp(dim=-1, keepdim=True)
    return None, logits


class Bernoulli(Distribution):
    """The Bernoulli distribution on {0, 1}, by ``probs`` or ``logits``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        probs, logits = _probs_and_logits(probs, logits, False)
        if probs is not None:
            self.probs = probs
        else:
            self.logits = logits
        super().__init__((probs if probs is not None else logits).shape, Size(), validate_args)

    def __getattr__(self, name):
        if name == "probs":
            self.probs = value = self.logits.sigmoid()
            return value
        if name == "logits":
            p = _clamp_probs(self.probs)
            self.logits = value = p.log() - (-p).log1p()
            return value
        raise AttributeError(name)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, float("nan"))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            p = self.probs.expand(*shape)._data
            u = draw("random", shape, p.dtype)._data
            return _wrap((u < p).astype(p.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        bce = NN_FUNCTIONAL["binary_cross_entropy_with_logits"]
        return -bce(logits, value, reduction="none")

    def entropy(self):
        bce = NN_FUNCTIONAL["binary_cross_entropy_with_logits"]
        return bce(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        """Every value of the support along a new first dimension (``expand=True``: broadcast over
        batch_shape)."""
        values = _wrap(np.arange(2, dtype=np.dtype(self.probs.dtype))).reshape(
            2, *([1] * len(self._batch_shape))
        )
        return values.expand(2, *self._batch_shape) if expand else values


class Categorical(Distribution):
    """The categorical distribution over {0, ..., K - 1}, by ``probs`` or ``logits`` (the last
    dim indexes the categories)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        probs, logits = _probs_and_logits(probs, logits, True)
        param = probs if probs is not None else logits
        if param.ndim < 1:
            raise ValueError("`probs` parameter must be at least one-dimensional.")
        if probs is not None:
            self.probs = probs
        else:
            self.logits = logits
        self._num_events = param.shape[-1]
        super().__init__(param.shape[:-1], Size(), validate_args)

    def __getattr__(self, name):
        if name == "probs":
            self.probs = value = self.logits.softmax(-1)
            return value
        if name == "logits":
            self.logits = value = _clamp_probs(self.probs).log()
            return value
        raise AttributeError(name)

    @property
    def support(self):
        """The constraint the values satisfy."""
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self):
        """The shape of ``probs`` (and of ``logits``)."""
        return (self.probs if "probs" in self.__dict__ else self.logits).shape

    @property
    def mean(self):
        return _wrap(np.full(self._extended_shape(), np.nan, np.dtype(self.probs.dtype)))

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return _wrap(np.full(self._extended_shape(), np.nan, np.dtype(self.probs.dtype)))

    def sample(self, sample_shape=Size()):
        if not isinstance(sample_shape, (tuple, list, Size)):
            sample_shape = (sample_shape,)
        with no_grad():
            p = self.probs._data
            shape = tuple(sample_shape) + tuple(self._batch_shape)
            cdf = np.cumsum(np.broadcast_to(p, shape + (self._num_events,)), axis=-1)
            u = draw("random", shape + (1,), np.float64)._data
            index = (u * cdf[..., -1:] >= cdf).sum(-1)
            return _wrap(np.minimum(index, self._num_events - 1).astype(np.int64))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits = self.logits
        index = np.asarray(value._data if isinstance(value, Tensor) else value, np.int64)
        shape = np.broadcast_shapes(index.shape, tuple(logits.shape[:-1]))
        index = np.broadcast_to(index, shape)[..., None]
        logits = logits.expand(*shape, self._num_events)
        return apply(OP_BY_NAME["gather"], logits, dim=-1, index=index).squeeze(-1)

    def entropy(self):
        min_real = float(np.finfo(np.dtype(self.logits.dtype)).min)
        logits = self.logits.clamp(min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        """Every value of the support along a new first dimension (``expand=True``: broadcast over
        batch_shape)."""
        values = _wrap(np.arange(self._num_events, dtype=np.int64)).reshape(
            -1, *([1] * len(self._batch_shape))
        )
        return values.expand(-1, *self._batch_shape) if expand else values


class Independent(Distribution):
    """``base_distribution`` with its rightmost ``reinterpreted_batch_ndims`` batch dims
    treated as event dims (its log-densities summed over them)."""

    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = reinterpreted_batch_ndims
        if n > len(base_distribution.batch_shape):
            raise ValueError(
                "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {n} vs {len(base_distribution.batch_shape)}"
            )
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        super().__init__(
            shape[: len(shape) - event_dim], shape[len(shape) - event_dim :], validate_args
        )

    @property
    def has_rsample(self):
        """True when the base distribution has ``rsample``."""
        return self.base_dist.has_rsample

    @property
    def support(self):
        """The constraint the values satisfy."""
        return self.base_dist.support

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=Size()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
