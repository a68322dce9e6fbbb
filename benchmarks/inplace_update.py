"""An SGD update's in-place step, ``p -= t`` under no_grad, per library: nautograd, torch,
and numpy's own ``np.subtract(p, t, out=p)``, for float32 parameters of the MLP benchmark's
sizes. Prints medians in microseconds and peer time / nautograd time.

Each library runs its repetitions in a block of its own, after a busy wait: interleaved one
by one, nautograd's axpy (numpy's OpenBLAS threads) and torch's op (its OpenMP threads) each
waited for the other pool's spinning worker to lose the second core, ~4 ms a call.

    python benchmarks/inplace_update.py [--reps 2000]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

from benchmarks.run import busy_wait  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args(argv)
    import torch

    import nautograd as ng

    torch.set_num_threads(ng.get_num_threads())
    rng = np.random.default_rng(0)
    print(f"{'shape':<14} {'nautograd us':>13} {'torch us':>9} {'numpy us':>9} {'torch/ng':>9}")
    for shape in ((784, 256), (256, 256), (256, 10)):
        p = rng.standard_normal(shape).astype(np.float32)
        t = (0.01 * rng.standard_normal(shape)).astype(np.float32)
        cases = {
            "nautograd": (ng.tensor(p.copy()), ng.tensor(t)),
            "torch": (torch.tensor(p.copy()), torch.tensor(t)),
            "numpy": (p.copy(), t),
        }
        times = {k: [] for k in cases}
        for name, (x, y) in cases.items():
            busy_wait(0.2)
            for _ in range(args.reps):
                if name == "numpy":
                    s = time.perf_counter()
                    np.subtract(x, y, out=x)
                    times[name].append(time.perf_counter() - s)
                    continue
                lib = ng if name == "nautograd" else torch
                with lib.no_grad():
                    s = time.perf_counter()
                    x -= y
                    times[name].append(time.perf_counter() - s)
        med = {k: statistics.median(v[args.reps // 10 :]) * 1e6 for k, v in times.items()}
        print(
            f"{str(shape):<14} {med['nautograd']:>13.1f} {med['torch']:>9.1f} "
            f"{med['numpy']:>9.1f} {med['torch'] / med['nautograd']:>8.2f}x"
        )


if __name__ == "__main__":
    main()
