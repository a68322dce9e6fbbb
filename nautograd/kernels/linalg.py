"""Matrix products for 1-D and 2-D operands (``@``, matmul, mm, mv, dot) through BLAS."""

import numba
import numpy as np

from ._jit import kernel, saved, view
from .registry import Case, defop


def _mm_shapes(op, xs, ys):
    if len(xs) not in (1, 2) or len(ys) not in (1, 2):
        raise RuntimeError(
            f"{op}(): only 1-D and 2-D operands are supported, got shapes {tuple(xs)} and "
            f"{tuple(ys)}"
        )
    m, k = (1, xs[0]) if len(xs) == 1 else xs
    k2, n = (ys[0], 1) if len(ys) == 1 else ys
    if k != k2:
        raise RuntimeError(
            f"{op}(): shapes {tuple(xs)} and {tuple(ys)} cannot be multiplied "
            f"({m}x{k} and {k2}x{n})"
        )
    return m, k, n


@numba.njit(cache=True, nogil=True)
def _dot(x, y):
    return np.dot(x, y)


# numpy and scipy each ship an OpenBLAS with its own spinning thread pool; the backward's
# products run on scipy's (through Numba), so large forward products do too: mixing the two
# pools made a 128x784x256 float32 product take 3.4 ms instead of 0.44 ms on 2 cores.
_BLAS_FLOPS = 1 << 16


def _matmul_forward(x, y):
    m, k, n = _mm_shapes("matmul", x.shape, y.shape)
    if m * k * n >= _BLAS_FLOPS and x.ndim == 2 and y.ndim == 2:
        result = _dot(np.ascontiguousarray(x), np.ascontiguousarray(y))
    else:
        result = np.matmul(x, y)
    return result, (x, y), (m, k, n), ()


@kernel
def matmul_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # result = x @ y with x (m, k), y (k, n): grad_x += grad @ y^T, grad_y += x^T @ grad
    m, k, n = ip[0], ip[1], ip[2]
    g = view(G, go[0], m * n).reshape((m, n))
    if gi[0] >= 0:
        y = saved(V, so, sa, 1, k * n).reshape((k, n))
        grad_x = view(G, gi[0], m * k).reshape((m, k))
        grad_x += np.dot(g, y.T)
    if gi[1] >= 0:
        x = saved(V, so, sa, 0, m * k).reshape((m, k))
        grad_y = view(G, gi[1], k * n).reshape((k, n))
        grad_y += np.dot(x.T, g)


_CASES = [
    Case(((3, 4), (4, 5))),
    Case(((4,), (4, 5))),
    Case(((3, 4), (4,))),
    Case(((4,), (4,))),
    Case(((1, 1), (1, 3))),
]

matmul = defop(
    "matmul",
    _matmul_forward,
    matmul_backward,
    nin=2,
    node_name="MmBackward0",
    methods=("matmul",),
    dunders=("__matmul__", "__rmatmul__"),
    cases=_CASES,
)


def _mm_forward(x, y):
    if x.ndim != 2 or y.ndim != 2:
        raise RuntimeError(
            f"mm(): self must be a matrix and mat2 must be a matrix, got "
            f"shapes {tuple(x.shape)} and {tuple(y.shape)}"
        )
    return _matmul_forward(x, y)


def _mv_forward(x, y):
    if x.ndim != 2 or y.ndim != 1:
        raise RuntimeError(
            f"mv(): expected a matrix and a vector, got shapes "
            f"{tuple(x.shape)} and {tuple(y.shape)}"
        )
    return _matmul_forward(x, y)


def _dot_forward(x, y):
    if x.ndim != 1 or y.ndim != 1:
        raise RuntimeError(f"dot(): 1D tensors expected, but got {x.ndim}D and {y.ndim}D tensors")
    return _matmul_forward(x, y)


mm = defop("mm", _mm_forward, matmul_backward, nin=2, methods=("mm",), cases=_CASES[:1])
mv = defop("mv", _mv_forward, matmul_backward, nin=2, methods=("mv",), cases=_CASES[2:3])
dot = defop("dot", _dot_forward, matmul_backward, nin=2, methods=("dot",), cases=_CASES[3:4])
