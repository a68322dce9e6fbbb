"""Elementwise ops: arithmetic, transcendental functions, activations, comparisons, casts."""

import math
import numbers

import numba
import numpy as np

from ._jit import bcast_offsets, kernel, saved, view
from ._shapes import binary_params, nary_params, numel
from .registry import Case, defop

# ---------------------------------------------------------------------------------------------
# unary ops: result = f(x); grad_x += grad * f'(x) with f' given by d(x, result, p0, p1)


def _unary_kernel(name, d):
    """The backward kernel of a unary op: grad_x += grad * d(x, result, p0, p1).

    ``d`` is closed over (a compile-time constant): passing it as an argument would make the
    scheduler uncacheable (Numba embeds the dispatcher's address as a dynamic global).
    """

    def backward(G, G2, go, gi, V, so, sa, ip, fp):
        if gi[0] < 0:
            return
        n = ip[0]
        g = view(G, go[0], n)
        grad_x = view(G, gi[0], n)
        x = saved(V, so, sa, 0, n)
        result = saved(V, so, sa, 1, n)
        p0 = fp[0]
        p1 = fp[1]
        for i in range(n):
            grad_x[i] += g[i] * d(x[i], result[i], p0, p1)

    backward.__name__ = backward.__qualname__ = f"{name}_backward"
    return kernel(backward)


def _unary_forward(f):
    def forward(x):
        result = f(x)
        return result, (x, result), (result.size,), (0.0, 0.0)

    return forward


def _unary_op(name, f, d, low=-2.0, high=2.0, **kw):
    backward = _unary_kernel(name, d)
    cases = [Case(((3, 4),), low=low, high=high), Case(((),), low=low, high=high)]
    kw.setdefault("methods", (name,))
    return defop(name, _unary_forward(f), backward, cases=cases, **kw)


@numba.njit
def _d_neg(x, result, p0, p1):
    return -1.0


@numba.njit
def _d_abs(x, result, p0, p1):
    return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)


@numba.njit
def _d_sqrt(x, result, p0, p1):
    return 0.5 / result


@numba.njit
def _d_exp(x, result, p0, p1):
    return result


@numba.njit
def _d_log(x, result, p0, p1):
    return 1.0 / x


@numba.njit
def _d_log1p(x, result, p0, p1):
    return 1.0 / (1.0 + x)


@numba.njit
def _d_expm1(x, result, p0, p1):
    return result + 1.0


@numba.njit
def _d_sin(x, result, p0, p1):
    return math.cos(x)


@numba.njit
def _d_cos(x, result, p0, p1):
    return -math.sin(x)


@numba.njit
def _d_tanh(x, result, p0, p1):
    return 1.0 - result * result


@numba.njit
def _d_sigmoid(x, result, p0, p1):
    return result * (1.0 - result)


@numba.njit
def _d_relu(x, result, p0, p1):
    # torch: threshold_backward(grad, result, 0): the gradient passes where result > 0
    return 1.0 if result > 0 else 0.0


@numba.njit
def _d_softplus(x, result, p0, p1):
    # p0 = beta, p1 = threshold; d/dx log1p(exp(beta x))/beta = sigmoid(beta x)
    z = x * p0
    if z > p1:
        return 1.0
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@numba.njit
def _d_pow_scalar(x, result, p0, p1):
    # d/dx x**c = c x**(c-1); torch gives exactly 0 for c == 0
    if p0 == 0.0:
        return 0.0
    return p0 * x ** (p0 - 1.0)


@numba.njit
def _d_rpow(x, result, p0, p1):
    # d/dy a**y = a**y log(a); p0 = a
    return result * math.log(p0)


@numba.njit
def _d_clamp(x, result, p0, p1):
    # torch: the gradient passes where min <= x <= max (both ends inclusive)
    return 1.0 if (x >= p0 and x <= p1) else 0.0


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


neg = _unary_op(
    "neg", np.negative, _d_neg, dunders=("__neg__",), methods=("neg", "negative"), int_ok=True
)
abs_ = _unary_op("abs", np.abs, _d_abs, dunders=("__abs__",), int_ok=True)
sqrt = _unary_op("sqrt", np.sqrt, _d_sqrt, low=0.1, high=3.0)
exp = _unary_op("exp", np.exp, _d_exp)
log = _unary_op("log", np.log, _d_log, low=0.1, high=3.0)
log1p = _unary_op("log1p", np.log1p, _d_log1p, low=-0.9, high=3.0)
expm1 = _unary_op("expm1", np.expm1, _d_expm1)
sin = _unary_op("sin", np.sin, _d_sin)
cos = _unary_op("cos", np.cos, _d_cos)
tanh = _unary_op("tanh", np.tanh, _d_tanh, nn_functional=True)
sigmoid = _unary_op("sigmoid", _sigmoid, _d_sigmoid, nn_functional=True)


@numba.njit(cache=True, nogil=True)
def _relu_loop(x):
    # one vectorised pass; NaN passes through as in torch (np.maximum is ~5x slower here)
    out = np.empty_like(x)
    xf = x.reshape(-1)
    of = out.reshape(-1)
    zero = x.dtype.type(0)
    for i in range(xf.size):
        v = xf[i]
        of[i] = zero if v <= zero else v
    return out


def _relu(x):
    if x.size >= 4096 and x.dtype.kind == "f" and x.flags.c_contiguous:
        return _relu_loop(x)
    return np.maximum(x, x.dtype.type(0))


relu = _unary_op("relu", _relu, _d_relu, nn_functional=True, int_ok=True)


def _softplus_forward(x, beta=1.0, threshold=20.0):
    # torch: log1p(exp(beta x)) / beta, and x itself where beta x > threshold
    if x.size == 1 and x.ndim == 0:  # one element: math is ~8x cheaper than 5 numpy calls
        v = float(x)
        z = v * beta
        r = v if z > threshold else math.log1p(math.exp(z)) / beta
        result = np.asarray(r, dtype=x.dtype)
        return result, (x, result), (1,), (float(beta), float(threshold))
    z = x * x.dtype.type(beta)
    safe = np.minimum(z, x.dtype.type(threshold))
    result = np.where(z > threshold, x, np.log1p(np.exp(safe)) / x.dtype.type(beta))
    result = result.astype(x.dtype, copy=False)
    return result, (x, result), (result.size,), (float(beta), float(threshold))


softplus_backward = _unary_kernel("softplus", _d_softplus)


softplus = defop(
    "softplus",
    _softplus_forward,
    softplus_backward,
    methods=(),
    nn_functional=True,
    cases=[
        Case(((3, 4),), low=-25, high=25),
        Case(((5,),), {"beta": 2.0, "threshold": 3.0}, low=-4, high=4),
    ],
)


def _pow_scalar_forward(x, exponent):
    c = float(exponent)
    result = np.power(x, x.dtype.type(c))
    return result, (x, result), (result.size,), (c, 0.0)


pow_scalar_backward = _unary_kernel("pow_scalar", _d_pow_scalar)


pow_scalar = defop(
    "pow_scalar",
    _pow_scalar_forward,
    pow_scalar_backward,
    node_name="PowBackward0",
    functions=(),
    cases=[
        Case(((3, 4),), {"exponent": 3.0}),
        Case(((3, 4),), {"exponent": 2.5}, low=0.2, high=2.0),
        Case(((4,),), {"exponent": -1.5}, low=0.3, high=2.0),
        Case(((4,),), {"exponent": 0.0}),
    ],
)


def _rpow_forward(y, base):
    a = float(base)
    result = np.power(y.dtype.type(a), y)
    return result, (y, result), (result.size,), (a, 0.0)


rpow_backward = _unary_kernel("rpow", _d_rpow)


rpow = defop(
    "rpow",
    _rpow_forward,
    rpow_backward,
    node_name="PowBackward2",
    functions=(),
    cases=[Case(((3, 4),), {"base": 2.5}), Case(((3,),), {"base": 0.5})],
)


def _clamp_forward(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("clamp(): At least one of 'min' or 'max' must not be None")
    lo = -math.inf if min is None else float(min)
    hi = math.inf if max is None else float(max)
    result = np.clip(x, x.dtype.type(lo), x.dtype.type(hi))
    if lo > hi:  # torch: every element becomes max
        result = np.full_like(x, hi)
    return result, (x, result), (result.size,), (lo, hi)


clamp_backward = _unary_kernel("clamp", _d_clamp)


clamp = defop(
    "clamp",
    _clamp_forward,
    clamp_backward,
    methods=("clamp", "clip"),
    functions=("clamp", "clip"),
    int_ok=True,
    node_name="ClampBackward1",
    cases=[
        Case(((3, 4),), {"min": -0.5, "max": 0.7}),
        Case(((6,),), {"min": 0.1}),
        Case(((6,),), {"max": 0.1}),
    ],
)

# ---------------------------------------------------------------------------------------------
# broadcasting binary ops: result = f(x, y); (dx, dy) = partial(x, y, result)


def _binary_kernel(name, partial):
    """The backward kernel of a broadcasting binary op; (dx, dy) = partial(x, y)."""

    def backward(G, G2, go, gi, V, so, sa, ip, fp):
        n, nx, ny, mode = ip[0], ip[1], ip[2], ip[3]
        g = view(G, go[0], n)
        x = saved(V, so, sa, 0, nx)
        y = saved(V, so, sa, 1, ny)
        if mode == 2:
            # two dims after coalescing (bias rows, columns, outer products): walk them
            # directly instead of building index arrays
            d0, d1 = ip[4], ip[5]
            x0, x1, y0, y1 = ip[6], ip[7], ip[8], ip[9]
            if gi[0] >= 0:
                grad_x = view(G, gi[0], nx)
                for a in range(d0):
                    for b in range(d1):
                        xi = a * x0 + b * x1
                        yi = a * y0 + b * y1
                        grad_x[xi] += g[a * d1 + b] * partial(x[xi], y[yi])[0]
            if gi[1] >= 0:
                grad_y = view(G, gi[1], ny)
                for a in range(d0):
                    for b in range(d1):
                        xi = a * x0 + b * x1
                        yi = a * y0 + b * y1
                        grad_y[yi] += g[a * d1 + b] * partial(x[xi], y[yi])[1]
            return
        if mode > 0:
            xo = bcast_offsets(ip, 4, mode, 0, n)
            yo = bcast_offsets(ip, 4, mode, 1, n)
        else:
            # same shapes (0), one-element y (-1) or x (-2): x at i * sx, y at i * sy
            sx = 0 if mode == -2 else 1
            sy = 0 if mode == -1 else 1
            xo = np.empty(0, np.int64)
            yo = xo
        # one loop per input keeps each loop simple (no unswitching: compile time)
        if gi[0] >= 0:
            grad_x = view(G, gi[0], nx)
            if mode <= 0:
                for i in range(n):
                    grad_x[i * sx] += g[i] * partial(x[i * sx], y[i * sy])[0]
            else:
                # accumulating at the broadcast offset sums over the broadcast dims
                for i in range(n):
                    grad_x[xo[i]] += g[i] * partial(x[xo[i]], y[yo[i]])[0]
        if gi[1] >= 0:
            grad_y = view(G, gi[1], ny)
            if mode <= 0:
                for i in range(n):
                    grad_y[i * sy] += g[i] * partial(x[i * sx], y[i * sy])[1]
            else:
                for i in range(n):
                    grad_y[yo[i]] += g[i] * partial(x[xo[i]], y[yo[i]])[1]

    backward.__name__ = backward.__qualname__ = f"{name}_backward"
    return kernel(backward)


def _binary_forward(name, f, save=True):
    def forward(x, y):
        out, ip = binary_params(name, x.shape, y.shape)
        result = f(x, y)
        return result, ((x, y) if save else ()), ip, ()

    return forward


_BINARY_CASES = [
    Case(((3, 4), (3, 4))),
    Case(((3, 4), (4,))),
    Case(((2, 1, 4), (3, 1))),
    Case(((), (3,))),
    Case(((3,), ())),
    Case(((2, 3), 1.5)),
    Case((1.5, (2, 3))),
]


def _binary_op(name, f, partial, save=True, cases=None, **kw):
    backward = _binary_kernel(name, partial)
    return defop(
        name, _binary_forward(name, f, save), backward, nin=2, cases=cases or _BINARY_CASES, **kw
    )


@numba.njit
def _p_mul(x, y):
    return y, x


@numba.njit
def _p_div(x, y):
    return 1.0 / y, -x / (y * y)


@numba.njit
def _p_pow(x, y):
    # d/dx x**y = y x**(y-1); d/dy x**y = x**y log x, taken as 0 where x == 0 and y >= 0 (torch)
    dx = 0.0 if y == 0.0 else y * x ** (y - 1.0)
    if x == 0.0 and y >= 0.0:
        dy = 0.0
    else:
        dy = x**y * math.log(x)
    return dx, dy


@numba.njit
def _p_maximum(x, y):
    # torch splits the gradient evenly at ties
    if x > y:
        return 1.0, 0.0
    if x < y:
        return 0.0, 1.0
    return 0.5, 0.5


@numba.njit
def _p_minimum(x, y):
    if x < y:
        return 1.0, 0.0
    if x > y:
        return 0.0, 1.0
    return 0.5, 0.5


mul = _binary_op(
    "mul",
    np.multiply,
    _p_mul,
    methods=("mul", "multiply"),
    functions=("mul", "multiply"),
    dunders=("__mul__", "__rmul__"),
    int_ok=True,
)
div = _binary_op(
    "div",
    np.true_divide,
    _p_div,
    methods=("div", "divide", "true_divide"),
    functions=("div", "divide", "true_divide"),
    dunders=("__truediv__", "__rtruediv__"),
    cases=[Case(c.shapes, low=0.3, high=2.0) for c in _BINARY_CASES],
)


def _pow_api(apply, input, exponent):
    """torch.pow: tensor ** number, number ** tensor, tensor ** tensor."""
    if isinstance(exponent, numbers.Number) and not isinstance(exponent, bool):
        return apply(pow_scalar, input, exponent=exponent)
    if isinstance(input, numbers.Number) and not isinstance(input, bool):
        return apply(rpow, exponent, base=input)
    return apply(pow_, input, exponent)


pow_ = _binary_op(
    "pow",
    np.power,
    _p_pow,
    api=_pow_api,
    methods=("pow",),
    dunders=("__pow__", "__rpow__"),
    node_name="PowBackward1",
    cases=[Case(c.shapes, low=0.3, high=2.0) for c in _BINARY_CASES],
)
_TENSOR_CASES = [c for c in _BINARY_CASES if all(isinstance(s, tuple) for s in c.shapes)]
maximum = _binary_op(
    "maximum", np.maximum, _p_maximum, methods=("maximum",), int_ok=True, cases=_TENSOR_CASES
)
minimum = _binary_op(
    "minimum", np.minimum, _p_minimum, methods=("minimum",), int_ok=True, cases=_TENSOR_CASES
)


@kernel
def _linear2(G, go, gi, ip, ax, ay):
    # grad_x += ax * grad, grad_y += ay * grad, summed over broadcast dims (add, sub)
    n, nx, ny, mode = ip[0], ip[1], ip[2], ip[3]
    g = view(G, go[0], n)
    for k in range(2):
        if gi[k] < 0:
            continue
        a = ax if k == 0 else ay
        m = nx if k == 0 else ny
        grad = view(G, gi[k], m)
        if m == n:  # this operand is not broadcast
            for i in range(n):
                grad[i] += a * g[i]
        elif mode == 2:  # two dims after coalescing (a bias row or column): no index arrays
            d0, d1 = ip[4], ip[5]
            s0, s1 = ip[6 + 2 * k], ip[7 + 2 * k]
            for r in range(d0):
                for c in range(d1):
                    grad[r * s0 + c * s1] += a * g[r * d1 + c]
        elif m == 1:
            acc = 0.0
            for i in range(n):
                acc += g[i]
            grad[0] += a * acc
        else:
            offs = bcast_offsets(ip, 4, mode, k, n)
            for i in range(n):
                grad[offs[i]] += a * g[i]


def _add_forward(x, y, alpha=1):
    out, ip = binary_params("add", x.shape, y.shape)
    result = np.add(x, y) if alpha == 1 else np.add(x, y * y.dtype.type(alpha))
    return result, (), ip, (float(alpha),)


def _sub_forward(x, y, alpha=1):
    out, ip = binary_params("sub", x.shape, y.shape)
    result = np.subtract(x, y) if alpha == 1 else np.subtract(x, y * y.dtype.type(alpha))
    return result, (), ip, (float(alpha),)


@kernel
def add_backward(G, G2, go, gi, V, so, sa, ip, fp):
    _linear2(G, go, gi, ip, 1.0, fp[0])


@kernel
def sub_backward(G, G2, go, gi, V, so, sa, ip, fp):
    _linear2(G, go, gi, ip, 1.0, -fp[0])


add = defop(
    "add",
    _add_forward,
    add_backward,
    nin=2,
    methods=("add",),
    dunders=("__add__", "__radd__"),
    int_ok=True,
    cases=_BINARY_CASES + [Case(((3,), (3,)), {"alpha": 2.5})],
)
sub = defop(
    "sub",
    _sub_forward,
    sub_backward,
    nin=2,
    methods=("sub", "subtract"),
    functions=("sub", "subtract"),
    dunders=("__sub__", "__rsub__"),
    int_ok=True,
    cases=_BINARY_CASES + [Case(((3,), (3,)), {"alpha": -0.5})],
)

# ---------------------------------------------------------------------------------------------
# where(condition, x, y): the condition is a constant mask


def _where_forward(x, y, condition):
    cond = np.asarray(condition, dtype=bool)
    out, ip = nary_params("where", [cond.shape, x.shape, y.shape])
    result = np.where(cond, x, y).astype(np.result_type(x, y), copy=False)
    mask = cond.astype(result.dtype)
    return result, (mask,), ip + (numel(cond.shape), numel(x.shape), numel(y.shape)), ()


@kernel
def where_backward(G, G2, go, gi, V, so, sa, ip, fp):
    n, nd = ip[0], ip[1]
    m = ip[2 + 4 * nd]
    mask = saved(V, so, sa, 0, m)
    g = view(G, go[0], n)
    mo = bcast_offsets(ip, 2, nd, 0, n)
    for k in range(2):
        if gi[k] < 0:
            continue
        grad = view(G, gi[k], ip[3 + 4 * nd + k])
        offs = bcast_offsets(ip, 2, nd, 1 + k, n)
        for i in range(n):
            c = mask[mo[i]]
            grad[offs[i]] += g[i] * (c if k == 0 else 1.0 - c)


where = defop(
    "where",
    _where_forward,
    where_backward,
    nin=2,
    api=lambda apply, condition, input, other: apply(where, input, other, condition=condition),
    int_ok=True,
    cases=[
        Case(((3, 4), (3, 4)), {"condition": "mask(3, 4)"}),
        Case(((3, 1), (4,)), {"condition": "mask(3, 4)"}),
        Case(((3, 4), 0.0), {"condition": "mask(4)"}),
    ],
)

# ---------------------------------------------------------------------------------------------
# casts and copies


def _to_forward(x, dtype):
    result = x.astype(dtype)
    return result, (), (result.size, int(result.dtype == x.dtype)), ()


@kernel
def to_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # the only kernel that crosses dtypes: a converted input's gradient lives in the other
    # dtype's arena (ip[1] == 1: same dtype, no conversion)
    if gi[0] < 0:
        return
    n = ip[0]
    g = view(G, go[0], n)
    if ip[1]:
        grad_x = view(G, gi[0], n)
        for i in range(n):
            grad_x[i] += g[i]
    else:
        grad_x2 = view(G2, gi[0], n)
        for i in range(n):
            grad_x2[i] += g[i]


to_copy = defop(
    "_to_copy",
    _to_forward,
    to_backward,
    node_name="ToCopyBackward0",
    functions=(),
    int_ok=True,
    cases=[
        Case(((2, 3),), {"dtype": np.float32}),
        Case(((2, 3),), {"dtype": np.float64}),
    ],
)


def _clone_forward(x):
    result = np.array(x, copy=True, order="C")
    return result, (), (result.size,), ()


@kernel
def copy_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # grad_x += grad for ops that keep every element in place (clone, view, reshape, ...)
    if gi[0] < 0:
        return
    n = ip[0]
    g = view(G, go[0], n)
    grad_x = view(G, gi[0], n)
    for i in range(n):
        grad_x[i] += g[i]


clone = defop(
    "clone",
    _clone_forward,
    copy_backward,
    methods=("clone",),
    int_ok=True,
    cases=[Case(((2, 3),))],
)

# ---------------------------------------------------------------------------------------------
# comparisons: bool results, no gradient


def _cmp(name, f, dunder):
    def forward(x, y):
        binary_params(name, x.shape, y.shape)
        return f(x, y), (), (), ()

    return defop(
        name,
        forward,
        nin=2,
        methods=(name,),
        dunders=(dunder,),
        int_result=True,
        int_ok=True,
        cases=[Case(((3, 4), (4,))), Case(((3,), 0.5))],
    )


lt = _cmp("lt", np.less, "__lt__")
le = _cmp("le", np.less_equal, "__le__")
gt = _cmp("gt", np.greater, "__gt__")
ge = _cmp("ge", np.greater_equal, "__ge__")
eq = _cmp("eq", np.equal, "__eq__")
ne = _cmp("ne", np.not_equal, "__ne__")
