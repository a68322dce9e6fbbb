"""Shared compiled helpers for kernels: jit options, saved-value access, broadcast indexing."""

import numba
import numpy as np
from numba import types
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
    else ``+=``: one loop per case, so that each vectorises."""
    if assign:
        for i in range(lo, hi):
            grad[i] = a * g[i]
    else:
        for i in range(lo, hi):
            grad[i] += a * g[i]


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
