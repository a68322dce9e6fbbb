"""backward() and grad(): validate in Python, then hand the tape to the compiled scheduler.

PyTorch's run_backward / Engine::execute (torch 2.13's semantics and error texts).
"""

import contextlib
import functools
import logging
import math
import threading

import numpy as np

from .._threads import get_num_threads, run_parts
from ..graph import scheduler
from ..graph.tape import (
    ACC,
    ANOMALY,
    F32,
    HAS_SAVED,
    IN_PLACE_CHANGES,
    PY,
    RELEASED,
    address_of,
)
from ..kernels.registry import compiling, kernel_table, load_kernels
from ..tensor import BATCHED, Tensor, _wrap
from . import higher_order
from ._errors import RELEASED_MSG, modified_inplace
from ._roots import NO_OWN_BUFFER, edge, prepare, roots_tape
from .anomaly_mode import check_nan, warn_failed
from .function import FunctionCtx
from .graph import GradientEdge, Node, edge_tensor, unpack_checked
from .hooks import run_hooks, run_node_posthooks, run_node_prehooks, run_tensor_hooks

_log = logging.getLogger("nautograd")

# scratch for the gi of a node handed back to run in parts: nodes of up to 16 inputs
_PEND = 2 * 16 + 3
# up to this many nodes, per-backward bookkeeping (version checks, releasing saved arrays)
# reads the node columns element by element; above it, with numpy masks
_FEW = 16


def _as_tuple(x):
    """Tensors (or GradientEdges, as the tensors that stand for them) as a tuple."""
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    if type(x) is BATCHED[0]:  # (autograd called inside vmap: vmap runs per sample)
        raise BATCHED[3]("autograd.grad / backward of a batched value")
    if isinstance(x, GradientEdge):
        return (edge_tensor(x),)
    if isinstance(x, dict):
        x = x.values()
    return tuple(edge_tensor(t) if isinstance(t, GradientEdge) else t for t in x)


# A leaf of at least this many elements whose .grad is None gets its gradient buffer as an
# array of its own, which becomes its .grad (no copy out of the arena); smaller leaves share
# one copy of the arena's tail (one allocation for the scalar DAG's 100 leaves).
OWN_BUFFER = 4096
# Gradient arenas smaller than this (elements) are zero-filled up front rather than tracked
# buffer by buffer (see _execute)
FILL_BELOW = 1 << 16


_STARTED = []  # set once the engine has run in this process (compiled or loaded)
_NOTHING = contextlib.nullcontext()


def _load_kernels(tape, state):
    """Compile (or load) the kernels of the nodes that run and have none yet."""
    n = tape.n
    running = (state == 1) & (tape.op[:n] > 0)
    f32 = (tape.flags[:n] & F32) != 0
    load_kernels(tape.op[:n][running & ~f32], 0)
    load_kernels(tape.op[:n][running & f32], 1)


def _node_name(tape, node):
    from ..kernels import OPS

    op = int(tape.op[node])
    return OPS[op - 1].node_name if op > 0 else "a Python node"


def _execute(
    roots, grads, retain_graph, targets, own_leaves=False, before_hooks=None, run_targets=False
):
    """Run the scheduler.

    ``before_hooks``: a dict that receives, for every grad() target whose node runs and has
    tensor hooks, a copy of its gradient before those hooks (what torch captures then).

    Returns (tape, state, buf_off, G64, G32, target edges, (tails, leaves, own, undefined),
    owned): the gradient arenas stay valid until the caller gives them back with
    ``tape.release_grad_arenas(owned)``. With ``own_leaves``, big leaves without a ``.grad``
    get buffers of their own: ``own`` maps their node to that array. With ``run_targets``
    (``backward(inputs=...)``), a non-leaf target's node runs as torch runs it, for its hooks
    only: nothing flows past it.
    """
    tape, root_grads, root_edges, target_edges = prepare(roots, grads, targets)
    n = tape.n
    root_nodes = np.array([e[0] for e in root_edges], np.int64)
    if target_edges is None:
        mode, tnodes = 0, np.zeros(0, np.int64)
    else:
        mode = 1
        tnodes = np.array([e[0] for e in target_edges if e[0] >= 0], np.int64)
    table = kernel_table()
    with compiling("the autograd engine") if not _STARTED else _NOTHING:
        state, buf_off, n64, n32, tails, leaves, need = scheduler.prepare(
            n,
            root_nodes,
            tnodes,
            mode,
            tape.flags,
            tape.edge_ptr,
            tape.edge_node,
            tape.edge_input_nr,
            tape.out_ptr,
            tape.out_numel,
            OWN_BUFFER if own_leaves else NO_OWN_BUFFER,
            tape.op,
            table,
        )
    if need:
        _load_kernels(tape, state)
    G64, G32, owned = tape.grad_arenas(n64, n32)
    tape.running += 1  # no compaction while Python nodes may record (see Tape.reserve)
    # anomaly mode: every node that runs is handed to Python first, so that each is checked
    # (NaN, and its forward stack on an error) right after it ran; the PY marks come off after
    anomaly = ANOMALY.enabled
    marked = None
    last = current = -1  # the node run since the last check; the node being run
    try:
        if anomaly:
            f = tape.flags[:n]
            marked = np.flatnonzero((state == 1) & (f & (PY | ACC) == 0))
            f[marked] |= PY
        flags, out_ptr = tape.flags, tape.out_ptr
        # (no in-place change since the oldest entry was noted: none can be stale)
        if tape.versions and tape.versions_since != IN_PLACE_CHANGES[0]:
            _check_versions(tape, state)
        # buffers start uninitialised (fresh): the first writer stores, later ones add. Small
        # arenas are zero-filled instead: one memset beats a zeroing per buffer when buffers
        # are scalars (scalar DAG backward, 10k ops: 3.4 ms with per-buffer zeroing)
        if n64 + n32 < FILL_BELOW:
            G64.fill(0)
            G32.fill(0)
            fresh = np.zeros(len(buf_off), np.int8)
            # a custom Function's output no consumer wrote is an undefined gradient (None
            # without materialize_grads), and so is a hooked tensor's (its hooks get None):
            # keep their "not written" mark though they read as 0
            for node in (*tape.functions, *tape.hooks):
                if node < n and state[node] == 1:
                    fresh[out_ptr[node] : out_ptr[node + 1]] = 1
        else:
            fresh = np.ones(len(buf_off), np.int8)
        alias = _root_alias(tape, root_edges, root_grads, target_edges)
        for (node, k), g in zip(root_edges, root_grads, strict=True):
            o = out_ptr[node] + k
            off = buf_off[o]
            if off < 0:  # no buffer: the root's node does not run (no target behind it)
                continue
            G = G32 if flags[node] & F32 else G64
            if alias is not None:
                fresh[o] = 0
            elif fresh[o]:
                G[off : off + g.size] = g
                fresh[o] = 0
            elif g.size == 1:  # (a scalar root: an element add, not a slice's ufunc call)
                G[off] += g[0]
            else:
                G[off : off + g.size] += g
        # (address_of: `ctypes.data` builds a helper object, ~1.4 us each)
        slot = scheduler.locate(
            state, flags, out_ptr, buf_off, address_of(G64) // 8, address_of(G32) // 4
        )
        if alias is not None:
            node, k = root_edges[0]
            slot[out_ptr[node] + k] = address_of(alias) // alias.itemsize
        # (only uninitialised arenas: a filled one's buffers are not fresh)
        big = own_leaves and n64 + n32 >= FILL_BELOW
        own = _own_buffers(tape, leaves, slot, fresh) if big else None
        V64, V32 = tape.v64, tape.v32
        retain = bool(retain_graph)
        start = (
            root_edges[0][0]
            if len(root_edges) == 1
            else max([e[0] for e in root_edges], default=-1)
        )
        skip_py = False
        skipped = {}  # (node, output) -> the edges into it that a custom Function gave None
        hooks = tape.hooks
        columns = (
            tape.op,
            flags,
            tape.edge_ptr,
            tape.edge_node,
            tape.edge_input_nr,
            out_ptr,
            tape.saved_ptr,
            tape.saved_off,
            tape.saved_addr,
            tape.ip_start,
            tape.ip_len,
            tape.iparams,
            tape.fp_start,
            tape.fp_len,
            tape.fparams,
            V64,
            V32,
            table,
        )
        head = (retain, state, slot, fresh, tape.out_numel, G64, G32)
        parts = get_num_threads()
        pend = np.empty(_PEND, np.int64)
        while True:
            if _STARTED:
                status = scheduler.run(start, *head, *columns, skip_py, parts, pend, -1)
            else:
                with compiling("the autograd engine"):
                    status = scheduler.run(start, *head, *columns, skip_py, parts, pend, -1)
                _STARTED.append(True)
            if last >= 0:
                current = last
                _check_nan(tape, last, state, buf_off, G64, G32, own)
                last = current = -1
            if status == scheduler.DONE:
                break
            if status <= scheduler.ERR_KERNEL:
                current = scheduler.ERR_KERNEL - status
                raise RuntimeError(
                    f"nautograd: the compiled backward of node {current} "
                    f"({_node_name(tape, current)}) failed (an index out of bounds in a "
                    "bounds-checked build)"
                )
            if status <= scheduler.ERR_RELEASED:
                current = scheduler.ERR_RELEASED - status
                raise RuntimeError(RELEASED_MSG)
            if status >= scheduler.PAR:
                # a large node of a parallel kernel: its parts on the intra-op threads
                node = status - scheduler.PAR
                k = int(pend[0])

                def run_part(p, node=node, k=k):
                    gi = pend.copy()
                    gi[1 + 2 * k] = p
                    gi[2 + 2 * k] = parts
                    scheduler.run(node, *head, *columns, False, parts, gi, node)

                run_parts(run_part, parts)
                if not retain:
                    flags[node] |= RELEASED
                if anomaly:
                    current = node
                    _check_nan(tape, node, state, buf_off, G64, G32, own)
                    current = -1
                start, skip_py = node - 1, False
                continue
            # a Python node: its tensor hooks run on its gradient buffers; then a custom
            # Function's backward runs here, any other node natively
            node = current = status
            if before_hooks is not None and node in hooks:
                for k in hooks[node]:
                    if type(k) is int and (node, k) in target_edges:
                        g = _buffer(tape, state, buf_off, G64, G32, node, k, hooks[node][k][0])
                        before_hooks[node, k] = (
                            np.zeros_like(g) if fresh[tape.out_ptr[node] + k] else g.copy()
                        )
            per = hooks.get(node) if hooks else None
            if per and "packed" in per:
                unpack_saved(tape, node, per, retain)
            if per:  # (the call and its import cost ~1.9 us a custom Function node)
                _run_tensor_hooks(tape, per, node, buf_off, fresh, G64, G32)
                if "pre" in per and per["pre"]:
                    _run_prehooks(tape, node, per["pre"], roots, root_edges, buf_off, fresh,
                                  G64, G32)  # fmt: skip
            post = per.get("post") if per else None
            ctx = tape.obj[node]
            if not isinstance(ctx, FunctionCtx):
                if not post:
                    start, skip_py = node, True  # (run zeroes the outputs no one wrote)
                    last, current = (node if anomaly else -1), -1
                    continue
                _run_alone(tape, node, post, roots, root_edges, state, slot, fresh, buf_off,
                           G64, G32, own, head, columns, parts)  # fmt: skip
                if not retain:
                    flags[node] |= RELEASED
                if anomaly:
                    _check_nan(tape, node, state, buf_off, G64, G32, own)
                current = -1
                start, skip_py = node - 1, False
                continue
            _run_function(tape, node, ctx, state, buf_off, fresh, G64, G32, own, skipped, post)
            if anomaly:
                _check_nan(tape, node, state, buf_off, G64, G32, own)
            current = -1
            if not retain:
                flags[node] |= RELEASED
                ctx._release()
            start, skip_py = node - 1, False
        if run_targets and target_edges is not None:
            for node, k in target_edges:
                if node < 0 or state[node] != 2 or flags[node] & ACC:
                    continue
                per = hooks.get(node) or {}
                if "packed" in per and per.get("post"):
                    unpack_saved(tape, node, per, retain)
                if k in per:
                    _run_tensor_hooks(tape, {k: per[k]}, node, buf_off, fresh, G64, G32)
                if per.get("pre"):
                    _run_prehooks(tape, node, per["pre"], roots, root_edges, buf_off, fresh,
                                  G64, G32)  # fmt: skip
                if per.get("post"):
                    _run_alone(tape, node, per["post"], roots, root_edges, state, slot, fresh,
                               buf_off, G64, G32, own, head, columns, parts)  # fmt: skip
        if not retain and tape.heavy:
            # drop what the released nodes kept (the RELEASED test in numpy: a numpy scalar
            # read per node cost ~0.2 us, ~2,000 nodes a backward in the RNN benchmark; a few
            # nodes are read one by one, as the numpy masks' calls cost ~8 us)
            obj, versions = tape.obj, tape.versions
            if len(tape.heavy) <= _FEW:
                keep = []
                for node in tape.heavy:
                    if flags[node] & RELEASED:
                        obj[node] = None
                        versions.pop(node, None)
                    else:
                        keep.append(node)
                tape.heavy = keep
            else:
                heavy = np.array(tape.heavy, np.int64)
                done = (flags[heavy] & RELEASED) != 0
                for node in heavy[done].tolist():
                    obj[node] = None
                    versions.pop(node, None)
                tape.heavy = heavy[~done].tolist()
    except BaseException:
        tape.release_grad_arenas(owned)
        if anomaly and current >= 0:
            warn_failed(tape, current)
        raise
    finally:
        tape.running -= 1
        if marked is not None:
            tape.flags[marked] &= ~PY
    undefined = _undefined(tape, state, skipped) if skipped else ()
    return tape, state, buf_off, G64, G32, target_edges, (tails, leaves, own, undefined), owned


def _root_alias(tape, root_edges, root_grads, target_edges):
    """The root gradient array to use as the root's buffer as it is, or None (copy it).

    As PyTorch does, a large gradient is read in place: copying 10^6 elements into the arena
    cost ~0.5 ms of a 2 ms backward (exp, benchmarks/op_families.py). Only for a single root
    of a node that no other running node writes into (it has the largest id) and whose buffer
    nothing reads by offset afterwards (hooks, retain_grad, grad() targets, leaves).
    """
    if len(root_edges) != 1:
        return None
    node, g = root_edges[0][0], root_grads[0]
    if (
        g.size < OWN_BUFFER
        or not g.flags.c_contiguous
        or tape.flags[node] & (ACC | PY)
        or node in tape.hooks
        or node in tape.retained
        or (target_edges is not None and any(e[0] == node for e in target_edges))
    ):
        return None
    return g


def _own_buffers(tape, leaves, slot, fresh):
    """node -> a new array for each big leaf that will take its first .grad from it: the
    kernels write the leaf's gradient there directly (its slot points at it)."""
    out_ptr = tape.out_ptr
    big = leaves[tape.out_numel[out_ptr[leaves]] >= OWN_BUFFER]
    own = {}
    for node in big.tolist():
        o = out_ptr[node]
        leaf = tape.obj[node]()
        if leaf is None or not leaf._rg or leaf._grad is not None or leaf._hooks or not fresh[o]:
            continue  # not fresh: a root's gradient is already in the arena
        if not _leaf_matches(tape, node, leaf):
            continue  # its .data was replaced: the kernels write the recorded size and dtype
        a = np.empty(leaf._data.shape, leaf._data.dtype)
        slot[o] = address_of(a) // a.itemsize
        own[node] = a
    return own


def _check_versions(tape, state):
    """PyTorch's saved-variable version check, for values saved by address (E4)."""
    versions = tape.versions
    if not versions:
        return
    # the nodes that run, chosen in numpy: a numpy scalar read per node cost ~0.2 us (the RNN
    # benchmark checks ~2,000 nodes a backward); a few are read one by one (the masks' numpy
    # calls cost ~8 us)
    if len(versions) <= _FEW:
        n, flags = len(state), tape.flags
        nodes = [
            node
            for node in versions
            if node < n and state[node] == 1 and not flags[node] & RELEASED
        ]
    else:
        nodes = np.fromiter(versions, np.int64, len(versions))
        nodes = nodes[nodes < len(state)]
        nodes = nodes[(state[nodes] == 1) & (tape.flags[nodes] & RELEASED == 0)].tolist()
    for node in nodes:
        for vc, version, a in versions[node]:
            if vc[0] != version:
                if ANOMALY.enabled:
                    warn_failed(tape, node)
                raise modified_inplace(a.shape, a.dtype, vc[0], version)


def _check_nan(tape, node, state, buf_off, G64, G32, own):
    """Anomaly mode: the gradients ``node`` just added into its inputs' buffers hold no NaN.
    (Nodes run one at a time and each is checked, so a NaN there is this node's.)"""
    e0, e1 = tape.edge_ptr[node : node + 2].tolist()
    grads = []
    for c, nr in zip(
        tape.edge_node[e0:e1].tolist(), tape.edge_input_nr[e0:e1].tolist(), strict=True
    ):
        if c < 0 or not state[c]:
            grads.append(None)
        else:
            grads.append(_input_buffer(tape, c, nr, buf_off, G64, G32, own)[1])
    check_nan(tape, node, grads)


def _input_buffer(tape, c, nr, buf_off, G64, G32, own):
    """(output row, flat gradient buffer) of output ``nr`` of node ``c``, a node that runs:
    a big leaf's own array (``own``) or its slice of the arena."""
    o = tape.out_ptr.item(c) + nr
    if own and c in own:
        return o, own[c].reshape(-1)
    off = buf_off.item(o)
    return o, (G32 if tape.flags.item(c) & F32 else G64)[off : off + tape.out_numel.item(o)]


def _buffer(tape, state, buf_off, G64, G32, node, k, shape):
    """The gradient buffer of (node, output k) as an array of ``shape``, or None."""
    if node < 0 or node >= len(state) or not state[node]:
        return None
    o = tape.out_ptr[node] + k
    n = math.prod(shape)
    if n != tape.out_numel[o]:  # a leaf whose .data was replaced by another size
        raise _size_changed(int(tape.out_numel[o]), shape)
    G = G32 if tape.flags[node] & F32 else G64
    return G[buf_off[o] : buf_off[o] + n].reshape(shape)


def _captured(tape, state, buf_off, G64, G32, t, node, k, before_hooks):
    """grad()'s result for target ``t`` at (node, output k), as torch's engine captures it: a
    node that also runs (on the way to another target) is captured before its tensor hooks;
    one captured only (a leaf's AccumulateGrad, or a non-leaf target) after them."""
    if (node, k) in before_hooks:
        return _wrap(before_hooks[node, k])
    g = _buffer(tape, state, buf_off, G64, G32, node, k, t._data.shape)
    if g is None:
        return None
    if state[node] == 2:
        fns = t._hooks if tape.flags[node] & ACC else tape.hooks.get(node, {}).get(k, ((),))[-1]
        if fns:
            return _wrap(run_hooks(fns, g))
    return _wrap(g.copy())


def _run_function(tape, node, ctx, state, buf_off, fresh, G64, G32, own, skipped, post=None):
    """A custom Function's node: its backward on the gradients of its outputs (None where no
    consumer wrote one), the results added into the buffers of its inputs' nodes.

    Plain numpy on the arenas, Python ints read in bulk (``tolist``): a numpy scalar read
    costs ~0.1 us, and this runs once per Function call (benchmarks/run.py,
    custom_function_chain). A PY node's buffers are always in the arena (``_root_alias``
    skips PY nodes); an input's buffer may be a big leaf's own array (``own``).
    """
    # (each column read with .item(): a Python int; a slice and its tolist() cost ~0.35 us
    # each, and the chain's nodes have one output and one input)
    out_ptr, out_numel, edge_ptr = tape.out_ptr, tape.out_numel, tape.edge_ptr
    G = G32 if tape.flags.item(node) & F32 else G64
    grads = []
    for o in range(out_ptr.item(node), out_ptr.item(node + 1)):
        if fresh.item(o):  # no consumer wrote it
            grads.append(None)
        else:
            off = buf_off.item(o)
            grads.append(G[off : off + out_numel.item(o)].copy())
    results = ctx._run_backward(grads)
    if post:  # Node.register_hook on the Function's node: it sees and may replace them
        results = _posthooks_on_arrays(post, results, grads, ctx)
    e0 = edge_ptr.item(node)
    if len(results) != edge_ptr.item(node + 1) - e0:
        raise RuntimeError("internal error: a custom Function's gradients and edges differ")
    edge_node, edge_input_nr = tape.edge_node, tape.edge_input_nr
    for j, g in enumerate(results):
        c = edge_node.item(e0 + j)
        if c < 0 or not state.item(c):
            continue
        if g is None:  # an undefined gradient (see _undefined)
            skipped.setdefault((c, edge_input_nr.item(e0 + j)), set()).add(e0 + j)
            continue
        o, b = _input_buffer(tape, c, edge_input_nr.item(e0 + j), buf_off, G64, G32, own)
        if fresh.item(o):
            b[:] = g.reshape(-1)
            fresh[o] = 0
        else:
            b += g.reshape(-1)


def unpack_saved(tape, node, per, retain):
    """Before a node whose saved tensors were packed (``saved_tensors_hooks``) runs: each
    unpack hook's tensor takes its value's place (copied into the value arena, or kept and
    found by address). Without ``retain_graph`` the packed values go: the node runs once."""
    if tape.flags[node] & RELEASED:
        raise RuntimeError(RELEASED_MSG)
    packed = per["packed"] if retain else per.pop("packed")
    s0, s1 = int(tape.saved_ptr[node]), int(tape.saved_ptr[node + 1])
    offs = tape.saved_off[s0:s1].tolist()
    by_address = [j for j, off in enumerate(offs) if off < 0]
    kept = list(tape.obj[node] or (None,) * len(by_address))
    V = tape.v32 if tape.flags[node] & F32 else tape.v64
    for j, pos, value, unpack, shape, dtype in packed:
        t = unpack_checked(unpack, value)
        a = np.ascontiguousarray(t._data, dtype=dtype)
        if a.size != math.prod(shape):
            raise RuntimeError(
                f"saved_tensors_hooks: the unpack hook returned a tensor of shape "
                f"{list(t.shape)} for a saved tensor of shape {list(shape)}"
            )
        if offs[j] >= 0:
            V[offs[j] : offs[j] + a.size] = a.reshape(-1)
        else:
            kept[by_address.index(j)] = a
            tape.saved_addr[pos] = address_of(a)
    tape.obj[node] = tuple(kept)


def _output_shape(tape, node, k, roots, root_edges):
    """The shape of output ``k`` of ``node``: recorded for a multi-output node, else the
    shape a consumer recorded for that input (``tape.meta``), else a root's own."""
    shapes = tape.out_shapes.get(node)
    if shapes is not None:
        return shapes[k]
    for t, e in zip(roots, root_edges, strict=True):
        if e == (node, k):
            return t._data.shape
    ptr = tape.edge_ptr[: tape.n + 1]
    for e in np.flatnonzero(
        (tape.edge_node[: ptr[-1]] == node) & (tape.edge_input_nr[: ptr[-1]] == k)
    ).tolist():
        i = int(np.searchsorted(ptr, e, side="right")) - 1
        meta = tape.meta[i]
        j = e - int(ptr[i])
        return meta if ptr[i + 1] - ptr[i] == 1 else meta[j]
    return (int(tape.out_numel[tape.out_ptr[node] + k]),)


def _input_shapes(tape, node):
    """The recorded shapes of ``node``'s inputs, one per edge."""
    meta = tape.meta[node]
    return (meta,) if tape.edge_ptr[node + 1] - tape.edge_ptr[node] == 1 else meta


def _output_grads(tape, node, roots, root_edges, buf_off, fresh, G64, G32):
    """``node``'s output gradients as tensors (copies; None where no consumer wrote one)."""
    G = G32 if tape.flags[node] & F32 else G64
    grads = []
    for k, o in enumerate(range(int(tape.out_ptr[node]), int(tape.out_ptr[node + 1]))):
        if fresh[o]:
            grads.append(None)
            continue
        off, n = int(buf_off[o]), int(tape.out_numel[o])
        shape = _output_shape(tape, node, k, roots, root_edges)
        grads.append(_wrap(G[off : off + n].reshape(shape).copy()))
    return tuple(grads)


def _run_prehooks(tape, node, fns, roots, root_edges, buf_off, fresh, G64, G32):
    """``Node.register_prehook``'s hooks of ``node`` on its output gradients; what they
    return is written back into the buffers."""
    from .hooks import run_node_prehooks

    grads = _output_grads(tape, node, roots, root_edges, buf_off, fresh, G64, G32)
    new = run_node_prehooks(fns, grads)
    if new is grads:
        return
    G = G32 if tape.flags[node] & F32 else G64
    for o, g, old in zip(range(int(tape.out_ptr[node]), int(tape.out_ptr[node + 1])), new, grads,
                         strict=True):  # fmt: skip
        if g is not None and g is not old:
            off = int(buf_off[o])
            G[off : off + g._data.size] = g._data.reshape(-1)
            fresh[o] = 0


def _posthooks_on_arrays(fns, results, grads, ctx):
    """A custom Function node's ``Node.register_hook`` hooks: on its input gradients (arrays
    or None) and output gradients; returns the input gradients to pass on, as arrays."""
    from .hooks import run_node_posthooks

    ins = tuple(None if g is None else _wrap(np.asarray(g)) for g in results)
    shapes = {k: shape for k, shape, dtype in ctx._outputs if k >= 0}
    outs = tuple(
        None if g is None else _wrap(g.reshape(shapes.get(k, g.shape))) for k, g in enumerate(grads)
    )
    new = run_node_posthooks(fns, ins, outs)
    return [None if g is None else g._data for g in new]


def _run_alone(tape, node, post, roots, root_edges, state, slot, fresh, buf_off, G64, G32,
               own, head, columns, parts):  # fmt: skip
    """Run ``node``'s kernel by itself so that ``Node.register_hook``'s hooks see the
    gradients it passes on (``grad_inputs``) and may replace them: each input's buffer is
    set aside and zeroed, the kernel writes this node's gradients alone into it, the hooks
    run, and the buffer gets its earlier value plus what they return."""
    from .hooks import run_node_posthooks

    if tape.flags[node] & RELEASED and tape.flags[node] & HAS_SAVED:
        raise RuntimeError(RELEASED_MSG)
    grad_outputs = _output_grads(tape, node, roots, root_edges, buf_off, fresh, G64, G32)
    G = G32 if tape.flags[node] & F32 else G64
    for o in range(int(tape.out_ptr[node]), int(tape.out_ptr[node + 1])):
        if fresh[o]:  # an output no consumer wrote reads as zeros (as scheduler.run)
            off = int(buf_off[o])
            G[off : off + int(tape.out_numel[o])] = 0
            fresh[o] = 0
    e0, e1 = int(tape.edge_ptr[node]), int(tape.edge_ptr[node + 1])
    k = e1 - e0
    gi = np.zeros(2 * k + 3, np.int64)
    gi[0] = k
    bufs, old, seen = [], [], set()
    for j in range(k):
        c, nr = int(tape.edge_node[e0 + j]), int(tape.edge_input_nr[e0 + j])
        if c < 0 or not state[c]:
            gi[1 + j] = -1
            bufs.append(None)
            old.append(None)
            continue
        o, b = _input_buffer(tape, c, nr, buf_off, G64, G32, own)
        if o in seen:
            raise NotImplementedError(
                f"Node.register_hook on {_node_name(tape, node)}: two of its inputs are one "
                "tensor, whose gradients nautograd's kernel adds together"
            )
        seen.add(o)
        old.append(None if fresh[o] else b.copy())
        b[:] = 0
        fresh[o] = 0
        gi[1 + j] = slot[o]
        bufs.append(b)
    gi[2 + 2 * k] = 1  # part 0 of 1
    load_kernels(tape.op[node : node + 1], 1 if tape.flags[node] & F32 else 0)
    status = scheduler.run(node, *head, *columns, False, parts, gi, node)
    if status != scheduler.DONE:
        raise RuntimeError(
            f"nautograd: the compiled backward of node {node} ({_node_name(tape, node)}) failed"
        )
    shapes = _input_shapes(tape, node)
    grad_inputs = tuple(
        None if b is None else _wrap(b.reshape(shapes[j]).copy()) for j, b in enumerate(bufs)
    )
    new = run_node_posthooks(post, grad_inputs, grad_outputs)
    for b, g, before in zip(bufs, new, old, strict=True):
        if b is None:
            continue
        value = 0.0 if g is None else g._data.reshape(-1)
        if before is None:
            b[:] = value
        else:
            np.add(before, value, out=b)


def _run_tensor_hooks(tape, per_output, node, buf_off, fresh, G64, G32):
    """Run the tensor hooks of ``node``'s outputs on their gradient buffers (a buffer no
    consumer wrote is zeroed first: ``run`` hands PY nodes over before zeroing them)."""
    if not per_output:
        return
    for k, entry in list(per_output.items()):
        if type(k) is not int:  # (the node's own hooks: "pre", "post")
            continue
        shape, fns = entry
        o = tape.out_ptr[node] + k
        off = buf_off[o]
        G = G32 if tape.flags[node] & F32 else G64
        buf = G[off : off + math.prod(shape)].reshape(shape)
        if fresh[o]:  # no consumer wrote it: an undefined gradient, None to the hooks (torch)
            value = run_tensor_hooks(fns, None)
            buf[...] = 0 if value is None else value._data
            fresh[o] = 0
        else:
            buf[...] = run_hooks(fns, buf)


def _undefined(tape, state, skipped):
    """The (node, output) buffers that only custom Functions returning None fed: their
    gradient is undefined, as in torch (a leaf's ``.grad`` stays None, grad() gives None).
    ``skipped``: each such buffer's edges that carried None."""
    n = len(state)
    ptr = tape.edge_ptr[: n + 1]
    undefined = set()
    for (c, nr), edges in skipped.items():
        into = np.flatnonzero(
            (tape.edge_node[: ptr[-1]] == c) & (tape.edge_input_nr[: ptr[-1]] == nr)
        )
        nodes = np.searchsorted(ptr, into, side="right") - 1  # each edge's node
        fed = [e for e, i in zip(into.tolist(), nodes.tolist(), strict=True) if state[i] == 1]
        if all(e in edges for e in fed):
            undefined.add((c, nr))
    return undefined


def _accumulate_leaves(tape, buf_off, G64, G32, tails, leaves, own, undefined=()):
    """AccumulateGrad for every leaf the backward reached (PyTorch's accumulateGrad).

    A leaf's first gradient is its own buffer (big leaves, ``own``) or a view of one copy of
    the arenas' leaf tail (never of a buffer the engine reuses, nor of a tensor the user
    holds); later ones add in place.
    """
    if not len(leaves):
        return
    offs = buf_off[tape.out_ptr[leaves]].tolist()
    is32 = (tape.flags[leaves] & F32).tolist()
    copies = [None, None]
    obj = tape.obj
    post = []  # leaves with post-accumulate hooks, run once every leaf has its gradient
    with _ACCUMULATE_LOCK:  # threads may backpropagate into the same leaves at once
        for node, off, f32 in zip(leaves.tolist(), offs, is32, strict=True):
            leaf = obj[node]()
            if leaf is None or not leaf._rg or (undefined and (node, 0) in undefined):
                continue
            if leaf._acc_hooks:  # Node hooks on its AccumulateGrad: in torch's order
                g = own[node] if own and node in own else None
                if g is None:
                    _check_leaf_size(tape, node, leaf)
                    G = G32 if f32 else G64
                    g = G[off : off + leaf._data.size].reshape(leaf._data.shape)
                _accumulate_hooked(leaf, g)
                continue
            if leaf._post_hooks:
                post.append(leaf)
            if own and node in own:
                if leaf._grad is None:
                    leaf._grad = _wrap(own[node])
                else:  # another thread's backward gave the leaf its first gradient meanwhile
                    _accumulate(leaf, own[node])
                continue
            a = leaf._data
            # (a .data of another dtype takes the recorded one's gradient: the paths below
            # keep G's dtype; another size cannot)
            _check_leaf_size(tape, node, leaf)
            G = G32 if f32 else G64
            if leaf._grad is None and not leaf._hooks and off >= tails[f32]:
                tail = copies[f32]
                if tail is None:
                    tail = copies[f32] = G[tails[f32] :].copy()
                off -= tails[f32]
                leaf._grad = _wrap(tail[off : off + a.size].reshape(a.shape))
                continue
            _accumulate(leaf, G[off : off + a.size].reshape(a.shape))
    if post:
        post_accumulate(post)


def _accumulate_hooked(leaf, g):
    """AccumulateGrad of a leaf whose node has hooks: tensor hooks, the node's prehooks,
    the accumulation, post-accumulate-grad hooks, the node's posthooks (torch's order)."""
    if leaf._hooks:
        g = run_hooks(leaf._hooks, g)
    (value,) = run_node_prehooks(leaf._acc_hooks["pre"], (_wrap(np.array(g)),))
    if value is not None:
        _add_grad(leaf, value._data)
    if leaf._post_hooks:
        post_accumulate([leaf])
    run_node_posthooks(leaf._acc_hooks["post"], (), (value,))


def post_accumulate(leaves):
    """Run the post-accumulate-grad hooks of ``leaves``, whose ``.grad`` was just updated
    (``Tensor.register_post_accumulate_grad_hook``): in registration order, under no_grad
    unless grad mode is on (create_graph); a hook must return None."""
    for leaf in leaves:
        for fn in list(leaf._post_hooks):
            result = fn(leaf)
            if result is None:
                continue
            if isinstance(result, Tensor):
                raise RuntimeError("Tensor post accumulate grad hooks should return None.")
            raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")


# AccumulateGrad's read-modify-write of .grad, under one lock for all threads (torch locks
# each leaf's accumulation): two backwards into one leaf lost updates without it
_ACCUMULATE_LOCK = threading.RLock()  # (re-entrant: a leaf hook may run a backward)


def _leaf_matches(tape, node, leaf):
    """Whether ``leaf`` still has the size and dtype its AccumulateGrad ``node`` recorded
    (``leaf.data = ...`` may have replaced its value since)."""
    a = leaf._data
    return a.size == tape.out_numel.item(tape.out_ptr.item(node)) and (a.dtype == np.float32) == (
        bool(tape.flags.item(node) & F32)
    )


def _check_leaf_size(tape, node, leaf):
    """torch's shape check of a leaf's gradient: a leaf whose ``.data`` was replaced by one of
    another size cannot take the gradient recorded for the old size."""
    n = tape.out_numel.item(tape.out_ptr.item(node))
    if leaf._data.size != n:
        raise _size_changed(n, leaf._data.shape)


def _size_changed(n, shape):
    return RuntimeError(
        f"Function AccumulateGrad: the gradient has {n} elements but the tensor has shape "
        f"{list(shape)} ({math.prod(shape)} elements): its .data was "
        "replaced by a tensor of another size after the graph was recorded"
    )


def _accumulate(t, g):
    """AccumulateGrad: store the first gradient as a copy, add later ones in place. (A leaf
    whose ``.data`` changed dtype after recording gets the gradient in the recorded dtype,
    as torch's.)"""
    if t._hooks:
        g = run_hooks(t._hooks, g)
    _add_grad(t, g)


def _add_grad(t, g):
    """AccumulateGrad's store or add into ``t.grad``, once ``t``'s tensor hooks ran."""
    with _ACCUMULATE_LOCK:
        if t._grad is None:
            t._grad = _wrap(np.array(g, dtype=g.dtype if g.dtype.kind == "f" else t._data.dtype))
        else:
            t._grad._data += g
            t._grad._bump()


_task = threading.local()  # .stack: one list of queued callbacks per running backward


def _graph_task(run_backward):
    """``run_backward`` (backward, grad) as one graph task: callbacks queued while it runs
    (``queue_callback``) run, in order, when it has finished without an error."""

    @functools.wraps(run_backward)
    def task(*args, **kwargs):
        stack = getattr(_task, "stack", None)
        if stack is None:
            stack = _task.stack = []
        callbacks = []
        stack.append(callbacks)
        try:
            result = run_backward(*args, **kwargs)
        finally:
            stack.pop()
        for callback in callbacks:  # (a callback may queue another)
            callback()
        return result

    return task


def current_task():
    """The queued-callback list of the backward running on this thread (None outside one):
    an identity for the graph task (register_multi_grad_hook counts per task)."""
    stack = getattr(_task, "stack", None)
    return stack[-1] if stack else None


def queue_callback(callback):
    """Run ``callback()`` when the backward running on this thread has finished
    (torch's ``Variable._execution_engine.queue_callback``)."""
    callbacks = current_task()
    if callbacks is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    callbacks.append(callback)


def _on_roots_tape(roots_name):
    """Make ``run_backward`` (backward, grad) hold the lock of the tape its roots (argument
    ``roots_name``) were recorded on: the thread that owns the tape may go on recording
    meanwhile, and other threads may differentiate its graphs as well (see Tape.lock)."""

    def wrap(run_backward):
        @functools.wraps(run_backward)
        def locked(*args, **kwargs):
            roots = args[0] if args else kwargs.get(roots_name)
            if not isinstance(roots, (tuple, list, dict)):
                roots = (roots,)
            elif isinstance(roots, dict):
                roots = tuple(roots.values())
            tape = None
            for t in roots:
                if isinstance(t, GradientEdge) and isinstance(t.node, Node):
                    tape = t.node._tape
                    break
            else:
                tape = roots_tape(roots)
            with tape.lock:
                return run_backward(*args, **kwargs)

        return locked

    return wrap


def _reach(roots):
    """scheduler.prepare's pass from ``roots`` (tensors in a graph): (tape, state, the
    AccumulateGrad nodes reached)."""
    tape = roots_tape(roots)
    with tape.lock:
        nodes = np.array([edge(tape, t)[0] for t in roots], np.int64)
        tape.flush()
        state, _, _, _, _, leaves, _ = scheduler.prepare(
            tape.n, nodes, np.zeros(0, np.int64), 0, tape.flags, tape.edge_ptr, tape.edge_node,
            tape.edge_input_nr, tape.out_ptr, tape.out_numel, NO_OWN_BUFFER, tape.op,
            kernel_table(),
        )  # fmt: skip
        return tape, state, [tape.obj[i]() for i in leaves.tolist()]


def graph_size(roots):
    """How many nodes a backward from ``roots`` would run."""
    roots = [t for t in roots if isinstance(t, Tensor) and t._rg and t._h >= 0]
    return int(np.count_nonzero(_reach(roots)[1])) if roots else 0


def batched_walk_pays(roots, batch):
    """Whether one create_graph backward from ``roots`` whose formulas run on a batch of
    ``batch`` cotangents at once (vmap's batching rules) beats ``batch`` compiled backward
    passes: the first costs ~50 us of Python per node of the graph, each of the others ~60 us
    plus ~1 us a node (a 16 x 16 ``func.jacrev``: 0.75 against 1.3 ms; the outer ``jacrev``
    of a 16-input Hessian, ~10x the nodes: 5.1 against 3.4 ms;
    benchmarks/func_transforms.py)."""
    n = graph_size(roots)
    return batch * (60 + n) > 50 * n


def reached_leaves(roots):
    """The leaves (tensors that require grad and have no ``grad_fn``) a backward from
    ``roots`` would reach, alive ones only: ``ng.func`` asks whether a function's result
    depends on tensors other than the ones it differentiates with respect to (then the
    gradients it returns must be differentiable, as torch.func's are)."""
    roots = [t for t in roots if isinstance(t, Tensor) and t._rg]
    found = [t for t in roots if t._h < 0]  # (a leaf root reaches itself)
    roots = [t for t in roots if t._h >= 0]
    if roots:
        found += _reach(roots)[2]
    return [t for t in found if t is not None]


@_graph_task
@_on_roots_tape(roots_name="tensors")
def backward(
    tensors,
    grad_tensors=None,
    retain_graph=None,
    create_graph=False,
    inputs=None,
    grad_variables=None,
):
    """Compute the sum of gradients of ``tensors`` and accumulate them into leaves' ``.grad``.

    As ``torch.autograd.backward``: ``grad_tensors`` default to ones for one-element roots;
    ``inputs`` restricts which tensors receive ``.grad`` (non-leaf inputs retain their grad).
    """
    roots = _as_tuple(tensors)
    grads = _as_tuple(grad_tensors if grad_tensors is not None else grad_variables)
    if grads is not None:
        grads = tuple(grads)
    targets = _as_tuple(inputs)
    if targets is not None and len(targets) == 0:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    if retain_graph is None:
        retain_graph = create_graph
    if targets is not None:
        for t in targets:
            if not t._rg:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
    if create_graph:
        higher_order.warn_backward()
        for t in targets or ():
            if t._h >= 0:
                t.retain_grad()
        higher_order.execute(roots, grads, retain_graph, targets, accumulate=True)
        return
    tape, state, buf_off, G64, G32, target_edges, tails, owned = _execute(
        roots, grads, retain_graph, targets, own_leaves=targets is None, run_targets=True
    )
    try:
        if targets is None:
            _accumulate_leaves(tape, buf_off, G64, G32, *tails)
        else:
            for t, (node, k) in zip(targets, target_edges, strict=True):
                if (node, k) in tails[3]:
                    continue  # an undefined gradient (see _undefined)
                g = _buffer(tape, state, buf_off, G64, G32, node, k, t._data.shape)
                if g is None:
                    continue
                if t._h >= 0:
                    t.retain_grad()
                else:
                    _accumulate(t, g)
                    if t._post_hooks:
                        post_accumulate([t])
        _retained_grads(tape, state, buf_off, G64, G32)
    finally:
        tape.release_grad_arenas(owned)


def _retained_grads(tape, state, buf_off, G64, G32):
    """torch's retains_grad hooks: a non-leaf that retains grad gets its gradient added to
    ``.grad`` whenever the backward reaches its node, to run it or to capture it (also under
    grad(), which otherwise leaves ``.grad`` alone)."""
    for node, outs in list(tape.retained.items()):
        if node < len(state) and state[node]:
            for k, ref in list(outs.items()):
                t = ref()
                if t is None:
                    del outs[k]
                    continue
                g = _buffer(tape, state, buf_off, G64, G32, node, k, t._data.shape)
                _accumulate(t, g)


def _unused_inputs(targets, result, allow_unused, materialize_grads, create_graph):
    """grad()'s inputs no gradient reached (None in ``result``): torch 2.13's error, or
    zeros (``zeros_like(input, requires_grad=create_graph)``) with materialize_grads."""
    for i, (t, g) in enumerate(zip(targets, result, strict=True)):
        if g is not None:
            continue
        if not allow_unused:
            # (older torch releases said "One of the differentiated Tensors")
            raise RuntimeError(
                f"The differentiated Tensor at index {i} appears to not have been used in the "
                "graph. Set allow_unused=True if this is the desired behavior."
            )
        if materialize_grads:
            result[i] = _wrap(np.zeros_like(t._data), create_graph)


@_graph_task
@_on_roots_tape(roots_name="outputs")
def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    only_inputs=True,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
):
    """Gradients of ``outputs`` with respect to ``inputs``, returned (``.grad`` untouched).

    As ``torch.autograd.grad``: unreachable inputs give None with ``allow_unused=True`` and
    raise otherwise; ``materialize_grads=True`` turns them into zeros. With
    ``is_grads_batched=True`` the first dimension of every ``grad_outputs`` tensor is a batch
    of cotangents and each result has that batch dimension first (one backward per cotangent
    here, where torch uses vmap: the same results).
    """
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    if is_grads_batched:
        return _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)  # fmt: skip
    as_dict = isinstance(inputs, dict)
    keys = list(inputs.keys()) if as_dict else None
    roots = _as_tuple(outputs)
    targets = _as_tuple(inputs)
    if not targets:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    for t in targets:
        if not isinstance(t, Tensor):
            raise TypeError(f"grad(): expected Tensors as inputs, got {type(t).__name__}")
        if not t._rg:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    grads = _as_tuple(grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph:
        result = higher_order.execute(roots, grads, retain_graph, targets, accumulate=False)
        _unused_inputs(targets, result, allow_unused, materialize_grads, True)
        return dict(zip(keys, result, strict=True)) if as_dict else tuple(result)
    before_hooks = {}
    tape, state, buf_off, G64, G32, target_edges, tails, owned = _execute(
        roots, grads, retain_graph, targets, before_hooks=before_hooks
    )
    undefined = tails[3]
    try:
        result = []
        for t, (node, k) in zip(targets, target_edges, strict=True):
            if undefined and (node, k) in undefined:
                result.append(None)
                continue
            result.append(_captured(tape, state, buf_off, G64, G32, t, node, k, before_hooks))
        _unused_inputs(targets, result, allow_unused, materialize_grads, False)
        if tape.retained:
            _retained_grads(tape, state, buf_off, G64, G32)
    finally:
        tape.release_grad_arenas(owned)
    if as_dict:
        return dict(zip(keys, result, strict=True))
    return tuple(result)


def _one_batched_walk(roots, targets, grads, batch, create_graph, allow_unused):
    """grad(is_grads_batched=True) as one create_graph backward whose formulas run on the
    whole batch of cotangents (torch vmaps its backward); None where that does not pay or a
    formula has no batching rule (then one backward per cotangent runs)."""
    if batch < 2 or not batched_walk_pays(roots, batch):
        return None
    from .._batching import BatchedTensor, Unbatchable, batched_mode, new_level

    if any(type(g) is BatchedTensor for g in grads):  # (inside a vmap: one per cotangent)
        return None
    level = new_level()
    try:
        with batched_mode():
            found = grad(
                roots,
                targets,
                [BatchedTensor(g, level) for g in grads],
                retain_graph=True,  # (a rule may be missing half-way: the loop then runs)
                create_graph=True,
                allow_unused=True,
            )
    except Unbatchable as e:
        _log.debug("grad(is_grads_batched=True): %s has no batching rule; one backward per "
                   "cotangent", e)  # fmt: skip
        return None
    result = []
    for r, t in zip(found, targets, strict=True):
        if r is None:
            result.append(None)
            continue
        if type(r) is BatchedTensor and r._level != level:
            _log.debug("grad(is_grads_batched=True): a gradient of another batch; one "
                       "backward per cotangent")  # fmt: skip
            return None
        r = r._p if type(r) is BatchedTensor else r.unsqueeze(0).expand(batch, *t.shape)
        result.append(r if create_graph else r.detach())
    if not allow_unused and any(r is None for r in result):
        return None  # (the loop raises the error for it)
    return result


def _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):  # fmt: skip
    """grad(is_grads_batched=True): one grad() per cotangent of the batch, stacked."""
    roots = _as_tuple(outputs)
    grads = _as_tuple(grad_outputs) or (None,) * len(roots)
    for i, (g, o) in enumerate(zip(grads, roots, strict=False)):
        if g is None:
            if o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            raise ValueError(
                "vmap(vjp, in_dims=0, ...)(<inputs>): Got in_dim=0 for some input, but that "
                "input is a Tensor of dimensionality 0 so expected in_dim to satisfy "
                "0 <= in_dim < 0."
            )
        if tuple(g.shape[1:]) != tuple(o.shape) or g.ndim == 0:
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions are "
                "expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{i}] has a shape of {type(g.shape)(g.shape[1:])} and "
                f"output[{i}] has a shape of {o.shape}. If you only want some tensors in "
                "`grad_output` to be considered batched, consider using vmap."
            )
    sizes = [g.shape[0] for g in grads]
    if len(set(sizes)) > 1:
        raise ValueError(
            "vmap: Expected all tensors to have the same size in the mapped dimension, got "
            f"sizes {sizes} for the mapped dimension"
        )
    if sizes[0] == 0:
        raise IndexError("index 0 is out of bounds for dimension 0 with size 0")
    if retain_graph is None:
        retain_graph = create_graph
    as_dict = isinstance(inputs, dict)
    targets = _as_tuple(inputs)
    result = _one_batched_walk(roots, targets, grads, sizes[0], create_graph, allow_unused)
    if result is not None:
        _unused_inputs(targets, result, allow_unused, materialize_grads, create_graph)
        return dict(zip(inputs.keys(), result, strict=True)) if as_dict else tuple(result)
    per_b = []
    for b in range(sizes[0]):
        last = b == sizes[0] - 1
        per_b.append(
            grad(
                roots,
                targets,
                [g[b] for g in grads],
                retain_graph=retain_graph or not last,
                create_graph=create_graph,
                allow_unused=allow_unused,
            )
        )
    from ..kernels.shape import stack  # (an op: recorded under create_graph)
    from ..tensor import apply

    result = []
    for i in range(len(targets)):
        column = [r[i] for r in per_b]
        result.append(None if column[0] is None else apply(stack, column))
    # (torch's materialize_grads gives the unbatched zeros here)
    _unused_inputs(targets, result, allow_unused, materialize_grads, create_graph)
    if as_dict:
        return dict(zip(inputs.keys(), result, strict=True))
    return tuple(result)
