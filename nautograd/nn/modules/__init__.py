"""torch.nn's modules."""

from .activation import *  # noqa: F403
from .container import (  # noqa: F401
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from .layers import *  # noqa: F403
from .loss import *  # noqa: F403
from .module import Module  # noqa: F401
