"""torch.nn surface (functional only for now)."""

from . import functional  # noqa: F401
