"""Elementwise ops: broadcasting arithmetic, where, casts and copies, comparisons (the unary
functions are in pointwise.py)."""

import numba
import numpy as np

from .._numba_setup import cached
from .._threads import ROWS_MIN, parallel_for
from ._jit import assigning, bcast_offsets, kernel, parallel, part, saved, scaled_into, view
from ._shapes import binary_params, nary_params, numel
from ._vmath import LOOP
from .registry import Case, defop, formula_of

# ---------------------------------------------------------------------------------------------
# broadcasting binary ops: result = f(x, y); (dx, dy) = partial(x, y, result)


def _binary_kernel(name, partial, select=False):
    """The backward kernel of a broadcasting binary op; (dx, dy) = partial(x, y).

    ``select``: a partial of 0 passes no gradient at all, as torch's masked gradients of
    piecewise ops (maximum, minimum): a NaN or inf gradient there gives 0, not NaN (0 * NaN)."""

    if select:

        @numba.njit(inline="always")
        def times(g, d):
            return 0.0 if d == 0.0 else g * d

    else:

        @numba.njit(inline="always")
        def times(g, d):
            return g * d

    # The same-shape (or one-element other operand) gradients, over slices indexed from 0
    # with a one-element operand hoisted, so that each loop vectorises: over range(lo, hi)
    # with y[i * sy], numba's negative-index branch kept them scalar ((128, 256) float32,
    # 19.8 -> 2.5 us). One helper per gradient: partial's tuple is indexed by a constant.

    @numba.njit(inline="always")
    def pair_x(grad, g, x, y, lo, hi, sy, assign):
        # grad[i] (+)= g[i] * d/dx at (x[i], y[i * sy]) for i in lo:hi
        m = hi - lo
        out, gp, xp = grad[lo:hi], g[lo:hi], x[lo:hi]
        if sy == 1:
            yp = y[lo:hi]
            if assign:
                for i in range(m):
                    out[i] = times(gp[i], partial(xp[i], yp[i])[0])
            else:
                for i in range(m):
                    out[i] += times(gp[i], partial(xp[i], yp[i])[0])
        else:
            c = y[0]
            if assign:
                for i in range(m):
                    out[i] = times(gp[i], partial(xp[i], c)[0])
            else:
                for i in range(m):
                    out[i] += times(gp[i], partial(xp[i], c)[0])

    @numba.njit(inline="always")
    def pair_y(grad, g, x, y, lo, hi, sx, assign):
        # grad[i] (+)= g[i] * d/dy at (x[i * sx], y[i]) for i in lo:hi
        m = hi - lo
        out, gp, yp = grad[lo:hi], g[lo:hi], y[lo:hi]
        if sx == 1:
            xp = x[lo:hi]
            if assign:
                for i in range(m):
                    out[i] = times(gp[i], partial(xp[i], yp[i])[1])
            else:
                for i in range(m):
                    out[i] += times(gp[i], partial(xp[i], yp[i])[1])
        else:
            c = x[0]
            if assign:
                for i in range(m):
                    out[i] = times(gp[i], partial(c, yp[i])[1])
            else:
                for i in range(m):
                    out[i] += times(gp[i], partial(c, yp[i])[1])

    def backward(G, G2, go, gi, V, so, sa, ip, fp):
        # gi[2], gi[3]: assign flags (_jit.assigning); gi[4], gi[5]: part p of P
        # (_jit.parallel): every part writes a disjoint share of each gradient
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
                # a part owns the rows of x (or, if x is broadcast along them, its columns)
                a0, a1, b0, b1 = _bias_share(gi, d0, d1, x0)
                if gi[2] == 1 and nx == n and y0 == 0 and y1 == 1:
                    # fresh, x not broadcast and y a row (x * w, w of shape (d1,)): row
                    # slices indexed from 0, which vectorise (as add's bias row)
                    yr = y[b0:b1]
                    for a in range(a0, a1):
                        lo = a * d1 + b0
                        gr, xr, out = g[lo : lo + b1 - b0], x[lo : lo + b1 - b0], grad_x[lo:]
                        for j in range(b1 - b0):
                            out[j] = times(gr[j], partial(xr[j], yr[j])[0])
                elif gi[2] == 1 and nx == n:
                    # fresh and not broadcast: every element of grad_x is written once (x is
                    # contiguous: xi = a * d1 + b)
                    for a in range(a0, a1):
                        for b in range(b0, b1):
                            i = a * d1 + b
                            grad_x[i] = times(g[i], partial(x[i], y[a * y0 + b * y1])[0])
                else:
                    if gi[2] == 1:
                        _zero_share(grad_x, a0, a1, b0, b1, x0, x1)
                    for a in range(a0, a1):
                        for b in range(b0, b1):
                            xi = a * x0 + b * x1
                            yi = a * y0 + b * y1
                            grad_x[xi] += times(g[a * d1 + b], partial(x[xi], y[yi])[0])
            if gi[1] >= 0:
                grad_y = view(G, gi[1], ny)
                a0, a1, b0, b1 = _bias_share(gi, d0, d1, y0)
                if gi[3] == 1:
                    _zero_share(grad_y, a0, a1, b0, b1, y0, y1)
                if nx == n and y0 == 0 and y1 == 1:
                    # y a row, x not broadcast: grad_y[b] sums over the rows, each a slice
                    # indexed from 0 (the strided loop below does not vectorise: x * w with w
                    # of shape (256,) and x (128, 256) float32 cost 92 us of backward where a
                    # same-shape product costs 33)
                    gy, yr = grad_y[b0:b1], y[b0:b1]
                    for a in range(a0, a1):
                        lo = a * d1 + b0
                        gr, xr = g[lo : lo + b1 - b0], x[lo : lo + b1 - b0]
                        for j in range(b1 - b0):
                            gy[j] += times(gr[j], partial(xr[j], yr[j])[1])
                else:
                    for a in range(a0, a1):
                        for b in range(b0, b1):
                            xi = a * x0 + b * x1
                            yi = a * y0 + b * y1
                            grad_y[yi] += times(g[a * d1 + b], partial(x[xi], y[yi])[1])
            return
        if mode > 0:
            if gi[4] != 0:
                return  # general broadcasting: part 0 does all
            xo = bcast_offsets(ip, 4, mode, 0, n)
            yo = bcast_offsets(ip, 4, mode, 1, n)
        else:
            # same shapes (0), one-element y (-1) or x (-2): x at i * sx, y at i * sy
            sx = 0 if mode == -2 else 1
            sy = 0 if mode == -1 else 1
            xo = np.empty(0, np.int64)
            yo = xo
        # elements lo:hi of a gradient that is not broadcast; a one-element gradient (a sum
        # over all n) is part 0's
        lo, hi = part(gi, 2, n)
        # one loop per input keeps each loop simple (no unswitching: compile time)
        if gi[0] >= 0:
            grad_x = view(G, gi[0], nx)
            if mode <= 0 and sx == 1:
                pair_x(grad_x, g, x, y, lo, hi, sy, gi[2] == 1)
            elif mode <= 0:
                if gi[4] == 0:
                    acc = 0.0
                    for i in range(n):
                        acc += times(g[i], partial(x[0], y[i])[0])
                    grad_x[0] = acc if gi[2] == 1 else grad_x[0] + acc
            else:
                if gi[2] == 1:
                    grad_x[:] = 0
                # accumulating at the broadcast offset sums over the broadcast dims
                for i in range(n):
                    grad_x[xo[i]] += times(g[i], partial(x[xo[i]], y[yo[i]])[0])
        if gi[1] >= 0:
            grad_y = view(G, gi[1], ny)
            if mode <= 0 and sy == 1:
                pair_y(grad_y, g, x, y, lo, hi, sx, gi[3] == 1)
            elif mode <= 0:
                if gi[4] == 0:
                    acc = 0.0
                    for i in range(n):
                        acc += times(g[i], partial(x[i], y[0])[1])
                    grad_y[0] = acc if gi[3] == 1 else grad_y[0] + acc
            else:
                if gi[3] == 1:
                    grad_y[:] = 0
                for i in range(n):
                    grad_y[yo[i]] += times(g[i], partial(x[xo[i]], y[yo[i]])[1])

    backward.__name__ = backward.__qualname__ = f"{name}_backward"
    return parallel(assigning(kernel(backward)))


@numba.njit(inline="always")
def _bias_share(gi, d0, d1, s0):
    """(a0, a1, b0, b1): the rows and columns of a (d0, d1) walk this part owns for an operand
    with row stride ``s0``: its rows, or all rows and its columns if the operand is broadcast
    along the rows (its gradient then sums over them, and a row split would race)."""
    if s0 == 0:
        b0, b1 = part(gi, 2, d1)
        return 0, d0, b0, b1
    a0, a1 = part(gi, 2, d0)
    return a0, a1, 0, d1


@numba.njit(inline="always")
def _zero_share(grad, a0, a1, b0, b1, s0, s1):
    for a in range(a0, a1):
        for b in range(b0, b1):
            grad[a * s0 + b * s1] = 0


# Two dims after coalescing, one float dtype: a bias row (x (m, n) + b (n,)), a column, or
# the mirror images. numpy walks such a pair one row per inner-loop call, ~0.1 us a row:
# (100, 1000) float64 times a row took 27.5 us, this loop 14.5 (one thread, timeit)
ROWS_ADD, ROWS_SUB, ROWS_MUL, ROWS_DIV = range(4)
_ROWS_MIN = 4096  # elements from which the compiled loop runs (its call costs ~0.5 us)


@numba.njit(inline="always")
def _rows_op(code, a, b):
    if code == ROWS_ADD:
        return a + b
    if code == ROWS_SUB:
        return a - b
    if code == ROWS_MUL:
        return a * b
    return a / b


@cached(**LOOP)
def _rows_loop(code, x, y, out, d1, x0, x1, y0, y1, lo, hi):
    # out[i, j] = x[i x0 + j x1] op y[i y0 + j y1] for rows lo..hi; x1, y1 in {0, 1}, not
    # both 0. Row slices indexed from 0 (they vectorise); the code's branch is hoisted
    for i in range(lo, hi):
        o = out[i * d1 : (i + 1) * d1]
        if x1 == 1 and y1 == 1:
            xr = x[i * x0 : i * x0 + d1]
            yr = y[i * y0 : i * y0 + d1]
            for j in range(d1):
                o[j] = _rows_op(code, xr[j], yr[j])
        elif x1 == 1:
            xr = x[i * x0 : i * x0 + d1]
            c = y[i * y0]
            for j in range(d1):
                o[j] = _rows_op(code, xr[j], c)
        else:
            c = x[i * x0]
            yr = y[i * y0 : i * y0 + d1]
            for j in range(d1):
                o[j] = _rows_op(code, c, yr[j])


def _rows(code, x, y, out_shape, ip):
    """``x op y`` by _rows_loop when the pair is two-dim broadcasting (ip mode 2) of one float
    dtype with unit inner steps and at least _ROWS_MIN elements; None otherwise."""
    if ip[3] != 2 or ip[0] < _ROWS_MIN or ip[7] > 1 or ip[9] > 1:
        return None
    dt = x.dtype
    if y.dtype is not dt or dt.kind != "f" or dt.itemsize < 4:
        return None
    if not (x.flags.c_contiguous and y.flags.c_contiguous):
        return None
    d0, d1 = ip[4], ip[5]
    result = np.empty(out_shape, dt)
    xf, yf, of = x.reshape(-1), y.reshape(-1), result.reshape(-1)
    x0, x1, y0, y1 = ip[6], ip[7], ip[8], ip[9]
    if ip[0] < ROWS_MIN:  # (parallel_for's own test, without its closure: ~0.3 us)
        _rows_loop(code, xf, yf, of, d1, x0, x1, y0, y1, 0, d0)
    else:
        parallel_for(
            lambda lo, hi: _rows_loop(code, xf, yf, of, d1, x0, x1, y0, y1, lo, hi), d0, ip[0]
        )
    return result


def _binary_forward(name, f, save=True, code=None):
    def forward(x, y):
        out, ip = binary_params(name, x.shape, y.shape)
        result = None if code is None else _rows(code, x, y, out, ip)
        if result is None:
            result = f(x, y)
        return result, ((x, y) if save else ()), ip, ()

    return forward


def _binary_spec(name, mask, alpha=False):
    """The deferred forward's spec of a binary op (see registry.Op.lazy): operands of one
    shape, or one of a single element (ip modes 0, -1, -2); general broadcasting runs
    eagerly."""

    def spec(shapes, kwargs):
        if alpha:
            a = kwargs.get("alpha", 1)
            if len(kwargs) > ("alpha" in kwargs) or not isinstance(a, (int, float)):
                return None
            fp = (float(a),)
        elif kwargs:
            return None
        else:
            fp = ()
        xs, ys = shapes
        out, ip = binary_params(name, xs, ys)
        if ip[3] > 0:
            return None
        return out, ip, fp, mask, ip[0]

    return spec


@numba.njit(inline="always")
def _operand_steps(ip):
    # element steps of x and y in modes 0 (same shapes), -1 (y one element), -2 (x one)
    mode = ip[3]
    return (0 if mode == -2 else 1), (0 if mode == -1 else 1)


@kernel
def add_lazy(S, xo, xn, k, top, ip, fp, oo, on):
    n = ip[0]
    sx, sy = _operand_steps(ip)
    x0, y0, a = xo[0], xo[1], fp[0]
    if a == 1.0:
        for i in range(n):
            S[top + i] = S[x0 + i * sx] + S[y0 + i * sy]
    else:
        for i in range(n):
            S[top + i] = S[x0 + i * sx] + S[y0 + i * sy] * a
    oo[0] = top
    on[0] = n
    return 1


@kernel
def sub_lazy(S, xo, xn, k, top, ip, fp, oo, on):
    n = ip[0]
    sx, sy = _operand_steps(ip)
    x0, y0, a = xo[0], xo[1], fp[0]
    if a == 1.0:
        for i in range(n):
            S[top + i] = S[x0 + i * sx] - S[y0 + i * sy]
    else:
        for i in range(n):
            S[top + i] = S[x0 + i * sx] - S[y0 + i * sy] * a
    oo[0] = top
    on[0] = n
    return 1


@kernel
def mul_lazy(S, xo, xn, k, top, ip, fp, oo, on):
    n = ip[0]
    sx, sy = _operand_steps(ip)
    x0, y0 = xo[0], xo[1]
    for i in range(n):
        S[top + i] = S[x0 + i * sx] * S[y0 + i * sy]
    oo[0] = top
    on[0] = n
    return 1


@kernel
def div_lazy(S, xo, xn, k, top, ip, fp, oo, on):
    n = ip[0]
    sx, sy = _operand_steps(ip)
    x0, y0 = xo[0], xo[1]
    for i in range(n):
        S[top + i] = S[x0 + i * sx] / S[y0 + i * sy]
    oo[0] = top
    on[0] = n
    return 1


_BINARY_CASES = [
    Case(((3, 4), (3, 4))),
    Case(((3, 4), (4,))),
    Case(((2, 1, 4), (3, 1))),
    Case(((), (3,))),
    Case(((3,), ())),
    Case(((2, 3), 1.5)),
    Case((1.5, (2, 3))),
]


def broadcast_formula(partials):
    """The create_graph formula of a broadcasting op that saved its operands in order:
    ``partials(ctx, *operands)`` gives d result / d operand for each, as tensors or
    numbers; each gradient is summed down to its operand's shape."""

    def formula(ctx, grad):
        shapes = ctx.input_shapes
        ds = partials(ctx, *(ctx.input(j, j) for j in range(len(shapes))))
        return tuple(
            ctx.sum_to(grad * d, shape) if need else None
            for d, shape, need in zip(ds, shapes, ctx.needs_input_grad, strict=True)
        )

    formula.partials = partials  # (forward AD's tangent: the partials times the tangents)
    return formula


def _binary_op(name, f, partial, save=True, cases=None, rows=None, select=False, **kw):
    backward = _binary_kernel(name, partial, select)
    forward = _binary_forward(name, f, save, rows)
    kw.setdefault("saved_names", ("self", "other") if save else ())
    return defop(name, forward, backward, nin=2, cases=cases or _BINARY_CASES, **kw)


def _tie_split(ctx, x, y):
    """maximum's partials (torch splits the gradient evenly at ties, and gives both the whole
    gradient where either is NaN): constants."""
    a, b = x._data, y._data
    tie = 0.5 * (a == b)
    unordered = np.isnan(a) | np.isnan(b)
    return ctx.constant((a > b) + tie + unordered), ctx.constant((a < b) + tie + unordered)


@numba.njit
def _p_mul(x, y):
    return y, x


@numba.njit
def _p_div(x, y):
    return 1.0 / y, -x / (y * y)


@numba.njit
def _p_maximum(x, y):
    # torch splits the gradient evenly at ties; where either is NaN both get all of it
    if x > y:
        return 1.0, 0.0
    if x < y:
        return 0.0, 1.0
    if x == y:
        return 0.5, 0.5
    return 1.0, 1.0


@numba.njit
def _p_minimum(x, y):
    if x < y:
        return 1.0, 0.0
    if x > y:
        return 0.0, 1.0
    if x == y:
        return 0.5, 0.5
    return 1.0, 1.0


mul = _binary_op(
    "mul",
    np.multiply,
    _p_mul,
    rows=ROWS_MUL,
    formula=broadcast_formula(lambda ctx, x, y: (y, x)),
    methods=("mul", "multiply"),
    functions=("mul", "multiply"),
    dunders=("__mul__", "__rmul__"),
    int_ok=True,
    lazy=(_binary_spec("mul", 3), mul_lazy),
    doc="Elementwise product input * other, broadcast.",
    jvp="bilinear",
)
div = _binary_op(
    "div",
    np.true_divide,
    _p_div,
    rows=ROWS_DIV,
    formula=broadcast_formula(lambda ctx, x, y: (1.0 / y, -x / (y * y))),
    methods=("div", "divide", "true_divide"),
    functions=("div", "divide", "true_divide"),
    dunders=("__truediv__", "__rtruediv__"),
    keywords={"rounding_mode": lambda apply, *args, **kwargs: _div_mode(apply, *args, **kwargs)},
    cases=[Case(c.shapes, low=0.3, high=2.0) for c in _BINARY_CASES],
    lazy=(_binary_spec("div", 3), div_lazy),
    doc="Elementwise true division input / other, broadcast.",
)


def _int_zero_division(y):
    if y.dtype.kind in "iub" and not np.all(y):
        raise RuntimeError("ZeroDivisionError")


def _floor_divide(x, y):
    # numpy's floor division is Python's (and torch's): from fmod, exact where floor(x / y)
    # rounds the quotient wrongly
    _int_zero_division(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor_divide(x, y)


def _trunc_divide(x, y):
    _int_zero_division(y)
    if x.dtype.kind in "iub":
        q = np.floor_divide(x, y)
        return q + ((q * y != x) & ((x < 0) != (y < 0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.trunc(np.true_divide(x, y))


@numba.njit
def _p_rounded(x, y):
    return 0.0, 0.0


# the rounded quotients: piecewise constant, a zero gradient (torch's DivBackward2)
_ROUNDED = dict(
    formula=broadcast_formula(lambda ctx, x, y: (0.0, 0.0)),
    int_ok=True,
    node_name="DivBackward2",
    cases=[Case(c.shapes, low=-3.0, high=3.0) for c in _BINARY_CASES],
)
div_floor = _binary_op(
    "_div_floor",
    _floor_divide,
    _p_rounded,
    functions=("floor_divide",),
    methods=("floor_divide",),
    dunders=("__floordiv__", "__rfloordiv__"),
    doc="The quotient input / other rounded down (Python's //); zero gradient.",
    **_ROUNDED,
)
div_trunc = _binary_op("_div_trunc", _trunc_divide, _p_rounded, functions=(), **_ROUNDED)


def _div_mode(apply, input, other, rounding_mode=None):  # noqa: A002  (torch's names)
    if rounding_mode is None:
        return apply(div, input, other)
    if rounding_mode == "floor":
        return apply(div_floor, input, other)
    if rounding_mode == "trunc":
        return apply(div_trunc, input, other)
    raise RuntimeError(
        "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
        f"'{rounding_mode}'"
    )


_TENSOR_CASES = [c for c in _BINARY_CASES if all(isinstance(s, tuple) for s in c.shapes)]
maximum = _binary_op(
    "maximum",
    np.maximum,
    _p_maximum,
    select=True,
    formula=broadcast_formula(_tie_split),
    methods=("maximum",),
    int_ok=True,
    cases=_TENSOR_CASES,
    doc=(
        "Elementwise maximum of input and other, broadcast (at ties the gradient is "
        "split evenly, as torch does)."
    ),
)
minimum = _binary_op(
    "minimum",
    np.minimum,
    _p_minimum,
    select=True,
    formula=broadcast_formula(lambda ctx, x, y: _tie_split(ctx, y, x)),
    methods=("minimum",),
    int_ok=True,
    cases=_TENSOR_CASES,
    doc=(
        "Elementwise minimum of input and other, broadcast (at ties the gradient is "
        "split evenly, as torch does)."
    ),
)


@kernel
def _linear2(G, go, gi, ip, ax, ay):
    # grad_x += ax * grad, grad_y += ay * grad, summed over broadcast dims (add, sub);
    # gi[2 + k] == 1: store into a fresh buffer (_jit.assigning); gi[4], gi[5]: part p of P
    # (_jit.parallel)
    n, nx, ny, mode = ip[0], ip[1], ip[2], ip[3]
    g = view(G, go[0], n)
    lo, hi = part(gi, 2, n)
    for k in range(2):
        if gi[k] < 0:
            continue
        a = ax if k == 0 else ay
        m = nx if k == 0 else ny
        grad = view(G, gi[k], m)
        fresh = gi[2 + k] == 1
        if m == n:  # this operand is not broadcast
            scaled_into(grad, g, a, lo, hi, fresh)
        elif mode == 2:  # two dims after coalescing (a bias row or column): no index arrays
            d0, d1 = ip[4], ip[5]
            s0, s1 = ip[6 + 2 * k], ip[7 + 2 * k]
            a0, a1, b0, b1 = _bias_share(gi, d0, d1, s0)
            if fresh:
                _zero_share(grad, a0, a1, b0, b1, s0, s1)
            if s0 == 0 and s1 == 1:
                # a bias row (x + b, b of shape (d1,)): grad[c] += a * sum_r g[r, c], each
                # row a slice indexed from 0 so that the loop vectorises (the strided form
                # kept numba's negative-index branch: a (128, 256) float32 bias gradient took
                # 42 us, 7.7 us this way)
                gb = grad[b0:b1]
                if a == 1.0:  # (see _jit.scaled_into: (128, 256) float32 2.6 -> 1.4 us)
                    for r in range(a0, a1):
                        row = g[r * d1 + b0 : r * d1 + b1]
                        for c in range(b1 - b0):
                            gb[c] += row[c]
                else:
                    for r in range(a0, a1):
                        row = g[r * d1 + b0 : r * d1 + b1]
                        for c in range(b1 - b0):
                            gb[c] += a * row[c]
            else:
                for r in range(a0, a1):
                    for c in range(b0, b1):
                        grad[r * s0 + c * s1] += a * g[r * d1 + c]
        elif gi[4] != 0:
            continue  # a reduction over every element: part 0's
        elif m == 1:
            acc = 0.0
            for i in range(n):
                acc += g[i]
            grad[0] = a * acc if fresh else grad[0] + a * acc
        else:
            if fresh:
                grad[:] = 0
            offs = bcast_offsets(ip, 4, mode, k, n)
            for i in range(n):
                grad[offs[i]] += a * g[i]


def _linear_forward(name, f, code):
    """add's or sub's forward: ``f(x, alpha * y)``; saves nothing, fp = (alpha,)."""

    def forward(x, y, alpha=1):
        out, ip = binary_params(name, x.shape, y.shape)
        if alpha == 1:
            result = _rows(code, x, y, out, ip)
            if result is None:
                result = f(x, y)
        else:
            result = f(x, y * y.dtype.type(alpha))
        return result, (), ip, (float(alpha),)

    forward.__name__ = f"_{name}_forward"
    return forward


_add_forward = _linear_forward("add", np.add, ROWS_ADD)
_sub_forward = _linear_forward("sub", np.subtract, ROWS_SUB)


@parallel
@assigning
@kernel
def add_backward(G, G2, go, gi, V, so, sa, ip, fp):
    _linear2(G, go, gi, ip, 1.0, fp[0])


@parallel
@assigning
@kernel
def sub_backward(G, G2, go, gi, V, so, sa, ip, fp):
    _linear2(G, go, gi, ip, 1.0, -fp[0])


def _linear2_formula(sign):
    # add/sub: grad_x = grad, grad_y = sign * alpha * grad, each summed to its shape
    def formula(ctx, grad):
        xs, ys = ctx.input_shapes
        a = sign * ctx.kwargs.get("alpha", 1)
        need = ctx.needs_input_grad
        return (
            ctx.sum_to(grad, xs) if need[0] else None,
            ctx.sum_to(grad if a == 1 else grad * a, ys) if need[1] else None,
        )

    return formula


add = defop(
    "add",
    _add_forward,
    add_backward,
    formula=_linear2_formula(1),
    nin=2,
    methods=("add",),
    dunders=("__add__", "__radd__"),
    int_ok=True,
    cases=_BINARY_CASES + [Case(((3,), (3,)), {"alpha": 2.5})],
    lazy=(_binary_spec("add", 0, alpha=True), add_lazy),
    doc="input + alpha * other, elementwise and broadcast.",
    jvp="linear",
)
sub = defop(
    "sub",
    _sub_forward,
    sub_backward,
    formula=_linear2_formula(-1),
    nin=2,
    methods=("sub", "subtract"),
    functions=("sub", "subtract"),
    dunders=("__sub__", "__rsub__"),
    int_ok=True,
    cases=_BINARY_CASES + [Case(((3,), (3,)), {"alpha": -0.5})],
    lazy=(_binary_spec("sub", 0, alpha=True), sub_lazy),
    doc="input - alpha * other, elementwise and broadcast.",
    jvp="linear",
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
            # (a select, not g * mask: torch's where passes no NaN or inf to the other side)
            if mask[mo[i]] == (1.0 if k == 0 else 0.0):
                grad[offs[i]] += g[i]


def _where_formula(ctx, grad):
    cond = np.asarray(ctx.kwargs["condition"], dtype=bool)
    ng = ctx.ng
    zero = ctx.constant(0.0)
    xs, ys = ctx.input_shapes
    need = ctx.needs_input_grad
    return (
        ctx.sum_to(ng.where(cond, grad, zero), xs) if need[0] else None,
        ctx.sum_to(ng.where(cond, zero, grad), ys) if need[1] else None,
    )


where = defop(
    "where",
    _where_forward,
    where_backward,
    formula=_where_formula,
    nin=2,
    api=lambda apply, condition, input, other: apply(where, input, other, condition=condition),
    int_ok=True,
    jvp="linear",  # (the condition is an attribute)
    cases=[
        Case(((3, 4), (3, 4)), {"condition": "mask(3, 4)"}),
        Case(((3, 1), (4,)), {"condition": "mask(3, 4)"}),
        Case(((3, 4), 0.0), {"condition": "mask(4)"}),
    ],
    doc="Elementwise selection: input where condition holds, else other.",
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
    # the input's dtype is the node's (ip[1] == 1) or the other floating dtype
    formula=lambda ctx, grad: (
        grad if ctx.ip[1] else grad.to(np.float64 if ctx.dtype == np.float32 else np.float32)
    ),
    node_name="ToCopyBackward0",
    functions=(),
    int_ok=True,
    cases=[
        Case(((2, 3),), {"dtype": np.float32}),
        Case(((2, 3),), {"dtype": np.float64}),
    ],
    jvp="linear",
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


@formula_of(copy_backward)
def _copy_formula(ctx, grad):
    return grad.reshape(ctx.input_shapes[0])


clone = defop(
    "clone",
    _clone_forward,
    copy_backward,
    methods=("clone",),
    int_ok=True,
    cases=[Case(((2, 3),))],
    doc="A copy of input; the gradient passes through unchanged.",
    jvp="linear",
)

# ---------------------------------------------------------------------------------------------
# comparisons: bool results, no gradient


def _cmp(name, f, dunder, **kw):
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
        **kw,
    )


lt = _cmp("lt", np.less, "__lt__", doc="Elementwise input < other, a bool tensor.")
le = _cmp("le", np.less_equal, "__le__", doc="Elementwise input <= other, a bool tensor.")
gt = _cmp("gt", np.greater, "__gt__", doc="Elementwise input > other, a bool tensor.")
ge = _cmp("ge", np.greater_equal, "__ge__", doc="Elementwise input >= other, a bool tensor.")
eq = _cmp("eq", np.equal, "__eq__", doc="Elementwise input == other, a bool tensor.")
ne = _cmp("ne", np.not_equal, "__ne__", doc="Elementwise input != other, a bool tensor.")
