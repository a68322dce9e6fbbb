"""Runs the benchmark workloads against torch (and jax where installed) in one process.

Repetitions are interleaved (ng, torch, ng, torch, ...) so machine drift cancels in the
ratios. Prints median time, min-max and torch_time / ng_time (>1: nautograd is faster).

    python benchmarks/run.py [--quick] [--only NAME] [--reps N] [--threads N]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def _threads_from_argv(argv):
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return str(os.cpu_count())


# numpy's and scipy's OpenBLAS (nautograd's BLAS) read their thread count when they load:
# set it before numpy is imported, so --threads N means N threads for every library
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads_from_argv(sys.argv[1:]))

from benchmarks import workloads as W  # noqa: E402


def _timeit(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def cases(libs, quick):
    """name -> {lib name: (setup() -> state, run(state), fresh)}

    ``fresh``: call setup before every repetition (backward alone must re-record its
    graph); otherwise the state is made once and every repetition is one more step, as in a
    training loop (a first step on freshly allocated tensors measures page faults, not the
    engines: ~3x the steady-state MLP step for both libraries).
    """
    n_ops = 2000 if quick else 10_000
    T = 200 if quick else 1000
    plan = W.scalar_dag_plan(n_ops)
    out = {}

    def dag_fb(lib):
        def setup():
            return W.scalar_dag_leaves(lib)

        def run(leaves):
            W.scalar_dag_forward(lib, leaves, plan).backward()

        return setup, run, False

    def dag_b(lib):
        def setup():
            return W.scalar_dag_forward(lib, W.scalar_dag_leaves(lib), plan)

        def run(root):
            root.backward()

        return setup, run, True

    def rnn(lib):
        def setup():
            return W.rnn_inputs(lib, T=T)

        def run(state):
            W.rnn_loss(lib, *state).backward()

        return setup, run, False

    def mlp(lib):
        def setup():
            return W.mlp_inputs(lib)

        def run(state):
            W.mlp_step(lib, *state)

        return setup, run, False

    for name, make in (
        (f"scalar_dag_fwd_bwd[{n_ops}]", dag_fb),
        (f"scalar_dag_bwd[{n_ops}]", dag_b),
        (f"rnn_chain_fwd_bwd[T={T}]", rnn),
        ("mlp_step[128x784-256-256-10,f32]", mlp),
    ):
        out[name] = {lname: make(lib) for lname, lib in libs.items()}
    return out


def bench(libs, reps, quick, only=None):
    results = {}
    for name, per_lib in cases(libs, quick).items():
        if only and only not in name:
            continue
        times = {lname: [] for lname in per_lib}
        first = {}
        states = {}
        for lname, (setup, run, _) in per_lib.items():  # first call (compiles for nautograd)
            states[lname] = setup()
            first[lname] = _timeit(lambda run=run, st=states[lname]: run(st))
        for _ in range(reps):
            for lname, (setup, run, fresh) in per_lib.items():
                if fresh:
                    states[lname] = setup()
                else:
                    # BLAS/OpenMP worker threads spin for a while after a call: one untimed
                    # step first, so each library is timed with its own pools active rather
                    # than the other's still holding the 2 cores (a sleep instead let torch's
                    # OpenMP workers fall asleep: 80 ms wake-ups)
                    run(states[lname])
                st = states[lname]
                times[lname].append(_timeit(lambda run=run, st=st: run(st)))
        results[name] = (times, first)
        _report(name, times, first)
    return results


def _fmt(t):
    return f"{t * 1e3:9.3f} ms"


def _report(name, times, first):
    ng_med = statistics.median(times["nautograd"])
    print(f"\n{name}")
    for lname, ts in times.items():
        med = statistics.median(ts)
        ratio = "" if lname == "nautograd" else f"   {lname}/nautograd = {med / ng_med:6.2f}x"
        print(
            f"  {lname:10s} median {_fmt(med)}  (min {_fmt(min(ts))}, max {_fmt(max(ts))}, "
            f"first call {_fmt(first[lname])}){ratio}"
        )
    sys.stdout.flush()


def first_backward_in_new_process():
    """Seconds from a fresh interpreter's start to its first backward (warm Numba cache)."""
    code = (
        "import time; t = time.perf_counter(); import nautograd as ng; "
        "x = ng.tensor([1.0, 2.0], requires_grad=True); (x * x).sum().backward(); "
        "print(time.perf_counter() - t)"
    )
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    return float(out.stdout.strip()), wall


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    ap.add_argument("--only", default=None, help="run workloads whose name contains this")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args(argv)
    import nautograd

    libs = {"nautograd": nautograd}
    try:
        import torch

        torch.set_num_threads(args.threads)
        libs["torch"] = torch
    except ImportError:
        print("torch is not installed: no comparison")
    try:
        import jax  # noqa: F401

        print("jax is installed but has no torch-like API here: not compared yet")
    except ImportError:
        print("jax is not installed: not compared")
    reps = args.reps or (3 if args.quick else 7)
    print(
        f"threads={args.threads} (torch intra-op, OpenBLAS {os.environ['OPENBLAS_NUM_THREADS']}), "
        f"repetitions={reps}, quick={args.quick}"
    )
    import nautograd as ng

    x = ng.tensor([1.0], requires_grad=True)
    t = time.perf_counter()
    (x * x).sum().backward()  # compiles (or loads from cache) the float64 engine
    print(f"nautograd engine load/compile in this process: {time.perf_counter() - t:.2f} s")
    in_proc, wall = first_backward_in_new_process()
    print(
        f"new process, warm cache: first backward {in_proc:.2f} s after start "
        f"(import included; {wall:.2f} s including interpreter start-up)"
    )
    bench(libs, reps, args.quick, args.only)


if __name__ == "__main__":
    main()
