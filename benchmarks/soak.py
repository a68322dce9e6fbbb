"""Differential soak: random programs on nautograd and torch, values and gradients compared.

    python benchmarks/soak.py [--programs 10000] [--workers 2] [--seed 0]

Each program draws 1-10 leaves (float32, float64, or both mixed; shapes (), (3,), (2, 3),
(3, 3); values random, or from {0, +-1, 0.5} to hit kinks and ties, and now and then inf or
NaN) and 1-12 ops from a vocabulary of the op table's everyday ops (elementwise, broadcasting,
reductions, shape and index ops, products, losses), runs them on both libraries, and
compares every result's shape, dtype and values, then the gradients of a random cotangent.
Programs run in worker processes, so a crash is counted (with the program's seed) instead of
ending the soak. Prints the mismatch classes: each with its count, the ops its programs used
most, and a few seeds to replay (``--replay SEED --mode MODE``).
"""

import argparse
import collections
import math
import multiprocessing as mp
import sys
import time
import traceback
import warnings

import numpy as np

SHAPES = [(), (3,), (2, 3), (3, 3)]
SPECIAL = np.array([0.0, 1.0, -1.0, 0.5, 0.0, 2.0])


def _f(lib):
    return lib.nn.functional


# (name, arity, fn(lib, *operands)): operands may have any of SHAPES; each fn makes its
# operands fit (broadcasting, or reductions first) so that most programs run to the end
OPS = [
    ("add", 2, lambda m, x, y: x + y),
    ("sub", 2, lambda m, x, y: x - y),
    ("mul", 2, lambda m, x, y: x * y),
    ("div", 2, lambda m, x, y: x / (y * y + 0.5)),
    ("pow", 2, lambda m, x, y: x.abs() ** (y * 0.5)),
    ("maximum", 2, lambda m, x, y: m.maximum(x, y)),
    ("minimum", 2, lambda m, x, y: m.minimum(x, y)),
    ("atan2", 2, lambda m, x, y: m.atan2(x, y)),
    ("where", 2, lambda m, x, y: m.where(x > y, x, y)),
    ("hypot", 2, lambda m, x, y: m.hypot(x, y)),
    ("logaddexp", 2, lambda m, x, y: m.logaddexp(x, y)),
    ("exp", 1, lambda m, x: (x * 0.5).exp()),
    ("log", 1, lambda m, x: (x * x + 0.1).log()),
    ("sqrt", 1, lambda m, x: x.abs().sqrt()),
    ("tanh", 1, lambda m, x: x.tanh()),
    ("sigmoid", 1, lambda m, x: x.sigmoid()),
    ("relu", 1, lambda m, x: _f(m).relu(x)),
    ("elu", 1, lambda m, x: _f(m).elu(x)),
    ("gelu", 1, lambda m, x: _f(m).gelu(x)),
    ("silu", 1, lambda m, x: _f(m).silu(x)),
    ("softplus", 1, lambda m, x: _f(m).softplus(x)),
    ("leaky_relu", 1, lambda m, x: _f(m).leaky_relu(x, 0.1)),
    ("abs", 1, lambda m, x: x.abs()),
    ("clamp", 1, lambda m, x: x.clamp(-0.5, 1.0)),
    ("sin", 1, lambda m, x: x.sin()),
    ("square", 1, lambda m, x: x**2),
    ("reciprocal", 1, lambda m, x: 1.0 / (x.abs() + 1.0)),
    ("neg", 1, lambda m, x: -x),
    ("sum", 1, lambda m, x: x.sum()),
    ("sum_dim", 1, lambda m, x: x.sum(-1) if x.ndim else x.sum()),
    ("mean", 1, lambda m, x: x.mean()),
    ("prod", 1, lambda m, x: (x * 0.5).prod()),
    ("amax", 1, lambda m, x: x.amax()),
    ("max", 1, lambda m, x: x.max()),
    ("max_dim", 1, lambda m, x: x.max(-1).values if x.ndim else x),
    ("min_dim", 1, lambda m, x: x.min(0).values if x.ndim else x),
    ("var", 1, lambda m, x: x.var() if x.numel() > 1 else x),
    ("std", 1, lambda m, x: x.std(-1) if x.ndim and x.shape[-1] > 1 else x),
    ("norm", 1, lambda m, x: x.norm()),
    ("logsumexp", 1, lambda m, x: m.logsumexp(x, -1) if x.ndim else x),
    ("softmax", 1, lambda m, x: m.softmax(x, -1) if x.ndim else x),
    ("log_softmax", 1, lambda m, x: m.log_softmax(x, 0) if x.ndim else x),
    ("cumsum", 1, lambda m, x: x.cumsum(-1) if x.ndim else x),
    ("cumprod", 1, lambda m, x: (x * 0.5).cumprod(0) if x.ndim else x),
    ("flip", 1, lambda m, x: x.flip(-1) if x.ndim else x),
    ("transpose", 1, lambda m, x: x.t() if x.ndim == 2 else x),
    ("reshape", 1, lambda m, x: x.reshape(-1)),
    ("index", 1, lambda m, x: x[..., ::-1][..., :2] if x.ndim else x),
    ("select", 1, lambda m, x: x[0] if x.ndim else x),
    ("unbind", 1, lambda m, x: x.unbind(0)[-1] if x.ndim else x),
    ("expand", 1, lambda m, x: x.expand(2, *x.shape)),
    ("tril", 1, lambda m, x: x.tril() if x.ndim == 2 else x),
    ("matmul", 2, lambda m, x, y: x.reshape(-1, 1) @ y.reshape(1, -1)),
    ("mm_square", 1, lambda m, x: x @ x.t() if x.ndim == 2 else x * x),
    ("stack", 2, lambda m, x, y: m.stack([x, x * y]).sum(0)),
    ("cat", 2, lambda m, x, y: m.cat([x.reshape(-1), y.reshape(-1)])),
    ("mse_loss", 2, lambda m, x, y: _f(m).mse_loss(x, (x * y).detach())),
    ("bce_logits", 1, lambda m, x: _f(m).binary_cross_entropy_with_logits(x, (x > 0).to(x.dtype))),
    ("bce", 1, lambda m, x: _f(m).binary_cross_entropy(x.sigmoid(), (x > 0.5).to(x.dtype))),
    ("huber", 2, lambda m, x, y: _f(m).huber_loss(x, y.detach())),
    # in-place ops on a fresh result (x * 1), on views of it and by index assignment
    ("add_", 2, lambda m, x, y: (x * 1).add_(y.sum() if x.ndim < y.ndim else y)),
    ("mul_", 2, lambda m, x, y: (x * 1).mul_(y.sum() if x.ndim < y.ndim else y)),
    ("exp_", 1, lambda m, x: (x * 0.5).exp_()),
    ("clamp_", 1, lambda m, x: (x * 1).clamp_(-0.5, 1.0)),
    ("masked_fill_", 1, lambda m, x: (lambda t: t.masked_fill_(t > 0, 0.5))(x * 1)),
    ("setitem", 2, lambda m, x, y: _setitem(x, y)),
    ("view_iadd", 2, lambda m, x, y: _view_iadd(x, y)),
]


def _setitem(x, y):
    t = x * 1
    if t.ndim:
        t[..., :1] = y.sum()
    else:
        t[...] = y.sum()
    return t


def _view_iadd(x, y):
    t = x * 2
    if t.ndim:
        v = t[0]
        v += y.sum()  # (rewrites t's history: CopySlices)
    return t


def _leaf(rng, dtype):
    shape = SHAPES[rng.integers(len(SHAPES))]
    n = math.prod(shape)
    kind = rng.random()
    if kind < 0.25:
        values = SPECIAL[rng.integers(len(SPECIAL), size=n)]
    elif kind < 0.3:
        values = rng.choice([np.inf, -np.inf, np.nan, 1.0], size=n)
    else:
        values = rng.standard_normal(n)
    return values.reshape(shape).astype(dtype)


def program(seed, mode):
    """(leaf arrays, steps): the program of ``seed`` in dtype ``mode``."""
    rng = np.random.default_rng(seed)
    dtypes = {"float32": [np.float32], "float64": [np.float64]}.get(mode, [np.float32, np.float64])
    leaves = [_leaf(rng, dtypes[rng.integers(len(dtypes))]) for _ in range(rng.integers(1, 11))]
    steps = []
    for _ in range(rng.integers(1, 13)):
        k = int(rng.integers(len(OPS)))
        steps.append((k, int(rng.integers(10**6)), int(rng.integers(10**6))))
    return leaves, steps


def _execute(lib, leaves, steps):
    values = [
        lib.tensor(a, requires_grad=True) if lib.__name__ == "torch" else lib.tensor(a)
        for a in leaves
    ]
    if lib.__name__ != "torch":
        for v in values:
            v.requires_grad_()
    inputs = list(values)
    for k, i, j in steps:
        _, arity, fn = OPS[k]
        x = values[i % len(values)]
        if arity == 1:
            values.append(fn(lib, x))
        else:
            y = values[j % len(values)]
            if x.shape != y.shape and x.ndim and y.ndim:  # make them broadcast
                y = y.sum() if y.ndim else y
            values.append(fn(lib, x, y))
    return inputs, values[len(inputs) :]


def _array(t):
    return t.detach().numpy().astype(np.float64)


def compare(seed, mode):
    """The mismatch class of one program ('' when it agrees), and its ops."""
    import torch

    import nautograd as ng

    leaves, steps = program(seed, mode)
    names = sorted({OPS[k][0] for k, _, _ in steps})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t_in, t_out = _execute(torch, leaves, steps)
        except Exception:
            return "", names  # torch rejects the program: nothing to compare
        try:
            n_in, n_out = _execute(ng, leaves, steps)
        except Exception as e:
            return f"nautograd raised {type(e).__name__} where torch ran", names
        for a, b in zip(n_out, t_out, strict=True):
            if tuple(a.shape) != tuple(b.shape):
                return "forward shape", names
            if str(a.dtype) != str(b.dtype).removeprefix("torch."):
                return "forward dtype", names
            # (float32 rounding reaches the float64 results of mixed programs)
            tol = 1e-9 if mode == "float64" else 1e-4
            if not np.allclose(_array(a), _array(b), rtol=tol, atol=tol, equal_nan=True):
                return "forward values", names
        last_t, last_n = t_out[-1], n_out[-1]
        if not last_t.requires_grad:
            return "", names
        cot = np.random.default_rng(seed + 1).standard_normal(tuple(last_t.shape))
        try:
            t_g = torch.autograd.grad(
                last_t, t_in, torch.tensor(cot, dtype=last_t.dtype), allow_unused=True
            )
        except Exception:
            return "", names
        try:
            n_g = ng.autograd.grad(
                last_n, n_in, ng.tensor(cot.astype(last_n.dtype)), allow_unused=True
            )
        except Exception as e:
            return f"backward raised {type(e).__name__} where torch's ran", names
        for a, b in zip(n_g, t_g, strict=True):
            if (a is None) != (b is None):
                return "gradient None where the other has one", names
            if a is None:
                continue
            if a.dtype != _np_dtype(b):
                return "gradient dtype", names
            tol = 1e-7 if mode == "float64" else 1e-3
            if not np.allclose(_array(a), _array(b), rtol=tol, atol=tol, equal_nan=True):
                return "gradient values", names
    return "", names


def _np_dtype(t):
    return np.dtype(str(t.dtype).removeprefix("torch."))


def _worker(jobs):
    out = []
    for seed, mode in jobs:
        try:
            out.append((seed, mode, *compare(seed, mode)))
        except Exception:
            out.append((seed, mode, "soak error: " + traceback.format_exc(limit=2), []))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=250, help="programs per worker task")
    parser.add_argument("--replay", type=int, default=None, help="run one program, verbosely")
    parser.add_argument("--mode", default="float64", choices=["float32", "float64", "mixed"])
    args = parser.parse_args(argv)
    if args.replay is not None:
        leaves, steps = program(args.replay, args.mode)
        print("leaves:", [(a.dtype.name, a.shape) for a in leaves])
        print("ops:", [OPS[k][0] for k, _, _ in steps])
        print(compare(args.replay, args.mode))
        return 0
    modes = ["float32", "float64", "mixed"]
    jobs = [(args.seed + i, modes[i % 3]) for i in range(args.programs)]
    chunks = [jobs[i : i + args.chunk] for i in range(0, len(jobs), args.chunk)]
    t0 = time.perf_counter()
    classes = collections.defaultdict(list)
    op_counts = collections.defaultdict(collections.Counter)
    crashes = []
    done = 0
    # a new worker process per chunk: a crash loses that chunk only, and names its seeds
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.workers, maxtasksperchild=1) as pool:
        pending = [(c, pool.apply_async(_worker, (c,))) for c in chunks]
        for chunk, res in pending:
            try:
                results = res.get(timeout=1800)
            except Exception as e:
                crashes.append((chunk[0][0], chunk[-1][0], repr(e)))
                continue
            for seed, mode, cls, names in results:
                done += 1
                if cls:
                    classes[cls].append((seed, mode))
                    op_counts[cls].update(names)
    elapsed = time.perf_counter() - t0
    print(f"{done} programs in {elapsed:.0f} s ({args.workers} workers); modes {modes}")
    print(f"crashed chunks: {len(crashes)}")
    for lo, hi, e in crashes:
        print(f"  seeds {lo}..{hi}: {e}")
    if not classes:
        print("mismatches: 0")
    for cls, items in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        by_mode = collections.Counter(m for _, m in items)
        print(f"{len(items):6d}  {cls}  {dict(by_mode)}")
        print(f"        ops most involved: {op_counts[cls].most_common(6)}")
        print(f"        replay: {items[:4]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
