"""Op kernels. Each op is declared once, with ``defop`` (see registry.py)."""

from . import elementwise, functional, index, linalg, nn, pointwise, reduce, shape  # noqa: F401
from .registry import OP_BY_NAME, OPS  # noqa: F401
