"""Cold start: how long a user waits for compiled code, each case in a new process.

1. ``readme``: the README example's first float64 backward after import, empty cache.
2. ``mlp32``: a float32 MLP's first training step (forward, backward, SGD), empty cache.
3. ``warmup``: ``python -m nautograd warmup`` of every kernel, empty cache.
4. ``warm``: a new process with a warm cache, from its first line to its first backward done.
5. ``edit``: after a kernel source is edited (a copy of the package, one kernel file
   changed), the README example's first backward.

Prints seconds against the targets of the architecture issue. Each case gets a cache
directory of its own (``NUMBA_CACHE_DIR``), so it measures compiling, not loading.

    python benchmarks/cold_start.py [--only readme,warm] [--skip-warmup]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

README = """
import time
t0 = time.perf_counter()
import nautograd as ng
t1 = time.perf_counter()
x = ng.tensor([1.0, 2.0, 3.0], requires_grad=True)
w = ng.randn(3, 3, requires_grad=True)
y = (w @ x).tanh()
loss = (y * y).sum()
loss.backward()
t2 = time.perf_counter()
(gx,) = ng.autograd.grad((x.exp() * x).sum(), [x])
with ng.no_grad():
    w -= 0.1 * w.grad
t3 = time.perf_counter()
print(RESULT, {"import": t1 - t0, "first_backward": t2 - t1, "rest": t3 - t2, "total": t3 - t0})
"""

MLP32 = """
import time
t0 = time.perf_counter()
import numpy as np
import nautograd as ng
F = ng.nn.functional
t1 = time.perf_counter()
rng = np.random.default_rng(0)
sizes = [784, 256, 256, 10]
params = []
for a, b in zip(sizes[:-1], sizes[1:]):
    params.append(ng.tensor((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
                            requires_grad=True))
    params.append(ng.zeros(b, dtype=ng.float32, requires_grad=True))
x = ng.tensor(rng.standard_normal((128, 784)).astype(np.float32))
target = ng.tensor(rng.integers(0, 10, 128))
h = x
for i in range(0, len(params), 2):
    h = h @ params[i] + params[i + 1]
    if i < len(params) - 2:
        h = F.relu(h)
loss = F.cross_entropy(h, target)
loss.backward()
with ng.no_grad():
    for p in params:
        p -= 0.01 * p.grad
t2 = time.perf_counter()
print(RESULT, {"import": t1 - t0, "first_step": t2 - t1, "total": t2 - t0})
"""

WARM = """
import time
t0 = time.perf_counter()
import nautograd as ng
x = ng.tensor([1.0, 2.0, 3.0], requires_grad=True)
(x * x).sum().backward()
print(RESULT, {"first_backward_done": time.perf_counter() - t0})
"""

TARGETS = {
    "readme": ("first_backward", 10.0),
    "mlp32": ("first_step", 15.0),
    "warmup": ("seconds", 90.0),
    "warm": ("first_backward_done", 0.5),
    "edit": ("first_backward", 10.0),
}


def _child(code, cache, package_root=ROOT):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=package_root)
    env.pop("NAUTOGRAD_DEFER", None)
    code = code.replace("RESULT", "'RESULT'")
    # (run from the package's folder: ``-c`` puts the working directory first on sys.path)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=package_root,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return eval(line[len("RESULT") :])  # (our own child's dict of floats)


def _warmup(cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=ROOT)
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "nautograd", "warmup", "--quiet"],
        env=env,
        check=True,
        capture_output=True,
        timeout=3600,
    )
    return {"seconds": time.perf_counter() - t}


def _edit(cache):
    """Warm a copy of the package, edit one kernel file, time the README's first backward."""
    with tempfile.TemporaryDirectory() as d:
        shutil.copytree(os.path.join(ROOT, "nautograd"), os.path.join(d, "nautograd"),
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        _child(README, cache, d)
        path = os.path.join(d, "nautograd", "kernels", "pointwise.py")
        with open(path, "a") as fh:
            fh.write("\n# an edit\n")
        return _child(README, cache, d)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated cases")
    ap.add_argument("--skip-warmup", action="store_true", help="not the (long) warmup case")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    cases = args.only.split(",") if args.only else list(TARGETS)
    if args.skip_warmup and "warmup" in cases:
        cases.remove("warmup")
    results = {}
    for case in cases:
        with tempfile.TemporaryDirectory() as cache:
            if case == "readme":
                r = _child(README, cache)
            elif case == "mlp32":
                r = _child(MLP32, cache)
            elif case == "warmup":
                r = _warmup(cache)
            elif case == "warm":
                _child(WARM, cache)
                runs = [_child(WARM, cache)["first_backward_done"] for _ in range(5)]
                r = {"first_backward_done": sorted(runs)[2], "runs": runs}
            elif case == "edit":
                r = _edit(cache)
            else:
                raise SystemExit(f"unknown case {case!r}")
        key, target = TARGETS[case]
        results[case] = r
        verdict = "meets" if r[key] <= target else "misses"
        print(f"{case:<8} {key:<20} {r[key]:8.2f} s   target <= {target:g} s: {verdict}")
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
