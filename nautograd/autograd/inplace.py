"""In-place ops on tensors in a graph, with torch's semantics on an out-of-place tape.

An in-place op ``x.op_(y)`` that must be recorded (grad mode on, and ``x`` or an operand
requires grad) runs as its out-of-place op ``result = x.op(y)``: ``result``'s value is
written into ``x``'s memory (which ``x``'s views and aliases share), ``x`` takes
``result``'s place in the graph, and ``x``'s version counter moves on, so that a node that
saved ``x``'s old value raises in backward as in torch. Where the op's backward reads ``x``,
its node reads a copy of the old value (torch saves ``original_self`` the same way).

A view ``v`` of a tensor ``base`` that is in a graph (``v._view_base``) rewrites ``base``'s
history, as torch's ``CopySlices``: ``base``'s new value is ``base`` with ``v``'s positions
replaced by the op's result (``masked_fill`` then ``scatter_add``, recorded), and every live
view of ``base`` (each registered on it, ``base._views``) is derived again from the new
value by a recorded gather, as torch regenerates a view's ``grad_fn`` after its base
changed. ``x[index] = value`` is the same replacement on ``x`` (or on its base).
"""

import numpy as np

from ..graph.tape import current_tape
from ..tensor import (
    FORWARD_AD,
    Tensor,
    _filled,
    _index_arrays,
    _Lazy,
    _take_place,
    _take_tangent,
    _wrap,
)
from .grad_mode import is_grad_enabled, no_grad

# in-place ops whose backward does not read the input's old value: their node needs no copy
# of it (the others read it: mul_ saves x for y's gradient, clamp_ x for its mask)
_READS_NOTHING = frozenset(
    ["add", "sub", "subtract", "neg", "negative", "exp", "sqrt", "tanh", "sigmoid", "relu",
     "masked_fill", "index_fill", "fill", "zero", "copy", "expm1", "rsqrt", "reciprocal"]
)  # fmt: skip


def recording(x, operands):
    """Whether an in-place op on ``x`` with ``operands`` (tensors or not) must be recorded:
    grad mode is on and ``x`` or an operand requires grad. Raises torch's error for a leaf
    that requires grad (and for a view of one)."""
    if not is_grad_enabled():
        return False
    if x._rg:
        if type(x) is not _Lazy and x._h < 0:  # (a deferred result is no leaf)
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation."
            )
        _check_view(x)
        return True
    for y in operands:
        if isinstance(y, Tensor) and y._rg:
            _check_view(x)
            return True
    return False


def base_of(x):
    """The tensor whose memory view ``x`` is (the first of its chain of views), or None: a
    deferred run of another tensor (unbind's outputs) names it in ``_src`` until forced."""
    base = x._view_base
    if base is None and type(x) is _Lazy and x._src is not None:
        base = x._src._view_base
        if base is None:
            base = x._src
    return base


def _check_view(x):
    base = base_of(x)
    if base is not None and base._rg and base._h < 0:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place operation."
        )


def modify(x, name, compute, reads_self=None):
    """Record ``x <- compute(x)`` as the in-place op ``name``; returns ``x``. ``compute``
    gets a tensor with ``x``'s value and place in the graph and returns the new value."""
    # under the lock of x's tape, as every recorded op (tensor._run): handles and version
    # entries change here
    tape = x._tape if type(x) is _Lazy or x._h >= 0 else current_tape()
    with tape.lock:
        return _modify(x, name, compute, reads_self)


def _modify(x, name, compute, reads_self):
    if reads_self is None:
        reads_self = name not in _READS_NOTHING
    base = base_of(x)
    if type(x) is _Lazy and x._b.S is None and base is None and x._vc is None:
        # a deferred result whose value nobody holds yet (no view, no run, no array, no
        # alias: no version counter shared with anything): it becomes the new result, and
        # its batch runs when the value is needed, not at each in-place op (`acc += x * w`
        # in a loop ran a batch a step). Its old value stays in the batch's store for the
        # nodes that read it.
        result = compute(x)
        if result is x:
            return x
        result = _new_value(x, result, name)
        if type(x) is _Lazy:
            _become(x, result)
            return x
        # the op ran eagerly and gave x its memory: its node may keep that memory, which
        # changes now; record it again on a copy (the first result is unreachable)
        if reads_self:
            result = _new_value(x, compute(_snapshot(x)), name)
        _adopt(x, result)
        _rederive(x)
        return x
    result = compute(_snapshot(x) if reads_self else x)
    if result is x:  # (dropout in eval mode)
        return x
    result = _new_value(x, result, name)
    if base is None:
        _adopt(x, result)
        _rederive(x)
        return x
    positions = flat_positions(base, x, name)
    _adopt(base, _replace(base, positions, result))
    _rederive(base)
    return x


def setitem(x, index, value):
    """``x[index] = value`` recorded: ``x`` with the indexed positions replaced."""
    shape = x.shape
    positions = np.arange(x.numel(), dtype=np.int64).reshape(tuple(shape))[_index_arrays(index)]
    if not isinstance(value, Tensor):
        value = _wrap(np.asarray(value, dtype=x.dtype))

    def compute(s):
        v = value
        while v.ndim > positions.ndim and v.shape[0] == 1:  # (torch drops leading ones)
            v = v.squeeze(0)
        try:
            v = v.expand(*positions.shape)
        except RuntimeError as e:
            raise RuntimeError(
                f"shape mismatch: value tensor of shape {list(value.shape)} cannot be "
                f"broadcast to indexing result of shape {list(positions.shape)}"
            ) from e
        return _replace(s, positions, v)

    return modify(x, "setitem", compute, reads_self=False)


def _snapshot(x):
    """A tensor with ``x``'s place in the graph and a copy of its value, for the node of an
    in-place op that saves its input: ``x``'s own memory is about to change."""
    t = _wrap(x._data.copy())
    if FORWARD_AD[0]:  # (the tangent comes along)
        _take_tangent(t, x)
    if x._rg and x._h >= 0:
        tape = x._tape
        t._rg = True
        t._tape = tape
        t._out = x._out
        t._h = tape.new_handle(tape.h2node[x._h])
    return t


def _conform(x, result, name):
    """``result`` in ``x``'s shape and dtype, or torch's error."""
    if type(result) is _Lazy and type(x) is _Lazy and result._shape == x._shape:
        return result  # (both float64)
    if not isinstance(result, Tensor):
        result = _wrap(np.asarray(result))
    if tuple(result.shape) != tuple(x.shape):
        raise RuntimeError(
            f"{name}_(): output with shape {list(x.shape)} doesn't match the broadcast shape "
            f"{list(result.shape)}"
        )
    if result.dtype != x.dtype:
        if not np.can_cast(result.dtype, x.dtype, casting="same_kind"):
            raise RuntimeError(
                f"result type {_type_name(result.dtype)} can't be cast to the desired output "
                f"type {_type_name(x.dtype)}"
            )
        result = result.to(x.dtype)
    return result


def _new_value(x, result, name):
    """``result`` conformed to ``x`` (``_conform``), and in the graph: a non-differentiable
    op's result (floor_, eq_) replaces x with a zero gradient to x's history."""
    result = _conform(x, result, name)
    return result if result._rg else _filled(x, result)


def _type_name(dtype):
    names = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int",
             "bool": "Bool", "float16": "Half", "uint8": "Byte", "int16": "Short"}  # fmt: skip
    return names.get(np.dtype(dtype).name, np.dtype(dtype).name)


def _become(x, result):
    """The deferred result ``x`` (no memory yet) becomes ``result``: its value and its
    place in the graph."""
    if type(result) is _Lazy:
        x._b, x._v, x._shape, x._src = result._b, result._v, result._shape, result._src
        x._tape, x._out = result._tape, result._out
    else:
        x.__class__ = Tensor
        x._b = x._src = None
        x._data = result._data
        x._h = -1
        _take_place(x, result)
    x._rg = True


def _adopt(x, result):
    """``x`` takes ``result``'s value (written into its memory) and place in the graph."""
    _write(x, result._data)
    _take_place(x, result)
    x._bump()
    # a node that saved its result (exp, tanh, relu) saved x's value now: later in-place
    # changes of x raise in its backward, as in torch
    rvc = result._vc
    if rvc is not None and rvc is not x._vc:
        versions = x._tape.versions
        node = x._tape.h2node[x._h]
        entries = versions.get(node)
        if entries:
            vc = x._vc
            versions[node] = tuple(
                [(vc, vc[0], a) if c is rvc else (c, v, a) for c, v, a in entries]
            )


def _write(x, value):
    """Write the array ``value`` into ``x``'s memory (its views and aliases see it)."""
    a = x._data
    if value is a:
        return
    if not a.flags.writeable:
        raise RuntimeError(
            "unsupported operation: the tensor written in place does not own writable memory "
            "(an expanded or read-only tensor); clone() it first"
        )
    np.copyto(a, value, casting="unsafe")


def _replace(base, positions, value):
    """``base`` with its elements at the flat (C order) ``positions`` replaced by ``value``
    (one value per position; a later duplicate position wins, as numpy's and torch's
    assignments do), recorded: ``masked_fill`` clears them, ``scatter_add`` writes them."""
    flat_positions_ = positions.reshape(-1)
    values = value.reshape(-1)
    if values.dtype != base.dtype:
        values = values.to(base.dtype)
    mask = np.zeros(base.numel(), np.bool_)
    mask[flat_positions_] = True
    flat = base.reshape(-1).masked_fill(_wrap(mask), 0.0)
    unique, last = np.unique(flat_positions_[::-1], return_index=True)
    if len(unique) == len(flat_positions_):
        return flat.scatter_add(0, flat_positions_, values).reshape(*base.shape)
    # a repeated position takes its last value; every value gets the gradient at its
    # position (torch's index_put backward): the overwritten ones through v - v.detach(),
    # an exact zero in the forward
    keep = np.zeros(len(flat_positions_), np.bool_)
    keep[len(flat_positions_) - 1 - last] = True
    kept, dropped = np.flatnonzero(keep), np.flatnonzero(~keep)
    new = flat.scatter_add(0, flat_positions_[kept], values[_wrap(kept)])
    lost = values[_wrap(dropped)]
    zero = lost - lost.detach()
    return new.scatter_add(0, flat_positions_[dropped], zero).reshape(*base.shape)


def _rederive(base):
    """Give every live view of ``base`` its place in ``base``'s new graph: a gather of its
    positions from ``base`` (its memory already holds the new values)."""
    views = base._views
    if not views:
        return
    live = []
    flat = None
    for ref in views:
        v = ref()
        if v is None:
            continue
        live.append(ref)
        if not base._rg:
            continue
        if flat is None:
            flat = base.reshape(-1)
        positions = flat_positions(base, v, "view")
        _take_place(v, flat[_wrap(positions.reshape(-1))].reshape(*v.shape))
    views[:] = live


def _addresses(a):
    """The byte address of each element of array ``a``, in ``a``'s shape."""
    off = np.full(a.shape, a.__array_interface__["data"][0], np.int64)
    for k, (n, s) in enumerate(zip(a.shape, a.strides, strict=True)):
        shape = [1] * a.ndim
        shape[k] = n
        off = off + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return off


def flat_positions(base, view, name):
    """The flat (C order) positions in ``base`` of each element of ``view``, whose memory
    lies inside ``base``'s, in ``view``'s shape."""
    b = base._data
    v = view._data
    av = _addresses(v)
    if b.flags.c_contiguous:
        pos = (av - b.__array_interface__["data"][0]) // max(b.itemsize, 1)
        ok = pos.size == 0 or (pos.min() >= 0 and pos.max() < b.size)
    else:
        ab = _addresses(b).reshape(-1)
        order = np.argsort(ab, kind="stable")
        found = np.searchsorted(ab[order], av.reshape(-1))
        found = np.minimum(found, max(len(order) - 1, 0))
        ok = ab.size > 0 and bool(np.all(ab[order][found] == av.reshape(-1)))
        pos = order[found].reshape(v.shape) if ok else None
    if not ok:
        raise RuntimeError(
            f"{name}_(): the view's memory is no longer inside its base's (the base's .data "
            "was replaced); in-place ops on this view cannot be recorded"
        )
    if pos.size and len(np.unique(pos)) < pos.size:
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to "
            "a single memory location. Please clone() the tensor before performing the "
            "operation."
        )
    return pos


def run(x, name, operands, compute, reads_self=None):
    """The in-place op ``name`` on ``x``: recorded (``modify``) when it must be, otherwise
    ``compute(x)`` without a graph, written into ``x``'s memory."""
    if x._inference_view or x.is_inference():
        x._check_inference()
    if recording(x, operands):
        return modify(x, name, compute, reads_self)
    with no_grad():
        result = compute(x)
        if result is x:
            return x
        result = _conform(x, result, name)
    _write(x, result._data)
    x._bump()
    if FORWARD_AD[0]:  # (forward AD: x's tangent becomes the result's, as torch's)
        _take_tangent(x, result)
    return x
