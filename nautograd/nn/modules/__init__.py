"""torch.nn's modules."""

import sys as _sys

from .activation import *  # noqa: F403
from .container import (  # noqa: F401
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from .conv import *  # noqa: F403
from .layers import *  # noqa: F403
from .loss import *  # noqa: F403
from .module import Module  # noqa: F401
from .rnn import *  # noqa: F403

__all__ = sorted(
    n
    for n, v in vars(_sys.modules[__name__]).items()
    if isinstance(v, type) and n[0] != "_" and v.__module__.startswith("nautograd.nn")
)
