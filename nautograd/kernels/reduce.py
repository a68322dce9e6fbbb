"""Reductions: sum, mean (dim: int, tuple or None; keepdim)."""

import numpy as np

from ._jit import bcast_offsets, kernel, view
from ._shapes import coalesce, numel, wrap_dims
from .registry import Case, defop

_PARAMS = {}


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
    # grad_x[i] += scale * grad[reduced index of i]
    if gi[0] < 0:
        return
    n, m, mode = ip[0], ip[1], ip[2]
    g = view(G, go[0], m)
    grad_x = view(G, gi[0], n)
    if mode == 0:
        for i in range(n):
            grad_x[i] += scale * g[i]
    elif mode == 2:  # two dims after coalescing: no index array
        d0, d1, s0, s1 = ip[3], ip[4], ip[5], ip[6]
        for a in range(d0):
            for b in range(d1):
                grad_x[a * d1 + b] += scale * g[a * s0 + b * s1]
    elif mode == -1:
        v = scale * g[0]
        for i in range(n):
            grad_x[i] += v
    else:
        offs = bcast_offsets(ip, 3, mode, 0, n)
        for i in range(n):
            grad_x[i] += scale * g[offs[i]]


def _sum_forward(x, dim=None, keepdim=False):
    dims, out_shape, ip = _reduce_params("sum", x.shape, dim, keepdim)
    result = np.sum(x, axis=dims, keepdims=keepdim) if dims else x.copy()
    return np.asarray(result, dtype=x.dtype).reshape(out_shape), (), ip, (1.0,)


def _mean_forward(x, dim=None, keepdim=False):
    dims, out_shape, ip = _reduce_params("mean", x.shape, dim, keepdim)
    count = numel([x.shape[d] for d in dims])
    result = np.mean(x, axis=dims, keepdims=keepdim) if dims else x.copy()
    scale = 1.0 / count if count else float("nan")
    return np.asarray(result, dtype=x.dtype).reshape(out_shape), (), ip, (scale,)


@kernel
def sum_backward(G, G2, go, gi, V, so, sa, ip, fp):
    _sum_to_input(G, go, gi, ip, fp[0])


_CASES = [
    Case(((3, 4),)),
    Case(((3, 4),), {"dim": 1}),
    Case(((2, 3, 4),), {"dim": (0, 2)}),
    Case(((2, 3, 4),), {"dim": -2, "keepdim": True}),
    Case(((2, 3, 4),), {"dim": (0, 2), "keepdim": True}),
    Case(((),)),
]

sum_ = defop("sum", _sum_forward, sum_backward, methods=("sum",), cases=_CASES, int_ok=True)
mean = defop("mean", _mean_forward, sum_backward, methods=("mean",), cases=_CASES)
