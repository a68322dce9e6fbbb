"""Forward-mode AD against torch (and jax, when installed): Jacobian-vector products.

    python benchmarks/forward_ad.py [--reps 7]

Workloads (float64): a JVP through a 3-layer tanh MLP on a batch of 64 (products and
elementwise ops: the declared rules); a JVP through 20 steps of a scalar-field update on
(256,) (elementwise ops and reductions); a JVP through softmax + log-det of a small
matrix (ops whose tangent comes from their create_graph formula); and
``jacobian(strategy="forward-mode")`` of R^8 -> R^64. Repetitions interleave the libraries;
prints the median per call and torch_time / nautograd_time (>1: nautograd is faster).
"""

import argparse
import statistics
import time

import numpy as np


def _mlp(lib, x, ws):
    h = x
    for w in ws[:-1]:
        h = (h @ w).tanh()
    return (h @ ws[-1]).sum()


def _field(lib, u):
    for _ in range(20):
        u = u + 0.1 * (u.sin() * u.tanh().mean() - 0.5 * u * u.cos())
    return u.sum()


def _matrix(lib, a):
    s = lib.softmax(a, -1)
    return lib.linalg.slogdet(s + lib.eye(a.shape[0], dtype=a.dtype)).logabsdet


def _expand(lib, x):
    return (x.outer(x).reshape(-1)[:64] * x.sum()).sin()


def workloads(rng):
    ws = [rng.standard_normal((32, 64)) / 6, rng.standard_normal((64, 64)) / 8,
          rng.standard_normal((64, 1)) / 8]  # fmt: skip
    return {
        "mlp jvp (64x32 -> 64 -> 64 -> 1)": (
            lambda lib, x: _mlp(lib, x, [lib.tensor(w) for w in ws]),
            rng.standard_normal((64, 32)),
        ),
        "field jvp (20 steps on 256)": (_field, rng.standard_normal(256)),
        "softmax + slogdet jvp (8x8)": (_matrix, rng.standard_normal((8, 8))),
    }


def _jvp(lib, fw):
    """J·v of ``f(lib, x)`` at x, through ``lib``'s forward AD module ``fw``."""

    def jvp(f, x, v):
        with fw.dual_level():
            out = f(lib, fw.make_dual(lib.tensor(x), lib.tensor(v)))
            return fw.unpack_dual(out).tangent

    return jvp


def run(reps):
    import torch
    import torch.autograd.forward_ad as tfw

    import nautograd as ng
    import nautograd.autograd.forward_ad as nfw

    torch.set_num_threads(1)
    ng.set_num_threads(1)
    rng = np.random.default_rng(0)
    libs = {"nautograd": (ng, _jvp(ng, nfw)), "torch": (torch, _jvp(torch, tfw))}
    rows = []
    for name, (f, x) in workloads(rng).items():
        v = rng.standard_normal(x.shape)
        calls = {ln: (lambda jvp=jvp, f=f, x=x, v=v: jvp(f, x, v)) for ln, (_, jvp) in libs.items()}
        a, b = calls["nautograd"](), calls["torch"]()
        np.testing.assert_allclose(np.asarray(a.tolist()), np.asarray(b.tolist()), rtol=1e-9)
        rows.append((name, _interleaved(calls, reps)))
    x8 = rng.standard_normal(8)
    calls = {
        ln: (lambda lib=lib: lib.autograd.functional.jacobian(
            lambda x: _expand(lib, x), lib.tensor(x8), vectorize=True, strategy="forward-mode"))
        for ln, (lib, _) in libs.items()
    }  # fmt: skip
    rows.append(("jacobian forward-mode (8 -> 64)", _interleaved(calls, reps)))
    print(f"{'workload':36s} {'nautograd':>12s} {'torch':>12s} {'torch/ng':>9s}")
    for name, t in rows:
        ratio = t["torch"] / t["nautograd"]
        print(f"{name:36s} {t['nautograd'] * 1e3:10.2f}ms {t['torch'] * 1e3:10.2f}ms {ratio:8.2f}x")


def _interleaved(calls, reps):
    times = {ln: [] for ln in calls}
    for fn in calls.values():
        fn()  # (warm-up: kernels, caches)
    for _ in range(reps):
        for ln, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            times[ln].append(time.perf_counter() - t0)
    return {ln: statistics.median(ts) for ln, ts in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args(argv)
    run(args.reps)


if __name__ == "__main__":
    main()
