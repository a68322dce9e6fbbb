"""The deferred forward's compiled half: runs a batch of recorded ops and writes their nodes.

An op on small float64 tensors (tensor.py ``_lazy``) does not compute its result: Python
appends one row to the tape's batch and returns a tensor whose value is not there yet. When
something needs a value or the graph (reading a tensor's data, backward, another op that
runs eagerly), ``run`` walks the rows in order: it computes each op's outputs into one value
store with the op's compiled ``lazy`` forward (kernels/, registry.Op.lazy), and writes the
op's tape node (edges, output sizes, saved values copied into the arena, attributes) as the
eager ``Tape.record_node`` would have. Python's share of an op is then ~1 us where the eager
forward and its node cost 5-8 us (docs/architecture.md, "The deferred forward").

Rows (int64, flat):

    -1, offset, numel, node, input_nr, address
                                          an input from outside the batch: its value sits at
                                          ``offset`` of ``S`` (copied there when recorded);
                                          node -1 for a constant; a node that saves it keeps
                                          it by ``address`` (its array's, kept alive by
                                          Python), or copies it into the arena (address 0)
    -2, numel                             an AccumulateGrad node (a leaf first used here)
    head, v_1 .. v_k                      an op on values v_1..v_k (value ids count the
                                          imports and every op's outputs, in row order);
                                          ``head``: its row of ``H`` (8 ints: opcode,
                                          attribute starts and lengths, the mask of its
                                          saved values (registry.Op.lazy), k, the store
                                          elements it writes)
"""

import numpy as np

from .._numba_setup import cached
from ..kernels._jit import KERNEL, LAZY, LAZY_ARGS, call_address2
from .tape import ACC, HAS_SAVED

OK = 0
FAILED = 2  # a kernel raised (only a bounds-checked build raises)
HEAD = 8  # ints in a row head (Tape.add_head)
GROW = 1  # the arena v64 is too small: counts[4] says how many values it needs
MAX_OUT = 4097  # outputs of one op (unbind of up to 4,096 elements)


# The kernels' flags (kernels/_jit.py KERNEL), as the lazy forwards it calls have: a division
# by zero gives inf/nan, as the eager forward and torch do.
@cached(error_model=KERNEL["error_model"], fastmath=KERNEL["fastmath"])
def run(rows, H, nv, S, ne0, T, edge_node, edge_input_nr, out_numel, saved_off, saved_addr,
        v64, iparams, fparams, table, counts):  # fmt: skip
    """Run the batch ``rows`` (see the module docstring); ``nv`` values; ``S``: the store,
    the imports' values in its first ``ne0`` elements, then room for every op's outputs
    (allocated by Python: numpy's own float64 dtype, which tensor.py compares by identity,
    where an array made here has a dtype object of its own). ``T``: the tape's node table
    (node i in column i + 1); ``counts`` = (first node, edges, outputs, saved values,
    arena values) on entry, their new ends on return (on GROW, counts[4] is the arena
    length it needs). Returns
    (status, value offsets, sptr, snode, vnode): the nodes that saved value v are
    snode[sptr[v]:sptr[v + 1]] (tensor.py notes their versions when v's tensor gets its
    value, so that an in-place change raises in backward as in torch); vnode[v] is the
    node of value v (an op's output: its op's node, numbered from counts[0]). ``table``:
    the compiled kernels' table (kernels/registry.py), whose lazy column has the entry of
    every op in the batch (tape.py loads them before)."""
    voff = np.empty(nv, np.int64)
    vnum = np.empty(nv, np.int64)
    vnode = np.empty(nv, np.int64)
    vnr = np.empty(nv, np.int64)
    vaddr = np.zeros(nv, np.int64)
    xo = np.empty(rows.shape[0] + 1, np.int64)
    xn = np.empty(rows.shape[0] + 1, np.int64)
    xv = np.empty(rows.shape[0] + 1, np.int64)
    # (value, node) for each value a node saved, for the version checks (see the end)
    sv_val = np.empty(rows.shape[0] + nv, np.int64)
    sv_node = np.empty(rows.shape[0] + nv, np.int64)
    nsv = 0
    oo = np.empty(MAX_OUT, np.int64)
    on = np.empty(MAX_OUT, np.int64)
    node, ne, no, ns, n64 = counts[0], counts[1], counts[2], counts[3], counts[4]
    v = 0
    top = ne0
    r = 0
    nrows = rows.shape[0]
    # the kernels are called through their entries' addresses (kernels/_jit.py LAZY_ARGS),
    # their arguments by address; the arrays stay alive: they are used after the loop
    args = np.empty(LAZY_ARGS, np.int64)
    a_addr = np.int64(args.ctypes.data)
    s_addr = np.int64(S.ctypes.data)
    ip_addr = np.int64(iparams.ctypes.data)
    fp_addr = np.int64(fparams.ctypes.data)
    args[0] = np.int64(xo.ctypes.data)
    args[1] = len(xo)
    args[2] = np.int64(xn.ctypes.data)
    args[3] = len(xn)
    args[8] = np.int64(oo.ctypes.data)
    args[9] = MAX_OUT
    args[10] = np.int64(on.ctypes.data)
    args[11] = MAX_OUT
    args[14] = len(S)
    while r < nrows:
        op = rows[r]
        if op == -1:
            voff[v] = rows[r + 1]
            vnum[v] = rows[r + 2]
            vnode[v] = rows[r + 3]
            vnr[v] = rows[r + 4]
            vaddr[v] = rows[r + 5]
            v += 1
            r += 6
            continue
        c = node + 1
        if op == -2:
            T[0, c] = 0
            T[1, c] = ACC
            T[2, c] = 0
            T[3, c] = 0
            T[4, c] = 0
            T[5, c] = 0
            out_numel[no] = rows[r + 1]
            no += 1
            T[6, c] = ne
            T[7, c] = no
            T[8, c] = ns
            node += 1
            r += 2
            continue
        h = op * HEAD
        op, ips, ipl, fps, fpl, mask, k = (
            H[h],
            H[h + 1],
            H[h + 2],
            H[h + 3],
            H[h + 4],
            H[h + 5],
            H[h + 6],
        )
        for j in range(k):
            w = rows[r + 1 + j]
            xo[j] = voff[w]
            xn[j] = vnum[w]
            xv[j] = w
            edge_node[ne] = vnode[w]
            edge_input_nr[ne] = vnr[w]
            ne += 1
        r += 1 + k
        args[4] = ip_addr + 8 * ips
        args[5] = ipl
        args[6] = fp_addr + 8 * fps
        args[7] = fpl
        args[12] = k
        args[13] = top
        nout = call_address2(table[op, LAZY], a_addr, s_addr)
        if nout < 0:
            return FAILED, voff, sv_val, sv_node, vnode
        for j in range(nout):
            voff[v] = oo[j]
            vnum[v] = on[j]
            vnode[v] = node
            vnr[v] = j
            v += 1
            out_numel[no] = on[j]
            no += 1
            if oo[j] + on[j] > top:
                top = oo[j] + on[j]
        flags = 0
        if mask:
            flags = HAS_SAVED
            for j in range(k + nout):
                if j < k:
                    if not (mask >> j) & 1:
                        continue
                    a, m = xo[j], xn[j]
                    sv_val[nsv] = xv[j]
                    if vaddr[xv[j]]:  # by address, as Tape.record_node keeps big values
                        sv_node[nsv] = node
                        nsv += 1
                        saved_off[ns] = -1
                        saved_addr[ns] = vaddr[xv[j]]
                        ns += 1
                        continue
                else:
                    if not (mask >> (16 + j - k)) & 1:
                        continue
                    a, m = oo[j - k], on[j - k]
                    sv_val[nsv] = v - nout + j - k
                sv_node[nsv] = node
                nsv += 1
                if n64 + m > v64.shape[0]:
                    counts[4] = n64 + m + (nrows + 1) * 16
                    return GROW, voff, sv_val, sv_node, vnode
                saved_off[ns] = n64
                saved_addr[ns] = m  # arena values: the length (as Tape.record_node)
                for i in range(m):  # (a slice assignment counts two owners)
                    v64[n64 + i] = S[a + i]
                n64 += m
                ns += 1
        T[0, c] = op
        T[1, c] = flags
        T[2, c] = ips
        T[3, c] = ipl
        T[4, c] = fps
        T[5, c] = fpl
        T[6, c] = ne
        T[7, c] = no
        T[8, c] = ns
        node += 1
    counts[0], counts[1], counts[2], counts[3], counts[4] = node, ne, no, ns, n64
    xo[0] = xn[0] = oo[0] = on[0] = args[0] = 0  # keeps the owned scratch alive until here
    # the nodes that saved each value, by value: sptr[v]..sptr[v + 1] in snode
    sptr = np.zeros(nv + 1, np.int64)
    for i in range(nsv):
        sptr[sv_val[i] + 1] += 1
    for i in range(nv):
        sptr[i + 1] += sptr[i]
    snode = np.empty(nsv, np.int64)
    fill = sptr[:nv].copy()
    for i in range(nsv):
        snode[fill[sv_val[i]]] = sv_node[i]
        fill[sv_val[i]] += 1
    return OK, voff, sptr, snode, vnode


@cached()
def store_size(rows, H):
    """The store elements the op rows of ``rows`` write (their heads' last int): counted
    here, once a batch, where each op counting it in Python cost an int object (~25 ns)."""
    size = 0
    r = 0
    while r < rows.shape[0]:
        op = rows[r]
        if op == -1:
            r += 6
        elif op == -2:
            r += 2
        else:
            size += H[op * HEAD + 7]
            r += 1 + H[op * HEAD + 6]
    return size
