"""Tensor creation: tensor, from_numpy, zeros/ones/full/empty/arange/linspace/eye, *_like,
rand/randn/randint with manual_seed."""

import numbers

import numpy as np

from . import _device
from ._random import (  # noqa: F401  (Generator and manual_seed are public)
    Generator,
    manual_seed,
    numpy_generator,
)
from .tensor import (
    _GRAD_DTYPES,
    _INFERENCE,
    _INFERENCE_MADE,
    _TYPE_NAMES,
    DEFAULT_FLOAT,
    Size,
    Tensor,
    _expose,
    _grad_state,
    _wrap,
)


def set_default_dtype(d):
    """Set the floating dtype that Python floats, float creation functions and nn layers
    use (float32 or float64; nautograd's default is float64)."""
    d = np.dtype(d)
    if d not in (np.float32, np.float64):
        raise TypeError(
            f"only floating-point types are supported as the default type, got {d}"
            if d.kind != "f"
            else f"set_default_dtype(): nautograd computes in float32 or float64, got {d}"
        )
    DEFAULT_FLOAT[0] = d


def get_default_dtype():
    """The default floating dtype (see set_default_dtype)."""
    return DEFAULT_FLOAT[0]


def _dt(dtype):
    return DEFAULT_FLOAT[0] if dtype is None else np.dtype(dtype)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def _leaf(a, requires_grad):
    t = _wrap(a)
    if _grad_state.inference:
        t._vc = _INFERENCE  # (an inference tensor: made under inference_mode)
        _INFERENCE_MADE[0] = True
    if requires_grad:
        t.requires_grad = True
    return t


def _infer(data):
    """numpy's dtype for nested Python data, but float64/int64/bool as torch infers them."""
    a = np.asarray(data)
    if a.dtype.kind == "f" and not isinstance(data, np.ndarray):
        a = a.astype(DEFAULT_FLOAT[0])
    elif a.dtype.kind in "iu" and not isinstance(data, np.ndarray):
        a = a.astype(np.int64)
    elif a.dtype.kind == "O":
        raise TypeError(f"tensor(): could not infer a dtype for {type(data).__name__}")
    return a


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new leaf tensor holding a copy of ``data`` (nested lists, numbers, arrays, tensors).

    Python floats give float64 (numpy's default), Python ints int64, bools bool.
    """
    _device.check(device, "tensor()")
    if isinstance(data, Tensor):
        data = data._data
    a = np.array(_infer(data), dtype=dtype, copy=True)
    return _leaf(a, requires_grad)


as_tensor = tensor


class _LegacyTensorType(type):
    """The type of torch's legacy tensor classes (``FloatTensor``, ...): calling one makes a
    tensor of its dtype, and ``isinstance`` tests the dtype."""

    def __instancecheck__(cls, other):
        return isinstance(other, Tensor) and other._data.dtype == cls.dtype

    def __call__(cls, *args, device=None):
        _device.check(device, f"{cls.__name__}()")
        dtype = cls.dtype
        if not args:
            return _leaf(np.empty(0, dtype), False)
        first = args[0]
        if (
            len(args) == 1
            and isinstance(first, Size)
            or all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args)
        ):
            return _leaf(np.empty(_shape(args), dtype), False)  # sizes: uninitialised
        if len(args) > 1:
            raise TypeError(f"{cls.__name__}(): expected sizes or one sequence of data")
        if isinstance(first, Tensor):
            if first._data.dtype != dtype:
                raise TypeError(
                    f"{cls.__name__}(): expected a tensor of dtype {dtype.name}, got "
                    f"{first._data.dtype.name}"
                )
            return first
        return _leaf(np.array(first, dtype=dtype), False)


def _legacy_type(dtype):
    """torch's legacy class of ``dtype``, named as ``Tensor.type()`` names it."""
    dtype = np.dtype(dtype)
    name = _TYPE_NAMES[dtype]
    return _LegacyTensorType(
        name, (), {"dtype": dtype, "__doc__": f"torch.{name}: {dtype} tensors."}
    )


FloatTensor = _legacy_type(np.float32)
DoubleTensor = _legacy_type(np.float64)
HalfTensor = _legacy_type(np.float16)
LongTensor = _legacy_type(np.int64)
IntTensor = _legacy_type(np.int32)
ShortTensor = _legacy_type(np.int16)
CharTensor = _legacy_type(np.int8)
ByteTensor = _legacy_type(np.uint8)
BoolTensor = _legacy_type(np.bool_)


def is_inference(input):
    """True for a tensor made under ``inference_mode`` (as ``Tensor.is_inference``)."""
    if not isinstance(input, Tensor):
        raise TypeError(
            f"is_inference(): argument 'input' must be Tensor, not {type(input).__name__}"
        )
    return input.is_inference()


def from_numpy(ndarray):
    """A tensor sharing memory with the numpy array ``ndarray``."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    t = _wrap(ndarray)
    _expose(t)
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of the given size filled with zeros."""
    _device.check(device, "zeros()")
    return _leaf(np.zeros(_shape(size), _dt(dtype)), requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of the given size filled with ones."""
    _device.check(device, "ones()")
    return _leaf(np.ones(_shape(size), _dt(dtype)), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of the given size whose values are not initialised."""
    _device.check(device, "empty()")
    return _leaf(np.empty(_shape(size), _dt(dtype)), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of the given size filled with ``fill_value``."""
    _device.check(device, "full()")
    if dtype is None:
        dtype = (
            np.bool_
            if isinstance(fill_value, bool)
            else np.int64
            if isinstance(fill_value, numbers.Integral)
            else DEFAULT_FLOAT[0]
        )
    return _leaf(np.full(_shape((size,)), fill_value, np.dtype(dtype)), requires_grad)


def _like(x, dtype):
    a = x._data if isinstance(x, Tensor) else np.asarray(x)
    return a.shape, (a.dtype if dtype is None else np.dtype(dtype))


def zeros_like(input, dtype=None, device=None, requires_grad=False):
    """A tensor of ``input``'s shape filled with zeros."""
    _device.check(device, "zeros_like()")
    shape, dt = _like(input, dtype)
    return _leaf(np.zeros(shape, dt), requires_grad)


def ones_like(input, dtype=None, device=None, requires_grad=False):
    """A tensor of ``input``'s shape filled with ones."""
    _device.check(device, "ones_like()")
    shape, dt = _like(input, dtype)
    return _leaf(np.ones(shape, dt), requires_grad)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of ``input``'s shape filled with ``fill_value``."""
    _device.check(device, "full_like()")
    shape, dt = _like(input, dtype)
    return _leaf(np.full(shape, fill_value, dt), requires_grad)


def empty_like(input, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of ``input``'s shape (and dtype unless given)."""
    _device.check(device, "empty_like()")
    shape, dt = _like(input, dtype)
    return _leaf(np.empty(shape, dt), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from ``start`` to ``end`` (excluded) every ``step``, as torch.arange."""
    _device.check(device, "arange()")
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = np.int64 if ints else DEFAULT_FLOAT[0]
    return _leaf(np.arange(start, end, step, dtype=np.dtype(dtype)), requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """``steps`` values evenly spaced from ``start`` to ``end`` inclusive."""
    _device.check(device, "linspace()")
    return _leaf(np.linspace(start, end, int(steps), dtype=_dt(dtype)), requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """The ``n`` x ``m`` identity matrix (``m`` defaults to ``n``)."""
    _device.check(device, "eye()")
    return _leaf(np.eye(n, m, dtype=_dt(dtype)), requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform samples on [0, 1) of the given size (from ``generator``, or nautograd's own,
    seeded by ``manual_seed``)."""
    _device.check(device, "rand()")
    dt = _dt(dtype)
    a = numpy_generator(generator).random(_shape(size)).astype(dt)
    return _leaf(a, requires_grad and dt in _GRAD_DTYPES)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples of the given size (from ``generator``, or nautograd's own,
    seeded by ``manual_seed``)."""
    _device.check(device, "randn()")
    dt = _dt(dtype)
    return _leaf(numpy_generator(generator).standard_normal(_shape(size)).astype(dt), requires_grad)


def randint(
    low=0, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False
):
    """Integers uniform on [``low``, ``high``) of the given size."""
    _device.check(device, "randint()")
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    rng = numpy_generator(generator)
    a = rng.integers(low, high, size=_shape((size,)), dtype=np.dtype(dtype or np.int64))
    return _leaf(a, requires_grad)


def rand_like(input, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Samples of U(0, 1) in ``input``'s shape and dtype (or ``dtype``)."""
    _device.check(device, "rand_like()")
    shape, dt = _like(input, dtype)
    return rand(*shape, generator=generator, dtype=dt, requires_grad=requires_grad)


def randn_like(input, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Samples of N(0, 1) in ``input``'s shape and dtype (or ``dtype``)."""
    _device.check(device, "randn_like()")
    shape, dt = _like(input, dtype)
    return randn(*shape, generator=generator, dtype=dt, requires_grad=requires_grad)


def is_tensor(obj):
    """True if ``obj`` is a nautograd Tensor."""
    return isinstance(obj, Tensor)


def numel(input):
    """The number of elements of ``input``."""
    return input._data.size


def is_floating_point(input):
    """True if ``input``'s dtype is a floating point type."""
    return input._data.dtype.kind == "f"


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True if ``|input - other| <= atol + rtol * |other|`` everywhere (broadcast)."""
    return bool(np.allclose(_value(input), _value(other), rtol, atol, equal_nan))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|``, a bool tensor."""
    return _wrap(np.isclose(_value(input), _value(other), rtol, atol, equal_nan))


def equal(input, other):
    """True if both have the same shape and elements."""
    a, b = _value(input), _value(other)
    return a.shape == b.shape and bool(np.array_equal(a, b))


def _value(x):
    return x._data if isinstance(x, Tensor) else np.asarray(x)


class finfo:
    """The limits of a floating dtype (default: the default dtype), as ``torch.finfo``:
    ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``), ``resolution``,
    ``dtype`` (its name)."""

    def __init__(self, type=None):  # noqa: A002  (torch's name)
        d = DEFAULT_FLOAT[0] if type is None else np.dtype(type)
        if d.kind != "f":
            raise TypeError(
                "torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                "'torch.finfo'"
            )
        f = np.finfo(d)
        self.bits = int(f.bits)
        self.eps = float(f.eps)
        self.max = float(f.max)
        self.min = float(f.min)
        self.tiny = self.smallest_normal = float(f.smallest_normal)
        self.resolution = 10.0 ** -int(f.precision)  # (torch: a power of ten, exactly)
        self.dtype = d.name

    def __repr__(self):
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype})"
        )


class iinfo:
    """The limits of an integer dtype, as ``torch.iinfo``: ``bits``, ``max``, ``min``,
    ``dtype`` (its name)."""

    def __init__(self, type):  # noqa: A002  (torch's name)
        d = np.dtype(type)
        if d.kind not in "iub":
            raise TypeError(
                "torch.iinfo() requires an integer input type. Use torch.finfo to handle "
                "'torch.iinfo'"
            )
        i = np.iinfo(np.uint8 if d.kind == "b" else d)
        self.bits = int(i.bits)
        self.max = int(i.max)
        self.min = int(i.min)
        self.dtype = d.name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
