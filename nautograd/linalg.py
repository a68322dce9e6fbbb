"""torch.linalg: the linear-algebra ops of the op table (those declared with linalg names)."""

from .tensor import LINALG

globals().update(LINALG)
__all__ = sorted(LINALG)
