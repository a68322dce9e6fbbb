"""Normalising ops along a dim: softmax, log_softmax, logsumexp."""

import math

import numba
import numpy as np

from ._jit import bcast_offsets, kernel, saved, view
from ._shapes import outer_inner, wrap_dim
from .reduce import _reduce_params
from .registry import Case, defop


@numba.njit(cache=True, nogil=True)
def _softmax_loop(x, outer, size, inner, log):
    # y = exp(x - max) / sum(exp(x - max)) along the middle axis of (outer, size, inner);
    # log: x - max - log(sum(exp(x - max))). One compiled pass instead of six numpy calls.
    xf = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(xf.size, x.dtype)
    for o in range(outer):
        for c in range(inner):
            base = o * size * inner + c
            m = -np.inf
            for j in range(size):
                v = xf[base + j * inner]
                if v > m:
                    m = v
            if not np.isfinite(m):
                m = 0.0
            s = 0.0
            for j in range(size):
                s += math.exp(xf[base + j * inner] - m)
            if log:
                ls = math.log(s)
                for j in range(size):
                    out[base + j * inner] = xf[base + j * inner] - m - ls
            else:
                for j in range(size):
                    out[base + j * inner] = math.exp(xf[base + j * inner] - m) / s
    return out.reshape(x.shape)


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
    for o in range(outer):
        for c in range(inner):
            base = o * size * inner + c
            s = 0.0
            for j in range(size):
                i = base + j * inner
                s += g[i] if log else g[i] * y[i]
            for j in range(size):
                i = base + j * inner
                if log:
                    grad_x[i] += g[i] - math.exp(y[i]) * s
                else:
                    grad_x[i] += y[i] * (g[i] - s)


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
