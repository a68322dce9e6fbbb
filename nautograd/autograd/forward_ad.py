"""Forward-mode AD (torch.autograd.forward_ad): dual tensors carry a tangent through ops.

Inside ``dual_level()``, ``make_dual(x, t)`` gives a tensor that shares ``x``'s memory and
carries the tangent ``t``; every op on tensors with tangents gives its result the tangent
J·t (the Jacobian-vector product), read back with ``unpack_dual``. As in torch 2.13 there is
one level (0), process-wide; tangents are not stopped by ``no_grad`` but are dropped by
``detach``, and leaving the level takes every tangent back.

Each op's tangent comes from its one declaration (kernels/registry.py ``Op.jvp``):

- ``"linear"``: the op is linear in its floating inputs (views, reshapes, indexing, sums,
  concatenation, casts, add/sub/neg): the tangent is the op itself on the tangents, missing
  ones as zeros;
- ``"bilinear"``: the op is linear in each of its first two inputs (products: mul, matmul,
  mm, bmm, mv, dot, outer, linear): ``op(t_a, b) + op(a, t_b)``, further inputs entering
  linearly (a bias);
- a unary elementwise op with a derivative ``d(x, result, p0, p1)`` (kernels/pointwise.py
  ``unary``): ``t * d``, the same ``d`` its backward kernel and its create_graph formula use;
- a broadcasting op with partial derivatives (kernels/elementwise.py ``broadcast_formula``:
  div, pow, maximum, atan2, lerp, ...): ``Σ_j (∂result/∂x_j) t_j``, from those partials;
- any other differentiable op: from its create_graph formula, the vector-Jacobian product
  g -> Jᵀg, by the double-vjp identity J·t = d/dg <Jᵀg, t> (two recorded backward passes;
  exact, slower than a rule of its own).

Composite functions (losses, conv, einsum, ...) are made of ops, so their tangents follow.
The tangent computations run as ordinary recorded ops, so a tangent can be differentiated
again in reverse mode (reverse over forward); and a create_graph backward gives the values
its formulas use the tangents they had when recorded, so a gradient carries a tangent too
(forward over reverse: Hessian-vector products).
"""

import contextlib
import threading
import weakref
from collections import namedtuple

import numpy as np

from .. import tensor as _tensor
from ..graph.tape import ACC
from ..tensor import FORWARD_AD, Tensor, _wrap, apply
from .grad_mode import enable_grad, is_grad_enabled

__all__ = [
    "UnpackedDualTensor",
    "dual_level",
    "enter_dual_level",
    "exit_dual_level",
    "make_dual",
    "unpack_dual",
]

_current_level = -1
_duals = []  # weak references to the tensors given a tangent at the level (exit clears them)
_level_tapes = []  # the tape of the thread that entered the level
_rule = threading.local()  # .active: this thread computes a tangent (ops see primals only)

_UnpackedDualTensor = namedtuple("_UnpackedDualTensor", ["primal", "tangent"])


class UnpackedDualTensor(_UnpackedDualTensor):
    """What ``unpack_dual`` returns: ``(primal, tangent)``."""


def enter_dual_level():
    """Enter the forward AD level (there is one, level 0); returns it."""
    global _current_level
    if _current_level >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    # the deferred forward records no tangents: apply() takes no op to it while the level
    # is open, and this thread's open batch runs now (its results then take the eager path)
    from ..graph.tape import current_tape

    tape = current_tape()
    with tape.lock:
        if tape.batch is not None:
            tape.run_batch()
        # no compaction or restart meanwhile: the tangents of graph tensors are kept by node
        # (``_attach``), for a create_graph backward to find (forward over reverse)
        tape.running += 1
    _level_tapes[:] = [tape]
    _current_level = 0
    FORWARD_AD[0] = True
    return 0


def exit_dual_level(*, level=None):
    """Leave the level: every tangent made in it is dropped."""
    global _current_level
    if level is None:
        level = _current_level
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    if level != _current_level:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that was created. "
            "This is not supported."
        )
    FORWARD_AD[0] = False
    _current_level = -1
    for tape in _level_tapes:
        with tape.lock:
            tape.running -= 1
            tape.__dict__.pop("fw_tangents", None)
    _level_tapes.clear()
    for ref in _duals:
        t = ref()
        if t is not None:
            t.__dict__.pop("_fw", None)
    _duals.clear()


class dual_level:
    """Context manager (and decorator) for the forward AD level: inside it, ``make_dual`` and
    ``unpack_dual`` work and ops carry tangents."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)

        return wrapper


def _dtype_name(t):
    return f"torch.{np.dtype(t.dtype).name}"


def make_dual(tensor, tangent, *, level=None):
    """A tensor aliasing ``tensor`` (same memory and version counter) with ``tangent`` as its
    forward gradient, kept as it is (``unpack_dual(d).tangent is tangent``)."""
    if level is None:
        level = _current_level
    if level < 0:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
            "enter_dual_level() first."
        )
    if np.dtype(tensor.dtype).kind != "f":
        raise ValueError(
            f"Expected primal to be floating point or complex, but got: {_dtype_name(tensor)}"
        )
    if np.dtype(tangent.dtype).kind != "f":
        raise ValueError(
            f"Expected tangent to be floating point or complex, but got: {_dtype_name(tangent)}"
        )
    _check_size(tensor, tangent)
    if tangent_of(tensor) is not None:
        raise RuntimeError(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at "
            f"the same level {level} is not supported."
        )
    dual = tensor.view_as(tensor)  # (a view: memory, version counter and graph shared)
    attach_tangent(dual, tangent)
    return dual


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of ``tensor``: a view of it without the tangent, and the
    tangent (None when it has none, or outside the level)."""
    if level is None:
        level = _current_level
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    tangent = tangent_of(tensor)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    with primals_only():  # (the view is made without a tangent)
        primal = tensor.view_as(tensor)
    return UnpackedDualTensor(primal, tangent)


@contextlib.contextmanager
def primals_only():
    """Ops in this block (on this thread) neither read nor give tangents: a rule computing a
    tangent, a custom Function's forward and jvp."""
    before = getattr(_rule, "active", False)
    _rule.active = True
    try:
        yield
    finally:
        _rule.active = before


def attach_outputs(result, tangents):
    """Give a custom Function's outputs the tangents its ``jvp`` returned."""
    outs = result if isinstance(result, tuple) else (result,)
    tans = tangents if isinstance(tangents, tuple) else (tangents,)
    for o, t in zip(outs, tans, strict=False):
        if isinstance(o, Tensor) and t is not None and np.dtype(o.dtype).kind == "f":
            _check_size(o, t)
            attach_tangent(o, t)


def _check_size(primal, tangent):
    if tuple(tangent.shape) != tuple(primal.shape):
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(primal.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}."
        )


def basis_jvps(func, args, j, primal=None):
    """Forward AD of ``func(*args)`` once per element k of ``args[j]``, whose tangent is the
    k-th basis vector (the other arguments carry none): yields ``func``'s result inside the
    level, for the caller to read its tangents (a Jacobian's columns). ``primal``: the
    primal to make the dual from (default ``args[j]``)."""
    x = args[j]
    base = x if primal is None else primal
    for k in range(x.numel()):
        e = np.zeros(x.numel(), x.dtype)
        e[k] = 1
        with dual_level():
            call = list(args)
            call[j] = make_dual(base, _wrap(e.reshape(x.shape)))
            yield func(*call)


def tangent_of(t):
    """The tangent ``t`` carries at the open level, or None."""
    return t.__dict__.get("_fw") if isinstance(t, Tensor) else None


def attach_tangent(t, tangent):
    """Give ``t`` the tangent ``tangent`` at the open level."""
    t.__dict__["_fw"] = tangent
    _duals.append(weakref.ref(t))
    if type(t) is Tensor and t._h >= 0:  # a graph tensor: its tangent, by (node, output)
        tape = t._tape
        table = tape.__dict__.get("fw_tangents")
        if table is None:
            table = tape.fw_tangents = {}
        table[tape.h2node[t._h], t._out] = tangent


def saved_tangent(tape, node, nr):
    """The tangent of output ``nr`` of ``node`` when it was recorded (a leaf's, for its
    AccumulateGrad node), for a value a create_graph backward attaches there; or None."""
    if tape.flags[node] & ACC:
        leaf = tape.obj[node]()
        return None if leaf is None else leaf.__dict__.get("_fw")
    table = tape.__dict__.get("fw_tangents")
    return None if table is None else table.get((node, nr))


_tensor.FORWARD_AD_ATTACH[0] = attach_tangent


# -- propagation (tensor.apply calls _apply while a level is open) ----------------------------

_NOT_HANDLED = _tensor.NOT_HANDLED


def _apply(op, args, kwargs):
    """``apply(op, *args, **kwargs)`` where an input has a tangent: the result with its
    tangent attached; NOT_HANDLED otherwise (the caller runs the op as usual)."""
    if getattr(_rule, "active", False) or op.composite:
        return _NOT_HANDLED  # (a composite's ops carry the tangents)
    seq = (
        args[0] if op.nin == -1 and len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    )
    tangents = [tangent_of(x) for x in seq]
    if all(t is None for t in tangents):
        return _NOT_HANDLED
    with primals_only():
        result = apply(op, *args, **kwargs)
        if not op.differentiable or op.int_result:
            return result
        outs = result if isinstance(result, tuple) else (result,)
        if all(np.dtype(r.dtype).kind != "f" for r in outs):
            return result
        out_tangents = _jvp(op, args, seq, tangents, kwargs, outs)
    for r, t in zip(outs, out_tangents, strict=True):
        if t is not None and np.dtype(r.dtype).kind == "f":
            if t.dtype != r.dtype:
                t = t.to(r.dtype)
            attach_tangent(r, t)
    return result


_tensor.FORWARD_AD_APPLY[0] = _apply


def _apply_composite(op, args, kwargs):
    """A composite op that is linear in its floating inputs (``op.jvp == "linear"``), called
    with a tangent: its result, with the composite applied to the tangents as tangent (its
    own ops would drop a tangent where it detaches, as embedding's padding rows)."""
    if getattr(_rule, "active", False):
        return _NOT_HANDLED
    tangents = [tangent_of(x) for x in args]
    if all(t is None for t in tangents):
        return _NOT_HANDLED
    with primals_only():
        result = op.api(apply, *args, **kwargs)
        tangent = op.api(apply, *_substituted(op, args, args, tangents), **kwargs)
    attach_tangent(result, tangent.to(result.dtype) if tangent.dtype != result.dtype else tangent)
    return result


_tensor.FORWARD_AD_COMPOSITE[0] = _apply_composite


def _floating(x):
    return isinstance(x, Tensor) and np.dtype(x.dtype).kind == "f"


def _substituted(op, args, seq, values):
    """``op``'s arguments with each floating tensor input and number operand of ``seq``
    replaced by the matching item of ``values`` (None: zeros of its shape, or 0)."""
    new = []
    for x, v in zip(seq, values, strict=True):
        if _floating(x):
            new.append(v if v is not None else _wrap(np.zeros(x.shape, x.dtype)))
        elif type(x) is float or type(x) is int:  # a number operand: a constant, tangent 0
            new.append(0.0 if v is None else v)
        elif isinstance(x, np.ndarray) and x.dtype.kind == "f":  # (an array operand: too)
            new.append(np.zeros_like(x) if v is None else v)
        else:
            new.append(x)
    if seq is args:
        return tuple(new)
    return (type(seq)(new),) + tuple(args[1:])


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _jvp(op, args, seq, tangents, kwargs, outs):
    rule = op.jvp
    if rule == "linear":
        return _as_tuple(apply(op, *_substituted(op, args, seq, tangents), **kwargs))
    if rule == "bilinear":
        return _bilinear(op, args, seq, tangents, kwargs)
    if callable(rule):  # (a one-input op's own rule, declared beside it)
        return (rule(seq[0], tangents[0], outs[0], **kwargs),)
    if getattr(op, "d", None) is not None:
        return (_unary(op, seq[0], tangents[0], kwargs, outs[0]),)
    partials = getattr(op.formula, "partials", None)
    if partials is not None:
        return (_broadcasting(op, partials, seq, tangents, kwargs, outs[0]),)
    return _through_vjp(op, args, seq, tangents, kwargs, outs)


class _PartialsCtx:
    """What a broadcasting op's partials (kernels/elementwise.py ``broadcast_formula``)
    read of their node, from the forward call instead: attributes, constants, the ops."""

    def __init__(self, op, operands, kwargs, dtype):
        self._op, self._operands, self.kwargs, self._dtype = op, operands, kwargs, dtype
        self.input_shapes = tuple(tuple(x.shape) for x in operands)

    @property
    def fp(self):
        arrays = [x._data for x in self._operands]
        return tuple(self._op.forward(*arrays, **self.kwargs)[3])

    def constant(self, a):
        return _wrap(np.asarray(a, dtype=self._dtype))

    @property
    def ng(self):
        import nautograd

        return nautograd


def _broadcasting(op, partials, seq, tangents, kwargs, result):
    """Σ_j (d result / d operand j) t_j, broadcast to the result's shape."""
    dtype = result.dtype
    operands = [x if isinstance(x, Tensor) else _wrap(np.asarray(x, dtype=dtype)) for x in seq]
    ds = partials(_PartialsCtx(op, operands, kwargs, dtype), *operands)
    total = None
    for d, t in zip(ds, tangents, strict=True):
        if t is None:
            continue
        term = t * d
        total = term if total is None else total + term
    if tuple(total.shape) != tuple(result.shape):
        total = total.expand(*result.shape)
    return total


def _bilinear(op, args, seq, tangents, kwargs):
    """op(t_a, b, t_rest...) + op(a, t_b, 0...) for an op linear in each of its first two
    inputs, the rest entering additively."""
    ta, tb = tangents[0], tangents[1]
    total = None
    if ta is not None or any(t is not None for t in tangents[2:]):
        values = [ta, seq[1], *tangents[2:]]  # (seq[1]: the primal itself, kept)
        total = apply(op, *_substituted(op, args, seq, values), **kwargs)
    if tb is not None:
        values = [seq[0], tb, *(None for _ in tangents[2:])]
        second = apply(op, *_substituted(op, args, seq, values), **kwargs)
        total = second if total is None else total + second
    return (total,)


def _unary(op, x, t, kwargs, result):
    """t * d(x, result, p0, p1): the derivative the op's backward kernel uses."""
    _, _, _, fp = op.forward(x._data, **kwargs)
    p0, p1 = (tuple(fp) + (0.0, 0.0))[:2]
    dv = op.tensor_d(x, result, p0, p1)
    if not isinstance(dv, Tensor):
        dv = _wrap(np.asarray(dv, dtype=x.dtype))
    elif dv.dtype != x.dtype:
        dv = dv.to(x.dtype)
    if op.select:  # (no tangent passes where d is 0: relu, clamp, the steps, as torch)
        return _tensor_where(dv, t)
    return t * dv


def _tensor_where(dv, t):
    import nautograd

    zero = _wrap(np.zeros((), t.dtype))
    return nautograd.where(dv == 0, zero, t * dv)


def _through_vjp(op, args, seq, tangents, kwargs, outs):
    """J·t from the op's vector-Jacobian product (its create_graph formula): with
    u(g) = Jᵀg recorded, J·t is the gradient of <u(g), t> with respect to g."""
    if op.formula is None:
        raise NotImplementedError(
            f"Trying to use forward AD with {op.name} that does not support it because it has "
            "not been implemented yet."
        )
    from .engine import grad

    # inputs: the primals themselves where they require grad (so the tangent stays
    # differentiable in reverse mode), fresh leaves where they do not
    inputs = []
    call = []
    needs_graph = False  # (a tangent that reverse mode may differentiate again)
    for x, t in zip(seq, tangents, strict=True):
        if _floating(x):
            needs_graph |= x.requires_grad or (t is not None and t.requires_grad)
            x2 = x if x.requires_grad else x.detach().requires_grad_()
            inputs.append((x2, t))
            call.append(x2)
        else:
            call.append(x)
    needs_graph = needs_graph and is_grad_enabled()
    call_args = tuple(call) if seq is args else (type(seq)(call),) + tuple(args[1:])
    with enable_grad():
        result = _as_tuple(apply(op, *call_args, **kwargs))
        floating = [r for r in result if np.dtype(r.dtype).kind == "f" and r.requires_grad]
        gs = [_wrap(np.zeros(r.shape, r.dtype), True) for r in floating]
        used = [(x, t) for x, t in inputs if t is not None]
        vjps = grad(floating, [x for x, _ in used], gs, create_graph=True, allow_unused=True)
        pairs = [(v, t) for v, (_, t) in zip(vjps, used, strict=True) if v is not None]
        if not pairs:
            jvps = [None] * len(gs)
        else:
            # (a batch of tangents, func.jacfwd's: the create_graph walk runs them batched)
            batched = any(type(t) is _tensor.BATCHED[0] for _, t in pairs)
            jvps = grad(
                [v for v, _ in pairs],
                gs,
                [t for _, t in pairs],
                create_graph=needs_graph or batched,
                allow_unused=True,
            )
            if batched and not needs_graph:
                jvps = [None if j is None else j.detach() for j in jvps]
    out = iter(jvps)
    tangents_out = []
    for r in result:
        if np.dtype(r.dtype).kind == "f" and r.requires_grad:
            j = next(out)
            tangents_out.append(j if j is not None else _wrap(np.zeros(r.shape, r.dtype)))
        else:
            tangents_out.append(None)
    return tuple(tangents_out)
