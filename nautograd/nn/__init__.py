"""torch.nn: modules, parameters, initialisation, functional ops and utilities."""

from . import functional, init, utils  # noqa: F401
from . import modules as _modules  # noqa: E402
from .modules import *  # noqa: F403
from .modules import (  # noqa: F401
    Module,
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from .parameter import Buffer, Parameter  # noqa: F401

__all__ = sorted(
    {"functional", "init", "utils", "Module", "Parameter", "Buffer"} | set(_modules.__all__)
)
