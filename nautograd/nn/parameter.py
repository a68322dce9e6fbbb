"""``nn.Parameter`` and ``nn.Buffer``: tensors a Module registers as its state."""

from ..tensor import Tensor, _wrap


class _MarkMeta(type):
    # A Parameter is a plain Tensor carrying a mark, not an instance of a subclass: the op
    # dispatch's fast paths test ``type(x) is Tensor`` (tensor.py apply, the deferred
    # forward), and a subclass would send every op on a parameter down the general path.
    # isinstance(p, Parameter) reads the mark instead (Buffer likewise).
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and cls._marked(obj)


class Parameter(metaclass=_MarkMeta):
    """``nn.Parameter(data=None, requires_grad=True)``: a leaf tensor sharing ``data``'s memory
    (and version counter) that a Module assigned it as an attribute registers as a parameter.
    ``isinstance(p, nn.Parameter)`` is True, ``type(p)`` is ``Tensor``."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            import numpy as np

            t = _wrap(np.empty(0, np.float32))
        elif not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): expected a Tensor as data, got {type(data).__name__}")
        else:
            t = data.detach()
        if requires_grad:
            t.requires_grad = True
        t._is_param = True
        return t

    @staticmethod
    def _marked(t):
        return t._is_param


class Buffer(metaclass=_MarkMeta):
    """``nn.Buffer(data, persistent=True)``: marks a tensor that a Module assigned it as an
    attribute registers as a buffer (in ``state_dict`` unless not persistent)."""

    def __new__(cls, data, persistent=True):
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer(): expected a Tensor as data, got {type(data).__name__}")
        t = data.detach()
        t.persistent = bool(persistent)
        return t

    @staticmethod
    def _marked(t):
        return getattr(t, "persistent", None) is not None
