"""Indexing and the shape ops that pick elements: ``__getitem__``, expand, flip, narrow,
diagonal, roll, repeat, gather, scatter_add, masked_fill, pad, tril/triu, ...

Two backward kernels serve them all:

- ``strided_backward``: the result is a strided view of x (basic indexing, expand, flip,
  narrow, diagonal, movedim): result element i reads x at ``offset + sum(idx_d * stride_d)``
  in x's C order, so ``grad_x[that] += grad[i]``. The offset and strides come from applying
  the same numpy view operation to a fake array of x's shape whose element strides are C
  order and whose itemsize is 1 (numpy computes them; no memory is touched).
- ``take_backward``: the result gathers x's elements through an index map (advanced
  indexing, gather, roll, repeat, pad, ...): ``grad_x[index[i]] += grad[i]`` (index -1: a
  filled element, no gradient). Repeated indices accumulate. The map is the same numpy
  operation applied to ``arange(x.numel())``.
"""

import math
import numbers

import numpy as np

from ._jit import bcast_offsets, kernel, saved_index, view
from ._shapes import address_of, binary_params, coalesce, outer_inner, wrap_dim
from .registry import Case, attributes_of, defcomposite, defop, formula_of

# ---------------------------------------------------------------------------------------------
# strided views


def _fake(shape):
    """An array of ``shape`` over one byte with C-order element strides: a view op applied to
    it yields the result's element offset and strides in x's C order."""
    st = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        st[d] = st[d + 1] * max(shape[d + 1], 1)
    return np.lib.stride_tricks.as_strided(_BYTE, shape=shape, strides=st)


_BYTE = np.zeros(1, np.uint8)


def view_params(x, v):
    """iparams of ``strided_backward`` for ``v``, a numpy view of the C-contiguous array
    ``x`` (``x`` itself, or the fake array of its shape, ``_fake``, for a tensor that is not
    contiguous): its element offset and strides read from the view. (Through the fake array
    for every view: ~15 us more an op.) The coalesced shape and strides are kept per view
    layout: a model's views repeat theirs step after step (~3 us an op)."""
    n = v.size
    if n == 0:
        return (x.size, 0, 0, 1, 0, 0)
    item = x.itemsize
    key = (v.shape, v.strides, item)
    layout = _LAYOUTS.get(key)
    if layout is None:
        if len(_LAYOUTS) >= 4096:
            _LAYOUTS.clear()
        shape, (st,) = coalesce(list(v.shape), [[s // item for s in v.strides]])
        layout = _LAYOUTS[key] = (len(shape), *shape, *st)
    return (x.size, (address_of(v) - address_of(x)) // item, n, *layout)


_LAYOUTS = {}  # (view shape, byte strides, itemsize) -> (dims, coalesced shape, strides)


@kernel
def strided_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # ip = (nx, offset, n, nd, shape..., strides...): grad_x[offset + offs[i]] += grad[i]
    if gi[0] < 0:
        return
    nx, off, n, nd = ip[0], ip[1], ip[2], ip[3]
    if n == 0:
        return
    g = view(G, go[0], n)
    grad_x = view(G, gi[0], nx)
    offs = bcast_offsets(ip, 4, nd, 0, n)
    for i in range(n):
        grad_x[off + offs[i]] += g[i]


def scatter_formula(ctx, grad, index):
    """create_graph: the gradient of x for a result that picked x's elements through the flat
    ``index`` map (-1: no element): zeros of x's size with ``grad`` added at ``index``,
    written with scatter_add (whose own formula gathers back: linear both ways)."""
    xs = ctx.input_shapes[0]
    index = np.asarray(index, np.int64).reshape(-1)
    g = grad.reshape(-1)
    valid = index >= 0
    if not valid.all():
        keep = np.flatnonzero(valid)
        g, index = g[keep], index[keep]
    zeros = ctx.constant(np.zeros(int(np.prod(xs, dtype=np.int64))))
    return zeros.scatter_add(0, index, g).reshape(xs)


@formula_of(strided_backward)
def _strided_formula(ctx, grad):
    nx, off, n, nd = ctx.ip[:4]
    ip = ctx.ip
    index = np.full(max(n, 0), off, np.int64)
    if n:
        shape, strides = ip[4 : 4 + nd], ip[4 + nd : 4 + 2 * nd]
        offs = np.zeros(shape, np.int64)
        for d in range(nd):
            view = [1] * nd
            view[d] = shape[d]
            offs = offs + (np.arange(shape[d]) * strides[d]).reshape(view)
        index = index + offs.reshape(-1)
    return (scatter_formula(ctx, grad, index),)


def _view_op(name, f, cases, **kw):
    """An op whose result is ``f(x, **kwargs)``, a numpy view of x."""

    def forward(x, **kwargs):
        result = f(x, **kwargs)
        if x.flags.c_contiguous and x.size:
            return result, (), view_params(x, result), ()
        base = _fake(x.shape)
        return result, (), view_params(base, f(base, **kwargs)), ()

    forward.__name__ = name
    attributes_of(forward, f)
    return defop(name, forward, strided_backward, int_ok=True, cases=cases, **kw)


# ---------------------------------------------------------------------------------------------
# index maps


def take_forward(x, index, fill=None):
    """(result, saved, iparams) of gathering x's elements by the flat ``index`` map.

    ``fill``: the value of the map's -1 entries, for the ops that have them (masked_fill, pad,
    tril, ...); the others skip the pass that looks for them."""
    # (np.ascontiguousarray makes a 0-d map 1-d: max(dim=0) of a 1-d tensor is 0-d, as torch)
    index = np.ascontiguousarray(index, dtype=np.int64).reshape(np.shape(index))
    flat = x.reshape(-1)
    if fill is not None and index.size and index.min() < 0:
        # (np.asarray(...).astype: an integer fill wraps into a narrower dtype, as torch's;
        # x.dtype.type(-2) raises for uint8)
        value = np.asarray(fill).astype(x.dtype)
        result = np.where(index >= 0, flat[np.maximum(index, 0)], value)
    else:
        result = flat[index]
    return result, (index,), (x.size, index.size)


@kernel
def take_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # ip = (nx, n), saved: the int64 index map of n elements (-1: filled, no gradient)
    if gi[0] < 0:
        return
    nx, n = ip[0], ip[1]
    g = view(G, go[0], n)
    grad_x = view(G, gi[0], nx)
    index = saved_index(sa, 0, n)
    for i in range(n):
        j = index[i]
        if j >= 0:
            grad_x[j] += g[i]


@formula_of(take_backward)
def _take_formula(ctx, grad):
    return (scatter_formula(ctx, grad, ctx.saved(0)),)


def _positions(shape):
    """The flat C-order position of every element of an array of ``shape``."""
    return np.arange(np.prod(shape, dtype=np.int64), dtype=np.int64).reshape(shape)


def _zero(**kwargs):
    return 0.0


def _take_op(name, index_map, cases, fill=None, **kw):
    """An op gathering x's elements: ``index_map(positions, **kwargs)`` applies the op to the
    array of x's flat positions; ops that fill some results (-1 in the map) give
    ``fill(**kwargs)``, their value."""

    def forward(x, **kwargs):
        index = index_map(_positions(x.shape), **kwargs)
        result, saved, ip = take_forward(x, index, fill(**kwargs) if fill else None)
        return result, saved, ip, ()

    forward.__name__ = name
    attributes_of(forward, index_map)
    return defop(name, forward, take_backward, int_ok=True, cases=cases, **kw)


def _as_index(op, index, size=None, dim=None):
    """An integer index operand (Tensor, array, list, int) as an int64 numpy array."""
    a = np.asarray(getattr(index, "_data", index))
    if a.dtype.kind not in "iu":
        raise IndexError(f"{op}(): index must be an integer tensor, got dtype {a.dtype}")
    a = a.astype(np.int64, copy=False)
    if size is not None and a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < -size or hi >= size:
            bad = hi if hi >= size else lo
            raise IndexError(
                f"{op}(): index {bad} is out of bounds for dimension {dim} with size {size}"
            )
    return a


# ---------------------------------------------------------------------------------------------
# __getitem__


def _normalize_index(index):
    """A tuple of index components; Tensors, lists become numpy arrays. Returns
    (components, advanced) where advanced says numpy will copy (integer or bool arrays)."""
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    advanced = False
    for i in index:
        if i is None or i is Ellipsis or isinstance(i, slice):
            out.append(i)
        elif isinstance(i, bool) or isinstance(i, np.bool_):
            out.append(np.asarray(i))
            advanced = True
        elif isinstance(i, (numbers.Integral, np.integer)):
            out.append(int(i))
        else:
            a = np.asarray(getattr(i, "_data", i))
            if a.dtype.kind not in "iub":
                raise IndexError(
                    "tensors used as indices must be long, int, byte or bool tensors, "
                    f"got {a.dtype}"
                )
            if a.ndim == 0 and a.dtype.kind in "iu":
                out.append(int(a))
            else:
                out.append(a)
                advanced = True
    return tuple(out), advanced


def _check_index(x_shape, index):
    """Basic indexing (ints, slices, None, Ellipsis) applied to a fake array of x's shape:
    numpy's checks, with the op named, and the view whose offset and strides the backward
    uses. Always with an Ellipsis: numpy then returns a 0-d view where every dim is indexed by
    an int, instead of reading the element (the fake array has one byte of memory; an
    element read far past it crashed)."""
    if not isinstance(index, tuple):
        index = (index,)
    if not any(i is Ellipsis for i in index):
        index = (*index, Ellipsis)
    try:
        return _fake(x_shape)[index]
    except IndexError as e:
        raise IndexError(f"index(): {e} (tensor of shape {tuple(x_shape)})") from None


def _index_view_forward(x, index):
    if type(index) is not tuple:  # (the api's _getitem hands a normalized tuple)
        index, _ = _normalize_index(index)
    if x.flags.c_contiguous and x.size:
        # the view itself, an Ellipsis added so that an int for every dim gives a 0-d view
        # (torch's result is a view too) rather than a numpy scalar
        try:
            has = any(i is Ellipsis for i in index)
            v = x[index if has else (*index, Ellipsis)]
        except IndexError as e:
            raise IndexError(f"index(): {e} (tensor of shape {tuple(x.shape)})") from None
        return v, (), view_params(x, v), ()
    base = _fake(x.shape)
    v = _check_index(x.shape, index)
    return x[index], (), view_params(base, v), ()


def _index_take_forward(x, index):
    # the map of x's flat positions, indexed as x is, checks the index (numpy's errors) and
    # is what the backward scatters through; the result is numpy's own gather of x (a row
    # gather, not an element gather through the map: 0.5 ms instead of ~3 ms at 10^6)
    index, _ = _normalize_index(index)
    try:
        positions = _positions(x.shape)[index]
    except IndexError as e:
        raise IndexError(f"index(): {e} (tensor of shape {tuple(x.shape)})") from None
    result = np.ascontiguousarray(x[index])
    return result, (np.ascontiguousarray(positions),), (x.size, positions.size), ()


def _index_rows_forward(x, rows):
    """``x[rows]`` for an integer array ``rows`` over the first dim (a minibatch X[idx]): the
    rows' numbers saved, where a gather saves the position of every element it took (X of
    2,000 x 100, 200 rows: the map cost as much as the gather)."""
    try:
        result = np.ascontiguousarray(x[rows])
    except IndexError as e:
        raise IndexError(f"index(): {e} (tensor of shape {tuple(x.shape)})") from None
    flat = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
    if flat.size and flat.min() < 0:
        flat = flat % x.shape[0]
    # (the row size from the shape: x may have no rows)
    return result, (flat,), (x.size, math.prod(x.shape[1:]), flat.size), ()


@kernel
def rows_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # ip = (nx, inner, m): result row r is x's row rows[r], so grad_x[rows[r]] += grad[r]
    # (repeated rows accumulate)
    if gi[0] < 0:
        return
    nx, inner, m = ip[0], ip[1], ip[2]
    rows = saved_index(sa, 0, m)
    g = view(G, go[0], m * inner)
    grad_x = view(G, gi[0], nx)
    for r in range(m):
        dst = rows[r] * inner
        src = r * inner
        for j in range(inner):
            grad_x[dst + j] += g[src + j]


@formula_of(rows_backward)
def _rows_formula(ctx, grad):
    inner = ctx.ip[1]
    rows = ctx.saved(0)
    positions = (rows * inner).reshape(-1, 1) + np.arange(inner, dtype=np.int64)
    return (scatter_formula(ctx, grad, positions.reshape(-1)),)


def _getitem(apply, input, index):
    """Tensor.__getitem__: a view for ints, slices, None and Ellipsis; a gather otherwise
    (of whole rows when the index is one integer array)."""
    index, advanced = _normalize_index(index)
    if (
        advanced
        and len(index) == 1
        and index[0].dtype.kind in "iu"
        and input.ndim
        and input.shape[0]
    ):
        return apply(index_rows, input, rows=index[0])
    return apply(index_take if advanced else index_view, input, index=index)


index_view = defop(
    "_index_view",
    _index_view_forward,
    strided_backward,
    api=_getitem,
    dunders=("__getitem__",),
    int_ok=True,
    node_name="SliceBackward0",
    functions=(),
    cases=[
        Case(((4, 5),), {"index": (slice(1, None), slice(None, None, -2))}),
        Case(((4, 5),), {"index": (Ellipsis, None, 2)}),
        Case(((4, 5),), {"index": (slice(4, 1),)}),  # empty
        Case(((4, 5),), {"index": (-1, slice(None, None, 3))}),
    ],
    jvp="linear",
)
index_rows = defop(
    "_index_rows",
    _index_rows_forward,
    rows_backward,
    int_ok=True,
    node_name="IndexBackward0",
    functions=(),
    cases=[
        Case(((4, 5),), {"rows": np.array([0, 2, 2, -1])}),  # repeated rows accumulate
        Case(((4, 2, 3),), {"rows": np.array([[3, 1], [0, 3]])}),
        Case(((4,),), {"rows": np.array([1, 1, 3])}),
        Case(((4, 5),), {"rows": np.array([], np.int64)}),  # empty
    ],
    jvp="linear",
)
index_take = defop(
    "_index_take",
    _index_take_forward,
    take_backward,
    int_ok=True,
    node_name="IndexBackward0",
    functions=(),
    cases=[
        Case(((4, 5),), {"index": (np.array([0, 2, 2, 3]),)}),  # repeated rows accumulate
        Case(((4, 5),), {"index": (slice(None), np.array([[1, -1], [0, 4]]))}),
        Case(((3, 4),), {"index": "mask(3, 4)"}),
        Case(((3, 4),), {"index": (np.array([], np.int64),)}),  # empty
    ],
    jvp="linear",
)


# ---------------------------------------------------------------------------------------------
# view ops


def _expand(x, size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    if len(size) < x.ndim:
        raise RuntimeError(
            f"expand(): the number of sizes provided ({len(size)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({x.ndim})"
        )
    lead = len(size) - x.ndim
    target = []
    for d, s in enumerate(size):
        own = x.shape[d - lead] if d >= lead else 1
        if s == -1:
            if d < lead:
                raise RuntimeError(
                    "expand(): -1 is not allowed in a leading, non-existing dimension"
                )
            s = own
        elif own != 1 and s != own:
            raise RuntimeError(
                f"expand(): the expanded size of the tensor ({s}) must match the existing size "
                f"({own}) at non-singleton dimension {d}. Target sizes: {list(size)}. Tensor "
                f"sizes: {list(x.shape)}"
            )
        target.append(s)
    target = tuple(target)
    owner = x if x.base is None else x.base
    if x.size and type(owner) is np.ndarray and owner.flags.c_contiguous:
        # the view built directly over the owner's memory (np.broadcast_to: ~3 us more), read
        # only as broadcast_to's; base: the owner, as numpy's views of views have
        strides = tuple(
            0 if d < lead or (x.shape[d - lead] == 1 and s != 1) else x.strides[d - lead]
            for d, s in enumerate(target)
        )
        result = np.ndarray(target, x.dtype, owner, address_of(x) - address_of(owner), strides)
        result.flags.writeable = False
        return result
    return np.broadcast_to(x, target)


expand = _view_op(
    "expand",
    lambda x, size: _expand(x, size),
    api=lambda apply, input, *size: apply(expand, input, size=size),
    methods=("expand",),
    functions=(),
    cases=[Case(((3, 1),), {"size": (2, 3, 4)}), Case(((3, 1),), {"size": (-1, 5)})],
    doc=(
        "A view of input broadcast to size (-1 keeps a dimension); the gradient sums "
        "over the broadcast dimensions."
    ),
    jvp="linear",
)
broadcast_to = _view_op(
    "broadcast_to",
    lambda x, size: _expand(x, (tuple(size),)),
    methods=("broadcast_to",),
    cases=[Case(((4,),), {"size": (3, 4)})],
    doc="input broadcast to size, as expand (torch documents it as shape, and takes size).",
    jvp="linear",
)


def _flip(x, dims):
    if isinstance(dims, int):
        dims = (dims,)
    index = [slice(None)] * x.ndim
    for d in dims:
        index[wrap_dim("flip", d, x.ndim)] = slice(None, None, -1)
    return x[tuple(index)]


flip = _view_op(
    "flip",
    _flip,
    methods=("flip",),
    cases=[Case(((3, 4),), {"dims": (0,)}), Case(((2, 3, 4),), {"dims": (-1, 0)})],
    doc="input reversed along each of dims.",
    jvp="linear",
)


def _narrow(x, dim, start, length):
    d = wrap_dim("narrow", dim, x.ndim)
    size = x.shape[d]
    if start < -size or start > size:
        raise IndexError(
            f"narrow(): start ({start}) is out of range for dimension {d} of size {size}"
        )
    start %= size if size else 1
    if length < 0 or start + length > size:
        raise RuntimeError(
            f"narrow(): start ({start}) + length ({length}) exceeds dimension size ({size})."
        )
    index = [slice(None)] * x.ndim
    index[d] = slice(start, start + length)
    return x[tuple(index)]


narrow = _view_op(
    "narrow",
    _narrow,
    methods=("narrow",),
    cases=[
        Case(((5, 4),), {"dim": 0, "start": 1, "length": 3}),
        Case(((3, 6),), {"dim": -1, "start": -4, "length": 2}),
    ],
    doc="The view input[..., start:start + length, ...] along dim.",
    jvp="linear",
)


def _diagonal(x, offset=0, dim1=0, dim2=1):
    if x.ndim < 2:
        raise RuntimeError(f"diagonal(): expected a tensor of at least 2 dimensions, got {x.ndim}")
    a, b = wrap_dim("diagonal", dim1, x.ndim), wrap_dim("diagonal", dim2, x.ndim)
    if a == b:
        raise RuntimeError(f"diagonal(): diagonal dimensions cannot be identical {dim1}, {dim2}")
    return np.diagonal(x, offset, a, b)


diagonal = _view_op(
    "diagonal",
    _diagonal,
    methods=("diagonal",),
    cases=[
        Case(((4, 5),)),
        Case(((4, 5),), {"offset": -2}),
        Case(((2, 3, 4),), {"offset": 1, "dim1": 2, "dim2": 0}),
    ],
    doc="The diagonal of input with the given offset between dimensions dim1 and dim2, as a view.",
    jvp="linear",
)


def _movedim(x, source, destination):
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim(): Invalid source or destination dims: source ({list(src)} dims) should "
            f"contain the same number of dims as destination ({list(dst)} dims)"
        )
    src = [wrap_dim("movedim", d, x.ndim) for d in src]
    dst = [wrap_dim("movedim", d, x.ndim) for d in dst]
    return np.moveaxis(x, src, dst)


movedim = _view_op(
    "movedim",
    _movedim,
    methods=("movedim", "moveaxis"),
    functions=("movedim", "moveaxis"),
    cases=[
        Case(((2, 3, 4),), {"source": 0, "destination": -1}),
        Case(((2, 3, 4),), {"source": (0, 1), "destination": (2, 0)}),
    ],
    doc="input with dimension(s) source moved to position(s) destination.",
    jvp="linear",
)


def _unfold(x, dimension, size, step):
    # torch.Tensor.unfold: windows of `size` every `step` along `dimension`, as a new last dim
    d = wrap_dim("unfold", dimension, max(x.ndim, 1))
    n = x.shape[d] if x.ndim else 1
    if size > n or size < 0:
        raise RuntimeError(
            f"unfold(): maximum size for tensor at dimension {d} is {n} but size is {size}"
        )
    if step <= 0:
        raise RuntimeError(f"unfold(): step is {step} but must be > 0")
    count = (n - size) // step + 1
    shape = x.shape[:d] + (count,) + x.shape[d + 1 :] + (size,)
    st = x.strides
    strides = st[:d] + (st[d] * step,) + st[d + 1 :] + (st[d],)
    return np.lib.stride_tricks.as_strided(x, shape=shape, strides=strides, writeable=False)


unfold = _view_op(
    "unfold",
    _unfold,
    methods=("unfold",),
    functions=(),
    cases=[
        Case(((7,),), {"dimension": 0, "size": 3, "step": 2}),
        Case(((3, 6),), {"dimension": 1, "size": 2, "step": 1}),
    ],
    doc=(
        "Every slice of length size along dimension, taken every step elements, as a "
        "new last dimension."
    ),
    jvp="linear",
)


def _windows(x, dims, sizes, steps, dilations):
    """Sliding windows over ``dims`` (convolution's im2col, as a view): dim d becomes the
    window count, and a window dim of ``sizes[i]`` is appended for each; overlapping windows
    share elements, so the backward sums over them (col2im)."""
    shape, strides = list(x.shape), list(x.strides)
    extra_shape, extra_strides = [], []
    for d, size, step, dil in zip(dims, sizes, steps, dilations, strict=True):
        span = dil * (size - 1) + 1
        if span > shape[d]:
            raise RuntimeError(
                f"windows: the window ({size} with dilation {dil}) is larger than the padded "
                f"input ({shape[d]}) along dim {d}"
            )
        count = (shape[d] - span) // step + 1
        extra_shape.append(size)
        extra_strides.append(strides[d] * dil)
        shape[d], strides[d] = count, strides[d] * step
    return np.lib.stride_tricks.as_strided(
        x, shape=tuple(shape + extra_shape), strides=tuple(strides + extra_strides), writeable=False
    )


windows = _view_op(
    "_windows",
    _windows,
    methods=(),
    functions=(),
    node_name="UnfoldBackward0",
    cases=[
        Case(((2, 7),), {"dims": (1,), "sizes": (3,), "steps": (2,), "dilations": (1,)}),
        Case(((1, 6, 5),), {"dims": (1, 2), "sizes": (2, 3), "steps": (1, 2), "dilations": (2, 1)}),
    ],
    jvp="linear",
)


# ---------------------------------------------------------------------------------------------
# gathering ops


def _roll(p, shifts, dims=None):
    if dims is None:
        return np.roll(p.reshape(-1), shifts).reshape(p.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(
            f"roll(): shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}"
        )
    return np.roll(p, shifts, tuple(wrap_dim("roll", d, p.ndim) for d in dims))


roll = _take_op(
    "roll",
    _roll,
    methods=("roll",),
    cases=[Case(((3, 4),), {"shifts": 2}), Case(((3, 4),), {"shifts": (1, -1), "dims": (0, 1)})],
    doc="input rolled by shifts along dims (elements leaving one end re-enter at the other).",
    jvp="linear",
)


def _repeat(p, repeats):
    if len(repeats) == 1 and isinstance(repeats[0], (tuple, list)):
        repeats = tuple(repeats[0])
    if len(repeats) < p.ndim:
        raise RuntimeError(
            "repeat(): Number of dimensions of repeat dims can not be smaller than number of "
            "dimensions of tensor"
        )
    return np.tile(p.reshape((1,) * (len(repeats) - p.ndim) + p.shape), repeats)


repeat = _take_op(
    "repeat",
    _repeat,
    api=lambda apply, input, *repeats: apply(repeat, input, repeats=repeats),
    methods=("repeat",),
    functions=(),
    cases=[Case(((2, 3),), {"repeats": (2, 1, 2)})],
    doc="input tiled repeats times along each dimension.",
    jvp="linear",
)
tile = _take_op(
    "tile",
    lambda p, dims: np.tile(p, tuple(dims)),
    methods=("tile",),
    cases=[Case(((2, 3),), {"dims": (2,)}), Case(((3,),), {"dims": (2, 2)})],
    doc="input tiled dims times along each dimension (leading ones added as in torch.tile).",
    jvp="linear",
)


def _index_select(p, dim, index):
    d = wrap_dim("index_select", dim, max(p.ndim, 1))
    idx = _as_index("index_select", index, p.shape[d] if p.ndim else 1, d)
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    return np.take(p, idx.reshape(-1), axis=d) if p.ndim else p.reshape(-1)[idx.reshape(-1)]


index_select = _take_op(
    "index_select",
    _index_select,
    methods=("index_select",),
    cases=[
        Case(((4, 3),), {"dim": 0, "index": [3, 0, 3]}),
        Case(((4, 3),), {"dim": -1, "index": [2]}),
    ],
    doc="The entries of input at positions index along dim.",
    jvp="linear",
)


def _gather(p, dim, index):
    d = wrap_dim("gather", dim, max(p.ndim, 1))
    idx = _as_index("gather", index, p.shape[d] if p.ndim else 1, d)
    if idx.ndim != p.ndim:
        raise RuntimeError(
            "gather(): Index tensor must have the same number of dimensions as input tensor"
        )
    for k in range(p.ndim):
        if k != d and idx.shape[k] > p.shape[k]:
            raise RuntimeError(
                f"gather(): Size does not match at dimension {k} expected index {list(idx.shape)} "
                f"to be no larger than self {list(p.shape)} apart from dimension {d}"
            )
    sub = p[tuple(slice(0, s) if k != d else slice(None) for k, s in enumerate(idx.shape))]
    return np.take_along_axis(sub, idx, axis=d)


def _gather_sparse_grad(apply, input, dim, index, sparse_grad=False):  # noqa: A002
    if sparse_grad:
        raise NotImplementedError("gather(sparse_grad=True): nautograd's gradients are dense")
    return apply(gather, input, dim=dim, index=index)


gather = _take_op(
    "gather",
    _gather,
    methods=("gather",),
    keywords={"sparse_grad": lambda apply, *a, **k: _gather_sparse_grad(apply, *a, **k)},
    cases=[
        Case(((3, 4),), {"dim": 1, "index": [[0, 0], [3, 1], [2, 2]]}),
        Case(((3, 4),), {"dim": 0, "index": [[2, 0, 1, 1]]}),
    ],
    doc="``result[i][j] = input[index[i][j]][j]`` for dim=0, and likewise along any dim.",
    jvp="linear",
)


def _take_along_dim(p, indices, dim=None):
    if dim is None:
        idx = _as_index("take_along_dim", indices, p.size, 0)
        return p.reshape(-1)[idx.reshape(-1)]
    d = wrap_dim("take_along_dim", dim, max(p.ndim, 1))
    idx = _as_index("take_along_dim", indices, p.shape[d], d)
    if idx.ndim != p.ndim:
        raise RuntimeError(
            "take_along_dim(): input and indices should have the same number of dimensions"
        )
    shape = list(
        np.broadcast_shapes(
            tuple(s if k != d else 1 for k, s in enumerate(p.shape)),
            tuple(s if k != d else 1 for k, s in enumerate(idx.shape)),
        )
    )
    ps, is_ = list(shape), list(shape)
    ps[d], is_[d] = p.shape[d], idx.shape[d]
    return np.take_along_axis(np.broadcast_to(p, ps), np.broadcast_to(idx, is_), axis=d)


take_along_dim = _take_op(
    "take_along_dim",
    _take_along_dim,
    methods=("take_along_dim",),
    cases=[
        Case(((3, 4),), {"indices": [[0], [3], [1]], "dim": 1}),
        Case(((3, 4),), {"indices": [5, 0, 11]}),
    ],
    doc="The entries of input at indices along dim (over the flattened input when dim is None).",
    jvp="linear",
)


def _masked_fill(p, mask, value):
    m = np.asarray(getattr(mask, "_data", mask))
    if m.dtype != np.bool_:
        raise RuntimeError(f"masked_fill(): expected mask of dtype bool, got {m.dtype}")
    binary_params("masked_fill", p.shape, m.shape)
    if np.broadcast_shapes(p.shape, m.shape) != p.shape:
        raise RuntimeError(
            f"masked_fill(): mask of shape {tuple(m.shape)} cannot be broadcast to the input's "
            f"shape {tuple(p.shape)}"
        )
    return np.where(m, -1, p)


masked_fill = _take_op(
    "masked_fill",
    _masked_fill,
    fill=lambda mask, value: float(getattr(value, "_data", value)),
    methods=("masked_fill",),
    # the filled entries are constants: no tangent there
    jvp=lambda x, t, result, mask, value: t.masked_fill(mask, 0.0),
    cases=[
        Case(((3, 4),), {"mask": "mask(3, 4)", "value": 0.5}),
        Case(((3, 4),), {"mask": "mask(4)", "value": -2.0}),
    ],
    doc="input with value written where mask is True.",
)


def _tri(p, diagonal, lower):
    if p.ndim < 2:
        raise RuntimeError(
            f"{'tril' if lower else 'triu'}: input tensor must have at least 2 dimensions"
        )
    rows, cols = p.shape[-2:]
    keep = (
        np.tri(rows, cols, diagonal, dtype=bool)
        if lower
        else ~np.tri(rows, cols, diagonal - 1, dtype=bool)
    )
    return np.where(keep, p, -1)


tril = _take_op(
    "tril",
    lambda p, diagonal=0: _tri(p, diagonal, True),
    fill=_zero,
    methods=("tril",),
    cases=[Case(((4, 4),)), Case(((2, 3, 4),), {"diagonal": -1})],
    doc=(
        "The lower triangle of the last two dimensions of input (above the given "
        "diagonal set to 0)."
    ),
    jvp="linear",
)
triu = _take_op(
    "triu",
    lambda p, diagonal=0: _tri(p, diagonal, False),
    fill=_zero,
    methods=("triu",),
    cases=[Case(((4, 4),)), Case(((3, 5),), {"diagonal": 2})],
    doc=(
        "The upper triangle of the last two dimensions of input (below the given "
        "diagonal set to 0)."
    ),
    jvp="linear",
)


def _diag(p, diagonal=0):
    if p.ndim == 1:
        n = p.shape[0] + abs(diagonal)
        out = np.full((n, n), -1, np.int64)
        r = np.arange(p.shape[0])
        if diagonal >= 0:
            out[r, r + diagonal] = p
        else:
            out[r - diagonal, r] = p
        return out
    if p.ndim == 2:
        return np.diagonal(p, diagonal).copy()
    raise RuntimeError(f"diag(): expected a 1-D or 2-D tensor, got {p.ndim}-D")


diag = _take_op(
    "diag",
    _diag,
    fill=_zero,
    methods=("diag",),
    cases=[Case(((3,),)), Case(((3,),), {"diagonal": -1}), Case(((3, 4),), {"diagonal": 1})],
    doc=(
        "A 1-D input as the given diagonal of a square matrix, or the given diagonal "
        "of a 2-D input."
    ),
    jvp="linear",
)


def _pad(p, pad, mode="constant", value=0.0):
    if mode != "constant":
        raise NotImplementedError(f"pad(): mode {mode!r} is not supported yet (only 'constant')")
    pad = tuple(pad)
    if len(pad) % 2 or len(pad) // 2 > p.ndim:
        raise RuntimeError(
            f"pad(): padding length must be even and at most twice the number of dimensions "
            f"({p.ndim}), got {len(pad)}"
        )
    out = p
    # torch: pairs from the last dim backwards; negative padding crops
    for k in range(len(pad) // 2):
        d = p.ndim - 1 - k
        lo, hi = pad[2 * k], pad[2 * k + 1]
        if lo < 0:
            out = out[(slice(None),) * d + (slice(-lo, None),)]
        if hi < 0:
            out = out[(slice(None),) * d + (slice(0, out.shape[d] + hi),)]
        widths = [(0, 0)] * p.ndim
        widths[d] = (max(lo, 0), max(hi, 0))
        out = np.pad(out, widths, constant_values=-1)
    return out


pad = _take_op(
    "pad",
    _pad,
    fill=lambda pad, mode="constant", value=0.0: float(value),
    nn_functional=True,
    methods=(),
    functions=(),
    cases=[
        Case(((3, 4),), {"pad": (1, 2)}),
        Case(((2, 3, 4),), {"pad": (0, 1, 2, -1), "value": 1.5}),
    ],
    doc=(
        "input padded by pad (pairs of before/after widths, last dimension first) "
        "with value, or by reflection or replication (mode)."
    ),
)

# ---------------------------------------------------------------------------------------------
# scatter_add: result = x with src added at index along dim


def _scatter_add_forward(x, src, dim, index):
    d = wrap_dim("scatter_add", dim, max(x.ndim, 1))
    idx = _as_index("scatter_add", index, x.shape[d] if x.ndim else 1, d)
    if idx.ndim != x.ndim or src.ndim != x.ndim:
        raise RuntimeError(
            "scatter_add(): Index tensor must have the same number of dimensions as self tensor"
        )
    for k in range(x.ndim):
        if idx.shape[k] > src.shape[k] or (k != d and idx.shape[k] > x.shape[k]):
            raise RuntimeError(
                f"scatter_add(): Expected index {list(idx.shape)} to be no larger than self "
                f"{list(x.shape)} apart from dimension {d} and to be no larger size than src "
                f"{list(src.shape)}"
            )
    region = tuple(slice(0, s) for s in idx.shape)
    px = _positions(x.shape)[
        tuple(slice(0, s) if k != d else slice(None) for k, s in enumerate(idx.shape))
    ]
    target = np.ascontiguousarray(np.take_along_axis(px, idx, axis=d)).reshape(-1)
    source = np.ascontiguousarray(_positions(src.shape)[region]).reshape(-1)
    result = np.array(x, copy=True, order="C")
    np.add.at(result.reshape(-1), target, src[region].reshape(-1))
    return result, (target, source), (x.size, src.size, target.size), ()


@kernel
def scatter_add_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # grad_x = grad; grad_src[source[j]] += grad[target[j]]
    nx, nsrc, m = ip[0], ip[1], ip[2]
    g = view(G, go[0], nx)
    if gi[0] >= 0:
        grad_x = view(G, gi[0], nx)
        for i in range(nx):
            grad_x[i] += g[i]
    if gi[1] >= 0:
        grad_src = view(G, gi[1], nsrc)
        target = saved_index(sa, 0, m)
        source = saved_index(sa, 1, m)
        for j in range(m):
            grad_src[source[j]] += g[target[j]]


def _scatter_add_formula(ctx, grad):
    # grad_x = grad; grad_src[source[j]] = grad[target[j]] (each source position once)
    xs, ss = ctx.input_shapes
    need = ctx.needs_input_grad
    grad_src = None
    if need[1]:
        target, source = ctx.saved(0), ctx.saved(1)
        zeros = ctx.constant(np.zeros(int(np.prod(ss, dtype=np.int64))))
        grad_src = zeros.scatter_add(0, source, grad.reshape(-1)[target]).reshape(ss)
    return (grad if need[0] else None, grad_src)


def _scatter_add_api(apply, input, dim, index, src):
    return apply(scatter_add, input, src, dim=dim, index=index)


scatter_add = defop(
    "scatter_add",
    _scatter_add_forward,
    scatter_add_backward,
    formula=_scatter_add_formula,
    nin=2,
    api=_scatter_add_api,
    methods=("scatter_add",),
    cases=[
        Case(((3, 4), (2, 4)), {"dim": 0, "index": [[0, 2, 2, 1], [2, 2, 0, 0]]}),
        Case(((3, 4), (3, 2)), {"dim": 1, "index": [[0, 0], [3, 1], [2, 2]]}),
    ],
    doc="input with src added at index along dim (repeated positions accumulate).",
    jvp="linear",
)

# ---------------------------------------------------------------------------------------------
# split / chunk / unflatten: composites of narrow and reshape


def _split(apply, tensor, split_size_or_sections, dim=0):
    d = wrap_dim("split", dim, max(tensor.ndim, 1))
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, numbers.Integral):
        step = int(split_size_or_sections)
        if step <= 0 and size:
            raise RuntimeError(f"split(): split_size must be positive, got {step}")
        sections = [min(step, size - s) for s in range(0, size, step)] if size else [0]
    else:
        sections = [int(s) for s in split_size_or_sections]
        if sum(sections) != size or any(s < 0 for s in sections):
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                f"size at dimension {d}), but got split_sizes={sections}"
            )
    if tensor.ndim == 0:
        raise RuntimeError("split(): split expects at least a 1-dimensional tensor")
    if len(sections) == 1:
        return (apply(narrow, tensor, dim=d, start=0, length=sections[0]),)
    # one node with a view per section (torch's SplitWithSizesBackward0), not a narrow each
    return apply(split_with_sizes, tensor, dim=d, sections=tuple(sections))


def _split_forward(x, dim, sections):
    outer, size, inner = outer_inner(x.shape, dim)
    index = (slice(None),) * dim
    results, start = [], 0
    for s in sections:
        results.append(x[index + (slice(start, start + s), Ellipsis)])
        start += s
    return tuple(results), (), (outer, size, inner, len(sections), *sections), ()


@kernel
def split_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # ip = (outer, size, inner, k, sections...): output j is x[..., start_j : start_j + s_j, ...]
    # along the middle axis of x viewed as (outer, size, inner)
    if gi[0] < 0:
        return
    outer, size, inner, k = ip[0], ip[1], ip[2], ip[3]
    grad_x = view(G, gi[0], outer * size * inner)
    start = 0
    for j in range(k):
        s = ip[4 + j]
        if go[j] >= 0 and s > 0:
            run = s * inner
            g = view(G, go[j], outer * run)
            for o in range(outer):
                base = (o * size + start) * inner
                for c in range(run):
                    grad_x[base + c] += g[o * run + c]
        start += s


split_with_sizes = defop(
    "split_with_sizes",
    _split_forward,
    split_backward,
    # (the walk gives outputs no consumer used zeros)
    formula=lambda ctx, *grads: (ctx.ng.cat(grads, dim=ctx.kwargs["dim"]),),
    int_ok=True,
    functions=(),
    node_name="SplitWithSizesBackward0",
    cases=[
        Case(((5, 4),), {"dim": 0, "sections": (2, 2, 1)}),
        Case(((3, 7),), {"dim": 1, "sections": (3, 0, 4)}),
        Case(((2, 6, 3),), {"dim": 1, "sections": (1, 5)}),
    ],
    jvp="linear",
)


def _chunk(apply, input, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError(f"chunk(): chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim("chunk", dim, max(input.ndim, 1))
    size = input.shape[d]
    if size == 0:  # torch: `chunks` empty pieces
        return _split(apply, input, [0] * chunks, d)
    return _split(apply, input, max(-(-size // chunks), 1), d)


def _unflatten(apply, input, dim, sizes):
    from .shape import reshape

    d = wrap_dim("unflatten", dim, max(input.ndim, 1))
    shape = tuple(input.shape)
    sizes = tuple(int(s) for s in sizes)
    known = int(np.prod([s for s in sizes if s != -1]))
    if sizes.count(-1) > 1 or (-1 not in sizes and known != shape[d]):
        raise RuntimeError(
            f"unflatten(): Provided sizes {list(sizes)} don't multiply up to the size of dim "
            f"{dim} ({shape[d]}) in the input tensor"
        )
    return apply(reshape, input, shape=shape[:d] + sizes + shape[d + 1 :])


split = defcomposite(
    "split",
    _split,
    [
        Case(((5, 4),), {"split_size_or_sections": 2}),
        Case(((5, 4),), {"split_size_or_sections": (1, 3), "dim": 1}),
    ],
    methods=("split",),
    doc=(
        "input cut along dim into pieces of split_size_or_sections elements (an int: "
        "equal pieces, the last smaller; a list: those sizes), as views."
    ),
)
chunk = defcomposite(
    "chunk",
    _chunk,
    [Case(((5, 4),), {"chunks": 2}), Case(((3, 7),), {"chunks": 3, "dim": -1})],
    methods=("chunk",),
    doc="input cut along dim into chunks pieces of equal size (the last may be smaller), as views.",
)
unflatten = defcomposite(
    "unflatten",
    _unflatten,
    [Case(((2, 12),), {"dim": 1, "sizes": (3, -1)}), Case(((6,),), {"dim": 0, "sizes": (2, 3)})],
    methods=("unflatten",),
    doc="input with dimension dim expanded into sizes.",
)
