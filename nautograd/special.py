"""torch.special: the special functions of the op table (those declared with special names).

Every function takes tensors of any floating dtype (integers are promoted, as torch's) and is
differentiable, twice and in forward mode, as its op is.
"""

from .tensor import SPECIAL

globals().update(SPECIAL)
for _f in SPECIAL.values():
    if _f.__module__ == "nautograd.tensor":  # (not also a function of nautograd)
        _f.__module__ = __name__
# torch.special's softmax and log_softmax take a dtype, as nn.functional's
from .nn.functional import log_softmax, softmax  # noqa: E402, F401

__all__ = sorted([*SPECIAL, "log_softmax", "softmax"])
