"""torch.nn.functional: the nn-style ops of the op table (those declared nn_functional)."""

from ..kernels import OPS
from ..tensor import FUNCTIONS

__all__ = []
for _op in OPS:
    if _op.nn_functional:
        globals()[_op.name] = FUNCTIONS[_op.name]
        __all__.append(_op.name)
