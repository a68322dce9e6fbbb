"""The per-thread tape: the recorded graph as growable integer arrays, plus a value arena.

Node ids are row numbers and double as PyTorch's ``sequence_nr``: a node's inputs are
recorded before it, so every edge points to a smaller id and descending id order is a
topological order (graph/scheduler.py relies on this; compaction keeps the order).

Columns (numpy arrays grown by doubling)::

    op, flags                         per node
    edge_ptr -> edge_node, edge_input_nr    CSR next edges; edge_node == -1 is a null edge
    out_ptr  -> out_numel             one row per node output (gradient buffer sizes)
    saved_ptr -> saved_off, saved_addr      saved values: offset into v64/v32, or an address
    ip_start, ip_len -> iparams; fp_start, fp_len -> fparams   integer / float attributes

Attribute tuples are interned: equal tuples (the same shapes, the same dims) share one run
of ``iparams``/``fparams`` through a dict, which costs ~50 ns per op where copying the tuple
into the array costs ~300 ns. The pools are never compacted; they reset with the tape.

Saved values of at most ``SMALL`` elements are copied into the value arena (``v64`` or
``v32``, by the node's dtype); larger ones stay in their numpy array, read by address, and
the array is kept alive in ``obj[node]`` until the node is released or swept. Integer saved
values (the int64 index maps of gathering ops) are always kept by address: the arenas are
floating point, and a float32 arena cannot hold an index above 2**24 exactly.

Python objects a node needs (a weak reference to the leaf of an AccumulateGrad node, arrays
saved by address) live in the list ``obj``. Tensors that point into the tape hold a
*handle*; ``h2node`` maps handles to node ids so compaction can renumber nodes without
touching the tensors.
"""

import functools
import os
import struct
import threading
import time
import traceback
import weakref

import numpy as np

from .._numba_setup import cached
from ..kernels._shapes import address_of
from ..kernels.registry import LAZY, kernel_table, load_kernels

F32 = 1  # node computes in float32 (its gradients live in the float32 arena)
RELEASED = 2  # saved values were freed by a backward without retain_graph
PY = 4  # the scheduler hands this node to Python (hooks, custom Functions)
ACC = 8  # AccumulateGrad: writes the gradient of a leaf into its .grad
HAS_SAVED = 16  # the node saved values (so running it after release is an error)

# opcode 0 has no kernel: AccumulateGrad nodes (flag ACC) and nodes that run in Python only
# (flag PY without ACC: custom Functions, autograd/function.py)
OP_ACCUMULATE_GRAD = 0
OP_PYTHON = 0
SMALL = 16  # saved values up to this many elements are copied into the value arena
POOL_MAX = 1 << 16  # attribute pool entries and row-head ints a reset() keeps at most


class _AnomalyMode:
    """Anomaly detection's switches (autograd/anomaly_mode.py): process-wide, as torch's
    AnomalyMode. While enabled, every recorded node keeps the stack of its forward call."""

    enabled = False
    check_nan = True


ANOMALY = _AnomalyMode()
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def forward_stack():
    """The caller's stack as ``traceback.format_stack`` gives it, without nautograd's frames
    at its end (torch's ops are C++, so its stacks end at the user's line)."""
    frames = traceback.extract_stack()
    while frames and frames[-1].filename.startswith(_PACKAGE):
        frames.pop()
    return traceback.format_list(frames)


def fill(col, lo, items, code="q"):
    """``col[lo : lo + len(items)] = items`` for a C-contiguous int64 (``code`` "q") or
    float64 ("d") array ``col`` and a list of Python numbers: struct packs a long list ~2.7x
    faster than numpy converts it (14,000 ints: 180 against 470 us, the RNN benchmark's rows
    a step); numpy's conversion is the faster below ~30 items."""
    n = len(items)
    if n < 32:
        col[lo : lo + n] = items
    else:
        struct.pack_into(f"{n}{code}", col, lo * 8, *items)


@cached()
def _compact(n, roots, cols, v64, v32, new_cols, nv64, nv32):
    """Keep the nodes reachable from ``roots``; renumber them in order. Returns new ids.

    ``cols`` = (op, flags, edge_ptr, edge_node, edge_input_nr, out_ptr, out_numel, saved_ptr,
    saved_off, saved_addr, ip_start, ip_len, fp_start, fp_len); ``new_cols`` likewise.
    """
    (
        op,
        flags,
        edge_ptr,
        edge_node,
        edge_input_nr,
        out_ptr,
        out_numel,
        saved_ptr,
        saved_off,
        saved_addr,
        ip_start,
        ip_len,
        fp_start,
        fp_len,
    ) = cols
    (
        nop,
        nflags,
        nedge_ptr,
        nedge_node,
        nedge_input_nr,
        nout_ptr,
        nout_numel,
        nsaved_ptr,
        nsaved_off,
        nsaved_addr,
        nip_start,
        nip_len,
        nfp_start,
        nfp_len,
    ) = new_cols
    mark = np.zeros(n, np.int8)
    for r in roots:
        mark[r] = 1
    for i in range(n - 1, -1, -1):
        if mark[i]:
            for e in range(edge_ptr[i], edge_ptr[i + 1]):
                if edge_node[e] >= 0:
                    mark[edge_node[e]] = 1
    newid = np.full(n, -1, np.int64)
    k = 0
    ne = no = ns = n64 = n32 = 0
    for i in range(n):
        if not mark[i]:
            continue
        newid[i] = k
        nop[k] = op[i]
        nflags[k] = flags[i]
        nip_start[k] = ip_start[i]
        nip_len[k] = ip_len[i]
        nfp_start[k] = fp_start[i]
        nfp_len[k] = fp_len[i]
        for e in range(edge_ptr[i], edge_ptr[i + 1]):
            c = edge_node[e]
            nedge_node[ne] = newid[c] if c >= 0 else -1
            nedge_input_nr[ne] = edge_input_nr[e]
            ne += 1
        for o in range(out_ptr[i], out_ptr[i + 1]):
            nout_numel[no] = out_numel[o]
            no += 1
        for s in range(saved_ptr[i], saved_ptr[i + 1]):
            off = saved_off[s]
            nsaved_addr[ns] = saved_addr[s]
            if off < 0:
                nsaved_off[ns] = -1
            else:
                ln = saved_addr[s]  # for arena values saved_addr holds the length
                if flags[i] & 1:
                    nsaved_off[ns] = n32
                    nv32[n32 : n32 + ln] = v32[off : off + ln]
                    n32 += ln
                else:
                    nsaved_off[ns] = n64
                    nv64[n64 : n64 + ln] = v64[off : off + ln]
                    n64 += ln
            ns += 1
        k += 1
        nedge_ptr[k] = ne
        nout_ptr[k] = no
        nsaved_ptr[k] = ns
    counts = np.array([k, ne, no, ns, n64, n32], np.int64)
    return newid, counts


# a pending node's row (see Tape.record); *_ptr columns hold the node's end pointer. The node
# columns are the rows of one table (Tape._nodes) so that a flush writes them in one
# assignment: ten slice assignments cost ~10 us a flush, and a backward flushes once
_ROW = (
    "op",
    "flags",
    "ip_start",
    "ip_len",
    "fp_start",
    "fp_len",
    "edge_ptr",
    "out_ptr",
    "saved_ptr",
)


def _node_columns(table):
    """name -> column of the node table (see ``Tape._set_nodes``)."""
    return {
        name: table[j] if name.endswith("_ptr") else table[j, 1:] for j, name in enumerate(_ROW)
    }


_COLS = (
    "op",
    "flags",
    "edge_ptr",
    "edge_node",
    "edge_input_nr",
    "out_ptr",
    "out_numel",
    "saved_ptr",
    "saved_off",
    "saved_addr",
    "ip_start",
    "ip_len",
    "fp_start",
    "fp_len",
)


def _locked(method):
    """``method`` holding the tape's lock (re-entrant: most callers hold it already)."""

    @functools.wraps(method)
    def locked(self, *args):
        with self.lock:
            return method(self, *args)

    return locked


class Tape:
    """One thread's recorded graph. See the module docstring for the layout."""

    def __init__(self, nodes=1024):
        i8 = np.int64
        self._set_nodes(np.zeros((len(_ROW), nodes + 1), i8))
        self.edge_node = np.zeros(nodes * 2, i8)
        self.edge_input_nr = np.zeros(nodes * 2, i8)
        self.out_numel = np.zeros(nodes, i8)
        self.saved_off = np.zeros(nodes * 2, i8)
        self.saved_addr = np.zeros(nodes * 2, i8)
        self.v64 = np.zeros(nodes * 2, np.float64)
        self.v32 = np.zeros(64, np.float32)
        self.iparams = np.zeros(256, i8)
        self.fparams = np.zeros(64, np.float64)
        self.n = self.ne = self.no = self.ns = self.n64 = self.n32 = 0
        self.ni = self.nf = 0
        self.ip_pool = {(): 0}  # attribute tuple -> start in iparams
        self.fp_pool = {(): 0}
        self.obj = []  # per node: None, a leaf Tensor (ACC), or a tuple of kept arrays
        # for an op's differentiable formula under create_graph (autograd/higher_order.py):
        # per node its input shapes (one shape if it has one input; None: not an op), and
        # node -> kwargs of ops called with attributes, -> output shapes of multi-output ops
        self.meta = []
        self.kwargs = {}
        self.out_shapes = {}
        self.h2node = []  # handle -> node id (-1: free)
        self.free_h = []
        # the handles of leaves' AccumulateGrad nodes (a dict as an ordered set): while they are
        # the only live handles no tensor can reach any other node, and reserve() starts the
        # tape afresh with just those nodes instead of sweeping it
        # (acc_live: its size, for the check tensor.py makes inline on every recorded op)
        self.acc_handles = {}
        self.acc_live = 0
        self._acc_dropped = []  # (see drop_acc_handle)
        self.heavy = []  # nodes holding arrays by address, released after backward
        self.retained = {}  # node -> {output_nr: weakref to a tensor that retains grad}
        self.hooks = {}  # node -> {output_nr: (shape, [hook, ...])}: tensor hooks (PY nodes)
        self.versions = {}  # node -> ((version counter, saved version, array), ...)
        # tensor.IN_PLACE_CHANGES when the oldest entry still in `versions` was noted
        self.versions_since = 0
        self.functions = []  # nodes of custom Functions (record_python)
        # node -> the dict grad_fn.metadata returns; anomaly mode stores the forward call's
        # stack under "traceback_", as torch does
        self.metadata = {}
        self._g64 = np.zeros(0, np.float64)
        self._g32 = np.zeros(0, np.float32)
        self._arenas_busy = False
        self.running = 0  # backward calls in progress on this tape (no compaction meanwhile)
        # the deferred forward (graph/deferred.py): the batch of ops not yet run; the row
        # heads (8 ints each, see add_head) and per (opcode, shapes, kwargs) the index of
        # their head (their attributes are interned in the pools; a reset keeps both up to
        # POOL_MAX)
        self.batch = None
        self.heads = []
        self.heads_loaded = 0  # heads whose op's lazy kernel is known to be loaded
        self.fast = {}
        # the run batches a deferred result may still refer to: a weak reference each (its
        # callback forgets it) -> its node count. Their results hold no handle: a live batch
        # keeps all its nodes (``live`` counts them, ``compact`` keeps them in one run)
        self.batches = {}
        # the values of the batch that ran last (tensor.py's _batches_too_small reads it: a
        # number, where keeping that batch would keep its nodes)
        self.ran_nv = None
        self.epoch = 0  # compactions so far (a batch's node ids hold within one epoch)
        self._acc_ck = None  # (see reset_keeping_accumulators)
        # held while anything reads or changes the tape: each recorded op (tensor.py), each
        # backward or grad() from start to end (autograd/engine.py), whichever thread runs
        # it; so another thread can differentiate this thread's graphs while it records
        # (re-entrant: a hook or a custom Function's backward records while its backward runs)
        self.lock = threading.RLock()
        # the thread that records on it (whose tape it is): only it compacts the tape, as
        # its own unlocked steps (a handle taken or given back) must not meet a renumbering
        self.owner = threading.get_ident()
        self._new_pending()

    def grad_arenas(self, n64, n32):
        """(G64, G32, owned): gradient arenas of n64 float64 and n32 float32 elements, not
        initialised (the scheduler zeroes or assigns each buffer before it is read).

        Reused across backward calls (a fresh 2 MB array costs its page faults every time).
        A backward started while another runs on this tape (a hook calling backward) gets
        new arrays.
        """
        if self._arenas_busy:
            return np.empty(n64, np.float64), np.empty(n32, np.float32), False
        self._arenas_busy = True
        if n64 > len(self._g64):
            self._g64 = np.empty(max(n64, 2 * len(self._g64)), np.float64)
        if n32 > len(self._g32):
            self._g32 = np.empty(max(n32, 2 * len(self._g32)), np.float32)
        return self._g64[:n64], self._g32[:n32], True

    def release_grad_arenas(self, owned):
        """Give the arenas back (``owned``: what grad_arenas returned)."""
        if owned:
            self._arenas_busy = False

    def _set_nodes(self, table):
        """Make ``table`` (one row per ``_ROW`` name, capacity + 1 columns) the node columns:
        a ``*_ptr`` column is its whole row (ptr[i + 1] is node i's end), any other column
        the row from 1 on (col[i] is node i's), so node i's values sit in table column i + 1
        and a flush of nodes n0..n1 writes ``table[:, n0 + 1 : n1 + 1]``."""
        self._nodes = table
        for name, column in _node_columns(table).items():
            setattr(self, name, column)

    def columns(self):
        self.flush()
        return tuple(getattr(self, name) for name in _COLS)

    # -- growth ---------------------------------------------------------------------------

    @staticmethod
    def _grown(a, need):
        b = np.zeros(max(len(a) * 2, need), a.dtype)
        b[: len(a)] = a
        return b

    def _grow(self, name, need):
        setattr(self, name, self._grown(getattr(self, name), need))
        return getattr(self, name)

    @_locked
    def reserve(self, k):
        """Make room for ``k`` more nodes. Call before computing edges: it may compact, or
        reset a tape that no tensor references any more."""
        if self.batch is not None:  # its nodes come first (they are numbered already)
            self.run_batch()
        while self._acc_dropped:
            self._give_back_acc(self._acc_dropped.pop())
        if self.live == self.acc_live and self.restart_due():
            # here, not when the last handle drops: a tensor's __del__ runs wherever the
            # garbage collector strikes, and a reset halfway through record() (a collection
            # triggered by its allocations) left the node lists shorter than the node count
            self.reset_keeping_accumulators()
        if self.n + k < len(self.op):
            # flush as the graph grows (~1 us a node), so backward only converts the last few
            if self.n - self.nflushed >= 256:
                self.flush()
            return
        self.flush()
        # many nodes but few live handles: most of the tape is unreachable, sweep it
        # (not while a backward walks the columns: a Python node may record and reserve)
        if (
            self.n >= 1024
            and self.live < self.n // 4
            and not self.running
            and threading.get_ident() == self.owner
        ):
            self.compact()
            if self.n + k < len(self.op) * 3 // 4:
                return
        self._grow_nodes(max(len(self.op) * 2, self.n + k + 1))

    def _grow_nodes(self, need):
        old = self._nodes
        table = np.zeros((len(_ROW), need + 1), np.int64)
        table[:, : old.shape[1]] = old
        self._set_nodes(table)

    def restart_due(self):
        """Whether reserve() restarts the tape, given that the accumulators' handles are the
        only live ones: once the dead nodes outnumber the kept accumulators (the restart's
        cost is theirs, a few microseconds each, and this bounds it by the nodes recorded
        since), and no batch is open (its results hold no handle: reserve() runs it, and
        ``live`` then counts it while it lives)."""
        return self.n > 2 * self.live and not self.running and self.batch is None

    def _intern(self, pool, values, kind):
        start = pool.get(values)
        if start is None:
            if kind == "i":
                j = self.ni
                arr = self.iparams
                if j + len(values) > len(arr):
                    arr = self._grow("iparams", j + len(values))
                self.ni = j + len(values)
            else:
                j = self.nf
                arr = self.fparams
                if j + len(values) > len(arr):
                    arr = self._grow("fparams", j + len(values))
                self.nf = j + len(values)
            arr[j : j + len(values)] = values
            pool[values] = start = j
        return start

    # -- recording ------------------------------------------------------------------------
    #
    # A node is appended to Python lists (~25 ns an item) and flushed into the numpy columns
    # in bulk (~15 ns an item): writing numpy scalars one at a time costs ~50-100 ns each,
    # about 3 us a node. Anything that reads or changes the columns calls flush() first.

    def _new_pending(self):
        self._rows = []  # len(_ROW) ints a node, flat (np.array of row tuples is 15x slower)
        self._en, self._ei, self._on, self._so, self._sa = [], [], [], [], []
        self._v64, self._v32 = [], []
        self.nflushed = self.n
        self.flushed = (self.ne, self.no, self.ns, self.n64, self.n32)

    def record(self, opcode, f32, enodes, enrs, out_numels, saved, ip, fp, meta=None):
        """Append a node with next edges ``zip(enodes, enrs)`` (node -1: a null edge) and
        ``meta`` (see ``self.meta``). Returns the node id. Callers ``reserve()`` first.
        """
        self._en += enodes
        self._ei += enrs
        return self.record_node(opcode, f32, len(enodes), out_numels, saved, ip, fp, meta)

    def record_node(self, opcode, f32, k, out_numels, saved, ip, fp, meta=None):
        """``record`` for a caller that appended the node's ``k`` next edges to ``_en`` and
        ``_ei`` itself (tensor.py's recording: no per-op edge lists). Returns the node id."""
        i = self.n
        if i + 1 >= len(self.op):  # compaction here would renumber the edges' nodes
            raise RuntimeError("internal error: tape.record() without reserve()")
        ips = self.ip_pool.get(ip)
        if ips is None:
            ips = self._intern(self.ip_pool, ip, "i")
        fps = self.fp_pool.get(fp)
        if fps is None:
            fps = self._intern(self.fp_pool, fp, "f")
        self.ne = ne = self.ne + k
        self._on += out_numels
        self.no = no = self.no + len(out_numels)
        if saved:
            flags = (F32 | HAS_SAVED) if f32 else HAS_SAVED
            keep = None
            so, sa = self._so, self._sa
            for a in saved:
                m = a.size
                if m <= SMALL and a.dtype.kind == "f":  # integer index maps: by address
                    if f32:
                        so.append(self.n32)
                        self.n32 += m
                        vals = self._v32
                    else:
                        so.append(self.n64)
                        self.n64 += m
                        vals = self._v64
                    if m == 1:
                        vals.append(a.item())
                    else:
                        vals += a.reshape(-1).tolist()
                    sa.append(m)  # arena values: the length (used by compaction)
                else:
                    if not a.flags.c_contiguous:
                        a = np.ascontiguousarray(a)
                    so.append(-1)
                    sa.append(address_of(a))
                    keep = (a,) if keep is None else keep + (a,)
            self.ns = ns = self.ns + len(saved)
            self.obj.append(keep)
            if keep is not None:
                self.heavy.append(i)
        else:
            flags = F32 if f32 else 0
            ns = self.ns
            self.obj.append(None)
        self._rows += (opcode, flags, ips, len(ip), fps, len(fp), ne, no, ns)
        self.meta.append(meta)
        if ANOMALY.enabled:
            self.metadata[i] = {"traceback_": forward_stack()}
        self.n = i + 1
        return i

    @_locked
    def flush(self):
        """Move pending nodes into the numpy columns (one bulk conversion a column)."""
        if self.batch is not None:
            self.run_batch()
        n0, n1 = self.nflushed, self.n
        if n0 == n1:
            return
        if n1 - n0 == 1:  # (one node, a backward's usual root: its column from the list)
            self._nodes[:, n1] = self._rows
        else:
            rows = np.empty(len(self._rows), np.int64)
            fill(rows, 0, self._rows)
            self._nodes[:, n0 + 1 : n1 + 1] = rows.reshape(n1 - n0, len(_ROW)).T
        # (each column written only when it has items: unrolled, the loop over five column
        # tuples this replaces cost ~3 us a flush, most of a small backward's)
        e0, o0, s0, a0, b0 = self.flushed
        if self.ne != e0:
            self._fill("edge_node", e0, self.ne, self._en, "q")
            self._fill("edge_input_nr", e0, self.ne, self._ei, "q")
        if self.no != o0:
            self._fill("out_numel", o0, self.no, self._on, "q")
        if self.ns != s0:
            self._fill("saved_off", s0, self.ns, self._so, "q")
            self._fill("saved_addr", s0, self.ns, self._sa, "q")
        if self.n64 != a0:
            self._fill("v64", a0, self.n64, self._v64, "d")
        if self.n32 != b0:
            self._fill("v32", b0, self.n32, self._v32, None)
        self._new_pending()

    def _fill(self, name, lo, hi, items, code):
        col = getattr(self, name)
        if hi > len(col):
            col = self._grow(name, hi)
        if code is None:  # (struct's float32 raises where numpy rounds to inf)
            col[lo:hi] = items
        else:
            fill(col, lo, items, code)

    # -- the deferred forward -------------------------------------------------------------

    def new_batch(self):
        """Start a batch of deferred ops (tensor.py ``_lazy``): its nodes are numbered from
        ``n``, so the eager pending nodes go to the columns first."""
        if self.n != self.nflushed:
            self.flush()
        # a tape 3/4 full of nodes few tensors hold is swept first, as reserve() does, and
        # made bigger if the sweep leaves it 3/4 full (not after a run: a graph whose root
        # alone is held keeps every node, and a training step's first op restarts the tape)
        if self.n >= 1024 and self.n * 4 >= len(self.op) * 3 and not self.running:
            if self.live < self.n // 4:
                self.compact()
            if self.n * 4 >= len(self.op) * 3:
                self._grow_nodes(len(self.op) * 2)
        self.batch = b = Batch(self)
        return b

    def add_head(self, key, opcode, ip, fp, mask, shapes, kwargs, out, size):
        """A new row head: an op's opcode, interned attributes, saved mask and input count
        as a row of ``heads`` (rows name it by its index). Returns, and keeps in ``fast``
        under ``key`` (and under the key tensor.py's fast paths build for one or two inputs),
        (index, output shape or shapes, store size, several outputs?, the node's input
        shapes as ``meta`` keeps them: one object for all the op's nodes, the saved mask).
        The fast paths' keys: (opcode, shape[, attributes]) for one input, (opcode, shape,
        shape) for two, (opcode, count, shape[, attributes]) for inputs of one shape."""
        ips = self.ip_pool.get(ip)
        if ips is None:
            ips = self._intern(self.ip_pool, ip, "i")
        fps = self.fp_pool.get(fp)
        if fps is None:
            fps = self._intern(self.fp_pool, fp, "f")
        self.heads += (opcode, ips, len(ip), fps, len(fp), mask, len(shapes), size)
        multi = type(out) is tuple and len(out) > 0 and type(out[0]) is tuple
        meta = shapes[0] if len(shapes) == 1 else shapes
        hit = (len(self.heads) // 8 - 1, out, size, multi, meta, mask & 0xFFFF)
        self.fast[key] = hit
        if len(shapes) == 1:
            fk = (opcode, shapes[0], tuple(kwargs.items())) if kwargs else (opcode, shapes[0])
            self.fast[fk] = hit
        elif len(shapes) == 2 and not kwargs:
            self.fast[(opcode, shapes[0], shapes[1])] = hit
        if len(shapes) > 1 and shapes.count(shapes[0]) == len(shapes):
            # an op on a sequence of one shape (stack): the count and the shape
            fk = (opcode, len(shapes), shapes[0])
            self.fast[fk + (tuple(kwargs.items()),) if kwargs else fk] = hit
        return hit

    @_locked
    def run_batch(self):
        """Run the pending batch (graph/deferred.py): values into its store, nodes into the
        columns, then the Python per-node lists."""
        from . import deferred

        b = self.batch
        # no room left in it for the fast paths (tensor.py), then wait for the owner's op that
        # may be adding to it (another thread runs a batch too, holding the lock)
        b.stop = -1
        while b.busy:
            if threading.get_ident() == self.owner:  # (its own op cannot be halfway)
                raise RuntimeError("nautograd internal error: a batch run inside its fast path")
            time.sleep(0)
        self.batch = None
        nodes = self.n - b.n0
        if not nodes and not b.rows:
            return
        rows = np.empty(len(b.rows), np.int64)
        fill(rows, 0, b.rows)
        # the store: the imports' values, then room for the outputs (not copied: the RNN's
        # 64k values of room cost ~0.07 ms a step in a concatenation). The imports are
        # bytes (tensor.py _import_new), joined in one go: np.concatenate of arrays spent
        # ~0.15 us on each of the RNN step's 1,001
        H = np.array(self.heads, np.int64)
        if len(self.heads) > self.heads_loaded:  # (new heads: their ops' lazy kernels)
            load_kernels(H[self.heads_loaded :: deferred.HEAD], LAZY)
            self.heads_loaded = len(self.heads)
        S = np.empty(b.nimp + deferred.store_size(rows, H))
        if b.arrays:
            S[: b.nimp] = np.frombuffer(b"".join(b.arrays), np.float64)
        # room for the nodes, and bounds for their edges, outputs and saved values (each at
        # most one per row element or value)
        grown = self.n + 1 >= len(self.op)
        if grown:
            self._grow_nodes(max(len(self.op) * 2, self.n + 2))
        m = len(rows) + b.nv
        for name, used in (
            ("edge_node", self.ne),
            ("edge_input_nr", self.ne),
            ("out_numel", self.no),
            ("saved_off", self.ns),
            ("saved_addr", self.ns),
        ):
            if used + m > len(getattr(self, name)):
                self._grow(name, used + m)
        while True:
            counts = np.array([b.n0, self.ne, self.no, self.ns, self.n64], np.int64)
            status, voff, sptr, snode, vnode = deferred.run(
                rows, H, b.nv, S, b.nimp, self._nodes,
                self.edge_node, self.edge_input_nr, self.out_numel, self.saved_off,
                self.saved_addr, self.v64, self.iparams, self.fparams, kernel_table(), counts,
            )  # fmt: skip
            if status == deferred.OK:
                break
            if status == deferred.FAILED:
                raise RuntimeError(
                    "nautograd: a deferred forward kernel failed (an index out of bounds in a "
                    "bounds-checked build)"
                )
            self._grow("v64", int(counts[4]))
        self.ne, self.no, self.ns, self.n64 = (int(c) for c in counts[1:])
        self.ran_nv = b.nv
        if nodes:  # (its results' nodes: kept while it lives, see ``batches``)
            self.batches[weakref.ref(b, self._batch_died)] = nodes
        b.S = S
        b.voff = voff
        b.vnode = vnode
        b.base = b.n0  # (vnode's numbering)
        b.sptr = sptr
        self.obj += [None] * nodes
        for node, o in b.objs:
            self.obj[node] = o
        self.meta += b.meta
        self.kwargs.update(b.kwargs)
        self.out_shapes.update(b.out_shapes)
        b.rows = b.arrays = b.meta = b.objs = b.kwargs = b.out_shapes = b.addrs = None
        self._new_pending()
        if b.watch:
            self._note_batch_versions(b.watch, sptr, snode, b.changes0)
        b.watch = None
        b.snode = snode
        b.epoch = self.epoch

    def _note_batch_versions(self, watch, sptr, snode, changes0):
        """Version entries (see ``versions``) for the batch's inputs from outside that its
        nodes saved (``watch``: (version counter, version, array, value id, address) per
        input), as ``tensor._note_versions`` makes for eager nodes. The entry holds the array:
        a node that saved it by address keeps it alive through its entry (released with it,
        engine.py), where an eager node keeps it in ``obj``."""
        vs = np.fromiter((w[3] for w in watch), np.int64, len(watch))
        counts = sptr[vs + 1] - sptr[vs]
        versions = self.versions
        heavy = self.heavy
        for i in np.flatnonzero(counts).tolist():
            vc, version, a, v, addr = watch[i]
            nodes = snode[sptr[v] : sptr[v + 1]].tolist()
            # (the versions were read when the batch was recorded: a change since then,
            # before this run, must make backward check them)
            if not versions or changes0 < self.versions_since:
                self.versions_since = changes0
            # one entry tuple per value, shared by its nodes (never changed in place: a node
            # given another entry gets a new tuple): the RNN's W, saved by address by 1,000
            # nodes a step, took ~0.36 ms a step in a loop over them
            entries = ((vc, version, a),)
            if versions.keys().isdisjoint(nodes):
                versions.update(dict.fromkeys(nodes, entries))
                heavy += nodes  # (dropped when the node is released)
                continue
            for node in nodes:
                kept = versions.get(node)
                if kept is None:
                    versions[node] = entries
                    heavy.append(node)
                else:
                    versions[node] = (*kept, *entries)

    def note_value_versions(self, b, v, vc, a):
        """Version entries for the nodes of the run batch ``b`` that saved its value ``v``,
        now the value of a tensor (counter ``vc``, array ``a``) that can change in place.
        (After a later sweep renumbered the nodes, none: such a change then goes unchecked,
        and the saved copy, the forward's value, enters the gradient.)"""
        if b.epoch != self.epoch:
            return
        s0, s1 = b.sptr[v : v + 2].tolist()
        if s0 == s1:
            return
        versions = self.versions
        for node in b.snode[s0:s1].tolist():
            if node < 0:  # swept
                continue
            if not versions:
                self.versions_since = _in_place_changes()
            entries = versions.get(node)
            if entries is None:
                versions[node] = ((vc, vc[0], a),)
                self.heavy.append(node)  # (dropped when the node is released)
            else:  # (a new tuple: entry tuples are shared, _note_batch_versions)
                versions[node] = (*entries, (vc, vc[0], a))

    def record_accumulate(self, leaf, f32, numel):
        """An AccumulateGrad node for ``leaf`` (no edges, one output: the leaf's gradient)."""
        # a weak reference: the leaf's handle keeps this node alive, so a strong one would keep
        # every leaf ever differentiated alive as long as the thread's tape
        return self._record_accumulate(weakref.ref(leaf), f32, numel)

    def _record_accumulate(self, leaf_ref, f32, numel):
        i = self.record(OP_ACCUMULATE_GRAD, f32, [], [], [numel], (), (), ())
        self._rows[-len(_ROW) + 1] |= ACC  # the flags of the row just appended
        self.metadata.pop(i, None)
        self.obj[i] = leaf_ref
        return i

    def record_python(self, ctx, f32, enodes, enrs, out_numels):
        """A node whose backward runs in Python (a custom Function's ``ctx``, kept in ``obj``):
        flagged PY, with no kernel."""
        i = self.record(OP_PYTHON, f32, enodes, enrs, out_numels, (), (), ())
        self._rows[-len(_ROW) + 1] |= PY
        self.obj[i] = ctx
        self.functions.append(i)
        return i

    # -- handles --------------------------------------------------------------------------

    def new_handle(self, node):
        if self.free_h:
            h = self.free_h.pop()
            self.h2node[h] = node
            return h
        self.h2node.append(node)
        return len(self.h2node) - 1

    def drop_handle(self, h):
        self.h2node[h] = -1
        self.free_h.append(h)  # (with no handle in use, the next reserve() resets the tape)

    @property
    def live(self):
        """Handles in use, plus the nodes of the run batches that deferred results may still
        refer to (``batches``): every handle is in use or in ``free_h``. (Derived, not
        counted: a count kept by every result and every dying tensor cost ~50 ns each, ~1 ms
        of a scalar DAG step's 20,000 results.)"""
        batches = self.batches
        if not batches:
            return len(self.h2node) - len(self.free_h)
        return len(self.h2node) - len(self.free_h) + sum(list(batches.values()))

    def _batch_died(self, ref):
        # (a batch's last result may die on another thread, or in a collection in the middle
        # of this tape's code: the dict's own item operations are atomic, where a count kept
        # beside it, read and written back, could lose an update and let the tape restart
        # under a live batch)
        self.batches.pop(ref, None)

    def new_acc_handle(self, node):
        """A handle for a leaf on its AccumulateGrad ``node`` (``Tensor._acc_h``)."""
        h = self.new_handle(node)
        self.acc_handles[h] = None
        self.acc_live += 1
        return h

    def drop_acc_handle(self, h):
        """Give back a leaf's AccumulateGrad handle. A dying leaf's ``__del__`` calls this on
        any thread: when another thread holds the lock, waiting could deadlock (that thread
        may wait for one this thread holds), so the next ``reserve()`` gives it back."""
        if not self.lock.acquire(blocking=False):
            self._acc_dropped.append(h)
            return
        try:
            self._give_back_acc(h)
        finally:
            self.lock.release()

    def _give_back_acc(self, h):
        del self.acc_handles[h]
        self.acc_live -= 1
        self.drop_handle(h)

    # -- reclamation ----------------------------------------------------------------------

    def reset_keeping_accumulators(self):
        """Start afresh when the only live handles are leaves' (``acc_handles``): their
        AccumulateGrad nodes become nodes 0, 1, ... under the same handles, and every other
        node, which no tensor can reach, is forgotten.

        A training loop's parameters keep such handles from one step to the next, so the plain
        reset (no live handle at all) never came and the tape was swept each time it filled:
        ~6 ms a scalar-DAG iteration of 10,000 ops (of ~165) and ~1 ms an RNN iteration of
        1,000 steps (of ~21), where this costs a few microseconds a leaf."""
        if not self.acc_handles:
            self.reset()
            return
        # (no flush first: every node after the accumulators is dead, and a forward that
        # ran without backward left its nodes pending; flushing them took 10 of the 83 us of
        # a tiny float32 MLP's forward, step after step, A/B in one process. reserve() has
        # run any batch before: a detach_()ed deferred tensor may still need its value)
        if self._truncate_to_accumulators():
            return
        self.flush()
        flags, out_numel, out_ptr, obj, h2node = (
            self.flags,
            self.out_numel,
            self.out_ptr,
            self.obj,
            self.h2node,
        )
        kept = []
        for h in self.acc_handles:
            node = h2node[h]
            kept.append((h, bool(flags[node] & F32), int(out_numel[out_ptr[node]]), obj[node]))
        free_h = self.free_h
        self.reset()
        self.h2node, self.free_h = h2node, free_h
        for h, f32, numel, leaf_ref in kept:
            h2node[h] = self._record_accumulate(leaf_ref, f32, numel)
        # the next restart of the same leaves truncates the tape to these nodes instead
        self.flush()
        self._acc_ck = (
            tuple(self.acc_handles),
            (self.n, self.ne, self.no, self.ns, self.n64, self.n32),
            self._nodes[:, : self.n + 1].copy(),
            self.out_numel[: self.no].copy(),
        )

    def _truncate_to_accumulators(self):
        """``reset_keeping_accumulators`` when the live accumulators are the nodes 0, 1, ...
        that its last restart recorded (a training loop's parameters, step after step): the
        tape is cut back to them and their columns restored, where recording them again cost
        ~2 us a leaf (6 leaves: an MLP step; 100: the scalar DAG). False otherwise."""
        ck = self._acc_ck
        if ck is None:
            return False
        handles, counts, table, out_numel = ck
        k = len(handles)
        if k != len(self.acc_handles) or self.n < k:
            return False
        h2node = self.h2node
        for i, h in enumerate(self.acc_handles):
            if handles[i] != h or h2node[h] != i:
                return False
        obj, meta, free_h = self.obj[:k], self.meta[:k], self.free_h
        self.reset()
        self.h2node, self.free_h = h2node, free_h
        self.obj, self.meta = obj, meta
        self.n, self.ne, self.no, self.ns, self.n64, self.n32 = counts
        self._nodes[:, : k + 1] = table
        self.out_numel[: len(out_numel)] = out_numel
        self._new_pending()
        self._acc_ck = ck
        return True

    def reset(self):
        """Forget every node: called when no tensor references the tape any more.

        The attribute pools and the deferred forward's row heads are kept (nothing in them
        refers to a node): a training step records the same attributes each time, and
        interning them again cost ~1 us an op (the slice write into ``iparams``), 13 us of
        an MLP step. They start afresh once they hold POOL_MAX entries (a program whose
        attributes keep changing)."""
        if self.batches:  # (live counts them: reserve() never resets then)
            raise RuntimeError("nautograd internal error: reset with a live deferred batch")
        self.n = self.ne = self.no = self.ns = self.n64 = self.n32 = 0
        if self.ni > POOL_MAX or self.nf > POOL_MAX or len(self.heads) > POOL_MAX:
            self.ni = self.nf = 0
            self.ip_pool = {(): 0}
            self.fp_pool = {(): 0}
            self.heads = []
            self.heads_loaded = 0
            self.fast = {}
        self.obj = []
        self.meta = []
        self.kwargs = {}
        self.out_shapes = {}
        self.heavy = []
        self.retained = {}
        self.hooks = {}
        self.versions = {}
        self.functions = []
        self.metadata = {}
        self.h2node = []
        self.free_h = []
        self.batch = None  # (no tensor of it is alive)
        self._acc_ck = None  # (see reset_keeping_accumulators)
        self._new_pending()

    def compact(self):
        """Sweep nodes no live tensor can reach; renumber the rest in order (compiled). A live
        run batch keeps all its nodes (its results hold no handle), so they stay one run and
        its first node's new id is all it needs."""
        old = self.columns()
        live_batches = [(ref(), nodes) for ref, nodes in list(self.batches.items())]
        live_batches = [(b, nodes) for b, nodes in live_batches if b is not None]
        roots = np.array([x for x in self.h2node if x >= 0], np.int64)
        if live_batches:
            runs = [np.arange(b.n0, b.n0 + nodes, dtype=np.int64) for b, nodes in live_batches]
            roots = np.concatenate([roots, *runs])
        table = np.zeros_like(self._nodes)
        columns = _node_columns(table)
        new = tuple(
            columns[name] if name in columns else np.zeros_like(a)
            for name, a in zip(_COLS, old, strict=True)
        )
        nv64, nv32 = np.zeros_like(self.v64), np.zeros_like(self.v32)
        newid, counts = _compact(self.n, roots, old, self.v64, self.v32, new, nv64, nv32)
        for name, a in zip(_COLS, new, strict=True):
            setattr(self, name, a)
        self._nodes = table
        self.v64, self.v32 = nv64, nv32
        self.n, self.ne, self.no, self.ns, self.n64, self.n32 = (int(c) for c in counts)
        # Python ints from here on: indexing a numpy array per kept node cost ~0.1 us a read
        ids = newid.tolist()
        kept = np.flatnonzero(newid >= 0).tolist()
        obj = self.obj
        self.obj = [obj[i] for i in kept]
        meta = self.meta
        self.meta = [meta[i] for i in kept]
        self.heavy = [ids[i] for i in self.heavy if ids[i] >= 0]
        for name in (
            "retained",
            "hooks",
            "versions",
            "kwargs",
            "out_shapes",
            "metadata",
        ):  # node -> ...
            d = getattr(self, name)
            if d:
                setattr(self, name, {ids[k]: v for k, v in d.items() if ids[k] >= 0})
        self.functions = [ids[i] for i in self.functions if ids[i] >= 0]
        self.h2node = [ids[x] if x >= 0 else -1 for x in self.h2node]
        for b, _ in live_batches:
            b.n0 = ids[b.n0]
        self._new_pending()
        self.epoch += 1
        return newid


class Batch:
    """The deferred ops of one tape not yet run (graph/deferred.py).

    ``rows``: the flat int rows; ``nv``: values so far (the next value id); ``arrays``:
    copies of the inputs from outside the batch (their offsets follow each other: ``nimp``);
    the store elements the ops write are counted when it runs (deferred.store_size).
    ``meta``, ``objs``, ``kwargs``, ``out_shapes``: what the tape keeps per node in Python.
    After the run: ``S``, the store, ``voff``, each value's offset in it, and ``vnode``, its
    node (counted from ``base``). ``addrs``:
    address -> size of the inputs kept by address (tensor.py _import_new).
    """

    __slots__ = (
        "tape", "n0", "rows", "nv", "arrays", "nimp", "meta", "objs",
        "kwargs", "out_shapes", "watch", "token", "changes0", "S", "voff", "sptr", "snode",
        "epoch", "addrs", "base", "stop", "vnode", "busy", "__weakref__",
    )  # fmt: skip

    def __init__(self, tape):
        self.tape = tape
        # its first node: ``n0`` (moved by compaction) and ``base`` (as it ran: ``vnode``,
        # each value's node, counts from it; tensor.py _force); ``stop``: the node at
        # which it runs (tensor.py sets it)
        self.n0 = self.base = self.stop = tape.n
        # 1 while the owner's fast path (tensor.py) adds an op to it, which takes no lock: it
        # sets this, then tests ``stop``; run_batch sets ``stop`` to -1, then waits for 0
        self.busy = 0
        self.rows = []
        self.nv = 0
        self.arrays = []
        self.nimp = 0
        self.meta = []
        self.objs = []
        # node -> attributes / output shapes: dicts, where (node, value) tuples were one
        # more object per op for the garbage collector to track (the scalar DAG: 7,500; its
        # collections' share of a step went ~3.4 -> ~3.0 ms, near the noise)
        self.kwargs = {}
        self.out_shapes = {}
        self.watch = []
        self.addrs = {}
        # marks the imports into this batch (a tensor's ``_imp``, tensor.py _import_new)
        self.token = object()
        self.changes0 = _in_place_changes()
        self.S = self.voff = self.sptr = self.snode = self.vnode = None
        self.epoch = -1


# in-place changes to any tensor in the process (tensor.py Tensor._bump counts them): a tape
# whose oldest version entry was noted at the current count has no stale entry to check
IN_PLACE_CHANGES = [0]


def _in_place_changes():
    return IN_PLACE_CHANGES[0]


class _State(threading.local):
    # class defaults: getattr(local, name, default) on an unset name raises and catches
    # internally (~0.7 us); a class attribute is found in ~40 ns
    enabled = True
    inference = False
    # ``tape``: this thread's tape, once it has one (current_tape sets it);
    # ``recording``: that tape while grad mode is enabled, else None. The deferred forward's
    # fast paths (tensor.py) test ``recording is x's tape``: one thread-local read for both
    # the thread and the mode, where two took ~60 ns of an op's ~0.6 us. Every write of
    # ``enabled`` writes ``recording`` too, derived from ``tape`` and the new mode (``_set``,
    # or the same two stores where a caller saves and restores the mode: a copy of
    # ``recording`` saved before the thread had a tape would be stale after it).
    tape = None
    recording = None


_state = _State()

# grad mode (autograd/grad_mode.py) and the recording tape, per thread


_local = threading.local()


def recording_on(tape):
    """Make ``tape`` (another thread's, whose lock the caller holds) this thread's tape, for
    a create_graph backward of its graph: the formulas record where the graph is. Returns
    what ``restore_recording`` takes to undo it."""
    before = (getattr(_local, "tape", None), _state.tape)
    _local.tape = _state.tape = tape
    if _state.enabled:
        _state.recording = tape
    return before


def restore_recording(before):
    """Undo ``recording_on``."""
    local, state = before
    if local is None:
        del _local.tape
    else:
        _local.tape = local
    _state.tape = state
    _state.recording = state if _state.enabled else None


def current_tape():
    """This thread's tape."""
    try:
        return _local.tape
    except AttributeError:
        _local.tape = _state.tape = tape = Tape()
        if _state.enabled:
            _state.recording = tape
        return tape
