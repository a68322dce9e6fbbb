"""User-defined compiled ops (the role of ``torch.library.custom_op``; JAX's ``custom_jvp``).

A user declares an elementwise op from two scalar formulas, its forward and its derivative,
and gets what a built-in unary op gets: a compiled forward (eager, and in the deferred batch
for small float64 tensors), a compiled backward kernel that the engine calls inside its
compiled walk (no Python per node, unlike a custom ``autograd.Function``), gradcheck, and
``create_graph`` when the derivative is written with the functions of ``library.math``::

    import nautograd as ng
    from nautograd.library import elementwise, math as m

    softsign = elementwise(
        "mylib::softsign",
        forward=lambda x: x / (1.0 + abs(x)),
        derivative=lambda x: 1.0 / ((1.0 + abs(x)) * (1.0 + abs(x))),
    )
    y = softsign(ng.tensor([0.5, -2.0], requires_grad=True))

The formulas are plain Python functions of floats, compiled by Numba: arithmetic,
comparisons, ``abs``, ``min``/``max``, the functions of Python's ``math`` (compiled code
only) and of ``library.math`` (compiled code and tensors). The derivative takes the input
``x``, the result ``result``, or both, by those names; the op's node saves what it reads.
Kernels compile on first use and are cached on disk, keyed by the formulas' source.
"""

import hashlib
import inspect
import re
import types as pytypes

import numba

from . import _numba_setup
from .kernels import pointwise, scalar
from .kernels.registry import OP_BY_NAME

__all__ = ["elementwise", "math"]

math = scalar  # the vocabulary: exp, log, sqrt, sin, cos, tanh, sigmoid, erf, where, ...

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*$")


def _code_bytes(code):
    """A code object's instructions, names and constants (nested code objects included)."""
    parts = [code.co_code, repr(code.co_names).encode(), repr(code.co_varnames).encode()]
    for c in code.co_consts:
        parts.append(_code_bytes(c) if hasattr(c, "co_code") else repr(c).encode())
    return b"\0".join(parts)


def _source_key(*fns):
    """A short hash of the functions' code: a kernel compiled from an edited formula must not
    be loaded from the cache, and the same formula declared twice is the same op."""
    h = hashlib.sha256()
    for fn in fns:
        h.update(_code_bytes(fn.__code__))
    return h.hexdigest()[:12]


def _template_loop(x, out):
    for i in range(x.size):
        out[i] = FORWARD(x[i])  # noqa: F821 -- bound per op by _forward_loop


def _forward_loop(fn, name):
    """The eager forward ``loop(x_flat, out_flat)``: a copy of ``_template_loop`` with the
    user's formula bound as a global (not a closure, which Numba could not cache), cached in
    nautograd's cache directory under a name that carries the formula's hash."""
    scope = dict(_template_loop.__globals__)
    scope["FORWARD"] = fn
    loop = pytypes.FunctionType(_template_loop.__code__, scope, name)
    loop.__qualname__ = name
    with _numba_setup.cache_here():
        return numba.njit(cache=True, nogil=True, error_model="numpy")(loop)


def elementwise(name, forward, derivative, *, select=False):
    """Declare an elementwise op ``result = forward(x)`` with ``d result / d x =
    derivative(x)`` (or ``derivative(result)``, or ``derivative(x, result)``: by parameter
    name). Returns the op as a function of one tensor, float32 or float64 (integer inputs are
    promoted, as torch's unary math functions do).

    ``name``: ``"namespace::name"``, as torch.library's. ``select=True``: where the
    derivative is 0 no gradient passes at all, not ``0 * grad`` (a NaN gradient gives 0
    there), as torch's masked backwards (relu, clamp).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"library.elementwise: name must look like 'namespace::op_name', got {name!r}"
        )
    if not callable(forward) or not callable(derivative):
        raise TypeError("library.elementwise: forward and derivative must be functions")
    params = list(inspect.signature(derivative).parameters)
    if not params or any(p not in ("x", "result") for p in params):
        raise TypeError(
            "library.elementwise: the derivative takes x, result, or both (by those names), "
            f"got parameters {params}"
        )
    reads_x, reads_result = "x" in params, "result" in params
    saves = "both" if reads_x and reads_result else ("x" if reads_x else "result")
    key = _source_key(forward, derivative)
    op_name = name.replace("::", "_") + "_" + key
    if op_name in OP_BY_NAME:  # (the same formulas declared again: the same op)
        return OP_BY_NAME[op_name].user_function

    f = numba.njit(inline="always", error_model="numpy")(forward)
    user_d = numba.njit(inline="always", error_model="numpy")(derivative)

    if saves == "both" and params[0] == "x":

        def d(x, r, p0, p1):
            return user_d(x, r)

    elif saves == "both":

        def d(x, r, p0, p1):
            return user_d(r, x)

    elif saves == "x":

        def d(x, r, p0, p1):
            return user_d(x)

    else:

        def d(x, r, p0, p1):
            return user_d(r)

    def tensor_d(x, r, p0, p1):
        args = {"x": x, "result": r}
        try:
            return derivative(*(args[p] for p in params))
        except (TypeError, RuntimeError, ValueError) as e:  # (math.exp of a tensor)
            raise NotImplementedError(
                f"create_graph through {name}: its derivative must be written with the "
                "functions of nautograd.library.math (not Python's math) to be evaluated on "
                f"tensors ({e})"
            ) from e

    loop = _forward_loop(f, "library_forward_" + op_name)

    def eager(x_flat, out_flat):
        loop(x_flat, out_flat)

    op = pointwise.unary(
        op_name,
        eager,
        d,
        saves=saves,
        select=select,
        lazy=lambda x, p0, p1: f(x),
        into=True,
        tensor_d=tensor_d,
        node_name="".join(p.capitalize() for p in re.split("[_:]+", name)) + "Backward0",
        methods=(),
        functions=(),
        cases=[],
        library=True,
    )
    from .tensor import _frontend

    fn = _frontend(op)
    fn.__name__ = name.split("::")[1]
    fn.__qualname__ = fn.__name__
    fn.__doc__ = f"The user-defined op {name} (nautograd.library.elementwise)."
    op.user_function = fn
    return fn
