"""The command line: ``python -m nautograd {bench,warmup,info}`` (also the ``nautograd`` script).

- ``bench``: the benchmark workloads of ``benchmarks/`` against every installed peer.
- ``warmup``: compile and cache the engine for float32 and float64, and write the package's
  bytecode, so a new process's first calls are fast.
- ``info``: versions, the Numba cache and whether it is warm, thread counts.
"""

import argparse
import os
import sys
import time


def _progress(total, desc, quiet=False):
    """A tqdm progress bar on stderr (none when quiet or when stderr is not a terminal)."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit="step",
        file=sys.stderr,
        dynamic_ncols=True,
        disable=True if quiet else None,
    )


# ---------------------------------------------------------------------------------------------
# info


def cache_dir():
    """The directory nautograd's compiled code is cached in (nautograd/_numba_setup.py)."""
    from . import _numba_setup

    return _numba_setup.CACHE_DIR


def cached_kernels():
    """(cached, total): how many of the kernels' entry points (kernels/registry.py
    ``entry_names``) are in the disk cache."""
    from .kernels.registry import entry_names

    names = entry_names()
    found = set()
    for _, _, files in os.walk(cache_dir()):
        found.update(f.split(".")[1].split("-")[0] for f in files if f.endswith(".nbi"))
    return len(names & found), len(names)


def info():
    """Versions, cache location and warmth, threads (a dict; ``main`` prints it)."""
    import llvmlite
    import numba
    import numpy

    from . import __version__

    cached, total = cached_kernels()
    return {
        "nautograd": __version__,
        "python": sys.version.split()[0],
        "numba": numba.__version__,
        "numpy": numpy.__version__,
        "llvmlite": llvmlite.__version__,
        "cache_dir": cache_dir(),
        "cached_kernels": f"{cached} of {total}",
        "cache_warm": cached >= total,
        "cpu_count": os.cpu_count(),
        "numba_threads": numba.get_num_threads(),
        "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default (all cores)"),
    }


def _print_info():
    d = info()
    width = max(len(k) for k in d)
    for k, v in d.items():
        print(f"{k:<{width}}  {v}")
    if not d["cache_warm"]:
        print("\nkernels compile on first use; `python -m nautograd warmup` compiles them all")


# ---------------------------------------------------------------------------------------------
# warmup


def warmup(quiet=False):
    """Compile (or load) every kernel, the engine and every compiled forward helper.

    Compiles each kernel's entry points, then runs every case of every op of the op table
    forward and backward in float64 and float32. Returns the seconds it took.
    """
    import numpy as np

    from . import autograd
    from .creation import from_numpy
    from .kernels import OPS
    from .kernels.registry import load_all, run_case
    from .tensor import Tensor, apply

    rng = np.random.default_rng(0)
    steps = [(dt, op, case) for dt in (np.float64, np.float32) for op in OPS for case in op.cases]
    bar = _progress(len(steps), "warmup", quiet)
    t0 = time.perf_counter()
    try:
        bar.set_description_str("warmup: kernels")
        load_all()
        for dt, op, case in steps:
            bar.set_description_str(f"warmup {np.dtype(dt).name} {op.name}")
            arrays, kwargs = case.make_inputs(rng, dt)
            inputs = [
                Tensor(a, requires_grad=True) if isinstance(a, np.ndarray) else a for a in arrays
            ]
            # (from_numpy: an index array keeps its integer dtype)
            kwargs = {
                k: from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()
            }
            out = run_case(op, case, apply, inputs, kwargs)
            outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o.requires_grad]
            if outs:
                leaves = [t for t in inputs if isinstance(t, Tensor)]
                grads = [Tensor(np.ones_like(o._data)) for o in outs]
                autograd.grad(outs, leaves, grads, allow_unused=True)
            bar.update()
    finally:
        bar.close()
    return time.perf_counter() - t0


def write_bytecode():
    """Write the package's ``.pyc`` files; True when they are all there.

    Python does not write them itself under ``PYTHONDONTWRITEBYTECODE`` (set on this machine
    and common in containers), and compiling the package's 36 modules from source costs every
    new process 0.10 s of its 0.9 s to a first backward (docs/architecture.md). Reading
    ``.pyc`` files does not depend on that setting. A read-only install is left as it is.
    """
    import compileall
    import contextlib
    import io

    package = os.path.dirname(os.path.abspath(__file__))
    with contextlib.redirect_stdout(io.StringIO()):
        return bool(compileall.compile_dir(package, quiet=2))


def _warmup_command(args):
    before, _ = cached_kernels()
    seconds = warmup(quiet=args.quiet)
    bytecode = write_bytecode()
    after, total = cached_kernels()
    how = "loaded from" if before == after else "compiled into"
    print(f"warmup took {seconds:.1f} s ({how} the cache)")
    print(f"cache: {cache_dir()}")
    if not bytecode:
        print("the package's .pyc files could not be written (read-only install?)")
    print(f"cached kernels: {after} of {total}")


# ---------------------------------------------------------------------------------------------
# bench


def _benchmarks_module():
    """``benchmarks.run`` from the source checkout this package is installed from."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isfile(os.path.join(root, "benchmarks", "run.py")):
        raise SystemExit(
            "nautograd bench: the benchmarks/ folder was not found next to the package "
            f"(looked in {root}); install nautograd from its source checkout (pip install -e .)"
        )
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks import run

    return run


def _set_threads(threads, argv):
    """Give every library ``threads`` threads; re-executes when OpenBLAS is already loaded.

    numpy's and scipy's OpenBLAS read OPENBLAS_NUM_THREADS once, when they load, and
    ``python -m nautograd`` has loaded numpy before it reads its arguments.
    """
    want = str(threads)
    if os.environ.get("OPENBLAS_NUM_THREADS") != want:
        os.environ["OPENBLAS_NUM_THREADS"] = want
        os.execv(sys.executable, [sys.executable, "-m", "nautograd", *argv])


def main(argv=None):
    """Entry point of ``python -m nautograd`` and the ``nautograd`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="nautograd", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="benchmark nautograd against torch and jax")
    b.add_argument("--quick", action="store_true", help="smaller sizes (under a minute)")
    b.add_argument(
        "--size", choices=("full", "quick", "tiny"), default=None, help=argparse.SUPPRESS
    )
    b.add_argument("--only", default=None, help="run the workloads whose name contains this")
    b.add_argument("--threads", type=int, default=None, help="threads for every library")
    b.add_argument("--reps", type=int, default=None, help="timed repetitions per library")
    b.add_argument("--out", default="results", help="folder for results.json and ratios.png")
    b.add_argument("--peers", default=None, help="comma-separated peers (default: all installed)")
    w = sub.add_parser("warmup", help="compile and cache the engine for float32 and float64")
    w.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("info", help="versions, cache directory and warmth, threads")
    args = ap.parse_args(argv)

    if args.command == "info":
        _print_info()
    elif args.command == "warmup":
        _warmup_command(args)
    else:
        threads = args.threads or os.cpu_count()
        if args.threads is not None:
            _set_threads(threads, argv)
        size = args.size or ("quick" if args.quick else "full")
        peers = args.peers.split(",") if args.peers else None
        code = _benchmarks_module().bench_command(
            size=size, only=args.only, threads=threads, reps=args.reps, out=args.out, peers=peers
        )
        sys.exit(code)
