"""Tensor hooks. On a non-leaf they flag its node PY, so the compiled scheduler hands the node
to Python (in heap order) before running it; on a leaf they run before accumulation."""

import numpy as np

from ..graph.tape import PY


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters (calling it twice is fine)."""

    def __init__(self, hooks, fn):
        self._hooks = hooks
        self._fn = fn

    def remove(self):
        for i, f in enumerate(self._hooks):
            if f is self._fn:
                del self._hooks[i]
                return

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_tensor_hook(t, hook):
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if t._h < 0:
        if t._hooks is None:
            t._hooks = []
        t._hooks.append(hook)
        return RemovableHandle(t._hooks, hook)
    tape = t._tape
    with tape.lock:  # (another thread may be running a backward on this tape)
        tape.flush()
        node = tape.h2node[t._h]
        per_output = tape.hooks.setdefault(node, {})
        shape, fns = per_output.setdefault(t._out, (t._data.shape, []))
        fns.append(hook)
        tape.flags[node] |= PY
    return RemovableHandle(fns, hook)


def run_hooks(fns, grad):
    """Apply hooks in registration order to a copy of the array ``grad``; returns an array."""
    from ..tensor import _wrap

    return run_tensor_hooks(fns, _wrap(np.array(grad, copy=True)))._data


def run_tensor_hooks(fns, value):
    """Apply hooks in registration order to the tensor ``value``; a returned tensor replaces
    it (under create_graph the hooks' ops are recorded). ``value`` None: an undefined
    gradient, handed to the hooks as None (torch)."""
    from ..tensor import Tensor, _wrap

    for fn in list(fns):
        result = fn(value)
        if result is None:
            continue
        if not isinstance(result, Tensor):
            result = _wrap(np.asarray(result, None if value is None else value._data.dtype))
        if value is not None and result.shape != value.shape:
            raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the size of value")
        value = result
    return value


def _hook_name(fn):
    return getattr(fn, "__name__", repr(fn))


def _checked(fn, result, values):
    """A node hook's returned tuple, checked as torch checks it against ``values`` (the
    gradients it replaces)."""
    from ..tensor import Tensor

    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != len(values):
        raise RuntimeError(
            f"hook '{_hook_name(fn)}' has returned an incorrect number of values (got "
            f"{len(result)}, but expected {len(values)})"
        )
    for new, old in zip(result, values, strict=True):
        if new is None:
            continue
        if old is None:
            raise RuntimeError("can't replace a None gradient with a non-None value")
        if not isinstance(new, Tensor) or new.shape != old.shape:
            raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the size of value")
    return result


def run_node_prehooks(fns, grad_outputs):
    """``Node.register_prehook``'s hooks, in registration order: each may replace the
    node's output gradients (a tuple of tensors, None where undefined)."""
    for fn in list(fns):
        result = fn(grad_outputs)
        if result is not None:
            grad_outputs = _checked(fn, result, grad_outputs)
    return grad_outputs


def run_node_posthooks(fns, grad_inputs, grad_outputs):
    """``Node.register_hook``'s hooks, in registration order: each may replace the gradients
    the node passes on (``grad_inputs``, one per next function, None where none flows)."""
    for fn in list(fns):
        result = fn(grad_inputs, grad_outputs)
        if result is not None:
            grad_inputs = _checked(fn, result, grad_inputs)
    return grad_inputs
