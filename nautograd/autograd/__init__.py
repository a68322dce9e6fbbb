"""The torch.autograd surface."""

from . import anomaly_mode, forward_ad, functional, graph  # noqa: F401
from .anomaly_mode import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from .engine import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    is_multithreading_enabled,
    no_grad,
    set_grad_enabled,
    set_multithreading_enabled,
)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .variable import Variable

__all__ = [
    "Function",
    "FunctionCtx",
    "once_differentiable",
    "backward",
    "grad",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "inference_mode",
    "is_inference_mode_enabled",
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
    "Variable",
    "set_multithreading_enabled",
    "is_multithreading_enabled",
    "forward_ad",
    "functional",
    "graph",
]
