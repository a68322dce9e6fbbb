"""Normalising ops along a dim: softmax, log_softmax, logsumexp."""

import math

import numba
import numpy as np

from .._threads import parallel_for
from ._jit import assigning, bcast_offsets, kernel, parallel, part, saved, view
from ._shapes import outer_inner, wrap_dim
from ._vmath import LOOP, vexp
from .reduce import _reduce_params
from .registry import Case, defop


def _softmax_loop(x, outer, size, inner, log):
    xf = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(xf.size, x.dtype)
    # rows are independent: split them over the intra-op threads when large
    parallel_for(lambda lo, hi: _softmax_rows(xf, out, lo, hi, size, inner, log), outer, xf.size)
    return out.reshape(x.shape)


@numba.njit(**LOOP)
def _softmax_rows(xf, out, lo, hi, size, inner, log):
    # y = exp(x - max) / sum(exp(x - max)) along the middle axis of (outer, size, inner);
    # log: x - max - log(sum(exp(x - max))). One compiled pass instead of six numpy calls;
    # the exps go through out first so that their loop vectorises (_vmath.vexp), and the
    # max and the sum use four accumulators (a single one is bound by the add's latency)
    for o in range(lo, hi):
        for c in range(inner):
            base = o * size * inner + c
            m = _row_max(xf, base, size, inner)
            if not np.isfinite(m):
                m = 0.0
            if inner == 1:  # contiguous rows: loops over row slices vectorise best
                xr = xf[base : base + size]
                orow = out[base : base + size]
                for i in range(size):
                    orow[i] = vexp(np.float64(xr[i]) - m)
            else:
                for j in range(size):
                    out[base + j * inner] = vexp(np.float64(xf[base + j * inner]) - m)
            s = _row_sum(out, base, size, inner)
            if log:
                ls = math.log(s)
                if inner == 1:
                    xr = xf[base : base + size]
                    orow = out[base : base + size]
                    for i in range(size):
                        orow[i] = xr[i] - m - ls
                else:
                    for j in range(size):
                        out[base + j * inner] = xf[base + j * inner] - m - ls
            else:
                r = 1.0 / s
                for j in range(size):
                    out[base + j * inner] = out[base + j * inner] * r


@numba.njit(inline="always")
def _row_max(a, base, size, inner):
    m0 = m1 = m2 = m3 = -np.inf
    j = 0
    while j + 4 <= size:
        m0 = max(m0, a[base + j * inner])
        m1 = max(m1, a[base + (j + 1) * inner])
        m2 = max(m2, a[base + (j + 2) * inner])
        m3 = max(m3, a[base + (j + 3) * inner])
        j += 4
    while j < size:
        m0 = max(m0, a[base + j * inner])
        j += 1
    return max(max(m0, m1), max(m2, m3))


@numba.njit(inline="always")
def _row_sum(a, base, size, inner):
    s0 = s1 = s2 = s3 = 0.0
    j = 0
    while j + 4 <= size:
        s0 += a[base + j * inner]
        s1 += a[base + (j + 1) * inner]
        s2 += a[base + (j + 2) * inner]
        s3 += a[base + (j + 3) * inner]
        j += 4
    while j < size:
        s0 += a[base + j * inner]
        j += 1
    return (s0 + s1) + (s2 + s3)


def _softmax_forward(x, dim):
    d = wrap_dim("softmax", dim, x.ndim)
    oi = outer_inner(x.shape, d)
    result = _softmax_loop(x, *oi, False)
    return result, (result,), oi + (0,), ()


def _log_softmax_forward(x, dim):
    d = wrap_dim("log_softmax", dim, x.ndim)
    oi = outer_inner(x.shape, d)
    result = _softmax_loop(x, *oi, True)
    return result, (result,), oi + (1,), ()


@parallel
@assigning
@kernel
def softmax_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # along the dim, with y the saved result:
    #   softmax (ip[3] == 0):     grad_x = y * (grad - sum_j grad_j y_j)
    #   log_softmax (ip[3] == 1): grad_x = grad - exp(y) * sum_j grad_j
    if gi[0] < 0:
        return
    outer, size, inner, log = ip[0], ip[1], ip[2], ip[3]
    n = outer * size * inner
    g = view(G, go[0], n)
    y = saved(V, so, sa, 0, n)
    grad_x = view(G, gi[0], n)
    assign = gi[1] == 1  # fresh buffer (see _jit.assigning): every element is written once
    lo, hi = part(gi, 1, outer)  # gi[2], gi[3]: part p of P (_jit.parallel): its outer rows
    if inner == 1:
        # contiguous rows (the usual last dim): one loop per case so that each vectorises
        for o in range(lo, hi):
            b = o * size
            s = _row_dot(g, y, b, size, 1, log)
            gr = g[b : b + size]
            yr = y[b : b + size]
            dr = grad_x[b : b + size]
            if log and assign:
                for i in range(size):
                    dr[i] = gr[i] - vexp(yr[i]) * s
            elif log:
                for i in range(size):
                    dr[i] += gr[i] - vexp(yr[i]) * s
            elif assign:
                for i in range(size):
                    dr[i] = yr[i] * (gr[i] - s)
            else:
                for i in range(size):
                    dr[i] += yr[i] * (gr[i] - s)
        return
    if assign:  # strided rows (a dim other than the last): zero, then the one loop below
        grad_x[lo * size * inner : hi * size * inner] = 0
    for o in range(lo, hi):
        for c in range(inner):
            base = o * size * inner + c
            s = _row_dot(g, y, base, size, inner, log)
            for j in range(size):
                i = base + j * inner
                grad_x[i] += g[i] - vexp(y[i]) * s if log else y[i] * (g[i] - s)


@numba.njit(inline="always")
def _row_dot(g, y, base, size, inner, log):
    # sum_j grad_j (log_softmax) or sum_j grad_j y_j (softmax) along one row of the dim
    if log:
        return _row_sum(g, base, size, inner)
    s0 = s1 = 0.0
    j = 0
    while j + 2 <= size:
        s0 += g[base + j * inner] * y[base + j * inner]
        s1 += g[base + (j + 1) * inner] * y[base + (j + 1) * inner]
        j += 2
    if j < size:
        s0 += g[base + j * inner] * y[base + j * inner]
    return s0 + s1


_CASES = [Case(((3, 4),), {"dim": 1}), Case(((2, 3, 4),), {"dim": -2}), Case(((5,),), {"dim": 0})]

softmax = defop(
    "softmax",
    _softmax_forward,
    softmax_backward,
    methods=("softmax",),
    nn_functional=True,
    node_name="SoftmaxBackward0",
    cases=_CASES,
)
log_softmax = defop(
    "log_softmax",
    _log_softmax_forward,
    softmax_backward,
    methods=("log_softmax",),
    nn_functional=True,
    node_name="LogSoftmaxBackward0",
    cases=_CASES,
)


def _logsumexp_forward(x, dim, keepdim=False):
    dims, out_shape, ip = _reduce_params("logsumexp", x.shape, dim, keepdim)
    if not dims:
        return x.copy(), (x, x.copy()), ip, ()
    m = np.max(x, axis=dims, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    kept = np.log(np.sum(np.exp(x - m), axis=dims, keepdims=True)) + m
    kept = kept.astype(x.dtype, copy=False)
    return kept.reshape(out_shape), (x, kept), ip, ()


@kernel
def logsumexp_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # grad_x = grad * exp(x - result), the result broadcast back over the reduced dims
    if gi[0] < 0:
        return
    n, m, mode = ip[0], ip[1], ip[2]
    g = view(G, go[0], m)
    x = saved(V, so, sa, 0, n)
    result = saved(V, so, sa, 1, m)
    grad_x = view(G, gi[0], n)
    if mode == 0:
        for i in range(n):
            grad_x[i] += g[i] * math.exp(x[i] - result[i])
    elif mode == -1:
        for i in range(n):
            grad_x[i] += g[0] * math.exp(x[i] - result[0])
    else:
        offs = bcast_offsets(ip, 3, mode, 0, n)
        for i in range(n):
            j = offs[i]
            grad_x[i] += g[j] * math.exp(x[i] - result[j])


logsumexp = defop(
    "logsumexp",
    _logsumexp_forward,
    logsumexp_backward,
    methods=("logsumexp",),
    cases=[
        Case(((3, 4),), {"dim": 1}),
        Case(((2, 3, 4),), {"dim": (0, 2), "keepdim": True}),
        Case(((5,),), {"dim": 0}),
    ],
)
