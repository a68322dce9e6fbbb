"""``torch.autograd.Variable``: the deprecated wrapper, kept for old code. Every Tensor is a
Variable (``isinstance(t, Variable)``); ``Variable(t, requires_grad)`` is a new leaf sharing
``t``'s memory and version counter."""

from ..tensor import Tensor
from . import engine


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class _ExecutionEngine:
    """``Variable._execution_engine``: torch's handle on its autograd engine, for the one
    method programs call on it."""

    @staticmethod
    def queue_callback(callback):
        """Run ``callback()`` when the running backward has finished."""
        engine.queue_callback(callback)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False)``: ``data.detach()``, requiring grad if asked."""

    _execution_engine = _ExecutionEngine()

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        t = data.detach()
        if requires_grad:
            t.requires_grad = True
        return t
