"""The forward factorizations (cholesky, inv, solve, det, slogdet) in scipy's LAPACK, and
triangular solves in its BLAS.

The backward kernels run their products and factorizations in scipy's OpenBLAS (Numba's
``np.linalg`` and ``np.dot`` bind scipy's BLAS and LAPACK). numpy carries an OpenBLAS of its
own, with its own thread pool: when the forward ran in numpy's and the backward in scipy's,
each pool's threads spun while the other worked. A 200x200 Cholesky factor and its backward
took 19 ms on 2 cores that way, 3.9 ms with both in scipy's library
(benchmarks/programs/gp_marginal_likelihood.py). Matrices are batched over leading dims.
"""

import numpy as np
from scipy.linalg import blas, lapack

_FUNCS = {}


def _funcs(name, a, library=lapack):
    key = (library.__name__, name, a.dtype.char)
    f = _FUNCS.get(key)
    if f is None:
        get = lapack.get_lapack_funcs if library is lapack else blas.get_blas_funcs
        (f,) = get((name,), (a,))
        _FUNCS[key] = f
    return f


class LinAlgError(np.linalg.LinAlgError):
    """A factorization that cannot be completed (singular, not positive-definite)."""


def _batched(a):
    return a.reshape((-1,) + a.shape[-2:])


def cholesky(a):
    """The lower Cholesky factor of each matrix of ``a`` (C order); LinAlgError when one is
    not positive-definite."""
    potrf = _funcs("potrf", a)
    out = np.empty_like(a, order="C")
    flat = out.reshape((-1,) + a.shape[-2:])
    for b, m in enumerate(_batched(a)):
        c, info = potrf(m, lower=1, clean=1)
        if info != 0:
            raise LinAlgError("Matrix is not positive definite")
        flat[b] = c
    return out


def _lu(a, getrf, m):
    lu, piv, info = getrf(m)
    if info < 0:
        raise LinAlgError(f"illegal value in argument {-info} of getrf")
    return lu, piv, info


def inv(a):
    """The inverse of each matrix of ``a``; LinAlgError when one is singular."""
    getrf, getri = _funcs("getrf", a), _funcs("getri", a)
    out = np.empty_like(a, order="C")
    flat = out.reshape((-1,) + a.shape[-2:])
    for b, m in enumerate(_batched(a)):
        lu, piv, info = _lu(a, getrf, m)
        if info > 0:
            raise LinAlgError("Singular matrix")
        r, info = getri(lu, piv)
        if info != 0:
            raise LinAlgError("Singular matrix")
        flat[b] = r
    return out


def solve(a, b):
    """X with ``a @ X = b`` per matrix (``b``: (..., n, k)); LinAlgError when singular.
    Returns (X, the LU factors per matrix as LAPACK's column-major ones, flat, their 0-based
    pivots as int64), which the backward reuses."""
    gesv = _funcs("gesv", a)
    out = np.empty(b.shape, a.dtype)
    flat = out.reshape((-1,) + b.shape[-2:])
    n = a.shape[-1]
    lus = np.empty((flat.shape[0], n * n), a.dtype)
    pivots = np.empty((flat.shape[0], n), np.int64)
    for i, (m, rhs) in enumerate(zip(_batched(a), _batched(b), strict=True)):
        lu, piv, x, info = gesv(m, rhs)
        if info > 0:
            raise LinAlgError("Singular matrix")
        flat[i] = x
        lus[i] = lu.T.reshape(-1)  # (the transpose's C order is the factor's column order)
        pivots[i] = piv
    return out, lus, pivots


def slogdet(a):
    """(sign, log|det|) of each matrix of ``a``, numpy's conventions (0, -inf when
    singular)."""
    getrf = _funcs("getrf", a)
    batch = a.shape[:-2]
    signs = np.empty(batch, a.dtype).reshape(-1)
    logs = np.empty(batch, a.dtype).reshape(-1)
    for b, m in enumerate(_batched(a)):
        if m.shape[0] == 0:
            signs[b], logs[b] = 1.0, 0.0
            continue
        lu, piv, info = _lu(a, getrf, m)
        d = np.diagonal(lu)
        if info > 0 or not d.all():
            signs[b], logs[b] = 0.0, -np.inf
            continue
        swaps = np.count_nonzero(piv != np.arange(len(piv)))
        neg = np.count_nonzero(d < 0)
        signs[b] = -1.0 if (swaps + neg) % 2 else 1.0
        logs[b] = np.sum(np.log(np.abs(d)))
    return signs.reshape(batch), logs.reshape(batch)


def det(a):
    """The determinant of each matrix of ``a`` (the product of the LU factor's diagonal, with
    the sign of its row swaps)."""
    getrf = _funcs("getrf", a)
    batch = a.shape[:-2]
    out = np.empty(batch, a.dtype).reshape(-1)
    for b, m in enumerate(_batched(a)):
        if m.shape[0] == 0:
            out[b] = 1.0
            continue
        lu, piv, _ = _lu(a, getrf, m)
        swaps = np.count_nonzero(piv != np.arange(len(piv)))
        out[b] = np.prod(np.diagonal(lu)) * (-1.0 if swaps % 2 else 1.0)
    return out.reshape(batch)


def solve_triangular(a, b, upper, unitriangular):
    """X with ``a @ X = b`` per matrix (``b``: (..., n, k)), reading only ``a``'s upper or
    lower triangle (its diagonal as ones with ``unitriangular``): BLAS trsm, which divides by
    a zero diagonal element (inf, nan) where LAPACK's trtrs would stop, as torch does."""
    trsm = _funcs("trsm", a, blas)
    out = np.empty(b.shape, a.dtype)
    if out.size == 0:
        return out
    flat = out.reshape((-1,) + b.shape[-2:])
    lower, diag = 0 if upper else 1, 1 if unitriangular else 0
    for i, (m, rhs) in enumerate(zip(_batched(a), _batched(b), strict=True)):
        flat[i] = trsm(1.0, m, rhs, lower=lower, diag=diag)
    return out
