"""The benchmark runner behind ``python -m nautograd bench``.

Runs each workload of ``benchmarks/workloads.py`` on nautograd and every installed peer
(torch, jax) in one process. Repetitions are interleaved (ng, torch, ng, ...) so machine
drift cancels in the ratios; jax is timed after the others, workload by workload (its
threads would slow torch's steps). Prints median time, min-max, first call and
peer_time / ng_time (>1: nautograd is faster), writes ``results.json`` and, when matplotlib
is installed, a bar chart of the ratios (``ratios.png``).

    python -m nautograd bench [--quick] [--only NAME] [--threads N] [--reps N] [--out DIR]
    python benchmarks/run.py ...   (the same command)
"""

import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

from benchmarks import programs as P  # noqa: E402
from benchmarks import workloads as W  # noqa: E402

SCHEMA = 1

# sizes: scalar-DAG ops, RNN steps, MLP (batch, layer sizes), default repetitions
SIZES = {
    "full": dict(
        n_ops=10_000,
        T=1000,
        batch=128,
        layers=(784, 256, 256, 10),
        n_custom=1000,
        hvp=(256, (64, 128, 1)),
        reps=7,
    ),
    "quick": dict(
        n_ops=2000,
        T=200,
        batch=128,
        layers=(784, 256, 256, 10),
        n_custom=300,
        hvp=(256, (64, 128, 1)),
        reps=3,
    ),
    "tiny": dict(
        n_ops=200, T=20, batch=8, layers=(32, 16, 16, 10), n_custom=20, hvp=(8, (8, 16, 1)), reps=1
    ),
}


# ---------------------------------------------------------------------------------------------
# peers


def load_peers(threads, wanted=None):
    """{name: module} of nautograd and the installed peers; prints what is missing."""
    import nautograd

    peers = {"nautograd": nautograd}
    missing = {}
    if wanted is None or "torch" in wanted:
        try:
            import torch

            torch.set_num_threads(threads)
            peers["torch"] = torch
        except ImportError:
            missing["torch"] = "not installed"
    if wanted is None or "jax" in wanted:
        try:
            import jax

            jax.config.update("jax_enable_x64", True)  # the float64 workloads stay float64
            jax.config.update("jax_platforms", "cpu")
            peers["jax"] = jax
        except ImportError:
            missing["jax"] = "not installed"
    return peers, missing


def _version(lib):
    return getattr(lib, "__version__", "?")


# ---------------------------------------------------------------------------------------------
# workloads: name -> {peer: (setup() -> state, run(state), fresh)}
#
# ``fresh``: call setup before every repetition (backward alone must re-record its graph);
# otherwise the state is made once and every repetition is one more step, as in a training
# loop (a first step on freshly allocated tensors measures page faults, not the engines).


def _block(x):
    return x.block_until_ready() if hasattr(x, "block_until_ready") else x


def cases(peers, size):
    s = SIZES[size]
    plan = W.scalar_dag_plan(s["n_ops"])
    T, batch, layers, n_custom = s["T"], s["batch"], s["layers"], s["n_custom"]
    out = {}

    def dag_fb(name, lib):
        if name == "jax":
            grad = lib.grad(W.jax_scalar_dag_fn(lib, plan))
            return (lambda: W.jax_scalar_dag_leaves(lib)), (lambda st: _block(grad(st)[-1])), False

        def run(leaves):
            W.scalar_dag_forward(lib, leaves, plan).backward()

        return (lambda: W.scalar_dag_leaves(lib)), run, False

    def dag_b(name, lib):
        if name == "jax":
            f = W.jax_scalar_dag_fn(lib, plan)

            def setup():
                return lib.vjp(f, W.jax_scalar_dag_leaves(lib))[1]

            one = lib.numpy.ones((), lib.numpy.float64)
            return setup, (lambda pullback: _block(pullback(one)[0][-1])), True

        def setup():
            root = W.scalar_dag_forward(lib, W.scalar_dag_leaves(lib), plan)
            # the forward done, values and all (nautograd's deferred forward runs its batch
            # here, torch's is done already): the timed step is the backward alone
            root.item()
            return root

        return setup, (lambda root: root.backward()), True

    def rnn(name, lib):
        if name == "jax":
            step = W.jax_rnn_step_fn(lib)
            return (lambda: W.jax_rnn_inputs(lib, T=T)), (lambda st: _block(step(*st)[1])), False

        def run(state):
            W.rnn_loss(lib, *state).backward()

        return (lambda: W.rnn_inputs(lib, T=T)), run, False

    def mlp(name, lib):
        if name == "jax":
            step = W.jax_mlp_step_fn(lib)

            def setup():
                return list(W.jax_mlp_inputs(lib, batch=batch, sizes=layers))

            def run(st):
                st[0], loss = step(*st)
                _block(loss)

            return setup, run, False

        def setup():
            return W.mlp_inputs(lib, batch=batch, sizes=layers)

        return setup, (lambda st: W.mlp_step(lib, *st)), False

    def custom(name, lib):
        if name == "jax":
            grad = W.jax_custom_chain_fn(lib, n_custom)
            x = lib.numpy.asarray(W.custom_chain_values())
            return (lambda: x), (lambda st: _block(grad(st))), False

        def run(state):
            x, fn = state
            W.custom_chain_loss(x, fn, n_custom).backward()
            x.grad = None

        return (lambda: W.custom_chain_inputs(lib)), run, False

    def hvp(name, lib):
        hb, hs = s["hvp"]
        if name == "jax":
            f = W.jax_hvp_fn(lib)
            return (lambda: W.jax_hvp_inputs(lib, hb, hs)), (lambda st: _block(f(*st))), False
        return (lambda: W.hvp_inputs(lib, hb, hs)), (lambda st: W.hvp_step(lib, *st)), False

    mlp_name = f"mlp_step[{batch}x{'-'.join(map(str, layers))},f32]"
    hvp_name = f"hessian_vector_product[{s['hvp'][0]}x{'-'.join(map(str, s['hvp'][1]))}]"
    for name, make in (
        (f"scalar_dag_fwd_bwd[{s['n_ops']}]", dag_fb),
        (f"scalar_dag_bwd[{s['n_ops']}]", dag_b),
        (f"rnn_chain_fwd_bwd[T={T}]", rnn),
        (mlp_name, mlp),
        (f"custom_function_chain[{n_custom}]", custom),
        (hvp_name, hvp),
    ):
        out[name] = {pname: make(pname, lib) for pname, lib in peers.items()}
    # the research programs (benchmarks/programs): torch's API, so not run on jax
    for prog in P.PROGRAMS:
        per_peer = {}
        for pname, lib in peers.items():
            if pname != "jax":
                setup, step = P.prepared(prog, lib)
                per_peer[pname] = (setup, step, False)
        out[f"{PROGRAM_PREFIX}{prog}"] = per_peer
    return out


PROGRAM_PREFIX = "program:"


def program_summary(workloads):
    """{peer: (geometric mean of peer/ng over the programs, slowest program's ratio, count)}."""
    import math

    by_peer = {}
    for w in workloads:
        if w["name"].startswith(PROGRAM_PREFIX):
            for p, r in w["ratios"].items():
                by_peer.setdefault(p, []).append(r)
    return {
        p: (math.exp(sum(math.log(r) for r in rs) / len(rs)), min(rs), len(rs))
        for p, rs in by_peer.items()
    }


# ---------------------------------------------------------------------------------------------
# timing


def _timeit(fn, state):
    t = time.perf_counter()
    fn(state)
    return time.perf_counter() - t


def _summary(times, first):
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "first_call_s": first,
        "times_s": times,
    }


# a peer whose repetition (setup included) takes longer than this is timed once instead of
# `reps` times, so the default run stays short: jax runs the 10,000-op scalar DAG eagerly at
# ~40 s a call. The first call is left out of the judgement (it compiles).
SLOW_S = 2.0


def run_workload(per_peer, reps, bar=None):
    """Times every peer on one workload, repetitions interleaved. Returns {peer: summary}."""
    times = {p: [] for p in per_peer}
    first = {}
    states = {}
    cost = {}  # wall time of a peer's latest repetition, setup included
    for p, (setup, run, _) in per_peer.items():  # first call: compiles (nautograd, jax)
        t = time.perf_counter()
        states[p] = setup()
        first[p] = _timeit(run, states[p])
        cost[p] = time.perf_counter() - t
        if bar:
            bar.update()
    for _ in range(reps):
        for p, (setup, run, fresh) in per_peer.items():
            # the previous peer's garbage is collected before this one is timed: jax's 35 s
            # scalar-DAG trace left enough that the full collection it triggered during
            # nautograd's next step took 1.6 s (1.91 s against 0.27 s, every cold run)
            gc.collect()
            # judged by the peer's fastest repetition: one slow outlier (2.16 s after 0.33 s,
            # nautograd's scalar DAG in a cold process) cut its repetitions to two and made
            # their median 1.24 s
            if times[p] and cost[p] > SLOW_S:
                pass
            elif fresh:
                t = time.perf_counter()
                states[p] = setup()
                times[p].append(_timeit(run, states[p]))
                took = time.perf_counter() - t
                cost[p] = took if len(times[p]) == 1 else min(cost[p], took)
            else:
                if cost[p] <= SLOW_S:
                    # BLAS/OpenMP worker threads spin for a while after a call: wait them out
                    # (busy: a sleep lets the VM park the core), then one untimed step, so
                    # each library is timed with its own pools active rather than the
                    # other's still holding the cores (a sleep alone let torch's OpenMP
                    # workers fall asleep: 80 ms wake-ups)
                    busy_wait(0.01)
                    run(states[p])
                times[p].append(_timeit(run, states[p]))
                cost[p] = times[p][-1] if len(times[p]) == 1 else min(cost[p], times[p][-1])
            if bar:
                bar.update()
    return {p: _summary(times[p], first[p]) for p in per_peer}


def busy_wait(seconds):
    """Spin for ``seconds``: lets another library's spinning worker threads settle without
    letting the VM park this core (as a sleep would)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def ratios(summary):
    """peer median / nautograd median for every peer (>1: nautograd is faster)."""
    ng = summary["nautograd"]["median_s"]
    return {p: s["median_s"] / ng for p, s in summary.items() if p != "nautograd"}


# The child times itself from its first line, and (Linux) from the process's start as the
# kernel records it (/proc/self/stat field 22, in clock ticks since boot, against
# /proc/uptime: 10 ms resolution), which adds the interpreter's own start-up but not the
# process's exit (unloading Numba/LLVM), which the parent's wall clock also includes.
_STARTUP_CHILD = """
import time
t = time.perf_counter()
import nautograd as ng
x = ng.tensor([1.0, 2.0], requires_grad=True)
(x * x).sum().backward()
elapsed = time.perf_counter() - t
try:
    import os
    with open("/proc/self/stat") as f:
        started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as f:
        since_start = float(f.read().split()[0]) - started
except (OSError, ValueError, IndexError):
    since_start = -1.0
print(elapsed, since_start)
"""


def first_backward_in_new_process(reps=5):
    """Seconds from a fresh interpreter's start to its first backward, after what ``warmup``
    does (a warm Numba cache, the package's bytecode written), the median of ``reps`` new
    processes (one sample varied 0.90-1.19 s between two CI runs): from the child's first
    line (``in_process_s``, with its ``min``/``max``), from its process start
    (``since_process_start_s``, Linux; None elsewhere), and the parent's wall clock around
    the whole child, exit included."""
    from nautograd.cli import write_bytecode

    write_bytecode()
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", _STARTUP_CHILD], capture_output=True, text=True, check=True
        )
        wall = time.perf_counter() - t
        elapsed, since_start = (float(v) for v in out.stdout.split())
        samples.append((elapsed, since_start, wall))
    elapsed, since_start, wall = (statistics.median(c) for c in zip(*samples, strict=True))
    return {
        "in_process_s": elapsed,
        "in_process_min_s": min(s[0] for s in samples),
        "in_process_max_s": max(s[0] for s in samples),
        "since_process_start_s": since_start if since_start >= 0 else None,
        "with_interpreter_s": wall,
        "reps": reps,
    }


# ---------------------------------------------------------------------------------------------
# reporting


def _ms(t):
    return f"{t * 1e3:.3f} ms" if t < 1 else f"{t:.2f} s"


def format_table(workloads):
    """The results as a text table, one row per (workload, peer)."""
    rows = [("workload", "peer", "median", "min - max", "first call", "peer/ng")]
    for w in workloads:
        for p, s in w["results"].items():
            ratio = w["ratios"].get(p)
            rows.append(
                (
                    w["name"] if p == "nautograd" else "",
                    p,
                    _ms(s["median_s"]),
                    f"{_ms(s['min_s'])} - {_ms(s['max_s'])}",
                    _ms(s["first_call_s"]),
                    "" if ratio is None else f"{ratio:.2f}x",
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(wd) for c, wd in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def write_chart(workloads, path):
    """A bar chart of peer/nautograd ratios per workload (log scale); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    peers = list(dict.fromkeys(p for w in workloads for p in w["ratios"]))
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(workloads)), 4.5))
    width = 0.8 / max(len(peers), 1)
    for k, p in enumerate(peers):
        xs = [i + (k - (len(peers) - 1) / 2) * width for i in range(len(workloads))]
        ys = [w["ratios"].get(p, float("nan")) for w in workloads]
        bars = ax.bar(xs, ys, width, label=f"{p} time / nautograd time")
        ax.bar_label(bars, labels=[f"{y:.2f}x" for y in ys], fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels([w["name"] for w in workloads], rotation=15, ha="right", fontsize=8)
    ax.set_ylabel("ratio (>1: nautograd is faster)")
    ax.set_title("nautograd against its peers (median of interleaved repetitions)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def blas_libraries():
    """The BLAS libraries loaded in this process and which kernels they run (threadpoolctl):
    a machine's OpenBLAS may run its AVX-512 kernels, or be pinned to AVX2 ones by
    ``OPENBLAS_CORETYPE``; ratios that involve products depend on it."""
    try:
        import scipy.linalg  # noqa: F401  (scipy's OpenBLAS: the backward's products)
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keys = ("internal_api", "version", "architecture", "num_threads", "filepath")
    return [{k: d.get(k) for k in keys} for d in threadpool_info() if d.get("user_api") == "blas"]


def _meta(peers, missing, size, threads, reps):
    import numba
    import numpy

    return {
        "schema": SCHEMA,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.machine(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "versions": {
            **{p: _version(lib) for p, lib in peers.items()},
            "numba": numba.__version__,
            "numpy": numpy.__version__,
        },
        "blas": blas_libraries(),
        "peers_missing": missing,
        "size": size,
        "threads": threads,
        "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "reps": reps,
    }


# ---------------------------------------------------------------------------------------------
# the command


# peers timed after all the others (see bench_command)
TIMED_LAST = ("jax",)


def bench_command(size="full", only=None, threads=None, reps=None, out="results", peers=None):
    """Run the benchmarks, print the table, write results.json (and ratios.png). Returns the
    exit code: 0, or 130 when interrupted (what finished is still printed and written)."""
    from nautograd.cli import _progress

    threads = threads or os.cpu_count()
    reps = reps or SIZES[size]["reps"]
    libs, missing = load_peers(threads, peers)
    for p, why in missing.items():
        print(f"{p}: {why}, not compared")
    import numba

    import nautograd as ng

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    ng.set_num_threads(threads)
    print(
        f"peers: {', '.join(f'{p} {_version(lib)}' for p, lib in libs.items())}; "
        f"threads={threads} (OpenBLAS {os.environ.get('OPENBLAS_NUM_THREADS', 'default')}); "
        f"size={size}; repetitions={reps}"
    )
    for b in blas_libraries():
        lib = os.path.basename(b["filepath"] or "?")
        print(
            f"BLAS: {b['internal_api']} {b['version']}, {b['architecture']} kernels, "
            f"{b['num_threads']} threads ({lib})"
        )
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if os.environ.get(var):
            print(f"note: {var}={os.environ[var]} is set: OpenBLAS's kernels are pinned")
    todo = {n: c for n, c in cases(libs, size).items() if not only or only in n}
    if not todo:
        print(f"no workload matches --only {only!r}; workloads: {', '.join(cases(libs, size))}")
        return 2
    result = {"meta": _meta(libs, missing, size, threads, reps), "workloads": [], "startup": None}
    bar = _progress(len(todo) * len(libs) * (reps + 1), "bench")
    code = 0
    try:
        # jax is timed after every other peer's workloads: its eager runs leave XLA's thread
        # pools in the process (4 -> 19 native threads), and with them torch's scalar DAG
        # step took 188-190 ms against 153 before (its backward runs on a thread of its own),
        # its RNN ~20 % longer (measured on the development VM)
        for name, per_peer in todo.items():
            bar.set_description_str(f"bench {name}")
            first = {p: c for p, c in per_peer.items() if p not in TIMED_LAST}
            summary = run_workload(first, reps, bar)
            result["workloads"].append(
                {"name": name, "results": summary, "ratios": ratios(summary)}
            )
        for w, (name, per_peer) in zip(result["workloads"], todo.items(), strict=True):
            last = {p: c for p, c in per_peer.items() if p in TIMED_LAST}
            if last:
                bar.set_description_str(f"bench {name}")
                w["results"].update(run_workload(last, reps, bar))
                w["ratios"] = ratios(w["results"])
        bar.set_description_str("bench startup")
        result["startup"] = first_backward_in_new_process(reps=5 if size == "full" else 2)
    except KeyboardInterrupt:
        code = 130
        result["meta"]["interrupted"] = True
    finally:
        bar.close()
    if code:
        print(f"\ninterrupted: {len(result['workloads'])} of {len(todo)} workloads finished")
    if result["workloads"]:
        print("\n" + format_table(result["workloads"]))
        programs = program_summary(result["workloads"])
        result["programs"] = {
            p: {"geomean_ratio": g, "min_ratio": m, "count": n} for p, (g, m, n) in programs.items()
        }
        for p, (g, m, n) in programs.items():
            print(
                f"\nresearch programs ({n}): {p}/nautograd geometric mean {g:.2f}x, "
                f"slowest {m:.2f}x (>1: nautograd is faster)"
            )
    st = result["startup"]
    if st:
        print(
            f"\nnew process, warm cache (median of {st['reps']}): first backward "
            f"{st['in_process_s']:.2f} s after its first line (import included; "
            f"{st['in_process_min_s']:.2f} - {st['in_process_max_s']:.2f} s)"
            + (
                f", {st['since_process_start_s']:.2f} s after the process started"
                if st["since_process_start_s"] is not None
                else ""
            )  # fmt: skip
            + f"; {st['with_interpreter_s']:.2f} s for the whole process, exit included"
        )
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "results.json")
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"\nwrote {path}")
    if any(w["ratios"] for w in result["workloads"]):
        chart = os.path.join(out, "ratios.png")
        if write_chart(result["workloads"], chart):
            print(f"wrote {chart}")
        else:
            print("matplotlib is not installed: no chart")
    return code


if __name__ == "__main__":
    from nautograd.cli import main

    main(["bench", *sys.argv[1:]])
