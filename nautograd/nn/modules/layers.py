"""Layers: ``Identity``, ``Linear``, ``Flatten``, ``Unflatten``, ``Dropout``, ``Embedding``,
``LayerNorm``, with torch's parameter shapes and initialisation."""

import math

from ... import creation
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def _empty(*shape, dtype=None):
    return creation.empty(*shape, dtype=dtype)


def reset_weight_and_bias(weight, bias, fan_in):
    """torch's initialisation of a linear or convolution layer: kaiming_uniform_(a=sqrt(5))
    for the weight (U(-1/sqrt(fan_in), 1/sqrt(fan_in))), the same bound for the bias."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


class Identity(Module):
    """Returns its input."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias``; weight ``(out_features, in_features)``, both initialised
    from U(-1/sqrt(in_features), 1/sqrt(in_features)) as torch does."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(
            creation.empty(out_features, in_features, dtype=dtype, device=device)
        )
        if bias:
            self.bias = Parameter(creation.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Draw weight and bias again as torch initialises them (Kaiming uniform)."""
        reset_weight_and_bias(self.weight, self.bias, self.in_features)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Flatten(Module):
    """Flattens dims ``start_dim`` to ``end_dim`` into one."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expands dim ``dim`` into ``unflattened_size``."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        shape = list(input.shape)
        d = self.dim % len(shape)
        return input.reshape(*shape[:d], *self.unflattened_size, *shape[d + 1 :])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Dropout(Module):
    """Zeroes elements with probability ``p`` in training mode (scaling the rest by
    1/(1-p)); the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of ``embedding_dim``, from N(0, 1)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, _weight=None,
                 _freeze=False, device=None, dtype=None):  # fmt: skip
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(_empty(num_embeddings, embedding_dim, dtype=dtype), not _freeze)
            init.normal_(self.weight)
            if padding_idx is not None:
                self.weight._data[padding_idx] = 0
        else:
            self.weight = Parameter(_weight, not _freeze)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"


class LayerNorm(Module):
    """Normalises over the last dims ``normalized_shape``, with an elementwise affine
    (weight ones, bias zeros)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):  # fmt: skip
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.ones(*self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(creation.zeros(*self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


__all__ = ["Identity", "Linear", "Flatten", "Unflatten", "Dropout", "Embedding", "LayerNorm"]
