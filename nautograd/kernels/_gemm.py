"""Matrix products of our own for CPUs with AVX-512, split over spinning worker threads.

``gemm`` computes ``c = op(x) @ op(y) + beta * c`` (``beta`` 0 or 1) with a micro-kernel
written in LLVM IR (``_ukernel``: an MR x NR block of ``c`` in 2 * MR vector registers, one
fused multiply-add a register and a step of k) over operands read in place: ``op(y)`` is
packed only when transposed or at its last columns, ``op(x)`` never (the kernel broadcasts
its elements from any strides). On a 2-core AMD EPYC (Zen 5) VM whose environment pins
OpenBLAS to its Haswell (AVX2) kernels (``OPENBLAS_CORETYPE=Haswell``), one thread of it
runs the MLP benchmark's (128, 784) @ (784, 256) float32 product at ~250 GFLOP/s against
OpenBLAS's 122 (one thread) and 227 (two); split over two threads 450-490 GFLOP/s
(DESIGN-NOTES "Our own matrix products").

A product of at least PAR_WORK multiply-adds is split by column tiles (or row tiles) over
the calling thread and the workers spinning at that moment. A worker spins in compiled code,
without the GIL, on a line of its own in a control block (``_CTL``, bound to a symbol the
compiled scheduler finds by name, as ``_jit``'s BLAS symbols), and after SPIN_S without work
parks in Python until ``ready`` wakes it: the forward's products call it first, the engine
before a backward, and a product that found a worker parked leaves a wake request.

Used when the CPU has AVX-512 and ``NAUTOGRAD_GEMM`` is not ``blas``; otherwise the products
go to BLAS (kernels/_jit.py).
"""

import atexit
import os
import platform
import threading
import time

import numba
import numpy as np
from llvmlite import binding, ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import _threads
from .._threads import get_num_threads, on_num_threads
from ._jit import _ptr_like

MR = 8  # rows of c a micro-kernel call computes
NV = 2  # vector registers of c's row it computes (NR = NV * lanes columns)
KC = 256  # the k depth of one pass over c
MC_TILES = 32  # MR-row tiles of A in a block (256 rows x KC: 256 KB float32)
_OPTS = dict(nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True, error_model="numpy")
_I64 = ir.IntType(64)
_I32 = ir.IntType(32)


def _splat(builder, vty, value):
    lanes = vty.count
    one = builder.insert_element(ir.Constant(vty, ir.Undefined), value, ir.Constant(_I32, 0))
    mask = ir.Constant(ir.VectorType(_I32, lanes), [0] * lanes)
    return builder.shuffle_vector(one, ir.Constant(vty, ir.Undefined), mask)


def _make_ukernel(nv):
    @intrinsic
    def _ukernel(typingctx, a, a_off, ars, aks, b, b_off, bks, c, c_off, crs, kc, beta):
        """``C[i, :NR] = beta * C[i, :NR] + sum over k < kc of A[i, k] * B[k, :NR]`` for i < MR:
        A's element (i, k) at ``a[a_off + i * ars + k * aks]``, B's row k at ``b[b_off + k * bks]``
        (NR contiguous elements), C's row i at ``c[c_off + i * crs]``. ``beta`` 0 stores without
        reading C. The k loop keeps C's block in nv * MR registers (16 of 32 zmm for nv 2)."""
        dtype = c.dtype
        sig = types.void(a, a_off, ars, aks, b, b_off, bks, c, c_off, crs, kc, beta)

        def codegen(context, builder, signature, args):
            tys = signature.args
            fl = context.get_value_type(dtype)
            lanes = 16 if dtype == types.float32 else 8  # one 512-bit register
            vty = ir.VectorType(fl, lanes)
            align = 4 if dtype == types.float32 else 8
            fma = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(vty, [vty, vty, vty]),
                f"llvm.fma.v{lanes}{'f32' if dtype == types.float32 else 'f64'}",
            )

            def data(i):
                return context.make_array(tys[i])(context, builder, args[i]).data

            def i64(i):
                return context.cast(builder, args[i], tys[i], types.int64)

            a0 = builder.gep(data(0), [i64(1)])
            rows = [builder.gep(a0, [builder.mul(i64(2), ir.Constant(_I64, i))]) for i in range(MR)]
            aks_ = i64(3)
            b0 = builder.gep(data(4), [i64(5)])
            bks_ = i64(6)
            c0 = builder.gep(data(7), [i64(8)])
            crs_, kc_ = i64(9), i64(10)
            beta_ = context.cast(builder, args[11], tys[11], dtype)
            zero = ir.Constant(vty, [0.0] * lanes)
            entry = builder.block
            loop = builder.append_basic_block("uk.loop")
            done = builder.append_basic_block("uk.done")
            builder.cbranch(builder.icmp_signed(">", kc_, ir.Constant(_I64, 0)), loop, done)
            builder.position_at_end(loop)
            aoff, boff, k = builder.phi(_I64), builder.phi(_I64), builder.phi(_I64)
            acc = [[builder.phi(vty) for _ in range(nv)] for _ in range(MR)]
            brow = builder.gep(b0, [boff])
            bv = [
                builder.load(
                    builder.bitcast(
                        builder.gep(brow, [ir.Constant(_I64, v * lanes)]), vty.as_pointer()
                    ),
                    align=align,
                )
                for v in range(nv)
            ]
            new = []
            for i in range(MR):
                s = _splat(builder, vty, builder.load(builder.gep(rows[i], [aoff])))
                new.append([builder.call(fma, [s, bv[v], acc[i][v]]) for v in range(nv)])
            k1 = builder.add(k, ir.Constant(_I64, 1))
            aoff1, boff1 = builder.add(aoff, aks_), builder.add(boff, bks_)
            tail = builder.block
            builder.cbranch(builder.icmp_signed("<", k1, kc_), loop, done)
            for phi, first, nxt in ((aoff, 0, aoff1), (boff, 0, boff1), (k, 0, k1)):
                phi.add_incoming(ir.Constant(_I64, first), entry)
                phi.add_incoming(nxt, tail)
            for i in range(MR):
                for v in range(nv):
                    acc[i][v].add_incoming(zero, entry)
                    acc[i][v].add_incoming(new[i][v], tail)
            builder.position_at_end(done)
            res = []
            for i in range(MR):
                for v in range(nv):
                    phi = builder.phi(vty)
                    phi.add_incoming(zero, entry)
                    phi.add_incoming(new[i][v], tail)
                    res.append(phi)
            ptrs = []
            for i in range(MR):
                crow = builder.gep(c0, [builder.mul(crs_, ir.Constant(_I64, i))])
                for v in range(nv):
                    ptrs.append(
                        builder.bitcast(
                            builder.gep(crow, [ir.Constant(_I64, v * lanes)]), vty.as_pointer()
                        )
                    )
            is_zero = builder.fcmp_ordered("==", beta_, ir.Constant(fl, 0.0))
            with builder.if_else(is_zero) as (store, update):
                with store:
                    for r, p in zip(res, ptrs, strict=True):
                        builder.store(r, p, align=align)
                with update:
                    bs = _splat(builder, vty, beta_)
                    for r, p in zip(res, ptrs, strict=True):
                        builder.store(
                            builder.call(fma, [bs, builder.load(p, align=align), r]), p, align=align
                        )
            return context.get_dummy_value()

        return sig, codegen

    return _ukernel


_ukernel = _make_ukernel(NV)
# one register a row, for c of at most one register's width (a (128, 256) @ (256, 10)
# product computed 32 columns for 10 with two)
_ukernel1 = _make_ukernel(1)


@numba.njit(**_OPTS)
def _pack(panel, y, trans_y, k0, kc, j0, w, nr):
    """panel[k * nr + j] = op(y)[k0 + k, j0 + j] for j < w, 0 for w <= j < nr."""
    for k in range(kc):
        dst = panel[k * nr : k * nr + nr]
        if trans_y:
            for j in range(w):
                dst[j] = y[j0 + j, k0 + k]
        else:
            src = y[k0 + k, j0 : j0 + w]
            for j in range(w):
                dst[j] = src[j]
        for j in range(w, nr):
            dst[j] = 0


@numba.njit(**_OPTS)
def gemm_part(c, x, y, trans_x, trans_y, beta, p, parts):
    """Part ``p`` of ``parts`` of ``c = op(x) @ op(y) + beta * c``: a share of c's column
    tiles (or of its row tiles when there are fewer column tiles than parts)."""
    m, n = c.shape
    kk = x.shape[0] if trans_x else x.shape[1]
    lanes = 64 // c.itemsize
    nv = 1 if n <= lanes else NV
    nr = nv * lanes
    nt = (n + nr - 1) // nr
    mt = (m + MR - 1) // MR
    j_lo, j_hi, i_lo, i_hi = 0, nt, 0, mt
    if parts > 1:
        if nt >= parts:
            j_lo, j_hi = nt * p // parts, nt * (p + 1) // parts
        else:
            i_lo, i_hi = mt * p // parts, mt * (p + 1) // parts
    if kk == 0:
        if beta == 0.0:
            for i in range(i_lo * MR, min(i_hi * MR, m)):
                c[i, j_lo * nr : min(j_hi * nr, n)] = 0
        return
    # the last rows (fewer than MR) as _few_rows' sums, not an edge block of the micro-kernel
    # per column tile: (9, 4) @ (4, 3476) took 24 us that way against BLAS's 10
    m0 = m // MR * MR
    if i_hi * MR > m0:
        i_hi -= 1
        _few_rows(c, x, y, trans_x, trans_y, beta, m0, j_lo * nr, min(j_hi * nr, n))
    ars, aks = (1, x.shape[1]) if trans_x else (x.shape[1], 1)
    ny = y.shape[1]
    panel = np.empty(min(KC, kk) * nr, c.dtype)
    tile = np.empty(MR * nr, c.dtype)
    # flat views: every operand of the micro-kernel is one array type, whichever it reads
    xf, yf, cf = x.reshape(x.size), y.reshape(y.size), c.reshape(c.size)
    # A's rows in blocks of MC_TILES tiles, each block read from L2 by every column tile
    for k0 in range(0, kk, KC):
        kc = min(KC, kk - k0)
        b = beta if k0 == 0 else 1.0
        for ib in range(i_lo, i_hi, MC_TILES):
            for jt in range(j_lo, j_hi):
                j0 = jt * nr
                w = min(nr, n - j0)
                # op(y)'s rows read in place when contiguous and whole, else packed
                bsrc, b_off, bks = yf, k0 * ny + j0, ny
                if trans_y or w < nr:
                    _pack(panel, y, trans_y, k0, kc, j0, w, nr)
                    bsrc, b_off, bks = panel, 0, nr
                # a whole block of c in place; one of the last columns through ``tile``
                whole = w == nr
                for it in range(ib, min(ib + MC_TILES, i_hi)):
                    i0 = it * MR
                    a_off = i0 * ars + k0 * aks
                    csrc, c_off, c_rs, cb = cf, i0 * n + j0, n, b
                    if not whole:
                        csrc, c_off, c_rs, cb = tile, 0, nr, 0.0
                    if nv == 1:
                        _ukernel1(xf, a_off, ars, aks, bsrc, b_off, bks, csrc, c_off, c_rs, kc, cb)
                    else:
                        _ukernel(xf, a_off, ars, aks, bsrc, b_off, bks, csrc, c_off, c_rs, kc, cb)
                    if whole:
                        continue
                    for i in range(MR):
                        crow = c[i0 + i, j0 : j0 + w]
                        trow = tile[i * nr : i * nr + w]
                        if b == 0.0:
                            for j in range(w):
                                crow[j] = trow[j]
                        else:
                            for j in range(w):
                                crow[j] = b * crow[j] + trow[j]


# ---------------------------------------------------------------------------------------------
# worker threads (see the module's docstring)

MAX_WORKERS = 7
PAR_WORK = 1 << 20  # multiply-adds (~8 us of float32 work on one core)
SPIN_S = 0.002
_LINE = 8  # int64s in a 64-byte line
# the control block, int64: line 0 the settings, then two lines a worker (its state and job)
_USE, _WORKERS, _WAKE, _TIMEOUT = 0, 1, 2, 3
_W0 = _LINE
_STATE, _GO, _DONE, _PART, _PARTS, _FLAGS, _C, _X, _Y, _M, _N, _X0, _X1, _Y0, _Y1 = range(15)
_CTL_SIZE = _W0 + 2 * _LINE * MAX_WORKERS
NONE, SPINNING, CLAIMED, PARKED, EXIT = 0, 1, 2, 3, 4
_SYMBOL = "nautograd_gemm_control"


def _aligned_zeros(n):
    raw = np.zeros(n + _LINE, np.int64)
    skip = (-raw.ctypes.data % 64) // 8
    return raw[skip : skip + n]


_CTL = _aligned_zeros(_CTL_SIZE)
binding.add_symbol(_SYMBOL, _CTL.ctypes.data)


@intrinsic
def _control_ptr(typingctx):
    sig = types.CPointer(types.int64)()

    def codegen(context, builder, signature, args):
        g = builder.module.globals.get(_SYMBOL)
        if g is None:
            g = ir.GlobalVariable(builder.module, _I64, _SYMBOL)
            g.linkage = "external"
        return g

    return sig, codegen


@numba.njit(inline="always")
def _control():
    return numba.carray(_control_ptr(), (_CTL_SIZE,))


def _slot(context, builder, signature, args):
    a = context.make_array(signature.args[0])(context, builder, args[0])
    return builder.gep(a.data, [context.cast(builder, args[1], signature.args[1], types.int64)])


@intrinsic
def _load(typingctx, ctl, i):
    """``ctl[i]``, an acquire load."""

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_slot(context, builder, signature, args), "acquire", 8)

    return types.int64(ctl, i), codegen


@intrinsic
def _store(typingctx, ctl, i, value):
    """``ctl[i] = value``, a release store."""

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(v, _slot(context, builder, signature, args), "release", 8)
        return context.get_dummy_value()

    return types.void(ctl, i, value), codegen


@intrinsic
def _swap(typingctx, ctl, i, expected, new):
    """Compare-and-swap ``ctl[i]`` from ``expected`` to ``new``; True when it did."""

    def codegen(context, builder, signature, args):
        cast = [context.cast(builder, args[j], signature.args[j], types.int64) for j in (2, 3)]
        pair = builder.cmpxchg(
            _slot(context, builder, signature, args), *cast, "acq_rel", "acquire"
        )
        return builder.extract_value(pair, 1)

    return types.boolean(ctl, i, expected, new), codegen


@intrinsic
def _ticks(typingctx):
    """The CPU's cycle counter (calibrated against the wall clock at the first start)."""

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_I64, []), "llvm.readcyclecounter"
        )
        return builder.call(fn, [])

    return types.int64(), codegen


_X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")


@intrinsic
def _pause(typingctx):
    """A spin-wait hint (x86 ``pause``)."""

    def codegen(context, builder, signature, args):
        if _X86:
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause"
            )
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@numba.njit(**_OPTS)
def _run_job(ctl, b, like):
    c = numba.carray(_ptr_like(ctl[b + _C], like), (ctl[b + _M], ctl[b + _N]))
    x = numba.carray(_ptr_like(ctl[b + _X], like), (ctl[b + _X0], ctl[b + _X1]))
    y = numba.carray(_ptr_like(ctl[b + _Y], like), (ctl[b + _Y0], ctl[b + _Y1]))
    f = ctl[b + _FLAGS]
    beta = 1.0 if f & 4 else 0.0
    gemm_part(c, x, y, (f & 1) != 0, (f & 2) != 0, beta, ctl[b + _PART], ctl[b + _PARTS])


_F32 = np.zeros(1, np.float32)
_F64 = np.zeros(1, np.float64)


@numba.njit(nogil=True, cache=True)
def _serve(w):
    """Worker ``w``'s loop: run the parts handed to it; return PARKED after the timeout
    without work, EXIT when told to stop."""
    ctl = _control()
    b = _W0 + 2 * _LINE * w
    seen = _load(ctl, b + _DONE)  # (a part posted before this call is still to run)
    t0 = _ticks()
    while True:
        go = _load(ctl, b + _GO)
        if go != seen:
            if ctl[b + _FLAGS] & 8:
                _run_job(ctl, b, _F64)
            else:
                _run_job(ctl, b, _F32)
            seen = go
            _store(ctl, b + _DONE, go)
            t0 = _ticks()
            continue
        state = _load(ctl, b + _STATE)
        if state == EXIT or state == NONE:
            return EXIT
        if state == SPINNING and _ticks() - t0 > ctl[_TIMEOUT]:
            if _swap(ctl, b + _STATE, SPINNING, PARKED):
                return PARKED
        _pause()


@numba.njit(**{**_OPTS, "fastmath": {"contract", "reassoc"}})
def _few_rows(c, x, y, trans_x, trans_y, beta, i0, lo, hi):
    """Rows ``i0:`` and columns ``lo:hi`` of ``gemm``'s ``c``, each row of c as a sum of
    op(y)'s rows (contiguous) or as dot products with op(y)'s columns (rows of y when
    transposed): c of fewer than MR rows, where every block would be an edge block, and the
    last rows of a bigger c. A convolution of 4 filters of 3 x 3 over one channel multiplies
    (4, 9) by (9, m): its forward and backward at 10^5 elements took 1964 us on the
    micro-kernel's edge blocks against 1292 on BLAS. Whole arrays and C-contiguous row slices
    (``op`` read through the flags inside the loops): LLVM vectorises those, not views of
    unknown strides."""
    m = c.shape[0]
    k = x.shape[0] if trans_x else x.shape[1]
    for i in range(i0, m):
        crow = c[i, lo:hi]
        if trans_y:  # op(y)[q, j] = y[j, q]: c[i, j] = op(x)[i, :] . y[j, :]
            for j in range(lo, hi):
                yrow = y[j]
                s = crow.dtype.type(0)
                for q in range(k):
                    s += (x[q, i] if trans_x else x[i, q]) * yrow[q]
                crow[j - lo] = s if beta == 0.0 else crow[j - lo] + s
        else:
            if beta == 0.0:
                crow[:] = 0
            for q in range(k):
                a = x[q, i] if trans_x else x[i, q]
                yrow = y[q, lo:hi]
                for j in range(hi - lo):
                    crow[j] += a * yrow[j]


@numba.njit(**_OPTS)
def gemm(c, x, y, trans_x, trans_y, beta):
    """``c = op(x) @ op(y) + beta * c`` (``beta`` 0 or 1, 0 ignoring ``c``'s contents) for
    C-contiguous 2-D arrays of one dtype, ``op`` transposing when asked; split over the idle
    workers when it has at least PAR_WORK multiply-adds."""
    ctl = _control()
    m, n = c.shape
    k = x.shape[0] if trans_x else x.shape[1]
    nw = ctl[_WORKERS]
    if m < MR and k > 0:
        _few_rows(c, x, y, trans_x, trans_y, beta, 0, 0, n)
        return
    if m * n * k < PAR_WORK:
        gemm_part(c, x, y, trans_x, trans_y, beta, 0, 1)
        return
    claimed = 0  # bit w: worker w is ours for this product
    count = 0
    for w in range(nw):
        if _swap(ctl, _W0 + 2 * _LINE * w + _STATE, SPINNING, CLAIMED):
            claimed |= 1 << w
            count += 1
    if count < nw or nw == 0:
        ctl[_WAKE] = 1
    if count == 0:
        gemm_part(c, x, y, trans_x, trans_y, beta, 0, 1)
        return
    flags = (1 if trans_x else 0) | (2 if trans_y else 0) | (4 if beta != 0.0 else 0)
    flags |= 8 if c.itemsize == 8 else 0
    part = 0
    for w in range(nw):
        if claimed & (1 << w):
            part += 1
            b = _W0 + 2 * _LINE * w
            ctl[b + _PART], ctl[b + _PARTS], ctl[b + _FLAGS] = part, count + 1, flags
            ctl[b + _C], ctl[b + _X], ctl[b + _Y] = c.ctypes.data, x.ctypes.data, y.ctypes.data
            ctl[b + _M], ctl[b + _N] = m, n
            ctl[b + _X0], ctl[b + _X1], ctl[b + _Y0], ctl[b + _Y1] = (
                x.shape[0],
                x.shape[1],
                y.shape[0],
                y.shape[1],
            )
            _store(ctl, b + _GO, ctl[b + _GO] + 1)
    gemm_part(c, x, y, trans_x, trans_y, beta, 0, count + 1)
    for w in range(nw):
        if claimed & (1 << w):
            b = _W0 + 2 * _LINE * w
            while _load(ctl, b + _DONE) != ctl[b + _GO]:
                _pause()
            _store(ctl, b + _STATE, SPINNING)


@numba.njit(nogil=True, cache=True)
def _stop(w):
    """Tell worker ``w`` to exit once it is not working on a part."""
    ctl = _control()
    i = _W0 + 2 * _LINE * w + _STATE
    while True:
        state = _load(ctl, i)
        if state == NONE or state == EXIT:
            return
        if state != CLAIMED and _swap(ctl, i, state, EXIT):
            return
        _pause()


@numba.njit(nogil=True, cache=True)
def _unpark(w):
    """Worker ``w`` back from parked to spinning; False if it was told to stop meanwhile (a
    plain store would overwrite a ``_stop``'s EXIT and leave the thread spinning)."""
    return _swap(_control(), _W0 + 2 * _LINE * w + _STATE, PARKED, SPINNING)


@numba.njit(nogil=True, cache=True)
def _read_ticks():
    return _ticks()


class _Workers:
    def __init__(self):
        self.threads = {}
        self.events = {}
        self.lock = threading.Lock()

    def calibrate(self):
        _read_ticks()  # (loaded before the clock starts)
        t, c = time.perf_counter(), _read_ticks()
        while time.perf_counter() - t < 0.002:
            pass
        rate = (_read_ticks() - c) / (time.perf_counter() - t)
        _CTL[_TIMEOUT] = max(int(rate * SPIN_S), 1)

    def main(self, w, event):
        while _serve(w) != EXIT:
            event.wait()
            event.clear()
            if not _unpark(w):  # stopped while parked
                return

    def resize(self, wanted):
        """Keep ``wanted`` workers: start missing ones, wake parked ones, stop the rest."""
        wanted = min(max(wanted, 0), MAX_WORKERS)
        with self.lock:
            if _CTL[_TIMEOUT] == 0:
                self.calibrate()
            _CTL[_WORKERS] = min(_CTL[_WORKERS], wanted)  # posters stop claiming first
            for w in range(wanted, MAX_WORKERS):
                if w in self.threads:
                    _stop(w)
                    self.events.pop(w).set()
                    self.threads.pop(w).join(1.0)
                    _CTL[_W0 + 2 * _LINE * w + _STATE] = NONE
            for w in range(wanted):
                b = _W0 + 2 * _LINE * w + _STATE
                if w not in self.threads:
                    _CTL[b] = SPINNING
                    event = self.events[w] = threading.Event()
                    t = threading.Thread(
                        target=self.main, args=(w, event), name=f"nautograd-gemm-{w}", daemon=True
                    )
                    self.threads[w] = t
                    t.start()
                elif _CTL[b] == PARKED:
                    self.events[w].set()
            _CTL[_WORKERS] = wanted

    def after_fork(self):
        self.threads, self.events, self.lock = {}, {}, threading.Lock()
        _CTL[_WORKERS] = 0
        for w in range(MAX_WORKERS):
            _CTL[_W0 + 2 * _LINE * w + _STATE] = NONE


_WORKERS_ = _Workers()
# a product this big waits for parked workers to wake (65-155 us on the 2-core VM) rather
# than run alone: ~1 ms of float32 work on one core
WAIT_WORK = 1 << 26


def ready(work=0):
    """Before compiled code that may run products (``work``: the biggest one's multiply-adds,
    0 if unknown): start the workers, or wake them when parked; wait for them to spin when
    ``work >= WAIT_WORK``."""
    state = _CTL[_W0 + _STATE]
    if not (_CTL[_WAKE] or state == PARKED or (state == NONE and work >= PAR_WORK)):
        return
    wanted = get_num_threads() - 1
    if wanted < 1 and not _WORKERS_.threads:
        return
    _CTL[_WAKE] = 0
    _WORKERS_.resize(wanted)
    if work >= WAIT_WORK:
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end and any(
            _CTL[_W0 + 2 * _LINE * w + _STATE] == PARKED for w in range(wanted)
        ):
            time.sleep(0)  # (lets the woken worker take the GIL to go back to spinning)


def _shutdown():
    _WORKERS_.resize(0)


def _threads_changed(n):
    if _WORKERS_.threads:
        _WORKERS_.resize(n - 1)


on_num_threads(_threads_changed)
_threads.on_ready_workers(ready)


atexit.register(_shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WORKERS_.after_fork)


@numba.njit(nogil=True, cache=True)
def _matmul_into(c, x, y, trans_x, trans_y):
    gemm(c, x, y, trans_x, trans_y, 0.0)


def _operand(a):
    """(C-contiguous array, transposed?) for a 2-D operand."""
    if a.flags.c_contiguous:
        return a, False
    if a.T.flags.c_contiguous:
        return a.T, True
    return np.ascontiguousarray(a), False


def _enabled():
    if os.environ.get("NAUTOGRAD_GEMM", "").lower() == "blas":
        return False
    return bool(binding.get_host_cpu_features().get("avx512f", False))


ENABLED = _enabled()
_CTL[_USE] = ENABLED


@numba.njit(inline="always")
def enabled():
    """Whether products go to ``gemm`` (read at run time: cached code follows the setting)."""
    return _control()[_USE] != 0


def matmul(x, y):
    """``x @ y`` for 2-D float32/float64 arrays of one dtype (``ENABLED`` machines)."""
    out = np.empty((x.shape[0], y.shape[1]), x.dtype)
    xc, tx = _operand(x)
    yc, ty = _operand(y)
    ready(x.shape[0] * x.shape[1] * y.shape[1])
    _matmul_into(out, xc, yc, tx, ty)
    return out
