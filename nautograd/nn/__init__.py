"""torch.nn: modules, parameters, initialisation, functional ops and utilities."""

from . import functional, init, utils  # noqa: F401
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
