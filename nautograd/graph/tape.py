"""The per-thread tape: the recorded graph as growable integer arrays, plus a value arena.

Node ids are row numbers and double as PyTorch's ``sequence_nr``: a node's inputs are
recorded before it, so every edge points to a smaller id and descending id order is a
topological order (graph/scheduler.py relies on this; compaction keeps the order).

Columns (numpy arrays grown by doubling)::

    op, flags                         per node
    edge_ptr -> edge_node, edge_input_nr    CSR next edges; edge_node == -1 is a null edge
    out_ptr  -> out_numel             one row per node output (gradient buffer sizes)
    saved_ptr -> saved_off, saved_addr      saved values: offset into v64/v32, or an address
    iparam_ptr -> iparams, fparam_ptr -> fparams   integer / float attributes

Saved values of at most ``SMALL`` elements are copied into the value arena (``v64`` or
``v32``, by the node's dtype); larger ones stay in their numpy array, read by address, and
the array is kept alive in ``obj[node]`` until the node is released or swept.

Python objects a node needs (the leaf of an AccumulateGrad node, arrays saved by address)
live in the list ``obj``. Tensors that point into the tape hold a *handle*; ``h2node`` maps
handles to node ids so compaction can renumber nodes without touching the tensors.
"""

import threading

import numba
import numpy as np

from ..kernels._jit import saved as _saved  # noqa: F401  (documents the saved-value layout)

F32 = 1  # node computes in float32 (its gradients live in the float32 arena)
RELEASED = 2  # saved values were freed by a backward without retain_graph
PY = 4  # the scheduler hands this node to Python (hooks, custom Functions)
ACC = 8  # AccumulateGrad: writes the gradient of a leaf into its .grad
HAS_SAVED = 16  # the node saved values (so running it after release is an error)

OP_ACCUMULATE_GRAD = 0
SMALL = 16  # saved values up to this many elements are copied into the value arena


@numba.njit(cache=True)
def address_of(a):
    return a.ctypes.data


@numba.njit(cache=True)
def _compact(
    n,
    roots,
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
    iparam_ptr,
    iparams,
    fparam_ptr,
    fparams,
    v64,
    v32,
    new_cols,
):
    """Keep the nodes reachable from ``roots``; renumber them in order. Returns new ids."""
    mark = np.zeros(n, np.int8)
    for r in roots:
        mark[r] = 1
    for i in range(n - 1, -1, -1):
        if mark[i]:
            for e in range(edge_ptr[i], edge_ptr[i + 1]):
                if edge_node[e] >= 0:
                    mark[edge_node[e]] = 1
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
        niparam_ptr,
        niparams,
        nfparam_ptr,
        nfparams,
        nv64,
        nv32,
    ) = new_cols
    newid = np.full(n, -1, np.int64)
    k = 0
    ne = no = ns = ni = nf = n64 = n32 = 0
    for i in range(n):
        if not mark[i]:
            continue
        newid[i] = k
        nop[k] = op[i]
        nflags[k] = flags[i]
        for e in range(edge_ptr[i], edge_ptr[i + 1]):
            c = edge_node[e]
            nedge_node[ne] = newid[c] if c >= 0 else -1
            nedge_input_nr[ne] = edge_input_nr[e]
            ne += 1
        for o in range(out_ptr[i], out_ptr[i + 1]):
            nout_numel[no] = out_numel[o]
            no += 1
        # saved numels are not stored: copy the arena run up to the next saved value
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
        for j in range(iparam_ptr[i], iparam_ptr[i + 1]):
            niparams[ni] = iparams[j]
            ni += 1
        for j in range(fparam_ptr[i], fparam_ptr[i + 1]):
            nfparams[nf] = fparams[j]
            nf += 1
        k += 1
        nedge_ptr[k] = ne
        nout_ptr[k] = no
        nsaved_ptr[k] = ns
        niparam_ptr[k] = ni
        nfparam_ptr[k] = nf
    counts = np.array([k, ne, no, ns, ni, nf, n64, n32], np.int64)
    return newid, counts


class Tape:
    """One thread's recorded graph. See the module docstring for the layout."""

    def __init__(self, nodes=1024):
        self._alloc(nodes, nodes * 2, nodes, nodes, nodes * 4, nodes, nodes * 2, 64)
        self.n = self.ne = self.no = self.ns = self.ni = self.nf = self.n64 = self.n32 = 0
        self.obj = []  # per node: None, a leaf Tensor (ACC), or a tuple of kept arrays
        self.h2node = []  # handle -> node id (-1: free)
        self.h2out = []
        self.free_h = []
        self.live = 0  # handles in use
        self.heavy = []  # nodes holding arrays by address, released after backward
        self.retained = {}  # node -> {output_nr: weakref to a tensor that retains grad}
        self.hooks = {}  # node -> {output_nr: (shape, [hook, ...])}: tensor hooks (PY nodes)
        self.generation = 0  # bumped whenever node ids change (reset or compaction)

    def _alloc(self, nodes, edges, outs, saved, ip, fp, v64, v32):
        i8 = np.int64
        self.op = np.zeros(nodes, i8)
        self.flags = np.zeros(nodes, i8)
        self.edge_ptr = np.zeros(nodes + 1, i8)
        self.out_ptr = np.zeros(nodes + 1, i8)
        self.saved_ptr = np.zeros(nodes + 1, i8)
        self.iparam_ptr = np.zeros(nodes + 1, i8)
        self.fparam_ptr = np.zeros(nodes + 1, i8)
        self.edge_node = np.zeros(edges, i8)
        self.edge_input_nr = np.zeros(edges, i8)
        self.out_numel = np.zeros(outs, i8)
        self.saved_off = np.zeros(saved, i8)
        self.saved_addr = np.zeros(saved, i8)
        self.iparams = np.zeros(ip, i8)
        self.fparams = np.zeros(fp, np.float64)
        self.v64 = np.zeros(v64, np.float64)
        self.v32 = np.zeros(v32, np.float32)

    # -- growth ---------------------------------------------------------------------------

    @staticmethod
    def _grown(a, need):
        size = max(len(a) * 2, need)
        b = np.zeros(size, a.dtype)
        b[: len(a)] = a
        return b

    def reserve(self, k):
        """Make room for ``k`` more nodes. Call before computing edges: it may compact."""
        if self.n + k < len(self.op):
            return
        # many nodes but few live handles: most of the tape is unreachable, sweep it
        if self.n >= 1024 and self.live < self.n // 4:
            self.compact()
            if self.n + k < len(self.op) * 3 // 4:
                return
        need = max(len(self.op) * 2, self.n + k + 1)
        for name in ("op", "flags"):
            setattr(self, name, self._grown(getattr(self, name), need))
        for name in ("edge_ptr", "out_ptr", "saved_ptr", "iparam_ptr", "fparam_ptr"):
            setattr(self, name, self._grown(getattr(self, name), need + 1))

    def _grow(self, names, need):
        for name in names:
            setattr(self, name, self._grown(getattr(self, name), need))

    # -- recording ------------------------------------------------------------------------

    def record(self, opcode, f32, edges, out_numels, saved, ip, fp):
        """Append a node; ``edges`` is a sequence of (node, input_nr) with node -1 for null.

        Returns the node id.
        """
        i = self.n
        if i + 1 >= len(self.op):  # callers reserve() first; compaction here would renumber
            raise RuntimeError("internal error: tape.record() without reserve()")
        self.op[i] = opcode
        flags = F32 if f32 else 0
        # edges
        e = self.ne
        k = len(edges)
        if e + k > len(self.edge_node):
            self._grow(("edge_node", "edge_input_nr"), e + k)
        en, ei = self.edge_node, self.edge_input_nr
        for node, nr in edges:
            en[e] = node
            ei[e] = nr
            e += 1
        self.ne = e
        self.edge_ptr[i + 1] = e
        # outputs
        o = self.no
        k = len(out_numels)
        if o + k > len(self.out_numel):
            self._grow(("out_numel",), o + k)
        on = self.out_numel
        for m in out_numels:
            on[o] = m
            o += 1
        self.no = o
        self.out_ptr[i + 1] = o
        # saved values
        keep = None
        s = self.ns
        if saved:
            flags |= HAS_SAVED
            k = len(saved)
            if s + k > len(self.saved_off):
                self._grow(("saved_off", "saved_addr"), s + k)
            for a in saved:
                m = a.size
                if m <= SMALL:
                    if f32:
                        v, off = self.v32, self.n32
                        if off + m > len(v):
                            self._grow(("v32",), off + m)
                            v = self.v32
                        self.n32 = off + m
                    else:
                        v, off = self.v64, self.n64
                        if off + m > len(v):
                            self._grow(("v64",), off + m)
                            v = self.v64
                        self.n64 = off + m
                    if m == 1:
                        v[off] = a.item() if a.ndim else a
                    else:
                        v[off : off + m] = a.ravel()
                    self.saved_off[s] = off
                    self.saved_addr[s] = m  # arena values: the length (used by compaction)
                else:
                    if not a.flags.c_contiguous:
                        a = np.ascontiguousarray(a)
                    self.saved_off[s] = -1
                    self.saved_addr[s] = address_of(a)
                    keep = (a,) if keep is None else keep + (a,)
                s += 1
            self.ns = s
        self.saved_ptr[i + 1] = s
        # attributes
        j = self.ni
        k = len(ip)
        if j + k > len(self.iparams):
            self._grow(("iparams",), j + k)
        if k:
            self.iparams[j : j + k] = ip
        self.ni = j + k
        self.iparam_ptr[i + 1] = j + k
        j = self.nf
        k = len(fp)
        if j + k > len(self.fparams):
            self._grow(("fparams",), j + k)
        if k:
            self.fparams[j : j + k] = fp
        self.nf = j + k
        self.fparam_ptr[i + 1] = j + k
        self.flags[i] = flags
        self.obj.append(keep)
        if keep is not None:
            self.heavy.append(i)
        self.n = i + 1
        return i

    def record_accumulate(self, leaf, f32, numel):
        """An AccumulateGrad node for ``leaf`` (no edges, one output: the leaf's gradient)."""
        i = self.record(OP_ACCUMULATE_GRAD, f32, (), (numel,), (), (), ())
        self.flags[i] |= ACC
        self.obj[i] = leaf
        return i

    # -- handles --------------------------------------------------------------------------

    def new_handle(self, node):
        self.live += 1
        if self.free_h:
            h = self.free_h.pop()
            self.h2node[h] = node
            return h
        self.h2node.append(node)
        return len(self.h2node) - 1

    def drop_handle(self, h):
        self.h2node[h] = -1
        self.free_h.append(h)
        self.live -= 1
        if self.live == 0:
            self.reset()

    # -- reclamation ----------------------------------------------------------------------

    def reset(self):
        """Forget every node: called when no tensor references the tape any more."""
        self.n = self.ne = self.no = self.ns = self.ni = self.nf = self.n64 = self.n32 = 0
        self.obj = []
        self.heavy = []
        self.retained = {}
        self.hooks = {}
        self.h2node = []
        self.free_h = []
        self.generation += 1

    def compact(self):
        """Sweep nodes no live tensor can reach; renumber the rest in order (compiled)."""
        roots = np.array([x for x in self.h2node if x >= 0], np.int64)
        old = (
            self.op,
            self.flags,
            self.edge_ptr,
            self.edge_node,
            self.edge_input_nr,
            self.out_ptr,
            self.out_numel,
            self.saved_ptr,
            self.saved_off,
            self.saved_addr,
            self.iparam_ptr,
            self.iparams,
            self.fparam_ptr,
            self.fparams,
            self.v64,
            self.v32,
        )
        new = tuple(np.zeros_like(a) for a in old)
        newid, counts = _compact(self.n, roots, *old, new)
        (
            self.op,
            self.flags,
            self.edge_ptr,
            self.edge_node,
            self.edge_input_nr,
            self.out_ptr,
            self.out_numel,
            self.saved_ptr,
            self.saved_off,
            self.saved_addr,
            self.iparam_ptr,
            self.iparams,
            self.fparam_ptr,
            self.fparams,
            self.v64,
            self.v32,
        ) = new
        (self.n, self.ne, self.no, self.ns, self.ni, self.nf, self.n64, self.n32) = (
            int(c) for c in counts
        )
        kept = np.flatnonzero(newid >= 0)
        obj = self.obj
        self.obj = [obj[i] for i in kept]
        self.heavy = [int(newid[i]) for i in self.heavy if newid[i] >= 0]
        self.retained = {int(newid[k]): v for k, v in self.retained.items() if newid[k] >= 0}
        self.hooks = {int(newid[k]): v for k, v in self.hooks.items() if newid[k] >= 0}
        ids = newid.tolist()
        self.h2node = [ids[x] if x >= 0 else -1 for x in self.h2node]
        self.generation += 1


_local = threading.local()


def current_tape():
    """This thread's tape."""
    try:
        return _local.tape
    except AttributeError:
        _local.tape = tape = Tape()
        return tape
