"""Linear algebra: matmul for every operand rank torch accepts (batched, broadcast batch dims),
mm, bmm, mv, dot, outer, einsum, trace, and linalg.inv/det/slogdet/solve/cholesky.

Products run through BLAS (numpy forward for small ones; the backward calls gemm straight into
the gradient buffers, one 2-D product per batch item); factorizations through scipy's LAPACK
(kernels/_lapack.py forward, Numba's ``np.linalg`` backward: one OpenBLAS, one thread pool).
"""

import collections
import string

import numba
import numpy as np

from .._numba_setup import cached
from . import _lapack
from ._jit import (
    KERNEL,
    assigning,
    bcast_offsets,
    gemm,
    kernel,
    lu_solve_t,
    saved,
    saved_index,
    trsm,
    view,
)
from ._shapes import broadcast_shapes, broadcast_strides, coalesce, numel
from .index import diagonal as _diagonal
from .index import expand as _expand
from .reduce import sum_ as _sum
from .registry import OP_BY_NAME, Case, defcomposite, defop, formula_of
from .shape import permute as _permute
from .shape import reshape as _reshape

_DIMS = {}


def _mm_dims(op, xs, ys):
    """(batch shape, m, k, n, x batch shape, y batch shape) of x @ y, torch's rules.

    Cached per (op, shapes): uncached it cost 1.6 us of the RNN step's ~15 us per op."""
    key = (op, xs, ys)
    hit = _DIMS.get(key)
    if hit is None:
        if len(_DIMS) > 4096:
            _DIMS.clear()
        hit = _DIMS[key] = _mm_dims_uncached(op, xs, ys)
    return hit


def _mm_dims_uncached(op, xs, ys):
    if not xs or not ys:
        raise RuntimeError(
            f"{op}(): both arguments need at least 1 dimension, got shapes {tuple(xs)} and "
            f"{tuple(ys)}"
        )
    x2 = (1,) + tuple(xs) if len(xs) == 1 else tuple(xs)
    y2 = tuple(ys) + (1,) if len(ys) == 1 else tuple(ys)
    m, k = x2[-2:]
    k2, n = y2[-2:]
    if k != k2:
        raise RuntimeError(
            f"{op}(): shapes {tuple(xs)} and {tuple(ys)} cannot be multiplied ({m}x{k} and "
            f"{k2}x{n})"
        )
    bx, by = x2[:-2], y2[:-2]
    return broadcast_shapes(op, bx, by), m, k, n, bx, by


@cached(nogil=True)
def _dot(x, y):
    return np.dot(x, y)


# The backward's products run in scipy's BLAS (kernels/_jit.py gemm); forward products of
# this many multiply-adds or more run there too, so that numpy's OpenBLAS pool and scipy's do
# not both spin (mixing them made a 128x784x256 float32 product take 3.4 ms instead of
# 0.44 ms on 2 cores). Smaller ones stay with numpy, whose call costs less.
_BLAS_FLOPS = 1 << 16


@cached(nogil=True, error_model="numpy")
def _outer(x, y, result):
    # result[i, j] = x[i] * y[j]: a product with k == 1. numpy's OpenBLAS gemm took 31 us for
    # (256, 1) @ (1, 128) float64 and 955 us at (1000, 1) @ (1, 1000); this loop 2.5 and 70
    # (torch 4.1 and 98)
    m, n = result.shape
    for i in range(m):
        s = x[i]
        row = result[i]
        for j in range(n):
            row[j] = s * y[j]


def _matmul_forward(x, y, op="matmul"):
    batch, m, k, n, bx, by = _mm_dims(op, x.shape, y.shape)
    if not batch:
        if k == 1 and x.ndim == 2 and y.ndim == 2 and x.dtype == y.dtype:
            # a matrix product of inner size 1 is the products themselves, as torch's mm: a
            # -0.0 product stays -0.0 (numpy's matmul adds it to 0.0: +0.0, and atan2 of it
            # then differs by 2 pi). torch's mv, vm and bmm add from 0.0, as np.matmul below
            if m * n >= 64 and x.dtype.kind == "f":
                result = np.empty((m, n), x.dtype)
                _outer(
                    np.ascontiguousarray(x.reshape(m)), np.ascontiguousarray(y.reshape(n)), result
                )
            else:
                result = np.multiply(x, y)
        elif m * k * n >= _BLAS_FLOPS and x.ndim == 2 and y.ndim == 2 and x.dtype.kind == "f":
            result = _dot(np.ascontiguousarray(x), np.ascontiguousarray(y))
        else:
            result = np.matmul(x, y)
        return result, (x, y), (m, k, n, 1, 0), ()
    # batch item b of the result multiplies x's item xo[b] by y's item yo[b]
    cshape, (sx, sy) = coalesce(
        list(batch), [broadcast_strides(bx, batch), broadcast_strides(by, batch)]
    )
    ip = (m, k, n, numel(batch), len(cshape), *cshape, *sx, *sy, numel(bx), numel(by))
    if m * k * n * numel(batch) >= _BLAS_FLOPS and x.ndim >= 2 and y.ndim >= 2 and _one_float(x, y):
        # item by item in scipy's BLAS (numpy's batched matmul would wake numpy's pool against
        # the backward's), broadcast operands read in place
        result = np.empty((*batch, m, n), x.dtype)
        _batched_into(
            result.reshape(-1, m, n),
            np.ascontiguousarray(x).reshape(-1, m, k),
            np.ascontiguousarray(y).reshape(-1, k, n),
            np.array(ip, np.int64),
        )
    else:
        result = np.matmul(x, y)
    return result, (x, y), ip, ()


def _one_float(x, y):
    return x.dtype == y.dtype and x.dtype.char in "fd"


@cached(nogil=True)
def _batched_into(result, x, y, ip):
    """``result[b] = x[xo[b]] @ y[yo[b]]`` over the broadcast batch (``ip``: matmul's)."""
    B, nd = ip[3], ip[4]
    xo = bcast_offsets(ip, 5, nd, 0, B)
    yo = bcast_offsets(ip, 5, nd, 1, B)
    for b in range(B):
        gemm(result[b], x[xo[b]], y[yo[b]], False, False, 0.0)


def _matmul_spec(name, ndims=None):
    """The deferred forward's spec (registry.Op.lazy) of a product without batch dims (1-D or
    2-D operands; ``ndims``: the ranks the op requires, else it runs eagerly and raises)."""

    def spec(shapes, kwargs):
        xs, ys = shapes
        if kwargs or len(xs) > 2 or len(ys) > 2 or (ndims and (len(xs), len(ys)) != ndims):
            return None
        batch, m, k, n, bx, by = _mm_dims(name, xs, ys)
        if m * k * n > 1 << 16 or (k == 1 and len(xs) == 2 and len(ys) == 2):
            return None  # (too big; or the products themselves, eagerly: -0.0 as torch's mm)
        out = (m,) * (len(xs) == 2) + (n,) * (len(ys) == 2)
        return out, (m, k, n, 1, 0), (), 3, m * n

    return spec


# One row of x times a column y of one element per row: its dot product with fastmath
# "reassoc" (the kernels' flags allow "contract" only), so that LLVM sums in vector lanes, as
# BLAS does; the slices start at 0, so no negative-index branch (docs/architecture.md). The RNN
# benchmark's 32x32 matrix-vector product: 1.6 us in the loop below, 0.09 us so.
@numba.njit(**{**KERNEL, "fastmath": KERNEL["fastmath"] | {"reassoc"}})
def _row_dot(S, x0, y0, n):
    x = S[x0 : x0 + n]
    y = S[y0 : y0 + n]
    result = 0.0
    for i in range(n):
        result += x[i] * y[i]
    return result


@kernel
def matmul_lazy(S, xo, xn, k, top, ip, fp, oo, on):
    # result (m, n) = x (m, k) @ y (k, n), row by row (a 1-D x is one row, a 1-D y a column)
    m, kk, n = ip[0], ip[1], ip[2]
    x0, y0 = xo[0], xo[1]
    if n == 1:
        for i in range(m):
            S[top + i] = _row_dot(S, x0 + i * kk, y0, kk)
    else:
        # result row i = sum over l of x[i, l] * y row l, in order; on slices from 0 (a
        # 16x16 product: 2.6 -> 0.7 us)
        for i in range(m):
            row = S[top + i * n : top + i * n + n]
            for j in range(n):
                row[j] = 0.0
            for l in range(kk):
                a = S[x0 + i * kk + l]
                y = S[y0 + l * n : y0 + l * n + n]
                for j in range(n):
                    row[j] += a * y[j]
    oo[0] = top
    on[0] = m * n
    return 1


@assigning
@kernel
def matmul_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # result = x @ y per batch item, x (m, k), y (k, n): grad_x += grad @ y^T,
    # grad_y += x^T @ grad, summed over the items a broadcast operand takes part in.
    # gi[2], gi[3]: the buffer is fresh (_jit.assigning): BLAS stores (beta 0) instead
    m, k, n, B, nd = ip[0], ip[1], ip[2], ip[3], ip[4]
    if nd == 0:
        g = view(G, go[0], m * n).reshape((m, n))
        if gi[0] >= 0:
            y = saved(V, so, sa, 1, k * n).reshape((k, n))
            grad_x = view(G, gi[0], m * k).reshape((m, k))
            gemm(grad_x, g, y, False, True, 0.0 if gi[2] == 1 else 1.0)
        if gi[1] >= 0:
            x = saved(V, so, sa, 0, m * k).reshape((m, k))
            grad_y = view(G, gi[1], k * n).reshape((k, n))
            gemm(grad_y, x, g, True, False, 0.0 if gi[3] == 1 else 1.0)
        return
    nxb, nyb = ip[5 + 3 * nd], ip[6 + 3 * nd]
    xo = bcast_offsets(ip, 5, nd, 0, B)
    yo = bcast_offsets(ip, 5, nd, 1, B)
    g = view(G, go[0], B * m * n)
    x = saved(V, so, sa, 0, nxb * m * k)
    y = saved(V, so, sa, 1, nyb * k * n)
    # a fresh buffer of a broadcast operand is written by several items: zero it once
    for j in range(2):
        if gi[j] >= 0 and gi[2 + j] == 1:
            view(G, gi[j], nxb * m * k if j == 0 else nyb * k * n)[:] = 0
    for b in range(B):
        gb = g[b * m * n : (b + 1) * m * n].reshape((m, n))
        if gi[0] >= 0:
            yb = y[yo[b] * k * n : (yo[b] + 1) * k * n].reshape((k, n))
            grad_x = view(G, gi[0] + xo[b] * m * k, m * k).reshape((m, k))
            gemm(grad_x, gb, yb, False, True, 1.0)
        if gi[1] >= 0:
            xb = x[xo[b] * m * k : (xo[b] + 1) * m * k].reshape((m, k))
            grad_y = view(G, gi[1] + yo[b] * k * n, k * n).reshape((k, n))
            gemm(grad_y, xb, gb, True, False, 1.0)


_CASES = [
    Case(((3, 4), (4, 5))),
    Case(((4,), (4, 5))),
    Case(((3, 4), (4,))),
    Case(((4,), (4,))),
    Case(((1, 1), (1, 3))),
    Case(((16, 1), (1, 8))),  # an outer product (_outer)
    Case(((2, 3, 4), (4, 5))),
    Case(((2, 1, 3, 4), (3, 4, 2))),
    Case(((4,), (2, 4, 3))),
    Case(((2, 3, 4), (4,))),
]


@formula_of(matmul_backward)
def _matmul_formula(ctx, grad):
    # torch.matmul's rules: a 1-D x is a row (1, k), a 1-D y a column (k, 1), removed from the
    # result; batch dims broadcast. grad_X = G Y^T, grad_Y = X^T G, summed to each shape.
    xs, ys = ctx.input_shapes
    need = ctx.needs_input_grad
    if len(xs) + len(ys) == 3:
        # a matrix and a vector: the products themselves, no reshapes (each op of a formula
        # runs from Python: six ops were two). x (n, k) @ y (k,): grad_x = grad y', grad_y =
        # x' grad; x (k,) @ y (k, m): grad_x = y grad, grad_y = x grad'
        if len(xs) == 2:
            grad_x = ctx.ng.outer(grad, ctx.input(1, 1)) if need[0] else None
            grad_y = ctx.input(0, 0).mT @ grad if need[1] else None
        else:
            grad_x = ctx.input(1, 1) @ grad if need[0] else None
            grad_y = ctx.ng.outer(ctx.input(0, 0), grad) if need[1] else None
        return grad_x, grad_y
    x, y = ctx.input(0, 0), ctx.input(1, 1)
    X = x.unsqueeze(0) if x.ndim == 1 else x
    Y = y.unsqueeze(-1) if y.ndim == 1 else y
    G = grad
    if y.ndim == 1:
        G = G.unsqueeze(-1)
    if x.ndim == 1:
        G = G.unsqueeze(-2)
    grad_x = grad_y = None
    if need[0]:
        grad_x = ctx.sum_to(G @ Y.mT, X.shape)
        grad_x = grad_x if tuple(grad_x.shape) == tuple(xs) else grad_x.reshape(xs)
    if need[1]:
        grad_y = ctx.sum_to(X.mT @ G, Y.shape)
        grad_y = grad_y if tuple(grad_y.shape) == tuple(ys) else grad_y.reshape(ys)
    return grad_x, grad_y


matmul = defop(
    "matmul",
    _matmul_forward,
    matmul_backward,
    nin=2,
    same_dtype=True,
    int_ok=True,  # integer products stay integer (torch)
    node_name="MmBackward0",
    saved_names=("self", "mat2"),  # (torch's MmBackward0's; its other shapes name others)
    methods=("matmul",),
    dunders=("__matmul__", "__rmatmul__"),
    cases=_CASES,
    lazy=(_matmul_spec("matmul"), matmul_lazy),
    doc=(
        "The matrix product of input and other with torch's rules for every rank: "
        "vectors are promoted and removed again, leading dimensions broadcast as "
        "batches."
    ),
    jvp="bilinear",
)


def _mm_forward(x, y):
    if x.ndim != 2 or y.ndim != 2:
        raise RuntimeError(
            f"mm(): self must be a matrix and mat2 must be a matrix, got "
            f"shapes {tuple(x.shape)} and {tuple(y.shape)}"
        )
    return _matmul_forward(x, y, "mm")


def _bmm_forward(x, y):
    if x.ndim != 3 or y.ndim != 3:
        raise RuntimeError(
            f"bmm(): batch1 and batch2 must be 3D tensors, got shapes {tuple(x.shape)} and "
            f"{tuple(y.shape)}"
        )
    if x.shape[0] != y.shape[0]:
        raise RuntimeError(
            f"bmm(): batch1 and batch2 must have the same batch size, got shapes "
            f"{tuple(x.shape)} and {tuple(y.shape)}"
        )
    return _matmul_forward(x, y, "bmm")


def _mv_forward(x, y):
    if x.ndim != 2 or y.ndim != 1:
        raise RuntimeError(
            f"mv(): expected a matrix and a vector, got shapes "
            f"{tuple(x.shape)} and {tuple(y.shape)}"
        )
    return _matmul_forward(x, y, "mv")


def _dot_forward(x, y):
    if x.ndim != 1 or y.ndim != 1:
        raise RuntimeError(f"dot(): 1D tensors expected, but got {x.ndim}D and {y.ndim}D tensors")
    return _matmul_forward(x, y, "dot")


def _outer_forward(x, y):
    if x.ndim != 1 or y.ndim != 1:
        raise RuntimeError(f"outer(): 1D tensors expected, but got {x.ndim}D and {y.ndim}D tensors")
    return _matmul_forward(x.reshape(-1, 1), y.reshape(1, -1), "outer")


mm = defop(
    "mm",
    _mm_forward,
    matmul_backward,
    same_dtype=True,
    nin=2,
    int_ok=True,  # integer products stay integer (torch)
    methods=("mm",),
    tensor_names=("input", "mat2"),
    saved_names=("self", "mat2"),
    cases=_CASES[:1],
    lazy=(_matmul_spec("mm", (2, 2)), matmul_lazy),
    doc="The product of two matrices.",
    jvp="bilinear",
)
bmm = defop(
    "bmm",
    _bmm_forward,
    matmul_backward,
    same_dtype=True,
    nin=2,
    int_ok=True,  # integer products stay integer (torch)
    methods=("bmm",),
    tensor_names=("input", "mat2"),
    saved_names=("self", "mat2"),
    cases=[Case(((2, 3, 4), (2, 4, 5)))],
    doc="The products of two batches of matrices, (b, n, m) @ (b, m, p).",
    jvp="bilinear",
)
mv = defop(
    "mv",
    _mv_forward,
    matmul_backward,
    same_dtype=True,
    nin=2,
    int_ok=True,  # integer products stay integer (torch)
    methods=("mv",),
    tensor_names=("input", "vec"),
    saved_names=("self", "vec"),
    cases=_CASES[2:3],
    lazy=(_matmul_spec("mv", (2, 1)), matmul_lazy),
    doc="The product of a matrix and a vector.",
    jvp="bilinear",
)
dot = defop(
    "dot",
    _dot_forward,
    matmul_backward,
    same_dtype=True,
    nin=2,
    int_ok=True,  # integer products stay integer (torch)
    methods=("dot",),
    tensor_names=("input", "tensor"),
    saved_names=("self", "tensor"),
    cases=_CASES[3:4],
    lazy=(_matmul_spec("dot", (1, 1)), matmul_lazy),
    doc="The inner product of two vectors.",
    jvp="bilinear",
)


# ---------------------------------------------------------------------------------------------
# linear: x @ w^T (+ b) as one node (torch's addmm / mm), not t, matmul and add


def _linear_forward(x, w, b=None):
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise RuntimeError(
            f"linear(): mat1 and mat2 shapes cannot be multiplied "
            f"({'x'.join(map(str, x.shape))} and {'x'.join(map(str, w.shape[::-1]))})"
        )
    m, k = x.shape
    n = w.shape[0]
    if b is not None and b.shape not in ((n,), (), (1,)):
        raise RuntimeError(
            f"linear(): the bias of shape {tuple(b.shape)} does not match the output features ({n})"
        )
    if m * k * n >= _BLAS_FLOPS and x.dtype == w.dtype and x.dtype.char in "fd":
        result = np.empty((m, n), x.dtype)
        _linear_into(result, np.ascontiguousarray(x), np.ascontiguousarray(w))
    else:
        result = np.matmul(x, w.T)
    if b is not None:
        result += b
        bias = 1 if b.size == n else 2  # a (n,) bias, or one element broadcast
        return result, (x, w), (m, k, n, bias), ()
    return result, (x, w), (m, k, n, 0), ()


@cached(nogil=True)
def _linear_into(result, x, w):
    gemm(result, x, w, False, True, 0.0)


@assigning
@kernel
def linear_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # result = x @ w^T + b, x (m, k), w (n, k): grad_x = grad @ w, grad_w = grad^T @ x,
    # grad_b = the column sums of grad (all of grad for a one-element bias). The assign
    # flags follow the inputs' slots: gi[nin + j], nin = 2 or 3 with a bias
    m, k, n, bias = ip[0], ip[1], ip[2], ip[3]
    nin = 3 if bias else 2
    g = view(G, go[0], m * n).reshape((m, n))
    if gi[0] >= 0:
        w = saved(V, so, sa, 1, n * k).reshape((n, k))
        grad_x = view(G, gi[0], m * k).reshape((m, k))
        gemm(grad_x, g, w, False, False, 0.0 if gi[nin] == 1 else 1.0)
    if gi[1] >= 0:
        x = saved(V, so, sa, 0, m * k).reshape((m, k))
        grad_w = view(G, gi[1], n * k).reshape((n, k))
        gemm(grad_w, g, x, True, False, 0.0 if gi[nin + 1] == 1 else 1.0)
    if bias and gi[2] >= 0:
        nb = n if bias == 1 else 1
        grad_b = view(G, gi[2], nb)
        if gi[nin + 2] == 1:
            for j in range(nb):
                grad_b[j] = 0.0
        for i in range(m):
            row = g[i]
            if bias == 1:
                for j in range(n):
                    grad_b[j] += row[j]
            else:
                for j in range(n):
                    grad_b[0] += row[j]


@formula_of(linear_backward)
def _linear_formula(ctx, grad):
    x, w = ctx.input(0, 0), ctx.input(1, 1)
    need = ctx.needs_input_grad
    grad_x = grad @ w if need[0] else None
    grad_w = grad.mT @ x if need[1] else None
    if len(need) == 2:
        return grad_x, grad_w
    grad_b = None
    if need[2]:
        bs = ctx.input_shapes[2]
        grad_b = grad.sum(0) if bs == (grad.shape[1],) else grad.sum().reshape(bs)
    return grad_x, grad_w, grad_b


linear_mm = defop(
    "_linear",
    _linear_forward,
    linear_backward,
    same_dtype=True,
    nin=2,
    functions=(),
    node_name="MmBackward0",
    cases=[Case(((4, 3), (5, 3))), Case(((1, 7), (2, 7)))],
    jvp="bilinear",
)
linear_addmm = defop(
    "_linear_bias",
    _linear_forward,
    linear_backward,
    same_dtype=True,
    nin=3,
    functions=(),
    node_name="AddmmBackward0",
    cases=[Case(((4, 3), (5, 3), (5,))), Case(((3, 2), (4, 2), (1,)))],
    jvp="bilinear",
)


def _outer_formula(ctx, grad):
    x, y = ctx.input(0, 0), ctx.input(1, 1)
    need = ctx.needs_input_grad
    return (grad @ y if need[0] else None, x @ grad if need[1] else None)


outer = defop(
    "outer",
    _outer_forward,
    matmul_backward,
    formula=_outer_formula,
    nin=2,
    int_ok=True,  # integer products stay integer (torch)
    methods=("outer", "ger"),
    functions=("outer", "ger"),
    tensor_names=("input", "vec2"),
    cases=[Case(((3,), (4,)))],
    doc="The outer product of two vectors, result[i, j] = input[i] * other[j].",
    jvp="bilinear",
)

# ---------------------------------------------------------------------------------------------
# square-matrix functions, batched over leading dims: (B, n, n) after a free reshape


def _square(op, a):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise RuntimeError(
            f"{op}(): A must be batches of square matrices, but they are "
            f"{a.shape[-2] if a.ndim >= 2 else 1} by {a.shape[-1] if a.ndim else 1} matrices"
        )
    return numel(a.shape[:-2]), a.shape[-1]


def _lapack_call(op, f, *args):
    try:
        return f(*args)
    except np.linalg.LinAlgError as e:
        raise RuntimeError(f"{op}(): {e}") from None


INV, DET, LOGABSDET, CHOLESKY = range(4)


@kernel
def square_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # ip = (B, n, code); saved (A, result) per batch item of n x n (det: one value an item)
    if gi[0] < 0:
        return
    B, n, code = ip[0], ip[1], ip[2]
    nn = n * n
    a = saved(V, so, sa, 0, B * nn)
    grad_a = view(G, gi[0], B * nn)
    if code == INV:
        # R = A^-1: grad_A = -R^T grad R^T
        r = saved(V, so, sa, 1, B * nn)
        g = view(G, go[0], B * nn)
        for b in range(B):
            rb = r[b * nn : (b + 1) * nn].reshape((n, n))
            gb = g[b * nn : (b + 1) * nn].reshape((n, n))
            grad_a[b * nn : (b + 1) * nn] -= np.dot(np.dot(rb.T, gb), rb.T).reshape(nn)
    elif code == DET or code == LOGABSDET:
        # d det(A) = det(A) A^-T; d log|det A| = A^-T
        r = saved(V, so, sa, 1, B)
        g = view(G, go[0], B)
        for b in range(B):
            ab = np.ascontiguousarray(a[b * nn : (b + 1) * nn].reshape((n, n)))
            if code == DET and r[b] == 0.0:
                # A singular: d det(A) = adj(A)^T = det(U) det(V) U diag(prod_{j != i} s_j) V^T
                # from A = U S V^T (torch's gradient there; A^-1 does not exist)
                u, sv, vt = np.linalg.svd(ab)
                others = np.ones_like(sv)
                for i in range(n):
                    for j in range(n):
                        if j != i:
                            others[i] *= sv[j]
                sign = np.linalg.det(u) * np.linalg.det(vt)
                adj_t = np.dot(u * others, vt)
                grad_a[b * nn : (b + 1) * nn] += (g[b] * sign) * adj_t.reshape(nn)
                continue
            scale = g[b] * (r[b] if code == DET else 1.0)
            grad_a[b * nn : (b + 1) * nn] += scale * np.linalg.inv(ab).T.copy().reshape(nn)
    else:
        # A = L L^T: grad_A = sym(L^-T Phi(L^T grad_L) L^-1), Phi: lower triangle, halved
        # diagonal (Murray 2016, as torch's cholesky_backward), by two triangular solves
        # where L^-1 and two products cost twice the flops (200 x 200: ~1.8 -> ~0.9 ms)
        r = saved(V, so, sa, 1, B * nn)
        g = view(G, go[0], B * nn)
        phi = np.empty((n, n), grad_a.dtype)
        for b in range(B):
            lb = np.ascontiguousarray(r[b * nn : (b + 1) * nn].reshape((n, n)))
            gb = np.ascontiguousarray(g[b * nn : (b + 1) * nn].reshape((n, n)))
            gemm(phi, lb, gb, True, False, 0.0)
            for i in range(n):
                phi[i, i] *= 0.5
                for j in range(i + 1, n):
                    phi[i, j] = 0.0
            trsm(phi, lb, True, True, True, False)  # L^-T Phi
            trsm(phi, lb, False, False, True, False)  # (L^-T Phi) L^-1
            ga = grad_a[b * nn : (b + 1) * nn].reshape((n, n))
            for i in range(n):
                for j in range(n):
                    ga[i, j] += 0.5 * (phi[i, j] + phi[j, i])


def _inv_forward(a):
    B, n = _square("linalg.inv", a)
    result = _lapack_call("linalg.inv", _lapack.inv, a)
    return result, (a, result), (B, n, INV), ()


def _det_forward(a):
    B, n = _square("linalg.det", a)
    result = np.asarray(_lapack_call("linalg.det", _lapack.det, a), dtype=a.dtype)
    return result, (a, result.reshape(-1)), (B, n, DET), ()


def _logabsdet_forward(a):
    B, n = _square("linalg.slogdet", a)
    _, result = _lapack_call("linalg.slogdet", _lapack.slogdet, a)
    result = np.asarray(result, dtype=a.dtype)
    return result, (a, result.reshape(-1)), (B, n, LOGABSDET), ()


def _cholesky_forward(a):
    B, n = _square("linalg.cholesky", a)
    try:
        result = _lapack.cholesky(a)
    except np.linalg.LinAlgError:
        raise RuntimeError(
            "linalg.cholesky(): The factorization could not be completed because the input is "
            "not positive-definite."
        ) from None
    return result, (a, result), (B, n, CHOLESKY), ()


def _spd(f, a, shift):
    return f(a @ a.mT + shift)  # symmetric positive definite


def _shifted(f, a, shift):
    return f(a + shift)  # well conditioned


_SQUARE_CASES = [
    Case(((3, 3),), {"shift": "eye(3)"}, call=_shifted),
    Case(((2, 4, 4),), {"shift": "eye(4)"}, call=_shifted),
]


def _inv_formula(ctx, grad):
    r = ctx.output(0, 1).mT  # d(A^-1) = -A^-1 dA A^-1: grad_A = -R^T grad R^T
    return (-(r @ grad @ r),)


def _det_formula(ctx, grad):
    # d det(A) = det(A) tr(A^-1 dA): grad_A = grad det(A) A^-T (A invertible)
    a, d = ctx.input(0, 0), ctx.output(0, 1)
    return ((grad * d).unsqueeze(-1).unsqueeze(-1) * ctx.ng.linalg.inv(a).mT,)


def _logabsdet_formula(ctx, grad):
    # d log|det A| = tr(A^-1 dA)
    a = ctx.input(0, 0)
    return (grad.unsqueeze(-1).unsqueeze(-1) * ctx.ng.linalg.inv(a).mT,)


inv = defop(
    "inverse",
    _inv_forward,
    square_backward,
    formula=_inv_formula,
    methods=("inverse",),
    functions=("inverse",),
    linalg=("inv",),
    jvp=lambda x, t, result: -(result @ t @ result),  # d(A^-1) = -A^-1 dA A^-1
    node_name="LinalgInvExBackward0",
    cases=_SQUARE_CASES,
    doc=(
        "The inverse of a square matrix (or of each matrix of a batch); the gradient "
        "is -A^-T grad A^-T."
    ),
)
det = defop(
    "det",
    _det_forward,
    square_backward,
    formula=_det_formula,
    methods=("det",),
    linalg=("det",),
    node_name="LinalgDetBackward0",
    cases=_SQUARE_CASES,
    doc="The determinant of a square matrix (or of each matrix of a batch).",
)
logabsdet = defop(
    "_logabsdet",
    _logabsdet_forward,
    square_backward,
    formula=_logabsdet_formula,
    functions=(),
    node_name="LinalgSlogdetBackward0",
    # d log|det A| = tr(A^-1 dA)
    jvp=lambda x, t, result: (x.inverse() * t.mT).sum((-2, -1)),
    cases=[
        Case(((3, 3),), {"shift": "eye(3)"}, call=lambda f, a, shift: f(a + shift)),
        Case(((2, 3, 3),), {"shift": "eye(3)"}, call=lambda f, a, shift: f(a - shift)),
    ],
)


def _slogdet_sign_forward(a):
    _square("linalg.slogdet", a)
    sign, _ = _lapack_call("linalg.slogdet", _lapack.slogdet, a)
    return np.asarray(sign, dtype=a.dtype), (), (), ()


slogdet_sign = defop(
    "_slogdet_sign",
    _slogdet_sign_forward,
    functions=(),
    cases=[Case(((3, 3),))],
)

SlogdetResult = collections.namedtuple("slogdet", ["sign", "logabsdet"])


def _slogdet(apply, input):  # noqa: A002  (torch's names)
    """(sign, log|det A|): the sign carries no gradient, as torch's."""
    return SlogdetResult(apply(slogdet_sign, input), apply(logabsdet, input))


slogdet = defcomposite(
    "slogdet",
    _slogdet,
    [Case(((3, 3),), {"shift": "eye(3)"}, call=lambda f, a, shift: f(a + shift).logabsdet)],
    methods=("slogdet",),
    linalg=("slogdet",),
    doc=(
        "The sign and the log of the absolute value of the determinant, as the named "
        "tuple (sign, logabsdet)."
    ),
)


def _cholesky_jvp(L, t):
    # dL = L Phi(L^-1 dA L^-T), Phi: the lower triangle with the diagonal halved (torch's)
    inverse = L.inverse()
    inner = inverse @ t @ inverse.mT
    n = L.shape[-1]
    half = np.tril(np.ones((n, n), np.dtype(L.dtype))) - 0.5 * np.eye(n, dtype=np.dtype(L.dtype))
    return L @ (inner * half)


def _cholesky_formula(ctx, grad):
    # the kernel's formula: grad_A = sym(L^-T Phi(L^T grad) L^-1), Phi keeping the lower
    # triangle with the diagonal halved; L is the node's output, so it is differentiated too
    L = ctx.output(0, 1)
    n = L.shape[-1]
    phi = (L.mT @ grad) * ctx.constant(np.tril(np.ones((n, n))) - 0.5 * np.eye(n))
    li = ctx.ng.linalg.inv(L)
    s = li.mT @ phi @ li
    return (0.5 * (s + s.mT),)


def _cholesky_upper(apply, input, upper=False):  # noqa: A002  (torch's names)
    # cholesky(A, upper=True): U = L^T, A = U^T U
    factor = apply(cholesky, input)
    return apply(OP_BY_NAME["transpose"], factor, dim0=-2, dim1=-1) if upper else factor


cholesky = defop(
    "cholesky",
    _cholesky_forward,
    square_backward,
    formula=_cholesky_formula,
    methods=("cholesky",),
    linalg=("cholesky",),
    keywords={"upper": lambda apply, *args, **kwargs: _cholesky_upper(apply, *args, **kwargs)},
    node_name="LinalgCholeskyExBackward0",
    jvp=lambda x, t, result: _cholesky_jvp(result, t),
    cases=[
        Case(((3, 3),), {"shift": "eye(3)"}, call=_spd),
        Case(((2, 4, 4),), {"shift": "eye(4)"}, call=_spd),
    ],
    doc=(
        "The lower Cholesky factor L of a symmetric positive-definite matrix, A = L L^T "
        "(upper=True: U = L^T)."
    ),
)


def _solve_forward(a, b, left=True):
    if not left:
        raise NotImplementedError("linalg.solve(left=False) is not supported")
    B, n = _square("linalg.solve", a)
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    bb = b[..., None] if vector else b
    if bb.shape[:-2] != a.shape[:-2] or bb.shape[-2] != n:
        raise RuntimeError(
            f"linalg.solve(): incompatible shapes: A {tuple(a.shape)} and B {tuple(b.shape)} "
            "(batch dims must match; broadcasting them is not supported)"
        )
    x, lu, piv = _lapack_call("linalg.solve", _lapack.solve, a, bb)
    k = bb.shape[-1]
    return (x[..., 0] if vector else x), (a, x, lu, piv), (B, n, k), ()


@kernel
def solve_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # X = A^-1 B: grad_B = A^-T grad, grad_A = -grad_B X^T. A^-T grad from the forward's LU
    # factors (saved 2 and 3), where a new factorisation cost O(n^3) (200 x 200, one
    # right-hand side: ~480 us against ~20)
    B, n, k = ip[0], ip[1], ip[2]
    nn, nk = n * n, n * k
    x = saved(V, so, sa, 1, B * nk)
    lu = saved(V, so, sa, 2, B * nn)
    piv = saved_index(sa, 3, B * n)
    g = view(G, go[0], B * nk)
    cols = np.empty((k, n), g.dtype)  # the right-hand sides column by column (LAPACK's order)
    outer = np.empty((n, n), g.dtype)
    ipiv = np.empty(n, np.int32)
    info = np.zeros(1, np.int32)
    for b in range(B):
        for i in range(n):
            ipiv[i] = piv[b * n + i] + 1  # (LAPACK counts from 1)
        gb = g[b * nk : (b + 1) * nk].reshape((n, k))
        for i in range(n):
            for c in range(k):
                cols[c, i] = gb[i, c]
        lu_solve_t(cols, lu[b * nn : (b + 1) * nn], ipiv, info)
        if gi[1] >= 0:
            grad_b = view(G, gi[1] + b * nk, nk)
            for i in range(n):
                for c in range(k):
                    grad_b[i * k + c] += cols[c, i]
        if gi[0] >= 0:
            xb = np.ascontiguousarray(x[b * nk : (b + 1) * nk].reshape((n, k)))
            gemm(outer, cols, xb, True, True, 0.0)  # grad_B X^T, grad_B = cols^T
            grad_a = view(G, gi[0] + b * nn, nn)
            grad_a -= outer.reshape(nn)


def _solve_formula(ctx, grad):
    # X = A^-1 B: grad_B = A^-T grad, grad_A = -grad_B X^T
    a, x = ctx.input(0, 0), ctx.output(0, 1)
    grad_b = ctx.ng.linalg.solve(a.mT, grad)
    need = ctx.needs_input_grad
    grad_a = None
    if need[0]:
        if x.ndim == a.ndim - 1:  # B was a vector (a batch of vectors)
            grad_a = -(grad_b.unsqueeze(-1) @ x.unsqueeze(-2))
        else:
            grad_a = -(grad_b @ x.mT)
    return grad_a, grad_b if need[1] else None


solve = defop(
    "solve",
    _solve_forward,
    solve_backward,
    formula=_solve_formula,
    nin=2,
    functions=(),
    linalg=("solve",),
    node_name="LinalgSolveExBackward0",
    cases=[
        Case(((3, 3), (3, 2)), {"shift": "eye(3)"}, call=lambda f, a, b, shift: f(a + shift, b)),
        Case(((3, 3), (3,)), {"shift": "eye(3)"}, call=lambda f, a, b, shift: f(a + shift, b)),
        Case(
            ((2, 3, 3), (2, 3, 4)), {"shift": "eye(3)"}, call=lambda f, a, b, shift: f(a + shift, b)
        ),
    ],
    tensor_names=("A", "B"),
    doc=(
        "The solution X of A X = B (left=True) or X A = B, by LU factorisation.\n"
        "B: (Tensor) the right-hand side, a vector, a matrix or a batch of them."
    ),
)


def _solve_triangular_forward(a, b, upper, unitriangular=False):
    B, n = _square("linalg.solve_triangular", a)
    if b.ndim < 2 or b.shape[:-2] != a.shape[:-2] or b.shape[-2] != n:
        raise RuntimeError(
            f"linalg.solve_triangular(): incompatible shapes: A {tuple(a.shape)} and B "
            f"{tuple(b.shape)} (B: (*, n, k) with A's batch dims; broadcasting them is not "
            "supported)"
        )
    x = _lapack.solve_triangular(a, b, bool(upper), bool(unitriangular))
    k = b.shape[-1]
    return x, (a, x), (B, n, k, int(bool(upper)), int(bool(unitriangular))), ()


@kernel
def solve_triangular_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # X = A^-1 B with A's upper or lower triangle (unit diagonal if unitriangular):
    # grad_B = A^-T grad (a triangular solve through A's triangle), grad_A = -grad_B X^T on
    # that triangle (the entries A's solve never read get no gradient, as torch's)
    B, n, k, upper, unit = ip[0], ip[1], ip[2], ip[3], ip[4]
    nn, nk = n * n, n * k
    a = saved(V, so, sa, 0, B * nn)
    x = saved(V, so, sa, 1, B * nk)
    g = view(G, go[0], B * nk)
    sol = np.empty((n, k), g.dtype)
    outer = np.empty((n, n), g.dtype)
    for b in range(B):
        ab = np.ascontiguousarray(a[b * nn : (b + 1) * nn].reshape((n, n)))
        sol[:] = g[b * nk : (b + 1) * nk].reshape((n, k))
        trsm(sol, ab, True, True, not upper, unit)  # A^-T grad, through A's triangle
        if gi[1] >= 0:
            grad_b = view(G, gi[1] + b * nk, nk)
            grad_b += sol.reshape(nk)
        if gi[0] >= 0:
            xb = np.ascontiguousarray(x[b * nk : (b + 1) * nk].reshape((n, k)))
            gemm(outer, sol, xb, False, True, 0.0)
            grad_a = view(G, gi[0] + b * nn, nn)
            for i in range(n):
                lo, hi = (i, n) if upper else (0, i + 1)
                if unit:
                    lo, hi = (i + 1, n) if upper else (0, i)
                for j in range(lo, hi):
                    grad_a[i * n + j] -= outer[i, j]


def _solve_triangular_formula(ctx, grad):
    # as the kernel, with ops: grad_B = solve_triangular(A^T, grad), grad_A on A's triangle
    a, x = ctx.input(0, 0), ctx.output(0, 1)
    upper, unit = bool(ctx.ip[3]), bool(ctx.ip[4])
    grad_b = ctx.ng.linalg.solve_triangular(a.mT, grad, upper=not upper, unitriangular=unit)
    grad_a = None
    if ctx.needs_input_grad[0]:
        outer = -(grad_b @ x.mT)
        if upper:
            grad_a = outer.triu(1 if unit else 0)
        else:
            grad_a = outer.tril(-1 if unit else 0)
    return grad_a, grad_b if ctx.needs_input_grad[1] else None


def _solve_triangular_api(apply, A, B, *, upper, left=True, unitriangular=False):
    """torch.linalg.solve_triangular: X with A X = B (left) or X A = B, A triangular."""
    if left:
        return apply(solve_triangular, A, B, upper=upper, unitriangular=unitriangular)
    # X A = B <=> A^T X^T = B^T, A^T triangular on the other side
    result = apply(solve_triangular, A.mT, B.mT, upper=not upper, unitriangular=unitriangular)
    return result.mT


def _triangular(f, a, b, shift, **kw):
    return f(a + shift, b, **kw)


solve_triangular = defop(
    "solve_triangular",
    _solve_triangular_forward,
    solve_triangular_backward,
    formula=_solve_triangular_formula,
    nin=2,
    api=_solve_triangular_api,
    functions=(),
    linalg=("solve_triangular",),
    node_name="LinalgSolveTriangularBackward0",
    cases=[
        Case(((3, 3), (3, 2)), {"shift": "eye(3)", "upper": True}, call=_triangular),
        Case(((3, 3), (3, 2)), {"shift": "eye(3)", "upper": False}, call=_triangular),
        Case(
            ((2, 3, 3), (2, 3, 4)),
            {"shift": "eye(3)", "upper": False, "unitriangular": True},
            call=_triangular,
        ),
    ],
    tensor_names=("A", "B"),
    doc=(
        "The solution X of A X = B (left=True) or X A = B with A triangular: only its upper "
        "(upper=True) or lower triangle is read, its diagonal taken as ones with "
        "unitriangular=True.\n"
        "B: (Tensor) the right-hand side, a matrix or a batch of them.\n"
        "upper: (bool) whether A is upper (True) or lower triangular.\n"
        "unitriangular: (bool) whether A's diagonal is taken as all ones."
    ),
)


def _cholesky_solve(apply, input, input2, upper=False):
    """torch.cholesky_solve: X with A X = input, from A's Cholesky factor input2 (lower,
    A = L L^T; upper: A = U^T U), by two triangular solves. (torch documents the arguments
    as B and L, and takes them by these names.)"""
    factor = input2
    if upper:
        y = _solve_triangular_api(apply, factor.mT, input, upper=False)
        return _solve_triangular_api(apply, factor, y, upper=True)
    y = _solve_triangular_api(apply, factor, input, upper=False)
    return _solve_triangular_api(apply, factor.mT, y, upper=True)


cholesky_solve = defcomposite(
    "cholesky_solve",
    _cholesky_solve,
    [
        # (a factor is triangular: torch's gradient assumes it is, the solves read one side)
        Case(
            ((3, 2), (3, 3)),
            {"shift": "eye(3)"},
            call=lambda f, b, factor, shift: f(b, (factor + shift).tril()),
        ),
        Case(
            ((2, 3, 2), (2, 3, 3)),
            {"shift": "eye(3)", "upper": True},
            call=lambda f, b, factor, shift, upper: f(b, (factor + shift).triu(), upper=upper),
        ),
    ],
    methods=("cholesky_solve",),
    doc=(
        "The solution X of A X = input from the Cholesky factor of A, by two triangular "
        "solves.\n"
        "input2: (Tensor) the Cholesky factor of A, lower (A = L L^T) or upper (A = U^T U).\n"
        "upper: (bool) whether input2 is the upper factor."
    ),
)

# ---------------------------------------------------------------------------------------------
# einsum and trace, written with permute / diagonal / sum / expand / reshape / matmul


def _parse_einsum(equation, shapes):
    """Terms (one string of single-letter indices per operand) and the output term, with
    ``...`` replaced by letters of their own (upper case, so they sort first as torch's do)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(
            f"einsum(): {len(terms)} operands in the equation but {len(shapes)} were given"
        )
    used = set(eq) - set(".,->")
    spare = [c for c in string.ascii_uppercase if c not in used]
    n_ell = max(
        (len(s) - (len(t) - 3) for t, s in zip(terms, shapes, strict=True) if "..." in t), default=0
    )
    ell = "".join(spare[:n_ell])
    out_terms = []
    for t, s in zip(terms, shapes, strict=True):
        if "..." in t:
            k = len(s) - (len(t) - 3)
            t = t.replace("...", ell[n_ell - k :] if k else "")
        if len(t) != len(s) or not all(c.isalpha() for c in t):
            raise ValueError(
                f"einsum(): the term {t!r} does not match an operand of {len(s)} dimensions"
            )
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:  # implicit: the broadcast dims, then the indices that appear once, sorted
        counts = {}
        for t in out_terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    for c in out:
        if not any(c in t for t in out_terms):
            raise ValueError(f"einsum(): output subscript {c} does not appear in the inputs")
    return out_terms, out


def _einsum(apply, equation, *operands):
    """torch.einsum: every contraction, as diagonals, sums, and batched matrix products."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    terms, out = _parse_einsum(equation, [tuple(o.shape) for o in operands])
    sizes = {}
    for t, o in zip(terms, operands, strict=True):
        for c, s in zip(t, o.shape, strict=True):
            if sizes.get(c, 1) != s and s != 1 and sizes.get(c, 1) != 1:
                raise RuntimeError(
                    f"einsum(): subscript {c} has size {s} for operand with shape "
                    f"{tuple(o.shape)}, which does not broadcast with size {sizes[c]}"
                )
            sizes[c] = max(sizes.get(c, 1), s)
    items = []
    for idx, (t, x) in enumerate(zip(terms, operands, strict=True)):
        # repeated index within one term: its diagonal (numpy puts it last)
        while len(set(t)) < len(t):
            c = next(c for c in t if t.count(c) > 1)
            i = t.index(c)
            j = t.index(c, i + 1)
            x = apply(_diagonal, x, offset=0, dim1=i, dim2=j)
            t = t[:i] + t[i + 1 : j] + t[j + 1 :] + c
        # indices no other operand nor the output uses: sum them now
        others = out + "".join(terms[:idx] + terms[idx + 1 :])
        lone = [i for i, c in enumerate(t) if c not in others]
        if lone:
            x = apply(_sum, x, dim=tuple(lone))
            t = "".join(c for c in t if c in others)
        items.append((t, x))
    t, x = items[0]
    for k in range(1, len(items)):
        u, y = items[k]
        later = out + "".join(s for s, _ in items[k + 1 :])
        batch = [c for c in t if c in u and c in later]
        contract = [c for c in t if c in u and c not in later]
        x_only = [c for c in t if c not in u]
        y_only = [c for c in u if c not in t]
        x = _arrange(apply, x, t, batch + x_only + contract, sizes, len(batch))
        y = _arrange(apply, y, u, batch + contract + y_only, sizes, len(batch))
        xs, ys, nb = tuple(x.shape), tuple(y.shape), len(batch)
        Bsz = int(np.prod(xs[:nb]))
        M = int(np.prod(xs[nb : nb + len(x_only)]))
        K = int(np.prod(xs[nb + len(x_only) :]))
        x = apply(_reshape, x, shape=(Bsz, M, K))
        y = apply(_reshape, y, shape=(Bsz, K, int(np.prod(ys[nb + len(contract) :]))))
        r = apply(matmul, x, y)
        t = "".join(batch + x_only + y_only)
        x = apply(_reshape, r, shape=xs[: nb + len(x_only)] + ys[nb + len(contract) :])
    if len(items) == 1 and len(t) > len(out):  # indices summed away at the end
        x = apply(_sum, x, dim=tuple(i for i, c in enumerate(t) if c not in out))
        t = "".join(c for c in t if c in out)
    if t != out:
        x = apply(_permute, x, dims=tuple(t.index(c) for c in out))
    return x


def _arrange(apply, x, term, order, sizes, nbatch):
    """x (indices ``term``) permuted to ``order``, its batch dims broadcast to full size."""
    if list(term) != order:
        x = apply(_permute, x, dims=tuple(term.index(c) for c in order))
    shape = tuple(x.shape)
    full = tuple(sizes[c] if i < nbatch else shape[i] for i, c in enumerate(order))
    if full != shape:
        x = apply(_expand, x, size=full)
    return x


einsum = defcomposite(
    "einsum",
    lambda apply, equation, *operands: _einsum(apply, equation, *operands),
    [
        Case(
            ((3, 4), (4, 5)),
            {"equation": "ij,jk->ik"},
            call=lambda f, a, b, equation: f(equation, a, b),
        ),
        Case(
            ((2, 3, 4), (2, 4, 5)),
            {"equation": "bij,bjk->bik"},
            call=lambda f, a, b, equation: f(equation, a, b),
        ),
        Case(
            ((3, 4), (4,)), {"equation": "ij,j"}, call=lambda f, a, b, equation: f(equation, a, b)
        ),
        Case(((4, 4),), {"equation": "ii->i"}, call=lambda f, a, equation: f(equation, a)),
        Case(((4, 4),), {"equation": "ii"}, call=lambda f, a, equation: f(equation, a)),
        Case(((2, 3, 4),), {"equation": "abc->cb"}, call=lambda f, a, equation: f(equation, a)),
        Case(
            ((3,), (4,)), {"equation": "i,j->ij"}, call=lambda f, a, b, equation: f(equation, a, b)
        ),
        Case(
            ((2, 3), (3, 4), (4, 2)),
            {"equation": "ij,jk,kl->il"},
            call=lambda f, a, b, c, equation: f(equation, a, b, c),
        ),
        Case(
            ((2, 1, 3), (4, 3)),
            {"equation": "...ij,kj->...ik"},
            call=lambda f, a, b, equation: f(equation, a, b),
        ),
        Case(
            ((3, 4), (3, 4)),
            {"equation": "ij,ij->"},
            call=lambda f, a, b, equation: f(equation, a, b),
        ),
    ],
    doc=(
        "The sum of products of operands given by the subscripts of equation, as "
        "numpy.einsum (products run through BLAS)."
    ),
)


def _trace(apply, input):
    if input.ndim != 2:
        raise RuntimeError(f"trace(): expected a matrix, but got tensor with dim {input.ndim}")
    return apply(_sum, apply(_diagonal, input))


trace = defcomposite(
    "trace",
    _trace,
    [Case(((3, 3),)), Case(((3, 5),))],
    methods=("trace",),
    doc="The sum of the diagonal of a matrix.",
)
