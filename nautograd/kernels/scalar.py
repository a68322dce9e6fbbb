"""The math vocabulary of elementwise derivatives: written once, run compiled and on tensors.

An elementwise op declares its derivative as a scalar expression of its input ``x``, its
result ``r`` and its float attributes ``p0, p1``, using Python's arithmetic and comparisons
and the functions below (``d = lambda x, r, p0, p1: 1.0 - r * r``). The same expression is
compiled by Numba into the op's backward kernel (each function has an ``overload`` there)
and evaluated on Tensors for ``create_graph`` (each function calls the Tensor method of its
name; ``where`` calls the function the Tensor layer binds with ``bind``, as the kernels do
not know the Tensor class). A forward-mode rule is the same expression times the tangent.

On Python and NumPy numbers the functions follow IEEE arithmetic as compiled code does
(``log(0.0)`` is ``-inf``, not an error).
"""

import math
import numbers

import numba
import numpy as np
from numba.extending import overload

from . import _special, _vmath

_TENSOR = {}  # name -> its implementation on tensors (bind)


def bind(**implementations):
    """Give the vocabulary the Tensor layer's ``where(condition, a, b)`` and the special
    functions that are no Tensor methods (``i1``, ``i0e``, ``i1e``)."""
    _TENSOR.update(implementations)


def _is_number(x):
    return isinstance(x, (numbers.Number, np.number, np.bool_))


def _function(name, numpy_fn, compiled, bound=False):
    """A vocabulary function: ``numpy_fn`` on numbers, the Tensor method ``name`` on tensors
    (``bound``: a function without a Tensor method, torch.special's i1, is the one the Tensor
    layer binds, ``bind``), ``compiled`` (an inlined scalar function) in Numba-compiled code."""

    def fn(x):
        if _is_number(x):
            with np.errstate(all="ignore"):
                return float(numpy_fn(x))
        return _TENSOR[name](x) if bound else getattr(x, name)()

    fn.__name__ = fn.__qualname__ = name
    overload(fn, inline="always")(lambda x: compiled)  # (typing: one implementation)
    return fn


@numba.njit(inline="always")
def _sigmoid(z):
    # 1 / (1 + exp(-z)) with an exp that never overflows (and vectorises: _vmath.vexp)
    e = _vmath.vexp(-abs(z))
    return (1.0 if z >= 0 else e) / (1.0 + e)


def _np_sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z)) if z >= 0 else np.exp(z) / (1.0 + np.exp(z))


exp = _function("exp", np.exp, lambda x: math.exp(x))
log = _function("log", np.log, lambda x: math.log(x))
log1p = _function("log1p", np.log1p, lambda x: math.log1p(x))
sqrt = _function("sqrt", np.sqrt, lambda x: math.sqrt(x))
rsqrt = _function("rsqrt", lambda x: 1.0 / np.sqrt(x), lambda x: 1.0 / math.sqrt(x))
sin = _function("sin", np.sin, lambda x: math.sin(x))
cos = _function("cos", np.cos, lambda x: math.cos(x))
sinh = _function("sinh", np.sinh, lambda x: math.sinh(x))
cosh = _function("cosh", np.cosh, lambda x: math.cosh(x))
tanh = _function("tanh", np.tanh, lambda x: _vmath.vtanh(x))
erf = _function("erf", math.erf, lambda x: math.erf(x))
sigmoid = _function("sigmoid", _np_sigmoid, lambda x: _sigmoid(x))
isfinite = _function("isfinite", np.isfinite, lambda x: math.isfinite(x))
digamma = _function("digamma", _special.digamma, lambda x: _special.digamma(x))


def _bessel(name, nu, scaled, bound=True):
    f = _special.bessel_ie if scaled else _special.bessel_i
    return _function(name, lambda x: f(nu, x), lambda x: f(nu, x), bound)


i0 = _bessel("i0", 0.0, False, bound=False)
i1 = _bessel("i1", 1.0, False)
i0e = _bessel("i0e", 0.0, True)
i1e = _bessel("i1e", 1.0, True)


def polygamma(n, x):
    """The n-th derivative of digamma (``n`` a number: the op's attribute)."""
    if _is_number(x):
        return float(_special.polygamma(float(n), float(x)))
    return x.polygamma(int(n))


@overload(polygamma, inline="always")
def _polygamma(n, x):
    return lambda n, x: _special.polygamma(n, x)


def where(condition, a, b):
    """``a`` where ``condition`` holds, else ``b`` (elementwise on tensors)."""
    if _is_number(condition):
        return a if condition else b
    return _TENSOR["where"](condition, a, b)


@overload(where, inline="always")
def _where(condition, a, b):
    return lambda condition, a, b: a if condition else b


def powc(x, c):
    """``x ** c`` for a number ``c``. Compiled, the exponents torch's pow kernel computes
    without ``pow`` do the same (1: x, 2: x x, 3: x x x, 0.5: sqrt(x), -0.5: 1 / sqrt(x), -2:
    1 / (x x), 0: 1): a ``pow`` call an element made pow's backward at 16,000 float32
    elements ~4x torch's time."""
    if _is_number(x):
        with np.errstate(all="ignore"):
            return float(np.power(x, c))
    return x**c


@overload(powc, inline="always")
def _powc(x, c):
    def impl(x, c):
        y = x * 1.0  # (float64, as x ** c of a float32 x is)
        if c == 1.0:
            return y
        if c == 2.0:
            return y * y
        if c == 0.0:
            return 1.0
        if c == 3.0:
            return y * y * y
        if c == 0.5:
            return math.sqrt(y)
        if c == -0.5:
            return 1.0 / math.sqrt(y)
        if c == -2.0:
            return 1.0 / (y * y)
        return y**c

    return impl


_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def gelu_grad(x):
    """d/dx of x Phi(x): Phi(x) + x phi(x) (compiled: _vmath's vectorisable version)."""
    if _is_number(x):
        return 0.5 * (1.0 + math.erf(x * _INV_SQRT2)) + x * _INV_SQRT_2PI * math.exp(-0.5 * x * x)
    return 0.5 * (1.0 + (x * _INV_SQRT2).erf()) + x * _INV_SQRT_2PI * (-0.5 * x * x).exp()


overload(gelu_grad, inline="always")(lambda x: lambda x: _vmath.vgelu_grad(x))
