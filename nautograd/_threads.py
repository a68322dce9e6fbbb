"""Intra-op threads for large elementwise forwards (torch.set_num_threads' counterpart).

numpy's ufuncs run on one thread and release the GIL while they loop, so a large
transcendental ufunc split into chunks over a small pool runs on every core, as torch's
does. Measured on the 2-core VM (1e6 float64 elements): np.exp 5.1 ms -> 2.6 ms on two
threads, np.tanh 13.9 -> 7.3 ms; a memory-bound product gains little (0.34 -> 0.27 ms). Every
unary op's forward and gelu's go through ``elementwise``, softmax rows through
``parallel_for``. Below ``MIN_SIZE`` elements the hand-off costs more than it saves: on the
2-core AMD EPYC VM an empty round trip through the team takes ~40 us (median, back to back:
the idle worker's vCPU is parked), and at 2^16 float64 elements a split tanh took 130 us
against 110 on one thread, exp 119 against 69, relu 139 against 44; at 2^18 they tie, at
2^19 the split gains 1.2-1.6x (timing script, medians of 120).
"""

import os
import threading

import numpy as np

MIN_SIZE = 1 << 18
# a row loop (sums, softmax rows, cumsum: parallel_for) is split from this much work: a sum
# of 300 rows of 1,000 float64 took 76 us split against 35 on one thread (torch's: 17)
ROWS_MIN = 1 << 19
_state = {"threads": None, "pool": None}
_lock = threading.Lock()


def _default_threads():
    for var in ("NAUTOGRAD_NUM_THREADS", "OMP_NUM_THREADS"):
        v = os.environ.get(var, "")
        if v.isdigit() and int(v) > 0:
            return int(v)
    return os.cpu_count() or 1


def get_num_threads():
    """The number of threads nautograd uses for intra-op parallelism (as torch's)."""
    if _state["threads"] is None:
        _state["threads"] = _default_threads()
    return _state["threads"]


def set_num_threads(n):
    """Set the number of threads for intra-op parallelism (as ``torch.set_num_threads``).

    Defaults to ``NAUTOGRAD_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the core count.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {n!r}")
    with _lock:
        _state["threads"] = n
        team, _state["pool"] = _state["pool"], None
    if team is not None:
        team.close()


class _Team:
    """``workers`` daemon threads, each parked on a lock of its own: handing out parts costs
    one lock release a worker and one acquire to wait for it. concurrent.futures'
    ThreadPoolExecutor took ~40 us a hand-off (submit, a Future and its Condition), more than
    a 10^6-element row sum takes (benchmarks/op_families.py "reduction(sum)")."""

    def __init__(self, workers):
        self.workers = workers
        self.busy = threading.Lock()  # one caller at a time; others run their parts inline
        self.go = [threading.Lock() for _ in range(workers)]  # held: worker k waits
        self.done = [threading.Lock() for _ in range(workers)]  # held: worker k is not done
        self.task = [None] * workers
        self.error = [None] * workers
        for k in range(workers):
            self.go[k].acquire()
            self.done[k].acquire()
            threading.Thread(
                target=self._loop, args=(k,), name=f"nautograd-{k}", daemon=True
            ).start()

    def _loop(self, k):
        go, done = self.go[k], self.done[k]
        while True:
            go.acquire()
            task = self.task[k]
            if task is None:  # closed
                return
            fn, p = task
            try:
                fn(p)
            except BaseException as e:  # handed to the caller
                self.error[k] = e
            done.release()

    def run(self, fn, parts):
        if not self.busy.acquire(blocking=False):  # another thread's parts (or nested)
            for p in range(parts):
                fn(p)
            return
        try:
            used = min(parts - 1, self.workers)
            for k in range(used):
                self.task[k] = (fn, k + 1)
                self.go[k].release()
            try:
                for p in range(used + 1, parts):  # more parts than workers: the caller's
                    fn(p)
                fn(0)
            finally:
                for k in range(used):
                    self.done[k].acquire()
                    self.task[k] = None
            for k in range(used):
                e, self.error[k] = self.error[k], None
                if e is not None:
                    raise e
        finally:
            self.busy.release()

    def close(self):
        with self.busy:
            for k in range(self.workers):
                self.task[k] = None
                self.go[k].release()


def _pool(workers):
    with _lock:
        team = _state["pool"]
        if team is None or team.workers != workers:
            if team is not None:
                team.close()
            team = _state["pool"] = _Team(workers)
        return team


def _fill(f, src, dst, err, into):
    with np.errstate(**err):  # the caller's floating-point error settings, per thread
        if into:
            f(src, dst)
        elif isinstance(f, np.ufunc):
            f(src, out=dst)
        else:
            dst[...] = f(src)


def elementwise(f, x, into=False):
    """``f(x)`` for an elementwise ``f`` (a ufunc or array -> array of the same shape and of
    ``x``'s dtype), on chunks of ``x`` over the intra-op threads when ``x`` is large.

    ``into=True``: ``f(x_flat, out_flat)`` writes its result into ``out_flat`` (a compiled
    loop over 1-D arrays, see kernels/_vmath.py).
    """
    threads = get_num_threads()
    n = x.size
    if into:
        if not x.flags.c_contiguous:
            x = x.copy()  # (np.ascontiguousarray would turn a 0-d array into 1-d)
        if threads == 1 or n < MIN_SIZE:
            out = np.empty(x.shape, x.dtype)
            f(x.reshape(-1), out.reshape(-1))
            return out
    elif threads == 1 or n < MIN_SIZE or not x.flags.c_contiguous or getattr(f, "unsplit", 0):
        # (``f.unsplit``: a memory-bound function that returns its own array, whose parts
        # would each be copied into ``out``: the copy cost more than the second thread saved,
        # relu at 2^21 float64 elements 1.27 ms split against 0.76 on one thread; gelu's tanh
        # form, eight numpy passes, gains 2.0x split at 2^18 and 1.5x at 2^20)
        return f(x)
    parts = min(threads, n // (MIN_SIZE // 2))
    flat = x.reshape(-1)
    out = np.empty(n, x.dtype)
    # chunk edges on 64-element boundaries (whole cache lines, aligned vector loops)
    edges = [(n * k // parts) & ~63 for k in range(parts)] + [n]
    err = np.geterr()
    run_parts(
        lambda p: _fill(f, flat[edges[p] : edges[p + 1]], out[edges[p] : edges[p + 1]], err, into),
        parts,
    )
    return out.reshape(x.shape)


def parallel_for(fn, total, work):
    """Call ``fn(lo, hi)`` over ranges covering ``range(total)`` (rows of a softmax, say),
    on the intra-op threads when ``work`` (elements touched) is large. ``fn`` must release
    the GIL (an ``@njit(nogil=True)`` loop) and write disjoint outputs per range."""
    threads = get_num_threads()
    parts = min(threads, total, max(work // (ROWS_MIN // 2), 1))
    if parts <= 1 or work < ROWS_MIN:
        fn(0, total)
        return
    edges = [total * k // parts for k in range(parts + 1)]
    run_parts(lambda p: fn(edges[p], edges[p + 1]), parts)


def run_parts(fn, parts):
    """Call ``fn(p)`` for ``p`` in ``range(parts)``, at once on the intra-op threads (part 0
    on the calling thread), and wait for all of them: the chunks of ``elementwise`` and
    ``parallel_for``, the parts of a backward node (graph/scheduler.py). ``fn`` must release
    the GIL to run in parallel. While another thread's parts run, the parts run one after
    the other on the calling thread."""
    if parts <= 1:
        fn(0)
        return
    _pool(get_num_threads() - 1).run(fn, parts)
