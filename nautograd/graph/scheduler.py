"""The compiled backward engine (PyTorch's Engine::execute) over the tape's arrays.

``prepare`` finds what a backward must run and lays out the gradient buffers; ``run`` walks
the nodes and dispatches each to its op's compiled kernel. Both are ``@njit(cache=True)``.

Order: PyTorch pops the ready node with the largest sequence_nr. On the tape every edge goes
to a smaller id (ids are sequence numbers), so when the largest unprocessed reachable node is
considered, all its consumers have run: it is ready, and it is the largest ready node. A
descending scan over ids therefore visits nodes in exactly the ready-heap order, at ~1 ns a
node instead of ~130 ns for a heap push+pop (DESIGN-NOTES.md). AccumulateGrad nodes have the
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

from ..kernels._jit import borrow, view
from .tape import ACC, F32, HAS_SAVED, PY, RELEASED  # noqa: F401

DONE = -1
ERR_RELEASED = -2
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


@numba.njit(cache=True)
def prepare(
    n, roots, targets, mode, flags, edge_ptr, edge_node, edge_input_nr, out_ptr, out_numel, big
):
    """Reachability, selective execution and buffer layout for one backward.

    ``mode`` 0: every node reachable from the roots runs (``backward()``). ``mode`` 1: only
    nodes on a path from a root to a target run (``inputs=`` / ``grad()``; PyTorch's
    exec_info); targets get buffers so their gradients can be captured.

    Returns (state, buf_off, n64, n32, tails, leaves): ``state[i]`` is 1 for a node that runs, 2 for
    a target that does not run, 0 otherwise; ``buf_off[out_ptr[i] + k]`` the offset of the
    buffer of node i's output k in the arena of node i's dtype (-1: none); ``n64``/``n32``
    the sizes the gradient arenas need; ``tails`` where the AccumulateGrad buffers start;
    ``leaves`` the AccumulateGrad nodes that run.
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
    for i in range(top + 1):
        if state[i]:
            if flags[i] & ACC:
                acc[count] = i
                count += 1
                continue
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
    return state, buf_off, n64, n32, tails, leaves


@numba.njit(cache=True)
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


@numba.njit(cache=True, nogil=True)
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
    Error codes: ``ERR_RELEASED - i``: node i's saved values were freed.
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
    V64 = borrow(V64)
    V32 = borrow(V32)
    slot_b = borrow(slot)
    iparams = borrow(iparams)
    fparams = borrow(fparams)
    saved_off = borrow(saved_off)
    saved_addr = borrow(saved_addr)
    # one loop, one call site of the (inlined) dispatch chain for both kinds of call: a
    # second site would compile every kernel into ``run`` twice
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
            assigns = _ASSIGNS[op[i]]
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
            if parts > 1 and work >= PAR_MIN and _PARALLEL[op[i]] and 2 * k + 3 <= len(pend):
                pend[0] = k
                pend[1 : 2 * k + 3] = gi
                return PAR + i
        go = slot_b[out_ptr[i] : out_ptr[i + 1]]
        ip = iparams[ip_start[i] : ip_start[i] + ip_len[i]]
        fp = fparams[fp_start[i] : fp_start[i] + fp_len[i]]
        so = saved_off[saved_ptr[i] : saved_ptr[i + 1]]
        sa = saved_addr[saved_ptr[i] : saved_ptr[i + 1]]
        _dispatch(op[i], f & F32, G64, G32, go, gi, V64, V32, so, sa, ip, fp)
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
    gi_owned[0] = 0  # keeps the owned scratch alive until here
    return DONE


# BEGIN GENERATED DISPATCH (python -m nautograd.graph._codegen; do not edit by hand)
# sources hash: 0e6da6f2ce716db6
from ..kernels.registry import OPS as _OPS  # noqa: E402

_k1 = _OPS[0].backward  # mul
_k2 = _OPS[1].backward  # div
_k3 = _OPS[2].backward  # maximum
_k4 = _OPS[3].backward  # minimum
_k5 = _OPS[4].backward  # add
_k6 = _OPS[5].backward  # sub
_k7 = _OPS[6].backward  # where
_k8 = _OPS[7].backward  # _to_copy
_k9 = _OPS[8].backward  # clone
_k16 = _OPS[15].backward  # _index_view
_k17 = _OPS[16].backward  # _index_take
_k18 = _OPS[17].backward  # expand
_k19 = _OPS[18].backward  # broadcast_to
_k20 = _OPS[19].backward  # flip
_k21 = _OPS[20].backward  # narrow
_k22 = _OPS[21].backward  # diagonal
_k23 = _OPS[22].backward  # movedim
_k24 = _OPS[23].backward  # unfold
_k25 = _OPS[24].backward  # _windows
_k26 = _OPS[25].backward  # roll
_k27 = _OPS[26].backward  # repeat
_k28 = _OPS[27].backward  # tile
_k29 = _OPS[28].backward  # index_select
_k30 = _OPS[29].backward  # gather
_k31 = _OPS[30].backward  # take_along_dim
_k32 = _OPS[31].backward  # masked_fill
_k33 = _OPS[32].backward  # tril
_k34 = _OPS[33].backward  # triu
_k35 = _OPS[34].backward  # diag
_k36 = _OPS[35].backward  # pad
_k37 = _OPS[36].backward  # scatter_add
_k38 = _OPS[37].backward  # sum
_k39 = _OPS[38].backward  # mean
_k40 = _OPS[39].backward  # prod
_k41 = _OPS[40].backward  # amax
_k42 = _OPS[41].backward  # amin
_k43 = _OPS[42].backward  # var
_k44 = _OPS[43].backward  # std
_k45 = _OPS[44].backward  # vector_norm
_k46 = _OPS[45].backward  # norm
_k47 = _OPS[46].backward  # _take_flat
_k48 = _OPS[47].backward  # cumsum
_k49 = _OPS[48].backward  # cumprod
_k50 = _OPS[49].backward  # logcumsumexp
_k53 = _OPS[52].backward  # max
_k54 = _OPS[53].backward  # min
_k58 = _OPS[57].backward  # reshape
_k59 = _OPS[58].backward  # view
_k60 = _OPS[59].backward  # flatten
_k61 = _OPS[60].backward  # unsqueeze
_k62 = _OPS[61].backward  # squeeze
_k63 = _OPS[62].backward  # permute
_k64 = _OPS[63].backward  # transpose
_k65 = _OPS[64].backward  # t
_k66 = _OPS[65].backward  # cat
_k67 = _OPS[66].backward  # stack
_k68 = _OPS[67].backward  # unbind
_k69 = _OPS[68].backward  # select
_k70 = _OPS[69].backward  # matmul
_k71 = _OPS[70].backward  # mm
_k72 = _OPS[71].backward  # bmm
_k73 = _OPS[72].backward  # mv
_k74 = _OPS[73].backward  # dot
_k75 = _OPS[74].backward  # outer
_k76 = _OPS[75].backward  # inverse
_k77 = _OPS[76].backward  # det
_k78 = _OPS[77].backward  # _logabsdet
_k80 = _OPS[79].backward  # cholesky
_k81 = _OPS[80].backward  # solve
_k82 = _OPS[81].backward  # softmax
_k83 = _OPS[82].backward  # log_softmax
_k84 = _OPS[83].backward  # logsumexp
_k85 = _OPS[84].backward  # convolution
_k86 = _OPS[85].backward  # neg
_k87 = _OPS[86].backward  # abs
_k88 = _OPS[87].backward  # sqrt
_k89 = _OPS[88].backward  # exp
_k90 = _OPS[89].backward  # log
_k91 = _OPS[90].backward  # log1p
_k92 = _OPS[91].backward  # expm1
_k93 = _OPS[92].backward  # sin
_k94 = _OPS[93].backward  # cos
_k95 = _OPS[94].backward  # tanh
_k96 = _OPS[95].backward  # sigmoid
_k97 = _OPS[96].backward  # relu
_k98 = _OPS[97].backward  # softplus
_k99 = _OPS[98].backward  # pow_scalar
_k100 = _OPS[99].backward  # rpow
_k101 = _OPS[100].backward  # pow
_k102 = _OPS[101].backward  # clamp
_k103 = _OPS[102].backward  # reciprocal
_k104 = _OPS[103].backward  # rsqrt
_k105 = _OPS[104].backward  # square
_k106 = _OPS[105].backward  # exp2
_k107 = _OPS[106].backward  # log2
_k108 = _OPS[107].backward  # log10
_k109 = _OPS[108].backward  # tan
_k110 = _OPS[109].backward  # asin
_k111 = _OPS[110].backward  # acos
_k112 = _OPS[111].backward  # atan
_k113 = _OPS[112].backward  # sinh
_k114 = _OPS[113].backward  # cosh
_k115 = _OPS[114].backward  # asinh
_k116 = _OPS[115].backward  # acosh
_k117 = _OPS[116].backward  # atanh
_k118 = _OPS[117].backward  # erf
_k119 = _OPS[118].backward  # erfc
_k120 = _OPS[119].backward  # gelu
_k121 = _OPS[120].backward  # silu
_k122 = _OPS[121].backward  # elu
_k123 = _OPS[122].backward  # leaky_relu
_k124 = _OPS[123].backward  # hardtanh
_k125 = _OPS[124].backward  # nan_to_num
_k126 = _OPS[125].backward  # sign
_k127 = _OPS[126].backward  # floor
_k128 = _OPS[127].backward  # ceil
_k129 = _OPS[128].backward  # trunc
_k130 = _OPS[129].backward  # round
_k131 = _OPS[130].backward  # _binary_cross_entropy
_k132 = _OPS[131].backward  # atan2
_k133 = _OPS[132].backward  # logaddexp
_k134 = _OPS[133].backward  # hypot
_k135 = _OPS[134].backward  # fmod
_k136 = _OPS[135].backward  # remainder
_k137 = _OPS[136].backward  # lerp
_k138 = _OPS[137].backward  # addcmul
_k139 = _OPS[138].backward  # addcdiv

_ASSIGNS = np.array(
    list(
        "0111111000000000000000000000000000000011000000001110000000000000"
        "0000001111110000001100111111111111111111111111111111111111111111"
        "11111111100000000000000"
    ),
    np.int8,
)

_PARALLEL = np.array(
    list(
        "0111111000000000000000000000000000000011111111101110011000000000"
        "0000000000000000001100111111111111111111111111111111111111111111"
        "11111111100000000000000"
    ),
    np.int8,
)


@numba.njit(inline="always")
def _dispatch(op, f32, G64, G32, go, gi, V64, V32, so, sa, ip, fp):
    if op == 1:
        if f32:
            _k1(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k1(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 2:
        if f32:
            _k2(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k2(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 3:
        if f32:
            _k3(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k3(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 4:
        if f32:
            _k4(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k4(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 5:
        if f32:
            _k5(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k5(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 6:
        if f32:
            _k6(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k6(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 7:
        if f32:
            _k7(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k7(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 8:
        if f32:
            _k8(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k8(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 9:
        if f32:
            _k9(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k9(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 16:
        if f32:
            _k16(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k16(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 17:
        if f32:
            _k17(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k17(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 18:
        if f32:
            _k18(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k18(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 19:
        if f32:
            _k19(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k19(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 20:
        if f32:
            _k20(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k20(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 21:
        if f32:
            _k21(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k21(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 22:
        if f32:
            _k22(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k22(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 23:
        if f32:
            _k23(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k23(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 24:
        if f32:
            _k24(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k24(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 25:
        if f32:
            _k25(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k25(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 26:
        if f32:
            _k26(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k26(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 27:
        if f32:
            _k27(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k27(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 28:
        if f32:
            _k28(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k28(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 29:
        if f32:
            _k29(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k29(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 30:
        if f32:
            _k30(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k30(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 31:
        if f32:
            _k31(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k31(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 32:
        if f32:
            _k32(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k32(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 33:
        if f32:
            _k33(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k33(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 34:
        if f32:
            _k34(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k34(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 35:
        if f32:
            _k35(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k35(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 36:
        if f32:
            _k36(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k36(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 37:
        if f32:
            _k37(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k37(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 38:
        if f32:
            _k38(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k38(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 39:
        if f32:
            _k39(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k39(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 40:
        if f32:
            _k40(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k40(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 41:
        if f32:
            _k41(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k41(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 42:
        if f32:
            _k42(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k42(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 43:
        if f32:
            _k43(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k43(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 44:
        if f32:
            _k44(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k44(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 45:
        if f32:
            _k45(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k45(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 46:
        if f32:
            _k46(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k46(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 47:
        if f32:
            _k47(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k47(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 48:
        if f32:
            _k48(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k48(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 49:
        if f32:
            _k49(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k49(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 50:
        if f32:
            _k50(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k50(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 53:
        if f32:
            _k53(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k53(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 54:
        if f32:
            _k54(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k54(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 58:
        if f32:
            _k58(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k58(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 59:
        if f32:
            _k59(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k59(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 60:
        if f32:
            _k60(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k60(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 61:
        if f32:
            _k61(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k61(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 62:
        if f32:
            _k62(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k62(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 63:
        if f32:
            _k63(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k63(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 64:
        if f32:
            _k64(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k64(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 65:
        if f32:
            _k65(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k65(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 66:
        if f32:
            _k66(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k66(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 67:
        if f32:
            _k67(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k67(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 68:
        if f32:
            _k68(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k68(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 69:
        if f32:
            _k69(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k69(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 70:
        if f32:
            _k70(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k70(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 71:
        if f32:
            _k71(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k71(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 72:
        if f32:
            _k72(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k72(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 73:
        if f32:
            _k73(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k73(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 74:
        if f32:
            _k74(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k74(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 75:
        if f32:
            _k75(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k75(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 76:
        if f32:
            _k76(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k76(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 77:
        if f32:
            _k77(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k77(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 78:
        if f32:
            _k78(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k78(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 80:
        if f32:
            _k80(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k80(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 81:
        if f32:
            _k81(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k81(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 82:
        if f32:
            _k82(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k82(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 83:
        if f32:
            _k83(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k83(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 84:
        if f32:
            _k84(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k84(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 85:
        if f32:
            _k85(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k85(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 86:
        if f32:
            _k86(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k86(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 87:
        if f32:
            _k87(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k87(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 88:
        if f32:
            _k88(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k88(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 89:
        if f32:
            _k89(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k89(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 90:
        if f32:
            _k90(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k90(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 91:
        if f32:
            _k91(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k91(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 92:
        if f32:
            _k92(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k92(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 93:
        if f32:
            _k93(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k93(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 94:
        if f32:
            _k94(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k94(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 95:
        if f32:
            _k95(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k95(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 96:
        if f32:
            _k96(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k96(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 97:
        if f32:
            _k97(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k97(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 98:
        if f32:
            _k98(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k98(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 99:
        if f32:
            _k99(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k99(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 100:
        if f32:
            _k100(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k100(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 101:
        if f32:
            _k101(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k101(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 102:
        if f32:
            _k102(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k102(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 103:
        if f32:
            _k103(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k103(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 104:
        if f32:
            _k104(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k104(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 105:
        if f32:
            _k105(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k105(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 106:
        if f32:
            _k106(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k106(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 107:
        if f32:
            _k107(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k107(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 108:
        if f32:
            _k108(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k108(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 109:
        if f32:
            _k109(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k109(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 110:
        if f32:
            _k110(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k110(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 111:
        if f32:
            _k111(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k111(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 112:
        if f32:
            _k112(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k112(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 113:
        if f32:
            _k113(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k113(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 114:
        if f32:
            _k114(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k114(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 115:
        if f32:
            _k115(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k115(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 116:
        if f32:
            _k116(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k116(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 117:
        if f32:
            _k117(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k117(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 118:
        if f32:
            _k118(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k118(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 119:
        if f32:
            _k119(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k119(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 120:
        if f32:
            _k120(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k120(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 121:
        if f32:
            _k121(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k121(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 122:
        if f32:
            _k122(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k122(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 123:
        if f32:
            _k123(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k123(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 124:
        if f32:
            _k124(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k124(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 125:
        if f32:
            _k125(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k125(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 126:
        if f32:
            _k126(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k126(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 127:
        if f32:
            _k127(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k127(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 128:
        if f32:
            _k128(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k128(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 129:
        if f32:
            _k129(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k129(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 130:
        if f32:
            _k130(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k130(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 131:
        if f32:
            _k131(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k131(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 132:
        if f32:
            _k132(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k132(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 133:
        if f32:
            _k133(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k133(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 134:
        if f32:
            _k134(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k134(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 135:
        if f32:
            _k135(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k135(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 136:
        if f32:
            _k136(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k136(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 137:
        if f32:
            _k137(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k137(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 138:
        if f32:
            _k138(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k138(G64, G32, go, gi, V64, so, sa, ip, fp)
    elif op == 139:
        if f32:
            _k139(G32, G64, go, gi, V32, so, sa, ip, fp)
        else:
            _k139(G64, G32, go, gi, V64, so, sa, ip, fp)


# END GENERATED DISPATCH
