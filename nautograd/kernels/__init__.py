"""Op kernels. Each op is declared once, with ``defop`` (see registry.py)."""

from . import elementwise, index, linalg, nn, pointwise, reduce, shape  # noqa: F401  (registers the ops)
from .registry import OP_BY_NAME, OPS  # noqa: F401
