"""nautograd: PyTorch's autograd engine rebuilt in Python on Numba.

import nautograd as ng
x = ng.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x.exp() * x).sum()
y.backward()            # x.grad
"""

import math as _math

from . import (
    _numba_setup,  # noqa: F401  (cache directory before any cached module)
    autograd,  # noqa: E402  (autograd before tensor: see tensor.py imports)
    cuda,  # noqa: E402
    distributions,  # noqa: E402
    func,  # noqa: E402
    linalg,  # noqa: E402
    nn,  # noqa: E402
    optim,  # noqa: E402
    special,  # noqa: E402
    utils,  # noqa: E402
)
from ._device import device  # noqa: E402
from ._threads import get_num_threads, set_num_threads  # noqa: E402
from .autograd.anomaly_mode import (  # noqa: E402
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
)
from .autograd.grad_mode import (  # noqa: E402
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .creation import (  # noqa: E402
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    Generator,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
    allclose,
    arange,
    as_tensor,
    empty,
    empty_like,
    equal,
    eye,
    finfo,
    from_numpy,
    full,
    full_like,
    get_default_dtype,
    iinfo,
    is_floating_point,
    is_inference,
    is_tensor,
    isclose,
    linspace,
    manual_seed,
    numel,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    set_default_dtype,
    tensor,
    zeros,
    zeros_like,
)
from .tensor import (  # noqa: E402
    FUNCTIONS as _FUNCTIONS,
)
from .tensor import (
    Size,
    Tensor,
    bool_,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
)

float = float32  # noqa: A001  (as torch.float)
double = float64
long = int64
int = int32  # noqa: A001
bool = bool_  # noqa: A001
half = float16

pi = _math.pi
e = _math.e
inf = _math.inf
nan = _math.nan

from .tensor import apply as tensor_apply  # noqa: E402  (run an Op record directly)

globals().update(_FUNCTIONS)
for _f in _FUNCTIONS.values():
    _f.__module__ = __name__  # (made in nautograd.tensor; documented where they are public)

from .kernels import scalar as _scalar  # noqa: E402

# derivatives written in the scalar vocabulary evaluate on tensors under create_graph
_scalar.bind(
    where=autograd.higher_order.formula_where, i1=special.i1, i0e=special.i0e, i1e=special.i1e
)

from . import library  # noqa: E402  (user-defined compiled ops)

__version__ = "0.1.0"

# the public names (the stub nautograd/__init__.pyi lists the same)
__all__ = sorted(n for n in globals() if n[0] != "_" and n not in {"creation", "graph", "kernels"})
