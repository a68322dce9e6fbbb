"""Deferred results out of the cyclic garbage collector's young generations.

A scalar DAG step makes ~20,000 deferred results (tensor.py ``_Lazy``) that live until the
step ends. CPython's collector tracks every instance of a Python class: each young
collection (one per 700 new objects) walked the ~700 results made since the previous one,
each middle collection the ~8,000 made since, ~2.8 ms of a ~28 ms step (gc.callbacks
timing: 30 young collections at ~42 us, two middle ones at ~720 us).

A deferred result cannot be part of a reference cycle that the collector would have to
break: it refers to its batch, its tape, its shape, its version counter and (an output of
unbind) the tensor it is a run of, and none of those refers to a deferred result. So, just
before each collection (a ``gc.callbacks`` "start" hook, which runs before the collector
looks at anything), the deferred results in the youngest generation are untracked, as
CPython untracks the tuples and dicts that hold no containers. A result that becomes an
ordinary tensor (tensor.py ``_force``) is tracked again: it may then get attributes, hooks
or a place in a cycle like any tensor. Left out of sight: a cycle that passes through an
attribute set on a deferred result that was never read (``t.me = t``) is not collected.
(Hooks on a non-leaf live in the tape, which its thread holds anyway.)

The untracking runs compiled over the list ``gc.get_objects(0)`` returns: each item's type
is compared with ``_Lazy`` and ``PyObject_GC_UnTrack`` called through its address (an
argument, so that the function stays cacheable). The layout it reads (a list's item array,
an object's type pointer) is checked against ``ctypes`` at import; on any other Python
implementation, or if a check fails, nothing is installed.
"""

import ctypes
import gc
import sys

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..kernels._jit import _ptr_like
from .tape import _INT64_AT

_LIKE = np.zeros(1, np.int64)  # gives _ptr_like its element type


@intrinsic
def _call_void(typingctx, fn, arg):
    """Call the C function ``void f(void *)`` at address ``fn`` with ``arg``."""
    sig = types.void(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(64)])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1]])
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True)
def _untrack(items, n, type_addr, untrack, like):
    """``untrack(obj)`` for each object of type ``type_addr`` among the ``n`` object
    pointers at address ``items``; returns how many."""
    ptrs = numba.carray(_ptr_like(items, like), (n,))
    count = 0
    for i in range(n):
        p = ptrs[i]
        if numba.carray(_ptr_like(p + 8, like), (1,))[0] == type_addr:
            _call_void(untrack, p)
            count += 1
    return count


def _layout_ok():
    """Whether a list's item array sits after its header (offset 24) and an object's type
    pointer at offset 8, as ``_untrack`` reads them (CPython's default 64-bit build)."""
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    if not getattr(sys, "_is_gil_enabled", lambda: True)():  # free-threaded: another GC
        return False
    probe = [object(), 1.5]
    items = _INT64_AT(id(probe) + 24).value
    return (
        _INT64_AT(items).value == id(probe[0])
        and _INT64_AT(items + 8).value == id(probe[1])
        and _INT64_AT(id(probe[1]) + 8).value == id(float)
    )


class _Untracker:
    """The ``gc.callbacks`` hook for one class (tensor.py's ``_Lazy``).

    ``active``: set when a batch opens (``activate``), cleared by a collection whose youngest
    generation holds none while ``busy()`` (the collecting thread has a batch open) is
    false, so that programs without deferred ops pay nothing but the check. The compiled
    loop is never compiled or loaded inside a collection (which may strike in the middle of
    another compilation): a collection that finds it missing asks for it (``want``), and the
    next batch's ``activate`` loads it (~40 ms from the cache; ``nautograd warmup`` compiles
    it)."""

    def __init__(self, cls, busy):
        self.type_addr = id(cls)
        self.untrack = ctypes.cast(ctypes.pythonapi.PyObject_GC_UnTrack, ctypes.c_void_p).value
        self.busy = busy
        self.active = False
        self.ready = False
        self.want = False

    def activate(self):
        """A batch opened: untrack from the next collection on."""
        if not self.ready and (self.want or _untrack.signatures):
            warm()
            self.ready = True
        self.active = True

    def __call__(self, phase, info):
        if phase != "start" or not self.active:
            return
        if not self.ready:
            self.want = True
            return
        try:
            young = gc.get_objects(0)
            n = _untrack(
                _INT64_AT(id(young) + 24).value, len(young), self.type_addr, self.untrack, _LIKE
            )
            if n == 0 and not self.busy():
                self.active = False
        except Exception:  # (never into the collector: it would print and go on)
            self.active = False


_TRACK = None


def install(cls, busy):
    """Untrack young instances of ``cls`` before each collection; returns the hook (the
    caller calls its ``activate`` when a batch opens; ``busy``: see _Untracker), or None
    where the layout is not CPython's."""
    global _TRACK
    if not _layout_ok():
        return None
    # (a function object of its own: setting argtypes on ctypes.pythonapi's would change
    # them for every other user of it)
    _TRACK = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("PyObject_GC_Track", ctypes.pythonapi))
    hook = _Untracker(cls, busy)
    gc.callbacks.append(hook)
    return hook


# offsetof(PyTypeObject, tp_finalize) in CPython's 64-bit builds (3.8 on); checked below
_TP_FINALIZE = 392


def _finalize_slot():
    """The address of ``tp_finalize`` in a type object, or None where a class with
    ``__del__`` and one without do not show the layout: the same non-null function in two
    classes with ``__del__`` (CPython's ``slot_tp_finalize``), null in one without."""
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None

    class WithDel:
        __slots__ = ()
        __del__ = int

    class WithPythonDel:
        __slots__ = ()

        def __del__(self):
            pass

    class Without:
        __slots__ = ()

    def at(cls):
        return _INT64_AT(id(cls) + _TP_FINALIZE).value

    f = at(WithDel)
    if f == 0 or at(WithPythonDel) != f or at(Without) != 0:
        return None
    return _TP_FINALIZE


def drop_finalizer(cls):
    """Let instances of ``cls``, whose ``__del__`` does nothing, die without calling it.

    A class inherits its base's ``__del__`` (tensor.py ``_Lazy``: Tensor's gives back a
    tape handle, which a deferred result does not have); overriding it with a no-op still
    makes every instance's death call it: CPython's ``slot_tp_finalize`` looks the method
    up and calls it, ~20 ns of a deferred result's ~60 ns death (the scalar DAG's 22,500
    results: 1.05 -> 0.70 ms). Clearing the type's ``tp_finalize`` skips that; an instance
    whose class is later set to one with a finalizer (``_force``) gets that class's. Returns
    whether it was cleared (not where the layout check fails: ``__del__`` then runs)."""
    off = _finalize_slot()
    if off is None or "__del__" not in cls.__dict__ or cls.__subclasses__():
        return False
    ctypes.c_void_p.from_address(id(cls) + off).value = None
    return True


def warm():
    """Compile (or load from the cache) the untracking loop (``nautograd warmup``)."""
    empty = [object()]
    _untrack(_INT64_AT(id(empty) + 24).value, 1, 0, 0, _LIKE)


def track(obj):
    """Track ``obj`` again (a deferred result that became an ordinary tensor)."""
    if _TRACK is not None and not gc.is_tracked(obj):
        _TRACK(obj)
