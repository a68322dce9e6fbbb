"""Shared compiled helpers for kernels: jit options, saved-value access, broadcast indexing,
and the C entry points through which the compiled engine calls each kernel."""

import types as pytypes

import numba
import numpy as np
from llvmlite import binding, ir
from numba import types
from numba.core import cgutils
from numba.extending import get_cython_function_address, intrinsic

from .._numba_setup import cache_here

# Kernels are only ever called from compiled code, never from Python: without the
# CPython/cfunc wrappers they compile ~30% faster (measured on 50 kernels).
# They are not cached themselves: each is compiled into its C entry point (``entry`` below),
# which is, on first use.
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
    """Reinterpret an integer address as a pointer to ``like``'s element type (``like``: an
    array, or a NumPy scalar class such as ``np.int64``)."""
    dtype = like.dtype if isinstance(like, types.Array) else like.instance_type
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
    forward's scalar add: 75 -> 16 ns; docs/architecture.md "Kernels and their entry
    points"). Views with no owner skip it. The caller keeps ``a`` alive while the view is
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


# Matrix products run in scipy's BLAS, through its public Cython API (the routines Numba's
# own np.dot calls), bound to symbols of our own when this module loads so that cached
# kernels find them by name. Large forward products run there too (kernels/linalg.py), so
# that one BLAS thread pool serves both passes: numpy's and scipy's OpenBLAS each spin a pool
# of their own, and mixing the two made a 128x784x256 float32 product take 3.4 ms instead of
# 0.44 ms on 2 cores.
def _bind(library, routine):
    """Bind scipy's float32 and float64 ``routine`` (``scipy.linalg.cython_<library>``) to
    symbols of our own; returns them by dtype letter."""
    symbols = {}
    for k in "sd":
        symbols[k] = name = f"nautograd_{k}{routine}"
        address = get_cython_function_address(f"scipy.linalg.cython_{library}", k + routine)
        binding.add_symbol(name, address)
    return symbols


def _fortran_call(symbols, kinds, dtype):
    """The codegen of an intrinsic calling a routine bound by ``_bind`` for ``dtype``, every
    argument by address as Fortran takes them: ``kinds`` has one letter an argument, "c" a
    character, "i" a 32-bit int, "f" a number of ``dtype``, "p" an array's data."""
    name = symbols["s" if dtype == types.float32 else "d"]

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [_VOIDP] * len(kinds)), name
        )
        a = _CallArgs(context, builder, signature, args)

        def ref(value):
            return builder.bitcast(cgutils.alloca_once_value(builder, value), _VOIDP)

        call_args = []
        for i, kind in enumerate(kinds):
            if kind == "p":
                call_args.append(a.data(i))
            elif kind == "f":
                call_args.append(ref(a.cast(i, dtype)))
            else:
                call_args.append(ref(a.integer(i, _CHAR if kind == "c" else _I32)))
        builder.call(fn, call_args)
        return context.get_dummy_value()

    return codegen


_GEMM_SYMBOLS = _bind("blas", "gemm")
_NO_TRANS, _TRANS = ord("N"), ord("T")


@intrinsic
def _blas_gemm(typingctx, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """Column-major ``c = alpha * op(a) @ op(b) + beta * c`` (Fortran BLAS: every argument by
    address, 32-bit sizes) through the symbol bound above for ``c``'s dtype."""
    sig = types.void(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    return sig, _fortran_call(_GEMM_SYMBOLS, "cciiifpipifpi", c.dtype)


# Triangular solves (the Cholesky factor's backward, solve_triangular's) in the same BLAS
_TRSM_SYMBOLS = _bind("blas", "trsm")


@intrinsic
def _blas_trsm(typingctx, side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb):
    """Column-major ``b = alpha * op(a)^-1 @ b`` (side "L") or ``alpha * b @ op(a)^-1``
    ("R"), ``a`` triangular, through the symbol bound above for ``b``'s dtype."""
    sig = types.void(side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb)
    return sig, _fortran_call(_TRSM_SYMBOLS, "cccciifpipi", b.dtype)


@numba.njit(inline="always")
def trsm(b, a, left, trans, lower, unit):
    """``b = op(a)^-1 @ b`` (``left``) or ``b @ op(a)^-1``, in place, for C-contiguous 2-D
    arrays of one dtype: ``a`` triangular (only its ``lower`` or upper triangle is read; its
    diagonal taken as ones with ``unit``), ``op`` transposing it when asked. A zero on the
    diagonal gives inf and nan, as torch's. Row-major arrays read column-major are their
    transposes: a left solve is BLAS's right solve, and a lower triangle its upper one."""
    p, q = b.shape
    if p == 0 or q == 0:
        return
    side = ord("R") if left else ord("L")
    uplo = ord("U") if lower else ord("L")
    _blas_trsm(side, uplo, _TRANS if trans else _NO_TRANS, ord("U") if unit else ord("N"),
               q, p, 1.0, a, max(1, a.shape[1]), b, max(1, q))  # fmt: skip


# A solve's backward reuses its forward's LU factors (LAPACK getrs, in scipy's LAPACK)
_GETRS_SYMBOLS = _bind("lapack", "getrs")


@intrinsic
def _lapack_getrs(typingctx, trans, n, nrhs, a, lda, ipiv, b, ldb, info):
    """Column-major ``b = op(A)^-1 @ b`` from A's LU factors ``a`` and 1-based pivots
    ``ipiv`` (int32), through the symbol bound above for ``b``'s dtype."""
    sig = types.void(trans, n, nrhs, a, lda, ipiv, b, ldb, info)
    return sig, _fortran_call(_GETRS_SYMBOLS, "ciipippip", b.dtype)


@numba.njit(inline="always")
def lu_solve_t(b, lu, ipiv, info):
    """``b = A^-T @ b`` in place for a C-contiguous ``b`` of shape (k, n) holding the n x k
    right-hand side column by column (its column-major reading), from A's LU factors ``lu``
    (n * n values, column-major, as LAPACK's getrf leaves them) and 1-based int32 pivots."""
    k, n = b.shape
    if k == 0 or n == 0:
        return
    _lapack_getrs(_TRANS, n, k, lu, max(1, n), ipiv, b, max(1, n), info)


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
    # leading dimensions are the row lengths (BLAS wants them >= 1)
    ty = _TRANS if trans_y else _NO_TRANS
    tx = _TRANS if trans_x else _NO_TRANS
    _blas_gemm(ty, tx, n, m, k, 1.0, y, max(1, y.shape[1]), x, max(1, x.shape[1]), beta, c, n)


# ---------------------------------------------------------------------------------------------
# C entry points: the engine calls every kernel through the address of a ``cfunc`` compiled
# (or loaded from the cache) the first time a graph needs it, so a first backward compiles
# only its own kernels and the engine itself never depends on a kernel's code
# (measured: an address table and an intrinsic call, ~12 ns a node,
# against ~7 for a compiled ``if`` chain that compiles every kernel with the engine).
#
# A backward entry takes ``a``, an int64 array of its arguments' addresses and lengths
# (``BACKWARD_ARGS``), and two pointers that give the dtypes: ``g`` the node's arena of saved
# values (its dtype is the node's), ``g2`` any address of the other floating dtype. A lazy
# (deferred) forward entry takes ``a`` (``LAZY_ARGS``) and the value store ``S``. Entries
# return 0 (a lazy one: its number of outputs), or -1 when the kernel raised (only a
# bounds-checked build raises).

_P64, _P32, _PI = (
    types.CPointer(types.float64),
    types.CPointer(types.float32),
    types.CPointer(types.int64),
)
BACKWARD_SIGS = (types.int64(_PI, _P64, _P32), types.int64(_PI, _P32, _P64))
LAZY_SIG = types.int64(_PI, _P64)
LAZY = 2  # the kernel table's column of lazy entries (kernels/registry.py kernel_table)
# a[k], a[k + 1]: address and length of go, gi, so, sa, ip, fp; a[12]: length of V
BACKWARD_ARGS = 13
# a[k], a[k + 1]: address and length of xo, xn, ip, fp, oo, on; a[12], a[13]: k, top;
# a[14]: length of S
LAZY_ARGS = 15


@numba.njit(inline="always")
def _ints(A, k):
    return numba.carray(_ptr_like(A[k], np.int64), (A[k + 1],))


@numba.njit(inline="always")
def _floats(A, k):
    return numba.carray(_ptr_like(A[k], np.float64), (A[k + 1],))


# (the kernel is a global of each entry, bound by ``entry``: passed as an argument, a
# dispatcher is a Python object the compiled code refers to, which Numba cannot cache)
def _backward_entry(a, g, g2):
    A = numba.carray(a, (BACKWARD_ARGS,))
    G = numba.carray(g, (1,))
    G2 = numba.carray(g2, (1,))
    V = numba.carray(g, (A[12],))
    try:
        KERNEL_FN(G, G2, _ints(A, 0), _ints(A, 2), V, _ints(A, 4), _ints(A, 6), _ints(A, 8),  # noqa: F821
                  _floats(A, 10))  # fmt: skip
    except Exception:  # noqa: BLE001 -- a C entry cannot raise: the engine raises instead
        return -1
    return 0


def _lazy_entry(a, g):
    A = numba.carray(a, (LAZY_ARGS,))
    S = numba.carray(g, (A[14],))
    try:
        return KERNEL_FN(S, _ints(A, 0), _ints(A, 2), A[12], A[13], _ints(A, 4), _floats(A, 6),  # noqa: F821
                         _ints(A, 8), _ints(A, 10))  # fmt: skip
    except Exception:  # noqa: BLE001
        return -1


def entry(kernel_fn, name, sig):
    """The ``cfunc`` entry point of ``kernel_fn`` for ``sig`` (one of ``BACKWARD_SIGS`` or
    ``LAZY_SIG``), compiled now or loaded from the cache. ``name``, unique per kernel (the
    first op declared with it), names its cache files.

    Each entry is a copy of one of the two templates above with ``KERNEL_FN`` bound in its
    globals (not a closure: Numba caches closures under a new key in every process)."""
    template = _lazy_entry if sig is LAZY_SIG else _backward_entry
    scope = dict(template.__globals__)
    scope["KERNEL_FN"] = kernel_fn
    fn = pytypes.FunctionType(template.__code__, scope, name)
    fn.__qualname__ = name
    with cache_here():
        return numba.cfunc(sig, cache=True)(fn)


def _indirect_call(context, builder, signature, args):
    """Call the C function whose address is ``args[0]`` with the others as pointers."""
    i64 = ir.IntType(64)
    ptr = i64.as_pointer()
    values = [
        context.cast(builder, v, t, types.int64) for v, t in zip(args, signature.args, strict=True)
    ]
    fnty = ir.FunctionType(i64, [ptr] * (len(values) - 1))
    fn = builder.inttoptr(values[0], fnty.as_pointer())
    return builder.call(fn, [builder.inttoptr(v, ptr) for v in values[1:]])


@intrinsic
def call_address(typingctx, addr, a, g, g2):
    """Call the C function at ``addr`` with three pointers (``a``, ``g``, ``g2``: integer
    addresses); returns its int64 result. The engine calls kernel entries through this."""
    return types.int64(addr, a, g, g2), _indirect_call


@intrinsic
def call_address2(typingctx, addr, a, g):
    """``call_address`` for a C function of two pointers (the lazy forwards' entries)."""
    return types.int64(addr, a, g), _indirect_call
