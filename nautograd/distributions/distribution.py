"""The base class of the distributions (torch.distributions.Distribution)."""

import numpy as np

from .. import _random
from ..autograd.grad_mode import no_grad
from ..tensor import DEFAULT_FLOAT, Size, Tensor, _wrap
from . import constraints


class Distribution:
    """A distribution with ``batch_shape`` independent members, each over values of
    ``event_shape``. Parameters are checked against ``arg_constraints`` and values against
    ``support`` when ``validate_args`` is on (the default, as torch's)."""

    has_rsample = False
    has_enumerate_support = False
    arg_constraints = {}
    support = None
    _validate_default = True

    @staticmethod
    def set_default_validate_args(value):
        """Turn the checks of parameters and values on or off for new distributions."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_default = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is None:
            validate_args = Distribution._validate_default
        self._validate_args = validate_args
        if not validate_args:
            return
        for name, constraint in self.arg_constraints.items():
            if isinstance(constraint, constraints._Dependent) or name not in self.__dict__:
                continue
            value = getattr(self, name)
            if not np.all(constraint.check(value._data)):
                shown = value.item() if value.ndim == 0 else value
                raise ValueError(
                    f"Expected parameter {name} (Tensor of shape {tuple(value.shape)}) of "
                    f"distribution {self!r} to satisfy the constraint {constraint!r}, but "
                    f"found invalid values:\n{shown}"
                )

    @property
    def batch_shape(self):
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self):
        """The shape of a single sample."""
        return self._event_shape

    @property
    def mean(self):
        """The mean of the distribution."""
        raise NotImplementedError

    @property
    def mode(self):
        """The mode of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        """The variance of the distribution."""
        raise NotImplementedError

    @property
    def stddev(self):
        """The standard deviation of the distribution."""
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()):
        """A sample of shape ``sample_shape + batch_shape + event_shape``, not in the graph."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        """A reparameterized sample: gradients flow to the parameters."""
        raise NotImplementedError

    def sample_n(self, n):
        """``n`` samples (deprecated in torch: use ``sample((n,))``)."""
        return self.sample(Size((n,)))

    def log_prob(self, value):
        """The log of the probability density (or mass) at ``value``."""
        raise NotImplementedError

    def cdf(self, value):
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value):
        """The inverse cumulative distribution function at ``value``."""
        raise NotImplementedError

    def entropy(self):
        """The entropy, over batch_shape."""
        raise NotImplementedError

    def perplexity(self):
        """exp(entropy)."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=Size()):
        if not isinstance(sample_shape, (tuple, list, Size)):
            sample_shape = (sample_shape,)
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim = len(self._event_shape)
        if tuple(value.shape[value.ndim - event_dim :]) != tuple(self._event_shape):
            raise ValueError(
                f"The right-most size of value must match event_shape: {tuple(value.shape)} "
                f"vs {tuple(self._event_shape)}."
            )
        shape = tuple(value.shape)
        actual, expected = shape, tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual), reversed(expected), strict=False):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"Value is not broadcastable with batch_shape+event_shape: {actual} vs "
                    f"{expected}."
                )
        support = self.support
        valid = support.check(value._data)
        if not np.all(valid):
            raise ValueError(
                f"Expected value argument (Tensor of shape {tuple(value.shape)}) to be within "
                f"the support ({support!r}) of the distribution {self!r}, but found invalid "
                f"values:\n{value}"
            )

    def __repr__(self):
        shown = []
        for name in self.arg_constraints:
            if name in self.__dict__:
                value = self.__dict__[name]
                shown.append(f"{name}: {value.item() if value.numel() == 1 else value.size()}")
        return f"{type(self).__name__}({', '.join(shown)})"


def _dtype_of(values):
    for v in values:
        if isinstance(v, Tensor):
            return v.dtype
    return DEFAULT_FLOAT[0]


def broadcast_all(*values):
    """``values`` (tensors or numbers) as tensors of one broadcast shape; numbers take the
    first tensor's dtype (the default dtype if there is none)."""
    dtype = _dtype_of(values)
    tensors = [v if isinstance(v, Tensor) else _wrap(np.asarray(v, dtype=dtype)) for v in values]
    shape = np.broadcast_shapes(*[tuple(t.shape) for t in tensors])
    return tuple(t if tuple(t.shape) == shape else t.expand(*shape) for t in tensors)


def draw(method, shape, dtype, **kwargs):
    """A numpy draw of ``shape`` from nautograd's generator (see manual_seed), as a tensor."""
    values = getattr(_random.generator(), method)(size=tuple(shape), **kwargs)
    return _wrap(np.asarray(values, dtype=dtype))
