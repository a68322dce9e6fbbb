"""torch.nn.functional: the nn-style ops of the op table (those declared nn_functional)."""

import inspect
import warnings

from ..tensor import NN_FUNCTIONAL

globals().update(NN_FUNCTIONAL)
for _f in NN_FUNCTIONAL.values():
    if _f.__module__ == "nautograd.tensor":  # (not also a function of nautograd)
        _f.__module__ = __name__
__all__ = sorted(NN_FUNCTIONAL)


def _with_inplace(name):
    """``F.name`` with torch's ``inplace`` flag: the result written into ``input`` (an
    in-place op, recorded as autograd/inplace.py says) and ``input`` returned. The flag
    follows the op's attributes, positionally too (``F.relu(x, True)``, as torch)."""
    f = NN_FUNCTIONAL[name]
    sig = inspect.signature(f)
    own = "inplace" in sig.parameters  # (dropout's frontend names it, and ignores it)
    # the positional arguments that make the last one the flag, input included
    n = len([p for p in sig.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD])
    n -= own

    def g(input, *args, inplace=False, **kwargs):
        if len(args) == n:
            *args, inplace = args
        if not inplace:
            return f(input, *args, **kwargs)
        from ..autograd import inplace as _inplace

        operands = (*args, *kwargs.values())
        return _inplace.run(input, name, operands, lambda x: f(x, *args, **kwargs))

    g.__name__ = g.__qualname__ = name
    g.__doc__ = f.__doc__
    if own:
        g.__signature__ = sig
    else:
        P = inspect.Parameter
        inplace = P("inplace", P.POSITIONAL_OR_KEYWORD, default=False)
        g.__signature__ = sig.replace(parameters=[*sig.parameters.values(), inplace])
        g.__doc__ += "\n    inplace (bool): write the result into input. Default: False."
    return g


for _name in ("relu", "elu", "leaky_relu", "hardtanh", "silu", "dropout"):
    globals()[_name] = _with_inplace(_name)


def _with_implicit_dim(name):
    """``F.name`` whose ``dim`` may be left out: torch's deprecated choice (0 for 0-, 1- and
    3-dimensional input, else 1), with its warning."""
    f = NN_FUNCTIONAL[name]

    def g(input, dim=None, _stacklevel=3, dtype=None):
        if dim is None:
            warnings.warn(
                f"Implicit dimension choice for {name} has been deprecated. Change the call to "
                "include dim=X as an argument.",
                UserWarning,
                stacklevel=2,
            )
            dim = 0 if input.dim() in (0, 1, 3) else 1
        if dtype is not None:
            input = input.to(dtype)
        return f(input, dim)

    g.__name__ = g.__qualname__ = name
    g.__doc__ = (
        f.__doc__.replace(
            "dim (int or tuple of int, optional): the dimension(s) to work along; negative counts "
            "from the end.",
            "dim (int, optional): the dimension to work along (left out: torch's deprecated "
            "implicit choice, with its warning).",
        )
        + "\n    dtype (dtype, optional): the dtype input is cast to first."
    )
    g.__signature__ = inspect.signature(g).replace(
        parameters=[p for p in inspect.signature(g).parameters.values() if p.name != "_stacklevel"]
    )
    return g


for _name in ("softmax", "log_softmax"):
    globals()[_name] = _with_implicit_dim(_name)
del _name
