"""vmap's batched evaluation: a BatchedTensor stands for one sample of a value inside
``func.vmap`` and holds every sample of it, the mapped dimension first. An op given one runs
once for the whole batch through the op's batching rule here, which rewrites the
per-sample call (dimensions, shapes, broadcasting) into one call on the stacked values.

An op without a rule raises Unbatchable, and vmap runs the function once per sample instead
(torch's vmap has a per-op fallback of the same kind). Rules exist for the elementwise ops,
broadcasting, reductions, views and shape ops, indexing with ints, slices and one index
tensor, products, ``einsum``, ``linear``, softmax, the elementwise losses and
cross-entropy, convolutions and pooling, ``embedding``, ``layer_norm`` and ``batch_norm``
with running statistics.
"""

import itertools
import threading

import numpy as np

from . import _random
from .tensor import BATCHED, BATCHED_ON, FUNCTIONS, NN_FUNCTIONAL, OP_BY_NAME, Tensor, _wrap
from .tensor import apply as _apply


class Unbatchable(BaseException):  # noqa: N818
    """An op vmap has no batching rule for (the function then runs once per sample).

    A BaseException, so that a function's own ``except Exception`` does not catch it and
    carry on with a wrong value."""


_DATA_MSG = (
    "vmap: It looks like you're calling .{name}() on a Tensor. We don't support vmap over "
    "calling .{name}() on a Tensor, please try to rewrite what you're doing with other "
    "operations."
)


class BatchedTensor:
    """One sample of a value inside vmap; ``_p`` holds every sample, the mapped dim first.

    Shapes, ops and methods are the sample's; reading the values (``item``, ``tolist``,
    ``numpy``, ``bool``) raises as in torch's vmap. ``_level`` names the batch (one per
    batched evaluation, ``new_level``): an op given values of two batches (a vmap inside
    another, jacrev's cotangents meeting jacfwd's tangents) has no rule, since their dims
    must not be paired, and runs per element instead. A value made by a rule takes its
    inputs' level."""

    __slots__ = ("_p", "_level", "__weakref__")
    __array_priority__ = 1000  # (numpy defers its operators to ours)

    def __init__(self, physical, level=None):
        self._p = physical
        self._level = _rule_level.value if level is None else level

    # -- what a sample looks like
    @property
    def shape(self):
        return type(self._p.shape)(self._p.shape[1:])

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[_wrap_dim(dim, self.dim())]

    def dim(self):
        return self._p.dim() - 1

    ndim = property(dim)

    def numel(self):
        return self.shape.numel()

    def __len__(self):
        if self.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(_call("unbind", (self,), {}))

    @property
    def dtype(self):
        return self._p.dtype

    @property
    def device(self):
        return self._p.device

    @property
    def requires_grad(self):
        return self._p.requires_grad

    @property
    def is_leaf(self):
        return self._p.is_leaf

    @property
    def grad_fn(self):
        return self._p.grad_fn

    def is_floating_point(self):
        return self._p.is_floating_point()

    def requires_grad_(self, requires_grad=True):
        self._p.requires_grad_(requires_grad)
        return self

    def detach(self):
        return BatchedTensor(self._p.detach(), self._level)

    def contiguous(self):
        return self

    def to(self, *args, **kwargs):
        if any(isinstance(a, (Tensor, BatchedTensor)) for a in args):
            raise Unbatchable("to(other)")
        return BatchedTensor(self._p.to(*args, **kwargs), self._level)

    def view_as(self, other):
        return _call("reshape", (self, tuple(other.shape)), {})

    reshape_as = view_as

    def expand_as(self, other):
        return _call("expand", (self, tuple(other.shape)), {})

    def type_as(self, other):
        return self.to(other.dtype)

    @property
    def T(self):
        return _call("permute", (self, tuple(range(self.dim() - 1, -1, -1))), {})

    @property
    def mT(self):
        return _call("transpose", (self,), {"dim0": -2, "dim1": -1})

    def __repr__(self):
        return f"BatchedTensor(bdim=0, value=\n{self._p!r})"

    # -- values cannot be read per sample
    def item(self):
        raise RuntimeError(_DATA_MSG.format(name="item"))

    def tolist(self):
        raise RuntimeError(_DATA_MSG.format(name="tolist"))

    def numpy(self, *args, **kwargs):
        raise RuntimeError(_DATA_MSG.format(name="numpy"))

    def __bool__(self):
        raise RuntimeError(
            "vmap: It looks like you're attempting to use a Tensor in some data-dependent "
            "control flow. We don't support that yet, please shout over at "
            "https://github.com/pytorch/functorch/issues/257 ."
        )

    __float__ = __int__ = __index__ = __bool__

    def __array__(self, *args, **kwargs):
        raise RuntimeError(
            "vmap: a batched tensor cannot become a numpy array (an in-place op on a tensor "
            "that is not batched, with a batched value, is one way to get here)"
        )

    # -- the methods of the op table
    def __getattr__(self, name):
        if name in _OP_METHODS:
            method = getattr(Tensor, name)
            return lambda *args, **kwargs: method(self, *args, **kwargs)
        if name.startswith("__") or not hasattr(Tensor, name):
            raise AttributeError(name)
        raise Unbatchable(f"Tensor.{name}")

    def __getitem__(self, index):
        return _run_rule(_index_rule, OP_BY_NAME["_index_view"], (self, index), {})

    def __setitem__(self, index, value):
        raise Unbatchable("__setitem__")

    __hash__ = object.__hash__


def _operator(name, reflected=False):
    if reflected:
        return lambda self, other: _call(name, (other, self), {})
    return lambda self, other: _call(name, (self, other), {})


for _name, _fn in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"),
                   ("pow", "pow"), ("matmul", "matmul"), ("mod", "remainder")]:  # fmt: skip
    setattr(BatchedTensor, f"__{_name}__", _operator(_fn))
    setattr(BatchedTensor, f"__r{_name}__", _operator(_fn, reflected=True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(BatchedTensor, f"__{_name}__", _operator(_name))
BatchedTensor.__neg__ = lambda self: _call("neg", (self,), {})


def _cast(name):
    return lambda self: BatchedTensor(getattr(self._p, name)(), self._level)


for _name in ("float", "double", "long", "int", "bool"):  # (the dtype casts, as the Tensor's)
    setattr(BatchedTensor, _name, _cast(_name))
BatchedTensor.__abs__ = lambda self: _call("abs", (self,), {})

# Tensor methods that are op frontends (their names map to ops of the table)
_OP_METHODS = set()


def _op_methods():
    from .kernels import OPS
    from .kernels.registry import COMPOSITES

    for op in OPS + COMPOSITES:
        _OP_METHODS.update(op.methods)


_op_methods()


# -- dispatch ----------------------------------------------------------------------------------


def _call(name, args, kwargs):
    """The public function (or Tensor method) ``name`` on (possibly batched) arguments."""
    f = FUNCTIONS.get(name) or NN_FUNCTIONAL.get(name) or getattr(Tensor, name)
    return f(*args, **kwargs)


def on_apply(op, args, kwargs):
    """``apply(op, *args, **kwargs)`` where an argument is batched: the op's rule."""
    return _run_rule(APPLY_RULES.get(op.name), op, args, kwargs)


def on_frontend(op, args, kwargs):
    """An op frontend (``op.api``) called with a batched argument: the op's rule."""
    return _run_rule(FRONTEND_RULES.get(op.name), op, args, kwargs)


class _RuleLevel(threading.local):
    value = None  # the level of the values the rule running on this thread makes


_rule_level = _RuleLevel()
_levels = itertools.count(1)


def new_level():
    """A batch of its own (a batched evaluation's values carry it)."""
    return next(_levels)


def _run_rule(rule, op, args, kwargs):
    if rule is None:
        raise Unbatchable(op.name)
    levels = set()
    for x in (*args, *kwargs.values()):
        if type(x) is BatchedTensor:
            levels.add(x._level)
        elif type(x) in (tuple, list):
            levels.update(y._level for y in x if type(y) is BatchedTensor)
    if len(levels) != 1:
        raise Unbatchable(f"{op.name} of values of two batches")
    before = _rule_level.value
    _rule_level.value = levels.pop()
    try:
        return rule(op, args, kwargs)
    finally:
        _rule_level.value = before


BATCHED[:] = [BatchedTensor, on_apply, on_frontend, Unbatchable]

_on_lock = threading.Lock()


class batched_mode:
    """While a vmap evaluates its function batched: frontends look for BatchedTensors."""

    def __enter__(self):
        with _on_lock:
            BATCHED_ON[0] += 1

    def __exit__(self, *exc):
        with _on_lock:
            BATCHED_ON[0] -= 1


# -- helpers -----------------------------------------------------------------------------------


def _is_b(x):
    return type(x) is BatchedTensor


def _rank(x):
    if type(x) is BatchedTensor:
        return x._p.dim() - 1
    if isinstance(x, Tensor):
        return x.dim()
    return 0


def _batch(args):
    for x in args:
        if type(x) is BatchedTensor:
            return x._p.shape[0]
        if type(x) in (list, tuple):
            for y in x:
                if type(y) is BatchedTensor:
                    return y._p.shape[0]
    raise AssertionError("no batched argument")


def _wrap_dim(d, rank, name=None):
    """``d`` in [0, rank) (rank 0 takes dims 0 and -1), or torch's IndexError."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
        raise Unbatchable(f"dim {d!r}")
    n = max(rank, 1)
    if not -n <= d < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})"
        )
    return int(d) % n


def _aligned(x, rank, b):
    """The physical tensor of ``x`` for a broadcasting op whose sample rank is ``rank``:
    a batched value with size-1 dims after its batch dim up to that rank; a tensor that is
    not batched as it is (it broadcasts from the right)."""
    if type(x) is BatchedTensor:
        r = x._p.dim() - 1
        if r < rank:
            return x._p.reshape(b, *([1] * (rank - r)), *x._p.shape[1:])
        return x._p
    return x


def _expanded(x, b):
    """The physical tensor of ``x``, a value that is not batched repeated over the batch."""
    if type(x) is BatchedTensor:
        return x._p
    return x.unsqueeze(0).expand(b, *x.shape)


def _out(r):
    """A physical result as batched values (tuples of them kept)."""
    if isinstance(r, Tensor):
        return BatchedTensor(r)
    if isinstance(r, tuple):
        items = [_out(x) for x in r]
        return type(r)(*items) if hasattr(type(r), "_fields") else tuple(items)
    if isinstance(r, list):
        return [_out(x) for x in r]
    return r


# -- rules at ``apply`` (arguments as the op's forward takes them) -----------------------------

APPLY_RULES = {}
FRONTEND_RULES = {}


def _elementwise(op, args, kwargs):
    (x,) = args
    if not _is_b(x) or any(_is_b(v) for v in kwargs.values()):  # (clamp's tensor bounds)
        return _broadcasting(op, args, kwargs)
    return BatchedTensor(_apply(op, x._p, **kwargs))


def _broadcasting(op, args, kwargs):
    return _aligned_call(lambda *a, **k: _apply(op, *a, **k), args, kwargs, op.nin == 1)


def _aligned_call(call, args, kwargs, expand_first):
    """``call(*args, **kwargs)`` on the stacked values of arguments that broadcast against
    each other: every batched one aligned (``_aligned``) to the largest sample rank among
    the tensors (a tensor attribute too: masked_fill's mask, clamp's bounds). With
    ``expand_first``, a first argument that is not batched is repeated over the batch (the
    result has its shape)."""
    items = [*args, *kwargs.values()]
    b = _batch(items)
    rank = max(_rank(v) for v in items if isinstance(v, (Tensor, BatchedTensor)))
    phys = [_aligned(v, rank, b) for v in args]
    if expand_first and isinstance(args[0], Tensor):
        phys[0] = _expanded(_aligned(args[0], rank, b), b)
    kw = {k: _aligned(v, rank, b) for k, v in kwargs.items()}
    return BatchedTensor(call(*phys, **kw))


_FULL_TUPLE = {"sum", "mean", "amax", "amin", "var", "std", "logsumexp", "vector_norm",
               "norm", "all", "any", "count_nonzero"}  # fmt: skip
_FULL_FLAT = {"prod", "argmax", "argmin"}
_NEEDS_DIM = {"softmax", "log_softmax", "cumsum", "cumprod", "logcumsumexp"}


def _reduction(op, args, kwargs):
    (x,) = args
    if not _is_b(x):
        raise Unbatchable(op.name)
    rank = _rank(x)
    kwargs = dict(kwargs)
    dim = kwargs.get("dim", _defaults(op).get("dim"))
    p = x._p
    b = p.shape[0]
    if rank == 0:  # (a 0-d sample reduces as one element: physical (B, 1) along dim 1)
        if dim is not None and not isinstance(dim, (tuple, list)):
            _wrap_dim(dim, 0)
        elif isinstance(dim, (tuple, list)):
            for d in dim:
                _wrap_dim(d, 0)
        kwargs["dim"] = 1
        r = _apply(op, p.reshape(b, 1), **kwargs)
        return _out(_pointwise_shape(r, b))
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        if op.name in _NEEDS_DIM:
            raise Unbatchable(f"{op.name} without dim")
        if op.name in _FULL_TUPLE:
            kwargs["dim"] = tuple(range(1, rank + 1))
        elif op.name in _FULL_FLAT and not kwargs.get("keepdim"):
            p = p.reshape(b, -1)
            kwargs["dim"] = 1
        else:
            raise Unbatchable(f"{op.name} over every dim")
    elif isinstance(dim, (tuple, list)):
        kwargs["dim"] = tuple(_wrap_dim(d, rank) + 1 for d in dim)
    else:
        kwargs["dim"] = _wrap_dim(dim, rank) + 1
    return _out(_apply(op, p, **kwargs))


def _pointwise_shape(r, b):
    """A 0-d sample's result (physical (B,) or (B, 1)) as physical (B,)."""
    if isinstance(r, tuple):
        items = [_pointwise_shape(x, b) for x in r]
        return type(r)(*items) if hasattr(type(r), "_fields") else tuple(items)
    return r.reshape(b)


def _dims(**names):
    """A rule for an op on one tensor whose attributes ``names`` are dims of it (``"in"``:
    of the input; ``"new"``: of the result, one rank higher); an attribute not given takes
    the default of the op's forward."""

    def rule(op, args, kwargs):
        (x,) = args
        if not _is_b(x):
            raise Unbatchable(op.name)
        rank = _rank(x)
        kwargs = dict(kwargs)
        defaults = _defaults(op)
        for name, kind in names.items():
            v = kwargs.get(name, defaults.get(name))
            if v is None:
                continue
            r = rank + 1 if kind == "new" else rank
            if isinstance(v, (tuple, list)):
                kwargs[name] = type(v)(_wrap_dim(d, r) + 1 for d in v)
            else:
                kwargs[name] = _wrap_dim(v, r) + 1
        return _out(_apply(op, x._p, **kwargs))

    return rule


_DEFAULTS = {}


def _defaults(op):
    """The defaults of ``op``'s forward's attributes."""
    d = _DEFAULTS.get(op.name)
    if d is None:
        import inspect

        d = _DEFAULTS[op.name] = {
            p.name: p.default
            for p in inspect.signature(op.forward).parameters.values()
            if p.default is not inspect.Parameter.empty
        }
    return d


def _squeeze(op, args, kwargs):
    (x,) = args
    dim = kwargs.get("dim")
    if dim is not None:
        return _dims(dim="in")(op, args, kwargs)
    shape = x.shape
    return _call("reshape", (x, tuple(s for s in shape if s != 1)), {})


def _t(op, args, kwargs):
    (x,) = args
    if _rank(x) < 2:
        return x
    return BatchedTensor(x._p.transpose(1, 2))


def _last_dims(op, args, kwargs):
    """Ops on the last dims of one tensor (tril, triu): the batch dim is not among them."""
    (x,) = args
    if not _is_b(x) or _rank(x) < 2:
        raise Unbatchable(op.name)
    return BatchedTensor(_apply(op, x._p, **kwargs))


def _joined(op, args, kwargs):
    """cat and stack: every tensor batched, the dim shifted past the batch dim."""
    (seq,) = args
    b = _batch(seq)
    ranks = {_rank(x) for x in seq}
    kwargs = dict(kwargs)
    rank = max(ranks) + (1 if op.name == "stack" else 0)
    kwargs["dim"] = _wrap_dim(kwargs.get("dim", 0), rank) + 1
    return BatchedTensor(_apply(op, [_expanded(x, b) for x in seq], **kwargs))


def _indexed(op, args, kwargs):
    """index_select, gather, take_along_dim: the input and its index both batched."""
    (x,) = args
    kwargs = dict(kwargs)
    key = "indices" if "indices" in kwargs else "index"
    index = kwargs[key]
    b = _batch((x, index))
    rank = _rank(x)
    if op.name == "index_select":
        if _is_b(index):
            raise Unbatchable("index_select with a batched index")
        kwargs["dim"] = _wrap_dim(kwargs["dim"], rank) + 1
        return BatchedTensor(_apply(op, _expanded(x, b), **kwargs))
    if kwargs.get("dim") is None:
        raise Unbatchable(f"{op.name} without dim")
    kwargs["dim"] = _wrap_dim(kwargs["dim"], rank) + 1
    kwargs[key] = _expanded(index, b)
    return BatchedTensor(_apply(op, _expanded(x, b), **kwargs))


def _broadcast_to(op, args, kwargs):
    (x,) = args
    size = _shape_arg(tuple(kwargs["size"]))
    rank = _rank(x)
    if len(size) < rank:
        raise Unbatchable(f"{op.name} to fewer dims")
    b = _batch(args)
    p = _aligned(x, len(size), b) if _is_b(x) else x
    return BatchedTensor(_apply(op, _expanded(p, b) if not _is_b(x) else p, size=(b, *size)))


def _products(op, args, kwargs):
    x, y = args[0], args[1]
    if op.name in ("mm", "bmm", "mv", "dot"):
        want = {"mm": (2, 2), "bmm": (3, 3), "mv": (2, 1), "dot": (1, 1)}[op.name]
        if (_rank(x), _rank(y)) != want:
            raise Unbatchable(f"{op.name} of ranks {(_rank(x), _rank(y))}")
    return _matmul(x, y)


def _matmul(x, y):
    """Per-sample ``x @ y`` for every pairing of ranks and of which side is batched."""
    rx, ry = _rank(x), _rank(y)
    if rx == 0 or ry == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D")
    b = _batch((x, y))
    if _is_b(x) and _is_b(y):
        xp, yp = x._p, y._p
        if rx == 1 and ry == 1:
            return BatchedTensor((xp * yp).sum(-1))
        if rx == 1:
            xp = xp.reshape(b, *([1] * (ry - 2)), 1, xp.shape[-1])
            return BatchedTensor((xp @ yp).squeeze(-2))
        if ry == 1:
            yp = yp.reshape(b, *([1] * (rx - 2)), yp.shape[-1], 1)
            return BatchedTensor((xp @ yp).squeeze(-1))
        xp = _pad_batch(xp, rx, ry, b)
        yp = _pad_batch(yp, ry, rx, b)
        return BatchedTensor(xp @ yp)
    if _is_b(x):  # y is not batched
        xp = x._p
        if rx == 1:
            if ry > 2:
                return BatchedTensor(_matmul_plain_right(xp.unsqueeze(1), y, b).squeeze(-2))
            return BatchedTensor(xp @ y)  # (B, n) @ (n,) or (n, k)
        if ry <= 2:
            return BatchedTensor(xp @ y)
        return BatchedTensor(_matmul_plain_right(xp, y, b))
    yp = y._p  # x is not batched
    if ry == 1:
        if rx == 1:
            return BatchedTensor(yp @ x)
        if rx == 2:
            return BatchedTensor(yp @ x.transpose(0, 1))
        col = yp.reshape(b, *([1] * (rx - 2)), yp.shape[-1], 1)
        return BatchedTensor((x @ col).squeeze(-1))
    if rx <= 2:
        return BatchedTensor(x @ yp)
    return BatchedTensor(x @ _pad_batch(yp, ry, rx, b))


def _pad_batch(p, r, other, b):
    """Physical ``p`` (sample rank ``r`` >= 2) with size-1 dims after the batch dim so that
    its matmul batch dims line up with a sample of rank ``other``'s."""
    if other > r:
        return p.reshape(b, *([1] * (other - r)), *p.shape[1:])
    return p


def _matmul_plain_right(xp, y, b):
    # x batched (B, *bx, m, n), y a stack of matrices (*by, n, k): the batch dim must not
    # meet y's dims when they broadcast
    rx = xp.dim() - 1
    return _pad_batch(xp, rx, y.dim(), b) @ y


def _linear(op, args, kwargs):
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else kwargs.get("b")
    return _linear_of(x, w, bias, lambda p: _apply(op, p, *args[1:], **kwargs))


def _linear_of(x, w, bias, physical):
    """``x @ w.T + bias`` per sample: ``physical(stacked x)`` (the op itself) when only x is
    batched, else a product and a sum of batched values."""
    if _is_b(x) and not _is_b(w) and not _is_b(bias):
        return BatchedTensor(physical(x._p))
    out = _matmul(x, _call("transpose", (w,), {"dim0": -2, "dim1": -1}) if _rank(w) == 2 else w)
    return out if bias is None else _call("add", (out, bias), {})


def _pad(op, args, kwargs):
    """Constant padding of the last dims: the batch dim is not among them."""
    (x,) = args
    if not _is_b(x) or kwargs.get("mode", "constant") != "constant":
        raise Unbatchable(op.name)
    if len(kwargs["pad"]) // 2 > _rank(x):
        raise Unbatchable(f"{op.name} of more dims than the sample has")
    return BatchedTensor(_apply(op, x._p, **kwargs))


def _apply_reshape(op, args, kwargs):
    (x,) = args
    if not _is_b(x):
        raise Unbatchable(op.name)
    return BatchedTensor(x._p.reshape(x._p.shape[0], *_shape_arg(tuple(kwargs["shape"]))))


def _apply_permute(op, args, kwargs):
    return _permute(op, args, {"dims": _shape_arg(tuple(kwargs["dims"]))})


def _apply_index(op, args, kwargs):
    (x,) = args
    index = kwargs["index"] if "index" in kwargs else (kwargs["rows"],)
    return _getitem(x, index)


def _outer(op, args, kwargs):
    x, y = args
    return _call("mul", (_call("unsqueeze", (x,), {"dim": -1}), y), {})


# elementwise: every op with a scalar derivative, and these
for _op in OP_BY_NAME.values():
    if getattr(_op, "d", None) is not None and _op.nin == 1:
        APPLY_RULES[_op.name] = _elementwise
    if getattr(_op.formula, "partials", None) is not None:
        APPLY_RULES[_op.name] = _broadcasting
for _name in ("clone", "_to_copy", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
              "signbit", "logical_not"):  # fmt: skip
    APPLY_RULES[_name] = _elementwise
for _name in ("add", "sub", "lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or",
              "logical_xor", "masked_fill"):  # fmt: skip
    APPLY_RULES[_name] = _broadcasting
for _name in _FULL_TUPLE | _FULL_FLAT | _NEEDS_DIM:
    APPLY_RULES[_name] = _reduction
APPLY_RULES.update({
    "unsqueeze": _dims(dim="new"),
    "squeeze": _squeeze,
    "flatten": _dims(start_dim="in", end_dim="in"),
    "transpose": _dims(dim0="in", dim1="in"),
    "movedim": _dims(source="in", destination="in"),
    "flip": _dims(dims="in"),
    "narrow": _dims(dim="in"),
    "select": _dims(dim="in"),
    "unbind": _dims(dim="in"),
    "split_with_sizes": _dims(dim="in"),
    "diagonal": _dims(dim1="in", dim2="in"),
    "t": _t,
    "tril": _last_dims,
    "triu": _last_dims,
    "cat": _joined,
    "stack": _joined,
    "index_select": _indexed,
    "gather": _indexed,
    "take_along_dim": _indexed,
    "broadcast_to": _broadcast_to,
    "matmul": _products,
    "mm": _products,
    "bmm": _products,
    "mv": _products,
    "dot": _products,
    "_linear": _linear,
    "_linear_bias": _linear,
    "outer": _outer,
    "pad": _pad,
    "reshape": _apply_reshape,
    "view": _apply_reshape,
    "permute": _apply_permute,
    "expand": _broadcast_to,
    "where": _broadcasting,
    "_index_view": _apply_index,
    "_index_take": _apply_index,
    "_index_rows": _apply_index,
})  # fmt: skip


# -- rules at op frontends (arguments as the public function takes them) -----------------------


def _bound(args, kwargs, names):
    """A public call's arguments by name (``names``: its parameters in order)."""
    given = dict(zip(names, args, strict=False))
    given.update(kwargs)
    return given


def _shape_arg(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def _reshape(op, args, kwargs):
    x, shape = args[0], _shape_arg(args[1:]) if len(args) > 1 else tuple(kwargs["shape"])
    if not _is_b(x):
        raise Unbatchable(op.name)
    return BatchedTensor(x._p.reshape(x._p.shape[0], *shape))


def _permute(op, args, kwargs):
    x = args[0]
    dims = _shape_arg(args[1:]) if len(args) > 1 else tuple(kwargs["dims"])
    if not _is_b(x):
        raise Unbatchable(op.name)
    rank = _rank(x)
    if len(dims) != rank:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {rank} is not "
            f"equal to len(dims) = {len(dims)}"
        )
    return BatchedTensor(x._p.permute(0, *[_wrap_dim(d, rank) + 1 for d in dims]))


def _expand(op, args, kwargs):
    x = args[0]
    size = _shape_arg(args[1:]) if len(args) > 1 else tuple(kwargs["size"])
    if not _is_b(x):
        raise Unbatchable(op.name)
    b = x._p.shape[0]
    if len(size) < _rank(x):
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(size)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({_rank(x)})"
        )
    return BatchedTensor(_aligned(x, len(size), b).expand(b, *size))


def _where(op, args, kwargs):
    if len(args) + len(kwargs) != 3:
        raise Unbatchable("where(condition)")
    items = (list(args) + [kwargs.get("input"), kwargs.get("other")])[:3]
    return _aligned_call(FUNCTIONS["where"], items, {}, False)


def _frontend_broadcasting(name):
    """A public function whose tensor arguments broadcast against each other (``pow``,
    ``clamp``'s tensor bounds, ``square``)."""

    def rule(op, args, kwargs):
        return _aligned_call(FUNCTIONS[name], args, kwargs, True)

    return rule


def _max_min(op, args, kwargs):
    x = args[0]
    rest = list(args[1:])
    if rest and isinstance(rest[0], (Tensor, BatchedTensor)):  # max(x, y): elementwise
        return _frontend_broadcasting(op.name)(op, args, kwargs)
    if "other" in kwargs:
        return _frontend_broadcasting(op.name)(op, (x, kwargs["other"]), {})
    if not _is_b(x):
        raise Unbatchable(op.name)
    dim = rest[0] if rest else kwargs.get("dim")
    f = FUNCTIONS[op.name]
    if dim is None:
        if _rank(x) == 0:
            return x
        return BatchedTensor(FUNCTIONS["amax" if op.name == "max" else "amin"](
            x._p, dim=tuple(range(1, _rank(x) + 1))))  # fmt: skip
    keepdim = rest[1] if len(rest) > 1 else kwargs.get("keepdim", False)
    if _rank(x) == 0:
        raise Unbatchable(f"{op.name} of a 0-d sample")
    return _out(f(x._p, _wrap_dim(dim, _rank(x)) + 1, keepdim))


def _split(op, args, kwargs):
    x = args[0]
    if not _is_b(x):
        raise Unbatchable(op.name)
    rest = list(args[1:])
    size = rest[0] if rest else kwargs.get("split_size_or_sections", kwargs.get("chunks"))
    dim = rest[1] if len(rest) > 1 else kwargs.get("dim", 0)
    parts = FUNCTIONS[op.name](x._p, size, _wrap_dim(dim, _rank(x)) + 1)
    return tuple(BatchedTensor(p) for p in parts)


def _index_rule(op, args, kwargs):
    return _getitem(args[0], args[1])


def _getitem(x, index):
    """``x[index]`` per sample: ints, slices, None, Ellipsis and one group of adjacent index
    tensors that are not batched; or a batched integer index tensor first, then slices
    (``logits[target]``, ``table[ids]``); anything else runs per sample."""
    items = index if isinstance(index, tuple) else (index,)
    if any(_is_b(v) for v in items):
        return _batched_index(x, items)
    if not _is_b(x):
        raise Unbatchable("indexing")
    tensors = [
        i for i, v in enumerate(items) if isinstance(v, (Tensor, BatchedTensor, list, np.ndarray))
    ]
    if tensors:
        ints = [i for i, v in enumerate(items) if isinstance(v, (int, np.integer))]
        if ints or tensors != list(range(tensors[0], tensors[-1] + 1)):
            raise Unbatchable("indexing with separated index tensors")
    return BatchedTensor(x._p[(slice(None), *items)])


def _batched_index(x, items):
    """``x[idx, :, ...]`` with a batched integer tensor ``idx``: each sample gathers with its
    own indices (a batched ``x`` pairs sample b's rows with sample b's indices)."""
    idx, rest = items[0], items[1:]
    if (
        not _is_b(idx)
        or np.dtype(idx.dtype).kind not in "iu"
        or any(not (isinstance(v, slice) and v == slice(None)) for v in rest)
    ):
        raise Unbatchable("indexing with a batched index")
    p = idx._p
    if not _is_b(x):
        return BatchedTensor(x[p])
    b = p.shape[0]
    rows = _wrap(np.arange(b).reshape(b, *([1] * (p.dim() - 1))))
    return BatchedTensor(x._p[rows, p])


def _linear_frontend(op, args, kwargs):
    x = args[0]
    w = args[1] if len(args) > 1 else kwargs.get("weight")
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    return _linear_of(x, w, bias, lambda p: NN_FUNCTIONAL["linear"](p, w, bias))


_LOSS_ARGS = {
    "mse_loss": ("reduction",),
    "l1_loss": ("reduction",),
    "smooth_l1_loss": ("reduction", "beta"),
    "huber_loss": ("reduction", "delta"),
    "binary_cross_entropy": ("weight", "reduction"),
    "binary_cross_entropy_with_logits": ("weight", "reduction", "pos_weight"),
}


def _elementwise_loss(op, args, kwargs):
    """A loss that is an elementwise function of input and target, then reduced."""
    names = ("input", "target", *_LOSS_ARGS[op.name])
    given = _bound(args, kwargs, names)
    for k in ("size_average", "reduce"):
        if given.get(k) is not None:
            raise Unbatchable(f"{op.name}({k}=...)")
    reduction = given.pop("reduction", "mean")
    x, t = given.pop("input"), given.pop("target")
    f = NN_FUNCTIONAL[op.name]
    loss = _aligned_call(lambda *a, **k: f(*a, reduction="none", **k), (x, t), given, True)
    return _reduced(loss._p, reduction, op.name)


def _reduced(loss, reduction, name):
    if reduction == "none":
        return BatchedTensor(loss)
    dims = tuple(range(1, loss.dim()))
    if reduction == "sum":
        return BatchedTensor(loss.sum(dim=dims) if dims else loss)
    if reduction == "mean":
        return BatchedTensor(loss.mean(dim=dims) if dims else loss)
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _class_loss(op, args, kwargs):
    """cross_entropy and nll_loss with class-index targets, no weights, no smoothing."""
    names = ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction")
    if op.name == "cross_entropy":
        names = (*names, "label_smoothing")
    given = _bound(args, kwargs, names)
    if given.get("weight") is not None or given.get("label_smoothing", 0.0) != 0.0:
        raise Unbatchable(f"{op.name} with weights or smoothing")
    if given.get("size_average") is not None or given.get("reduce") is not None:
        raise Unbatchable(f"{op.name}(size_average/reduce)")
    x, t = given["input"], given["target"]
    if not isinstance(t, (Tensor, BatchedTensor)) or np.dtype(t.dtype).kind not in "iu":
        raise Unbatchable(f"{op.name} with probabilities as target")
    rank = _rank(x)
    if rank not in (1, 2) or _rank(t) != rank - 1:
        raise Unbatchable(f"{op.name} of rank {rank}")
    ignore = given.get("ignore_index", -100)
    reduction = given.get("reduction", "mean")
    b = _batch((x, t))
    xp, tp = _expanded(x, b), _expanded(t, b)
    classes = xp.shape[-1]
    flat = NN_FUNCTIONAL[op.name](
        xp.reshape(-1, classes), tp.reshape(-1), ignore_index=ignore, reduction="none"
    )
    loss = flat.reshape(tp.shape)
    if reduction != "mean":
        return _reduced(loss, reduction, op.name)
    counted = (tp != ignore).to(loss.dtype)
    if rank == 1:
        return BatchedTensor(loss / counted)
    return BatchedTensor(loss.sum(dim=1) / counted.sum(dim=1))


def per_sample_draws():
    """What random ops raise while a batched vmap has randomness="different": a draw made
    once would serve every sample, so vmap runs per sample, unless a rule draws per sample
    (dropout)."""
    return Unbatchable("a random op")


def _dropout(op, args, kwargs):
    names = ("input", "p", "training", "inplace")
    given = _bound(args, kwargs, names)
    x, p, training = given["input"], given.get("p", 0.5), given.get("training", True)
    if not training or p == 0:
        return x
    if not _is_b(x) or given.get("inplace"):
        raise Unbatchable("dropout")
    if _random.refusal() is per_sample_draws:  # randomness="different": a mask per sample
        with _random.refused(None):
            return BatchedTensor(NN_FUNCTIONAL["dropout"](x._p, p, True))
    # randomness="same": one mask for every sample ("error": the draw raises torch's error)
    keep = NN_FUNCTIONAL["dropout"](_wrap(np.ones(x.shape, x.dtype)), p, True)
    return _call("mul", (x, keep), {})


def _scatter_add(op, args, kwargs):
    """``input.scatter_add(dim, index, src)`` per sample: every operand batched, dim shifted
    (each sample scatters within its own slice)."""
    given = _bound(args, kwargs, ("input", "dim", "index", "src"))
    x, index, src = given["input"], given["index"], given["src"]
    if not isinstance(index, (Tensor, BatchedTensor)):
        index = _wrap(np.asarray(index))
    b = _batch((x, index, src))
    dim = _wrap_dim(given["dim"], _rank(x)) + 1
    phys = [_expanded(v, b) for v in (x, index, src)]
    return BatchedTensor(FUNCTIONS["scatter_add"](phys[0], dim, phys[1], phys[2]))


def _spatial(rank_one, names):
    """conv and pool on a batched input whose other arguments are not batched: one sample
    of rank ``rank_one`` (unbatched conv, (C, *spatial)) runs as the stacked samples'
    batch; a sample with its own batch dim runs with both dims merged."""

    def rule(op, args, kwargs):
        given = _bound(args, kwargs, names)
        x = given.pop("input")
        if not _is_b(x) or any(_is_b(v) for v in given.values()):
            raise Unbatchable(f"{op.name} with batched weights")
        if given.get("return_indices"):
            raise Unbatchable(f"{op.name}(return_indices=True)")
        p = x._p
        b = p.shape[0]
        if _rank(x) == rank_one:
            return BatchedTensor(NN_FUNCTIONAL[op.name](p, **given))
        if _rank(x) != rank_one + 1:
            raise Unbatchable(f"{op.name} of rank {_rank(x)}")
        r = NN_FUNCTIONAL[op.name](p.reshape(b * p.shape[1], *p.shape[2:]), **given)
        return BatchedTensor(r.reshape(b, p.shape[1], *r.shape[1:]))

    return rule


def _embedding(op, args, kwargs):
    names = ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq",
             "sparse")  # fmt: skip
    given = _bound(args, kwargs, names)
    x, w = given.pop("input"), given.pop("weight")
    if _is_b(w) or any(_is_b(v) for v in given.values()):
        raise Unbatchable("embedding with a batched weight")
    return BatchedTensor(NN_FUNCTIONAL["embedding"](x._p, w, **given))


def _batch_norm(op, args, kwargs):
    """batch_norm with running statistics (``training=False``): each element on its own."""
    names = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum",
             "eps")  # fmt: skip
    given = _bound(args, kwargs, names)
    x = given.pop("input")
    if given.get("training") or not _is_b(x) or any(_is_b(v) for v in given.values()):
        raise Unbatchable("batch_norm in training mode (its statistics mix the samples)")
    p = x._p
    b = p.shape[0]
    r = NN_FUNCTIONAL["batch_norm"](p.reshape(b * p.shape[1], *p.shape[2:]), **given)
    return BatchedTensor(r.reshape(p.shape))


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum(op, args, kwargs):
    """einsum with an explicit output: a letter of its own for the batch dim, first in every
    batched operand and in the output."""
    equation, *operands = args
    if kwargs or len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0]) if operands else []
        if kwargs:
            raise Unbatchable("einsum with keyword arguments")
    if "->" not in equation:
        raise Unbatchable("einsum without an explicit output")
    ins, out = equation.replace(" ", "").split("->")
    terms = ins.split(",")
    if len(terms) != len(operands):
        raise Unbatchable("einsum operands")
    free = [c for c in _LETTERS if c not in equation]
    z = free[0]
    b = _batch(operands)
    new_terms = [z + t if _is_b(x) else t for t, x in zip(terms, operands, strict=True)]
    phys = [x._p if _is_b(x) else x for x in operands]
    result = FUNCTIONS["einsum"](",".join(new_terms) + "->" + z + out, *phys)
    if result.shape[0] != b:
        raise Unbatchable("einsum")
    return BatchedTensor(result)


def _layer_norm(op, args, kwargs):
    names = ("input", "normalized_shape", "weight", "bias", "eps")
    given = _bound(args, kwargs, names)
    x = given.pop("input")
    if not _is_b(x) or any(_is_b(v) for v in given.values()):
        raise Unbatchable("layer_norm with batched weights")
    return BatchedTensor(NN_FUNCTIONAL["layer_norm"](x._p, **given))


FRONTEND_RULES.update({
    "reshape": _reshape,
    "view": _reshape,
    "permute": _permute,
    "expand": _expand,
    "where": _where,
    "pow": _frontend_broadcasting("pow"),
    "clamp": _frontend_broadcasting("clamp"),
    "square": _frontend_broadcasting("square"),
    "max": _max_min,
    "min": _max_min,
    "split": _split,
    "chunk": _split,
    "_index_view": _index_rule,
    "linear": _linear_frontend,
    "cross_entropy": _class_loss,
    "nll_loss": _class_loss,
    "dropout": _dropout,
    "layer_norm": _layer_norm,
    "scatter_add": _scatter_add,
    "conv1d": _spatial(2, ("input", "weight", "bias", "stride", "padding", "dilation", "groups")),
    "conv2d": _spatial(3, ("input", "weight", "bias", "stride", "padding", "dilation", "groups")),
    "max_pool2d": _spatial(3, ("input", "kernel_size", "stride", "padding", "dilation",
                               "ceil_mode", "return_indices")),
    "avg_pool2d": _spatial(3, ("input", "kernel_size", "stride", "padding", "ceil_mode",
                               "count_include_pad", "divisor_override")),
    "embedding": _embedding,
    "batch_norm": _batch_norm,
    "einsum": _einsum,
})  # fmt: skip
for _name in _LOSS_ARGS:
    FRONTEND_RULES[_name] = _elementwise_loss
