"""Op kernels. Each op is declared once, with ``defop`` (see registry.py)."""

from . import elementwise, linalg, nn, reduce, shape  # noqa: F401  (registers the ops)
from .registry import OPS, OP_BY_NAME  # noqa: F401
