"""A user-defined op (nautograd.library) against built-in ops and Python autograd.Functions.

A chain of N scalar nodes y = op(y) is recorded once; its backward is then timed (the graph
kept, median of repetitions). The user op ``softsign`` is declared from two scalar formulas
(library.elementwise); the same op as a Python ``autograd.Function`` pays a Python round
trip per node, in nautograd as in torch. Prints milliseconds per backward and ratios.

    python benchmarks/library_ops.py [--n 10000] [--reps 7]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _chain(op, x, n):
    y = x
    for _ in range(n):
        y = op(y)
    return y


def _time_backward(y, reps):
    y.backward(retain_graph=True)  # (first call: compiles or loads the kernels)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        y.backward(retain_graph=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    import torch

    import nautograd as ng
    from nautograd.library import elementwise

    torch.set_num_threads(1)
    softsign = elementwise(
        "bench::softsign",
        forward=lambda x: x / (1.0 + abs(x)),
        derivative=lambda x: 1.0 / ((1.0 + abs(x)) * (1.0 + abs(x))),
    )

    def function_class(lib):
        class Softsign(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x / (1.0 + x.abs())

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                d = 1.0 + x.abs()
                return grad / (d * d)

        return Softsign.apply

    rows = []
    x = ng.tensor(0.3, dtype=ng.float64, requires_grad=True)
    rows.append(("nautograd library op", _time_backward(_chain(softsign, x, args.n), args.reps)))
    rows.append(("nautograd built-in tanh", _time_backward(_chain(ng.tanh, x, args.n), args.reps)))
    f = function_class(ng)
    rows.append(("nautograd autograd.Function", _time_backward(_chain(f, x, args.n), args.reps)))
    xt = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    soft = torch.nn.functional.softsign
    rows.append(("torch built-in softsign", _time_backward(_chain(soft, xt, args.n), args.reps)))
    ft = function_class(torch)
    rows.append(("torch autograd.Function", _time_backward(_chain(ft, xt, args.n), args.reps)))
    base = rows[0][1]
    print(f"backward of a chain of {args.n} scalar nodes (ms, median of {args.reps})")
    print(f"{'':<30} {'ms':>9} {'/ library op':>13}")
    for name, ms in rows:
        print(f"{name:<30} {ms:9.3f} {ms / base:12.1f}x")


if __name__ == "__main__":
    main()
