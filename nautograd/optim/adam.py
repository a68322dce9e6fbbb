"""``torch.optim.Adam`` and ``AdamW`` (torch's single-tensor algorithm)."""

import math

import numpy as np

from ..tensor import _wrap
from .optimizer import Optimizer, _check


class Adam(Optimizer):
    """Adam: ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
    ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``; ``weight_decay`` adds
    ``weight_decay * p`` to the gradient (AdamW decays the parameter instead); ``amsgrad``
    uses the running maximum of ``v``."""

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):  # fmt: skip
        _check("learning rate", lr)
        _check("epsilon value", eps)
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        _check("weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay or self._decoupled,
                        )  # fmt: skip
        super().__init__(params, defaults)

    def _update(self, p, grad, state, group):
        x = p._data
        if not state:
            state["step"] = _wrap(np.asarray(0.0, np.float32))
            state["exp_avg"] = _wrap(np.zeros_like(x))
            state["exp_avg_sq"] = _wrap(np.zeros_like(x))
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = _wrap(np.zeros_like(x))
        g = -grad if group["maximize"] else grad
        lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
        beta1, beta2 = group["betas"]
        step_t = state["step"]._data
        step_t += 1
        step = float(step_t)
        if wd != 0:
            if group["decoupled_weight_decay"]:
                x *= 1 - lr * wd
            else:
                g = g + wd * x
        m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
        m += (g - m) * (1 - beta1)  # (lerp, as torch)
        v *= beta2
        v += (1 - beta2) * g * g
        step_size = lr / (1 - beta1**step)
        bias_correction2_sqrt = math.sqrt(1 - beta2**step)
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]._data
            np.maximum(vmax, v, out=vmax)
            v = vmax
        denom = np.sqrt(v) / bias_correction2_sqrt + eps
        x -= step_size * (m / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` before the step);
    ``weight_decay`` defaults to 0.01."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):  # fmt: skip
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused)  # fmt: skip
