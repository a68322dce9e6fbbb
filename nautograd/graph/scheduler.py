"""The compiled backward engine (PyTorch's Engine::execute) over the tape's arrays.

``prepare`` finds what a backward must run and lays out the gradient buffers; ``run`` walks
the nodes and dispatches each to its op's compiled kernel. Both are ``@njit(cache=True)``.

Order: PyTorch pops the ready node with the largest sequence_nr. On the tape every edge goes
to a smaller id (ids are sequence numbers), so when the largest unprocessed reachable node is
considered, all its consumers have run: it is ready, and it is the largest ready node. A
descending scan over ids therefore visits nodes in exactly the ready-heap order, at ~1 ns a
node instead of ~130 ns for a heap push+pop (docs/architecture.md). AccumulateGrad nodes have the
largest priority in PyTorch (they run as soon as ready); they do no compiled work here, the
engine applies them in Python after ``run`` returns (see autograd/engine.py).

Gradient buffers (PyTorch's InputBuffer) are slices of one zero-filled arena per dtype,
``G64`` and ``G32``, one slice per output of every node that runs; kernels add into the
slices of their inputs' producers, so summing over several edges needs no bookkeeping.

Resumable: a node flagged PY (Python hooks, custom Functions) makes ``run`` return its id.
Python runs it on views of the buffers and calls ``run`` again from where it stopped; all
state lives in arrays that Python owns. A graph without such nodes makes one call.
"""

import numba
import numpy as np

from .._numba_setup import cached
from ..kernels._jit import BACKWARD_ARGS, borrow, call_address, view
from .tape import ACC, F32, HAS_SAVED, PY, RELEASED  # noqa: F401

DONE = -1
ERR_RELEASED = -2
ERR_KERNEL = -(1 << 40)  # run returns ERR_KERNEL - i: node i's kernel is not loaded, or raised
PAR = 1 << 40  # run returns PAR + i: run node i in parts on the intra-op threads
# a node of a parallel kernel runs in parts from this many gradient elements (as the
# row loops of the forward, nautograd/_threads.py ROWS_MIN: below it the hand-off, ~40 us
# on the 2-core VM plus this return to Python, costs more. Backward alone at 300,000 float64
# elements, two threads against one: exp 188 against 130 us, a row sum 145 against 63,
# log_softmax 286 against 322; at 1,200,000 two threads win every one, 1.2-2.9x)
PAR_MIN = 1 << 19


@numba.njit(inline="always")
def _place(o, f32, out_numel, buf_off, n64, n32):
    """Give output slot ``o`` the next buffer of its dtype's arena; returns the new ends."""
    if f32:
        buf_off[o] = n32
        return n64, n32 + out_numel[o]
    buf_off[o] = n64
    return n64 + out_numel[o], n32


@cached()
def prepare(
    n,
    roots,
    targets,
    mode,
    flags,
    edge_ptr,
    edge_node,
    edge_input_nr,
    out_ptr,
    out_numel,
    big,
    op,
    table,
):
    """Reachability, selective execution and buffer layout for one backward.

    ``mode`` 0: every node reachable from the roots runs (``backward()``). ``mode`` 1: only
    nodes on a path from a root to a target run (``inputs=`` / ``grad()``; PyTorch's
    exec_info); targets get buffers so their gradients can be captured.

    Returns (state, buf_off, n64, n32, tails, leaves, need): ``state[i]`` is 1 for a node
    that runs, 2 for a target that does not run, 0 otherwise; ``buf_off[out_ptr[i] + k]``
    the offset of the buffer of node i's output k in the arena of node i's dtype (-1: none);
    ``n64``/``n32`` the sizes the gradient arenas need; ``tails`` where the AccumulateGrad
    buffers start; ``leaves`` the AccumulateGrad nodes that run; ``need`` how many nodes
    that run have no compiled kernel in ``table`` yet (kernels/registry.py).
    """
    top = -1
    for r in roots:
        top = max(top, r)
    reach = np.zeros(n, np.int8)
    for r in roots:
        reach[r] = 1
    for i in range(top, -1, -1):
        if reach[i]:
            for e in range(edge_ptr[i], edge_ptr[i + 1]):
                c = edge_node[e]
                if c >= 0:
                    reach[c] = 1
    if mode == 0:
        state = reach  # every reachable node runs
    else:
        state = np.zeros(n, np.int8)
        tgt = np.zeros(n, np.int8)
        for t in targets:
            tgt[t] = 1
        for i in range(top + 1):  # children (smaller ids) are decided first
            if reach[i]:
                for e in range(edge_ptr[i], edge_ptr[i + 1]):
                    c = edge_node[e]
                    if c >= 0 and state[c] != 0:
                        state[i] = 1
                        break
                if state[i] == 0 and tgt[i]:
                    state[i] = 2
    buf_off = np.full(out_ptr[n], -1, np.int64)
    n64 = 0
    n32 = 0
    # one pass lays out every buffer but the AccumulateGrad ones and collects those nodes;
    # their buffers go last in each arena, so the leaves' gradients are one contiguous tail
    # that the engine copies once (tails[0], tails[1]: where they start)
    acc = np.empty(top + 1, np.int64)
    count = 0
    need = 0
    for i in range(top + 1):
        if state[i]:
            if flags[i] & ACC:
                acc[count] = i
                count += 1
                continue
            if state[i] == 1 and op[i] > 0 and table[op[i], 1 if flags[i] & F32 else 0] == 0:
                need += 1
            for o in range(out_ptr[i], out_ptr[i + 1]):
                n64, n32 = _place(o, flags[i] & F32, out_numel, buf_off, n64, n32)
    # leaves of ``big`` elements or more come first: the engine may give them buffers of
    # their own (their new .grad), so the tail it copies holds only the small ones
    for k in range(count):
        i = acc[k]
        if out_numel[out_ptr[i]] >= big:
            n64, n32 = _place(out_ptr[i], flags[i] & F32, out_numel, buf_off, n64, n32)
    tails = np.array([n64, n32], np.int64)
    running = 0
    for k in range(count):
        i = acc[k]
        if out_numel[out_ptr[i]] < big:
            n64, n32 = _place(out_ptr[i], flags[i] & F32, out_numel, buf_off, n64, n32)
        if state[i] == 1:
            acc[running] = i
            running += 1
    leaves = acc[:running].copy()
    return state, buf_off, n64, n32, tails, leaves, need


@cached()
def locate(state, flags, out_ptr, buf_off, base64, base32):
    """Slot of every buffer: its address in units of its dtype's size (see kernels/_jit.view);
    ``base64``/``base32`` are the arenas' slots. -1 where a node has no buffer."""
    slot = np.full(len(buf_off), -1, np.int64)
    for i in range(len(state)):
        if state[i]:
            base = base32 if flags[i] & F32 else base64
            for o in range(out_ptr[i], out_ptr[i + 1]):
                if buf_off[o] >= 0:
                    slot[o] = base + buf_off[o]
    return slot


@numba.njit(inline="always")
def _zero(G64, G32, f32, slot, n):
    if f32:
        view(G32, slot, n)[:] = 0
    else:
        view(G64, slot, n)[:] = 0


@cached(nogil=True)
def run(
    start,
    retain,
    state,
    slot,
    fresh,
    out_numel,
    G64,
    G32,
    op,
    flags,
    edge_ptr,
    edge_node,
    edge_input_nr,
    out_ptr,
    saved_ptr,
    saved_off,
    saved_addr,
    ip_start,
    ip_len,
    iparams,
    fp_start,
    fp_len,
    fparams,
    V64,
    V32,
    table,
    skip_py,
    parts,
    pend,
    part_node,
):
    """Run nodes from ``start`` down to 0. Returns DONE, a PY node's id, ``PAR + i`` for a
    node to run in parts, or an error code.

    ``skip_py``: run node ``start`` natively even if flagged PY (Python ran its hooks).
    ``parts``: how many threads a large node of a kernel marked ``_jit.parallel`` may use;
    such a node (at least ``PAR_MIN`` gradient elements) is handed back to Python as
    ``PAR + i`` with its ``gi`` stored in ``pend`` (``pend[0]`` = its input count k,
    ``pend[1 : 2k + 3]`` = gi), and Python calls ``run`` once per part, from its threads, with
    ``part_node = i`` and ``pend`` holding that part's ``gi`` (the last two entries: p, P).
    A part call runs only that node's kernel. ``part_node = -1``: an ordinary call.
    ``table``: the compiled kernels' table (kernels/registry.py ``kernel_table``); each node's
    kernel is called through its entry's address there.
    Error codes: ``ERR_RELEASED - i``: node i's saved values were freed; ``ERR_KERNEL - i``:
    node i's kernel is not loaded, or raised (a bounds-checked build).
    """
    width = 0
    if part_node < 0:
        for i in range(start + 1):
            if state[i] == 1:
                width = max(width, edge_ptr[i + 1] - edge_ptr[i])
    # gi[j]: the slot of input j's buffer (-1: none); gi[k + j]: 1 if the kernel is that
    # buffer's first writer and assigns (kernels/_jit.assigning), else 0; gi[2k], gi[2k + 1]:
    # the part p of P this call runs (kernels/_jit.parallel)
    gi_owned = np.empty(2 * width + 2, np.int64)
    gi_all = borrow(gi_owned)
    G64 = borrow(G64)
    G32 = borrow(G32)
    # the kernel's arguments, by address (kernels/_jit.py BACKWARD_ARGS)
    args = np.empty(BACKWARD_ARGS, np.int64)
    a_addr = np.int64(args.ctypes.data)
    slot_addr = np.int64(slot.ctypes.data)
    gi_addr = np.int64(gi_owned.ctypes.data)
    pend_addr = np.int64(pend.ctypes.data)
    so_addr = np.int64(saved_off.ctypes.data)
    sa_addr = np.int64(saved_addr.ctypes.data)
    ip_addr = np.int64(iparams.ctypes.data)
    fp_addr = np.int64(fparams.ctypes.data)
    v64_addr = np.int64(V64.ctypes.data)
    v32_addr = np.int64(V32.ctypes.data)
    i = part_node if part_node >= 0 else start
    while i >= 0:
        f = flags[i]
        if part_node >= 0:
            k = pend[0]
            gi = pend[1 : 2 * k + 3]
        else:
            if state[i] != 1 or f & ACC:
                i -= 1
                continue
            # Python first sees a PY node's outputs with ``fresh`` intact: an output no
            # consumer wrote is an undefined gradient (None for a custom Function that does
            # not materialize grads); Python zeroes what it reads
            if f & PY and not (skip_py and i == start):
                return i
            # a buffer no consumer wrote (all of them skip this input) reads as zeros
            work = 0
            for o in range(out_ptr[i], out_ptr[i + 1]):
                work = max(work, out_numel[o])
                if fresh[o]:
                    _zero(G64, G32, f & F32, slot[o], out_numel[o])
                    fresh[o] = 0
            if f & RELEASED and f & HAS_SAVED:
                return ERR_RELEASED - i
            e0 = edge_ptr[i]
            k = edge_ptr[i + 1] - e0
            gi = gi_all[: 2 * k + 2]
            assigns = table[op[i], 3]
            for j in range(k):
                c = edge_node[e0 + j]
                gi[k + j] = 0
                if c >= 0 and state[c]:
                    o = out_ptr[c] + edge_input_nr[e0 + j]
                    gi[j] = slot[o]
                    work = max(work, out_numel[o])
                    if fresh[o]:
                        fresh[o] = 0
                        if assigns:
                            gi[k + j] = 1
                        else:
                            _zero(G64, G32, flags[c] & F32, slot[o], out_numel[o])
                else:
                    gi[j] = -1
            gi[2 * k] = 0
            gi[2 * k + 1] = 1
            if parts > 1 and work >= PAR_MIN and table[op[i], 4] and 2 * k + 3 <= len(pend):
                pend[0] = k
                pend[1 : 2 * k + 3] = gi
                return PAR + i
        f32 = f & F32
        entry = table[op[i], 1 if f32 else 0]
        if entry == 0:
            return ERR_KERNEL - i
        args[0] = slot_addr + 8 * out_ptr[i]
        args[1] = out_ptr[i + 1] - out_ptr[i]
        args[2] = pend_addr + 8 if part_node >= 0 else gi_addr
        args[3] = 2 * k + 2
        args[4] = so_addr + 8 * saved_ptr[i]
        args[5] = saved_ptr[i + 1] - saved_ptr[i]
        args[6] = sa_addr + 8 * saved_ptr[i]
        args[7] = args[5]
        args[8] = ip_addr + 8 * ip_start[i]
        args[9] = ip_len[i]
        args[10] = fp_addr + 8 * fp_start[i]
        args[11] = fp_len[i]
        if f32:
            args[12] = len(V32)
            status = call_address(entry, a_addr, v32_addr, v64_addr)
        else:
            args[12] = len(V64)
            status = call_address(entry, a_addr, v64_addr, v32_addr)
        if status < 0:
            return ERR_KERNEL - i
        if part_node >= 0:
            return DONE
        if not retain:
            flags[i] = f | RELEASED
        i -= 1
    # buffers Python reads that no kernel wrote (leaves, targets) hold zeros
    for i in range(len(state)):
        if state[i]:
            for o in range(out_ptr[i], out_ptr[i + 1]):
                if fresh[o]:
                    _zero(G64, G32, flags[i] & F32, slot[o], out_numel[o])
                    fresh[o] = 0
    gi_owned[0] = args[0] = 0  # keeps the owned scratch alive until here
    return DONE
