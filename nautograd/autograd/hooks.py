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
            name = getattr(fn, "__name__", repr(fn))
            raise RuntimeError(f"hook '{name}' has changed the size of value")
        value = result
    return value
