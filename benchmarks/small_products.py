"""Products with a vector operand in the backward: matrix times vector (an RNN's grad h =
W^T grad), outer products (its grad W = grad h^T) and vector times matrix.

1. The kernels' ``gemm`` (kernels/_jit.py: loops of its own for these shapes) against
   OpenBLAS's gemm called straight, as ``gemm`` called it for every shape before, each in a
   compiled loop: nanoseconds per product.
2. The backward of ``W @ v`` with a random cotangent through ``autograd.grad`` (graph kept),
   nautograd against torch: microseconds per backward, torch time / nautograd time.

    python benchmarks/small_products.py [--reps 2000]
"""

import argparse
import os
import sys
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nautograd.kernels import _jit  # noqa: E402

# (m, k, n) of op(x) (m, k) @ op(y) (k, n), and the transpositions the matmul backward asks
# for: grad_x = grad @ y^T (trans_y), grad_y = x^T @ grad (trans_x)
SHAPES = (
    ((32, 32, 1), True, False),  # an RNN's grad h = W^T grad
    ((32, 1, 32), False, True),  # its grad W = grad h^T
    ((1, 32, 32), False, True),  # a row vector's grad = grad W^T
    ((256, 256, 1), True, False),
    ((256, 1, 256), False, True),
    ((1024, 1024, 1), True, False),
)


@numba.njit
def _with_gemm(c, x, y, trans_x, trans_y, reps):
    for _ in range(reps):
        _jit.gemm(c, x, y, trans_x, trans_y, 1.0)


@numba.njit
def _with_blas(c, x, y, trans_x, trans_y, reps):
    # gemm's BLAS call, for every shape (row-major c = X @ Y is column-major c^T = Y^T X^T)
    m, n = c.shape
    k = x.shape[0] if trans_x else x.shape[1]
    ty = _jit._TRANS if trans_y else _jit._NO_TRANS
    tx = _jit._TRANS if trans_x else _jit._NO_TRANS
    for _ in range(reps):
        _jit._blas_gemm(
            ty, tx, n, m, k, 1.0, y, max(1, y.shape[1]), x, max(1, x.shape[1]), 1.0, c, n
        )


def _per_call_ns(f, args, reps):
    f(*args, 1)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        f(*args, reps)
        best = min(best, time.perf_counter() - t)
    return best / reps * 1e9


def products(reps):
    rng = np.random.default_rng(0)
    print(f"{'product':<28} {'dtype':<8} {'gemm ns':>9} {'BLAS ns':>9} {'BLAS/gemm':>10}")
    for dtype in (np.float64, np.float32):
        for (m, k, n), trans_x, trans_y in SHAPES:
            x = rng.standard_normal((k, m) if trans_x else (m, k)).astype(dtype)
            y = rng.standard_normal((n, k) if trans_y else (k, n)).astype(dtype)
            c = np.zeros((m, n), dtype)
            r = max(10, reps * 1024 // (m * n * k))
            ours = _per_call_ns(_with_gemm, (c, x, y, trans_x, trans_y), r)
            blas = _per_call_ns(_with_blas, (c, x, y, trans_x, trans_y), r)
            name = (
                f"{m}x{k} @ {k}x{n}" + (" (x^T)" if trans_x else "") + (" (y^T)" if trans_y else "")
            )
            print(f"{name:<28} {dtype.__name__:<8} {ours:>9.0f} {blas:>9.0f} {blas / ours:>9.2f}x")


def backward(reps):
    import torch

    import nautograd as ng

    torch.set_num_threads(2)
    print(f"\n{'W @ v backward':<28} {'ng us':>9} {'torch us':>9} {'torch/ng':>10}")
    rng = np.random.default_rng(1)
    for n in (32, 256, 1024):
        w, v, g = rng.standard_normal((n, n)), rng.standard_normal(n), rng.standard_normal(n)
        times = {}
        for lib in (ng, torch):
            W, x = lib.tensor(w, requires_grad=True), lib.tensor(v, requires_grad=True)
            out, grad = W @ x, lib.tensor(g)
            r = max(20, reps * 32 // n)
            best = float("inf")
            for _ in range(5):
                t = time.perf_counter()
                for _ in range(r):
                    lib.autograd.grad(out, (W, x), grad, retain_graph=True)
                best = min(best, (time.perf_counter() - t) / r)
            times[lib.__name__] = best * 1e6
        a, b = times["nautograd"], times["torch"]
        print(f"{f'{n}x{n} @ {n}':<28} {a:>9.2f} {b:>9.2f} {b / a:>9.2f}x")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args(argv)
    products(args.reps * 100)
    backward(args.reps)


if __name__ == "__main__":
    main()
