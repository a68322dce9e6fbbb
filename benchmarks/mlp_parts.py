"""Where the MLP step's time goes: each part of ``workloads.mlp_step`` timed inside the step,
and the step's eight matrix products alone, per library (nautograd, torch), each library in
a process of its own (torch's OpenMP workers spin after a parallel region and would slow
the other library's next BLAS call).

    python benchmarks/mlp_parts.py [--steps 300]

Prints medians in microseconds and torch time / nautograd time.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PARTS = ("x @ W0", "+ b0", "relu 0", "h @ W1", "+ b1", "relu 1", "h @ W2", "+ b2", "loss")
PARTS += ("backward", "update", "step")
# (m, k) @ (k, n): the forward's three products, then the backward's: grad W = h^T grad
# (three), grad h = grad W^T (two)
PRODUCTS = (
    ((128, 784), (784, 256)),
    ((128, 256), (256, 256)),
    ((128, 256), (256, 10)),
    ((784, 128), (128, 256)),
    ((256, 128), (128, 256)),
    ((256, 128), (128, 10)),
    ((128, 10), (10, 256)),
    ((128, 256), (256, 256)),
)


def _median_us(times):
    return float(np.median(times) * 1e6)


def measure(lib_name, steps):
    """{part: median us} for one library (runs in the child process)."""
    sys.path.insert(0, os.path.dirname(HERE))
    if lib_name == "torch":
        import torch as lib
    else:
        import nautograd as lib
    from benchmarks import workloads

    F = lib.nn.functional
    params, x, onehot = workloads.mlp_inputs(lib)
    times = {p: [] for p in PARTS}
    clock = time.perf_counter

    def step():
        t_step = t = clock()
        h = x
        for i in range(3):
            h = h @ params[2 * i]
            t = _lap(times, PARTS[3 * i], t)
            h = h + params[2 * i + 1]
            t = _lap(times, PARTS[3 * i + 1], t)
            if i < 2:
                h = F.relu(h)
                t = _lap(times, PARTS[3 * i + 2], t)
        loss = -(onehot * F.log_softmax(h, 1)).sum(1).mean()
        t = _lap(times, "loss", t)
        loss.backward()
        t = _lap(times, "backward", t)
        with lib.no_grad():
            for p in params:
                p -= 0.01 * p.grad
                p.grad = None
        _lap(times, "update", t)
        _lap(times, "step", t_step)

    for _ in range(50):
        step()
    for v in times.values():
        v.clear()
    for _ in range(steps):
        step()
    result = {p: _median_us(v) for p, v in times.items()}
    rng = np.random.default_rng(0)
    total = 0.0
    for xs, ys in PRODUCTS:
        a = rng.standard_normal(xs).astype(np.float32)
        b = rng.standard_normal(ys).astype(np.float32)
        a, b = lib.from_numpy(a), lib.from_numpy(b)  # (each library's own product)
        for _ in range(30):
            a @ b
        ts = []
        for _ in range(steps):
            t = clock()
            a @ b
            ts.append(clock() - t)
        result[f"{xs}@{ys}"] = _median_us(ts)
        total += result[f"{xs}@{ys}"]
    result["products alone"] = total
    return result


def _lap(times, name, t):
    now = time.perf_counter()
    times[name].append(now - t)
    return now


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.steps)))
        return
    results = {}
    for lib_name in ("nautograd", "torch"):
        proc = subprocess.run(
            [sys.executable, __file__, "--child", lib_name, "--steps", str(args.steps)],
            capture_output=True,
            text=True,
            check=True,
        )
        results[lib_name] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{'part':<28} {'nautograd us':>13} {'torch us':>10} {'torch/ng':>9}")
    for part in results["nautograd"]:
        ng_us, torch_us = results["nautograd"][part], results["torch"][part]
        print(f"{part:<28} {ng_us:>13.1f} {torch_us:>10.1f} {torch_us / ng_us:>8.2f}x")


if __name__ == "__main__":
    main()
