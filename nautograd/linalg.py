"""torch.linalg: the linear-algebra ops of the op table (those declared with linalg names)."""

from .tensor import LINALG

globals().update(LINALG)
for _f in LINALG.values():
    if _f.__module__ == "nautograd.tensor":  # (not also a function of nautograd)
        _f.__module__ = __name__
__all__ = sorted(LINALG)
