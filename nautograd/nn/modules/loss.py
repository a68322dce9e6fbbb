"""Loss modules: each calls its ``nn.functional`` loss with the arguments it was built
with."""

from .. import functional as F
from .module import Module


class _Loss(Module):
    _fn = None
    _args = ()  # (name, default) beyond ``reduction``

    def __init__(self, *args, reduction="mean", **kwargs):
        super().__init__()
        names = [n for n, _ in self._args]
        values = dict(self._args)
        values.update(zip(names, args, strict=False))
        for k, v in kwargs.items():
            if k in ("size_average", "reduce"):
                raise TypeError(
                    f"{type(self).__name__}(): size_average and reduce are deprecated; "
                    "use reduction="
                )
            if k not in values:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument '{k}'")
            values[k] = v
        if reduction not in ("mean", "sum", "none", "batchmean"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        self.reduction = reduction
        for k, v in values.items():
            if k == "weight" and v is not None:
                self.register_buffer("weight", v)
            else:
                setattr(self, k, v)

    def forward(self, input, target):
        kwargs = {n: getattr(self, n) for n, _ in self._args}
        return getattr(F, self._fn)(input, target, reduction=self.reduction, **kwargs)


def _loss(name, fn, args=(), doc=""):
    return type(name, (_Loss,), {"_fn": fn, "_args": tuple(args), "__doc__": doc})


MSELoss = _loss("MSELoss", "mse_loss", doc="mean squared error")
L1Loss = _loss("L1Loss", "l1_loss", doc="mean absolute error")
HuberLoss = _loss("HuberLoss", "huber_loss", [("delta", 1.0)], "Huber loss")
SmoothL1Loss = _loss("SmoothL1Loss", "smooth_l1_loss", [("beta", 1.0)], "smooth L1 loss")
CrossEntropyLoss = _loss(
    "CrossEntropyLoss", "cross_entropy",
    [("weight", None), ("ignore_index", -100), ("label_smoothing", 0.0)],
    "cross entropy of logits against class indices or probabilities",
)  # fmt: skip
NLLLoss = _loss(
    "NLLLoss", "nll_loss", [("weight", None), ("ignore_index", -100)], "negative log likelihood"
)
BCELoss = _loss("BCELoss", "binary_cross_entropy", [("weight", None)], "binary cross entropy")
BCEWithLogitsLoss = _loss(
    "BCEWithLogitsLoss", "binary_cross_entropy_with_logits", [("weight", None),
    ("pos_weight", None)], "binary cross entropy of logits",
)  # fmt: skip
KLDivLoss = _loss("KLDivLoss", "kl_div", [("log_target", False)], "Kullback-Leibler divergence")

__all__ = ["MSELoss", "L1Loss", "HuberLoss", "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss",
           "BCELoss", "BCEWithLogitsLoss", "KLDivLoss"]  # fmt: skip
