"""Builds inputs for the op table's cases and maps each op to its torch reference."""

import numpy as np
import torch
import torch.nn.functional as F

import nautograd as ng
from nautograd.kernels import OPS
from nautograd.kernels.registry import COMPOSITES, Case, run_case


def _pow(x, exponent):
    return torch.pow(x, exponent)


def _torch_nll(x, target, weight, denom, reduction):
    if not x.is_floating_point():  # (torch's nll_loss has no integer kernels)
        raise RuntimeError(f"nll_loss: not implemented for {x.dtype}")
    t = torch.as_tensor(np.asarray(target))
    losses = -(x[torch.arange(x.shape[0]), t] * torch.as_tensor(np.asarray(weight), dtype=x.dtype))
    return losses if reduction == 0 else losses.sum() / denom


# ops whose torch reference is not torch.<name>(*inputs, **kwargs)
TORCH = {
    "pow_scalar": lambda x, exponent: torch.pow(x, exponent),
    "rpow": lambda y, base: torch.pow(base, y),
    "_binary_cross_entropy": lambda x, t: F.binary_cross_entropy(x, t, reduction="none"),
    "view": lambda x, shape: x.view(shape),
    "reshape": lambda x, shape: torch.reshape(x, shape),
    "where": lambda x, y, condition: torch.where(condition, x, y),
    "softplus": lambda x, **kw: F.softplus(x, **kw),
    "_to_copy": lambda x, dtype: x.to(dtype),
    "cat": lambda *xs, **kw: torch.cat(xs, **kw),
    "stack": lambda *xs, **kw: torch.stack(xs, **kw),
    "permute": lambda x, dims: torch.permute(x, dims),
    "_index_view": lambda x, index: _torch_basic_index(x, index),
    "_index_take": lambda x, index: x[_torch_index(index)],
    "_index_rows": lambda x, rows: x[torch.as_tensor(rows)],
    "expand": lambda x, size: x.expand(*size),
    "unfold": lambda x, **kw: x.unfold(**kw),
    "repeat": lambda x, repeats: x.repeat(*repeats),
    "scatter_add": lambda x, src, dim, index: torch.scatter_add(x, dim, index, src),
    "_take_flat": lambda x, index: x.reshape(-1)[index.reshape(-1)].reshape(index.shape),
    "vector_norm": lambda x, **kw: torch.linalg.vector_norm(x, **kw),
    "_nll": lambda x, target, weight, denom, reduction: _torch_nll(
        x, target, weight, denom, reduction
    ),
    "split_with_sizes": lambda x, dim, sections: torch.split_with_sizes(x, list(sections), dim),
    "_linear": F.linear,
    "_linear_bias": F.linear,
    "cholesky": torch.linalg.cholesky,
    "solve": torch.linalg.solve,
    "solve_triangular": torch.linalg.solve_triangular,
    "_logabsdet": lambda a: torch.linalg.slogdet(a).logabsdet,
    "_slogdet_sign": lambda a: torch.linalg.slogdet(a).sign,
    "convolution": lambda x, w, **kw: F.conv2d(x, w, **kw),
    "polygamma": lambda x, n: torch.polygamma(n, x),
    "_div_floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "_div_trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    "entr": torch.special.entr,
    "erfcx": torch.special.erfcx,
    "ndtr": torch.special.ndtr,
    "log_ndtr": torch.special.log_ndtr,
    "ndtri": torch.special.ndtri,
    "xlog1py": torch.special.xlog1py,
    "i0e": torch.special.i0e,
    "i1": torch.special.i1,
    "i1e": torch.special.i1e,
    "_windows": lambda x, dims, sizes, steps, dilations: _torch_windows(
        x, dims, sizes, steps, dilations
    ),
}


def _torch_windows(x, dims, sizes, steps, dilations):
    for d, size, step, dil in zip(dims, sizes, steps, dilations, strict=True):
        span = dil * (size - 1) + 1
        x = x.unfold(d, span, step)[..., ::dil]  # the new last dim is this window
    return x


def _torch_basic_index(x, index):
    """x[index]; torch rejects negative slice steps, which nautograd accepts as numpy does:
    those are gathered through numpy's positions instead."""
    if not any(isinstance(i, slice) and (i.step or 1) < 0 for i in index):
        return x[index]
    positions = np.arange(x.numel()).reshape(tuple(x.shape))[index]
    return x.reshape(-1)[torch.as_tensor(positions.reshape(-1))].reshape(positions.shape)


def _torch_index(index):
    if isinstance(index, torch.Tensor):
        return index
    return tuple(torch.as_tensor(i) if isinstance(i, np.ndarray) else i for i in index)


CASES = [(op, i, case) for op in OPS + COMPOSITES for i, case in enumerate(op.cases)]


def case_id(val):
    if isinstance(val, tuple) and len(val) == 3:
        op, i, _ = val
        return f"{op.name}-{i}"
    return None


def make_inputs(case, rng, dtype=np.float64):
    """numpy inputs (arrays, or Python numbers) and numpy kwargs for a case."""
    return case.make_inputs(rng, dtype)


def run_ng(op, arrays, kwargs, requires_grad=True, call=None):
    inputs = [
        ng.tensor(a, requires_grad=requires_grad) if isinstance(a, np.ndarray) else a
        for a in arrays
    ]
    kw = {k: (ng.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    return inputs, run_case(op, Case((), call=call), ng.tensor_apply, inputs, kw)


def apply_op(op, *args, **kwargs):
    """Run an op of the table (a composite through its function)."""
    return run_case(op, Case(()), ng.tensor_apply, list(args), kwargs)


def run_torch(op, arrays, kwargs, requires_grad=True, call=None):
    inputs = [
        torch.tensor(a, requires_grad=requires_grad) if isinstance(a, np.ndarray) else a
        for a in arrays
    ]
    # arrays and lists (index and target lists, class weights) are tensors for torch
    kw = {
        k: (torch.tensor(np.asarray(v)) if isinstance(v, (np.ndarray, list)) else v)
        for k, v in kwargs.items()
    }
    if "dtype" in kw:
        kw["dtype"] = getattr(torch, np.dtype(kw["dtype"]).name)
    f = TORCH.get(op.name) or getattr(torch, op.name, None) or getattr(F, op.name)
    if op.nn_functional and op.name not in TORCH:
        f = getattr(F, op.name)
    if call is not None:
        return inputs, call(f, *inputs, **kw)
    return inputs, f(*inputs, **kw)
