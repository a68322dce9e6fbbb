"""Activation modules: each calls its ``nn.functional`` op with the arguments it was built
with."""

from .. import functional as F
from .module import Module


class _Activation(Module):
    _fn = None
    _args = ()  # (name, default) of the constructor's arguments, passed on to the function

    def __init__(self, *args, **kwargs):
        super().__init__()
        names = [n for n, _ in self._args]
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes at most {len(names)} arguments")
        values = dict(self._args)
        values.update(zip(names, args, strict=False))
        for k, v in kwargs.items():
            if k not in values:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument '{k}'")
            values[k] = v
        for k, v in values.items():
            setattr(self, k, v)

    def forward(self, input):
        kwargs = {n: getattr(self, n) for n, _ in self._args}
        return getattr(F, self._fn)(input, **kwargs)

    def extra_repr(self):
        return ", ".join(
            f"{n}={getattr(self, n)!r}" if isinstance(getattr(self, n), str)
            else f"{n}={getattr(self, n)}"
            for n, d in self._args
            if n != "inplace" or getattr(self, n)
        )  # fmt: skip


def _activation(name, fn, args=(), doc=""):
    return type(name, (_Activation,), {"_fn": fn, "_args": tuple(args), "__doc__": doc})


ReLU = _activation("ReLU", "relu", [("inplace", False)], "max(0, x)")
Tanh = _activation("Tanh", "tanh", doc="tanh(x)")
Sigmoid = _activation("Sigmoid", "sigmoid", doc="1 / (1 + exp(-x))")
SiLU = _activation("SiLU", "silu", [("inplace", False)], "x * sigmoid(x)")
GELU = _activation("GELU", "gelu", [("approximate", "none")], "x * Phi(x)")
ELU = _activation("ELU", "elu", [("alpha", 1.0), ("inplace", False)], "x, or alpha (exp(x) - 1)")
LeakyReLU = _activation(
    "LeakyReLU", "leaky_relu", [("negative_slope", 0.01), ("inplace", False)], "x, or slope x"
)
Softplus = _activation(
    "Softplus", "softplus", [("beta", 1.0), ("threshold", 20.0)], "log(1 + exp(beta x)) / beta"
)
Hardtanh = _activation(
    "Hardtanh", "hardtanh", [("min_val", -1.0), ("max_val", 1.0), ("inplace", False)],
    "x clamped to [min_val, max_val]",
)  # fmt: skip
Softmax = _activation("Softmax", "softmax", [("dim", None)], "exp(x) / sum(exp(x)) along dim")
LogSoftmax = _activation("LogSoftmax", "log_softmax", [("dim", None)], "log of Softmax")

__all__ = ["ReLU", "Tanh", "Sigmoid", "SiLU", "GELU", "ELU", "LeakyReLU", "Softplus",
           "Hardtanh", "Softmax", "LogSoftmax"]  # fmt: skip
