"""Reductions (dim: int, tuple or None; keepdim): sum and mean; group reductions (prod,
amax/amin, max/min, var/std, norms); scans (cumsum, cumprod, logcumsumexp); argmax/argmin,
count_nonzero, all/any.

Group reductions share one backward kernel: the forward lays x out as (outer, k) with the
reduced dims last (a copy in that order plus, when the dims are not already last, the int64
map from that order back to x's positions), and ``group_backward`` computes each group's
gradient by the formula ``code`` (ip[3]) selects. Scans share ``scan_backward`` over the
(outer, size, inner) view of x.
"""

import collections
import math
import numbers
import warnings

import numba
import numpy as np

from .._numba_setup import cached
from .._threads import get_num_threads, parallel_for
from ._jit import (
    assigning,
    bcast_offsets,
    kernel,
    parallel,
    part,
    saved,
    saved_index,
    scaled_into,
    view,
)
from ._shapes import coalesce, numel, outer_inner, wrap_dim, wrap_dims
from ._vmath import LOOP
from .elementwise import maximum, minimum
from .index import _positions, take_backward, take_forward
from .registry import Case, attributes_of, cast_first, defop, formula_of

_PARAMS = {}
_SUM_LOOP = dict(LOOP, fastmath={"reassoc", "contract"})


def _reduce_params(op, shape, dim, keepdim):
    """(dims, result shape, iparams) of a reduction; cached per (op, shape, dim, keepdim)."""
    key = (op, shape, dim if not isinstance(dim, list) else tuple(dim), keepdim)
    hit = _PARAMS.get(key)
    if hit is None:
        hit = _PARAMS[key] = _reduce_params_uncached(op, shape, dim, keepdim)
    return hit


def _reduce_params_uncached(op, shape, dim, keepdim):
    dims = wrap_dims(op, dim, len(shape))
    kept = tuple(1 if d in dims else s for d, s in enumerate(shape))
    out_shape = kept if keepdim else tuple(s for d, s in enumerate(shape) if d not in dims)
    n, m = numel(shape), numel(kept)
    if m == n:
        ip = (n, m, 0)
    elif m == 1:
        ip = (n, m, -1)
    else:
        # grad (shape `kept`) broadcast over x's shape: stride 0 along the reduced dims
        gst, acc = [0] * len(shape), 1
        for d in range(len(shape) - 1, -1, -1):
            gst[d] = 0 if d in dims else acc
            acc *= kept[d]
        cshape, (cst,) = coalesce(shape, [gst])
        ip = (n, m, len(cshape), *cshape, *cst)
    return dims, out_shape, ip


@kernel
def _sum_to_input(G, go, gi, ip, scale):
    # grad_x[i] (+)= scale * grad[reduced index of i]; every i once, so a fresh buffer
    # (gi[1] == 1, see _jit.assigning) is stored, not zeroed and added to
    # gi[2], gi[3]: part p of P (_jit.parallel): a share of grad_x's elements (rows in mode 2)
    if gi[0] < 0:
        return
    n, m, mode = ip[0], ip[1], ip[2]
    g = view(G, go[0], m)
    grad_x = view(G, gi[0], n)
    assign = gi[1] == 1
    lo, hi = part(gi, 1, n)
    if mode == 0:
        scaled_into(grad_x, g, scale, lo, hi, assign)
    elif mode == 2:  # two dims after coalescing: no index array
        d0, d1, s0, s1 = ip[3], ip[4], ip[5], ip[6]
        a0, a1 = part(gi, 1, d0)
        for a in range(a0, a1):
            row = grad_x[a * d1 : (a + 1) * d1]
            if s1 == 0:  # a sum over the last dims: each row of grad_x is one value
                v = scale * g[a * s0]
                if assign:
                    row[:] = v
                else:
                    for b in range(d1):
                        row[b] += v
            else:  # the rows of grad (s1 == 1): unit-stride loops vectorise
                scaled_into(row, g[a * s0 : a * s0 + d1], scale, 0, d1, assign)
    elif mode == -1:
        v = scale * g[0]
        if assign:
            grad_x[lo:hi] = v
        else:
            share = grad_x[lo:hi]  # indexed from 0: vectorises (_jit.scaled_into)
            for i in range(hi - lo):
                share[i] += v
    elif gi[2] == 0:  # general broadcasting: part 0 does all
        if assign:
            grad_x[:] = 0
        offs = bcast_offsets(ip, 3, mode, 0, n)
        for i in range(n):
            grad_x[i] += scale * g[offs[i]]


def _accumulating(dtype):
    """The result dtype of sum, prod, cumsum and cumprod (torch): int64 for bool and integer
    inputs (no wrap-around of uint8, no bool sum), the input's dtype for floating ones."""
    return dtype if dtype.kind == "f" else np.dtype(np.int64)


def _sum_forward(x, dim=None, keepdim=False):
    dims, out_shape, ip = _reduce_params("sum", x.shape, dim, keepdim)
    dtype = _accumulating(x.dtype)
    result = _sum(x if x.dtype == dtype else x.astype(dtype), dims, keepdim, ip)
    return np.asarray(result, dtype=dtype).reshape(out_shape), (), ip, (1.0,)


def _mean_forward(x, dim=None, keepdim=False):
    dims, out_shape, ip = _reduce_params("mean", x.shape, dim, keepdim)
    count = numel([x.shape[d] for d in dims])
    scale = 1.0 / count if count else float("nan")
    if count and x.dtype.kind == "f":  # (_sum falls back to numpy's for other layouts)
        result = _sum(x, dims, keepdim, ip, count)
    else:
        result = np.mean(x, axis=dims, keepdims=keepdim) if dims else x.copy()
    return np.asarray(result, dtype=x.dtype).reshape(out_shape), (), ip, (scale,)


# Compiled sums of a C-contiguous float array over its trailing dims (rows), its leading dims
# (columns) or all of it, split over the intra-op threads: numpy's row sum of a (1000, 1000)
# float64 array took 240 us, torch's 107 us, this one 165 us on one thread
# (benchmarks/op_families.py "reduction(sum)"). Other layouts go to numpy.
_BLOCK = 1024  # a row is summed in blocks: error ~ (block/width + n/block) ulps, not n


@numba.njit(**_SUM_LOOP)
def _sum_range(x, a, b):
    # float64 also for float32 arrays; reassoc lets LLVM vectorise the sum, and indexing a
    # slice from 0 avoids numba's negative-index branch (which also stops vectorisation)
    total = 0.0
    for c in range(a, b, _BLOCK):
        block = x[c : min(c + _BLOCK, b)]
        s = 0.0
        for i in range(block.size):
            s += block[i]
        total += s
    return total


@numba.njit(**_SUM_LOOP)
def _sum_rows(x, result, d1, lo, hi):
    for r in range(lo, hi):
        result[r] = _sum_range(x, r * d1, (r + 1) * d1)


@numba.njit(**_SUM_LOOP)
def _sum_columns(x, result, d0, d1, lo, hi):
    acc = np.zeros(hi - lo)
    out = result[lo:hi]
    for r in range(d0):
        row = x[r * d1 + lo : r * d1 + hi]
        for j in range(hi - lo):  # unit stride: vectorises
            acc[j] += row[j]
    for j in range(hi - lo):
        out[j] = acc[j]


@numba.njit(**_SUM_LOOP)
def _sum_small(xf, result, mode, d0, d1, s1, count):
    # the whole of a small sum in one call, divided by count (a mean; 1 for a sum)
    if mode == -1:
        result[0] = _sum_range(xf, 0, xf.size)
    elif s1 == 0:
        _sum_rows(xf, result, d1, 0, d0)
    else:
        _sum_columns(xf, result, d0, d1, 0, d1)
    if count != 1.0:
        for i in range(result.size):
            result[i] /= count


def _sum(x, dims, keepdim, ip, count=1):
    """``x.sum(dims) / count`` (float64 accumulation for float32 when compiled)."""
    if not dims:
        return x.copy() if count == 1 else x / x.dtype.type(count)
    n, m, mode = ip[0], ip[1], ip[2]
    compiled = x.dtype.kind == "f" and x.flags.c_contiguous
    if compiled and n < _BLOCK and (mode == -1 or (mode == 2 and (ip[5] == 0 or ip[6] == 0))):
        # one compiled call: numpy's reduction set-up and the division cost more than the sum
        # (the forward of a mean of 128 float32: 3.2 -> 1.8 us alone, 6.6 -> 3.7 us inside
        # the MLP benchmark's step; a row sum of (128, 10) stays at ~2.4 us)
        result = np.empty(m, x.dtype)
        d0, d1, s1 = (1, n, 0) if mode == -1 else (ip[3], ip[4], ip[6])
        _sum_small(x.reshape(-1), result, mode, d0, d1, s1, float(count))
        return result
    result = _sum_big(x, dims, keepdim, ip) if compiled and n >= _BLOCK else None
    if result is None:
        result = np.sum(x, axis=dims, keepdims=keepdim)
    return result if count == 1 else result / x.dtype.type(count)


def _sum_big(x, dims, keepdim, ip):
    """``x.sum(dims)`` by the compiled loops split over the intra-op threads, or None for a
    layout they do not cover."""
    xf = x.reshape(-1)
    n, m, mode = ip[0], ip[1], ip[2]
    result = np.empty(m, x.dtype)
    if mode == -1:
        parts = np.zeros(get_num_threads())
        P = len(parts)

        def partial(lo, hi):
            for p in range(lo, hi):
                parts[p] = _sum_range(xf, n * p // P, n * (p + 1) // P)

        parallel_for(partial, P, n)
        result[0] = parts.sum()
    elif mode == 2 and ip[6] == 0:  # the trailing dims: rows of d1
        d1 = ip[4]
        parallel_for(lambda lo, hi: _sum_rows(xf, result, d1, lo, hi), m, n)
    elif mode == 2 and ip[5] == 0:  # the leading dims: d0 rows summed into one
        d0, d1 = ip[3], ip[4]
        parallel_for(lambda lo, hi: _sum_columns(xf, result, d0, d1, lo, hi), m, n)
    else:
        return None
    return result


@parallel
@assigning
@kernel
def sum_backward(G, G2, go, gi, V, so, sa, ip, fp):
    _sum_to_input(G, go, gi, ip, fp[0])


def _kept(shape, dim):
    """(dims, the result's shape with keepdim=True) of a reduction of ``shape`` over ``dim``."""
    dims = wrap_dims("reduction", dim, len(shape))
    return dims, tuple(1 if d in dims else s for d, s in enumerate(shape))


@formula_of(sum_backward)
def _sum_formula(ctx, grad):
    # sum/mean: the gradient broadcast back over the reduced dims (times 1/count for mean)
    xs = ctx.input_shapes[0]
    _, kept = _kept(xs, ctx.kwargs.get("dim"))
    scale = ctx.fp[0]
    g = grad.reshape(kept).expand(xs)
    return (g if scale == 1.0 else g * scale,)


_CASES = [
    Case(((3, 4),)),
    Case(((3, 4),), {"dim": 1}),
    Case(((2, 3, 4),), {"dim": (0, 2)}),
    Case(((2, 3, 4),), {"dim": -2, "keepdim": True}),
    Case(((2, 3, 4),), {"dim": (0, 2), "keepdim": True}),
    Case(((),)),
]


def _sum_spec(mean):
    def spec(shapes, kwargs):
        """The deferred forward's spec (registry.Op.lazy): over every element."""
        if kwargs and (kwargs.get("dim") is not None or kwargs.get("keepdim") or len(kwargs) > 2):
            return None
        if any(key not in ("dim", "keepdim") for key in kwargs):
            return None
        (shape,) = shapes
        n = numel(shape)
        if n == 0:
            return None
        _, out_shape, ip = _reduce_params("mean" if mean else "sum", shape, None, False)
        return out_shape, ip, ((1.0 / n) if mean else 1.0,), 0, 1

    return spec


@kernel
def sum_lazy(S, xo, xn, k, top, ip, fp, oo, on):
    # fp[0]: 1 (sum) or 1 / n (mean, divided by n as the eager forward does)
    n = ip[0]
    x0 = xo[0]
    acc = 0.0
    for i in range(n):
        acc += S[x0 + i]
    S[top] = acc if fp[0] == 1.0 else acc / n
    oo[0] = top
    on[0] = 1
    return 1


sum_ = defop(
    "sum",
    _sum_forward,
    sum_backward,
    methods=("sum",),
    keywords={"dtype": cast_first("sum")},
    cases=_CASES,
    int_ok=True,
    lazy=(_sum_spec(False), sum_lazy),
    doc="The sum of input over dim (every element when dim is None).",
    jvp="linear",
)
mean = defop(
    "mean",
    _mean_forward,
    sum_backward,
    methods=("mean",),
    keywords={"dtype": cast_first("mean")},
    cases=_CASES,
    lazy=(_sum_spec(True), sum_lazy),
    doc="The mean of input over dim (every element when dim is None).",
    jvp="linear",
)

# ---------------------------------------------------------------------------------------------
# group reductions

PROD, AMAX, AMIN, VAR, STD, NORM, NORM_INF, NORM_NEG_INF, NORM_ZERO = range(9)


def _group(op, x, dim, keepdim):
    """(xg, pos, outer, k, out_shape): x's elements with the reduced dims last."""
    dims, out_shape, _ = _reduce_params(op, x.shape, dim, keepdim)
    rest = [d for d in range(x.ndim) if d not in dims]
    perm = rest + list(dims)
    k = numel([x.shape[d] for d in dims])
    outer = numel([x.shape[d] for d in rest])
    if perm == list(range(x.ndim)):
        return np.ascontiguousarray(x).reshape(outer, k), None, outer, k, out_shape
    xg = np.ascontiguousarray(np.transpose(x, perm)).reshape(outer, k)
    pos = np.ascontiguousarray(np.transpose(_positions(x.shape), perm)).reshape(-1)
    return xg, pos, outer, k, out_shape


@numba.njit(inline="always")
def _pos(pos, ident, i):
    return i if ident else pos[i]


@parallel
@kernel
def group_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # ip = (outer, k, ident, code); fp = (p,); saved (xg (outer, k), result (outer,)[, pos])
    # every element of x is in one group: the parts (_jit.parallel) take groups lo:hi
    if gi[0] < 0:
        return
    outer, k, ident, code = ip[0], ip[1], ip[2], ip[3]
    n = outer * k
    p = fp[0]
    g = view(G, go[0], outer)
    grad_x = view(G, gi[0], n)
    xg = saved(V, so, sa, 0, n)
    result = saved(V, so, sa, 1, outer)
    pos = saved_index(sa, 2, n) if ident == 0 else sa[:0]
    lo, hi = part(gi, 1, outer)
    for o in range(lo, hi):
        base = o * k
        r = result[o]
        go_ = g[o]
        if code == PROD:
            # d/dx_i prod = prod_{j != i} x_j; with one zero only it gets a gradient. One
            # element: 1 (torch's 0-d case; r / x would be NaN at inf)
            if k == 1:
                grad_x[_pos(pos, ident, base)] += go_
                continue
            zeros = 0
            z = -1
            rest = 1.0
            for t in range(k):
                v = xg[base + t]
                if v == 0:
                    zeros += 1
                    z = t
                else:
                    rest *= v
            if zeros == 0:
                for t in range(k):
                    grad_x[_pos(pos, ident, base + t)] += go_ * r / xg[base + t]
            elif zeros == 1:
                grad_x[_pos(pos, ident, base + z)] += go_ * rest
        elif code == AMAX or code == AMIN or code == NORM_INF or code == NORM_NEG_INF:
            # the gradient is split evenly between the elements equal to the result (torch);
            # norms compare |x| and carry sign(x). A NaN result: max()/min() (p == 1) split it
            # between the NaN elements; amax/amin give every element NaN (torch's
            # grad * (x == result) / count is 0 / 0 there)
            nan_split = r != r and p == 1.0
            ties = 0
            for t in range(k):
                v = xg[base + t]
                if code >= NORM_INF:
                    v = abs(v)
                if v == r or (nan_split and v != v):
                    ties += 1
            if ties == 0:
                for t in range(k):
                    grad_x[_pos(pos, ident, base + t)] += go_ * math.nan
                continue
            # amax, amin and the inf-norms multiply the gradient by the mask of hits (torch):
            # a NaN or inf gradient gives the other elements NaN (0 * inf); max() and min()
            # (p == 1) select, as torch's evenly_distribute_backward
            spread = p != 1.0 and not math.isfinite(go_)
            for t in range(k):
                v = xg[base + t]
                s = 1.0
                if code >= NORM_INF:
                    s = 1.0 if v > 0 else (-1.0 if v < 0 else 0.0)
                    v = abs(v)
                if v == r or (nan_split and v != v):
                    grad_x[_pos(pos, ident, base + t)] += go_ * s / ties
                elif spread:
                    grad_x[_pos(pos, ident, base + t)] += math.nan
        elif code == VAR or code == STD:
            # var = sum (x - mean)^2 / (k - c): d/dx_i = 2 (x_i - mean) / (k - c);
            # std = sqrt(var): d/dx_i = (x_i - mean) / ((k - c) std), 0 where std == 0 (torch)
            mean = _sum_range(xg, base, base + k) / k
            denom = k - p
            if ip[4]:  # every element reduced, correction >= k: torch's inf (var), nan (std)
                for t in range(k):
                    d = xg[base + t] - mean
                    s = math.inf if code == VAR and d != 0.0 else math.nan
                    grad_x[_pos(pos, ident, base + t)] += go_ * s
                continue
            if code == VAR:
                scale = 2.0 * go_ / denom
            elif r == 0:
                continue
            else:
                scale = go_ / (denom * r)
            xr = xg[base : base + k]
            if ident:  # slices from index 0: the loop vectorises (see _sum_range)
                gr = grad_x[base : base + k]
                for t in range(k):
                    gr[t] += scale * (xr[t] - mean)
            else:
                for t in range(k):
                    grad_x[pos[base + t]] += scale * (xr[t] - mean)
        elif code == NORM:
            # ||x||_p: d/dx_i = x_i |x_i|^(p-2) / ||x||^(p-1), 0 where the norm is 0 (torch)
            if r == 0:
                continue
            for t in range(k):
                v = xg[base + t]
                if p == 1.0:
                    d = 1.0 if v > 0 else (-1.0 if v < 0 else 0.0)
                elif p == 2.0:
                    d = v / r
                else:
                    d = v * abs(v) ** (p - 2.0) / r ** (p - 1.0)
                grad_x[_pos(pos, ident, base + t)] += go_ * d


def _exclusive_cumprod(ctx, x, d):
    """prod_{j < i} x_j along dim d (1 at i = 0), written with ops: the cumulative product of
    x shifted by one with a 1 in front (no division: zeros allowed)."""
    n = x.shape[d]
    shape = list(x.shape)
    shape[d] = 1
    ones = ctx.constant(np.ones(shape))
    if n == 1:
        return ones
    return ctx.ng.cat([ones, x.narrow(d, 0, n - 1)], d).cumprod(d)


def _exclusive_products(ctx, x, d):
    """prod_{j != i} x_j along dim d, written with ops (no division: zeros allowed):
    (prod_{j < i} x_j) (prod_{j > i} x_j), the second the first of x reversed."""
    return _exclusive_cumprod(ctx, x, d) * _exclusive_cumprod(ctx, x.flip((d,)), d).flip((d,))


@formula_of(group_backward)
def _group_formula(ctx, grad):
    outer, k, ident, code = ctx.ip[:4]
    full = ctx.ip[4] if len(ctx.ip) > 4 else 0  # (max/min's params stop at the code)
    p = ctx.fp[0]
    xs = ctx.input_shapes[0]
    dim = ctx.kwargs.get("dim")
    if dim == () and code in (AMAX, AMIN):
        dim = None  # amax/amin(dim=()) reduce every dim
    dims, kept = _kept(xs, dim)
    xg = ctx.saved(0)
    if ident:
        xf = xg
    else:  # xg holds x's elements with the reduced dims last; pos maps them back
        xf = np.empty_like(xg)
        xf[ctx.saved(2)] = xg
    a = xf.reshape(xs)
    x = ctx.input(0, xf)
    r = ctx.output(0, 1).reshape(kept)
    g = grad.reshape(kept)
    rv = r._data
    ng = ctx.ng
    if code == PROD:
        if k == 1:  # one element: d prod / dx = 1 (as the kernel)
            return (g.reshape(xs),)
        if a.all():
            return (g * r / x,)
        # with zeros: d/dx_i prod = prod_{j != i} x_j, the exclusive products (torch's
        # prod_safe_zeros_backward), over the one reduced dim or the flattened tensor
        if len(dims) == 1:
            return (g * _exclusive_products(ctx, x, dims[0]),)
        return (g * _exclusive_products(ctx, x.reshape(-1), 0).reshape(xs),)
    if code in (AMAX, AMIN, NORM_INF, NORM_NEG_INF):
        v = np.abs(a) if code >= NORM_INF else a
        hit = v == rv
        if p == 1.0:  # max()/min(): a NaN result is split between the NaN elements
            hit = hit | (np.isnan(v) & np.isnan(rv))
        with np.errstate(invalid="ignore"):  # (amax/amin of a NaN: 0 / 0, as torch)
            share = hit / np.sum(hit, axis=dims, keepdims=True)
        if code >= NORM_INF:
            share = share * np.sign(a)
        return (g * ctx.constant(share),)
    if code == NORM_ZERO:
        return (ctx.constant(np.zeros(xs)),)
    nonzero = ctx.constant(rv != 0)
    safe = ng.where(rv == 0, ctx.constant(1.0), r)  # torch: no gradient where the result is 0
    if code == VAR or code == STD:
        # var = sum (x - mean)^2 / (k - c); std = sqrt(var)
        if full:  # (see group_backward)
            at_mean = a == a.mean()
            s = np.where(at_mean | (code == STD), np.nan, np.inf)
            return (g * ctx.constant(s),)
        centered = x - x.mean(dim=dims, keepdim=True)
        if code == VAR:
            with np.errstate(divide="ignore"):  # (k == correction: inf, as torch)
                return (g * centered * float(np.divide(2.0, k - p)),)
        return (g * centered / ((k - p) * safe) * nonzero,)
    # NORM: d||x||_p/dx = x |x|^(p-2) / ||x||^(p-1)
    if p == 1.0:
        return (g * ctx.constant(np.sign(a)),)
    if p == 2.0:
        return (g * x / safe * nonzero,)
    return (g * x * x.abs() ** (p - 2.0) / safe ** (p - 1.0) * nonzero,)


# forward-mode rules of the group reductions (torch's: var_jvp, norm_jvp, amaxamin_jvp),
# jvp(x, t, result, **attributes) written with tensor ops


def _kept_result(r, x, dim, keepdim):
    """The reduction result ``r`` with the reduced dims back as 1s (broadcasts to x)."""
    return r if keepdim else r.reshape(_kept(tuple(x.shape), dim)[1])


def _summed(v, x, dim, keepdim):
    """``v`` (of x's shape) summed over the dims a reduction of x over ``dim`` removes."""
    dims, _ = _kept(tuple(x.shape), dim)
    return v.sum(dim=dims, keepdim=keepdim) if dims else v


def _at_extremes(x, t, result, dim, keepdim):
    # the tangent where x equals the reduction's result, ties sharing it evenly
    mask = (x == _kept_result(result, x, dim, keepdim)).to(t.dtype)
    return _summed(t * mask, x, dim, keepdim) / _summed(mask, x, dim, keepdim)


def _extreme_jvp(x, t, result, dim=None, keepdim=False):
    # (dim () is every dim, as amax's forward takes it)
    return _at_extremes(x, t, result, None if dim == () else dim, keepdim)


def _var_jvp(x, t, result, dim=None, keepdim=False, correction=None, unbiased=None):
    # 2 sum((x - mean) t) / (N - correction)
    dims, _ = _kept(tuple(x.shape), dim)
    n = math.prod(x.shape[d] for d in dims)
    deviation = x - x.mean(dim=dims, keepdim=True) if dims else x - x
    return 2.0 * _summed(deviation * t, x, dim, keepdim) / (n - _correction(correction, unbiased))


def _std_jvp(x, t, result, **kwargs):
    return _var_jvp(x, t, result, **kwargs) / (2.0 * result)


def _norm_jvp(x, t, result, ord=2, dim=None, keepdim=False):
    p = float(ord)
    if p == 0.0:
        return result * 0.0
    if p == 1.0:
        return _summed(x.sign() * t, x, dim, keepdim)
    zero = result == 0
    if p == 2.0:
        return (_summed(x * t, x, dim, keepdim) / result).masked_fill(zero, 0.0)
    if math.isinf(p):  # |x|'s tangent sign(x) t at its largest (smallest) entries
        return _at_extremes(x.abs(), x.sign() * t, result, dim, keepdim)
    a = x.abs()
    if p < 1.0:
        powered = (a ** (p - 1.0)).masked_fill(x == 0, 0.0)
        return _summed(powered * x.sign() * t, x, dim, keepdim) * result ** (1.0 - p)
    out = _summed(a ** (p - 1.0) * x.sign() * t, x, dim, keepdim) / result ** (p - 1.0)
    return out.masked_fill(zero, 0.0)


def _group_op(name, reduce_fn, code_fn, cases, signature=None, all_dims=None, **kw):
    """A group reduction: ``reduce_fn(xg (outer, k), **kw) -> (outer,)``; ``code_fn(**kw) ->
    (code, p)`` picks the backward formula; ``signature(x, ...)`` gives torch's argument order;
    a ``dim`` equal to ``all_dims`` (amax's ``()``) reduces every dim."""
    extreme = name in ("amax", "amin")

    def forward(x, dim=None, keepdim=False, **kwargs):
        if all_dims is not None and dim == all_dims:
            dim = None
        xg, pos, outer, k, out_shape = _group(name, x, dim, keepdim)
        if extreme and k == 0:
            raise IndexError(f"{name}(): Expected reduction dim {dim} to have non-zero size.")
        dtype = _accumulating(x.dtype) if name == "prod" else x.dtype
        result = np.asarray(reduce_fn(xg.astype(dtype, copy=False), **kwargs), dtype=dtype)
        result = result.reshape(outer)
        code, p = code_fn(**kwargs)
        saved = (xg.reshape(-1), result) if pos is None else (xg.reshape(-1), result, pos)
        # ip[4]: a reduction of every element (dim None) with no degree of freedom left
        # (correction >= k), whose var/std gradient torch gives as inf (var) or nan (std)
        full = 0
        if (code == VAR or code == STD) and k - p <= 0:
            warnings.warn(
                f"{name}(): degrees of freedom is <= 0. Correction should be strictly less "
                "than the reduction factor (input numel divided by output numel).",
                UserWarning,
                stacklevel=4,
            )
            full = int(dim is None)
        return result.reshape(out_shape), saved, (outer, k, int(pos is None), code, full), (p,)

    forward.__name__ = name
    if signature is not None:
        attributes_of(forward, signature)
    kw.setdefault("methods", (name,))
    return defop(name, forward, group_backward, cases=cases, **kw)


_CASES = [
    Case(((3, 4),)),
    Case(((3, 4),), {"dim": 1}),
    Case(((2, 3, 4),), {"dim": (0, 2), "keepdim": True}),
    Case(((2, 3, 4),), {"dim": -2}),
]


def _prod(xg):
    return np.prod(xg, axis=1)


prod = _group_op(
    "prod",
    _prod,
    lambda: (PROD, 0.0),
    int_ok=True,
    keywords={"dtype": cast_first("prod")},
    # torch.prod takes one int dim (tuples work here too: tests/test_reductions.py)
    cases=[
        Case(((3, 4),)),
        Case(((3, 4),), {"dim": 1}),
        Case(((2, 3, 4),), {"dim": -2, "keepdim": True}),
        Case(((4, 3),), {"dim": 0}, low=0.5, high=1.5),
    ],
    doc=(
        "The product of input over dim (every element when dim is None); the gradient "
        "is exact at zeros."
    ),
)


amax = _group_op(
    "amax",
    lambda xg: np.max(xg, axis=1),
    lambda: (AMAX, 0.0),
    cases=_CASES + [Case(((3, 4),), {"dim": 1}, low=0, high=1.01)],
    all_dims=(),
    int_ok=True,
    jvp=_extreme_jvp,
    doc="The maximum of input over dim; ties share the gradient evenly.",
)
amin = _group_op(
    "amin",
    lambda xg: np.min(xg, axis=1),
    lambda: (AMIN, 0.0),
    cases=_CASES,
    all_dims=(),
    int_ok=True,
    jvp=_extreme_jvp,
    doc="The minimum of input over dim; ties share the gradient evenly.",
)


def _correction(correction=None, unbiased=None):
    if correction is not None and unbiased is not None:
        raise RuntimeError("var/std: cannot specify both correction and unbiased")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return float(correction)


def _var(xg, correction=None, unbiased=None):
    c = _correction(correction, unbiased)
    k = xg.shape[1]
    # sum (x - mean)^2 / max(0, k - c), as torch: inf (NaN for a zero sum) when c >= k
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.var(xg, axis=1) * k / max(0.0, k - c)


var = _group_op(
    "var",
    _var,
    lambda correction=None, unbiased=None: (VAR, _correction(correction, unbiased)),
    cases=_CASES + [Case(((5,),), {"correction": 0})],
    jvp=_var_jvp,
    doc=(
        "The variance of input over dim, with Bessel's correction by default.\n"
        "correction: (int) the sample count minus the divisor (default 1; "
        "unbiased=False means 0)."
    ),
)
std = _group_op(
    "std",
    lambda xg, correction=None, unbiased=None: np.sqrt(_var(xg, correction, unbiased)),
    lambda correction=None, unbiased=None: (STD, _correction(correction, unbiased)),
    cases=_CASES + [Case(((5,),), {"correction": 2})],
    jvp=_std_jvp,
    doc=(
        "The standard deviation of input over dim, with Bessel's correction by default.\n"
        "correction: (int) the sample count minus the divisor (default 1; "
        "unbiased=False means 0)."
    ),
)


def _norm_code(ord):
    ord = float(ord)
    if ord == math.inf:
        return NORM_INF, ord
    if ord == -math.inf:
        return NORM_NEG_INF, ord
    if ord == 0:
        return NORM_ZERO, ord
    return NORM, ord


def _vector_norm(xg, ord=2):
    ord = float(ord)
    a = np.abs(xg)
    if ord == math.inf:
        return np.max(a, axis=1)
    if ord == -math.inf:
        return np.min(a, axis=1)
    if ord == 0:
        return np.count_nonzero(a, axis=1).astype(xg.dtype)
    if ord == 1:
        return np.sum(a, axis=1)
    if ord == 2:
        return np.sqrt(np.sum(a * a, axis=1))
    return np.sum(a**ord, axis=1) ** (1.0 / ord)


vector_norm = _group_op(
    "vector_norm",
    _vector_norm,
    lambda ord=2: _norm_code(ord),
    signature=lambda x, ord=2, dim=None, keepdim=False: None,
    methods=(),
    functions=(),
    linalg=("vector_norm",),
    node_name="LinalgVectorNormBackward0",
    jvp=_norm_jvp,
    cases=[
        Case(((3, 4),)),
        Case(((3, 4),), {"ord": 1, "dim": 1}),
        Case(((3, 4),), {"ord": 3, "dim": 0, "keepdim": True}),
        Case(((3, 4),), {"ord": math.inf, "dim": 1}),
        Case(((3, 4),), {"ord": -math.inf}),
        Case(((2, 3, 4),), {"ord": 0.5, "dim": (0, 2)}, low=0.2, high=2.0),
    ],
    doc="The ord-norm of input over dim, the whole tensor flattened when dim is None.",
)


def _norm_forward(x, p="fro", dim=None, keepdim=False):
    """torch.norm: 'fro' (and None) is the 2-norm over the dims; a number p the p-norm."""
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise NotImplementedError(f"norm(): p={p!r} is not supported")
    return vector_norm.forward(x, dim, keepdim, ord=p)


norm = defop(
    "norm",
    _norm_forward,
    group_backward,
    methods=("norm",),
    node_name="NormBackward1",
    jvp=lambda x, t, result, p="fro", dim=None, keepdim=False: _norm_jvp(
        x, t, result, 2 if p in ("fro", None) else p, dim, keepdim
    ),
    cases=[Case(((3, 4),)), Case(((3, 4),), {"p": 1, "dim": 1}), Case(((3, 4),), {"p": 4.0})],
    doc="The p-norm of input (Frobenius by default) over dim.",
)

# ---------------------------------------------------------------------------------------------
# max/min: without dim the extreme value (ties share the gradient); with dim (values,
# indices), the gradient going to the index returned; with a tensor, maximum/minimum

MaxMin = collections.namedtuple("MaxMin", ["values", "indices"])


def _take_flat_forward(x, index):
    result, saved, ip = take_forward(x, index)
    return result, saved, ip, ()


take_flat = defop(
    "_take_flat",
    _take_flat_forward,
    take_backward,
    functions=(),
    node_name="MaxBackward0",
    cases=[Case(((3, 4),), {"index": [[0, 5], [11, 0]]})],
    int_ok=True,
    jvp="linear",
)


def _extreme_api(name, op, argop, binary):
    def api(apply, input, dim=None, keepdim=False):
        if dim is not None and not isinstance(dim, numbers.Integral):  # torch.max(input, other)
            return apply(binary, input, dim)
        if dim is None:
            return apply(op, input)
        indices = apply(argop, input, dim=dim, keepdim=keepdim)
        shape = tuple(input.shape) or (1,)
        d = wrap_dim(name, dim, len(shape))
        idx = np.asarray(indices).reshape(tuple(1 if k == d else s for k, s in enumerate(shape)))
        flat = np.take_along_axis(_positions(shape), idx, axis=d)
        values = apply(take_flat, input, index=flat.reshape(indices.shape))
        return MaxMin(values, indices)

    return api


def _whole(name, f, code):
    def forward(x):
        if x.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        xg = np.ascontiguousarray(x).reshape(1, -1)
        result = np.asarray(f(xg), dtype=x.dtype).reshape(1)
        # p = 1: a NaN result's gradient goes to the NaN elements (group_backward)
        return result.reshape(()), (xg.reshape(-1), result), (1, x.size, 1, code), (1.0,)

    forward.__name__ = name
    return forward


# ---------------------------------------------------------------------------------------------
# scans along a dim: cumsum, cumprod, logcumsumexp

CUMSUM, CUMPROD, LOGCUMSUMEXP = range(3)


@parallel
@assigning
@kernel
def scan_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # x viewed as (outer, size, inner); the scan runs along size. ip = (outer, size, inner,
    # code); saved (x, result) for cumprod and logcumsumexp. gi[1]: store into a fresh
    # buffer (_jit.assigning); gi[2], gi[3]: part p of P (_jit.parallel): a share of the
    # outer * inner scans
    if gi[0] < 0:
        return
    outer, size, inner, code = ip[0], ip[1], ip[2], ip[3]
    n = outer * size * inner
    g = view(G, go[0], n)
    grad_x = view(G, gi[0], n)
    x = saved(V, so, sa, 0, n) if code != CUMSUM else g
    result = saved(V, so, sa, 1, n) if code != CUMSUM else g
    assign = gi[1] == 1
    lo, hi = part(gi, 1, outer * inner)
    for r in range(lo, hi):
        o, c = divmod(r, inner)
        base = o * size * inner + c
        if code == CUMSUM:
            # grad_x_i = sum_{j >= i} grad_j
            acc = 0.0
            if assign:
                for t in range(size - 1, -1, -1):
                    i = base + t * inner
                    acc += g[i]
                    grad_x[i] = acc
            else:
                for t in range(size - 1, -1, -1):
                    i = base + t * inner
                    acc += g[i]
                    grad_x[i] += acc
            continue
        if assign:  # the formulas below add, some not into every element: zero this scan
            for t in range(size):
                grad_x[base + t * inner] = 0.0
        if code == CUMPROD:
            # grad_x_i = sum_{j >= i} grad_j prod_{m <= j, m != i} x_m. Before the first zero
            # z that is sum_{i <= j < z} grad_j result_j / x_i; at z the products skip x_z;
            # after z every product contains x_z = 0.
            z = size
            for t in range(size):
                if x[base + t * inner] == 0:
                    z = t
                    break
            acc = 0.0
            for t in range(z - 1, -1, -1):
                i = base + t * inner
                acc += g[i] * result[i]
                grad_x[i] += acc / x[i]
            if z < size:
                p = result[base + (z - 1) * inner] if z > 0 else 1.0
                s = g[base + z * inner] * p
                for t in range(z + 1, size):
                    p *= x[base + t * inner]
                    s += g[base + t * inner] * p
                grad_x[base + z * inner] += s
        else:
            # grad_x_i = sum_{j >= i} grad_j exp(x_i - result_j), accumulated in log space
            # separately for positive and negative grad_j so nothing overflows
            lp = -math.inf
            ln = -math.inf
            for t in range(size - 1, -1, -1):
                i = base + t * inner
                gv = g[i]
                if gv > 0:
                    a = math.log(gv) - result[i]
                    m = max(lp, a)
                    lp = m + math.log(math.exp(lp - m) + math.exp(a - m))
                elif gv < 0:
                    a = math.log(-gv) - result[i]
                    m = max(ln, a)
                    ln = m + math.log(math.exp(ln - m) + math.exp(a - m))
                grad_x[i] += math.exp(x[i] + lp) - math.exp(x[i] + ln)


def _cumprod_grad_with_zeros(ctx, x, grad, d):
    """grad_x_i = sum_{j >= i} grad_j prod_{m <= j, m != i} x_m without dividing by x:
    (prod_{m < i} x_m) sum_{j >= i} grad_j R_ij with R_ij = prod_{i < m <= j} x_m, the
    cumulative products of x with its first i + 1 entries set to 1 (an n x n matrix per
    scan: create_graph through a cumprod of a tensor holding zeros is rare)."""
    ng = ctx.ng
    n = x.shape[d]
    xt, gt = x.movedim(d, -1), grad.movedim(d, -1)
    m = np.arange(n)
    after = ctx.constant(m[None, :] > m[:, None])  # [i, m]: m > i
    upper = ctx.constant(m[None, :] >= m[:, None])  # [i, j]: j >= i
    R = ng.where(after > 0, xt.unsqueeze(-2), ctx.constant(1.0)).cumprod(-1)
    S = (upper * gt.unsqueeze(-2) * R).sum(-1)
    return (_exclusive_cumprod(ctx, xt, -1) * S).movedim(-1, d)


@formula_of(scan_backward)
def _scan_formula(ctx, grad):
    code = ctx.ip[3]
    xs = ctx.input_shapes[0]
    if not xs:
        return (grad,)  # a scan of one element is the identity
    d = wrap_dim("scan", ctx.kwargs["dim"], len(xs))

    def reverse_cumsum(t):  # sum_{j >= i} t_j along d
        return t.flip((d,)).cumsum(d).flip((d,))

    if code == CUMSUM:
        return (reverse_cumsum(grad),)
    x, r = ctx.input(0, 0), ctx.output(0, 1)
    if code == CUMPROD:
        # grad_x_i = sum_{j >= i} grad_j result_j / x_i
        if x._data.all():
            return (reverse_cumsum(grad * r) / x,)
        return (_cumprod_grad_with_zeros(ctx, x, grad, d),)
    # logcumsumexp: grad_x_i = sum_{j >= i} grad_j exp(x_i - result_j)
    if not x._data.size or max(np.abs(x._data).max(), np.abs(r._data).max()) < 600:
        return (x.exp() * reverse_cumsum(grad * (-r).exp()),)
    # exp(x) or exp(-result) would overflow (|v| > ~709 in float64): pairwise instead, where
    # x_i - result_j <= 0 for j >= i (result_j is a logsumexp over x_0..x_j), an n x n
    # matrix per scan
    ng = ctx.ng
    m = np.arange(x.shape[d])
    upper = ctx.constant(m[None, :] >= m[:, None])  # [i, j]: j >= i
    xt, rt, gt = x.movedim(d, -1), r.movedim(d, -1), grad.movedim(d, -1)
    pairs = ng.where(upper > 0, xt.unsqueeze(-1) - rt.unsqueeze(-2), ctx.constant(-np.inf))
    return ((pairs.exp() * gt.unsqueeze(-2)).sum(-1).movedim(-1, d),)


def _logcumsumexp(x, axis):
    return np.logaddexp.accumulate(x, axis=axis)


@cached(**LOOP)
def _cumsum_rows(x, result, size, inner, lo, hi):
    """Cumulative sums of the (outer, size, inner) C-order ``x`` along size, for outer rows
    lo:hi, into ``result`` (both flat). Contiguous scans (inner == 1) accumulate in float64,
    so float32 results are at least as accurate as numpy's; strided ones add whole rows in
    the array's dtype, as numpy does. numpy's cumsum along the last axis took 4.0 ms at
    (1000, 1000) float64, torch's 0.8 ms (benchmarks/op_families.py)."""
    for o in range(lo, hi):
        b = o * size * inner
        if inner == 1:
            acc = 0.0
            for t in range(size):
                acc += x[b + t]
                result[b + t] = acc
        elif size:
            result[b : b + inner] = x[b : b + inner]
            for t in range(1, size):  # row t = row t - 1 + x's row t: unit-stride, vectorises
                p = b + (t - 1) * inner
                q = p + inner
                for c in range(inner):
                    result[q + c] = result[p + c] + x[q + c]


def _cumsum(x, axis):
    if x.dtype.kind != "f":
        return np.cumsum(x, axis=axis)  # (int64: _scan_op widened it, as torch)
    outer, size, inner = outer_inner(x.shape, axis)
    flat = np.ascontiguousarray(x).reshape(-1)
    result = np.empty(x.size, x.dtype)
    parallel_for(lambda lo, hi: _cumsum_rows(flat, result, size, inner, lo, hi), outer, x.size)
    return result.reshape(x.shape)


def _scan_op(name, f, code, cases, **kw):
    def forward(x, dim):
        d = wrap_dim(name, dim, max(x.ndim, 1))
        xv = (x if x.ndim else x.reshape(1)).astype(_accumulating(x.dtype), copy=False)
        result = np.asarray(f(xv, axis=d))
        if x.dtype.kind == "f":
            result = result.astype(x.dtype, copy=False)
        result = np.ascontiguousarray(result).reshape(x.shape)
        saved = () if code == CUMSUM else (x, result)
        return result, saved, outer_inner(x.shape, d) + (code,), ()

    forward.__name__ = name
    kw.setdefault("methods", (name,))
    return defop(name, forward, scan_backward, cases=cases, **kw)


cumsum = _scan_op(
    "cumsum",
    _cumsum,
    CUMSUM,
    cases=[Case(((3, 4),), {"dim": 1}), Case(((2, 3, 4),), {"dim": 0}), Case(((),), {"dim": 0})],
    int_ok=True,
    keywords={"dtype": cast_first("cumsum")},
    doc="The running sum of input along dim.",
    jvp="linear",
)
cumprod = _scan_op(
    "cumprod",
    np.cumprod,
    CUMPROD,
    cases=[
        Case(((3, 4),), {"dim": 1}),
        Case(((2, 3, 4),), {"dim": -2}),
    ],
    int_ok=True,
    keywords={"dtype": cast_first("cumprod")},
    doc="The running product of input along dim.",
)
logcumsumexp = _scan_op(
    "logcumsumexp",
    _logcumsumexp,
    LOGCUMSUMEXP,
    cases=[Case(((3, 4),), {"dim": 1}), Case(((2, 3, 4),), {"dim": 0}, low=-30, high=30)],
    doc="log(cumsum(exp(input))) along dim, computed without overflow.",
)

# ---------------------------------------------------------------------------------------------
# no gradient: argmax/argmin, count_nonzero, all/any


def _arg(name, f, **kw):
    def forward(x, dim=None, keepdim=False):
        if x.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0."
            )
        if dim is None:  # torch: keepdim is ignored without dim
            return np.asarray(f(x), np.int64), (), (), ()
        d = wrap_dim(name, dim, max(x.ndim, 1))
        r = f(x.reshape(x.shape or (1,)), axis=d)
        if keepdim:
            r = np.expand_dims(r, d)
        return np.asarray(r, np.int64).reshape(r.shape if x.ndim else ()), (), (), ()

    return defop(
        name,
        forward,
        methods=(name,),
        int_result=True,
        int_ok=True,
        cases=[
            Case(((3, 4),)),
            Case(((3, 4),), {"dim": 1}),
            Case(((2, 3, 4),), {"dim": -1, "keepdim": True}),
        ],
        **kw,
    )


argmax = _arg(
    "argmax",
    np.argmax,
    doc=(
        "The index of the first maximum of input over dim (of the flattened input "
        "when dim is None)."
    ),
)
argmin = _arg(
    "argmin",
    np.argmin,
    doc=(
        "The index of the first minimum of input over dim (of the flattened input "
        "when dim is None)."
    ),
)


def _declare_extreme(name, f, code, argop, binary, **kw):
    op = defop(
        name,
        _whole(name, f, code),
        group_backward,
        methods=(name,),
        node_name=f"{name.capitalize()}Backward1",
        cases=[Case(((3, 4),)), Case(((5,),), low=0, high=1.01)],
        int_ok=True,
        **kw,
    )
    op.api = _extreme_api(name, op, argop, binary)
    return op


max_ = _declare_extreme(
    "max",
    lambda xg: np.max(xg, axis=1),
    AMAX,
    argmax,
    maximum,
    doc=(
        "The maximum of input; with dim, the named tuple (values, indices) over dim. "
        "The gradient goes to the selected entries."
    ),
)
min_ = _declare_extreme(
    "min",
    lambda xg: np.min(xg, axis=1),
    AMIN,
    argmin,
    minimum,
    doc=(
        "The minimum of input; with dim, the named tuple (values, indices) over dim. "
        "The gradient goes to the selected entries."
    ),
)


def _test_reduction(name, f, **kw):
    def forward(x, dim=None, keepdim=False):
        dims, out_shape, _ = _reduce_params(name, x.shape, dim, keepdim)
        result = np.asarray(f(x, axis=dims, keepdims=keepdim)).reshape(out_shape)
        # (torch keeps uint8 for all/any of uint8, a legacy of its byte masks)
        return result.astype(x.dtype) if x.dtype == np.uint8 else result, (), (), ()

    return defop(
        name,
        forward,
        methods=(name,),
        int_result=True,
        int_ok=True,
        cases=[
            Case(((3, 4),), low=-0.2, high=1),
            Case(((3, 4),), {"dim": 1}, low=-0.2, high=1),
            Case(((2, 3, 4),), {"dim": (0, 2), "keepdim": True}, low=-0.1, high=1),
        ],
        **kw,
    )


def _count_nonzero(x, dim=None):
    dims = None if dim is None else _reduce_params("count_nonzero", x.shape, dim, False)[0]
    return np.asarray(np.count_nonzero(x, axis=dims), np.int64), (), (), ()


count_nonzero = defop(
    "count_nonzero",
    _count_nonzero,
    methods=("count_nonzero",),
    int_result=True,
    int_ok=True,
    cases=[Case(((3, 4),), low=-0.5, high=1), Case(((3, 4),), {"dim": 1}, low=-0.5, high=1)],
    doc="The number of nonzero entries of input over dim.",
)
all_ = _test_reduction("all", np.all, doc="True where every entry of input over dim is nonzero.")
any_ = _test_reduction("any", np.any, doc="True where some entry of input over dim is nonzero.")
