"""torch.nn.functional's losses, normalisations and layers, written with other ops.

These are composites (``defcomposite``): no kernel of their own, their gradients are those
of the ops they call, the same formulas torch differentiates. Constants computed from values
(class weights, masks, batch counts) are numpy arrays; they carry no gradient.
"""

import math
import numbers
import warnings

import numpy as np

from .._random import generator
from .elementwise import add, div, mul, sub, to_copy, where
from .index import expand, index_select, pad, windows
from .linalg import linear_addmm, linear_mm, matmul
from .nn import NLL_NONE, NLL_SUM, convolution, log_softmax, nll
from .pointwise import (
    abs_,
    binary_cross_entropy_elements,
    clamp,
    exp,
    lgamma,
    log,
    neg,
    softplus,
    sqrt,
)
from .reduce import max_, mean, sum_, var
from .registry import Case, defcomposite, defop
from .shape import permute, reshape, t, unsqueeze

# ---------------------------------------------------------------------------------------------
# helpers


def _values(x):
    """A constant's numpy value (Tensors give their data without a graph)."""
    if hasattr(x, "detach"):
        return np.asarray(x.detach())
    return np.asarray(x)


def _legacy(size_average, reduce, reduction):
    """torch's deprecated ``size_average`` and ``reduce``: when either is given they decide
    the reduction, with torch's warning."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(
        "size_average and reduce args will be deprecated, please use "
        f"reduction='{reduction}' instead.",
        stacklevel=4,
    )
    return reduction


def _weighted(apply, loss, weight, input, reduction, mean_by_weight=True):
    """A pointwise loss times a weight per element, reduced as torch's mse_loss and l1_loss
    (a mean divided by the summed weights) or huber_loss (``mean_by_weight=False``: the mean
    of the weighted losses)."""
    if tuple(weight.shape) != tuple(getattr(input, "shape", ())):
        raise ValueError("Weights and input must have the same size.")
    loss = apply(mul, loss, weight)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return apply(sum_, loss)
    if reduction == "mean":
        if not mean_by_weight:
            return apply(mean, loss)
        return apply(div, apply(sum_, loss), apply(sum_, weight))
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")


def _reduce(apply, loss, reduction):
    if reduction == "mean":
        return apply(mean, loss)
    if reduction == "sum":
        return apply(sum_, loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _tuple(v, n, name):
    if isinstance(v, numbers.Integral):
        return (int(v),) * n
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise RuntimeError(f"{name} must be an int or a tuple of {n} ints, got {v}")
    return v


_LOSS = dict(nn_functional=True)
_PAIR = [Case(((3, 4), (3, 4))), Case(((5,), (5,)), {"reduction": "sum"})]

# ---------------------------------------------------------------------------------------------
# regression losses


def _difference(apply, input, target):
    """input - target as torch's pointwise losses take it: a 0-d operand is broadcast to the
    other's shape first, so it promotes as a dimensioned tensor (a float32 input with a
    float64 0-d target gives float64 there, float32 in a plain subtraction)."""
    xs, ys = tuple(getattr(input, "shape", ())), tuple(getattr(target, "shape", ()))
    if xs != ys and not (xs and ys):
        if xs:
            target = apply(expand, target, size=xs)
        else:
            input = apply(expand, input, size=ys)
    return apply(sub, input, target)


def _mse_loss(apply, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy(size_average, reduce, reduction)
    d = _difference(apply, input, target)
    if weight is not None:
        return _weighted(apply, apply(mul, d, d), weight, input, reduction)
    return _reduce(apply, apply(mul, d, d), reduction)


def _l1_loss(apply, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy(size_average, reduce, reduction)
    loss = apply(abs_, _difference(apply, input, target))
    if weight is not None:
        return _weighted(apply, loss, weight, input, reduction)
    return _reduce(apply, loss, reduction)


def _piecewise(apply, input, target, reduction, small, large, threshold):
    d = _difference(apply, input, target)
    ad = apply(abs_, d)
    cond = _values(ad) < threshold
    # the quadratic part on d clamped to the threshold: where it is not selected its
    # gradient is 0 (clamp), not 0 * d (NaN at an infinite d; torch's loss is one op)
    dc = apply(clamp, d, min=-threshold, max=threshold)
    nan = np.isnan(_values(d))
    if nan.any():
        # torch's loss takes its quadratic branch at a NaN difference (neither comparison
        # holds there), so its gradient is NaN: the unclamped d there
        cond = cond | nan
        dc = apply(where, d, dc, condition=nan)
    return _reduce(apply, apply(where, small(dc), large(ad), condition=cond), reduction)


def _smooth_l1_loss(
    apply, input, target, size_average=None, reduce=None, reduction="mean", beta=1.0
):
    reduction = _legacy(size_average, reduce, reduction)
    if beta == 0:
        return _l1_loss(apply, input, target, reduction)
    return _piecewise(
        apply,
        input,
        target,
        reduction,
        lambda d: apply(mul, apply(mul, d, d), 0.5 / beta),  # 0.5 d^2 / beta
        lambda ad: apply(sub, ad, 0.5 * beta),  # |d| - beta / 2
        beta,
    )


def _huber_loss(apply, input, target, reduction="mean", delta=1.0, weight=None):
    # torch's huber_loss computes in the input's dtype (its target is cast to it)
    dtype = getattr(input, "dtype", None)
    if dtype is not None and getattr(target, "dtype", dtype) != dtype:
        target = apply(to_copy, target, dtype=dtype)
    loss = _piecewise(
        apply,
        input,
        target,
        "none" if weight is not None else reduction,
        lambda d: apply(mul, apply(mul, d, d), 0.5),  # 0.5 d^2
        lambda ad: apply(mul, apply(sub, ad, 0.5 * delta), delta),  # delta (|d| - delta / 2)
        delta,
    )
    if weight is not None:
        return _weighted(apply, loss, weight, input, reduction, mean_by_weight=False)
    return loss


mse_loss = defcomposite(
    "mse_loss",
    _mse_loss,
    _PAIR,
    **_LOSS,
    doc="The squared error (input - target)^2, reduced by reduction.",
)
l1_loss = defcomposite(
    "l1_loss",
    _l1_loss,
    _PAIR,
    **_LOSS,
    doc="The absolute error |input - target|, reduced by reduction.",
)
smooth_l1_loss = defcomposite(
    "smooth_l1_loss",
    _smooth_l1_loss,
    _PAIR + [Case(((6,), (6,)), {"beta": 0.5, "reduction": "none"})],
    **_LOSS,
    doc="0.5 (x - y)^2 / beta where |x - y| < beta, else |x - y| - 0.5 beta, reduced by reduction.",
)
huber_loss = defcomposite(
    "huber_loss",
    _huber_loss,
    _PAIR + [Case(((6,), (6,)), {"delta": 0.3})],
    **_LOSS,
    doc=(
        "0.5 (x - y)^2 where |x - y| < delta, else delta (|x - y| - 0.5 delta), "
        "reduced by reduction."
    ),
)

# ---------------------------------------------------------------------------------------------
# classification losses


def _class_targets(op, target, n_classes, ignore_index):
    t = _values(target)
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): expected target of an integer dtype, got {t.dtype}")
    t = t.astype(np.int64).reshape(-1)
    valid = t != ignore_index
    bad = t[valid & ((t < 0) | (t >= n_classes))]
    if bad.size:
        raise IndexError(f"{op}(): Target {int(bad[0])} is out of bounds for {n_classes} classes.")
    return np.where(valid, t, 0), valid


def _classes_last(apply, input, op):
    """(input as (M, C), target shape): class dim 1 of (N, C, d1, ...) moved last."""
    if input.ndim == 1:
        return apply(reshape, input, shape=(1, -1)), ()
    if input.ndim == 2:
        return input, (input.shape[0],)
    if input.ndim < 1:
        raise RuntimeError(f"{op}(): input must have at least one dimension")
    perm = (0,) + tuple(range(2, input.ndim)) + (1,)
    moved = apply(permute, input, dims=perm)
    return apply(reshape, moved, shape=(-1, input.shape[1])), (input.shape[0],) + tuple(
        input.shape[2:]
    )


def _nll_loss(
    apply,
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
):
    reduction = _legacy(size_average, reduce, reduction)
    x2, target_shape = _classes_last(apply, input, "nll_loss")
    C = x2.shape[1]
    t, valid = _class_targets("nll_loss", target, C, ignore_index)
    if t.size != x2.shape[0]:
        raise ValueError(
            f"nll_loss(): Expected input batch_size ({x2.shape[0]}) to match target batch_size "
            f"({t.size})."
        )
    w = np.ones(C) if weight is None else _values(weight).astype(np.float64)
    wt = (w[t] * valid).astype(x2.dtype)
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    # one node; mean divides by the summed weights (0/0 = nan when every row is ignored)
    code = NLL_NONE if reduction == "none" else NLL_SUM
    denom = float(wt.sum()) if reduction == "mean" else 1.0
    out = apply(nll, x2, target=t, weight=wt, denom=denom, reduction=code)
    return apply(reshape, out, shape=target_shape) if reduction == "none" else out


def _cross_entropy(
    apply,
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
):
    reduction = _legacy(size_average, reduce, reduction)
    cdim = 1 if input.ndim > 1 else 0
    C = input.shape[cdim]
    logp = apply(log_softmax, input, dim=cdim)
    wshape = [1] * input.ndim
    wshape[cdim] = C
    w = None if weight is None else _values(weight).astype(input.dtype).reshape(wshape)
    tv = _values(target)
    if tv.dtype.kind == "f":  # class probabilities
        if tv.shape != tuple(input.shape):
            raise RuntimeError(
                f"cross_entropy(): probability targets must have the input's shape "
                f"{tuple(input.shape)}, got {tv.shape}"
            )
        if label_smoothing:
            target = apply(add, apply(mul, target, 1.0 - label_smoothing), label_smoothing / C)
        prod = apply(mul, logp, target)
        if w is not None:
            prod = apply(mul, prod, w)
        return _reduce(apply, apply(neg, apply(sum_, prod, dim=cdim)), reduction)
    nll = _nll_loss(apply, logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    # torch: (1 - eps) nll + eps / C * smooth, smooth = -sum_c w_c logp_c (0 where ignored)
    t, valid = _class_targets("cross_entropy", target, C, ignore_index)
    weighted = logp if w is None else apply(mul, logp, w)
    smooth = apply(neg, apply(sum_, weighted, dim=cdim))
    mask = valid.reshape(tuple(smooth.shape)).astype(input.dtype)
    smooth = apply(mul, smooth, mask)
    if reduction == "mean":
        denom = valid.sum() if weight is None else _values(weight)[t[valid]].sum()
        smooth = apply(div, apply(sum_, smooth), float(denom))
    elif reduction == "sum":
        smooth = apply(sum_, smooth)
    return apply(
        add, apply(mul, nll, 1.0 - label_smoothing), apply(mul, smooth, label_smoothing / C)
    )


_TARGETS = {"target": [1, 0, 3]}
nll_loss = defcomposite(
    "nll_loss",
    _nll_loss,
    [
        Case(((3, 4),), _TARGETS),
        Case(((3, 4),), {"target": [1, -100, 3], "reduction": "sum"}),
        Case(((2, 3, 2),), {"target": [[0, 2], [1, 1]], "reduction": "none"}),
        Case(((3, 4),), {**_TARGETS, "weight": [0.5, 1.0, 2.0, 0.1]}),
    ],
    **_LOSS,
    doc=(
        "The negative log-likelihood -input[n, target[n]] (weighted), reduced by "
        "reduction; input holds log-probabilities."
    ),
)
cross_entropy = defcomposite(
    "cross_entropy",
    _cross_entropy,
    [
        Case(((3, 4),), _TARGETS),
        Case(((3, 4),), {"target": [1, -100, 3], "label_smoothing": 0.2}),
        Case(((3, 4),), {**_TARGETS, "weight": [0.5, 1.0, 2.0, 0.1], "label_smoothing": 0.1}),
        Case(((2, 3, 2),), {"target": [[0, 2], [1, 1]], "reduction": "none"}),
        Case(((3, 4),), {"target": "probs(3, 4)", "label_smoothing": 0.1}),
    ],
    **_LOSS,
    doc=(
        "log_softmax over the class dimension followed by nll_loss; target holds "
        "class indices or probabilities."
    ),
)


def _binary_cross_entropy(
    apply, input, target, weight=None, size_average=None, reduce=None, reduction="mean"
):
    reduction = _legacy(size_average, reduce, reduction)
    x = _values(input)
    if x.size and (x.min() < 0 or x.max() > 1):
        raise RuntimeError(
            "binary_cross_entropy(): all elements of input should be between 0 and 1"
        )
    loss = apply(binary_cross_entropy_elements, input, target)
    if weight is not None:
        loss = apply(mul, loss, weight)
    return _reduce(apply, loss, reduction)


def _bce_with_logits(
    apply,
    input,
    target,
    weight=None,
    size_average=None,
    reduce=None,
    reduction="mean",
    pos_weight=None,
):
    reduction = _legacy(size_average, reduce, reduction)
    # (1 - t) x + (1 + (pw - 1) t) softplus(-x): softplus without its threshold is computed
    # as max(z, 0) + log1p(exp(-|z|)) with the derivative sigmoid(z) at every point (the
    # composition with abs and relu had the gradient 0 at their kinks, where x = 0)
    sp = apply(softplus, apply(neg, input), threshold=math.inf)
    lw = (
        1.0
        if pos_weight is None
        else apply(add, apply(mul, apply(sub, pos_weight, 1.0), target), 1.0)
    )
    loss = apply(add, apply(mul, apply(sub, 1.0, target), input), apply(mul, lw, sp))
    if weight is not None:
        loss = apply(mul, loss, weight)
    return _reduce(apply, loss, reduction)


binary_cross_entropy = defcomposite(
    "binary_cross_entropy",
    _binary_cross_entropy,
    [
        Case(((3, 4), (3, 4)), low=0.05, high=0.95),
        Case(((5,), (5,)), {"weight": "uniform(5)", "reduction": "sum"}, low=0.05, high=0.95),
    ],
    **_LOSS,
    doc=(
        "-(target log(input) + (1 - target) log(1 - input)), with the logarithms "
        "clamped at -100 as torch, reduced by reduction."
    ),
)
binary_cross_entropy_with_logits = defcomposite(
    "binary_cross_entropy_with_logits",
    _bce_with_logits,
    [
        Case(((3, 4), (3, 4)), low=-3, high=3),
        Case(((2, 4), (2, 4)), {"pos_weight": "uniform(4)"}, low=-3, high=3),
    ],
    **_LOSS,
    doc=(
        "Binary cross-entropy of sigmoid(input) computed stably from the logits, "
        "reduced by reduction."
    ),
)


def _kl_div(
    apply, input, target, size_average=None, reduce=None, reduction="mean", log_target=False
):
    reduction = _legacy(size_average, reduce, reduction)
    if log_target:
        loss = apply(mul, apply(exp, target), apply(sub, target, input))
    else:
        # target (log target - input), 0 where target == 0 (torch's xlogy)
        positive = _values(target) > 0
        safe = apply(where, target, 1.0, condition=positive)
        loss = apply(mul, target, apply(sub, apply(log, safe), input))
    if reduction == "batchmean":
        n = input.shape[0] if input.ndim else 1
        return apply(div, apply(sum_, loss), float(n))
    return _reduce(apply, loss, reduction)


kl_div = defcomposite(
    "kl_div",
    _kl_div,
    [
        Case(((3, 4), (3, 4)), low=0.1, high=1.0),
        Case(((3, 4), (3, 4)), {"reduction": "batchmean"}, low=0.1, high=1.0),
        Case(((3, 4), (3, 4)), {"reduction": "sum", "log_target": True}),
    ],
    **_LOSS,
    doc=(
        "target (log(target) - input) pointwise (input holds log-probabilities), "
        "reduced by reduction."
    ),
)

# ---------------------------------------------------------------------------------------------
# layers and normalisation


def _linear(apply, input, weight, bias=None):
    if input.ndim > 2:
        lead = tuple(input.shape[:-1])
        flat = apply(reshape, input, shape=(-1, input.shape[-1]))
        return apply(reshape, _linear(apply, flat, weight, bias), shape=lead + (weight.shape[0],))
    if input.ndim == 2 and getattr(weight, "ndim", 0) == 2 and getattr(bias, "ndim", 1) <= 1:
        # one node: torch's addmm (mm without a bias)
        if bias is None:
            return apply(linear_mm, input, weight)
        return apply(linear_addmm, input, weight, bias)
    y = apply(matmul, input, apply(t, weight))
    return y if bias is None else apply(add, y, bias)


linear = defcomposite(
    "linear",
    _linear,
    [Case(((4, 3), (5, 3), (5,))), Case(((2, 4, 3), (5, 3))), Case(((3,), (2, 3), (2,)))],
    **_LOSS,
    doc="input @ weight.T + bias.",
)


def _dropout(apply, input, p=0.5, training=True, inplace=False):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    dt = np.dtype(input.dtype)
    keep = generator().random(tuple(input.shape)) >= p
    scale = np.zeros((), dt) if p == 1 else dt.type(1.0 / (1.0 - p))
    return apply(mul, input, (keep * scale).astype(dt))


dropout = defcomposite(
    "dropout",
    _dropout,
    [Case(((3, 4),), {"training": False}), Case(((3, 4),), {"p": 0.0})],
    **_LOSS,
    doc="Zeroes each entry with probability p and scales the rest by 1 / (1 - p) when training.",
)


def _layer_norm(apply, input, normalized_shape, weight=None, bias=None, eps=1e-5):
    ns = (
        (normalized_shape,)
        if isinstance(normalized_shape, numbers.Integral)
        else tuple(normalized_shape)
    )
    if tuple(input.shape[input.ndim - len(ns) :]) != ns:
        raise RuntimeError(
            f"layer_norm(): normalized_shape {list(ns)} does not match the input's last dims "
            f"(input shape {list(input.shape)})"
        )
    dims = tuple(range(input.ndim - len(ns), input.ndim))
    mu = apply(mean, input, dim=dims, keepdim=True)
    v = apply(var, input, dim=dims, keepdim=True, correction=0)
    y = apply(div, apply(sub, input, mu), apply(sqrt, apply(add, v, eps)))
    if weight is not None:
        y = apply(mul, y, weight)
    return y if bias is None else apply(add, y, bias)


layer_norm = defcomposite(
    "layer_norm",
    _layer_norm,
    [
        Case(((3, 4),), {"normalized_shape": (4,)}),
        Case(
            ((2, 3, 4), (3, 4), (3, 4)),
            {"normalized_shape": (3, 4)},
            call=lambda f, x, w, b, normalized_shape: f(x, normalized_shape, w, b),
        ),
    ],
    **_LOSS,
    doc=(
        "input normalised over its last dimensions (normalized_shape) to zero mean "
        "and unit variance, then scaled by weight and shifted by bias."
    ),
)


def _batch_norm(
    apply,
    input,
    running_mean,
    running_var,
    weight=None,
    bias=None,
    training=False,
    momentum=0.1,
    eps=1e-5,
):
    if input.ndim < 2:
        raise ValueError(f"batch_norm(): expected 2D or more input (got {input.ndim}D input)")
    C = input.shape[1]
    shape = (1, C) + (1,) * (input.ndim - 2)
    dims = (0,) + tuple(range(2, input.ndim))
    if training:
        count = input.numel() // max(C, 1)
        if C and count <= 1:  # (no channels: an empty result, as torch)
            raise ValueError(
                "Expected more than 1 value per channel when training, got input size "
                f"{list(input.shape)}"
            )
        mu = apply(mean, input, dim=dims, keepdim=True)
        v = apply(var, input, dim=dims, keepdim=True, correction=0)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(momentum * _values(mu).reshape(C))
        if running_var is not None:
            unbiased = _values(v).reshape(C) * (count / (count - 1))
            running_var.mul_(1 - momentum).add_(momentum * unbiased)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm(): running_mean and running_var are needed in eval mode")
        mu = _values(running_mean).reshape(shape)
        v = _values(running_var).reshape(shape)
    y = apply(div, apply(sub, input, mu), apply(sqrt, apply(add, v, eps)))
    if weight is not None:
        y = apply(mul, y, apply(reshape, weight, shape=shape))
    return y if bias is None else apply(add, y, apply(reshape, bias, shape=shape))


batch_norm = defcomposite(
    "batch_norm",
    _batch_norm,
    [
        Case(((4, 3),), {"running_mean": "zeros(3)", "running_var": "ones(3)", "training": True}),
        Case(((2, 3, 5),), {"running_mean": "uniform(3)", "running_var": "ones(3)"}),
        Case(
            ((4, 3, 2, 2), (3,), (3,)),
            {"running_mean": "zeros(3)", "running_var": "uniform(3)", "training": True},
            call=lambda f, x, w, b, running_mean, running_var, **kw: f(
                x, running_mean, running_var, w, b, **kw
            ),
        ),
        Case(
            ((2, 3), (3,), (3,)),
            {"running_mean": "uniform(3)", "running_var": "uniform(3)"},
            call=lambda f, x, w, b, running_mean, running_var, **kw: f(
                x, running_mean, running_var, w, b, **kw
            ),
        ),
    ],
    **_LOSS,
    doc=(
        "input normalised per channel with the batch's statistics (training) or the "
        "running ones, then scaled and shifted; running statistics are updated in "
        "training."
    ),
)


def _embedding(
    apply,
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError(
            "embedding(): max_norm, scale_grad_by_freq and sparse are not supported"
        )
    idx = _values(input)
    if idx.dtype.kind not in "iu":
        raise RuntimeError(
            "embedding(): Expected tensor for argument #1 'indices' to have an integer dtype, "
            f"got {idx.dtype}"
        )
    rows = apply(index_select, weight, dim=0, index=idx.reshape(-1))
    out = apply(reshape, rows, shape=tuple(idx.shape) + (weight.shape[1],))
    if padding_idx is None:
        return out
    pi = padding_idx % weight.shape[0]
    mask = np.broadcast_to((idx == pi)[..., None], tuple(out.shape))
    return apply(where, out.detach(), out, condition=mask)  # no gradient for the padding row


def _weight_second(f, weight, input, **kw):
    return f(input, weight, **kw)


embedding = defcomposite(
    "embedding",
    _embedding,
    [
        Case(((5, 3),), {"input": [[0, 2], [4, 2]]}, call=_weight_second),
        Case(
            ((5, 3),),
            {"input": [1, 0, 1], "padding_idx": 1},
            call=_weight_second,
            gradcheck=False,
        ),
    ],
    **_LOSS,
    doc=(
        "The rows of weight at the integer indices input.\n"
        "input: (Tensor of int64) the indices.\n"
        "weight: (Tensor) the embedding matrix, one row per index.\n"
        "padding_idx: (int, optional) the row that receives no gradient.\n"
        "max_norm: (float, optional) not supported (raises).\n"
        "norm_type: (float) the norm of max_norm. Default: 2.\n"
        "scale_grad_by_freq: (bool) not supported (raises when True).\n"
        "sparse: (bool) not supported (raises when True)."
    ),
    # (the rows of the tangent of weight, the padding row's too, as torch's forward AD)
    jvp="linear",
)


def _one_hot(tensor, num_classes=-1):
    t = np.asarray(tensor)
    if t.dtype.kind not in "iu":
        raise RuntimeError("one_hot is only applicable to index tensor of an integer dtype.")
    n = int(t.max()) + 1 if num_classes == -1 else num_classes
    if t.size and (t.min() < 0 or t.max() >= n):
        raise RuntimeError("one_hot(): Class values must be smaller than num_classes.")
    return (t[..., None] == np.arange(n)).astype(np.int64), (), (), ()


one_hot = defop(
    "one_hot",
    _one_hot,
    nn_functional=True,
    functions=(),
    int_result=True,
    int_ok=True,
    cases=[
        Case(
            (),
            {"tensor": [0, 2, 1], "num_classes": 4},
            call=lambda f, tensor, **kw: f(tensor, **kw),
        ),
        Case((), {"tensor": [[1], [3]]}, call=lambda f, tensor, **kw: f(tensor, **kw)),
    ],
    doc=(
        "Integer class indices as rows of zeros with a one at each index "
        "(num_classes=-1: the largest index + 1)."
    ),
)

# ---------------------------------------------------------------------------------------------
# convolution and pooling: sliding windows (a strided view, summed back in the backward)


def _padding(padding, n, kernel, dilation):
    if padding == "valid":
        return (0,) * n
    if padding == "same":
        return tuple(d * (k - 1) // 2 for k, d in zip(kernel, dilation, strict=True))
    return _tuple(padding, n, "padding")


def _conv(apply, nd, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    name = f"conv{nd}d"
    unbatched = input.ndim == nd + 1
    if unbatched:
        input = apply(reshape, input, shape=(1,) + tuple(input.shape))
    if input.ndim != nd + 2 or weight.ndim != nd + 2:
        raise RuntimeError(
            f"{name}(): expected a {nd + 1}D or {nd + 2}D input and a {nd + 2}D weight, got "
            f"input of shape {list(input.shape)} and weight of shape {list(weight.shape)}"
        )
    N, C = input.shape[:2]
    O, Cg = weight.shape[:2]
    if C != Cg * groups or O % groups:
        raise RuntimeError(
            f"{name}(): Given groups={groups}, weight of size {list(weight.shape)}, expected "
            f"input{list(input.shape)} to have {Cg * groups} channels, but got {C} channels instead"
        )
    kernel = tuple(weight.shape[2:])
    stride, dilation = _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
    pads = _padding(padding, nd, kernel, dilation)
    if padding == "same" and any(d * (k - 1) % 2 for k, d in zip(kernel, dilation, strict=True)):
        raise NotImplementedError(
            f"{name}(): padding='same' with an even kernel extent is not supported"
        )
    sizes = [n + 2 * p for n, p in zip(input.shape[2:], pads, strict=True)]
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    if any(s < k for s, k in zip(sizes, spans, strict=True)):
        raise RuntimeError(
            f"{name}(): Calculated padded input size per channel: "
            f"({' x '.join(map(str, sizes))}). Kernel size: ({' x '.join(map(str, spans))}). "
            "Kernel size can't be greater than actual input size"
        )
    x, w = input, weight
    if nd == 1:  # a 2-D convolution of height 1
        x = apply(reshape, x, shape=(N, C, 1, input.shape[2]))
        w = apply(reshape, w, shape=(O, Cg, 1, kernel[0]))
        stride, pads, dilation = (1,) + stride, (0,) + pads, (1,) + dilation
    y = apply(convolution, x, w, stride=stride, padding=pads, dilation=dilation, groups=groups)
    if nd == 1:
        y = apply(reshape, y, shape=tuple(y.shape[:2]) + (y.shape[3],))
    if bias is not None:
        y = apply(add, y, apply(reshape, bias, shape=(1, O) + (1,) * nd))
    if unbatched:
        y = apply(reshape, y, shape=tuple(y.shape[1:]))
    return y


conv1d = defcomposite(
    "conv1d",
    lambda apply, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1: _conv(
        apply, 1, input, weight, bias, stride, padding, dilation, groups
    ),
    [
        Case(((2, 3, 7), (4, 3, 3), (4,))),
        Case(((1, 4, 9), (2, 2, 2)), {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}),
    ],
    **_LOSS,
    doc="The 1-D cross-correlation of input (N, C, L) with weight (out, C / groups, k), plus bias.",
)
conv2d = defcomposite(
    "conv2d",
    lambda apply, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1: _conv(
        apply, 2, input, weight, bias, stride, padding, dilation, groups
    ),
    [
        Case(((2, 3, 5, 5), (4, 3, 3, 3), (4,))),
        Case(((1, 4, 6, 7), (2, 2, 2, 3)), {"stride": (2, 1), "padding": (1, 2), "groups": 2}),
        Case(((3, 5, 5), (2, 3, 3, 3)), {"padding": "same", "dilation": 2}),
    ],
    **_LOSS,
    doc=(
        "The 2-D cross-correlation of input (N, C, H, W) with weight (out, C / "
        "groups, kh, kw), plus bias."
    ),
)


def _pool_windows(apply, input, kernel_size, stride, padding, dilation, fill, name):
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{name}(): expected a 3D or 4D input, got {input.ndim}D")
    k = _tuple(kernel_size, 2, "kernel_size")
    s = k if stride is None or stride == () or stride == [] else _tuple(stride, 2, "stride")
    p = _tuple(padding, 2, "padding")
    if any(pi * 2 > ki for pi, ki in zip(p, k, strict=True)):
        raise RuntimeError(
            f"{name}(): pad should be at most half of effective kernel size, but got pad={p} "
            f"and kernel_size={k}"
        )
    d = _tuple(dilation, 2, "dilation")
    x = input
    if any(p):
        x = apply(pad, x, pad=(p[1], p[1], p[0], p[0]), value=fill)
    nd = x.ndim
    return apply(windows, x, dims=(nd - 2, nd - 1), sizes=k, steps=s, dilations=d), k, s, p, d


def _max_pool2d(
    apply,
    input,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    return_indices=False,
):
    if ceil_mode or return_indices:
        raise NotImplementedError("max_pool2d(): ceil_mode and return_indices are not supported")
    win, k, *_ = _pool_windows(
        apply, input, kernel_size, stride, padding, dilation, -np.inf, "max_pool2d"
    )
    flat = apply(reshape, win, shape=tuple(win.shape[:-2]) + (k[0] * k[1],))
    return max_.api(apply, flat, -1).values  # the gradient goes to the first maximum, as torch


def _avg_pool2d(
    apply,
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    if ceil_mode:
        raise NotImplementedError("avg_pool2d(): ceil_mode is not supported")
    win, k, s, p, d = _pool_windows(
        apply, input, kernel_size, stride, padding, 1, 0.0, "avg_pool2d"
    )
    total = apply(sum_, win, dim=(-2, -1))
    if divisor_override:
        return apply(div, total, float(divisor_override))
    if count_include_pad or not any(p):
        return apply(div, total, float(k[0] * k[1]))
    # divide by the number of real (unpadded) elements in each window
    ones = np.pad(np.ones(tuple(input.shape[-2:])), ((p[0], p[0]), (p[1], p[1])))
    counts = _windows_sum(ones, k, s)
    return apply(div, total, counts.astype(np.dtype(input.dtype)))


def _windows_sum(a, k, s):
    v = np.lib.stride_tricks.sliding_window_view(a, k)[:: s[0], :: s[1]]
    return v.sum(axis=(-2, -1))


max_pool2d = defcomposite(
    "max_pool2d",
    _max_pool2d,
    [
        Case(((2, 3, 6, 6),), {"kernel_size": 2}),
        Case(((3, 7, 6),), {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 1}),
    ],
    **_LOSS,
    doc="The maximum over each kernel_size window of input (N, C, H, W).",
)
avg_pool2d = defcomposite(
    "avg_pool2d",
    _avg_pool2d,
    [
        Case(((2, 3, 6, 6),), {"kernel_size": 2}),
        Case(((1, 2, 7, 6),), {"kernel_size": 3, "stride": 2, "padding": 1}),
        Case(((1, 2, 7, 6),), {"kernel_size": (3, 2), "padding": 1, "count_include_pad": False}),
    ],
    **_LOSS,
    doc="The mean over each kernel_size window of input (N, C, H, W).",
)


# ---------------------------------------------------------------------------------------------
# special functions written with others


def _mvlgamma(apply, input, p):  # noqa: A002  (torch's argument names)
    # log of the multivariate gamma function: sum_j lgamma(x - j / 2) + p (p - 1) / 4 log(pi)
    if not isinstance(p, numbers.Integral) or isinstance(p, bool):
        raise TypeError(f"mvlgamma(): argument 'p' must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    dtype = np.dtype(getattr(input, "dtype", np.float64))
    dtype = dtype if dtype.kind == "f" else np.dtype(np.float32)
    shifts = np.arange(-p * 0.5 + 0.5, 0.5, 0.5, dtype=dtype)
    terms = apply(lgamma, apply(add, apply(unsqueeze, input, dim=-1), shifts))
    return apply(add, apply(sum_, terms, dim=-1), p * (p - 1) / 4 * math.log(math.pi))


mvlgamma = defcomposite(
    "mvlgamma",
    _mvlgamma,
    [
        Case(((3, 4),), {"p": 1}, low=0.5, high=4.0),
        Case(((5,),), {"p": 3}, low=1.5, high=4.0),
    ],
    methods=("mvlgamma",),
    functions=("mvlgamma",),
    special=("multigammaln",),
    doc="The log of the multivariate gamma function of dimension p at input, "
    "sum_j lgamma(input - j / 2) + p (p - 1) / 4 log(pi), j < p.\n"
    "p: (int) the dimension, at least 1.",
)
