"""Forward + backward time of each op family against torch, at 16, 10^4 and 10^6 elements.

    python benchmarks/op_families.py [--sizes 16,10000,1000000] [--reps 5] [--only NAME]

Each family is one representative call on a leaf that requires grad, followed by a
backward with a ones cotangent; repetitions interleave nautograd and torch (one untimed call
of the same library before each timed one), and small sizes time a loop of calls. Prints the
median per call and torch_time / nautograd_time (>1: nautograd is faster).
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks.run import busy_wait  # noqa: E402


def _width(n):
    return {16: 16, 10_000: 100}.get(n, 1000)


def families(lib):
    """name -> (make(n, rng) -> (leaf data, extra), fn(lib, x, extra) -> result)."""
    F = lib.nn.functional

    def rows(n, rng):
        c = _width(n)
        return rng.standard_normal((max(n // c, 1), c)), None

    def square(n, rng):
        s = max(int(round(n**0.5)), 2)
        return rng.standard_normal((s, s)), rng.standard_normal((s, s))

    def column_row(n, rng):
        s = max(int(round(n**0.5)), 2)
        return rng.standard_normal((s, 1)), rng.standard_normal((1, s))

    def image(n, rng):
        s = max(int(round(n**0.5)), 4)
        return rng.standard_normal((1, 1, s, s)), rng.standard_normal((4, 1, 3, 3))

    def with_index(n, rng):
        x, _ = rows(n, rng)
        return x, rng.integers(0, x.shape[0], x.shape[0])

    def with_targets(n, rng):
        x, _ = rows(n, rng)
        return x, rng.integers(0, x.shape[1], x.shape[0])

    def bias(n, rng):
        x, _ = rows(n, rng)
        return x, rng.standard_normal(x.shape[1])

    def T(e):
        return lib.tensor(e)

    return {
        "unary(exp)": (rows, lambda x, e: x.exp()),
        "activation(gelu)": (rows, lambda x, e: F.gelu(x)),
        "binary(mul)": (square, lambda x, e: x * T(e)),
        "binary_broadcast(mul)": (bias, lambda x, e: x * T(e)),
        "bias(add)": (bias, lambda x, e: x + T(e)),
        "reduction(sum)": (rows, lambda x, e: x.sum(1)),
        "reduction(var)": (rows, lambda x, e: x.var(1)),
        "reduction(amax)": (rows, lambda x, e: x.amax(1)),
        "scan(cumsum)": (rows, lambda x, e: x.cumsum(1)),
        "softmax": (rows, lambda x, e: F.log_softmax(x, 1)),
        "indexing(rows)": (with_index, lambda x, e: x[T(e)]),
        "shape(t+reshape)": (rows, lambda x, e: x.t().reshape(-1)),
        "matmul": (square, lambda x, e: x @ T(e)),
        "matmul_outer": (column_row, lambda x, e: x @ T(e)),
        "loss(cross_entropy)": (
            with_targets,
            lambda x, e: F.cross_entropy(x, T(e), reduction="none"),
        ),
        "conv2d": (image, lambda x, e: F.conv2d(x, T(e), padding=1)),
    }


def _inner(n):
    return 200 if n <= 16 else (20 if n <= 10_000 else 1)


def run(sizes, reps, only=None, threads=None, split=False):
    """Time each family; ``split``: also print the backward alone."""
    import torch

    import nautograd as ng

    if threads:
        torch.set_num_threads(threads)
        ng.set_num_threads(threads)
    libs = {"nautograd": ng, "torch": torch}
    fams = {name: {ln: families(lib)[name] for ln, lib in libs.items()} for name in families(ng)}
    rows = []
    backward = dict.fromkeys(libs, 0.0)  # backward time of the current call, per library
    for name, per_lib in fams.items():
        if only and only not in name:
            continue
        for n in sizes:
            rng = np.random.default_rng(0)
            make = per_lib["nautograd"][0]
            data, extra = make(n, rng)
            calls = {}
            for ln, lib in libs.items():
                fn = per_lib[ln][1]
                x = lib.tensor(data, requires_grad=True)
                y = fn(x, extra)
                ones = lib.ones(tuple(y.shape), dtype=y.dtype)
                inner = _inner(n)

                def call(x=x, fn=fn, ones=ones, inner=inner, extra=extra, ln=ln):
                    for _ in range(inner):
                        y = fn(x, extra)
                        t1 = time.perf_counter()
                        y.backward(ones)
                        backward[ln] += time.perf_counter() - t1
                        x.grad = None

                call()  # first call: compiles / warms caches
                calls[ln] = call
            times = {ln: [] for ln in libs}
            bwd = {ln: [] for ln in libs}
            for _ in range(reps):
                for ln, call in calls.items():
                    # torch's OpenMP workers spin for milliseconds after its last call and
                    # take a core from the next library's threads: wait them out, busy (a
                    # sleep lets the VM park this core, and the next hand-off to a thread pays
                    # its wake-up), then one untimed call wakes this library's own pools.
                    # Measured: log_softmax at 10^6, nautograd 5.5 ms alone, 7.5 ms right
                    # after a torch call, 5.6 ms with OMP_WAIT_POLICY=PASSIVE.
                    busy_wait(0.01)
                    call()
                    backward[ln] = 0.0
                    t = time.perf_counter()
                    call()
                    times[ln].append((time.perf_counter() - t) / _inner(n))
                    bwd[ln].append(backward[ln] / _inner(n))
            med = {ln: statistics.median(ts) for ln, ts in times.items()}
            rows.append((name, n, med["nautograd"], med["torch"], med["torch"] / med["nautograd"]))
            print(
                f"{name:24s} n={n:>8d}  nautograd {med['nautograd'] * 1e6:10.1f} us  "
                f"torch {med['torch'] * 1e6:10.1f} us  torch/nautograd {rows[-1][-1]:6.2f}x",
                flush=True,
            )
            if split:
                mb = {ln: statistics.median(ts) for ln, ts in bwd.items()}
                print(
                    f"{'':24s}   backward alone: nautograd {mb['nautograd'] * 1e6:10.1f} us  "
                    f"torch {mb['torch'] * 1e6:10.1f} us  torch/nautograd "
                    f"{mb['torch'] / mb['nautograd']:6.2f}x",
                    flush=True,
                )
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,10000,1000000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--split", action="store_true", help="also print the backward alone")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = run(sizes, args.reps, args.only, args.threads, args.split)
    worst = min(rows, key=lambda r: r[-1]) if rows else None
    if worst:
        print(f"\nslowest relative to torch: {worst[0]} at n={worst[1]}: {worst[-1]:.2f}x")


if __name__ == "__main__":
    main()
