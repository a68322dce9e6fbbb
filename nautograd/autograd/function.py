"""Custom autograd Functions (``torch.autograd.Function``): forward and backward in Python.

A Function's node is a tape row flagged PY whose opcode has no kernel (``OP_PYTHON``): the
compiled scheduler hands it back to Python in heap order (graph/scheduler.py ``run``), the
engine reads the node's output gradients, calls ``backward`` through ``_run_backward`` here
and delivers what it returns into the buffers of the node's inputs (autograd/engine.py). The
context object ``ctx`` lives in the tape's ``obj`` entry of the node, so it dies with the node
(tape reset or compaction) and no tensor refers back to it.

Semantics and error texts are torch 2.13's (torch 2.13's autograd.Function).
"""

import functools
import inspect
import warnings

import numpy as np

from ..graph.tape import current_tape
from ..tensor import FORWARD_AD, SAVED_HOOKS_OPEN, Tensor, _edges, _reserve, _wrap
from . import forward_ad
from ._errors import RELEASED_MSG, modified_inplace
from .grad_mode import _state as _grad_state
from .grad_mode import is_grad_enabled, no_grad
from .graph import PyNode, call_pack, current_saved_hooks, unpack_checked


class FunctionCtx:
    """The ``ctx`` a Function's ``forward``/``setup_context`` and ``backward`` receive.

    Its class is ``<Function>Backward`` (as torch's), and any attribute set on it in forward
    is there in backward.
    """

    _saved = None  # tuple of (tensor or None, version counter, version, role) once saved
    # under create_graph, role ("in", edge) / ("out", output) -> the saved tensor attached to
    # the graph again (autograd/higher_order.py); None otherwise
    _attach = None
    _released = False
    _dirty = ()
    _non_differentiable = ()
    materialize_grads = True
    needs_input_grad = ()

    def save_for_forward(self, *tensors):
        """Save tensors for ``jvp`` (forward-mode AD); ``jvp`` reads them as
        ``ctx.saved_tensors``."""
        self._fw_save = tensors

    def save_for_backward(self, *tensors):
        """Save tensors (or None) for ``backward``; read them back as ``ctx.saved_tensors``."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    "save_for_backward can only save variables, but argument "
                    f"{tensors.index(t)} is of type {type(t).__name__}"
                )
        self._to_save = tensors

    @property
    def saved_tensors(self):
        """The tensors given to ``save_for_backward``, version-checked (torch's unpack)."""
        if self._released:
            raise RuntimeError(RELEASED_MSG)
        if self._saved is None:
            return tuple(getattr(self, "_to_save", ()))
        out = []
        attach = self._attach
        for t, vc, version, role in self._saved:
            if type(t) is _Packed:  # saved under saved_tensors_hooks: unpacked per access
                t = t.unpack()
            elif t is not None and vc[0] != version:
                raise modified_inplace(t.shape, t._data.dtype, vc[0], version)
            out.append(attach(role, t) if attach is not None and role is not None else t)
        return tuple(out)

    @property
    def saved_variables(self):
        """The deprecated name of ``saved_tensors``."""
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, 2)
        return self.saved_tensors

    def mark_dirty(self, *args):
        """Mark input tensors that ``forward`` modified in place (they must be returned)."""
        self._dirty = args

    def mark_non_differentiable(self, *args):
        """Mark outputs that are not differentiable: they do not require grad, and backward
        receives zeros (or None, see ``set_materialize_grads``) for them."""
        self._non_differentiable = args

    def set_materialize_grads(self, value):
        """``False``: gradients of outputs no one used arrive in backward as None, not zeros."""
        self.materialize_grads = bool(value)

    # -- engine side ----------------------------------------------------------------------

    def _release(self):
        """Free the saved tensors (a backward without retain_graph ran this node)."""
        if self._saved:  # a node that saved nothing can run again, as in torch
            self._saved = ()
            self._released = True

    def _run_backward(self, grads, create_graph=False):
        """Call the Function's backward on ``grads`` (one array or None per differentiable
        output, None: no consumer wrote it) and return one validated array or None per
        tensor input, shaped and typed as that input.

        With ``create_graph`` the grads are tensors, backward runs with grad mode on (its
        ops are recorded) and the results are tensors (autograd/higher_order.py)."""
        cls = self._forward_cls
        backward = _backward_of(cls)
        full = []
        for k, shape, dtype in self._outputs:
            if dtype is None:  # not a tensor
                full.append(None)
                continue
            g = grads[k] if k >= 0 else None
            if g is None:
                full.append(_wrap(np.zeros(shape, dtype)) if self.materialize_grads else None)
            elif create_graph:
                full.append(g)
            else:
                full.append(_wrap(g.reshape(shape)))
        state = _grad_state  # backward runs with grad mode = create_graph, as in torch
        enabled = state.enabled
        state.enabled = create_graph
        state.recording = state.tape if create_graph else None
        try:
            result = backward(self, *full)
        finally:
            state.enabled = enabled
            # (derived, as grad_mode._set does: the backward may have made the thread's tape)
            state.recording = state.tape if enabled else None
        if not isinstance(result, tuple):
            result = (result,)
        name = type(self).__name__
        n_in = len(self._inputs)
        if len(result) < n_in or any(g is not None for g in result[n_in:]):
            raise RuntimeError(
                f"function {name} returned an incorrect number of gradients "
                f"(expected {n_in}, got {len(result)})"
            )
        out = []
        for j, info in enumerate(self._inputs):
            g = result[j]
            if info is None:
                if g is not None:
                    raise RuntimeError(
                        f"function {name} returned a gradient different than None at position "
                        f"{j + 1}, but the corresponding forward input was not a Variable"
                    )
                continue
            index, shape, dtype, needed = info
            if g is None or not needed:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")
            a = g._data
            if a.shape != shape:
                if not _expandable(shape, a.shape):
                    raise RuntimeError(
                        f"Function {name} returned an invalid gradient at index {index} - got "
                        f"{list(a.shape)} but expected shape compatible with {list(shape)}"
                    )
                if create_graph:
                    from .higher_order import sum_to

                    g = sum_to(g, shape)
                else:
                    a = _sum_to(a, shape)
            if create_graph:
                out.append(g if a.dtype == dtype else g.to(dtype))
                continue
            out.append(a)  # (the engine's buffer write casts it to the input's dtype)
        return out


def _expandable(shape, to):
    """Whether ``shape`` broadcasts to ``to`` (torch's is_expandable_to)."""
    if len(shape) > len(to):
        return False
    for a, b in zip(reversed(shape), reversed(to), strict=False):
        if a != b and a != 1:
            return False
    return True


def _sum_to(a, shape):
    """Sum the broadcast gradient ``a`` down to ``shape`` (torch's sum_to)."""
    lead = a.ndim - len(shape)
    if lead:
        a = a.sum(axis=tuple(range(lead)))
    dims = tuple(d for d, n in enumerate(shape) if n == 1 and a.shape[d] != 1)
    return a.sum(axis=dims, keepdims=True) if dims else a


class BackwardCFunction(FunctionCtx):
    """Base of every ``<Function>Backward`` context class."""

    _forward_cls = None


def _backward_of(cls):
    own_backward = cls.backward is not Function.backward
    own_vjp = cls.vjp is not Function.vjp
    if own_backward and own_vjp:
        raise RuntimeError(
            "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You "
            "should only implement one of them."
        )
    if not (own_backward or own_vjp):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )
    return cls.backward if own_backward else cls.vjp


class FunctionMeta(type):
    """Gives every Function subclass its ``<Name>Backward`` context class, as torch does."""

    def __init__(cls, name, bases, attrs):
        node_cls = type(name + "Backward", (PyNode,), {"__slots__": ()})
        cls._backward_cls = type(
            name + "Backward", (BackwardCFunction,), {"_forward_cls": cls, "_node_cls": node_cls}
        )
        super().__init__(name, bases, attrs)


class Function(metaclass=FunctionMeta):
    """Base class for operations with a hand-written backward (``torch.autograd.Function``).

    Subclass it with static methods and call ``MyFunction.apply(*args)``::

        class Exp(ng.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                result = x.exp()
                ctx.save_for_backward(result)
                return result

            @staticmethod
            def backward(ctx, grad):
                (result,) = ctx.saved_tensors
                return grad * result

    ``forward`` runs with grad mode off; its tensor results become the outputs of one graph
    node whose backward is ``backward`` (returning one gradient or None per forward input).
    ``forward(*args)`` plus ``setup_context(ctx, inputs, output)`` is the other accepted form.
    """

    def __init__(self, *args, **kwargs):
        warnings.warn(
            f"{self.__class__} should not be instantiated. Methods on autograd functions are "
            "all static, so you should invoke them on the class itself. Instantiating an "
            "autograd function will raise an error in a future version of PyTorch.",
            DeprecationWarning,
            stacklevel=2,
        )

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @staticmethod
    def forward(*args, **kwargs):
        """The computation: ``forward(ctx, *args)``, or ``forward(*args)`` with ``setup_context``.
        Runs with gradient recording off."""
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        """``setup_context(ctx, inputs, output)``: save what backward needs when forward does not
        take ``ctx``."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """``backward(ctx, *grads)``: one gradient (or None) per input of forward, given the
        gradient of each output."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """The forward-mode rule: the tangents of the outputs from those of the inputs (one
        per ``forward`` argument; None for non-tensors), for ``autograd.forward_ad``."""
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD."
        )

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` on ``args`` and record one node whose backward is ``backward``."""
        if cls.forward is Function.forward:
            raise NotImplementedError(
                "You must implement the forward function for custom autograd.Function."
            )
        ctx = cls._backward_cls()
        separate = cls.setup_context is not Function.setup_context
        if separate or kwargs:
            args, kwargs = _bound(cls, ctx, separate, args, kwargs)
        state = _grad_state
        enabled = state.enabled
        needs = tuple([isinstance(x, Tensor) and x._rg for x in args])
        record = enabled and True in needs
        ctx.needs_input_grad = needs if record else (False,) * len(args)
        state.enabled = False  # forward runs with grad mode off
        state.recording = None
        dual = FORWARD_AD[0] and any(forward_ad.tangent_of(x) is not None for x in args)
        try:  # (under forward AD the forward sees primals, as torch's)
            if dual:
                with forward_ad.primals_only():
                    output = _forward(cls, ctx, separate, args, kwargs)
            else:
                output = _forward(cls, ctx, separate, args, kwargs)
        finally:
            state.enabled = enabled
            # (derived, as grad_mode._set does: the forward may have made the thread's tape)
            state.recording = state.tape if enabled else None
        tangents = _output_tangents(cls, ctx, args) if dual else None
        result = _record(ctx, args, output) if record else output
        if tangents is not None:
            forward_ad.attach_outputs(result, tangents)
        return result


def _forward(cls, ctx, separate, args, kwargs):
    if separate:
        output = cls.forward(*args, **kwargs)
        cls.setup_context(ctx, args, output)
        return output
    return cls.forward(ctx, *args, **kwargs)


def _bound(cls, ctx, separate, args, kwargs):
    """``forward``'s arguments bound to its signature, defaults applied (setup_context sees
    every input, as torch's): (positional arguments, keyword-only ones). The signature is
    looked up once per class (inspect.signature cost ~30 us a call), and a call that gives
    exactly its positional parameters needs no binding."""
    sig = cls.__dict__.get("_forward_signature")
    if sig is None:
        sig = inspect.signature(cls.forward)
        params = list(sig.parameters.values())
        plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
        sig = (sig, len(params) if plain else -1)
        type.__setattr__(cls, "_forward_signature", sig)
    signature, positional = sig
    if separate:
        if not kwargs and len(args) == positional:
            return args, {}
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.args), bound.kwargs
    bound = signature.bind(ctx, *args, **kwargs)
    return tuple(bound.args[1:]), bound.kwargs


def _output_tangents(cls, ctx, args):
    """The outputs' tangents from the Function's ``jvp`` (torch's message if it has none)."""
    tangents = []
    for x in args:
        if not isinstance(x, Tensor):
            tangents.append(None)
            continue
        t = forward_ad.tangent_of(x)
        if t is None and x._data.dtype.kind == "f":
            t = _wrap(np.zeros(x.shape, x._data.dtype))
        tangents.append(t)
    saved = ctx.__dict__.get("_fw_save")
    before = ctx.__dict__.get("_to_save")
    if saved is not None:  # (ctx.saved_tensors in jvp: what save_for_forward kept)
        ctx._to_save = saved
    try:
        with forward_ad.primals_only():
            out = cls.jvp(ctx, *tangents)
    finally:
        if saved is not None:
            ctx._to_save = before if before is not None else ()
    return out


_TWICE = "trying to differentiate twice a function that was marked with @once_differentiable"


def once_differentiable(fn):
    """Decorator for a ``backward`` that is not itself differentiable: it runs under
    ``no_grad``. Under ``create_graph``, when a gradient it receives requires grad, its
    results come out of an ``Error`` node (torch's DelayedError) whose backward raises
    "trying to differentiate twice a function that was marked with @once_differentiable"."""

    @functools.wraps(fn)
    def wrapper(ctx, *args, **kwargs):
        with no_grad():
            outputs = fn(ctx, *args, **kwargs)
        if not is_grad_enabled() or not any(
            isinstance(a, Tensor) and a.requires_grad for a in args
        ):
            return outputs
        multi = isinstance(outputs, tuple)
        # detached leaves that require grad, so that the Error node is recorded
        fake = [o.detach().requires_grad_() if isinstance(o, Tensor) else o
                for o in (outputs if multi else (outputs,))]  # fmt: skip
        result = _DelayedError.apply(*fake)
        return result if multi else result[0]

    return wrapper


# ---------------------------------------------------------------------------------------------
# recording


_DIFF_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _record(ctx, args, output):
    """Make the node of a Function call whose forward returned ``output``."""
    name = type(ctx).__name__
    multi = type(output) is tuple
    outs = output if multi else (output,)
    dirty = ctx._dirty
    for t in dirty:
        if not _is_one_of(t, outs):
            raise RuntimeError(
                "Some elements marked as dirty during the forward method were not returned as "
                "output. The inputs that are modified inplace must all be outputs of the "
                "Function."
            )
        if t._h < 0 and t._rg:
            raise RuntimeError(
                "a leaf Variable that requires grad has been used in an in-place operation."
            )
    non_diff = ctx._non_differentiable
    # the node's outputs: the differentiable tensor results, in order. A tensor returned twice
    # is one output: backward receives its gradient at the first position, an undefined one
    # at the others
    layout = []  # per forward output: (node output index or -1, shape, dtype or None)
    diff = []  # differentiable output tensors, by node output index
    dtype = None
    for t in outs:
        if not isinstance(t, Tensor):
            layout.append(_NOT_A_TENSOR)
            continue
        a = t._data
        if (
            a.dtype.kind != "f"
            or (diff and _is_one_of(t, diff))
            or (non_diff and _is_one_of(t, non_diff))
        ):
            layout.append((-1, a.shape, a.dtype))
            continue
        if a.dtype not in _DIFF_DTYPES:
            raise NotImplementedError(
                f"{name}: a differentiable output of dtype {a.dtype} is not supported "
                "(float32 and float64 are)"
            )
        if dtype is None:
            dtype = a.dtype
        elif a.dtype != dtype:
            raise NotImplementedError(
                f"{name}: differentiable outputs of different dtypes (float32 and float64) "
                "are not supported; return them in one dtype"
            )
        layout.append((len(diff), a.shape, a.dtype))
        diff.append(t)
    ctx._outputs = layout
    # the tape of the inputs' graph (another thread's, when they were recorded there), else
    # this thread's; under its lock, as every recorded op (tensor._run)
    tape = None
    for x in args:
        if isinstance(x, Tensor) and x._h >= 0:
            tape = x._tape
            break
    else:
        tape = current_tape()
    with tape.lock:
        _reserve(tape, len(args) + 2)
        # one edge per tensor argument, as torch's next_functions
        tensors = [x for x in args if isinstance(x, Tensor)]
        enodes, enrs = _edges(tape, tensors, name)
        inputs = []  # per argument: None (not a tensor) or (edge index, shape, dtype, needs grad)
        edge = 0
        for x in args:
            if isinstance(x, Tensor):
                inputs.append((edge, x._data.shape, x._data.dtype, x._rg))
                edge += 1
            else:
                inputs.append(None)
        ctx._inputs = inputs
        node = tape.record_python(
            ctx, dtype == np.float32, enodes, enrs, [t._data.size for t in diff]
        )
        # the results: fresh tensors become the node's outputs; an input returned as it is (and
        # not dirty) or a tensor already in a graph is returned as a new tensor sharing its memory
        made = {}  # id of a differentiable output -> the tensor returned for it
        for k, t in enumerate(diff):
            old = -1
            if dirty and _is_one_of(t, dirty):
                r, old = t, t._h  # the input itself, moved to this node
                r._bump()
            elif t._h >= 0 or t._rg or _is_one_of(t, args):
                r = t.detach()
            else:
                r = t
            r._rg, r._tape, r._h, r._out = True, tape, tape.new_handle(node), k
            if old >= 0:  # (after the new handle: the tape's live count never reaches 0 here)
                tape.drop_handle(old)
            made[id(t)] = r
    if multi:
        result = tuple(made.get(id(t), t) if isinstance(t, Tensor) else t for t in outs)
    else:
        result = made[id(output)] if made else output
    # saved tensors are kept as detached aliases (same memory, same version counter): a saved
    # tensor holding a handle into the tape (an input's node, a leaf's AccumulateGrad, this
    # node's own output) would keep the tape alive through the ctx the tape holds, so it
    # never resets after the user's tensors die
    # Each keeps its role (an input's edge, or an output of this node) as integers, so that
    # under create_graph it is attached to the graph again, as torch's saved variables are.
    to_save = ctx.__dict__.pop("_to_save", None)
    if to_save:
        hooks = current_saved_hooks() if SAVED_HOOKS_OPEN[0] else None
        saved = []
        for t in to_save:
            if t is None:
                saved.append((None, None, 0, None))
                continue
            r = made.get(id(t))
            role = None
            if r is not None:
                role = ("out", r._out)
            else:
                for x, info in zip(args, inputs, strict=True):
                    if x is t and info is not None and info[3]:
                        role = ("in", info[0])
                        break
            alias = (r if r is not None else t).detach()
            vc, version = alias._vc, alias._vc[0]
            if hooks is not None:  # saved_tensors_hooks: the packed value is kept instead
                alias = _Packed(hooks, t if r is None else alias)
            saved.append((alias, vc, version, role))
        ctx._saved = tuple(saved)
    # (the marks hold tensors, with their handles: not kept past recording, see above)
    ctx._dirty = ctx._non_differentiable = ()
    return result


class _Packed:
    """A tensor saved under ``saved_tensors_hooks``: what the pack hook returned, and the
    unpack hook that gives the tensor back."""

    __slots__ = ("value", "_unpack")

    def __init__(self, hooks, tensor):
        pack, self._unpack = hooks
        self.value = call_pack(pack, tensor)

    def unpack(self):
        return unpack_checked(self._unpack, self.value)


_NOT_A_TENSOR = (-1, None, None)


def _is_one_of(t, items):
    """``any(t is x for x in items)`` without the generator (~0.3 us a call)."""
    for x in items:
        if x is t:
            return True
    return False


class _DelayedError(Function):
    """torch's DelayedError: passes its inputs through; a backward that reaches its node (the
    ``Error`` node) raises."""

    @staticmethod
    def forward(ctx, *xs):
        return tuple(x.clone() if isinstance(x, Tensor) else x for x in xs)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(_TWICE)


# the node's name, as torch's: <Error>, name() "torch::autograd::Error"
_DelayedError._backward_cls.__name__ = _DelayedError._backward_cls._node_cls.__name__ = "Error"
_DelayedError._backward_cls._node_cls.name = lambda self: "torch::autograd::Error"
