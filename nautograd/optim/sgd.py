"""``torch.optim.SGD`` (torch's single-tensor algorithm)."""

import numpy as np

from ..tensor import _wrap
from .optimizer import Optimizer, _check, required


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov momentum,
    weight decay and maximisation:

    ``g = grad + weight_decay * p``; ``b = momentum * b + (1 - dampening) * g`` (``b = g`` at the
    first step); ``g = g + momentum * b`` (Nesterov) or ``g = b``; ``p -= lr * g``.
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):  # fmt: skip
        if lr is not required:
            _check("learning rate", lr)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)  # fmt: skip
        super().__init__(params, defaults)

    def _update(self, p, grad, state, group):
        x = p._data
        d = -grad if group["maximize"] else grad
        wd = group["weight_decay"]
        if wd != 0:
            d = d + wd * x
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = _wrap(np.array(d, copy=True))
            else:
                b = buf._data
                b *= momentum
                b += (1 - group["dampening"]) * d
            d = d + momentum * buf._data if group["nesterov"] else buf._data
        x -= group["lr"] * d
