"""Per-op cost against torch at the sizes where fixed costs dominate, and at 10^6 elements.

    python benchmarks/op_overhead.py [--sizes scalar,1x2,16x16,128x256,1000x1000]
                                     [--reps 5] [--only NAME] [--threads N]

For every op of the list (creation, views and indexing, joins, elementwise, reductions,
products, softmax) and every size: the forward on a leaf that requires grad (the op is
recorded for backward, as in a training step), and the forward followed by ``backward()``
of the sum of its (first) result, whose difference is the op's share of a backward.
Repetitions interleave nautograd and torch; small sizes time a loop of calls. Prints the
median per call and torch_time / nautograd_time for both (>1: nautograd is faster), then the
ops and sizes where nautograd is slower.
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

SIZES = {"scalar": (), "1x2": (1, 2), "16x16": (16, 16), "128x256": (128, 256)}
SIZES["1000x1000"] = (1000, 1000)


def ops(lib):
    """name -> (fn(x, y, index) -> result or results, shapes it takes or None for all).
    ``x`` requires grad, ``y`` is a constant of x's shape, ``index`` an int64 tensor of row
    numbers."""
    F = lib.nn.functional
    matrix = ("1x2", "16x16", "128x256", "1000x1000")
    return {
        # creation (no graph: the call's own cost)
        "zeros": (lambda x, y, i: lib.zeros(tuple(x.shape)), None),
        "ones_like": (lambda x, y, i: lib.ones_like(x), None),
        "tensor(list)": (lambda x, y, i: lib.tensor([1.0, 2.0, 3.0]), ("scalar",)),
        # views and indexing
        "view": (lambda x, y, i: x.view(-1), None),
        "reshape": (lambda x, y, i: x.reshape(-1), None),
        "t": (lambda x, y, i: x.t(), matrix),
        "expand": (lambda x, y, i: x[:1].expand(4, *x.shape[1:]), matrix),
        "getitem(int)": (lambda x, y, i: x[0], matrix),
        "getitem(slice)": (lambda x, y, i: x[:, 1:], matrix),
        "getitem(int,int)": (lambda x, y, i: x[0, 0], matrix),
        "getitem(tensor)": (lambda x, y, i: x[i], matrix),
        "chunk": (lambda x, y, i: x.chunk(2, 1), matrix),
        "split": (lambda x, y, i: x.split(1, dim=0), matrix),
        "unbind": (lambda x, y, i: x.unbind(0), matrix),
        "cat": (lambda x, y, i: lib.cat([x, y], 0), matrix),
        "stack": (lambda x, y, i: lib.stack([x, y]), None),
        # elementwise
        "add": (lambda x, y, i: x + y, None),
        "mul(number)": (lambda x, y, i: x * 2.0, None),
        "mul": (lambda x, y, i: x * y, None),
        "exp": (lambda x, y, i: x.exp(), None),
        "tanh": (lambda x, y, i: x.tanh(), None),
        "sigmoid": (lambda x, y, i: x.sigmoid(), None),
        "relu": (lambda x, y, i: F.relu(x), None),
        # reductions
        "sum": (lambda x, y, i: x.sum(), None),
        "mean": (lambda x, y, i: x.mean(), None),
        "sum(dim)": (lambda x, y, i: x.sum(-1), matrix),
        # products
        "matmul": (lambda x, y, i: x @ y.t(), matrix),
        "linear": (lambda x, y, i: F.linear(x, y), matrix),
        # softmax
        "softmax": (lambda x, y, i: F.softmax(x, -1), matrix),
        "log_softmax": (lambda x, y, i: F.log_softmax(x, -1), matrix),
    }


def _inner(shape):
    n = int(np.prod(shape, dtype=np.int64))
    return 200 if n <= 256 else (20 if n <= 40_000 else 1)


def _first(result):
    return result[0] if isinstance(result, (tuple, list)) else result


def run(sizes, reps, only=None, threads=None):
    import torch

    import nautograd as ng

    if threads:
        torch.set_num_threads(threads)
        ng.set_num_threads(threads)
    libs = {"nautograd": ng, "torch": torch}
    table = {ln: ops(lib) for ln, lib in libs.items()}
    rows = []
    for name, (_, only_sizes) in table["nautograd"].items():
        if only and only not in name:
            continue
        for size in sizes:
            if only_sizes is not None and size not in only_sizes:
                continue
            shape = SIZES[size]
            rng = np.random.default_rng(0)
            xd, yd = rng.standard_normal(shape), rng.standard_normal(shape)
            rows_n = shape[0] if shape else 1
            idx = rng.integers(0, rows_n, rows_n)
            calls = {}
            for ln, lib in libs.items():
                fn = table[ln][name][0]
                x = lib.tensor(xd, requires_grad=True)
                y, i = lib.tensor(yd), lib.tensor(idx)
                inner = _inner(shape)
                differentiable = _first(fn(x, y, i)).requires_grad

                def forward(fn=fn, x=x, y=y, i=i, inner=inner):
                    for _ in range(inner):
                        fn(x, y, i)

                def both(fn=fn, x=x, y=y, i=i, inner=inner):
                    for _ in range(inner):
                        _first(fn(x, y, i)).sum().backward()
                        x.grad = None

                forward()
                if differentiable:
                    both()
                calls[ln] = (forward, both if differentiable else None, inner)
            times = {(ln, k): [] for ln in libs for k in (0, 1)}
            for _ in range(reps):
                for ln, (forward, both, inner) in calls.items():
                    for k, call in enumerate((forward, both)):
                        if call is None:
                            continue
                        # torch's OpenMP workers spin after its last call: wait them out busy
                        # (see op_families.py), then one untimed call
                        busy_wait(0.002)
                        call()
                        t = time.perf_counter()
                        call()
                        times[(ln, k)].append((time.perf_counter() - t) / inner)
            med = {key: statistics.median(ts) if ts else None for key, ts in times.items()}
            f_ng, f_t = med[("nautograd", 0)], med[("torch", 0)]
            line = (
                f"{name:18s} {size:>9s}  forward: nautograd {f_ng * 1e6:9.1f} us  torch "
                f"{f_t * 1e6:9.1f} us  {f_t / f_ng:5.2f}x"
            )
            b_ng, b_t = med[("nautograd", 1)], med[("torch", 1)]
            if b_ng is not None:
                line += (
                    f"   +backward: nautograd {b_ng * 1e6:9.1f} us  torch {b_t * 1e6:9.1f} us  "
                    f"{b_t / b_ng:5.2f}x"
                )
            print(line, flush=True)
            rows.append((name, size, f_t / f_ng, None if b_ng is None else b_t / b_ng))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(SIZES))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default=None)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    rows = run(args.sizes.split(","), args.reps, args.only, args.threads)
    slow = [r for r in rows if r[2] < 1.0 or (r[3] is not None and r[3] < 1.0)]
    print(f"\n{len(rows) - len(slow)} of {len(rows)} op/size pairs at or below torch's time")
    if slow:
        print("slower than torch (forward, forward+backward ratios):")
        for name, size, f, b in sorted(slow, key=lambda r: min(r[2], r[3] or r[2])):
            print(f"  {name:18s} {size:>9s}  {f:5.2f}x  {'' if b is None else f'{b:5.2f}x'}")


if __name__ == "__main__":
    main()
