"""Normalising ops along a dim: softmax, log_softmax, logsumexp."""

import math

import numba
import numpy as np

from .._numba_setup import cached
from .._threads import MIN_SIZE, parallel_for
from ._jit import assigning, bcast_offsets, gemm, kernel, parallel, part, saved, saved_index, view
from ._shapes import outer_inner, wrap_dim
from ._vmath import LOOP, vexp
from .reduce import _kept, _kept_result, _reduce_params, _summed
from .registry import Case, cast_first, defop


def _softmax_loop(x, outer, size, inner, log):
    xf = (x if x.flags.c_contiguous else np.ascontiguousarray(x)).reshape(-1)
    result = np.empty(x.shape, x.dtype)
    out = result.reshape(-1)
    if xf.size < MIN_SIZE:  # one call: the closure and parallel_for cost ~1.5 us a softmax
        _softmax_rows(xf, out, 0, outer, size, inner, log)
    else:  # rows are independent: split them over the intra-op threads (an exp an element,
        # about twice a sum's work: from MIN_SIZE elements, where a sum splits from ROWS_MIN)
        parallel_for(
            lambda lo, hi: _softmax_rows(xf, out, lo, hi, size, inner, log), outer, 2 * xf.size
        )
    return result


@cached(**LOOP)
def _softmax_rows(xf, out, lo, hi, size, inner, log):
    # y = exp(x - max) / sum(exp(x - max)) along the middle axis of (outer, size, inner);
    # log: x - max - log(sum(exp(x - max))). One compiled pass instead of six numpy calls.
    # Contiguous rows sum their exps in _exp_sum (vectorised; log_softmax does not store
    # them); strided rows store the exps in out, then sum them with four accumulators (a
    # single one is bound by the add's latency)
    if inner == 1 and size <= _SHORT:
        _short_rows(xf, out, lo, hi, size, log)
        return
    for o in range(lo, hi):
        if inner == 1:  # contiguous rows: loops over row slices (from index 0) vectorise
            b = o * size
            xr = xf[b : b + size]
            orow = out[b : b + size]
            m = _row_max(xr, 0, size, 1)
            if m == -np.inf:  # (a row of -inf; +inf and NaN give NaN rows, as torch)
                m = 0.0
            if log:  # the exps are only summed: no store, one pass less over memory
                ls = math.log(_exp_sum(xr, orow, m, False))  # (orow: xr may be read-only)
                for i in range(size):
                    orow[i] = xr[i] - m - ls
            else:
                r = 1.0 / _exp_sum(xr, orow, m, True)
                for i in range(size):
                    orow[i] = orow[i] * r
            continue
        for c in range(inner):
            base = o * size * inner + c
            m = _row_max(xf, base, size, inner)
            if m == -np.inf:  # (a row of -inf; +inf and NaN give NaN rows, as torch)
                m = 0.0
            for j in range(size):
                out[base + j * inner] = vexp(np.float64(xf[base + j * inner]) - m)
            s = _row_sum(out, base, size, inner)
            if log:
                ls = math.log(s)
                for j in range(size):
                    out[base + j * inner] = xf[base + j * inner] - m - ls
            else:
                r = 1.0 / s
                for j in range(size):
                    out[base + j * inner] = out[base + j * inner] * r


# Contiguous rows of up to this many elements take _short_rows: log_softmax over (128, 10)
# float32 rows 11.5-16.6 -> 7.0 us; at 24 elements 13.9 -> 11.9; at 32, 15.8 -> 24.2 (slower)
_SHORT = 16
_BLOCK = 256  # rows a block of _short_rows (its scratch: _BLOCK * _SHORT float64)


@cached(**LOOP)
def _short_rows(xf, out, lo, hi, size, log):
    # _softmax_rows for short contiguous rows: a vector loop over 10 elements is mostly its
    # remainder, so a block of rows stores x - max (float64) in one scratch array, takes the
    # exps in one flat loop, which vectorises, then sums each row
    e = np.empty(min(hi - lo, _BLOCK) * size)
    ms = np.empty(min(hi - lo, _BLOCK))
    for b0 in range(lo, hi, _BLOCK):
        rows = min(hi - b0, _BLOCK)
        for r in range(rows):
            xr = xf[(b0 + r) * size : (b0 + r + 1) * size]
            m = _row_max(xr, 0, size, 1)
            if m == -np.inf:  # (a row of -inf; +inf and NaN give NaN rows, as torch)
                m = 0.0
            ms[r] = m
            er = e[r * size : (r + 1) * size]
            for i in range(size):
                er[i] = np.float64(xr[i]) - m
        for i in range(rows * size):
            e[i] = vexp(e[i])
        for r in range(rows):
            er = e[r * size : (r + 1) * size]
            s = _row_sum(er, 0, size, 1)
            xr = xf[(b0 + r) * size : (b0 + r + 1) * size]
            orow = out[(b0 + r) * size : (b0 + r + 1) * size]
            if log:
                m, ls = ms[r], math.log(s)
                for i in range(size):
                    orow[i] = xr[i] - m - ls
            else:
                inv = 1.0 / s
                for i in range(size):
                    orow[i] = er[i] * inv


@numba.njit(**dict(LOOP, fastmath={"reassoc", "contract"}))
def _exp_sum(xr, orow, m, store):
    # sum_i exp(x_i - m) (stored into orow when ``store``): reassoc lets LLVM vectorise the
    # sum (many partial sums: no less accurate than the four in _row_sum)
    s = 0.0
    if store:
        for i in range(xr.size):
            e = vexp(np.float64(xr[i]) - m)
            orow[i] = e
            s += e
    else:
        for i in range(xr.size):
            s += vexp(np.float64(xr[i]) - m)
    return s


@numba.njit(inline="always")
def _row_max(a, base, size, inner):
    m0 = m1 = m2 = m3 = -np.inf
    j = 0
    while j + 4 <= size:
        m0 = max(m0, a[base + j * inner])
        m1 = max(m1, a[base + (j + 1) * inner])
        m2 = max(m2, a[base + (j + 2) * inner])
        m3 = max(m3, a[base + (j + 3) * inner])
        j += 4
    while j < size:
        m0 = max(m0, a[base + j * inner])
        j += 1
    return max(max(m0, m1), max(m2, m3))


@numba.njit(inline="always")
def _row_sum(a, base, size, inner):
    s0 = s1 = s2 = s3 = 0.0
    j = 0
    while j + 4 <= size:
        s0 += a[base + j * inner]
        s1 += a[base + (j + 1) * inner]
        s2 += a[base + (j + 2) * inner]
        s3 += a[base + (j + 3) * inner]
        j += 4
    while j < size:
        s0 += a[base + j * inner]
        j += 1
    return (s0 + s1) + (s2 + s3)


def _softmax_forward(x, dim):
    d = wrap_dim("softmax", dim, x.ndim)
    oi = outer_inner(x.shape, d)
    result = _softmax_loop(x, *oi, False)
    return result, (result,), oi + (0,), ()


def _log_softmax_forward(x, dim):
    d = wrap_dim("log_softmax", dim, x.ndim)
    oi = outer_inner(x.shape, d)
    result = _softmax_loop(x, *oi, True)
    return result, (result,), oi + (1,), ()


def _softmax_spec(log):
    name = "log_softmax" if log else "softmax"

    def spec(shapes, kwargs):
        """The deferred forward's spec (registry.Op.lazy): any dim, as the eager forward."""
        if len(kwargs) != 1 or "dim" not in kwargs:
            return None
        (shape,) = shapes
        d = wrap_dim(name, kwargs["dim"], len(shape))
        oi = outer_inner(shape, d)
        n = oi[0] * oi[1] * oi[2]
        return shape, oi + (int(log),), (), 1 << 16, n

    return spec


@kernel
def softmax_lazy(S, xo, xn, k, top, ip, fp, oo, on):
    outer, size, inner, log = ip[0], ip[1], ip[2], ip[3]
    n = outer * size * inner
    x0 = xo[0]
    _softmax_rows(S[x0 : x0 + n], S[top : top + n], 0, outer, size, inner, log == 1)
    oo[0] = top
    on[0] = n
    return 1


@parallel
@assigning
@kernel
def softmax_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # along the dim, with y the saved result:
    #   softmax (ip[3] == 0):     grad_x = y * (grad - sum_j grad_j y_j)
    #   log_softmax (ip[3] == 1): grad_x = grad - exp(y) * sum_j grad_j
    if gi[0] < 0:
        return
    outer, size, inner, log = ip[0], ip[1], ip[2], ip[3]
    n = outer * size * inner
    g = view(G, go[0], n)
    y = saved(V, so, sa, 0, n)
    grad_x = view(G, gi[0], n)
    assign = gi[1] == 1  # fresh buffer (see _jit.assigning): every element is written once
    lo, hi = part(gi, 1, outer)  # gi[2], gi[3]: part p of P (_jit.parallel): its outer rows
    if inner == 1:
        # contiguous rows (the usual last dim): one loop per case so that each vectorises
        for o in range(lo, hi):
            b = o * size
            s = _row_dot(g, y, b, size, 1, log)
            gr = g[b : b + size]
            yr = y[b : b + size]
            dr = grad_x[b : b + size]
            if log and assign:
                for i in range(size):
                    dr[i] = gr[i] - vexp(yr[i]) * s
            elif log:
                for i in range(size):
                    dr[i] += gr[i] - vexp(yr[i]) * s
            elif assign:
                for i in range(size):
                    dr[i] = yr[i] * (gr[i] - s)
            else:
                for i in range(size):
                    dr[i] += yr[i] * (gr[i] - s)
        return
    if assign:  # strided rows (a dim other than the last): zero, then the one loop below
        grad_x[lo * size * inner : hi * size * inner] = 0
    for o in range(lo, hi):
        for c in range(inner):
            base = o * size * inner + c
            s = _row_dot(g, y, base, size, inner, log)
            for j in range(size):
                i = base + j * inner
                grad_x[i] += g[i] - vexp(y[i]) * s if log else y[i] * (g[i] - s)


@numba.njit(inline="always")
def _row_dot(g, y, base, size, inner, log):
    # sum_j grad_j (log_softmax) or sum_j grad_j y_j (softmax) along one row of the dim
    if log:
        return _row_sum(g, base, size, inner)
    s0 = s1 = 0.0
    j = 0
    while j + 2 <= size:
        s0 += g[base + j * inner] * y[base + j * inner]
        s1 += g[base + (j + 1) * inner] * y[base + (j + 1) * inner]
        j += 2
    if j < size:
        s0 += g[base + j * inner] * y[base + j * inner]
    return s0 + s1


_CASES = [Case(((3, 4),), {"dim": 1}), Case(((2, 3, 4),), {"dim": -2}), Case(((5,),), {"dim": 0})]


def _softmax_formula(ctx, grad):
    d = wrap_dim("softmax", ctx.kwargs["dim"], len(ctx.input_shapes[0]))
    r = ctx.output(0, 0)
    if ctx.ip[3] == 0:  # softmax: grad_x = r (grad - sum(grad r))
        return (r * (grad - (grad * r).sum(dim=d, keepdim=True)),)
    # log_softmax: grad_x = grad - exp(r) sum(grad)
    return (grad - r.exp() * grad.sum(dim=d, keepdim=True),)


def _softmax_jvp(x, t, result, dim):
    # d softmax = y (t - sum(t y)) along dim
    return result * (t - (t * result).sum(dim=dim, keepdim=True))


def _log_softmax_jvp(x, t, result, dim):
    # d log_softmax = t - sum(exp(y) t) along dim
    return t - (result.exp() * t).sum(dim=dim, keepdim=True)


softmax = defop(
    "softmax",
    _softmax_forward,
    softmax_backward,
    formula=_softmax_formula,
    jvp=_softmax_jvp,
    methods=("softmax",),
    keywords={"dtype": cast_first("softmax")},
    nn_functional=True,
    node_name="SoftmaxBackward0",
    cases=_CASES,
    lazy=(_softmax_spec(False), softmax_lazy),
    doc="exp(input) / sum(exp(input)) along dim, computed without overflow.",
)
log_softmax = defop(
    "log_softmax",
    _log_softmax_forward,
    softmax_backward,
    formula=_softmax_formula,
    jvp=_log_softmax_jvp,
    methods=("log_softmax",),
    keywords={"dtype": cast_first("log_softmax")},
    nn_functional=True,
    node_name="LogSoftmaxBackward0",
    cases=_CASES,
    lazy=(_softmax_spec(True), softmax_lazy),
    doc="input - logsumexp(input) along dim.",
)


def _logsumexp_forward(x, dim, keepdim=False):
    dims, out_shape, ip = _reduce_params("logsumexp", x.shape, dim, keepdim)
    if not dims:
        return x.copy(), (x, x.copy()), ip, ()
    m = np.max(x, axis=dims, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    kept = np.log(np.sum(np.exp(x - m), axis=dims, keepdims=True)) + m
    kept = kept.astype(x.dtype, copy=False)
    return kept.reshape(out_shape), (x, kept), ip, ()


@kernel
def logsumexp_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # grad_x = grad * exp(x - result), the result broadcast back over the reduced dims
    if gi[0] < 0:
        return
    n, m, mode = ip[0], ip[1], ip[2]
    g = view(G, go[0], m)
    x = saved(V, so, sa, 0, n)
    result = saved(V, so, sa, 1, m)
    grad_x = view(G, gi[0], n)
    if mode == 0:
        for i in range(n):
            grad_x[i] += g[i] * math.exp(x[i] - result[i])
    elif mode == -1:
        for i in range(n):
            grad_x[i] += g[0] * math.exp(x[i] - result[0])
    else:
        offs = bcast_offsets(ip, 3, mode, 0, n)
        for i in range(n):
            j = offs[i]
            grad_x[i] += g[j] * math.exp(x[i] - result[j])


def _logsumexp_formula(ctx, grad):
    # grad_x = grad exp(x - result), both broadcast back over the reduced dims
    _, kept = _kept(ctx.input_shapes[0], ctx.kwargs["dim"])
    x, r = ctx.input(0, 0), ctx.output(0, 1)
    return (grad.reshape(kept) * (x - r.reshape(kept)).exp(),)


def _logsumexp_jvp(x, t, result, dim, keepdim=False):
    # sum(softmax(x) t) over dim
    weighted = (x - _kept_result(result, x, dim, keepdim)).exp() * t
    return _summed(weighted, x, dim, keepdim)


logsumexp = defop(
    "logsumexp",
    _logsumexp_forward,
    logsumexp_backward,
    formula=_logsumexp_formula,
    jvp=_logsumexp_jvp,
    methods=("logsumexp",),
    special=("logsumexp",),
    cases=[
        Case(((3, 4),), {"dim": 1}),
        Case(((2, 3, 4),), {"dim": (0, 2), "keepdim": True}),
        Case(((5,),), {"dim": 0}),
    ],
    doc="log(sum(exp(input))) over dim, computed without overflow.",
)


# ---------------------------------------------------------------------------------------------
# convolution (conv1d/conv2d in functional.py call it): im2col + BLAS per block of output rows
#
# For batch item n and group g, with cols the (Cg*KH*KW, OH*OW) matrix of the input windows
# (im2col): result[n, g] = w[g] @ cols; so grad_w[g] += grad[n, g] @ cols^T and the windows'
# gradient W[g]^T @ grad[n, g] is summed back onto the input (col2im). The columns are built
# for a block of output rows at a time (an L2-sized matrix) and rebuilt in the backward
# instead of being saved: the composite of windows + permute + matmul saved all of them (9x
# the input for a 3x3 kernel) and its scatter of overlapping windows made conv2d's backward
# 230 ms against torch's 70 ms at a 1000x1000 image (benchmarks/op_families.py).


@numba.njit(inline="always")
def _span(o_lo, o_hi, k, dil, pad, step, n):
    # output positions o in [o_lo, o_hi) whose tap k reads inside the input (0 <= i < n),
    # i = o * step + k * dil - pad
    shift = k * dil - pad
    lo = max(o_lo, (-shift + step - 1) // step) if shift < 0 else o_lo
    hi = min(o_hi, (n - 1 - shift) // step + 1) if n - 1 - shift >= 0 else o_lo
    return lo, max(hi, lo)


@cached(**LOOP)
def _im2col(x, xo, ip, oh0, oh1, cols, to_cols):
    # to_cols: cols[(c, kh, kw), (oh - oh0, ow)] = x[xo + (c, ih, iw)] (0 in the padding);
    # else the reverse, summed: x[xo + (c, ih, iw)] += cols[...] (col2im)
    C, H, W, G, KH, KW, OW = ip[1], ip[2], ip[3], ip[5], ip[6], ip[7], ip[9]
    sh, sw, ph, pw, dh, dw = ip[10], ip[11], ip[12], ip[13], ip[14], ip[15]
    Cg = C // G
    L = (oh1 - oh0) * OW
    # the loops run over slices from index 0: with an offset that may be negative as far as
    # LLVM knows, every x[xi + ow] takes numba's wraparound branch and the loop does not
    # vectorise (a row copy took 7x as long)
    for c in range(Cg):
        for kh in range(KH):
            a, b = _span(oh0, oh1, kh, dh, ph, sh, H)
            for kw in range(KW):
                r = ((c * KH + kh) * KW + kw) * L
                u, v = _span(0, OW, kw, dw, pw, sw, W)
                if to_cols:  # the rows of padding
                    _fill0(cols[r : r + (a - oh0) * OW])
                    _fill0(cols[r + (b - oh0) * OW : r + L])
                for oh in range(a, b):
                    ro = r + (oh - oh0) * OW
                    if to_cols:
                        _fill0(cols[ro : ro + u])
                        _fill0(cols[ro + v : ro + OW])
                    if v <= u:
                        continue
                    xi = xo + (c * H + oh * sh + kh * dh - ph) * W + kw * dw - pw
                    col = cols[ro + u : ro + v]
                    if sw == 1:  # a unit-stride slice (C layout): the loops vectorise
                        _copy_row(x[xi + u : xi + v], col, to_cols)
                    else:
                        _copy_row(x[xi + u * sw : xi + (v - 1) * sw + 1 : sw], col, to_cols)


@numba.njit(inline="always")
def _copy_row(row, col, to_cols):
    if to_cols:
        for j in range(col.size):
            col[j] = row[j]
    else:
        for j in range(col.size):
            row[j] += col[j]


@numba.njit(inline="always")
def _fill0(a):
    for j in range(a.size):
        a[j] = 0


@numba.njit(inline="always")
def _conv_rows(ip):
    # output rows per block: about 2^15 column elements (256 KiB in float64)
    CgK = ip[1] // ip[5] * ip[6] * ip[7]
    return max(1, min(ip[8], (1 << 15) // max(CgK * ip[9], 1)))


@cached(**LOOP)
def _conv_forward_items(x, w, result, ip, lo, hi):
    # result[n] for the batch items n in [lo, hi)
    C, H, W, O, G, KH, KW, OH, OW = ip[1], ip[2], ip[3], ip[4], ip[5], ip[6], ip[7], ip[8], ip[9]
    Cg, Og = C // G, O // G
    CgK = Cg * KH * KW
    L = OH * OW
    rows = _conv_rows(ip)
    cols = np.empty(CgK * rows * OW, x.dtype)
    yb = np.empty(Og * rows * OW, x.dtype)
    for n in range(lo, hi):
        for g in range(G):
            wg = w[g * Og * CgK : (g + 1) * Og * CgK].reshape((Og, CgK))
            for oh0 in range(0, OH, rows):
                oh1 = min(oh0 + rows, OH)
                m = (oh1 - oh0) * OW
                c = cols[: CgK * m]
                _im2col(x, (n * C + g * Cg) * H * W, ip, oh0, oh1, c, True)
                y = yb[: Og * m].reshape((Og, m))
                gemm(y, wg, c.reshape((CgK, m)), False, False, 0.0)
                for o in range(Og):
                    b = (n * O + g * Og + o) * L + oh0 * OW
                    result[b : b + m] = y[o]


def _convolution_forward(x, weight, stride, padding, dilation, groups):
    N, C, H, W = x.shape
    O, _, KH, KW = weight.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    ip = (N, C, H, W, O, groups, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw)
    # (a read-only array, np.load's mmap say, is copied: the compiled loops take writable ones)
    x = np.ascontiguousarray(x) if x.flags.writeable else x.copy()
    weight = np.ascontiguousarray(weight) if weight.flags.writeable else weight.copy()
    result = np.empty(N * O * OH * OW, x.dtype)
    ipa = np.array(ip, np.int64)
    xf, wf = x.reshape(-1), weight.reshape(-1)
    parallel_for(
        lambda lo, hi: _conv_forward_items(xf, wf, result, ipa, lo, hi), N, result.size * KH * KW
    )
    return result.reshape(N, O, OH, OW), (x, weight), ip, ()


@kernel
def convolution_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # per batch item n, group g and block of output rows (see above):
    #   grad_w[g] += grad[n, g] @ cols^T,  grad_x[n, g] += col2im(w[g]^T @ grad[n, g])
    N, C, H, W, O, Gr, KH, KW, OH, OW = (
        ip[0],
        ip[1],
        ip[2],
        ip[3],
        ip[4],
        ip[5],
        ip[6],
        ip[7],
        ip[8],
        ip[9],
    )
    Cg, Og = C // Gr, O // Gr
    CgK = Cg * KH * KW
    L = OH * OW
    g = view(G, go[0], N * O * L)
    x = saved(V, so, sa, 0, N * C * H * W)
    w = saved(V, so, sa, 1, O * CgK)
    rows = _conv_rows(ip)
    cols = np.empty(CgK * rows * OW, G.dtype)
    gb = np.empty(Og * rows * OW, G.dtype)
    grad_wg = np.zeros((Og, CgK), G.dtype)
    for gr in range(Gr):
        wg = w[gr * Og * CgK : (gr + 1) * Og * CgK].reshape((Og, CgK))
        grad_wg[:] = 0
        for n in range(N):
            xo = (n * C + gr * Cg) * H * W
            for oh0 in range(0, OH, rows):
                oh1 = min(oh0 + rows, OH)
                m = (oh1 - oh0) * OW
                gm = gb[: Og * m]
                for o in range(Og):  # this block of grad[n, g] as a contiguous (Og, m)
                    b = (n * O + gr * Og + o) * L + oh0 * OW
                    gm[o * m : (o + 1) * m] = g[b : b + m]
                gm2 = gm.reshape((Og, m))
                c = cols[: CgK * m]
                c2 = c.reshape((CgK, m))  # the same memory, as a matrix
                if gi[1] >= 0:
                    _im2col(x, xo, ip, oh0, oh1, c, True)
                    gemm(grad_wg, gm2, c2, False, True, 1.0)
                if gi[0] >= 0:
                    gemm(c2, wg, gm2, True, False, 0.0)  # the windows' gradient, in place
                    _im2col(view(G, gi[0], N * C * H * W), xo, ip, oh0, oh1, c, False)
        if gi[1] >= 0:
            grad_w = view(G, gi[1] + gr * Og * CgK, Og * CgK)
            grad_w += grad_wg.reshape(-1)


def _window_index(ip):
    """For every window element (c, kh, kw) and output position (oh, ow), in that C order, the
    flat index into one batch item of the input (c, ih, iw), or C*H*W (a zero appended) where
    the window reads padding: im2col as a gather."""
    C, H, W, KH, KW, OH, OW = ip[1], ip[2], ip[3], ip[6], ip[7], ip[8], ip[9]
    sh, sw, ph, pw, dh, dw = ip[10:16]
    c, kh, kw, oh, ow = np.ix_(
        np.arange(C), np.arange(KH), np.arange(KW), np.arange(OH), np.arange(OW)
    )
    ih = oh * sh + kh * dh - ph
    iw = ow * sw + kw * dw - pw
    inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    return np.where(inside, (c * H + ih) * W + iw, C * H * W).reshape(-1)


def _convolution_formula(ctx, grad):
    # With cols[n, g] the (Cg*KH*KW, OH*OW) windows of x (a gather, _window_index):
    #   result[n, g] = w[g] @ cols[n, g], so grad_w[g] = sum_n grad[n, g] @ cols[n, g]^T and
    #   grad_x = w[g]^T @ grad[n, g] scattered back (added) where the windows read x
    # (torch's ConvolutionBackward0 gives the same as transposed convolutions).
    ng = ctx.ng
    N, C, H, W, O, groups, KH, KW, OH, OW = ctx.ip[:10]
    K, L, Og = C // groups * KH * KW, OH * OW, O // groups
    index = _window_index(ctx.ip)
    g = grad.reshape(N, groups, Og, L)
    grad_x = grad_w = None
    if ctx.needs_input_grad[1]:
        x = ctx.input(0, 0).reshape(N, C * H * W)
        padded = ng.cat([x, ctx.constant(np.zeros((N, 1), ctx.dtype))], 1)
        cols = padded.index_select(1, ng.from_numpy(index)).reshape(N, groups, K, L)
        grad_w = (g @ cols.mT).sum(0).reshape(ctx.input_shapes[1])
    if ctx.needs_input_grad[0]:
        w = ctx.input(1, 1).reshape(groups, Og, K)
        grad_cols = (w.mT @ g).reshape(N, groups * K * L)
        where = ng.from_numpy(np.broadcast_to(index, (N, index.size)).copy())
        zeros = ctx.constant(np.zeros((N, C * H * W + 1), ctx.dtype))
        grad_x = zeros.scatter_add(1, where, grad_cols)[:, : C * H * W].reshape(N, C, H, W)
    return grad_x, grad_w


def _conv_args(stride, padding, dilation, groups):
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


# the input (N, C, H, W) and weight (O, C // groups, KH, KW) are checked by conv1d/conv2d
# (functional.py), which also reshape a 1-D convolution into a 2-D one of height 1
convolution = defop(
    "convolution",
    _convolution_forward,
    convolution_backward,
    nin=2,
    functions=(),
    formula=_convolution_formula,
    cases=[
        Case(((2, 3, 5, 5), (4, 3, 3, 3)), _conv_args((1, 1), (0, 0), (1, 1), 1)),
        Case(((1, 4, 6, 7), (2, 2, 2, 3)), _conv_args((2, 1), (1, 2), (1, 1), 2)),
        Case(((2, 2, 7, 6), (3, 2, 3, 2)), _conv_args((1, 2), (2, 1), (2, 3), 1)),
    ],
    jvp="bilinear",
)


# ---------------------------------------------------------------------------------------------
# nll_loss on class indices: one node (torch's NllLossBackward0), not gather, mul, neg, sum, div

NLL_NONE, NLL_SUM = 0, 1  # reductions; mean is a sum divided by the summed weights (fp[0])


def _nll_forward(x, target, weight, denom, reduction):
    # x (M, C) log-probabilities, target (M,) int64 classes, weight (M,) the class weight of
    # each row (0 where the target is ignored), denom: 1, or the summed weights for mean
    if x.ndim != 2:
        raise RuntimeError(f"nll_loss(): expected a 2-D input (rows, classes), got {x.shape}")
    if x.dtype.kind != "f":
        raise RuntimeError(f"nll_loss(): expected a floating input, got {x.dtype}")
    M, C = x.shape
    target = np.asarray(target)
    weight = np.asarray(weight)
    if target.shape != (M,) or weight.shape != (M,) or target.dtype.kind not in "iu":
        raise ValueError(
            f"nll_loss(): expected an integer target and row weights of shape ({M},) for an "
            f"input of shape {x.shape}, got {target.shape} and {weight.shape}"
        )
    if M and (target.min() < 0 or target.max() >= C):
        bad = int(target.min() if target.min() < 0 else target.max())
        raise IndexError(f"nll_loss(): Target {bad} is out of bounds for {C} classes.")
    target = target.astype(np.int64, copy=False)
    weight = weight.astype(x.dtype, copy=False)
    losses = -(x[np.arange(M), target] * weight)
    if reduction == NLL_NONE:
        result = losses
    else:
        with np.errstate(divide="ignore", invalid="ignore"):  # (every row ignored: nan)
            result = np.asarray(losses.sum() / x.dtype.type(denom), dtype=x.dtype)
    return result, (target, weight), (M, C, reduction), (float(denom),)


@kernel
def nll_backward(G, G2, go, gi, V, so, sa, ip, fp):
    # grad_x[i, t_i] -= w_i * grad_i (the loss of row i is -w_i x[i, t_i]), grad divided by
    # denom when reduced
    if gi[0] < 0:
        return
    M, C, reduction = ip[0], ip[1], ip[2]
    t = saved_index(sa, 0, M)
    w = saved(V, so, sa, 1, M)
    grad_x = view(G, gi[0], M * C)
    if reduction == NLL_NONE:
        g = view(G, go[0], M)
        for i in range(M):
            grad_x[i * C + t[i]] -= w[i] * g[i]
    else:
        g0 = view(G, go[0], 1)[0] / fp[0]
        for i in range(M):
            grad_x[i * C + t[i]] -= w[i] * g0


def _nll_formula(ctx, grad):
    from .index import scatter_formula

    M, C, reduction = ctx.ip
    t, w = ctx.kwargs["target"], ctx.kwargs["weight"]
    if reduction == NLL_NONE:
        rows = grad
    else:
        rows = (grad / ctx.fp[0]).reshape(1).expand(M)
    return (scatter_formula(ctx, rows * ctx.constant(-w), np.arange(M) * C + t),)


def _nll_case(f, x, target, weight, denom, reduction):
    # (numpy arrays for either library: torch's reference converts them itself)
    dt = x.dtype if isinstance(x.dtype, np.dtype) else None
    return f(x, target=np.asarray(target, np.int64), weight=np.asarray(weight, dt),
             denom=denom, reduction=reduction)  # fmt: skip


nll = defop(
    "_nll",
    _nll_forward,
    nll_backward,
    formula=_nll_formula,
    functions=(),
    int_ok=True,  # (an integer input reaches the forward, which raises as torch does)
    node_name="NllLossBackward0",
    cases=[
        Case(
            ((3, 4),),
            {"target": [0, 3, 1], "weight": [1.0, 0.5, 2.0], "denom": 3.5, "reduction": NLL_SUM},
            call=_nll_case,
        ),  # fmt: skip
        Case(
            ((3, 4),),
            {"target": [2, 2, 0], "weight": [1.0, 0.0, 1.0], "denom": 1.0, "reduction": NLL_NONE},
            call=_nll_case,
        ),  # fmt: skip
    ],
)
