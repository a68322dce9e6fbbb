"""Shared compiled helpers for kernels: jit options, saved-value access, broadcast indexing."""

import ctypes
import glob
import os

import numba
import numpy as np
from llvmlite import binding, ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# Kernels are only ever called from the compiled scheduler, never from Python: without the
# CPython/cfunc wrappers they compile ~30% faster (reference/numba-measured.md, 1.2).
# They are not cached themselves: the scheduler that calls them is, and its module carries
# a hash of every kernel file so a kernel edit invalidates it (graph/scheduler.py).
# error_model="numpy": a float division by zero gives inf/nan as in torch instead of raising
# ZeroDivisionError out of the scheduler (log's backward at 0 did), and without that check
# LLVM can vectorise loops that divide.
# fastmath "contract" only (fused multiply-adds: one rounding less, no reassociation): the
# gelu backward's erf/exp polynomials at 10^6 elements take 6.8 ms instead of 11.5 ms.
KERNEL = dict(
    nogil=True,
    no_cpython_wrapper=True,
    no_cfunc_wrapper=True,
    error_model="numpy",
    fastmath={"contract"},
)
kernel = numba.njit(**KERNEL)


@intrinsic
def _ptr_like(typingctx, addr, like):
    """Reinterpret an integer address as a pointer to ``like``'s element type."""
    dtype = like.dtype
    sig = types.CPointer(dtype)(addr, like)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(dtype)))

    return sig, codegen


@numba.njit(inline="always")
def borrow(a):
    """A view of ``a`` without a reference-counted owner.

    Numba increments and decrements (atomically) the owner of every array it passes to a
    call and of every slice it takes, inlined calls included; for scalar ops that counting
    cost more than their work (the scheduler's kernels: ~85 ns a call; the deferred
    forward's scalar add: 75 -> 16 ns; DESIGN-NOTES "Kernels receive borrowed array
    views"). Views with no owner skip it. The caller keeps ``a`` alive while the view is
    used: an argument of the compiled function (Python holds it), or a local array used
    again after the last use of the view.
    """
    return numba.carray(_ptr_like(a.ctypes.data, a), a.shape)


@numba.njit(inline="always")
def saved(V, so, sa, k, n):
    """The k-th saved value of a node, ``n`` elements long.

    Small values are copied into the tape's value arena ``V`` at offset ``so[k]``; large ones
    stay where they are and are read through their address ``sa[k]`` (``so[k] == -1``).
    """
    if so[k] >= 0:
        return V[so[k] : so[k] + n]
    return numba.carray(_ptr_like(sa[k], V), (n,))


@numba.njit(inline="always")
def saved_index(sa, k, n):
    """The k-th saved value of a node as int64 (integer saved values are always kept by
    address, see graph/tape.py): index maps of gathering ops."""
    return numba.carray(_ptr_like(sa[k], sa), (n,))


@numba.njit(inline="always")
def view(G, slot, n):
    """The gradient buffer at ``slot``, ``n`` elements of ``G``'s dtype.

    Slots are absolute addresses in units of the element size (``address // itemsize``), so
    a buffer may live in the tape's arena or in an array of its own (a leaf's new ``.grad``)
    and element offsets still add to them (``slot + b * m * k``). ``G`` gives only the dtype.
    """
    return numba.carray(_ptr_like(slot * G.itemsize, G), (n,))


def assigning(k):
    """Mark a kernel that honours the *assign* flags: ``gi[len_inputs + j] == 1`` says input
    j's buffer is fresh (uninitialised) and this kernel is its first writer, so it must
    store (``=``) every element instead of adding. Other kernels only ever see zeroed or
    already written buffers (the scheduler zeroes a fresh buffer before their call). Saves
    the zero fill and one read of every buffer with a single producer (measured: exp at
    10^6 elements, benchmarks/op_families.py)."""
    k.assigns = True
    return k


def parallel(k):
    """Mark a kernel that can run in parts on several threads (graph/scheduler.py hands a
    large node of such a kernel to the intra-op threads, see nautograd/_threads.py).

    ``gi`` then carries two more entries after the inputs' slots and assign flags:
    ``gi[2 * len_inputs]`` is this call's part ``p`` and ``gi[2 * len_inputs + 1]`` the
    number of parts ``P`` (``0, 1`` for an ordinary call). The parts of one node run at once:
    each must write a disjoint set of gradient elements (``part`` gives its share of a loop),
    and a part's zeroing of a fresh buffer must cover only those elements. Work that cannot
    be split (a reduction into a broadcast operand's gradient) is done whole by part 0.
    """
    k.parallel = True
    return k


@numba.njit(inline="always")
def part(gi, nin, units):
    """``(lo, hi)``: this call's share of ``units`` equal pieces of work (see ``parallel``)."""
    p = gi[2 * nin]
    parts = gi[2 * nin + 1]
    return units * p // parts, units * (p + 1) // parts


@numba.njit(inline="always")
def scaled_into(grad, g, a, lo, hi, assign):
    """``grad[lo:hi] = a * g[lo:hi]`` into a fresh buffer (``assign``, see ``assigning``),
    else ``+=``: one loop per case, over slices indexed from 0, so that each vectorises
    (``grad[i]`` over ``range(lo, hi)`` keeps numba's negative-index branch and stays scalar:
    32,768 float32 elements 19.8 -> 2.5 us)."""
    out = grad[lo:hi]
    src = g[lo:hi]
    if a == 1.0:
        # (exact either way: a float32 sum rounded once; without the float64 product the
        # loops convert nothing: a 32,768-element copy 2.0 -> 1.6 us)
        if assign:
            for i in range(hi - lo):
                out[i] = src[i]
        else:
            for i in range(hi - lo):
                out[i] += src[i]
    elif assign:
        for i in range(hi - lo):
            out[i] = a * src[i]
    else:
        for i in range(hi - lo):
            out[i] += a * src[i]


@kernel
def bcast_offsets(ip, base, nd, k, n):
    """Offsets into operand ``k`` for each element of a broadcast result, in C order.

    ``ip[base : base + nd]`` is the result shape, ``ip[base + nd*(1+k) : ...]`` operand k's
    element strides in that shape (0 along broadcast dimensions).
    """
    offs = np.empty(n, np.int64)
    if n == 0:
        return offs
    idx = np.zeros(nd, np.int64)
    sbase = base + nd * (1 + k)
    last = nd - 1
    inner = ip[base + last]
    sinner = ip[sbase + last]
    o = 0
    i = 0
    while i < n:
        for j in range(inner):
            offs[i + j] = o + j * sinner
        i += inner
        # advance the odometer over the outer dimensions
        d = last - 1
        while d >= 0:
            idx[d] += 1
            o += ip[sbase + d]
            if idx[d] < ip[base + d]:
                break
            o -= idx[d] * ip[sbase + d]
            idx[d] = 0
            d -= 1
    return offs


_CHAR = ir.IntType(8)
_VOIDP = ir.IntType(8).as_pointer()
_INTP = ir.IntType(64)
_I32 = ir.IntType(32)


class _CallArgs:
    """An intrinsic's arguments as LLVM values for a C call."""

    def __init__(self, context, builder, signature, args):
        self.context, self.builder = context, builder
        self.tys, self.args = signature.args, args

    def cast(self, i, ty):
        return self.context.cast(self.builder, self.args[i], self.tys[i], ty)

    def integer(self, i, ir_type=_INTP):
        value = self.cast(i, types.int64)
        return value if ir_type is _INTP else self.builder.trunc(value, ir_type)

    def data(self, i):
        """An array's data pointer (or a raw pointer as it is) as ``void *``."""
        if not isinstance(self.tys[i], types.Array):
            return self.builder.bitcast(self.args[i], _VOIDP)
        ary = self.context.make_array(self.tys[i])(self.context, self.builder, self.args[i])
        return self.builder.bitcast(ary.data, _VOIDP)


@intrinsic
def _xxgemm(typingctx, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """Column-major BLAS ``c = alpha * op(a) @ op(b) + beta * c`` through ``numba_xxgemm``,
    the entry point of Numba's helper library that its own ``np.dot`` calls (it reaches
    scipy's BLAS as np.dot does). ``a``, ``b``, ``c``: arrays, or raw pointers with the
    element type given by ``alpha``'s."""
    dtype = c.dtype if isinstance(c, types.Array) else alpha
    kind = ord("s") if dtype == types.float32 else ord("d")
    sig = types.int32(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(
            ir.IntType(32),
            [_CHAR, _CHAR, _CHAR, _INTP, _INTP, _INTP, _VOIDP, _VOIDP, _INTP]
            + [_VOIDP, _INTP, _VOIDP, _VOIDP, _INTP],
        )
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")
        a = _CallArgs(context, builder, signature, args)

        def slot(i):  # a scalar passed by pointer
            value = cgutils.alloca_once_value(builder, a.cast(i, dtype))
            return builder.bitcast(value, _VOIDP)

        call_args = [ir.Constant(_CHAR, kind), a.integer(0, _CHAR), a.integer(1, _CHAR)]
        call_args += [a.integer(2), a.integer(3), a.integer(4), slot(5), a.data(6)]
        call_args += [a.integer(7), a.data(8), a.integer(9), slot(10), a.data(11)]
        return builder.call(fn, call_args + [a.integer(12)])

    return sig, codegen


# The kernels' products call CBLAS gemm through two symbols of our own, bound when this
# module loads (so that cached kernels find them by name, as Numba's own helpers): to the
# OpenBLAS numpy's wheels bundle when there is one, where numpy's forward products run too:
# one thread pool for forward and backward, and OpenBLAS 0.3.31 there against scipy's 0.3.30
# (128x784x256 float32, one thread: 566 against 654 us). Otherwise (numpy built against
# another BLAS, or NAUTOGRAD_BLAS=scipy) to shims that call scipy's BLAS through Numba's
# helper library, and big forward products run there too (kernels/linalg.py).
_GEMM_SYMBOLS = {"s": "nautograd_cblas_sgemm", "d": "nautograd_cblas_dgemm"}
_COL_MAJOR, _NO_TRANS, _TRANS = 102, 111, 112


def _numpy_openblas(function):
    """{"s": f, "d": f}: the ctypes functions ``cblas_[sd]<function>`` of numpy's bundled
    OpenBLAS (ILP64: 64-bit sizes; the symbols carry a ``scipy_`` prefix and a ``64_``
    suffix), or None."""
    here = os.path.dirname(np.__file__)
    found = glob.glob(os.path.join(os.path.dirname(here), "numpy.libs", "*openblas64*"))
    found += glob.glob(os.path.join(here, ".dylibs", "*openblas64*"))
    for path in sorted(found):
        try:
            lib = ctypes.CDLL(path)  # the copy numpy loaded: dlopen returns its handle
            return {k: getattr(lib, f"scipy_cblas_{k}{function}64_") for k in "sd"}
        except (OSError, AttributeError):
            continue
    return None


def _numpy_cblas():
    """{"s": address, "d": address} of ``cblas_[sd]gemm`` in numpy's OpenBLAS, or None."""
    found = _numpy_openblas("gemm")
    if found is None:
        return None
    return {k: ctypes.cast(f, ctypes.c_void_p).value for k, f in found.items()}


def _scipy_cblas():
    """The fallback: CBLAS-shaped entry points (column-major only, which ``gemm`` passes)
    that call scipy's BLAS through Numba's helper library. Compiled at load (~0.5 s), so
    only when numpy's OpenBLAS is not there."""

    def make(dt):
        sig = types.void(
            types.int32, types.int32, types.int32, types.int64, types.int64, types.int64,
            dt, types.voidptr, types.int64, types.voidptr, types.int64, dt, types.voidptr,
            types.int64,
        )  # fmt: skip

        def cblas_gemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
            # CblasTrans is "t", CblasNoTrans "n"
            tra = 116 if ta == _TRANS else 110
            trb = 116 if tb == _TRANS else 110
            _xxgemm(tra, trb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

        return numba.cfunc(sig, nopython=True)(cblas_gemm).address

    return {"s": make(types.float32), "d": make(types.float64)}


def _bind_gemm():
    choice = os.environ.get("NAUTOGRAD_BLAS", "numpy").lower()
    addresses = _numpy_cblas() if choice != "scipy" else None
    library = "numpy" if addresses else "scipy"
    if addresses is None:
        addresses = _scipy_cblas()
    for k, name in _GEMM_SYMBOLS.items():
        binding.add_symbol(name, addresses[k])
    return library


# "numpy" or "scipy": whose OpenBLAS the kernels' products (and big forward products) use
GEMM_LIBRARY = _bind_gemm()


def _bind_axpy():
    """{dtype: ctypes cblas_[sd]axpy(n, alpha, x, incx, y, incy)} of numpy's OpenBLAS when
    the products run there (its threads are the ones already awake), else empty."""
    found = _numpy_openblas("axpy") if GEMM_LIBRARY == "numpy" else None
    if found is None:
        return {}
    out = {}
    for k, dt, c in (("s", np.float32, ctypes.c_float), ("d", np.float64, ctypes.c_double)):
        f = found[k]
        f.argtypes = [ctypes.c_int64, c, ctypes.c_void_p, ctypes.c_int64]
        f.argtypes += [ctypes.c_void_p, ctypes.c_int64]
        f.restype = None
        out[np.dtype(dt)] = f
    return out


# y += alpha * x for big contiguous arrays (Tensor.add_/sub_ under no_grad, an SGD update's
# ``p -= t``; tensor.py AXPY_MIN says from what size): OpenBLAS splits an axpy of more than
# 10,000 elements over its threads, numpy's loop runs on one
AXPY = _bind_axpy()


@intrinsic
def _cblas_gemm(typingctx, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """Column-major ``c = alpha * op(a) @ op(b) + beta * c`` (CBLAS, 64-bit sizes) through
    the symbol bound above for ``c``'s dtype."""
    dtype = c.dtype
    fl = ir.FloatType() if dtype == types.float32 else ir.DoubleType()
    name = _GEMM_SYMBOLS["s" if dtype == types.float32 else "d"]
    sig = types.void(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(
            ir.VoidType(),
            [_I32, _I32, _I32, _INTP, _INTP, _INTP, fl, _VOIDP, _INTP]
            + [_VOIDP, _INTP, fl, _VOIDP, _INTP],
        )
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        a = _CallArgs(context, builder, signature, args)
        call_args = [ir.Constant(_I32, _COL_MAJOR), a.integer(0, _I32), a.integer(1, _I32)]
        call_args += [a.integer(2), a.integer(3), a.integer(4), a.cast(5, dtype), a.data(6)]
        call_args += [a.integer(7), a.data(8), a.integer(9), a.cast(10, dtype), a.data(11)]
        builder.call(fn, call_args + [a.integer(12)])
        return context.get_dummy_value()

    return sig, codegen


# The products gemm hands to loops of its own instead of BLAS: a matrix-vector product or an
# outer product. OpenBLAS runs them through its gemm kernels (no gemv/ger redirect) and
# buffer set-up: on an AMD EPYC (Zen, DYNAMIC_ARCH Haswell kernels) a 32x32 float64 matrix
# times a vector took 490-600 ns against ~230 here, 1024x1024 ~800 us against ~190
# (benchmarks/small_products.py). Reassociation lets the dot products vectorise.
_LOOP = {**KERNEL, "fastmath": KERNEL["fastmath"] | {"reassoc"}}


@numba.njit(**_LOOP)
def _dots(out, a, v, beta):
    """``out[i] = beta * out[i] + a[i, :] @ v`` (``beta`` 0 or 1; 0 ignores ``out``)."""
    p, q = a.shape
    zero = out.dtype.type(0)
    for i in range(p):
        s = zero
        row = a[i]
        for j in range(q):
            s += row[j] * v[j]
        out[i] = s if beta == 0.0 else out[i] + s


@numba.njit(**_LOOP)
def _axpys(out, a, v, beta):
    """``out[j] = beta * out[j] + v @ a[:, j]``: out plus each row of ``a`` scaled by v."""
    p, q = a.shape
    if beta == 0.0:
        out[:] = 0
    for i in range(p):
        s = v[i]
        row = a[i]
        for j in range(q):
            out[j] += s * row[j]


@numba.njit(**_LOOP)
def _ger(c, x, y, beta):
    """``c = beta * c + outer(x, y)``."""
    m, n = c.shape
    for i in range(m):
        s = x[i]
        row = c[i]
        if beta == 0.0:
            for j in range(n):
                row[j] = s * y[j]
        else:
            for j in range(n):
                row[j] += s * y[j]


@numba.njit(inline="always")
def gemm(c, x, y, trans_x, trans_y, beta):
    """``c = op(x) @ op(y) + beta * c`` for C-contiguous 2-D arrays of one dtype, ``op``
    transposing when asked: no temporary and no transposed copy, which ``c += np.dot(x.T,
    y)`` makes (a 784 x 256 float32 weight gradient: 0.69 ms against 0.59 ms in BLAS).
    ``beta == 0`` stores into ``c`` (its old contents, even NaN, are ignored, as BLAS
    specifies). Row-major ``c = X @ Y`` is column-major ``c^T = Y^T @ X^T``, and a
    row-major array read column-major is its own transpose, so the operands swap places."""
    m, n = c.shape
    k = x.shape[0] if trans_x else x.shape[1]
    if m == 0 or n == 0:
        return
    # a vector operand, op(x) (m, k) @ op(y) (k, n) with k, n or m 1: loops (see _LOOP);
    # a vector's elements are in order whether it is transposed or not
    if k == 1:
        _ger(c, x.reshape(x.size), y.reshape(y.size), beta)
        return
    if n == 1 and k > 1:
        if trans_x:  # x (k, m): c = sum over l of y[l] * x[l, :]
            _axpys(c.reshape(m), x, y.reshape(k), beta)
        else:  # x (m, k): c[i] = x[i, :] @ y
            _dots(c.reshape(m), x, y.reshape(k), beta)
        return
    if m == 1 and k > 1:
        if trans_y:  # y (n, k): c[j] = y[j, :] @ x
            _dots(c.reshape(n), y, x.reshape(k), beta)
        else:  # y (k, n): c = sum over l of x[l] * y[l, :]
            _axpys(c.reshape(n), y, x.reshape(k), beta)
        return
    if _gemm.enabled():  # our own products (AVX-512 CPUs, kernels/_gemm.py)
        _gemm.gemm(c, x, y, trans_x, trans_y, beta)
        return
    # leading dimensions are the row lengths (BLAS wants them >= 1)
    ty = _TRANS if trans_y else _NO_TRANS
    tx = _TRANS if trans_x else _NO_TRANS
    _cblas_gemm(ty, tx, n, m, k, 1.0, y, max(1, y.shape[1]), x, max(1, x.shape[1]), beta, c, n)


# (imported last: _gemm takes _ptr_like from here; ``gemm`` above reads it only when compiled)
from . import _gemm  # noqa: E402
