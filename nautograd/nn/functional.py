"""torch.nn.functional: the nn-style ops of the op table (those declared nn_functional)."""

from ..tensor import NN_FUNCTIONAL

globals().update(NN_FUNCTIONAL)
__all__ = sorted(NN_FUNCTIONAL)
