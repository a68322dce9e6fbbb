"""The constraints a distribution's parameters and values satisfy (torch.distributions.constraints):
each ``check(value)`` gives a bool array, True where the value is valid."""

import numpy as np


class Constraint:
    """A region of valid values; ``event_dim`` dims on the right are checked as one value."""

    event_dim = 0

    def check(self, value):
        """A bool tensor: where ``value`` satisfies the constraint."""
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__[1:] + "()"


class _Real(Constraint):
    def check(self, value):
        return ~np.isnan(value)


class _Boolean(Constraint):
    def check(self, value):
        return (value == 0) | (value == 1)


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return value > self.lower_bound

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    def check(self, value):
        return value >= self.lower_bound

    def __repr__(self):
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _IndependentConstraint(Constraint):
    """``base`` with its ``reinterpreted_batch_ndims`` rightmost dims checked as one value."""

    def __init__(self, base, reinterpreted_batch_ndims):
        self.base_constraint = base
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.event_dim = base.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        valid = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        return np.all(valid, axis=tuple(range(-n, 0))) if n else valid

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)

    def __repr__(self):
        return f"HalfOpenInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerInterval(_Interval):
    def check(self, value):
        return (value % 1 == 0) & super().check(value)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return np.all(value >= 0, axis=-1) & (np.abs(value.sum(-1) - 1) < 1e-6)


class _RealVector(Constraint):
    event_dim = 1

    def check(self, value):
        return np.all(~np.isnan(value), axis=-1)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        lower = np.all(np.triu(value, 1) == 0, axis=(-2, -1))
        return lower & np.all(np.diagonal(value, axis1=-2, axis2=-1) > 0, axis=-1)


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, value):
        sym = np.all(np.abs(value - np.swapaxes(value, -1, -2)) < 1e-6, axis=(-2, -1))
        return sym & np.all(np.linalg.eigvalsh(value) > 0, axis=-1)


real = _Real()
boolean = _Boolean()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
real_vector = _RealVector()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()


def interval(lower_bound, upper_bound):
    return _Interval(lower_bound, upper_bound)


def half_open_interval(lower_bound, upper_bound):
    return _HalfOpenInterval(lower_bound, upper_bound)


def integer_interval(lower_bound, upper_bound):
    return _IntegerInterval(lower_bound, upper_bound)


class _Dependent(Constraint):
    """A support that depends on the parameters (Uniform's interval): resolved per instance."""

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


def independent(base_constraint, reinterpreted_batch_ndims):
    """``base_constraint`` over the ``reinterpreted_batch_ndims`` rightmost dims at once."""
    return _IndependentConstraint(base_constraint, reinterpreted_batch_ndims)
