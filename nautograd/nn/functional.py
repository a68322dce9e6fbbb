"""torch.nn.functional: the nn-style ops of the op table (those declared nn_functional)."""

import inspect

from ..tensor import NN_FUNCTIONAL

globals().update(NN_FUNCTIONAL)
for _f in NN_FUNCTIONAL.values():
    if _f.__module__ == "nautograd.tensor":  # (not also a function of nautograd)
        _f.__module__ = __name__
__all__ = sorted(NN_FUNCTIONAL)


def _with_inplace(name):
    """``F.name`` with torch's ``inplace`` flag: the result written into ``input`` (an
    in-place op, recorded as autograd/inplace.py says) and ``input`` returned."""
    f = NN_FUNCTIONAL[name]

    def g(input, *args, inplace=False, **kwargs):
        if not inplace:
            return f(input, *args, **kwargs)
        from ..autograd import inplace as _inplace

        operands = (*args, *kwargs.values())
        return _inplace.run(input, name, operands, lambda x: f(x, *args, **kwargs))

    g.__name__ = g.__qualname__ = name
    g.__doc__ = f.__doc__
    sig = inspect.signature(f)
    if "inplace" not in sig.parameters:
        P = inspect.Parameter
        g.__signature__ = sig.replace(
            parameters=[*sig.parameters.values(), P("inplace", P.KEYWORD_ONLY, default=False)]
        )
        g.__doc__ += "\n    inplace (bool): write the result into input. Default: False."
    else:
        g.__signature__ = sig
    return g


for _name in ("relu", "elu", "leaky_relu", "hardtanh", "silu", "dropout"):
    globals()[_name] = _with_inplace(_name)
del _name
