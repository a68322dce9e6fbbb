"""torch.nn's modules."""

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
