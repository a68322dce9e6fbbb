"""Tensor: a numpy value plus, when it was recorded, where it sits on its thread's tape.

``apply(op, *args, **kwargs)`` is the one path every op takes: it converts operands,
promotes dtypes as torch does, runs the op's forward, and records a node when grad mode is
on and an input requires grad.
"""

import math
import numbers
import os
import struct
import threading
import weakref

import numpy as np

from . import _device
from ._random import numpy_generator as _numpy_generator
from .autograd.grad_mode import _state as _grad_state
from .autograd.grad_mode import is_grad_enabled
from .graph.tape import (
    ANOMALY,
    IN_PLACE_CHANGES,
    PY,
    SMALL,
    address_of,
    current_tape,
    forward_stack,
)
from .graph.tape import _local as _tape_local
from .kernels import OPS, opdocs
from .kernels.registry import COMPOSITES, OP_BY_NAME

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
float16 = np.dtype(np.float16)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
bool_ = np.dtype(np.bool_)

_GRAD_DTYPES = (float32, float64)
# in-place changes to any tensor, process-wide (every one goes through Tensor._bump): when
# none came since the tape's oldest version entry was noted (tape.versions_since), no saved
# value can have changed and backward skips the check (~0.7 ms of the RNN benchmark's 3 ms
# backward: 2,000 nodes with entries)
_IN_PLACE_LOCK = threading.Lock()
# the default floating dtype (set_default_dtype): what Python floats and integer operands of
# floating ops become
DEFAULT_FLOAT = [float64]
_NAMES = {
    float32: "float32",
    float64: "float64",
    float16: "float16",
    int64: "int64",
    int32: "int32",
    int16: "int16",
    int8: "int8",
    uint8: "uint8",
    bool_: "bool",
}


class _NoVersionCounter(list):
    """The version counter of every inference tensor (made under ``inference_mode``): torch
    keeps none for them, so reading one raises, and an in-place op on one outside the mode
    or saving one for backward raises torch's error (``Tensor._check_inference``)."""


_INFERENCE = _NoVersionCounter([0])
_INFERENCE_INPLACE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
    "clone to get a normal tensor before doing inplace update.See "
    "https://github.com/pytorch/rfcs/pull/17 for more details."
)
_INFERENCE_VIEW_INPLACE = (
    "A view was created in inference mode and is being modified inplace in normal mode. "
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
    "your code by moving both the view and the inplace either both inside the inference_mode "
    "block (if you don't want the inplace to be tracked) or both outside (if you want the "
    "inplace to be tracked)."
)
INFERENCE_SAVED = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
    "inference mode in computation tracked by autograd. To work around this, you can make a "
    "clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
    "`torch.inference_mode()`."
)
# Tensor.type()'s legacy names
_TYPE_NAMES = {
    float32: "FloatTensor",
    float64: "DoubleTensor",
    float16: "HalfTensor",
    int64: "LongTensor",
    int32: "IntTensor",
    int16: "ShortTensor",
    int8: "CharTensor",
    uint8: "ByteTensor",
    bool_: "BoolTensor",
}


def dtype_name(dt):
    return "ng." + _NAMES.get(np.dtype(dt), str(dt))


class Size(tuple):
    """A tensor's shape: a tuple that prints as torch.Size does."""

    def __repr__(self):
        return f"torch.Size({list(self)})"

    def numel(self):
        """The number of elements of a tensor of this shape."""
        return math.prod(self)


# ---------------------------------------------------------------------------------------------


class Tensor:
    """A tensor with PyTorch's autograd semantics.

    The value is a numpy array (``.numpy()`` / ``np.asarray`` share its memory). A tensor
    produced by a recorded op holds a handle into its thread's tape; a leaf that requires
    grad gets an AccumulateGrad node on first use.
    """

    # the fields every op sets are slots; the rarely set ones live in a __dict__ that is only
    # created when one is assigned, and read their class defaults until then
    # (_vc, the version counter: a one-item list, shared by views and detached aliases; a slot
    # because views and saved results set it, where a __dict__ cost ~0.3 us to create)
    # (_b, _v, _shape, _src: a deferred result's batch, value id, shape, and the tensor its
    # memory is a run of, see _Lazy; unset on other tensors)
    # (_imp: its import into a deferred batch (_import_new), None when made; a _Lazy's is
    # unset until it is forced, so reads are under try. As a class default it lived in the
    # __dict__, whose creation at the first import took ~0.3 us of an RNN step's x_t)
    __slots__ = (
        "_data", "_rg", "_tape", "_h", "_out", "_vc", "_b", "_v", "_shape", "_src", "_imp",
        "__dict__", "__weakref__",
    )  # fmt: skip
    _grad = None
    _acc_tape = None
    _acc_h = -1
    _acc_more = None  # {tape: handle}: the leaf's AccumulateGrad nodes on other threads' tapes
    _retains = False
    _hooks = None
    _post_hooks = None  # register_post_accumulate_grad_hook's hooks
    _acc_hooks = None  # {"pre": [...], "post": [...]}: hooks of the leaf's AccumulateGrad node
    _is_param = False  # an nn.Parameter (nn/parameter.py): only its repr and isinstance differ
    # a recorded view's base (the first tensor of its chain of views), and a non-leaf base's
    # views (weak references): in-place ops rewrite both (autograd/inplace.py)
    _view_base = None
    _views = None
    _inference_view = False  # a view made under inference_mode of a tensor requiring grad
    __array_priority__ = 1000
    __array_ufunc__ = None  # numpy operators defer to Tensor's reflected methods

    def __init__(self, *args, requires_grad=False, device=None):
        """torch's ``Tensor(...)`` constructor: ``Tensor(*sizes)`` (or a ``Size``) is a
        tensor of those sizes and the default dtype (zeros: torch's memory is not
        initialized); ``Tensor(data)`` holds ``data`` in the default dtype (a floating numpy
        array keeps its dtype and shares its memory; a tensor is aliased); ``Tensor()`` is
        empty. ``requires_grad`` is nautograd's addition."""
        _device.check(device, "Tensor()")
        data = _legacy_data(args)
        a = data._data if isinstance(data, Tensor) else np.asarray(data)
        if not isinstance(data, Tensor) and a.dtype.kind != "f":
            a = a.astype(DEFAULT_FLOAT[0])
        self._data = a
        self._rg = False
        self._tape = None
        self._h = -1
        self._out = 0
        self._vc = None
        self._imp = None
        if isinstance(data, Tensor):  # another tensor's memory
            _expose(self)
            _expose(data)
        elif a is data or a.base is not None:  # the caller's array, or a buffer's memory
            _expose(self)
        if requires_grad:
            self.requires_grad = True

    def __del__(self):
        try:
            h = self._h
            if h >= 0:
                tape = self._tape
                # tape.drop_handle(h), inlined: runs once per dying result
                tape.h2node[h] = -1
                tape.free_h.append(h)
            if self._acc_tape is not None:
                _drop_accumulators(self)
        except Exception:  # interpreter shutdown
            pass

    # -- autograd state ---------------------------------------------------------------------

    @property
    def requires_grad(self):
        """Whether gradients are computed for this tensor."""
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value):
        value = bool(value)
        if self._h >= 0:
            if not value:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to "
                    "use a computed variable in a subgraph that doesn't require differentiation "
                    "use var_no_grad = var.detach()."
                )
            return
        if value and self._data.dtype not in _GRAD_DTYPES:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if value and self._vc is _INFERENCE and not _grad_state.inference:
            raise RuntimeError(
                "Setting requires_grad=True on inference tensor outside InferenceMode is not "
                "allowed."
            )
        if not value and self._acc_tape is not None:
            _drop_accumulators(self)
        self._rg = value

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` in place; returns self."""
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        """True for tensors that were not produced by a recorded op."""
        return self._h < 0

    @property
    def grad_fn(self):
        """The node that produced this tensor (None for leaves)."""
        if self._h < 0:
            return None
        from .autograd.graph import make_node

        tape = self._tape
        with tape.lock:
            if tape.batch is not None:  # (a deferred node's Python entries come with its run)
                tape.run_batch()
            return make_node(tape, tape.h2node[self._h])

    @property
    def grad(self):
        """The accumulated gradient (leaves, and tensors that ``retain_grad()``)."""
        if self._h >= 0 and not self._retains and self._grad is None:
            import warnings

            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is None:
            self._grad = None
            return
        if not isinstance(value, Tensor):
            raise TypeError(
                "assigned grad expected to be a Tensor or None but got grad of type "
                f"{type(value).__name__}"
            )
        if value is self:
            raise RuntimeError("can't assign Variable as its own grad")
        if value.shape != self.shape:
            raise RuntimeError(
                f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of "
                f"size '{list(self.shape)}'. Please ensure that the gradient and the tensor are "
                "the same size"
            )
        if value.dtype != self.dtype:
            raise RuntimeError(
                f"attempting to assign a gradient with dtype '{value.dtype}' to a tensor with "
                f"dtype '{self.dtype}'. Please ensure that the gradient and the tensor have the "
                "same dtype"
            )
        self._grad = value

    @grad.deleter
    def grad(self):
        self._grad = None

    def retain_grad(self):
        """Populate ``.grad`` for this non-leaf tensor during backward (a no-op on leaves)."""
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._h < 0 or self._retains:
            return
        import weakref

        self._retains = True
        tape = self._tape
        with tape.lock:
            node = tape.h2node[self._h]
            tape.retained.setdefault(node, {})[self._out] = weakref.ref(self)

    @property
    def retains_grad(self):
        """True for a non-leaf tensor whose ``.grad`` is populated by backward."""
        return self._retains

    @property
    def _version(self):
        if self._vc is _INFERENCE:
            raise RuntimeError("Inference tensors do not track version counter.")
        return self._vc[0] if self._vc is not None else 0

    def is_inference(self):
        """True for a tensor made under ``inference_mode`` (an inference tensor)."""
        return self._vc is _INFERENCE

    def _bump(self):
        if self._vc is None:
            self._vc = [0]
        self._vc[0] += 1
        with _IN_PLACE_LOCK:  # (a lost increment could bring the count back to a tape's mark)
            IN_PLACE_CHANGES[0] += 1

    def detach(self):
        """A new leaf sharing this tensor's memory (and version counter), not requiring grad."""
        if self._vc is None:
            self._vc = [0]
        t = _wrap(self._data)
        t._vc = self._vc  # shares the version counter, as torch's detach does
        return t

    def detach_(self):
        """Detach this tensor from the graph in place; returns self."""
        if self._h >= 0:
            self._tape.drop_handle(self._h)
            self._h = -1
        self.requires_grad = False
        return self

    @property
    def data(self):
        """The value as a tensor that does not require grad (shares memory)."""
        return self.detach()

    @data.setter
    def data(self, value):
        a = value._data if isinstance(value, Tensor) else np.asarray(value)
        old = self._data
        if self._acc_tape is not None and (a.size != old.size or a.dtype != old.dtype):
            # the AccumulateGrad node was recorded for the old size and dtype: graphs
            # recorded from now on get a new one (the old graphs' check theirs: engine.py)
            _drop_accumulators(self)
        self._data = a
        _expose(self)
        if isinstance(value, Tensor):
            _expose(value)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradients of this tensor into the leaves' ``.grad`` (see
        ``ng.autograd.backward``)."""
        # (the engine, imported on first use: a function-level import costs ~1 us a call)
        backward = _ENGINE_BACKWARD[0] if _ENGINE_BACKWARD else _engine_backward()
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def register_hook(self, hook):
        """Register ``hook(grad) -> Tensor | None`` run when this tensor's gradient is computed."""
        from .autograd.hooks import register_tensor_hook

        return register_tensor_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Register ``hook(tensor) -> None``, run after backward accumulated this leaf's
        ``.grad`` (an optimizer step inside backward, for instance)."""
        if self._h >= 0:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        from .autograd.hooks import RemovableHandle

        if self._post_hooks is None:
            self._post_hooks = []
        self._post_hooks.append(hook)
        return RemovableHandle(self._post_hooks, hook)

    # -- value ----------------------------------------------------------------------------

    @property
    def shape(self):
        """The size of each dimension, as a ``Size`` (a tuple)."""
        return Size(self._data.shape)

    def size(self, dim=None):
        """The shape, or the size of dimension ``dim``."""
        if dim is None:
            return Size(self._data.shape)
        from .kernels._shapes import wrap_dim

        return self._data.shape[wrap_dim("size", dim, self._data.ndim)]

    @property
    def dtype(self):
        """The element type (a numpy dtype: ``ng.float32``, ``ng.float64``, ...)."""
        return self._data.dtype

    @property
    def ndim(self):
        """The number of dimensions."""
        return self._data.ndim

    def dim(self):
        """The number of dimensions."""
        return self._data.ndim

    def numel(self):
        """The number of elements."""
        return self._data.size

    nelement = numel

    @property
    def device(self):
        """``device(type='cpu')``: nautograd computes on the CPU."""
        return _device.CPU

    is_cuda = False
    is_cpu = True
    is_meta = False

    def cpu(self):
        """Self: the tensor is on the CPU already."""
        return self

    def cuda(self, device=None, non_blocking=False):
        """Raises torch's error for a build without CUDA."""
        _device.check("cuda" if device is None else device, "cuda()")
        return self

    @property
    def T(self):
        """The dimensions reversed (``permute(n-1, ..., 0)``)."""
        return apply(OP_BY_NAME["permute"], self, dims=tuple(range(self.ndim))[::-1])

    @property
    def mT(self):
        """The transpose of the last two dimensions (a view)."""
        return self.transpose(-2, -1)

    def is_floating_point(self):
        """True for float16, float32 and float64 tensors."""
        return self._data.dtype.kind == "f"

    def is_contiguous(self):
        """True when the elements lie in row-major order without gaps."""
        return self._data.flags.c_contiguous

    def contiguous(self):
        """This tensor if it is contiguous, else a contiguous copy (recorded like ``clone``)."""
        return self if self._data.flags.c_contiguous else self.clone()

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        return self._data.item()

    def tolist(self):
        """The values as nested Python lists (a Python number for a 0-D tensor)."""
        return self._data.tolist()

    def numpy(self, force=False):
        """The value as a numpy array sharing memory."""
        if self._rg and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        a = self._data  # (a deferred tensor gets its value, and maybe a shared counter, first)
        _expose(self)
        return a

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        if dtype is not None and a.dtype != dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data)

    def __float__(self):
        return builtins_float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    __hash__ = object.__hash__

    def __repr__(self):
        if self._is_param:
            return "Parameter containing:\n" + _format(self)
        return _format(self)

    # -- conversions ------------------------------------------------------------------------

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device, dtype=None)``, ``to(other)`` (its dtype), with keywords
        ``dtype``, ``device``, ``non_blocking``, ``copy``: self when nothing changes and
        ``copy`` is False, otherwise a recorded conversion."""
        dtype = kwargs.pop("dtype", None)
        copy = kwargs.pop("copy", False)
        dev = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        flags = []  # to(dtype, non_blocking, copy) positionally
        for a in args:
            if isinstance(a, bool):
                flags.append(a)
            elif isinstance(a, Tensor):
                dtype = a._data.dtype
            elif isinstance(a, (str, _device.device, int)):
                dev = a
            elif a is not None:
                dtype = a
        if len(flags) > 1:
            copy = flags[1]
        _device.check(dev, "to()")
        if dtype is None or np.dtype(dtype) == self._data.dtype:
            return self.clone() if copy else self
        return apply(OP_BY_NAME["_to_copy"], self, dtype=np.dtype(dtype))

    def type(self, dtype=None):
        """The type name (``'torch.FloatTensor'``) without an argument, else a cast to
        ``dtype`` (a dtype or such a name)."""
        if dtype is None:
            return "torch." + _TYPE_NAMES[self._data.dtype]
        if isinstance(dtype, str):
            names = {"torch." + v: k for k, v in _TYPE_NAMES.items()}
            if dtype not in names:
                raise ValueError(f"invalid type: '{dtype}'")
            dtype = names[dtype]
        return self.to(dtype)

    def float(self):
        """A float32 copy (this tensor if it is float32 already); differentiable."""
        return self.to(float32)

    def double(self):
        """A float64 copy (this tensor if it is float64 already); differentiable."""
        return self.to(float64)

    def long(self):
        """An int64 copy; the result does not require grad."""
        return self.to(int64)

    def int(self):
        """An int32 copy; the result does not require grad."""
        return self.to(int32)

    def bool(self):
        """A bool copy; the result does not require grad."""
        return self.to(bool_)

    # -- in-place ops (outside recording) -----------------------------------------------------

    def view_as(self, other):
        """This tensor viewed with ``other``'s shape (``view(other.shape)``)."""
        return self.view(*other.shape)

    def type_as(self, other):
        """This tensor converted to ``other``'s dtype."""
        return self.to(other._data.dtype)

    def _new(self, a, dtype, requires_grad):
        if dtype is not None:
            a = a.astype(dtype, copy=False)
        t = _wrap(a)
        if requires_grad:
            t.requires_grad = True
        return t

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        """Zeros of ``size`` in this tensor's dtype (or ``dtype``)."""
        _device.check(device, "new_zeros()")
        return self._new(np.zeros(_size_arg(size), self._data.dtype), dtype, requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        """Ones of ``size`` in this tensor's dtype (or ``dtype``)."""
        _device.check(device, "new_ones()")
        return self._new(np.ones(_size_arg(size), self._data.dtype), dtype, requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        """Uninitialised memory of ``size`` in this tensor's dtype (or ``dtype``)."""
        _device.check(device, "new_empty()")
        return self._new(np.empty(_size_arg(size), self._data.dtype), dtype, requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        """``fill_value`` in ``size`` in this tensor's dtype (or ``dtype``)."""
        _device.check(device, "new_full()")
        a = np.full(_size_arg((size,)), fill_value, self._data.dtype)
        return self._new(a, dtype, requires_grad)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """A copy of ``data`` in this tensor's dtype (or ``dtype``)."""
        _device.check(device, "new_tensor()")
        a = np.array(data._data if isinstance(data, Tensor) else data, copy=True)
        return self._new(a, dtype or self._data.dtype, requires_grad)

    def _check_inplace(self, *operands):
        """Whether an in-place op on self with ``operands`` must be recorded (see
        autograd/inplace.py); raises torch's error for a leaf that requires grad."""
        if self._vc is _INFERENCE or self._inference_view:
            self._check_inference()
        if not _grad_state.enabled:
            return False
        if self._rg or any(isinstance(y, Tensor) and y._rg for y in operands):
            return _inplace().recording(self, operands)
        return False

    def _check_inference(self):
        """Torch's errors for an in-place op outside ``inference_mode`` on an inference
        tensor, or on a view of a tensor requiring grad made inside it."""
        if _grad_state.inference:
            return
        if self._vc is _INFERENCE:
            raise RuntimeError(_INFERENCE_INPLACE)
        if self._inference_view:
            raise RuntimeError(_INFERENCE_VIEW_INPLACE)

    def _inplace(self, f, other, name, compute, reads_self=None):
        """``f(self, other)`` in place (a numpy ufunc) when nothing is recorded, else the
        recorded in-place op ``name``: ``compute(self)`` is its out-of-place result."""
        if self._check_inplace(other):
            return _inplace().modify(self, name, compute, reads_self)
        if FORWARD_AD[0]:  # (a tangent, if self or other has one, changes too)
            return _inplace().run(self, name, (other,), compute)
        value = other._data if isinstance(other, Tensor) else other
        f(self._data, value, out=self._data, casting="same_kind")
        self._bump()
        return self

    def add_(self, other, alpha=1):
        """In-place ``self += alpha * other``."""
        if alpha != 1:
            other = other * alpha
        return self._inplace(np.add, other, "add", lambda x: x + other)

    def sub_(self, other, alpha=1):
        """In-place ``self -= alpha * other``."""
        if alpha != 1:
            other = other * alpha
        return self._inplace(np.subtract, other, "sub", lambda x: x - other)

    def mul_(self, other):
        """In-place ``self *= other``."""
        return self._inplace(np.multiply, other, "mul", lambda x: x * other)

    def div_(self, other, *, rounding_mode=None):
        """In-place ``self /= other`` (``rounding_mode``: as ``div``'s)."""
        if rounding_mode is not None:
            return _inplace_variant("div")(self, other, rounding_mode=rounding_mode)
        return self._inplace(np.true_divide, other, "div", lambda x: x / other)

    def zero_(self):
        """Fill with zeros in place."""
        if self._check_inplace():
            return _inplace().modify(self, "zero", lambda x: _filled(x, 0.0))
        self._data[...] = 0
        self._bump()
        return self

    def fill_(self, value):
        """Fill with ``value`` in place."""
        if self._check_inplace(value):
            return _inplace().modify(self, "fill", lambda x: _filled(x, value))
        self._data[...] = value._data if isinstance(value, Tensor) else value
        self._bump()
        return self

    def copy_(self, src, non_blocking=False):
        """Copy ``src`` (broadcast, converted to this tensor's dtype) into self in place."""
        if self._check_inplace(src):
            return _inplace().modify(self, "copy", lambda x: _filled(x, src))
        value = src._data if isinstance(src, Tensor) else np.asarray(src)
        np.copyto(self._data, np.broadcast_to(value, self._data.shape), casting="unsafe")
        self._bump()
        return self

    def addcmul_(self, tensor1, tensor2, value=1):
        """In-place ``self += value * tensor1 * tensor2``."""
        if self._check_inplace(tensor1, tensor2):
            return _inplace().modify(self, "addcmul", lambda x: x + tensor1 * tensor2 * value)
        return self._inplace(np.add, _as_array(tensor1) * _as_array(tensor2) * value, "", None)

    def addcdiv_(self, tensor1, tensor2, value=1):
        """In-place ``self += value * tensor1 / tensor2``."""
        if self._check_inplace(tensor1, tensor2):
            return _inplace().modify(self, "addcdiv", lambda x: x + tensor1 / tensor2 * value)
        return self._inplace(np.add, _as_array(tensor1) / _as_array(tensor2) * value, "", None)

    def lerp_(self, end, weight):
        """In-place ``self += weight * (end - self)``."""
        if self._check_inplace(end, weight):
            return _inplace().modify(self, "lerp", lambda x: x + weight * (end - x))
        step = (_as_array(end) - self._data) * _as_array(weight)
        return self._inplace(np.add, step, "", None)

    def clamp_(self, min=None, max=None):  # noqa: A002  (torch's argument names)
        """Clamp in place to ``[min, max]``."""
        if min is None and max is None:
            raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
        if self._check_inplace(min, max):
            return _inplace().modify(self, "clamp", lambda x: x.clamp(min, max))
        np.clip(self._data, _as_array(min), _as_array(max), out=self._data)
        self._bump()
        return self

    clip_ = clamp_

    def __setitem__(self, index, value):
        if self._check_inplace(value):
            _inplace().setitem(self, index, value)
            return
        self._data[_index_arrays(index)] = value._data if isinstance(value, Tensor) else value
        self._bump()

    def _random_(self, generator, draw):
        """Fill in place with ``draw(generator, shape)`` (nautograd's generator by default,
        see manual_seed; a ``Generator``, or a numpy one)."""
        values = draw(_numpy_generator(generator), self._data.shape)
        if self._check_inplace():
            return _inplace().modify(self, "random", lambda x: _filled(x, _wrap(values)))
        self._data[...] = values
        self._bump()
        return self

    def uniform_(self, a=0.0, b=1.0, generator=None):
        """Fill in place with samples of U(a, b)."""
        return self._random_(generator, lambda g, shape: g.uniform(a, b, shape))

    def normal_(self, mean=0.0, std=1.0, generator=None):
        """Fill in place with samples of N(mean, std^2)."""
        return self._random_(generator, lambda g, shape: g.normal(mean, std, shape))

    def exponential_(self, lambd=1.0, generator=None):
        """Fill in place with samples of Exp(lambd)."""
        return self._random_(generator, lambda g, shape: g.exponential(1.0 / lambd, shape))

    def bernoulli_(self, p=0.5, generator=None):
        """Fill in place with 0/1 samples of Bernoulli(p)."""
        return self._random_(generator, lambda g, shape: g.random(shape) < _as_array(p))

    def __deepcopy__(self, memo):
        """A leaf copy: its own memory, the same ``requires_grad`` and ``.grad`` copied (torch
        supports deepcopy of graph leaves only)."""
        if self._h >= 0:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment.  If you were attempting to deepcopy a module, "
                "this may be because of a torch.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001"
            )
        t = memo.get(id(self))
        if t is not None:
            return t
        t = _wrap(self._data.copy(), self._rg)
        if self._is_param:
            t._is_param = True
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t

    def bitwise_and(self, other):
        """Elementwise ``&`` of integer or bool tensors (not differentiable)."""
        return _bitwise(np.bitwise_and, "bitwise_and", self, other)

    def bitwise_or(self, other):
        """Elementwise ``|`` of integer or bool tensors (not differentiable)."""
        return _bitwise(np.bitwise_or, "bitwise_or", self, other)

    def bitwise_xor(self, other):
        """Elementwise ``^`` of integer or bool tensors (not differentiable)."""
        return _bitwise(np.bitwise_xor, "bitwise_xor", self, other)

    def bitwise_not(self):
        """Elementwise ``~`` of an integer or bool tensor (not differentiable)."""
        return _bitwise(np.invert, "bitwise_not", self)

    __and__ = __rand__ = bitwise_and
    __or__ = __ror__ = bitwise_or
    __xor__ = __rxor__ = bitwise_xor
    __invert__ = bitwise_not

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_


def _bitwise(f, name, *operands):
    """``f`` (a numpy bitwise ufunc) on integer or bool tensors and Python ints/bools; torch's
    error for a floating operand."""
    arrays = [_as_array(x) for x in operands]  # (Python ints and bools stay weak)
    for a in arrays:
        if isinstance(a, (bool, int)):
            continue
        a = np.asarray(a)
        if a.dtype.kind not in "biu":
            kind = _C_NAMES.get(a.dtype.name, a.dtype.name).title()
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{kind}'")
    return _wrap(np.asarray(f(*arrays)))


_INPLACE = []


def _inplace():
    """autograd/inplace.py (imported on first use: it imports this module)."""
    if not _INPLACE:
        from .autograd import inplace

        _INPLACE.append(inplace)
    return _INPLACE[0]


def _index_arrays(index):
    """``index`` with its tensors as numpy arrays (numpy's indexing, as torch's)."""
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, tuple):
        return tuple(i._data if isinstance(i, Tensor) else i for i in index)
    if isinstance(index, list):
        return np.asarray([i.item() if isinstance(i, Tensor) else i for i in index])
    return index


def _take_place(t, result):
    """``t`` takes ``result``'s place in the graph (its handle: node and output), giving up
    its own; ``result`` keeps its value and no longer holds the handle."""
    if t._h >= 0:
        t._tape.drop_handle(t._h)
    t._tape, t._out, t._h = result._tape, result._out, result._h
    result._h = -1
    t._rg = True
    if FORWARD_AD[0]:  # (forward AD: the tangent comes with the new value)
        _take_tangent(t, result)


def _take_tangent(t, result):
    tangent = result.__dict__.get("_fw")
    if tangent is None:
        t.__dict__.pop("_fw", None)
    else:
        FORWARD_AD_ATTACH[0](t, tangent)


def _filled(x, value):
    """``value`` (a number or tensor, broadcast) in ``x``'s shape, recorded as replacing
    ``x``: ``x``'s history gets a zero gradient, ``value`` a tensor's the sum of it."""
    cleared = x.masked_fill(_wrap(np.ones(x.shape, bool_)), 0.0)
    if isinstance(value, Tensor) and value._rg:
        return cleared + value
    if isinstance(value, Tensor):
        value = value._data
    return cleared + _wrap(np.asarray(value))


def _as_array(x):
    """The operand of an in-place update: a tensor's array, or the number or array itself."""
    return x._data if isinstance(x, Tensor) else x


def _size_arg(size):
    """A shape given as ``f(2, 3)`` or ``f((2, 3))``."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


builtins_float = __builtins__["float"] if isinstance(__builtins__, dict) else __builtins__.float


def _legacy_data(args):
    """What ``Tensor(*args)`` holds: zeros of the sizes given, or the data given."""
    if not args:
        return np.zeros(0, DEFAULT_FLOAT[0])
    first = args[0]
    if isinstance(first, Size) and len(args) == 1:
        args = tuple(first)
    elif len(args) == 1 and (
        isinstance(first, bool) or not isinstance(first, (numbers.Integral, np.integer))
    ):
        if isinstance(first, (bool, numbers.Number)):
            raise TypeError(f"new(): data must be a sequence (got {type(first).__name__})")
        return first
    for s in args:
        if isinstance(s, bool) or not isinstance(s, (numbers.Integral, np.integer)):
            raise TypeError(
                "new(): argument 'size' must be a tuple of ints, but found element of type "
                f"{type(s).__name__}"
            )
    if any(s < 0 for s in args):
        raise RuntimeError(
            f"Trying to create tensor with negative dimension {min(args)}: {list(args)}"
        )
    return np.zeros(tuple(int(s) for s in args), DEFAULT_FLOAT[0])


def _wrap(a, requires_grad=False):
    """A leaf tensor around the array ``a`` (no copy)."""
    t = _new(Tensor)
    t._data = a
    t._rg = requires_grad
    t._tape = None
    t._h = -1
    t._out = 0
    t._vc = None
    t._imp = None
    return t


_new = object.__new__


def _expose(t):
    """Note that numpy code outside nautograd can write ``t``'s memory (``numpy()``,
    ``from_numpy``, ``Tensor(array)``, ``.data =``, gradcheck's perturbations): a second
    item on its version counter, shared with its views and detached aliases. The deferred
    forward then copies ``t`` at each use instead of once a batch (``_import``): such a write
    changes no version, and an eager op would have read the memory when it was called."""
    vc = t._vc
    if vc is None:
        t._vc = [0, 1]
    elif len(vc) == 1:
        vc.append(1)


# ---------------------------------------------------------------------------------------------
# dtype promotion (torch's rules: dimensioned tensors, then zero-dim tensors, then numbers)

_KIND = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _category_result(dtypes):
    """torch's promotion within one priority class (dimensioned or zero-dim tensors): only
    the dtypes of the highest category (bool < integer < floating) count, so float32 with
    int64 stays float32 where numpy's result_type gives float64."""
    kinds = [_KIND.get(d.kind, 4) for d in dtypes]  # (4: strings, objects: numpy decides)
    top = max(kinds)
    return np.result_type(*[d for d, k in zip(dtypes, kinds, strict=True) if k == top])


def _promote(arrays, numbers_):
    """Result dtype of an op over tensors/arrays ``arrays`` and Python ``numbers_``."""
    dim = [a.dtype for a in arrays if a.ndim]
    zero = [a.dtype for a in arrays if not a.ndim]
    result = _category_result(dim) if dim else None
    if zero:
        z = _category_result(zero)
        if result is None or _KIND[z.kind] > _KIND[result.kind]:
            result = z
    if numbers_:
        cat = max(
            2
            if isinstance(n, numbers.Real) and not isinstance(n, numbers.Integral)
            else (0 if isinstance(n, bool) else 1)
            for n in numbers_
        )
        if result is None or cat > _KIND[result.kind]:
            result = (bool_, int64, DEFAULT_FLOAT[0])[cat]
    return result


def _operand(x):
    if isinstance(x, Tensor):
        return x._data
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (list, tuple)):
        return np.asarray(x)
    raise TypeError(f"expected a Tensor, array or number, got {type(x).__name__}")


_SCALARS = {}  # (number, dtype) -> read-only 0-dim array: Python numbers as operands


def _scalar(x, dt):
    key = (x, type(x), dt)
    a = _SCALARS.get(key)
    if a is None:
        if len(_SCALARS) > 4096:
            _SCALARS.clear()
        a = np.asarray(x, dtype=dt)
        a.flags.writeable = False
        _SCALARS[key] = a
    return a


_ENGINE_BACKWARD = []


def _engine_backward():
    from .autograd.engine import backward

    _ENGINE_BACKWARD.append(backward)
    return backward


def apply(op, *args, **kwargs):
    """Run ``op`` on tensors / arrays / numbers and record it for backward when needed."""
    if FORWARD_AD[0]:  # (and no deferred forward: its batches carry no tangents)
        t = FORWARD_AD_APPLY[0](op, args, kwargs)
        if t is not NOT_HANDLED:
            return t
    elif op.lazy is not None and DEFER[0] and (not args or _deferrable(args)):
        t = _lazy(op, args, kwargs)
        if t is not None:
            return t
    if len(args) == op.nin:
        # the common cases, two (or one) tensors of one floating dtype, or such a tensor and
        # a Python number: no operand conversion, no promotion (~1 us less per op than the
        # general path below; a number takes the tensor's dtype there too)
        x = args[0]
        if type(x) is Tensor:
            a = x._data
            dt = a.dtype
            if dt is float64 or dt is float32:
                if op.nin == 1:
                    return _run(op, args, (a,), dt, x._rg, kwargs)
                if op.nin == 2:
                    y = args[1]
                    ty = type(y)
                    if ty is Tensor and y._data.dtype is dt:
                        return _run(op, args, (a, y._data), dt, x._rg or y._rg, kwargs)
                    if ty is float or ty is int:
                        return _run(op, args, (a, _scalar(y, dt)), dt, x._rg, kwargs)
        elif op.nin == 2 and (type(x) is float or type(x) is int) and type(args[1]) is Tensor:
            y = args[1]
            b = y._data
            dt = b.dtype
            if dt is float64 or dt is float32:
                return _run(op, args, (_scalar(x, dt), b), dt, y._rg, kwargs)
    given = args
    if op.nin == -1:
        if len(args) == 1 and type(args[0]) in (list, tuple):
            # a sequence of tensors of one floating dtype (stack, cat): the general loop
            # below cost ~1.5 us more for four scalars
            seq = args[0]
            arrays = []
            rg = False
            dt = None
            for x in seq:
                if type(x) is not Tensor:
                    break
                a = x._data
                if dt is None:
                    dt = a.dtype
                    if dt is not float64 and dt is not float32:
                        break
                elif a.dtype is not dt:
                    break
                arrays.append(a)
                if x._rg:
                    rg = True
            else:
                if arrays:
                    return _run(op, tuple(seq), arrays, dt, rg, kwargs)
        if len(args) != 1 or isinstance(args[0], Tensor):
            raise TypeError(f"{op.name}(): expected a sequence of Tensors")
        args = tuple(args[0])
        if not args:
            raise RuntimeError(f"{op.name}(): expected a non-empty list of Tensors")
    elif len(args) != op.nin:
        raise TypeError(f"{op.name}() takes {op.nin} tensor argument(s), got {len(args)}")
    # one pass: operand arrays, whether any input requires grad, whether dtypes agree
    arrays = []
    rg = False
    nums = None
    dt = None
    mixed = False
    for x in args:
        if isinstance(x, Tensor):
            a = x._data
            if x._rg:
                rg = True
        elif isinstance(x, numbers.Number):
            nums = [x] if nums is None else nums + [x]
            arrays.append(None)
            continue
        else:
            if type(x) is BATCHED[0]:  # (a vmap's batched value: the op's batching rule)
                return BATCHED[1](op, given, kwargs)
            a = _operand(x)
        if dt is None:
            dt = a.dtype
        elif a.dtype != dt:
            mixed = True
        arrays.append(a)
    if BATCHED_ON[0] and kwargs and _has_batched((), kwargs):  # (an index, a mask)
        return BATCHED[1](op, given, kwargs)
    if mixed and op.same_dtype:
        _mixed_operands(op, arrays)
    if mixed or dt is None or (nums is not None and dt.kind != "f"):
        dt = _promote([a for a in arrays if a is not None], nums)
    if dt.kind != "f":
        if not op.int_ok and not op.int_result:
            dt = DEFAULT_FLOAT[0]
    elif dt is not float64 and dt is not float32 and dt not in _GRAD_DTYPES:
        # float16 computes in float32 and its result is cast back (float16 cannot require
        # grad, so nothing is recorded)
        half = dt
        dt = float32 if dt.itemsize < 8 else float64
        result = _promoted(op, args, arrays, dt, rg, kwargs)
        if isinstance(result, tuple):
            return tuple([_narrowed(r, half) for r in result])
        return _narrowed(result, half)
    return _promoted(op, args, arrays, dt, rg, kwargs)


# torch's C type names in its dtype messages
_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
            "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool"}  # fmt: skip


def _mixed_operands(op, arrays):
    """Products do not promote (torch): operands of two dtypes raise, naming them."""
    first = arrays[0].dtype
    other = next(x.dtype for x in arrays if x is not None and x.dtype != first)
    raise RuntimeError(
        f"{op.name.lstrip('_').split('_')[0]}(): expected m1 and m2 to have the same dtype, "
        f"but got: {_C_NAMES.get(first.name, first.name)} != {_C_NAMES.get(other.name, other.name)}"
    )


def _narrowed(t, dtype):
    """A floating result ``t`` of an op computed wider than its inputs' ``dtype``, in it."""
    if not isinstance(t, Tensor) or t._data.dtype.kind != "f" or t._data.dtype == dtype:
        return t
    return _wrap(t._data.astype(dtype))


def _promoted(op, args, arrays, dt, rg, kwargs):
    """``_run`` on operands converted to ``dt`` (a recorded cast for an operand that requires
    grad, a plain conversion for the others)."""
    for k, a in enumerate(arrays):
        if a is None:
            arrays[k] = _scalar(args[k], dt)
        elif a.dtype != dt:
            x = args[k]
            if rg and isinstance(x, Tensor) and x._rg and op.differentiable and is_grad_enabled():
                # a recorded cast: every other kernel reads and writes one dtype's arena
                if not isinstance(args, list):
                    args = list(args)
                args[k] = x = apply(_TO_COPY, x, dtype=dt)
                arrays[k] = x._data
            else:
                arrays[k] = a.astype(dt)
    return _run(op, args, arrays, dt, rg, kwargs)


def _deferrable(args):
    """Whether ``_lazy`` may take an op on ``args``: their first two are deferrable
    (``_may_defer``) and one of them requires grad (or is a deferred result), or there are
    more inputs (``_lazy`` decides). Tensors that need no gradient run eagerly anyway: the
    HMC program's sampler updates spent ~3 us an op in ``_lazy`` to learn that."""
    x = args[0]
    tx = type(x)
    if tx is Tensor:
        a = x._data
        if a.dtype is not float64 or a.size > DEFER_MAX:
            return False
        rg = x._rg
    else:
        rg = tx is _Lazy or tx is list or tx is tuple
    if len(args) == 1:
        return rg
    y = args[1]
    ty = type(y)
    if ty is Tensor:
        a = y._data
        if a.dtype is not float64 or a.size > DEFER_MAX:
            return False
        rg = rg or y._rg
    elif ty is _Lazy:
        rg = True
    return rg or len(args) > 2


def _may_defer(x):
    """False for an input that makes the deferred forward's _lazy and _lazy1 return None: a
    plain tensor that is not float64 or has more than DEFER_MAX elements (_importable's test,
    without its thread check). Asked before them: ~0.5 us less an op of a float32 MLP."""
    if type(x) is not Tensor:
        return True
    a = x._data
    return a.dtype is float64 and a.size <= DEFER_MAX


def _run(op, args, arrays, dt, rg, kwargs):
    """Forward ``op`` on prepared arrays; record a node when grad mode is on and rg."""
    result, saved, ip, fp = op.forward(*arrays, **kwargs)
    multi = isinstance(result, tuple)
    if multi:
        result = tuple([_canonical(r) for r in result])
    elif type(result) is np.ndarray:
        d = result.dtype
        if d is not float64 and d is not float32 and (d == float64 or d == float32):
            result = _canonical(result)
    if rg and op.int_ok and not multi and result.dtype.kind != "f":
        rg = False  # an integer or bool result (a cast, a sum of bools) has no gradient
    if not (rg and _grad_state.enabled and op.differentiable):
        if multi:
            outs = tuple([_wrap(np.asarray(r)) for r in result])
            _share_versions(outs, args, arrays)
            if _grad_state.inference:
                for t in outs:
                    _made_in_inference_mode(t, args)
            return outs
        t = _wrap(result if type(result) is np.ndarray else np.asarray(result))
        if t._data.base is not None or t._data is arrays[0]:
            _share_version(t, args)
        if _grad_state.inference:
            _made_in_inference_mode(t, args)
        return t
    tape = current_tape()
    # under the tape's lock: another thread may be running a backward of its graphs, or
    # recording on it (an uncontended RLock costs ~0.1 us)
    lock = tape.lock
    lock.acquire()
    try:
        return _record(tape, op, args, arrays, result, saved, ip, fp, kwargs, multi)
    except _OtherTape as e:
        other = e.tape  # inputs in another thread's graph: the node goes there
    finally:
        lock.release()
    with other.lock:
        return _record(other, op, args, arrays, result, saved, ip, fp, kwargs, multi)


def _record(tape, op, args, arrays, result, saved, ip, fp, kwargs, multi):
    """Record the node of ``op`` (its forward gave ``result``, ``saved``, attributes ``ip``
    and ``fp``) on ``tape``, whose lock the caller holds; its output tensor(s)."""
    k = len(args)
    # tape.reserve(k + 1), called only when it has work (a reset, growth, a flush every 256
    # nodes: reserve()'s own conditions, which this must follow): the call alone cost ~0.3 us
    # an op. (_reserve below is the same test as a function, for callers off this path)
    if (
        tape.live == tape.acc_live
        or tape.batch is not None
        or tape.n + k + 1 >= len(tape.op)
        or tape.n - tape.nflushed >= 256
    ):
        tape.reserve(k + 1)
    if saved and _INFERENCE_MADE[0]:  # (after reserve: an open deferred batch has run)
        _check_saved_inference(args, saved)
    _edges_into(tape, args, op.name, tape._en, tape._ei)
    # what a create_graph formula needs besides the saved values (autograd/higher_order.py):
    # the input shapes (one shape for one input: no tuple to build), kwargs if any, and the
    # output shapes of a multi-output op (a single output's shape is its gradient's). Kept as
    # cheap as that: ~0.3 us an op (measured)
    if k == 1:
        shapes = arrays[0].shape
    elif k == 2:
        shapes = (arrays[0].shape, arrays[1].shape)
    else:
        shapes = tuple([a.shape for a in arrays])
    if multi:
        outs = [r if type(r) is np.ndarray else np.asarray(r) for r in result]
        f32 = outs[0].dtype == float32  # a node computes in (and buffers) its result's dtype
        node = tape.record_node(op.opcode, f32, k, [r.size for r in outs], saved, ip, fp, shapes)
        tape.out_shapes[node] = tuple([r.shape for r in outs])
        if kwargs:
            tape.kwargs[node] = kwargs
        # the output tensors and their handles, inlined (_wrap, tape.new_handle): unbind of
        # four scalars, the scalar DAG's commonest multi-output op, spent ~1 us in the calls
        wrapped = []
        h2node, free_h = tape.h2node, tape.free_h
        for j, r in enumerate(outs):
            t = _new(Tensor)
            t._data = r
            t._rg = True
            t._tape = tape
            t._out = j
            t._vc = None
            t._imp = None
            if free_h:
                t._h = h = free_h.pop()
                h2node[h] = node
            else:
                t._h = len(h2node)
                h2node.append(node)
            wrapped.append(t)
        _share_versions(wrapped, args, arrays)
        x = args[0]
        if wrapped[0]._vc is not None and type(x) is Tensor and wrapped[0]._vc is x._vc:
            for t in wrapped:
                if t._vc is x._vc:
                    _register_view(t, x)
        if saved:
            _note_versions(tape, node, args, saved, wrapped)
            if SAVED_HOOKS_OPEN[0]:
                _pack_saved(tape, node, args, saved, wrapped)
        return tuple(wrapped)
    if type(result) is not np.ndarray:
        result = np.asarray(result)
    node = tape.record_node(
        op.opcode, result.dtype == float32, k, [result.size], saved, ip, fp, shapes
    )
    if kwargs:
        tape.kwargs[node] = kwargs
    t = _new(Tensor)
    t._data = result
    t._rg = True
    t._tape = tape
    t._out = 0
    t._vc = None
    t._imp = None
    # tape.new_handle(node), inlined: this runs once per recorded op
    if tape.free_h:
        t._h = h = tape.free_h.pop()
        tape.h2node[h] = node
    else:
        t._h = len(tape.h2node)
        tape.h2node.append(node)
    if result.base is not None or result is arrays[0]:
        x = _share_version(t, args)
        if x is not None:
            _register_view(t, x)
    if saved:
        _note_versions(tape, node, args, saved, (t,))
        if SAVED_HOOKS_OPEN[0]:
            _pack_saved(tape, node, args, saved, (t,))
    return t


def _pack_saved(tape, node, args, saved, outs):
    """Under ``saved_tensors_hooks``: give each tensor the node saved (an input's or an
    output's value; not numbers, nor arrays the forward derived) to the pack hook, and keep
    what it returns in the node's hooks entry ("packed") instead of the value. The node
    becomes a Python node: backward unpacks before it runs (autograd/engine.py)."""
    from .autograd.graph import call_pack, current_saved_hooks

    hooks = current_saved_hooks()
    if hooks is None:
        return
    pack, unpack = hooks
    tape.flush()
    s0 = int(tape.saved_ptr[node])
    packed = []
    for j, a in enumerate(saved):
        t = next((x for x in args if type(x) is Tensor and x._data is a), None)
        if t is None:
            t = next((x for x in outs if x._data is a), None)
            if t is None:
                continue
            t = t.detach()  # (an output is given without its grad_fn, as torch's)
        value = call_pack(pack, t)
        packed.append((j, s0 + j, value, unpack, a.shape, a.dtype))
    if not packed:
        return
    tape.hooks.setdefault(node, {})["packed"] = packed
    tape.flags[node] |= PY
    # the tape lets go of what it kept by address (the unpacked tensors take its place) and
    # the version entries keep only shapes, for their error messages
    if tape.obj[node] is not None:
        kept = list(tape.obj[node])
        by_address = [j for j in range(len(saved)) if tape.saved_off[s0 + j] < 0]
        for j, *_ in packed:
            if j in by_address:
                kept[by_address.index(j)] = None
                tape.saved_addr[s0 + j] = 0
        tape.obj[node] = tuple(kept)
    entries = tape.versions.get(node)
    if entries:
        gone = {id(saved[j]) for j, *_ in packed}
        tape.versions[node] = [
            (vc, v, np.broadcast_to(np.zeros((), a.dtype), a.shape) if id(a) in gone else a)
            for vc, v, a in entries
        ]


# saved_tensors_hooks contexts open in all threads (autograd/graph.py): recorded ops pack
# their saved tensors only while one is
SAVED_HOOKS_OPEN = [0]
_INFERENCE_MADE = [False]  # (an inference tensor was ever made: recorded ops then check)


def _check_saved_inference(args, saved):
    """Torch's error for an op that would save an inference tensor, raised before anything
    is recorded."""
    for x in args:
        if type(x) is Tensor and x._vc is _INFERENCE:
            a = x._data
            for s in saved:
                if s is a or (s.base is not None and s.base is _owner(a)):
                    raise RuntimeError(INFERENCE_SAVED)


def _made_in_inference_mode(t, args):
    """Mark ``t``, made under ``inference_mode``: an inference tensor, unless it is a view of
    a normal tensor (it keeps that tensor's counter; if that tensor requires grad, an in-place
    op on the view outside the mode raises)."""
    if t._vc is None:
        t._vc = _INFERENCE
        _INFERENCE_MADE[0] = True
    elif t._vc is not _INFERENCE and any(type(x) is Tensor and x._rg for x in args):
        t._inference_view = True


def _canonical(a):
    """``a`` with numpy's own float64/float32 dtype object. Arrays made by cached compiled
    functions carry an equal dtype object of their own (unpickled from Numba's cache), and
    the dispatch's fast paths test ``dtype is float64``: every op downstream of such a result
    took the general path (~2 us more) and never deferred."""
    if type(a) is not np.ndarray:
        return a
    d = a.dtype
    if d is float64 or d is float32:
        return a
    if d == float64:
        return a.view(float64)
    if d == float32:
        return a.view(float32)
    return a


def _reserve(tape, k):
    """``tape.reserve(k)`` only when it has work (a reset, growth, the flush every 256
    nodes: reserve()'s own conditions; _run tests them inline, keep the two in step): the
    call alone costs ~0.3 us, its checks ~0.7 us."""
    if (
        tape.live == tape.acc_live
        or tape.batch is not None
        or tape.n + k >= len(tape.op)
        or tape.n - tape.nflushed >= 256
    ):
        tape.reserve(k)


def _owner(a):
    """The array (or buffer) that owns ``a``'s memory: numpy collapses a view of a view to
    the first base that owns its data."""
    base = a.base
    return a if base is None else base


def _viewed(owner, args):
    """The tensor in ``args`` whose memory ``owner`` owns, or None. Compared with each
    tensor's own array, not the op's operand: an operand cast to another dtype is a copy,
    and a view of it is not the tensor's memory."""
    for x in args:
        if isinstance(x, Tensor) and _owner(x._data) is owner:
            return x
    return None


def _input_counter(owner, args):
    """The version counter of the tensor in ``args`` whose memory ``owner`` owns (created on
    first use), or None."""
    x = _viewed(owner, args)
    if x is None:
        return None
    vc = x._vc
    if vc is None:
        x._vc = vc = [0]
    return vc


def _share_version(t, args):
    """Give the new tensor ``t`` the version counter of the input whose memory it views (or
    is), as torch's views share their base's: an in-place change through either must reach
    the saved-value check of every node that saved the other; returns that input (None if
    none). Callers test the cheap condition first (``t``'s array has a base, or is the
    first operand itself)."""
    x = _viewed(_owner(t._data), args)
    if x is not None:
        vc = x._vc
        if vc is None:
            x._vc = vc = [0]
        t._vc = vc
    return x


def _register_view(view, x):
    """Note that the recorded ``view``'s memory is ``x``'s (or inside it): it follows
    in-place changes of its base, the first tensor of its chain of views
    (autograd/inplace.py). A leaf base keeps no list: in-place changes of a leaf that
    requires grad are recorded nowhere (torch raises in grad mode)."""
    root = x._view_base
    if root is None:
        root = x
    view._view_base = root
    if type(root) is _Lazy or root._h >= 0:
        views = root._views
        if views is None:
            root._views = views = []
        elif len(views) >= 64 and not len(views) & 63:  # drop the dead now and then
            views[:] = [r for r in views if r() is not None]
        views.append(_weakref(view))


def _share_versions(outs, args, arrays):
    """``_share_version`` for the outputs of a multi-output op (unbind's views of one input:
    the input is looked up once per owner)."""
    owner = vc = None
    first = arrays[0]
    for t in outs:
        a = t._data
        base = a.base  # (_owner, inlined: unbind of four views called it per view)
        if base is None:
            if a is not first:
                continue
            base = a
        if vc is None or base is not owner:
            owner = base
            vc = _input_counter(owner, args)
        if vc is not None:
            t._vc = vc


class _OtherTape(RuntimeError):
    """An op's input is in a graph of another tape than the one it records on: ``_run``
    records the op there instead (a thread extends another thread's graph), and raises this
    if the inputs' graphs are on two tapes."""

    def __init__(self, tape, name):
        super().__init__(
            f"{name}: the inputs were recorded on two threads' tapes (one on another thread's "
            "tape); an op cannot join the graphs of two threads"
        )
        self.tape = tape


def _edges_into(tape, args, name, enodes, enrs):
    """Append the next edges of a node recorded on ``tape`` with inputs ``args`` to the lists
    ``enodes`` (node ids) and ``enrs`` (input numbers): node -1 for an input that does not
    require grad (or is not a tensor); a leaf gets its AccumulateGrad node. ``name``: the
    op's name for the error. (Appending to the tape's pending lists directly saves two
    lists an op; on an error the lists are restored.)"""
    start = len(enodes)
    for x in args:
        if not isinstance(x, Tensor) or not x._rg:
            enodes.append(-1)
            enrs.append(0)
        elif x._h >= 0:
            if x._tape is not tape:
                del enodes[start:], enrs[start:]
                raise _OtherTape(x._tape, name)
            enodes.append(tape.h2node[x._h])
            enrs.append(x._out)
        elif x._acc_tape is tape:  # the leaf's AccumulateGrad node (_accumulator's hit)
            enodes.append(tape.h2node[x._acc_h])
            enrs.append(0)
        else:
            enodes.append(_accumulator(tape, x))
            enrs.append(0)


def _edges(tape, args, name):
    """(node ids, input numbers) of the next edges of a node with inputs ``args``: see
    ``_edges_into``."""
    enodes = []
    enrs = []
    _edges_into(tape, args, name, enodes, enrs)
    return enodes, enrs


def _note_versions(tape, node, args, keep, outs):
    """Remember the version of each input and output tensor whose memory the node saved
    (``keep``: the saved arrays, by address or copied into the tape's value arena).

    backward() compares them (PyTorch's SavedVariable check) so that a saved tensor changed in
    place under no_grad raises torch's error. (A value of at most SMALL elements is a copy of
    the forward-time value, but it is checked all the same: torch raises there, and so does
    the deferred forward, which watches every saved input.) ``outs``: the
    node's new output tensors (tanh, exp, softmax, ... save their result). An entry is
    (version counter, version, array): the error message takes the shape and dtype from the
    array, which ``keep`` holds anyway (building them per op cost ~0.2 us).
    """
    # (plain loops over the few kept arrays: the any() over a generator this replaces cost
    # ~1.5 us an op, mv or tanh)
    entries = None
    for a in keep:
        for x in args:
            if isinstance(x, Tensor) and x._data is a:
                vc = x._vc
                if vc is None:
                    x._vc = vc = [0]
                break
        else:
            for x in outs:
                if x._data is a:
                    vc = x._vc  # a new tensor, or a view sharing its input's counter
                    if vc is None:
                        x._vc = vc = [0]
                    break
            else:
                # a view of an input's memory (a reshaped operand) is that input's; anything
                # else is a copy (made contiguous, or cast) that nobody can change
                vc = None if a.base is None else _input_counter(a.base, args)
                if vc is None:
                    continue
        if entries is None:
            entries = [(vc, vc[0], a)]
        else:
            entries.append((vc, vc[0], a))
    if entries is not None:
        if not tape.versions:
            tape.versions_since = IN_PLACE_CHANGES[0]
        tape.versions[node] = entries


def _accumulator(tape, leaf):
    """The AccumulateGrad node of ``leaf`` on ``tape`` (created on first use)."""
    node = _accumulator_on(tape, leaf)
    if node < 0:
        node = tape.record_accumulate(leaf, leaf._data.dtype == float32, leaf._data.size)
        _keep_accumulator(tape, leaf, node)
    return node


# Ownership: a graph lives on the tape of the thread that recorded it. A leaf has one
# AccumulateGrad node on each tape that used it (the first in _acc_tape/_acc_h, the others in
# _acc_more), so threads sharing parameters never take each other's nodes away; the nodes of
# all tapes add into the one .grad under engine._ACCUMULATE_LOCK.


def _accumulator_on(tape, leaf):
    """The node of ``leaf``'s AccumulateGrad on ``tape``, or -1."""
    if leaf._acc_tape is tape:
        return tape.h2node[leaf._acc_h]
    more = leaf._acc_more
    if more is not None:
        h = more.get(tape)
        if h is not None:
            return tape.h2node[h]
    return -1


def _keep_accumulator(tape, leaf, node):
    """Record ``node`` on ``tape`` as ``leaf``'s AccumulateGrad there (a handle keeps it)."""
    h = tape.new_acc_handle(node)
    if leaf._acc_tape is None:
        leaf._acc_tape = tape
        leaf._acc_h = h
    else:
        if leaf._acc_more is None:
            leaf._acc_more = {}
        leaf._acc_more[tape] = h


def _drop_accumulators(leaf):
    """Forget ``leaf``'s AccumulateGrad nodes on every tape (their graphs keep the nodes)."""
    leaf._acc_tape.drop_acc_handle(leaf._acc_h)
    leaf._acc_tape, leaf._acc_h = None, -1
    more = leaf._acc_more
    if more is not None:
        leaf._acc_more = None
        for tape, h in more.items():
            tape.drop_acc_handle(h)


# ---------------------------------------------------------------------------------------------
# the deferred forward (graph/deferred.py, docs/architecture.md "The deferred forward")

# forward-mode AD (autograd/forward_ad.py): True while a dual level is open, when ``apply``
# hands each op to FORWARD_AD_APPLY[0] first (which returns NOT_HANDLED where no input has a
# tangent); one list read an op otherwise
FORWARD_AD = [False]
FORWARD_AD_APPLY = [None]
FORWARD_AD_ATTACH = [None]
# a composite declared jvp="linear" (embedding) whose input has a tangent: forward_ad gives
# the result the composite applied to the tangents
FORWARD_AD_COMPOSITE = [None]
NOT_HANDLED = object()

# vmap's batched evaluation (_batching.py): BATCHED = [the BatchedTensor class, the handler of
# an op ``apply`` is given one of them, the handler of an op frontend (``op.api``) given one,
# the exception that makes vmap run per sample instead];
# BATCHED_ON[0] counts the batched vmaps running, which frontends test (one list read an op
# otherwise)
BATCHED = [None, None, None, None]
BATCHED_ON = [0]

# on unless NAUTOGRAD_DEFER=0 (a list: tests and benchmarks switch it)
DEFER = [os.environ.get("NAUTOGRAD_DEFER", "1") != "0"]
DEFER_MAX = 4096  # elements of an input or a result the deferred forward takes
BATCH_NODES = 1 << 16  # a batch runs when it holds this many nodes
_DATA = Tensor.__dict__["_data"]  # the slot (a _Lazy's _data is a property over it)
_H = Tensor.__dict__["_h"]  # (and its _h)
_SPECS = {}  # (opcode, shapes[, kwargs]) -> the op's lazy spec, or False: not deferred
_NO_KWARGS = {}  # (never changed)
_weakref = weakref.ref
# batch -> {first output's value id: its input's version}, for each multi-output run (_runs)
_RUN_VERSIONS = weakref.WeakKeyDictionary()


class _Lazy(Tensor):
    """A tensor whose value a deferred op computes when the tape's batch runs. Reading its
    ``_data`` (or anything else about its value) runs the batch and turns it into a plain
    Tensor; the shape and dtype are known without that.

    It holds no handle (see graph/tape.py) and not its node: the batch, which every
    deferred result of it refers to, keeps the batch's nodes for the tape (Tape.live,
    compact) while it lives, and knows each value's node once it has run (``vnode``).
    Reading ``_h`` gives it a value and a handle. Each handle cost its result ~60 ns to take
    and its ``__del__`` ~50 ns to give back, ~2 ms of the scalar DAG's ~27 ms step
    (measured); its node number, an int object kept
    alive per result, ~0.25 ms of their teardown."""

    __slots__ = ()

    # Tensor.__del__ would read _h (and run the batch): a C function that takes no argument
    # instead, no Python frame (a dying result: ~25 ns less than an empty Python __del__)
    __del__ = int

    @property
    def _h(self):
        _force(self)
        return _H.__get__(self)

    @_h.setter
    def _h(self, value):
        _force(self)
        _H.__set__(self, value)

    @property
    def _data(self):
        return _force(self)

    @_data.setter
    def _data(self, value):
        _force(self)
        _DATA.__set__(self, value)

    @property
    def shape(self):
        return Size(self._shape)

    def size(self, dim=None):
        """The shape, or the size of dimension ``dim``."""
        if dim is None:
            return Size(self._shape)
        from .kernels._shapes import wrap_dim

        return self._shape[wrap_dim("size", dim, len(self._shape))]

    @property
    def dtype(self):
        return float64

    @property
    def ndim(self):
        return len(self._shape)

    def dim(self):
        return len(self._shape)

    def numel(self):
        return math.prod(self._shape)

    nelement = numel


def _force(t):
    """Run ``t``'s batch if it has not run; give ``t`` its value and make it a plain Tensor.

    The value is a copy out of the batch's store (a view would keep the whole store alive),
    except for the outputs of an op that gives runs of its input (unbind): views of that
    input's value, as torch's are."""
    with t._b.tape.lock:  # (another thread may be running the batch or moving its nodes)
        return _force_locked(t)


def _force_locked(t):
    b = t._b
    if b is None:  # (forced by another thread meanwhile)
        return t._data
    if b.S is None:
        b.tape.run_batch()
    src = t._src
    n = math.prod(t._shape)
    if src is not None:
        base = src._data
        if base.flags.c_contiguous:
            j = t._out
            a = base.reshape(-1)[j * n : (j + 1) * n].reshape(t._shape)
        else:
            o = int(b.voff[t._v])
            a = b.S[o : o + n].reshape(t._shape).copy()
    else:
        o = int(b.voff[t._v])
        a = b.S[o : o + n].reshape(t._shape).copy()
    vc = t._vc
    if vc is None:
        t._vc = vc = [0]
    if src is not None:  # a run of src: a view of its memory from now on
        versions = _RUN_VERSIONS.get(b)
        if versions is not None and versions.get(t._v - t._out, vc[0]) != vc[0]:
            raise RuntimeError(
                f"Output {t._out} of Unbind is a view and its base or another view "
                "of its base has been modified inplace. This view is the output of a function "
                "that returns multiple views. Such functions do not allow the output views to "
                "be modified inplace. You should replace the inplace operation by an "
                "out-of-place one."
            )
        _register_view(t, src)
    tape = b.tape
    tape.note_value_versions(b, t._v, vc, a)
    _DATA.__set__(t, a)
    t._b = t._src = t._imp = None
    t.__class__ = Tensor
    t._h = tape.new_handle(b.n0 + int(b.vnode[t._v]) - b.base)  # (compact moves n0)
    return a


def _lazy(op, args, kwargs):
    """Record ``op`` on the tape's batch without running it (graph/deferred.py) and return
    its result(s) as _Lazy tensors; None when the op must run eagerly: grad mode off, no
    input that requires grad, an input that is not a float64 tensor (or a Python number) of
    at most DEFER_MAX elements, shapes or attributes the op's spec does not take (the eager
    path then raises the op's errors), or a backward running on this thread."""
    if not _grad_state.enabled:
        return None
    try:
        tape = _tape_local.tape
    except AttributeError:
        tape = current_tape()
    if tape.running:  # (first: a create_graph walk's formulas call this for every op)
        return None
    if tape.batch is None and _batches_too_small(tape):
        return None
    if len(args) == 1:
        t = _lazy1(op, args[0], kwargs)
        if t is not None:
            return t
    elif len(args) == 2 and not kwargs:
        t = _LAZY2[op.opcode](args[0], args[1])
        if t is not None:
            return t
    if op.nin == -1:
        if len(args) != 1 or (type(args[0]) is not list and type(args[0]) is not tuple):
            return None
        seq = args[0]
        if not seq:
            return None
    elif len(args) != op.nin:
        return None
    else:
        seq = args
    lock = tape.lock  # (see _run: a backward on another thread may be reading the tape)
    lock.acquire()
    try:
        return _lazy_locked(op, tape, seq, kwargs)
    finally:
        lock.release()


def _lazy_locked(op, tape, seq, kwargs):
    """``_lazy`` for the inputs ``seq``, on ``tape``, whose lock the caller holds."""
    if tape.running:
        return None
    shapes = []
    rg = False
    for x in seq:
        tx = type(x)
        if tx is _Lazy:
            if x._tape is not tape:
                return None  # another thread's (the eager path raises)
            shapes.append(x._shape)
            rg = True
        elif tx is Tensor:
            if not _importable(tape, x):
                return None
            if x._rg:
                rg = True
            shapes.append(x._data.shape)
        elif tx is float or tx is int:
            shapes.append(())
        else:
            return None
    if not rg:
        return None
    shapes = tuple(shapes)
    key = (op.opcode, shapes, tuple(kwargs.items())) if kwargs else (op.opcode, shapes)
    # (before the head is looked up: a restart may forget the heads with the attribute pools)
    if tape.live == tape.acc_live and tape.restart_due():  # (it runs the batch first)
        tape.reserve(0)
    try:
        hit = tape.fast.get(key)
    except TypeError:  # an unhashable attribute
        return None
    if hit is None:
        spec = _SPECS.get(key)
        if spec is None:
            try:
                spec = op.lazy[0](shapes, kwargs)
            except Exception:
                spec = None
            if spec is None or spec[4] > DEFER_MAX * 4:
                spec = False
            if len(_SPECS) > 4096:
                _SPECS.clear()
            _SPECS[key] = spec
        if spec is False:
            return None
        out, ip, fp, mask, size = spec
        hit = tape.add_head(key, op.opcode, ip, fp, mask, shapes, kwargs, out, size)
    b = tape.batch
    if b is None:
        b = _open_batch(tape)
    elif tape.n >= b.stop:
        tape.run_batch()
        b = _open_batch(tape)
    row = [hit[0]]
    saves = hit[5]
    for j, x in enumerate(seq):
        if type(x) is _Lazy and x._b is b:
            row.append(x._v)
        else:
            row.append(_import(tape, b, x, (saves >> j) & 1))
    out = _emit(tape, b, hit, row, kwargs, seq[0])
    if ANOMALY.enabled:  # the node keeps its forward call's stack, as Tape.record_node
        tape.metadata[tape.n - 1] = {"traceback_": forward_stack()}
    return out


def _open_batch(tape):
    """A new batch on ``tape``, run when it reaches BATCH_NODES nodes."""
    global _NEXT
    b = tape.new_batch()
    b.stop = b.n0 + BATCH_NODES
    if not _NEXT:  # (made whole, then bound: another thread sees [] or all of it)
        _NEXT = list(range(1, 1 << 17))
    return b


SMALL_BATCH = 8  # values: a batch this small costs more to run than its ops eagerly
SMALL_RUNS = 4  # batches so small in a row start a spell of eager ops
EAGER_SPELL = 256  # ops in the first spell; each spell that follows without a big batch
EAGER_SPELL_MAX = 8192  # between them is twice as long, up to this many


def reset_small_batch_state(tape):
    """Forget _batches_too_small's history on `tape` (the tests start each from it, so that
    which path an op takes does not depend on the tests before)."""
    tape.defer_skip = tape.defer_small = 0
    tape.defer_spell = EAGER_SPELL
    tape.ran_nv = None


def _batches_too_small(tape):
    """Whether an op called while no batch is open runs eagerly: code that reads a value
    after every op or two (a custom Function's forward takes its input's value, so a chain of
    them and deferred ops runs a batch per link) paid ~35 us a batch for one or two ops (the
    custom Function benchmark: 0.49x -> 0.27x torch). After SMALL_RUNS such batches in a
    row, the next ops called with no batch open run eagerly for a spell (checked before
    anything else, so that they pay ~0.2 us for it), then deferral is tried again. A spell
    that follows another without a batch of SMALL_BATCH values or more between them lasts
    twice as long, up to EAGER_SPELL_MAX ops (~50 ms of eager ops). (Tape attributes set
    here, other than ran_nv: the tape does not use them.)"""
    skip = getattr(tape, "defer_skip", 0)
    if skip:
        tape.defer_skip = skip - 1
        return True
    nv = tape.ran_nv
    if nv is not None:  # the values of the batch that ran last (Tape.run_batch), counted once
        tape.ran_nv = None
        if nv >= SMALL_BATCH:
            tape.defer_small = 0
            tape.defer_spell = EAGER_SPELL
        else:
            tape.defer_small = small = getattr(tape, "defer_small", 0) + 1
            if small >= SMALL_RUNS:
                spell = getattr(tape, "defer_spell", EAGER_SPELL)
                tape.defer_small = 0
                tape.defer_skip = spell
                tape.defer_spell = min(2 * spell, EAGER_SPELL_MAX)
                return True
    return False


def _lazy1(op, x, kwargs, seq=None):
    """``_lazy``'s fast path for one input: a deferred value of this thread's batch, and an
    op already seen with its shape and attributes on this tape (its row head is known).
    Also called from the frontends given attributes by keyword, and from the unary
    operators (the functions and methods take _unary_fast, the binary operators
    _binary_fast). With ``seq`` (an op on a sequence, stack; ``x`` its first item): every
    item a deferred value of that batch (a scalar DAG's stack of four: 1.57 -> 1.24 us)."""
    if type(x) is not _Lazy:
        return None
    b = x._b
    tape = x._tape
    # this thread's tape with grad mode on (grad_mode._State.recording); a batch that ran
    # has no room (its stop is -1, Tape.run_batch)
    if _grad_state.recording is not tape or ANOMALY.enabled:
        return None
    if seq is None:
        key = (op.opcode, x._shape, tuple(kwargs.items())) if kwargs else (op.opcode, x._shape)
    else:
        # items of one shape (the deferred op on a sequence, stack, takes no other): the
        # key counts them (Tape.add_head), a tuple of shapes less to make and hash
        row = [0]
        s0 = x._shape
        for t in seq:
            if type(t) is not _Lazy or t._b is not b:
                return None
            s = t._shape
            if s is not s0 and s != s0:
                return None  # (the eager path raises stack's error)
            row.append(t._v)
        key = (op.opcode, len(seq), s0)
        if kwargs:
            key += (tuple(kwargs.items()),)
    try:
        hit = tape.fast.get(key)
    except TypeError:  # an unhashable attribute: the eager path raises the op's error
        return None
    if hit is None:
        return None
    b.busy = 1  # (before the test of room: see Batch.busy)
    try:
        if tape.n >= b.stop:
            return None
        if seq is not None:
            row[0] = hit[0]
            return _emit(tape, b, hit, row, kwargs, x)
        hid, out, size, multi, meta, _ = hit
        if multi:
            return _emit(tape, b, hit, (hid, x._v), kwargs, x)
        b.rows += (hid, x._v)
        return _result(tape, b, out, meta, kwargs)
    finally:
        b.busy = 0


def _unary_fast(op, first, general):
    """The function and method frontend of a deferrable one-input op: ``x`` alone, or with
    its first attribute an int given positionally (``softmax(x, 0)``, ``x.unbind(0)``),
    runs _lazy1's fast path here (the call to it cost ~0.15 us of ``ng.tanh(h)``'s ~1 us);
    any other call, or a miss, goes to ``general`` (the frontend's argument handling, then
    _lazy1 and ``apply``).

    An int attribute takes a dict and items made once per value, shared by the nodes (read
    only): a dict and a tuple less per call (the scalar DAG: 5,000 tracked dicts a step)."""
    opcode = op.opcode
    ints = {}  # int -> ({first: int}, ((first, int),))
    last = [(None, None, None, None)]

    def f(*args, **kwargs):
        if kwargs:
            return general(*args, **kwargs)
        if len(args) == 1:
            kw = None
        elif len(args) == 2 and first and type(args[1]) is int:
            attrs = ints.get(args[1])
            if attrs is None:
                if len(ints) >= 64:
                    return general(*args)
                v = args[1]
                attrs = ints[v] = ({first: v}, ((first, v),))
            kw, items = attrs
        else:
            return general(*args)
        x = args[0]
        if type(x) is not _Lazy:
            return general(*args)
        b = x._b
        tape = x._tape
        if _grad_state.recording is not tape or ANOMALY.enabled:
            return general(*args)
        # the last head found, while the tape's heads stay (see _binary_fast)
        fast = tape.fast
        shape = x._shape
        c = last[0]
        if c[0] is fast and c[1] is shape and c[2] is kw:
            hit = c[3]
        else:
            hit = fast.get((opcode, shape) if kw is None else (opcode, shape, items))
            if hit is None:
                return general(*args)
            last[0] = (fast, shape, kw, hit)
        b.busy = 1  # (before the test of room: see Batch.busy)
        try:
            if tape.n < b.stop:
                hid, out, size, multi, meta, _ = hit
                b.rows += (hid, x._v)
                # _result, inlined (as in _binary_fast): the call cost ~50 ns of an op's ~0.8 us
                node = tape.n
                try:
                    tape.n = _NEXT[node]
                except IndexError:
                    tape.n = node + 1
                b.meta.append(meta)
                if kw is not None:
                    b.kwargs[node] = kw
                if multi:
                    return _runs(tape, b, node, out, x)
                t = _new(_Lazy)
                t._b = b
                t._v = v = b.nv
                try:
                    b.nv = _NEXT[v]
                except IndexError:
                    b.nv = v + 1
                t._shape = out
                t._src = None
                t._rg = True
                t._tape = tape
                t._out = 0
                t._vc = None
                return t
        finally:
            b.busy = 0
        return general(*args)

    return f


def _binary_fast(op, reflected=False, fallback=False):
    """``_lazy``'s fast path for two inputs of ``op`` (see _lazy1), without attributes; one
    of them may be a tensor from outside the batch (an RNN's weight, already imported, or its
    input x_t, imported here, after the head was found: it says whether the op saves it).

    A function of (x, y) made per op: returns the result, or None where the general path
    must decide. With ``fallback`` it is the operator itself (Tensor.__mul__ and the
    others; ``reflected``: __rmul__, its operands swapped) and runs ``apply`` there instead:
    one call less per operator than a method calling this, ~60 ns of a multiply's ~0.8 us."""
    opcode = op.opcode
    last = [(None, None, None, None)]

    def lazy2(x, y):
        if reflected:
            x, y = y, x
        tx = type(x)
        ty = type(y)
        if tx is _Lazy:
            b = x._b
            if ty is _Lazy:
                if y._b is not b:
                    return apply(op, x, y) if fallback else None
                sy = y._shape
            elif ty is Tensor:
                sy = y._data.shape
            else:
                return apply(op, x, y) if fallback else None
            sx = x._shape
            tape = x._tape
        elif ty is _Lazy and tx is Tensor:
            b = y._b
            tape = y._tape
            sx = x._data.shape
            sy = y._shape
        else:
            return apply(op, x, y) if fallback else None
        if _grad_state.recording is not tape or ANOMALY.enabled:
            return apply(op, x, y) if fallback else None
        fast = tape.fast
        c = last[0]
        if c[0] is fast and c[1] is sx and c[2] is sy:
            hit = c[3]
        else:
            hit = fast.get((opcode, sx, sy))
            if hit is None:
                return apply(op, x, y) if fallback else None
            last[0] = (fast, sx, sy, hit)
        b.busy = 1  # (before the test of room: see Batch.busy)
        try:
            if tape.n < b.stop:
                hid, out, size, multi, meta, saves = hit
                # (the import's entry read here: a new input, the RNN's x_t, skips _reuse)
                if tx is _Lazy:
                    vx = x._v
                else:
                    try:
                        seen = x._imp
                    except AttributeError:  # (a tensor made without it; see Tensor)
                        seen = None
                    vx = (
                        -1
                        if seen is None or seen[0] is not b.token
                        else _reuse(tape, b, x, saves & 1, seen)
                    )
                    if vx < 0:
                        vx = _import_new(tape, b, x, saves & 1)
                if ty is _Lazy:
                    vy = y._v
                elif vx < 0:
                    vy = -1
                else:
                    try:
                        seen = y._imp
                    except AttributeError:  # (a tensor made without it; see Tensor)
                        seen = None
                    vy = (
                        -1
                        if seen is None or seen[0] is not b.token
                        else _reuse(tape, b, y, saves & 2, seen)
                    )
                    if vy < 0:
                        vy = _import_new(tape, b, y, saves & 2)
                if vx >= 0 and vy >= 0:  # (else an input the batch cannot take)
                    if multi:
                        return _emit(tape, b, hit, (hid, vx, vy), None, x)
                    b.rows += (hid, vx, vy)
                    # _result, inlined: the call cost ~50 ns of an op's ~0.8 us
                    b.meta.append(meta)
                    t = _new(_Lazy)
                    t._b = b
                    t._v = v = b.nv
                    try:  # (ids from _NEXT: see there)
                        b.nv = _NEXT[v]
                        tape.n = _NEXT[tape.n]
                    except IndexError:
                        b.nv = v + 1
                        tape.n += 1
                    t._shape = out
                    t._src = None
                    t._rg = True
                    t._tape = tape
                    t._out = 0
                    t._vc = None
                    return t
        finally:
            b.busy = 0
        return apply(op, x, y) if fallback else None

    return lazy2


def _result(tape, b, out, meta, kwargs):
    """The single result of the op whose row was just appended to batch ``b``: its node,
    the tape's per-node entries, its value id and its tensor. (Inlined in the fast paths
    _unary_fast and _binary_fast: keep them in step.)"""
    node = tape.n
    try:
        tape.n = _NEXT[node]
    except IndexError:
        tape.n = node + 1
    b.meta.append(meta)
    if kwargs:
        b.kwargs[node] = kwargs
    t = _new(_Lazy)
    t._b = b
    t._v = v = b.nv
    try:
        b.nv = _NEXT[v]
    except IndexError:
        b.nv = v + 1
    t._shape = out
    t._src = None
    t._rg = True
    t._tape = tape
    t._out = 0
    t._vc = None
    return t


def _emit(tape, b, hit, row, kwargs, x):
    """Append the row of an op (``hit``: its head, see Tape.add_head; ``row``: the head's
    index, then its input value ids) to batch ``b``; its result(s). ``x``: the first input,
    whose memory a multi-output op's outputs are runs of."""
    b.rows += row
    if not hit[3]:
        return _result(tape, b, hit[1], hit[4], kwargs)
    node = tape.n
    try:
        tape.n = _NEXT[node]
    except IndexError:
        tape.n = node + 1
    b.meta.append(hit[4])
    if kwargs:
        b.kwargs[node] = kwargs
    return _runs(tape, b, node, hit[1], x)


def _runs(tape, b, node, out, x):
    """The results of the multi-output node ``node`` (output shapes ``out``) just recorded
    in batch ``b``: consecutive runs of ``x`` (unbind), views sharing its version counter.
    (The caller appends its row, its meta and its attributes.)"""
    vc = x._vc
    if vc is None:
        x._vc = vc = [0]
    v = b.nv
    b.out_shapes[node] = out
    results = []
    j = 0
    for shape in out:
        t = _new(_Lazy)
        t._b = b
        t._v = v
        t._shape = shape
        t._src = x
        t._rg = True
        t._tape = tape
        t._out = j
        t._vc = vc
        results.append(t)
        try:
            v = _NEXT[v]
        except IndexError:
            v += 1
        j += 1
    b.nv = v
    # x's version now, by the first output's value id: an output forced after x changed in
    # place raises torch's error (_force). (Listing each output on x for in-place changes
    # to find, weak references and a list a call, cost scalar_dag_fwd_bwd's forward ~20 %: the
    # garbage collector's passes over them)
    versions = _RUN_VERSIONS.get(b)
    if versions is None:
        versions = _RUN_VERSIONS[b] = {}
    versions[results[0]._v] = vc[0]
    return tuple(results)


# _NEXT[i] is i + 1, for i below 2^17: the fast paths take the next value id and node
# number from it (IndexError past its end: i + 1), where ``i + 1`` made an int object per op
# (ids pass 256 at once), kept by its result until the result died: the scalar DAG's step
# 21.4 -> 19.2 ms, and 23.5 -> 20.5 ms in a heap full of freed small objects (measured,
# "The ninth session"). Its ints take ~4 MB, made at the first batch (_open_batch)
_NEXT = []

_PACK_FLOAT64 = struct.Struct("d").pack  # a number's import: its bytes


def _import(tape, b, x, saved):
    """The value id of ``x`` (a tensor from outside the batch, or a number) in batch ``b``:
    its edge is its node, its leaf's AccumulateGrad node (a row of the batch when new), or
    none. Its value is copied into the batch at its first use, as an eager op reads its
    operands' memory when it is called; a later use in the batch takes the same value while
    ``x`` has the same array and version and no numpy code can write its memory (``_expose``;
    otherwise each use copies: a raw write between two uses must reach the second, as
    gradcheck's perturbations do). ``saved``: whether the op saves it; an input of more than
    SMALL elements it saves is kept by address, as the eager path keeps it
    (Tape._note_batch_versions)."""
    if type(x) is float or type(x) is int:
        v = b.nv
        b.nv = v + 1
        b.rows += (-1, b.nimp, 1, -1, 0, 0)
        b.arrays.append(_PACK_FLOAT64(x))
        b.nimp += 1
        return v
    try:
        seen = x._imp
    except AttributeError:  # (an unforced _Lazy of a run batch)
        seen = None
    if seen is not None and seen[0] is b.token:
        v = _reuse(tape, b, x, saved, seen)
        if v >= 0:
            return v
    return _import_new(tape, b, x, saved)


def _import_new(tape, b, x, saved):
    """_import of a tensor ``x`` that _reuse found no import of, or -1: ``x`` cannot enter
    the batch (see _importable; ``_binary_fast`` calls it straight, and a call to _reuse again, or
    to _importable, cost ~0.25 us an RNN step). Only an input the op saves gets a version
    entry (``watch``) and its address: the RNN's x_t, which its add does not save, took
    ~0.3 us less (timing loop)."""
    rg = x._rg
    h = x._h
    if rg and h >= 0 and x._tape is not tape:
        return -1
    a = x._data
    m = a.size
    if a.dtype is not float64 or m > DEFER_MAX or x._vc is _INFERENCE:
        return -1  # (an inference tensor: the eager path raises if the op saves it)
    if not rg:
        node = -1
        nr = 0
    elif h >= 0:
        node = tape.h2node[h]
        nr = x._out
    else:
        nr = 0
        if x._acc_tape is tape:
            node = tape.h2node[x._acc_h]
        else:
            node = _accumulator_on(tape, x)
            if node < 0:  # the leaf's AccumulateGrad node, new: a row of the batch
                node = tape.n
                tape.n = node + 1
                b.rows += (-2, m)
                b.meta.append(None)
                b.objs.append((node, weakref.ref(x)))
                _keep_accumulator(tape, x, node)
    vc = x._vc
    v = b.nv
    b.nv = v + 1
    nimp = b.nimp
    b.nimp = nimp + m
    if saved:
        if vc is None:
            x._vc = vc = [0]
        addr = address_of(a) if m > SMALL and a.flags.c_contiguous else 0
        # a node's by-address values are found by address (its version entries keep them,
        # Tape._note_batch_versions): one kept array of another size at this address (a
        # prefix slice of it, x[:20] beside x.reshape(20, 20)) makes this one a copy
        if addr and b.addrs.setdefault(addr, m) != m:
            addr = 0
        b.watch.append((vc, vc[0], a, v, addr))  # (Tape._note_batch_versions)
    else:  # (no counter made for it: version 0 until one is, ~60 ns an x_t)
        addr = 0
    b.rows += (-1, nimp, m, node, nr, addr)
    # its bytes, in C order (float64: checked above), joined by run_batch: 144 ns where
    # flatten() took ~340 and np.concatenate ~0.15 us more an array (x_t, RNN step)
    b.arrays.append(a.tobytes())
    if vc is None or len(vc) == 1:  # (on x: a dict by id(x) took ~80 ns more an import)
        x._imp = (b.token, a, 0 if vc is None else vc[0], node, nr, v, saved)
    return v


def _importable(tape, x):
    """Whether tensor ``x`` may enter ``tape``'s batch: a float64 tensor of at most DEFER_MAX
    elements, not recorded on another thread's tape (the eager path raises for those), not an
    inference tensor."""
    if x._rg and x._h >= 0 and x._tape is not tape:
        return False
    a = x._data
    # (an inference tensor runs eagerly, where saving it raises torch's error)
    return a.dtype is float64 and a.size <= DEFER_MAX and x._vc is not _INFERENCE


def _reuse(tape, b, x, saved, seen):
    """The value id of tensor ``x``'s import ``seen`` into the open batch ``b`` (``x._imp``,
    made by _import_new with ``b.token``) if this use may take it (see _import: the same
    array, version and edge, and memory no numpy code can write); else -1.
    An op that ``saved`` it adds the version entry an import the ops before did not save
    lacks, and a big one that has no address is imported again, with it."""
    # seen: (batch token, array, version, node, output, value id, watched)
    if seen[1] is not x._data:
        return -1
    vc = x._vc  # (None: no counter yet, so version 0, as _import_new noted it)
    if vc is not None and (len(vc) != 1 or seen[2] != vc[0]):
        return -1
    if not x._rg:
        node = -1
        nr = 0
    else:
        h = x._h
        if h >= 0:
            if x._tape is not tape:
                return -1
            node = tape.h2node[h]
            nr = x._out
        else:
            node = _accumulator_on(tape, x)
            nr = 0
            if node < 0:
                return -1
    if seen[3] != node or seen[4] != nr:
        return -1
    if saved and not seen[6]:
        a = seen[1]
        if a.size > SMALL and a.flags.c_contiguous:
            return -1
        if vc is None:
            x._vc = vc = [0]
        b.watch.append((vc, seen[2], a, seen[5], 0))
        x._imp = seen[:6] + (True,)
    return seen[5]


# ---------------------------------------------------------------------------------------------
# the public op functions and Tensor methods, derived from the op table

FUNCTIONS = {}
NN_FUNCTIONAL = {}  # ng.nn.functional.<name>
LINALG = {}  # ng.linalg.<name>
SPECIAL = {}  # ng.special.<name>
_TO_COPY = OP_BY_NAME["_to_copy"]


def _has_batched(args, kwargs):
    """Whether a vmap's BatchedTensor is among ``args`` (or in a list or tuple there) or
    ``kwargs``' values."""
    cls = BATCHED[0]
    for x in (*args, *kwargs.values()):
        if type(x) is cls:
            return True
        if type(x) in (tuple, list) and any(type(y) is cls for y in x):
            return True
    return False


def _frontend(op):
    signature = opdocs.signature(op)
    if op.api is not None:
        api = op.api

        linear = op.composite and op.jvp == "linear"  # (its tangent: itself on the tangents)

        def f(*args, **kwargs):
            if BATCHED_ON[0] and _has_batched(args, kwargs):
                return BATCHED[2](op, args, kwargs)
            if linear and FORWARD_AD[0]:
                t = FORWARD_AD_COMPOSITE[0](op, args, kwargs)
                if t is not NOT_HANDLED:
                    return t
            return api(apply, *args, **kwargs)

    elif op.nin == -1:
        lazy = op.lazy is not None

        def f(tensors, *args, **kwargs):
            if args:
                kwargs["dim"] = args[0]
            if lazy and type(tensors) is list and tensors:
                t = _lazy1(op, tensors[0], kwargs, tensors)
                if t is not None:
                    return t
            return apply(op, tensors, **kwargs)

    else:
        import inspect

        nin = op.nin
        lazy = op.lazy is not None
        # names of the attributes a caller may pass positionally after the tensors
        names = [
            p.name
            for p in inspect.signature(op.forward).parameters.values()
            if p.kind is p.POSITIONAL_OR_KEYWORD
        ][nin:]

        first = names[0] if names else None
        keywords = op.keywords
        tensor_names = signature.parameters if nin > 1 else ()

        def f(*args, **kwargs):
            if kwargs and len(args) < nin and tensor_names:  # tensors by name: mm(a, mat2=b)
                args = _tensors_by_name(op, tensor_names, args, kwargs)
            if not args and nin == 1 and "input" in kwargs:  # torch's keyword: tanh(input=x)
                args = (kwargs.pop("input"),)
            if len(args) > nin:
                if len(args) - nin > len(names):
                    raise TypeError(
                        f"{op.name}() takes {nin + len(names)} positional arguments but "
                        f"{len(args)} were given"
                    )
                for name, v in zip(names, args[nin:], strict=False):
                    if name in kwargs:
                        raise TypeError(f"{op.name}() got multiple values for argument '{name}'")
                    kwargs[name] = v
                args = args[:nin]
            if keywords and kwargs:  # (a keyword with a frontend of its own: Op.keywords)
                for k in keywords:
                    if k in kwargs:
                        return keywords[k](apply, *args, **kwargs)
            if lazy and len(args) == 1 and _may_defer(args[0]):
                t = _lazy1(op, args[0], kwargs)
                if t is not None:
                    return t
            return apply(op, *args, **kwargs)

        if lazy and nin == 1:
            f = _unary_fast(op, first, f)

    f.__name__ = f.__qualname__ = op.name
    f.__doc__ = opdocs.docstring(op)
    f.__signature__ = signature
    return f


def _tensors_by_name(op, names, args, kwargs):
    """``args`` completed with the tensor arguments given by name in ``kwargs`` (removed
    from it), in the order of the op's signature ``names``."""
    args = list(args)
    for name in list(names)[len(args) : op.nin]:
        if name not in kwargs:
            raise TypeError(f"{op.name}() missing required argument '{name}'")
        args.append(kwargs.pop(name))
    return tuple(args)


def _dunder(op, name, f):
    """The Tensor method ``name`` (an operator) of ``op``: ``apply`` called directly when the
    op takes its operands only (the frontend's argument handling cost ~0.3 us an operator)."""
    reflected = name.startswith("__r") and name != "__rshift__"
    if op.api is not None or op.nin < 1:
        if reflected:
            return lambda self, other: f(other, self)
        return f
    if op.lazy is not None:  # the deferred forward's fast paths first (~0.2 us less an op)
        if op.nin == 1:

            def unary(self):
                if _may_defer(self):
                    t = _lazy1(op, self, _NO_KWARGS)
                    if t is not None:
                        return t
                return apply(op, self)

            return unary

        return _binary_fast(op, reflected, fallback=True)
    if op.nin == 1:
        return lambda self: apply(op, self)
    if reflected:
        return lambda self, other: apply(op, other, self)
    return lambda self, other: apply(op, self, other)


_LAZY2 = {}  # opcode -> _binary_fast(op): the general path's first try for two inputs


def _bind():
    for op in OPS + COMPOSITES:
        if op.lazy is not None and op.nin == 2:
            _LAZY2[op.opcode] = _binary_fast(op)
        f = _frontend(op)
        for name in op.functions:
            FUNCTIONS[name] = f
        if op.nn_functional:
            NN_FUNCTIONAL[op.name] = f
        for name in op.linalg:
            LINALG[name] = f
        for name in op.special:
            SPECIAL[name] = f
        for name in op.methods:
            setattr(Tensor, name, f)
        for name in op.dunders:
            method = _dunder(op, name, f)
            method.__name__ = method.__qualname__ = name
            setattr(Tensor, name, method)


_bind()


def _inplace_variant(name):
    """Torch's in-place ``name_``: the out-of-place method's result written into self,
    recorded as autograd/inplace.py says."""
    out_of_place = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        return _inplace().run(
            self, name, args + tuple(kwargs.values()), lambda x: out_of_place(x, *args, **kwargs)
        )

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place ``{name}``: self becomes ``self.{name}(...)``."
    return method


def _reshaped_variant(name):
    """Torch's in-place ``name_`` of a view op (``t_``, ``unsqueeze_``...): self becomes the
    view of its own memory, and takes its place in the graph."""
    view_op = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        if _grad_state.enabled and self._rg and self._h < 0:
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation."
            )
        r = view_op(self, *args, **kwargs)
        self._data = r._data
        if r._rg and r._h >= 0:
            _take_place(self, r)
        return self

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place ``{name}``: self becomes ``self.{name}(...)``, a view of itself."
    return method


for _name in ("squeeze", "unsqueeze", "t", "transpose", "swapaxes", "swapdims"):
    if hasattr(Tensor, _name) and not hasattr(Tensor, _name + "_"):
        setattr(Tensor, _name + "_", _reshaped_variant(_name))
# torch's in-place variants of the methods nautograd has
for _name in (
    "abs", "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan2", "arctan",
    "arctanh", "asin", "asinh", "atan2", "atan", "atanh", "ceil", "cos", "cosh", "cumprod",
    "cumsum", "digamma", "divide", "eq", "erf", "erfc", "erfinv", "exp2", "exp", "expm1",
    "fix", "floor", "fmod", "ge", "gt", "hypot", "i0", "le", "lgamma", "log10", "log1p",
    "log2", "log", "logical_and", "logical_not", "logical_or", "logical_xor", "logit", "lt",
    "masked_fill", "multiply", "mvlgamma", "nan_to_num", "ne", "neg", "negative", "polygamma",
    "pow", "reciprocal", "relu", "remainder", "round", "rsqrt", "scatter_add", "sigmoid",
    "sign", "sin", "sinc", "sinh", "sqrt", "square", "subtract", "tan", "tanh", "tril", "triu",
    "true_divide", "trunc", "xlogy",
):  # fmt: skip
    if hasattr(Tensor, _name) and not hasattr(Tensor, _name + "_"):
        setattr(Tensor, _name + "_", _inplace_variant(_name))
del _name


# ---------------------------------------------------------------------------------------------
# printing


def _format_array(a):
    if a.dtype.kind == "b":
        body = np.array2string(a, separator=", ", formatter={"bool": lambda v: str(bool(v))})
    elif a.dtype.kind == "f":
        finite = a[np.isfinite(a)]
        if finite.size and np.all(finite == np.round(finite)) and np.max(np.abs(finite)) < 1e8:

            def fmt(v):
                return f"{v:.0f}." if np.isfinite(v) else str(v)

        else:
            big = finite.size and (
                np.max(np.abs(finite)) >= 1e8
                or np.min(np.abs(finite[finite != 0]), initial=1) < 1e-4
            )

            def fmt(v):
                if not np.isfinite(v):
                    return str(v)
                return f"{v:.4e}" if big else f"{v:.4f}"

        body = np.array2string(
            a, separator=", ", formatter={"float_kind": fmt}, threshold=1000, edgeitems=3
        )
    else:
        body = np.array2string(a, separator=", ", threshold=1000)
    return body.replace("\n", "\n       ")


def _format(t):
    a = t._data
    extras = []
    if a.dtype not in (DEFAULT_FLOAT[0], int64, bool_):
        extras.append(f"dtype={dtype_name(a.dtype)}")
    if a.size == 0 and a.ndim != 1:
        extras.insert(0, f"size={tuple(a.shape)}")
    if t._h >= 0:
        extras.append(f"grad_fn=<{t.grad_fn.name().split('::')[-1]}>")
    elif t._rg:
        extras.append("requires_grad=True")
    body = _format_array(a)
    return "tensor(" + ", ".join([body] + extras) + ")"
