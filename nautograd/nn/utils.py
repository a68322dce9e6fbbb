"""``torch.nn.utils``: gradient clipping and parameter/vector conversions."""

import numpy as np

from ..tensor import Tensor, _wrap

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "parameters_to_vector",
    "vector_to_parameters",
]


def _params(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):  # fmt: skip
    """Scale the gradients in place so that their joint ``norm_type`` norm is at most
    ``max_norm``; returns the norm before clipping (a tensor)."""
    grads = [p.grad for p in _params(parameters) if p.grad is not None]
    if not grads:
        return _wrap(np.asarray(0.0))
    norm_type = float(norm_type)
    arrays = [g._data for g in grads]
    if norm_type == np.inf:
        total = max(float(np.max(np.abs(a))) if a.size else 0.0 for a in arrays)
    else:
        total = float(
            sum(float(np.sum(np.abs(a) ** norm_type)) for a in arrays) ** (1.0 / norm_type)
        )
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
            "by the non-finite norm anyway, set `error_if_nonfinite=False`"
        )
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        for g in grads:
            g._data *= coef
            g._bump()
    return _wrap(np.asarray(total, arrays[0].dtype))


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient in place to ``[-clip_value, clip_value]``."""
    for p in _params(parameters):
        if p.grad is not None:
            np.clip(p.grad._data, -clip_value, clip_value, out=p.grad._data)
            p.grad._bump()


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one vector (recorded)."""
    from .. import cat

    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of ``vec`` into the parameters' values."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    offset = 0
    for p in parameters:
        n = p.numel()
        p.data = vec._data[offset : offset + n].reshape(p.shape).copy()
        offset += n
