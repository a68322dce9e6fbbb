"""What every backward starts with, compiled or create_graph: the roots checked, their
gradients made (PyTorch's _make_grads), and the tape edges of the roots and targets."""

import numpy as np

from ..graph.tape import current_tape
from ..tensor import (
    BATCHED,
    BATCHED_ON,
    FORWARD_AD,
    Tensor,
    _accumulator,
    _accumulator_on,
    _Lazy,
    _wrap,
)

# scheduler.prepare's size bound for leaves that get a gradient buffer of their own, when
# none does (read once: np.iinfo per backward cost ~5 us)
NO_OWN_BUFFER = int(np.iinfo(np.int64).max)


def _size(shape):
    return f"torch.Size({list(shape)})"


_ONES = {}


def _ones(dt):
    a = _ONES[dt] = np.ones(1, dt)
    a.flags.writeable = False
    return a


def _make_grads(roots, grads, as_tensors):
    """The root gradients in each root's dtype: flat arrays, or with ``as_tensors`` tensors
    (a tensor the user gave stays as it is, so a gradient that requires grad is
    differentiated through under create_graph)."""
    if grads is None:
        grads = (None,) * len(roots)
    if len(grads) != len(roots):
        raise RuntimeError(
            "grad can be implicitly created only for scalar outputs"
            if not grads
            else f"Mismatch in number of grad_outputs: got {len(grads)} for {len(roots)} outputs"
        )
    out = []
    for i, (t, g) in enumerate(zip(roots, grads, strict=True)):
        dt = t._data.dtype
        if g is None:
            if t._data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if as_tensors:
                out.append(_wrap(np.ones(t._data.shape, dt)))
            else:  # only read (copied into the arena): one read-only array per dtype
                out.append(_ONES[dt] if dt in _ONES else _ones(dt))
            continue
        # (a batch of cotangents, one per sample, only under as_tensors: see prepare)
        batched = type(g) is BATCHED[0]
        a = g if batched else g._data if isinstance(g, Tensor) else np.asarray(g)
        if tuple(a.shape) != t._data.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {_size(a.shape)} and "
                f"output[{i}] has a shape of {_size(t._data.shape)}."
            )
        if not as_tensors:
            out.append(np.asarray(a, dtype=dt).reshape(-1))
        elif not batched and not isinstance(g, Tensor):
            out.append(_wrap(np.asarray(a, dtype=dt)))
        else:
            out.append(g if a.dtype == dt else g.to(dt))
    return out


def edge(tape, t):
    """(node, output_nr) of ``t`` on ``tape``; node -1 when ``t`` never entered the graph."""
    if t._h >= 0:
        if t._tape is not tape:
            raise RuntimeError("backward(): the tensors were recorded on different threads' tapes")
        return tape.h2node[t._h], t._out
    return _accumulator_on(tape, t), 0


def roots_tape(roots):
    """The tape a backward from ``roots`` runs on: the first recorded root's (whichever
    thread recorded it), else this thread's (roots that are all leaves)."""
    for t in roots:
        if isinstance(t, Tensor) and t._rg and (type(t) is _Lazy or t._h >= 0):
            return t._tape
    return current_tape()


def prepare(roots, grads, targets, as_tensors=False):
    """Check the roots and make their gradients; returns (tape, root gradients, root edges,
    target edges or None) with the tape flushed."""
    for t in (*roots, *(targets or ())):
        if type(t) is BATCHED[0]:  # (autograd called inside vmap: vmap runs per sample)
            raise BATCHED[3]("autograd.grad / backward of a batched value")
    if grads is not None and any(type(g) is BATCHED[0] for g in grads):
        # a batch of cotangents (func.jacrev, vmap over a vjp): the create_graph walk runs
        # its formulas on them, each op once for the batch; the compiled backward cannot
        if not (as_tensors and targets is not None and BATCHED_ON[0]):
            raise BATCHED[3]("a batch of cotangents outside a batched create_graph grad()")
    for i, t in enumerate(roots):
        if not isinstance(t, Tensor):
            raise TypeError(f"backward(): expected Tensors as roots, got {type(t).__name__}")
        if not t._rg:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
    if FORWARD_AD[0] and not as_tensors and any("_fw" in t.__dict__ for t in roots):
        raise NotImplementedError(
            "backward from a tensor that carries a forward-mode tangent (forward over "
            "reverse) runs through create_graph=True only: the compiled backward does not "
            "carry tangents"
        )
    root_grads = _make_grads(roots, grads, as_tensors)
    tape = roots_tape(roots)
    tape.reserve(len(roots) + 1)
    for t in roots:
        if t._h < 0:  # a leaf root: its gradient goes straight to its AccumulateGrad
            _accumulator(tape, t)
    root_edges = [edge(tape, t) for t in roots]
    target_edges = [edge(tape, t) for t in targets] if targets is not None else None
    tape.flush()
    return tape, root_grads, root_edges, target_edges
