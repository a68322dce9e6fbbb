"""Deferred results die without a finalizer call.

A class inherits its base's ``__del__``: a deferred result (tensor.py ``_Lazy``) would run
Tensor's, which gives back a tape handle a deferred result does not have, so ``_Lazy``
overrides it with a no-op, and ``drop_finalizer`` clears the type's ``tp_finalize`` so that
CPython does not even call that (~20 ns of a deferred result's ~60 ns death). The slot's
offset is checked at import against classes with and without ``__del__``; where the check
fails nothing changes.
"""

import ctypes
import sys

from .tape import _INT64_AT

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
