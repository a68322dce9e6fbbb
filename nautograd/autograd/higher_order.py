"""``create_graph=True``: the backward pass recorded as differentiable ops.

Each op's compiled backward kernel computes numbers only; under ``create_graph`` the engine
instead calls the op's *formula* (``Op.formula``, declared next to its kernel in
``kernels/*.py``): the same derivative written with nautograd ops, so the gradients it
returns are themselves recorded and can be differentiated again.

The walk is Python, in heap order: node ids are sequence numbers and every edge points to a
smaller id, so visiting the reachable nodes by descending id runs each node after all of its
consumers, as the compiled scheduler does. A formula reads what the node saved as tensors
attached to the graph where the value came from: ``ctx.input(j, k)`` is saved value ``k`` as
input ``j`` of the node (its gradient flows along the node's edge ``j``), ``ctx.output(i, k)``
as the node's own output ``i`` (its gradient flows back into the node: torch's saved
outputs). Gradients reaching one buffer from several consumers are summed with a recorded
``add``, as torch's InputBuffer does under grad mode.
"""

import warnings

import numpy as np

from ..graph import scheduler
from ..graph.tape import (
    ACC,
    ANOMALY,
    F32,
    HAS_SAVED,
    PY,
    RELEASED,
    address_of,
    recording_on,
    restore_recording,
)
from ..kernels import OPS
from ..kernels.registry import kernel_table
from ..tensor import FORWARD_AD, FUNCTIONS, Tensor, _wrap
from . import forward_ad
from ._errors import RELEASED_MSG, modified_inplace
from ._roots import NO_OWN_BUFFER, prepare
from .anomaly_mode import check_nan, warn_failed
from .function import FunctionCtx
from .grad_mode import _state as _grad_state
from .hooks import run_node_posthooks, run_node_prehooks, run_tensor_hooks

W2 = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break the "
    "cycle and avoid the leak."
)


def sum_to(g, shape):
    """Sum the broadcast gradient tensor ``g`` down to ``shape`` (torch's sum_to), recorded."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(dim=tuple(range(lead)))
    dims = tuple(d for d, n in enumerate(shape) if n == 1 and g.shape[d] != 1)
    if dims:
        g = g.sum(dim=dims, keepdim=True)
    return g.reshape(shape)


class FormulaCtx:
    """What a formula sees of its node: shapes, attributes, saved values as graph tensors."""

    def __init__(self, tape, node, input_shapes, output_shapes, edges, needs):
        self._tape = tape
        self._node = node
        self.input_shapes = input_shapes
        self.output_shapes = output_shapes
        self.kwargs = tape.kwargs.get(node, {})
        self._edges = edges  # [(node or -1, input_nr)] per input
        self.needs_input_grad = needs
        self._saved = None

    @property
    def dtype(self):
        return np.float32 if self._tape.flags[self._node] & F32 else np.float64

    @property
    def ip(self):
        """The node's integer attributes (what the compiled kernel reads)."""
        t, i = self._tape, self._node
        s = int(t.ip_start[i])
        return tuple(t.iparams[s : s + int(t.ip_len[i])].tolist())

    @property
    def fp(self):
        """The node's float attributes."""
        t, i = self._tape, self._node
        s = int(t.fp_start[i])
        return tuple(t.fparams[s : s + int(t.fp_len[i])].tolist())

    def saved(self, k):
        """Saved value ``k`` as a flat numpy array (a copy of an arena value, or the array
        kept by address)."""
        if self._saved is None:
            t, i = self._tape, self._node
            s0, s1 = t.saved_ptr[i : i + 2].tolist()
            offs = t.saved_off[s0:s1].tolist()
            lens = t.saved_addr[s0:s1].tolist()
            kept = t.obj[i]
            if kept is None:  # a deferred node: its version entries keep them (by address)
                # (the first entry at an address: the batch kept that import by address, and
                # a later one there of another size as a copy, tensor.py _import_new)
                by_address = {}
                for e in t.versions.get(i, ()):
                    by_address.setdefault(address_of(e[2]), e[2])
                kept = [by_address[m] for off, m in zip(offs, lens, strict=True) if off < 0]
            kept = iter(kept)
            V = t.v32 if t.flags[i] & F32 else t.v64
            out = []
            for off, m in zip(offs, lens, strict=True):
                out.append(next(kept).reshape(-1) if off < 0 else V[off : off + m].copy())
            self._saved = out
        return self._saved[k]

    def _value(self, k, shape):
        return (self.saved(k) if isinstance(k, int) else np.asarray(k)).reshape(shape)

    def input(self, j, k):
        """Saved value ``k`` (or the array ``k``) as input ``j`` of the node: a tensor of the
        input's shape whose gradient flows along the node's edge ``j`` (a constant if that
        input needs none)."""
        node, nr = self._edges[j]
        return _attached(self._tape, node, nr, self._value(k, self.input_shapes[j]))

    def output(self, i, k):
        """Saved value ``k`` (or the array ``k``) as the node's output ``i``: its gradient
        flows back into this node (torch's saved outputs)."""
        return _attached(self._tape, self._node, i, self._value(k, self.output_shapes[i]))

    def constant(self, a):
        """A tensor holding ``a`` that needs no gradient."""
        return _wrap(np.asarray(a, dtype=self.dtype))

    @staticmethod
    def sum_to(g, shape):
        return sum_to(g, shape)

    @property
    def ng(self):
        import nautograd

        return nautograd


def _attached(tape, node, nr, value):
    """A tensor with ``value`` standing for output ``nr`` of ``node`` in the graph (with
    the tangent it had when recorded, under forward AD: forward over reverse)."""
    if node < 0:
        return _wrap(value)
    t = _wrap(value, True)
    t._tape = tape
    t._h = tape.new_handle(node)
    t._out = nr
    if FORWARD_AD[0]:
        tangent = forward_ad.saved_tangent(tape, node, nr)
        if tangent is not None:
            forward_ad.attach_tangent(t, tangent)
    return t


def _saved_attacher(tape, node, children, nrs):
    """A custom Function's saved inputs and outputs, attached where they sit in the graph."""

    def attach(role, t):
        kind, k = role
        if kind == "out":
            return _attached(tape, node, k, t._data)
        return _attached(tape, children[k], nrs[k], t._data)

    return attach


def _accumulate(t, g):
    """AccumulateGrad under grad mode: the first gradient is cloned, later ones added out of
    place, so ``.grad`` is itself differentiable (torch's case 3)."""
    if t._hooks:
        g = run_tensor_hooks(t._hooks, g)
    acc_hooks = t._acc_hooks if t._h < 0 else None
    if acc_hooks:
        (g,) = run_node_prehooks(acc_hooks["pre"], (g,))
    if g is not None:
        if t._grad is None:
            t._grad = g.clone() if g._rg else _wrap(g._data.copy())
        else:
            t._grad = t._grad + g
    if t._post_hooks and t._h < 0:
        from .engine import post_accumulate

        post_accumulate([t])
    if acc_hooks:
        run_node_posthooks(acc_hooks["post"], (), (g,))


def execute(roots, grads, retain_graph, targets, accumulate):
    """The create_graph backward from ``roots``. Returns the gradient (a tensor or None) of
    each target; with ``accumulate``, leaves (only the targets, if given) get ``.grad``."""
    tape, root_grads, root_edges, target_edges = prepare(roots, grads, targets, True)
    state = _grad_state
    enabled = state.enabled
    state.enabled = True
    # another thread's graph (the caller holds its tape's lock): the formulas record there
    before = recording_on(tape) if tape is not state.tape else None
    state.recording = state.tape
    tape.running += 1  # node ids stay put while the formulas record
    try:
        return _walk(tape, roots, root_edges, root_grads, targets, target_edges, retain_graph,
                     accumulate)  # fmt: skip
    finally:
        tape.running -= 1
        state.enabled = enabled
        state.recording = state.tape if enabled else None  # (as grad_mode._set)
        if before is not None:
            restore_recording(before)


def _walk(tape, roots, root_edges, root_grads, targets, target_edges, retain, accumulate):
    n = tape.n
    # reachability and selective execution (exec_info) by the compiled engine's own pass:
    # state 1 runs, 2 is a grad() target that does not run, 0 is not reached / not needed
    if target_edges is None:
        mode, tnodes = 0, np.zeros(0, np.int64)
    else:
        mode = 1
        tnodes = np.array([e[0] for e in target_edges if e[0] >= 0], np.int64)
    root_nodes = np.array([e[0] for e in root_edges], np.int64)
    state = scheduler.prepare(
        n, root_nodes, tnodes, mode, tape.flags, tape.edge_ptr, tape.edge_node,
        tape.edge_input_nr, tape.out_ptr, tape.out_numel, NO_OWN_BUFFER, tape.op,
        kernel_table(),
    )[0]  # fmt: skip
    order = np.flatnonzero(state)[::-1].tolist()
    captured = {}
    want = {e for e in target_edges if e[0] >= 0} if target_edges is not None else ()
    buffers = {}
    for (node, k), g in zip(root_edges, root_grads, strict=True):
        c = int(tape.out_ptr[node + 1] - tape.out_ptr[node])
        buf = buffers.setdefault(node, [None] * c)
        buf[k] = g if buf[k] is None else buf[k] + g
    edge_ptr, edge_node, edge_nr = tape.edge_ptr, tape.edge_node, tape.edge_input_nr
    out_ptr, flags, opcodes = tape.out_ptr, tape.flags, tape.op
    obj = tape.obj
    for node in order:
        grads = buffers.pop(node, None)
        if grads is None:
            continue
        f = int(flags[node])
        dt = np.float32 if f & F32 else np.float64
        hooks = tape.hooks.get(node)
        e0, e1 = int(edge_ptr[node]), int(edge_ptr[node + 1])
        children = edge_node[e0:e1].tolist()
        # torch captures a grad() target before the tensor hooks of a node that also runs (on
        # the way to another target), after them when the node is only captured
        runs = state[node] == 1
        if target_edges is not None and runs:
            for k, g in enumerate(grads):
                if (node, k) in want:
                    captured[(node, k)] = g
        if hooks:
            for k, entry in list(hooks.items()):
                if type(k) is not int:  # (the node's own hooks: "pre", "post")
                    continue
                shape, fns = entry
                g = grads[k]
                grads[k] = run_tensor_hooks(fns, _wrap(np.zeros(shape, dt)) if g is None else g)
        if not runs:
            leaf = obj[node]() if f & ACC else None
            for k, g in enumerate(grads):
                if (node, k) in want:
                    if leaf is not None and leaf._hooks and not accumulate and g is not None:
                        g = run_tensor_hooks(leaf._hooks, g)  # (backward() runs them below)
                    captured[(node, k)] = g
        if f & ACC:
            leaf = obj[node]()
            if accumulate and leaf is not None and leaf._rg and grads[0] is not None:
                if targets is None or any(leaf is x for x in targets):
                    _accumulate(leaf, grads[0])
            continue
        if node in tape.retained:
            # torch's retains_grad hooks: whenever the walk reaches the node (also under grad())
            for k, ref in list(tape.retained[node].items()):
                t = ref()
                if t is not None and grads[k] is not None:
                    _accumulate(t, grads[k])
        if not runs:
            continue  # a target itself: captured, not run
        if hooks and "packed" in hooks:  # saved under saved_tensors_hooks
            from .engine import unpack_saved

            unpack_saved(tape, node, hooks, retain)
        if hooks and hooks.get("pre"):
            grads = list(run_node_prehooks(hooks["pre"], tuple(grads)))
        try:
            if f & RELEASED and f & HAS_SAVED:
                raise RuntimeError(RELEASED_MSG)
            for vc, version, a in tape.versions.get(node, ()):
                if vc[0] != version:
                    raise modified_inplace(a.shape, a.dtype, vc[0], version)
            nrs = edge_nr[e0:e1].tolist()
            needs = tuple([c >= 0 and state[c] != 0 for c in children])
            ctx = obj[node]
            if f & PY and isinstance(ctx, FunctionCtx):
                ctx._attach = _saved_attacher(tape, node, children, nrs)
                try:
                    results = ctx._run_backward(grads, create_graph=True)
                finally:
                    ctx._attach = None
                shapes = None
            else:
                op = OPS[int(opcodes[node]) - 1]
                if op.formula is None:
                    raise NotImplementedError(
                        f"create_graph=True: {op.node_name} (the backward of {op.name}) has no "
                        "differentiable formula yet, so it cannot be differentiated twice"
                    )
                shapes = tape.meta[node]
                if len(children) == 1:
                    shapes = (shapes,)
                outs = tape.out_shapes.get(node)
                if outs is None:
                    outs = (grads[0].shape,)  # one output: a node runs only with its gradient
                else:
                    grads = [
                        _wrap(np.zeros(s, dt)) if g is None else g
                        for g, s in zip(grads, outs, strict=True)
                    ]
                edges = list(zip(children, nrs, strict=True))
                results = op.formula(FormulaCtx(tape, node, shapes, outs, edges, needs), *grads)
                if not isinstance(results, (tuple, list)):
                    results = (results,)
            if ANOMALY.enabled:
                check_nan(tape, node, [None if g is None else g._data for g in results])
        except BaseException:
            if ANOMALY.enabled:
                warn_failed(tape, node)
            raise
        if hooks and hooks.get("post"):
            results = run_node_posthooks(
                hooks["post"],
                tuple(g if j < len(needs) and needs[j] else None for j, g in enumerate(results)),
                tuple(grads),
            )
        for j, (g, c, nr) in enumerate(zip(results, children, nrs, strict=True)):
            if g is None or c < 0 or not needs[j]:
                continue
            if shapes is not None and g.shape != shapes[j]:
                name = OPS[int(opcodes[node]) - 1].name
                raise RuntimeError(
                    f"internal error: the create_graph formula of {name} "
                    f"gave input {j} a gradient of shape {g.shape}, expected {shapes[j]}"
                )
            buf = buffers.get(c)
            if buf is None:
                buf = buffers[c] = [None] * int(out_ptr[c + 1] - out_ptr[c])
            buf[nr] = g if buf[nr] is None else buf[nr] + g
        if not retain:
            tape.flags[node] |= RELEASED
            if f & PY and isinstance(ctx, FunctionCtx):
                ctx._release()
            else:  # (AccumulateGrad nodes never get here)
                obj[node] = None
                tape.versions.pop(node, None)
    if target_edges is None:
        return None
    return [captured.get(e) if e[0] >= 0 else None for e in target_edges]


def warn_backward():
    warnings.warn(W2, UserWarning, stacklevel=3)


def formula_where(condition, a, b):
    """``where`` for derivatives written in the scalar vocabulary (kernels/scalar.py): a
    condition that needs no gradient and holds everywhere (or nowhere) selects one side
    without recording an op (softplus below its threshold, relu's sign), one op fewer per
    formula: the formulas' ops run one by one from Python."""
    if isinstance(condition, Tensor) and not condition._rg:
        c = condition._data
        if c.all():
            return a
        if not c.any():
            return b
    return FUNCTIONS["where"](condition, a, b)
