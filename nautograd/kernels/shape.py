"""Shape ops: reshape/view, transpose/permute/.T, unsqueeze/squeeze, stack, cat, unbind, select.

Forward results are numpy views where numpy gives one (as torch's are views); the backward of
every op here only moves gradient elements.
"""

import numpy as np

from ._jit import bcast_offsets, kernel, view
from ._shapes import coalesce, numel, outer_inner, wrap_dim
from .elementwise import copy_backward
from .registry import Case, defcomposite, defop


def _infer_shape(op, shape, n):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    # (positive Python ints whose product is n, the common case: ~2 us less than the checks)
    known = 1
    for s in shape:
        if type(s) is not int or s <= 0:
            break
        known *= s
    else:
        if known == n:
            return shape if type(shape) is tuple else tuple(shape)
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise RuntimeError(f"{op}(): only one dimension can be inferred")
    known = numel([s for s in shape if s != -1])
    if -1 in shape:
        if known == 0 or n % known:
            raise RuntimeError(f"{op}(): shape '{list(shape)}' is invalid for input of size {n}")
        shape = tuple(n // known if s == -1 else s for s in shape)
    if numel(shape) != n or any(s < 0 for s in shape):
        raise RuntimeError(f"{op}(): shape '{list(shape)}' is invalid for input of size {n}")
    return shape


def _reshape_forward(x, shape):
    shape = _infer_shape("reshape", shape, x.size)
    return x.reshape(shape), (), (x.size,), ()


def _view_forward(x, shape):
    shape = _infer_shape("view", shape, x.size)
    return x.reshape(shape), (), (x.size,), ()


reshape = defop(
    "reshape",
    _reshape_forward,
    copy_backward,
    int_ok=True,
    node_name="ViewBackward0",
    api=lambda apply, input, *shape: apply(reshape, input, shape=shape),
    methods=("reshape",),
    cases=[Case(((3, 4),), {"shape": (2, 6)}), Case(((3, 4),), {"shape": (-1,)})],
    doc=(
        "input with a new shape of the same number of elements (-1 infers one "
        "dimension); a view when possible."
    ),
    jvp="linear",
)
view_ = defop(
    "view",
    _view_forward,
    copy_backward,
    int_ok=True,
    node_name="ViewBackward0",
    api=lambda apply, input, *shape: apply(view_, input, shape=shape),
    methods=("view",),
    functions=(),
    cases=[Case(((3, 4),), {"shape": (4, 3)})],
    doc=(
        "A view of input with a new shape of the same number of elements (-1 infers one dimension)."
    ),
    jvp="linear",
)


def _flatten_forward(x, start_dim=0, end_dim=-1):
    nd = max(x.ndim, 1)
    s = wrap_dim("flatten", start_dim, nd)
    e = wrap_dim("flatten", end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = x.shape[:s] + (numel(x.shape[s : e + 1]),) + x.shape[e + 1 :] if x.ndim else (1,)
    return x.reshape(shape), (), (x.size,), ()


flatten = defop(
    "flatten",
    _flatten_forward,
    copy_backward,
    int_ok=True,
    node_name="ViewBackward0",
    methods=("flatten",),
    cases=[Case(((2, 3, 4),)), Case(((2, 3, 4),), {"start_dim": 1})],
    doc="input with dimensions start_dim to end_dim merged into one.",
    jvp="linear",
)


def _unsqueeze_forward(x, dim):
    d = wrap_dim("unsqueeze", dim, x.ndim + 1)
    return np.expand_dims(x, d), (), (x.size,), ()


unsqueeze = defop(
    "unsqueeze",
    _unsqueeze_forward,
    copy_backward,
    int_ok=True,
    methods=("unsqueeze",),
    cases=[Case(((3, 4),), {"dim": 1}), Case(((3,),), {"dim": -1})],
    doc="A view of input with a dimension of size 1 inserted at dim.",
    jvp="linear",
)


def _squeeze_forward(x, dim=None):
    if dim is None:
        dims = tuple(d for d, s in enumerate(x.shape) if s == 1)
    else:
        ds = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(
            d for d in (wrap_dim("squeeze", d, x.ndim) for d in ds) if x.ndim and x.shape[d] == 1
        )
    return np.squeeze(x, axis=dims) if dims else x.view(), (), (x.size,), ()


squeeze = defop(
    "squeeze",
    _squeeze_forward,
    copy_backward,
    int_ok=True,
    methods=("squeeze",),
    cases=[Case(((3, 1, 4, 1),)), Case(((3, 1, 4),), {"dim": 1}), Case(((3, 4),), {"dim": 0})],
    doc="A view of input without its dimensions of size 1 (only dim when given).",
    jvp="linear",
)


def _permute_params(shape, perm):
    # result element i (C order of the permuted shape) reads x at sum(idx[d] * x_stride[perm[d]])
    st, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        st[d] = acc
        acc *= shape[d]
    out_shape = [shape[p] for p in perm]
    cshape, (cst,) = coalesce(out_shape, [[st[p] for p in perm]])
    return (numel(shape), len(cshape), *cshape, *cst)


@kernel
def permute_backward(G, G2, go, gi, V, so, sa, ip, fp):
    if gi[0] < 0:
        return
    n = ip[0]
    g = view(G, go[0], n)
    grad_x = view(G, gi[0], n)
    offs = bcast_offsets(ip, 2, ip[1], 0, n)
    for i in range(n):
        grad_x[offs[i]] += g[i]


def _permute_forward(x, dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    perm = tuple(wrap_dim("permute", d, x.ndim) for d in dims)
    if sorted(perm) != list(range(x.ndim)):
        raise RuntimeError(
            f"permute(): number of dims don't match in permute (got {list(dims)} for a "
            f"tensor of shape {tuple(x.shape)})"
        )
    return np.transpose(x, perm), (), _permute_params(x.shape, perm), ()


def _permute_formula(ctx, grad):
    dims = ctx.kwargs["dims"]
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    perm = [wrap_dim("permute", d, len(dims)) for d in dims]
    return (grad.permute(*np.argsort(perm).tolist()),)


permute = defop(
    "permute",
    _permute_forward,
    permute_backward,
    formula=_permute_formula,
    int_ok=True,
    api=lambda apply, input, *dims: apply(permute, input, dims=dims),
    methods=("permute",),
    cases=[Case(((2, 3, 4),), {"dims": (2, 0, 1)})],
    doc="A view of input with its dimensions in the order dims.",
    jvp="linear",
)


def _transpose_forward(x, dim0, dim1):
    nd = max(x.ndim, 1)
    perm = list(range(x.ndim))
    if x.ndim:
        a, b = wrap_dim("transpose", dim0, nd), wrap_dim("transpose", dim1, nd)
        perm[a], perm[b] = perm[b], perm[a]
    return np.transpose(x, perm), (), _permute_params(x.shape, perm), ()


transpose = defop(
    "transpose",
    _transpose_forward,
    permute_backward,
    formula=lambda ctx, grad: (
        grad.transpose(ctx.kwargs["dim0"], ctx.kwargs["dim1"]) if grad.ndim else grad,
    ),
    int_ok=True,
    methods=("transpose", "swapdims"),
    functions=("transpose", "swapdims"),
    cases=[Case(((3, 4),), {"dim0": 0, "dim1": 1}), Case(((2, 3, 4),), {"dim0": -1, "dim1": 0})],
    doc="A view of input with dimensions dim0 and dim1 swapped.",
    jvp="linear",
)


def _t_forward(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    perm = tuple(range(x.ndim))[::-1]
    return np.transpose(x, perm), (), _permute_params(x.shape, perm), ()


t = defop(
    "t",
    _t_forward,
    permute_backward,
    formula=lambda ctx, grad: (grad.t(),),
    int_ok=True,
    node_name="TBackward0",
    methods=("t",),
    cases=[Case(((3, 4),)), Case(((3,),))],
    doc="The transpose of a matrix (a 0-D or 1-D input is returned as it is).",
    jvp="linear",
)


def _cat_params(op, arrays, dim):
    if not arrays:
        raise RuntimeError(f"{op}(): expected a non-empty list of Tensors")
    ref = arrays[0].shape
    d = wrap_dim(op, dim, len(ref))
    for k, a in enumerate(arrays):
        if len(a.shape) != len(ref) or any(
            s != r for i, (s, r) in enumerate(zip(a.shape, ref, strict=True)) if i != d
        ):
            raise RuntimeError(
                f"{op}(): Sizes of tensors must match except in dimension {d}. Expected size "
                f"{tuple(ref)} but got size {tuple(a.shape)} for tensor number {k} in the list."
            )
    outer, _, inner = outer_inner(ref, d)
    sizes = [a.shape[d] for a in arrays]
    return d, (outer, inner, sum(sizes), len(arrays), *sizes)


@kernel
def cat_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # the result viewed as (outer, total * inner); input k owns columns [off_k, off_k + d_k) * inner
    outer, inner, total, k = ip[0], ip[1], ip[2], ip[3]
    g = view(G, go[0], outer * total * inner)
    start = 0
    for j in range(k):
        d = ip[4 + j]
        if gi[j] >= 0:
            w = d * inner
            grad_x = view(G, gi[j], outer * w)
            for o in range(outer):
                src = o * total * inner + start * inner
                for c in range(w):
                    grad_x[o * w + c] += g[src + c]
        start += d


def _cat_forward(*arrays, dim=0):
    d, ip = _cat_params("cat", arrays, dim)
    return np.concatenate(arrays, axis=d), (), ip, ()


_STACK0 = {}  # (count, dtype) -> iparams of stacking that many 0-dim tensors


def _stack_forward(*arrays, dim=0):
    if not arrays:
        raise RuntimeError("stack(): expected a non-empty list of Tensors")
    if dim in (0, -1) and all(a.ndim == 0 for a in arrays):  # scalars: one np.array call
        k = len(arrays)
        ip = _STACK0.get(k)
        if ip is None:
            ip = _STACK0[k] = (1, 1, k, k, *([1] * k))
        return np.array(arrays, dtype=arrays[0].dtype), (), ip, ()
    d = wrap_dim("stack", dim, arrays[0].ndim + 1)
    for k, a in enumerate(arrays):
        if a.shape != arrays[0].shape:
            raise RuntimeError(
                f"stack(): stack expects each tensor to be equal size, but got "
                f"{tuple(arrays[0].shape)} at entry 0 and {tuple(a.shape)} at entry {k}"
            )
    expanded = [np.expand_dims(a, d) for a in arrays]
    _, ip = _cat_params("stack", expanded, d)
    return np.concatenate(expanded, axis=d), (), ip, ()


def _stack_spec(shapes, kwargs):
    """The deferred forward's spec of stack (registry.Op.lazy): inputs of one shape."""
    dim = kwargs.get("dim", 0)
    if len(kwargs) > ("dim" in kwargs):
        return None
    ref = shapes[0]
    for s in shapes:
        if s != ref:
            return None
    d = wrap_dim("stack", dim, len(ref) + 1)
    k = len(shapes)
    outer, inner = numel(ref[:d]), numel(ref[d:])  # of the inputs viewed as (outer, 1, inner)
    ip = (outer, inner, k, k, *([1] * k))
    return ref[:d] + (k,) + ref[d:], ip, (), 0, outer * inner * k


@kernel
def stack_lazy(S, xo, xn, k, top, ip, fp, oo, on):
    # the result viewed as (outer, k, inner): input j fills the rows [o, j]
    outer, inner = ip[0], ip[1]
    for o in range(outer):
        for j in range(k):
            src = xo[j] + o * inner
            dst = top + (o * k + j) * inner
            for c in range(inner):
                S[dst + c] = S[src + c]
    oo[0] = top
    on[0] = outer * k * inner
    return 1


def _cat_formula(ctx, grad):
    # each input's slice of grad along the cat dim (stack: along a new dim)
    shapes = ctx.input_shapes
    stacked = len(ctx.output_shapes[0]) == len(shapes[0]) + 1
    d = wrap_dim("cat", ctx.kwargs.get("dim", 0), len(ctx.output_shapes[0]))
    out, start = [], 0
    for s, need in zip(shapes, ctx.needs_input_grad, strict=True):
        size = 1 if stacked else s[d]
        if need:
            out.append(grad.narrow(d, start, size).reshape(s))
        else:
            out.append(None)
        start += size
    return tuple(out)


cat = defop(
    "cat",
    _cat_forward,
    cat_backward,
    formula=_cat_formula,
    nin=-1,
    int_ok=True,
    functions=("cat", "concat"),
    cases=[Case(((2, 3), (4, 3))), Case(((2, 3), (2, 1), (2, 2)), {"dim": 1})],
    doc="tensors joined along the existing dimension dim.",
    jvp="linear",
)
stack = defop(
    "stack",
    _stack_forward,
    cat_backward,
    formula=_cat_formula,
    nin=-1,
    int_ok=True,
    cases=[Case(((2, 3), (2, 3))), Case(((3,), (3,), (3,)), {"dim": 1}), Case(((), ()))],
    lazy=(_stack_spec, stack_lazy),
    doc="tensors joined along a new dimension dim.",
    jvp="linear",
)


def _unbind_forward(x, dim=0):
    if x.ndim == 0:
        raise IndexError("unbind(): Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim("unbind", dim, x.ndim)
    outer, size, inner = outer_inner(x.shape, d)
    # views, as torch's (the trailing Ellipsis keeps a 0-dim item a view, not a numpy scalar)
    index = (slice(None),) * d
    results = tuple([x[index + (i, Ellipsis)] for i in range(size)])
    return results, (), (outer, size, inner), ()


@kernel
def unbind_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # output j is x[..., j, ...]: grad_x viewed as (outer, size, inner)
    if gi[0] < 0:
        return
    outer, size, inner = ip[0], ip[1], ip[2]
    grad_x = view(G, gi[0], outer * size * inner)
    for j in range(size):
        if go[j] < 0:
            continue
        g = view(G, go[j], outer * inner)
        for o in range(outer):
            for c in range(inner):
                grad_x[(o * size + j) * inner + c] += g[o * inner + c]


def _unbind_spec(shapes, kwargs):
    """The deferred forward's spec of unbind (registry.Op.lazy): along the first dim that is
    not 1, where its outputs are consecutive runs of the input (no copy: views, as torch's)."""
    dim = kwargs.get("dim", 0)
    if len(kwargs) > ("dim" in kwargs):
        return None
    (shape,) = shapes
    if not shape:
        return None
    d = wrap_dim("unbind", dim, len(shape))
    outer, size, inner = outer_inner(shape, d)
    if outer != 1 or size == 0:
        return None
    out = shape[:d] + shape[d + 1 :]
    return (out,) * size, (outer, size, inner), (), 0, 0


@kernel
def unbind_lazy(S, xo, xn, k, top, ip, fp, oo, on):
    size, inner = ip[1], ip[2]
    for j in range(size):
        oo[j] = xo[0] + j * inner
        on[j] = inner
    return size


unbind = defop(
    "unbind",
    _unbind_forward,
    unbind_backward,
    # (the engine gives outputs no consumer used zeros)
    formula=lambda ctx, *grads: (
        ctx.ng.stack(grads, dim=wrap_dim("unbind", ctx.kwargs.get("dim", 0), grads[0].ndim + 1)),
    ),
    int_ok=True,
    methods=("unbind",),
    cases=[Case(((3, 4),)), Case(((3, 4),), {"dim": 1}), Case(((4,),))],
    lazy=(_unbind_spec, unbind_lazy),
    doc="The slices of input along dim, as a tuple of views.",
    jvp="linear",
)


def _select_forward(x, dim, index):
    if x.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim("select", dim, x.ndim)
    size = x.shape[d]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {tuple(x.shape)} at "
            f"dimension {d}"
        )
    i = index % size
    outer, _, inner = outer_inner(x.shape, d)
    return np.take(x, i, axis=d), (), (outer, size, inner, i), ()


@kernel
def select_backward(G, G2, go, gi, V, so, sa, ip, fp):
    if gi[0] < 0:
        return
    outer, size, inner, j = ip[0], ip[1], ip[2], ip[3]
    grad_x = view(G, gi[0], outer * size * inner)
    g = view(G, go[0], outer * inner)
    for o in range(outer):
        for c in range(inner):
            grad_x[(o * size + j) * inner + c] += g[o * inner + c]


def _select_formula(ctx, grad):
    from .index import _positions, scatter_formula

    xs = ctx.input_shapes[0]
    d = wrap_dim("select", ctx.kwargs["dim"], len(xs))
    index = np.take(_positions(xs), ctx.kwargs["index"] % xs[d], axis=d)
    return (scatter_formula(ctx, grad, index),)


select = defop(
    "select",
    _select_forward,
    select_backward,
    formula=_select_formula,
    int_ok=True,
    methods=("select",),
    cases=[Case(((3, 4),), {"dim": 0, "index": 1}), Case(((3, 4),), {"dim": 1, "index": -1})],
    doc="The view input[..., index, ...] along dim (the dimension removed).",
    jvp="linear",
)


# numpy's names, as torch has them

swapaxes = defcomposite(
    "swapaxes",
    lambda apply, input, axis0, axis1: apply(transpose, input, dim0=axis0, dim1=axis1),
    [Case(((3, 4),), {"axis0": 0, "axis1": 1}), Case(((2, 3, 4),), {"axis0": -1, "axis1": 0})],
    methods=("swapaxes",),
    doc="A view of input with dimensions axis0 and axis1 swapped (transpose).\n"
    "axis0: (int) a dimension.\naxis1: (int) the other dimension.",
)


def _concatenate(apply, tensors, axis=0):
    return apply(cat, tensors, dim=axis)


concatenate = defcomposite(
    "concatenate",
    _concatenate,
    [
        Case(((2, 3), (4, 3)), call=lambda f, a, b: f([a, b])),
        Case(((2, 3), (2, 1)), {"axis": 1}, call=lambda f, a, b, axis: f([a, b], axis)),
    ],
    doc="tensors joined along the existing dimension axis (cat).\n"
    "tensors: (sequence of Tensor) the tensors to join.\naxis: (int) the dimension. Default: 0.",
)
