"""ng.func against torch.func (and jax, when installed): per-sample gradients, Hessians,
Jacobians.

    python benchmarks/func_transforms.py [--reps 7] [--samples 1000]

Workloads (float64, one thread each):
- per-sample gradients of ``softplus(x·w) - y·(x·w)`` over ``--samples`` rows of 100
  features: ``vmap(grad(f), in_dims=(None, 0, 0))``;
- the Hessian of a scalar function of 16 inputs (``hessian``: forward over reverse);
- the Jacobian of a 16 -> 16 tanh layer (``jacrev``);
- the gradient of an MLP's loss with respect to its parameters through ``functional_call``
  (nautograd and torch only: jax has no modules).
jax runs ``jax.jit`` of the same transform, timed after its first (compiling) call.
Repetitions interleave the libraries; prints the median per call and each peer's time /
nautograd's (>1: nautograd is faster).
"""

import argparse
import statistics
import time

import numpy as np


class _Lib:
    """The few functions the workloads need, for one library."""

    def __init__(self, name):
        self.name = name
        if name == "nautograd":
            import nautograd as ng

            self.m, self.func, self.softplus = ng, ng.func, ng.nn.functional.softplus
            self.tensor = ng.tensor
            self.jit = lambda f: f
            self.vmap = ng.func.vmap
        elif name == "torch":
            import torch
            import torch.func

            self.m, self.func, self.softplus = torch, torch.func, torch.nn.functional.softplus
            self.tensor = torch.tensor
            self.jit = lambda f: f
            self.vmap = torch.func.vmap
        else:
            import jax
            import jax.numpy as jnp

            jax.config.update("jax_enable_x64", True)
            self.m, self.func, self.softplus = jnp, jax, jax.nn.softplus
            self.tensor = jnp.asarray
            self.jit = jax.jit
            self.vmap = lambda f, in_dims: jax.vmap(f, in_axes=in_dims)


def _per_sample(lib):
    def loss(w, x, y):
        z = x @ w
        return lib.softplus(z) - y * z

    return lib.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))


def _scalar(lib):
    m = lib.m

    def f(x):
        return m.log(m.exp(x * x.sum() * 0.1).sum()) + (m.sin(x) * x).sum()

    return f


def _layer(lib, a):
    m = lib.m

    def f(x):
        return m.tanh(a @ x) * x

    return f


def workloads(names, samples):
    rng = np.random.default_rng(0)
    w, x, y = rng.standard_normal(100), rng.standard_normal((samples, 100)), rng.random(samples)
    v16, a16 = rng.standard_normal(16), rng.standard_normal((16, 16)) / 4
    calls = {}
    for name in names:
        lib = _Lib(name)
        t = lib.tensor
        ps = lib.jit(_per_sample(lib))
        h = lib.jit(lib.func.hessian(_scalar(lib)))
        j = lib.jit(lib.func.jacrev(_layer(lib, t(a16))))
        args = (t(w), t(x), t(y))
        calls[name] = {
            f"vmap(grad) per-sample, {samples}x100": lambda ps=ps, args=args: ps(*args),
            "hessian, 16 inputs": lambda h=h, v=t(v16): h(v),
            "jacrev, 16 -> 16": lambda j=j, v=t(v16): j(v),
        }
    for name in names:
        if name == "jax":
            continue
        calls[name]["grad of an MLP via functional_call"] = _mlp_grad(_Lib(name))
    return calls


def _mlp_grad(lib):
    m = lib.m
    rng = seed = np.random.default_rng(1)
    model = m.nn.Sequential(m.nn.Linear(32, 64), m.nn.Tanh(), m.nn.Linear(64, 10)).double()
    with m.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(seed.standard_normal(tuple(p.shape)) / 8))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = lib.tensor(rng.standard_normal((64, 32)))
    target = lib.tensor(rng.integers(0, 10, 64))

    def loss(p):
        out = lib.func.functional_call(model, p, (x,))
        return m.nn.functional.cross_entropy(out, target)

    g = lib.func.grad(loss)
    return lambda: g(params)


def _as_numpy(r):
    if isinstance(r, dict):
        return np.concatenate([_as_numpy(v).ravel() for _, v in sorted(r.items())])
    if hasattr(r, "detach"):
        r = r.detach()
    return np.asarray(r.tolist() if hasattr(r, "tolist") else r, dtype=np.float64)


def run(reps, samples, peers):
    import nautograd as ng

    ng.set_num_threads(1)
    if "torch" in peers:
        import torch

        torch.set_num_threads(1)
    calls = workloads(["nautograd", *peers], samples)
    rows = []
    for work in calls["nautograd"]:
        fns = {ln: c[work] for ln, c in calls.items() if work in c}
        ours = _as_numpy(fns["nautograd"]())
        for fn in fns.values():  # (same results; jax's first call compiles here)
            # (torch's and nautograd's softplus is x above x = 20, jax's is not: ~1e-8 apart)
            np.testing.assert_allclose(_as_numpy(fn()), ours, rtol=1e-6, atol=1e-9)
        rows.append((work, _interleaved(fns, reps)))
    print(f"{'workload':40s} " + " ".join(f"{ln:>12s}" for ln in ["nautograd", *peers]), end="")
    print(" " + " ".join(f"{p + '/ng':>10s}" for p in peers))
    for work, t in rows:
        line = f"{work:40s} " + " ".join(
            f"{t[ln] * 1e3:10.3f}ms" if ln in t else f"{'-':>12s}" for ln in ["nautograd", *peers]
        )
        line += " " + " ".join(
            f"{t[p] / t['nautograd']:9.3f}x" if p in t else f"{'-':>10s}" for p in peers
        )
        print(line)


def _interleaved(calls, reps):
    times = {ln: [] for ln in calls}
    for _ in range(reps):
        for ln, fn in calls.items():
            t0 = time.perf_counter()
            r = fn()
            if hasattr(r, "block_until_ready"):
                r.block_until_ready()
            times[ln].append(time.perf_counter() - t0)
    return {ln: statistics.median(ts) for ln, ts in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args(argv)
    peers = ["torch"]
    try:
        import jax  # noqa: F401

        peers.append("jax")
    except ImportError:
        pass
    run(args.reps, args.samples, peers)


if __name__ == "__main__":
    main()
