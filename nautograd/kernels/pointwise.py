"""Unary functions (math, activations, rounding), more binary ops, three-operand ops, and
logical tests.

Each unary op is one ``unary(...)`` declaration: its forward, its derivative as a scalar
expression (kernels/scalar.py), what its node saves, and its deferred forward. Its backward
kernel, its create_graph formula and its deferred kernel are derived from that; kernels
compile one by one when first used (kernels/registry.py ``load_kernels``).
"""

import functools
import math
import numbers

import numba
import numpy as np

from .._numba_setup import cached
from .._threads import elementwise
from . import _special, _vmath
from . import scalar as m
from ._jit import assigning, bcast_offsets, kernel, parallel, part, saved, view
from ._shapes import binary_params, nary_params
from .elementwise import _BINARY_CASES, _binary_op, add, broadcast_formula, to_copy
from .registry import Case, attributes_of, defop

# ---------------------------------------------------------------------------------------------
# unary ops. Each is declared once by ``unary``: its eager forward, its derivative ``d(x, r,
# p0, p1)`` written in the scalar vocabulary (kernels/scalar.py: compiled into the op's own
# backward kernel, and evaluated on tensors for create_graph), what its node saves (the
# input ``x``, the result ``r`` or nothing, as torch saves it: changing the other in place
# under no_grad leaves the graph valid) and, for the deferred forward, its scalar forward.

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715
_PI = math.pi
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / _SQRT_2PI
_EPS = float(np.finfo(np.float64).eps)


def _unary_kernel(name, d, saves, select):
    """The backward kernel of one unary op: ``grad_x (+)= grad * d(x, r, p0, p1)``, one loop
    the compiler specialises to ``d`` (LLVM vectorises the simple ones). ``select``: where
    ``d`` is 0 no gradient passes at all, not ``0 * grad`` (NaN for a NaN gradient), as
    torch's masked backwards (relu, clamp, hardtanh, the step functions)."""
    reads = saves is not None
    both = saves == "both"

    def backward(G, G2, go, gi, V, so, sa, ip, fp):
        # ip = (n,), fp = (p0, p1); gi[1]: store instead of add (the buffer is fresh, see
        # _jit.assigning); gi[2], gi[3]: part p of P (see _jit.parallel)
        if gi[0] < 0:
            return
        lo, hi = part(gi, 1, ip[0])
        n = hi - lo
        grad_x = view(G, gi[0] + lo, n)
        g = view(G, go[0] + lo, n)
        p0 = fp[0]
        p1 = fp[1]
        # the saved value is x or r, as ``d`` reads (``saves``), and d gets it as both;
        # or both, x then r
        v = saved(V, so, sa, 0, hi)[lo:] if reads else g
        w = saved(V, so, sa, 1, hi)[lo:] if both else v
        if gi[1] == 1:
            for i in range(n):
                dv = d(v[i], w[i], p0, p1)
                grad_x[i] = (0.0 if dv == 0.0 else g[i] * dv) if select else g[i] * dv
        else:
            for i in range(n):
                dv = d(v[i], w[i], p0, p1)
                grad_x[i] += (0.0 if dv == 0.0 else g[i] * dv) if select else g[i] * dv

    # a name of its own: Numba names the compiled symbol after it (and a per-process counter),
    # and two cached kernels of one name could link to each other's code
    backward.__name__ = backward.__qualname__ = f"{name}_backward"
    return parallel(assigning(kernel(backward)))


def _unary_formula(d, saves, zero):
    """create_graph: the same ``d`` on the node's saved tensors, attached to the graph."""

    def formula(ctx, grad):
        if zero:
            return (ctx.constant(np.zeros(ctx.input_shapes[0])),)
        x = ctx.input(0, 0) if saves in ("x", "both") else None
        r = ctx.output(0, 1 if saves == "both" else 0) if saves in ("result", "both") else None
        p0, p1 = ctx.fp
        dv = d(x, r, p0, p1)
        if hasattr(dv, "dtype") and dv.dtype != grad.dtype:
            dv = dv.to(grad.dtype)  # (a where of two numbers is of the default dtype)
        return (grad * dv,)

    return formula


def _unary_lazy(name, f):
    """The deferred forward (graph/deferred.py) of one unary op: ``r = f(x, p0, p1)``."""

    def forward(S, xo, xn, k, top, ip, fp, oo, on):
        n = ip[0]
        x0 = xo[0]
        p0 = fp[0]
        p1 = fp[1]
        # (slices indexed from 0: no negative-index branch, and LLVM vectorises the loop)
        src = S[x0 : x0 + n]
        dst = S[top : top + n]
        for i in range(n):
            dst[i] = f(src[i], p0, p1)
        oo[0] = top
        on[0] = n
        return 1

    forward.__name__ = forward.__qualname__ = f"{name}_lazy"  # (as _unary_kernel's)
    return kernel(forward)


def _compiled(fn):
    return numba.njit(inline="always", error_model="numpy")(fn)


def _zero_d(x, r, p0, p1):
    return 0.0


def unary(
    name,
    forward,
    d,
    saves="x",
    select=False,
    lazy=None,
    params=None,
    low=-2.0,
    high=2.0,
    cases=None,
    into=False,
    tensor_d=None,
    **kw,
):
    """Declare a unary op: ``result = forward(x, **kwargs)``, ``params(**kwargs) -> (p0,
    p1)`` its float attributes; ``d`` its derivative (see above), ``saves`` "x", "result",
    "both" or None, ``select`` as in ``_unary_kernel``; ``tensor_d``: the derivative on
    tensors when ``d`` itself cannot take them (user ops written with Python's math);
    ``lazy(x, p0, p1)``: its scalar forward for the deferred batch (the attributes come from
    ``params``, or from ``lazy_spec(kwargs)``, None for a call that must run eagerly).
    ``forward`` may instead take its attributes and return the whole forward protocol
    (``params`` is then ``"own"``).

    ``into=True``: ``forward(x_flat, out_flat)`` is a compiled loop writing the result (see
    kernels/_vmath.py); such ops take no attributes (their inputs are always floating).
    """

    def _saved(x, result):
        return {"x": (x,), "result": (result,), "both": (x, result)}.get(saves, ())

    if params == "own":
        fwd = forward
    else:

        def fwd(x, **kwargs):
            if into:
                result = elementwise(forward, x, into=True)
            else:
                fx = (lambda chunk: forward(chunk, **kwargs)) if kwargs else forward
                result = np.asarray(elementwise(fx, x), dtype=x.dtype)
            p = params(**kwargs) if params else (0.0, 0.0)
            return result, _saved(x, result), (result.size,), p

        fwd.__name__ = name
        if params is not None:
            attributes_of(fwd, params, skip=0)
    if cases is None:
        cases = [Case(((3, 4),), low=low, high=high), Case(((),), low=low, high=high)]
    kw.setdefault("methods", (name,))
    if lazy is not None:
        mask = {"x": 1, "result": 1 << 16, "both": 1 | (1 << 16)}.get(saves, 0)
        lazy_spec = kw.pop("lazy_spec", None)
        if lazy_spec is None and callable(params):
            lazy_spec = functools.partial(_mapped_params, params)
        kw["lazy"] = (_unary_spec(mask, lazy_spec), _unary_lazy(name, _compiled(lazy)))
    zero = d is _zero_d
    op = defop(
        name,
        fwd,
        _unary_kernel(name, _compiled(d), saves, select or zero),
        cases=cases,
        formula=_unary_formula(tensor_d or d, saves, zero),
        **kw,
    )
    op.d = d  # (the derivative, for forward-mode rules and tests)
    op.saved_names = {"x": ("self",), "result": ("result",), "both": ("self", "result")}.get(
        saves, ()
    )
    op.tensor_d = tensor_d or d  # (the same on tensors: forward AD's t * d)
    op.select = select or zero
    return op


def _mapped_params(params, kwargs):
    try:
        return params(**kwargs)
    except TypeError:  # (an unknown keyword: the eager path raises torch's error)
        return None


def _unary_spec(mask, params):
    """The deferred forward's spec: no attributes, or those ``params(kwargs)`` maps."""

    def spec(shapes, kwargs):
        if params is None:
            if kwargs:
                return None
            p = (0.0, 0.0)
        else:
            p = params(kwargs)
            if p is None:
                return None
        (shape,) = shapes
        n = math.prod(shape)
        return shape, (n,), p, mask, n

    return spec


neg = unary(
    "neg",
    np.negative,
    lambda x, r, p0, p1: -1.0,
    saves=None,
    lazy=lambda x, p0, p1: -x,
    dunders=("__neg__",),
    methods=("neg", "negative"),
    int_ok=True,
    doc="-input.",
    jvp="linear",
)
abs_ = unary(
    "abs",
    np.abs,
    lambda x, r, p0, p1: m.where(x > 0.0, 1.0, m.where(x < 0.0, -1.0, 0.0)),
    lazy=lambda x, p0, p1: abs(x),
    dunders=("__abs__",),
    int_ok=True,
    doc="|input|; its derivative is sign(input) (0 at 0, as torch).",
)
sqrt = unary(
    "sqrt",
    np.sqrt,
    lambda x, r, p0, p1: 0.5 / r,
    saves="result",
    lazy=lambda x, p0, p1: np.sqrt(x),
    low=0.1,
    high=3.0,
    doc="The square root of input; derivative 1 / (2 sqrt(x)).",
)
exp = unary(
    "exp",
    _vmath.exp_into,
    lambda x, r, p0, p1: r,
    saves="result",
    lazy=lambda x, p0, p1: _vmath.vexp(x),  # (as the eager forward's exp_into)
    into=True,
    doc="e^input; derivative e^x.",
)
log = unary(
    "log",
    np.log,
    lambda x, r, p0, p1: 1.0 / x,
    lazy=lambda x, p0, p1: np.log(x),
    low=0.1,
    high=3.0,
    doc="The natural logarithm of input; derivative 1 / x.",
)
log1p = unary(
    "log1p",
    np.log1p,
    lambda x, r, p0, p1: 1.0 / (1.0 + x),
    lazy=lambda x, p0, p1: np.log1p(x),
    low=-0.9,
    high=3.0,
    doc="log(1 + input), exact for small input; derivative 1 / (1 + x).",
    special=("log1p",),
)
expm1 = unary(
    "expm1",
    np.expm1,
    lambda x, r, p0, p1: r + 1.0,
    saves="result",
    lazy=lambda x, p0, p1: np.expm1(x),
    doc="e^input - 1, exact for small input; derivative e^x.",
    special=("expm1",),
)
sin = unary(
    "sin",
    np.sin,
    lambda x, r, p0, p1: m.cos(x),
    lazy=lambda x, p0, p1: np.sin(x),
    doc="The sine of input; derivative cos(x).",
)
cos = unary(
    "cos",
    np.cos,
    lambda x, r, p0, p1: -m.sin(x),
    lazy=lambda x, p0, p1: np.cos(x),
    doc="The cosine of input; derivative -sin(x).",
)
tanh = unary(
    "tanh",
    _vmath.tanh_into,
    lambda x, r, p0, p1: 1.0 - r * r,
    saves="result",
    lazy=lambda x, p0, p1: _vmath.vtanh(x),  # (as the eager forward's tanh_into)
    nn_functional=True,
    into=True,
    doc="The hyperbolic tangent of input; derivative 1 - tanh(x)^2.",
)
sigmoid = unary(
    "sigmoid",
    _vmath.sigmoid_into,
    lambda x, r, p0, p1: r * (1.0 - r),
    saves="result",
    lazy=lambda x, p0, p1: _sigmoid1(x),
    nn_functional=True,
    into=True,
    doc="1 / (1 + e^-input); derivative s(x) (1 - s(x)).",
    special=("expit",),
)


@numba.njit(inline="always")
def _sigmoid1(z):
    # 1 / (1 + exp(-z)) with an exp that never overflows, as the eager forward's sigmoid_into
    # (vexp is arithmetic: the deferred loop vectorises; with math.exp, a libm call an
    # element, a 1,024-element sigmoid took ~10 us)
    e = _vmath.vexp(-abs(z))
    return (1.0 if z >= 0 else e) / (1.0 + e)


@numba.njit(inline="always")
def _softplus1(v, beta, threshold):
    # torch: log1p(exp(beta v)) / beta, and v itself where beta v > threshold;
    # log1p(exp(z)) = max(z, 0) + log1p(exp(-|z|)), whose exp never overflows
    z = v * beta
    r = (max(z, 0.0) + math.log1p(_vmath.vexp(-abs(z)))) / beta
    return v if z > threshold else r


@cached(nogil=True)
def _relu_loop(x):
    # one vectorised pass; NaN passes through as in torch (np.maximum is ~5x slower here)
    out = np.empty_like(x)
    xf = x.reshape(-1)
    of = out.reshape(-1)
    zero = x.dtype.type(0)
    for i in range(xf.size):
        v = xf[i]
        of[i] = zero if v <= zero else v
    return out


def _relu(x):
    if x.size >= 4096 and x.dtype.kind == "f" and x.flags.c_contiguous:
        return _relu_loop(x)
    return np.maximum(x, x.dtype.type(0))


_relu.unsplit = True  # memory-bound: split, each part's result is copied (_threads.elementwise)


# torch: threshold_backward(grad, result, 0): no gradient where result <= 0 (a NaN result
# passes it)
relu = unary(
    "relu",
    _relu,
    lambda x, r, p0, p1: m.where(r <= 0.0, 0.0, 1.0),
    saves="result",
    select=True,
    lazy=lambda x, p0, p1: 0.0 if x <= 0.0 else x,  # (NaN passes through, as in torch)
    nn_functional=True,
    int_ok=True,
    doc="max(input, 0); derivative 1 where x > 0, else 0.",
)


def _softplus_forward(x, beta=1.0, threshold=20.0):
    # torch: log1p(exp(beta x)) / beta, and x itself where beta x > threshold
    p = (float(beta), float(threshold))
    if x.size == 1 and x.ndim == 0:  # one element: math is ~8x cheaper than 5 numpy calls
        v = float(x)
        z = v * beta
        r = v if z > threshold else math.log1p(math.exp(z)) / beta
        result = np.asarray(r, dtype=x.dtype)
        return result, (x,), (1,), p
    if x.size <= 64 and x.dtype == np.float64:
        # one compiled pass: 16 elements 6.1 -> 2.9 us. (Not above: libm's log1p per element
        # made 1,000 elements 10 % slower than numpy's calls. Not float32: computed in
        # float32, as torch does, its exp underflows where float64's does not)
        xc = x if x.flags.c_contiguous else x.copy()  # (reshape(-1) of a view is a copy)
        result = np.empty(x.shape, x.dtype)
        _softplus_into(xc.reshape(-1), result.reshape(-1), *p)
        return result, (x,), (result.size,), p
    z = x * x.dtype.type(beta)
    safe = np.minimum(z, x.dtype.type(threshold))
    result = np.where(z > threshold, x, np.log1p(np.exp(safe)) / x.dtype.type(beta))
    result = result.astype(x.dtype, copy=False)
    return result, (x,), (result.size,), p


@numba.njit(**_vmath.LOOP)
def _softplus_into(x, out, beta, threshold):
    for i in range(x.size):
        out[i] = _softplus1(np.float64(x[i]), beta, threshold)


def _softplus_params(kwargs):
    if len(kwargs) > ("beta" in kwargs) + ("threshold" in kwargs):
        return None
    return float(kwargs.get("beta", 1.0)), float(kwargs.get("threshold", 20.0))


# d/dx log1p(exp(beta x)) / beta = sigmoid(beta x); 1 where beta x > threshold
softplus = unary(
    "softplus",
    _softplus_forward,
    lambda x, r, p0, p1: m.where(x * p0 > p1, 1.0, m.sigmoid(x * p0)),
    lazy=lambda x, p0, p1: _softplus1(x, p0, p1),  # (as the eager forward's compiled pass)
    lazy_spec=_softplus_params,
    params="own",
    methods=(),
    nn_functional=True,
    cases=[
        Case(((3, 4),), low=-25, high=25),
        Case(((5,),), {"beta": 2.0, "threshold": 3.0}, low=-4, high=4),
    ],
    doc="log(1 + e^(beta x)) / beta, and x itself where beta x > threshold.",
)


def _pow_scalar_forward(x, exponent):
    c = float(exponent)
    if x.dtype.kind == "f" and c in _POW_BY_PRODUCTS:
        # torch's pow kernel computes these exponents with products (numpy's power calls
        # pow for them: x ** 3 at 16,000 float32 elements 93 us, x * x * x 6.5 us); numpy
        # has its own fast paths for 2, 0.5, -1
        result = _POW_BY_PRODUCTS[c](x)
    else:
        result = np.power(x, x.dtype.type(c))
    return result, (x,), (result.size,), (c, 0.0)


_POW_BY_PRODUCTS = {
    3.0: lambda x: x * x * x,
    -2.0: lambda x: 1 / (x * x),
    -0.5: lambda x: 1 / np.sqrt(x),
}


# d/dx x**c = c x**(c-1); torch gives exactly 0 for c == 0
pow_scalar = unary(
    "pow_scalar",
    _pow_scalar_forward,
    lambda x, r, p0, p1: 0.0 if p0 == 0.0 else p0 * m.powc(x, p0 - 1.0),
    params="own",
    node_name="PowBackward0",
    functions=(),
    methods=(),
    cases=[
        Case(((3, 4),), {"exponent": 3.0}),
        # (the exponents whose derivative is a product, not a pow call: scalar.powc)
        Case(((3, 4),), {"exponent": 1.0}),
        Case(((3, 4),), {"exponent": 2.0}),
        Case(((3, 4),), {"exponent": 4.0}),
        Case(((4,),), {"exponent": -1.0}, low=0.3, high=2.0),
        Case(((4,),), {"exponent": -2.0}, low=0.3, high=2.0),
        Case(((4,),), {"exponent": 0.5}, low=0.3, high=2.0),
        Case(((4,),), {"exponent": 1.5}, low=0.3, high=2.0),
        Case(((4,),), {"exponent": -0.5}, low=0.3, high=2.0),
        Case(((3, 4),), {"exponent": 2.5}, low=0.2, high=2.0),
        Case(((4,),), {"exponent": -1.5}, low=0.3, high=2.0),
        Case(((4,),), {"exponent": 0.0}),
    ],
)


def _rpow_forward(y, base):
    a = float(base)
    result = np.power(y.dtype.type(a), y)
    return result, (result,), (result.size,), (a, 0.0)


# d/dy a**y = a**y log(a), p0 = a. torch: 0 where a == 0 and y >= 0 (where the result is 0
# or 1; 0 * log 0 would be NaN)
rpow = unary(
    "rpow",
    _rpow_forward,
    lambda x, r, p0, p1: (
        m.where(r == 0.0, 0.0, m.where(r == 1.0, 0.0, r * m.log(p0)))
        if p0 == 0.0
        else r * m.log(p0)
    ),
    saves="result",
    params="own",
    node_name="PowBackward2",
    functions=(),
    methods=(),
    cases=[Case(((3, 4),), {"base": 2.5}), Case(((3,),), {"base": 0.5})],
)


@numba.njit
def _p_pow(x, y):
    # d/dx x**y = y x**(y-1); d/dy x**y = x**y log x, taken as 0 where x == 0 and y >= 0 (torch)
    dx = 0.0 if y == 0.0 else y * x ** (y - 1.0)
    if x == 0.0 and y >= 0.0:
        dy = 0.0
    else:
        dy = x**y * math.log(x)
    return dx, dy


def _pow_api(apply, input, exponent):
    """torch.pow: tensor ** number, number ** tensor, tensor ** tensor."""
    if isinstance(exponent, numbers.Number) and not isinstance(exponent, bool):
        return apply(pow_scalar, input, exponent=exponent)
    if isinstance(input, numbers.Number) and not isinstance(input, bool):
        return apply(rpow, exponent, base=input)
    return apply(pow_, input, exponent)


def _pow_partials(ctx, x, y):
    # d/dx x**y = y x**(y-1) (0 where y == 0); d/dy = x**y log x (0 where x == 0, y >= 0)
    a, b = x._data, y._data
    ng = ctx.ng
    zero = x._data.dtype.type(0)
    dx = ng.where(b == 0, zero, y * x ** (y - 1.0))
    dy = ng.where((a == 0) & (b >= 0), zero, x**y * ng.log(ng.where(a == 0, 1.0, x)))
    return dx, dy


pow_ = _binary_op(
    "pow",
    np.power,
    _p_pow,
    formula=broadcast_formula(_pow_partials),
    api=_pow_api,
    methods=("pow",),
    dunders=("__pow__", "__rpow__"),
    node_name="PowBackward1",
    cases=[Case(c.shapes, low=0.3, high=2.0) for c in _BINARY_CASES],
    doc=(
        "input ** exponent; either may be a number. The derivative at 0 follows torch "
        "(0 ** 0 has gradient 0)."
    ),
)


def _clamp_forward(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("clamp(): At least one of 'min' or 'max' must not be None")
    lo = -math.inf if min is None else float(min)
    hi = math.inf if max is None else float(max)
    if x.dtype.kind == "f":
        result = np.clip(x, x.dtype.type(lo), x.dtype.type(hi))
    else:  # (integer bounds: _clamp_api made x floating for the others)
        result = np.clip(x, None if min is None else min, None if max is None else max)
    if lo > hi:  # torch: every element becomes max
        result = np.full_like(x, max)
    return result, (x,), (result.size,), (lo, hi)


def _clamp_api(apply, input, min=None, max=None):
    """torch.clamp: number bounds are the op's attributes; tensor bounds (broadcast, and
    differentiable) compose two wheres: where(r > max, max, r), r = where(x < min, min, x)
    (so min > max gives max, and the gradient at a bound goes to x, as torch's)."""
    if (min is None or isinstance(min, numbers.Number)) and (
        max is None or isinstance(max, numbers.Number)
    ):
        if getattr(input, "dtype", np.float64).kind != "f" and any(
            isinstance(b, float) for b in (min, max)
        ):
            # an integer tensor with a float bound is promoted (torch): adding the number 0.0
            # gives it the result dtype of the promotion rules
            input = apply(add, input, 0.0)
        return apply(clamp, input, min=min, max=max)
    from .elementwise import where

    result = input
    for bound, below in ((min, True), (max, False)):
        if bound is None:
            continue
        if isinstance(bound, numbers.Number):
            result = apply(clamp, result, **({"min": bound} if below else {"max": bound}))
            continue
        r = np.asarray(result.detach())
        b = np.asarray(bound.detach() if hasattr(bound, "detach") else bound)
        beyond = r < b if below else r > b
        result = apply(where, bound, result, condition=beyond)
    return result


# torch: the gradient passes where min <= x <= max (both ends inclusive), nothing elsewhere
clamp = unary(
    "clamp",
    _clamp_forward,
    lambda x, r, p0, p1: m.where(x >= p0, m.where(x <= p1, 1.0, 0.0), 0.0),
    select=True,
    params="own",
    api=_clamp_api,
    methods=("clamp", "clip"),
    functions=("clamp", "clip"),
    int_ok=True,
    node_name="ClampBackward1",
    cases=[
        Case(((3, 4),), {"min": -0.5, "max": 0.7}),
        Case(((6,),), {"min": 0.1}),
        Case(((6,),), {"max": 0.1}),
    ],
    doc=(
        "input limited to [min, max] (either bound may be None or a tensor); "
        "derivative 1 inside the bounds, else 0."
    ),
)


def _arc(name):
    # torch's numpy-style aliases: arcsin, arccosh, ...
    return {"methods": (name, "arc" + name[1:]), "functions": (name, "arc" + name[1:])}


reciprocal = unary(
    "reciprocal",
    lambda x: 1 / x,
    lambda x, r, p0, p1: -(r * r),
    saves="result",
    low=0.3,
    high=2.0,
    lazy=lambda x, p0, p1: 1.0 / x,
    doc="1 / input; derivative -1 / x^2.",
)
rsqrt = unary(
    "rsqrt",
    lambda x: 1 / np.sqrt(x),
    lambda x, r, p0, p1: -0.5 * r * r * r,
    saves="result",
    low=0.2,
    high=3.0,
    lazy=lambda x, p0, p1: 1.0 / np.sqrt(x),
    doc="1 / sqrt(input); derivative -1 / (2 x^1.5).",
)


def _square_api(apply, input):
    # torch.square is pow(x, 2): bool promotes to int64 with the exponent
    if getattr(input, "dtype", None) == np.bool_:
        input = apply(to_copy, input, dtype=np.int64)
    return apply(square, input)


square = unary(
    "square",
    np.square,
    lambda x, r, p0, p1: 2.0 * x,
    int_ok=True,
    api=_square_api,
    lazy=lambda x, p0, p1: x * x,
    doc="input * input; derivative 2x.",
)
exp2 = unary(
    "exp2",
    np.exp2,
    lambda x, r, p0, p1: r * _LN2,
    saves="result",
    lazy=lambda x, p0, p1: np.exp2(x),
    doc="2^input; derivative 2^x log 2.",
    special=("exp2",),
)
log2 = unary(
    "log2",
    np.log2,
    lambda x, r, p0, p1: 1.0 / (x * _LN2),
    low=0.2,
    high=3.0,
    lazy=lambda x, p0, p1: np.log2(x),
    doc="The base-2 logarithm of input; derivative 1 / (x log 2).",
)
log10 = unary(
    "log10",
    np.log10,
    lambda x, r, p0, p1: 1.0 / (x * _LN10),
    low=0.2,
    high=3.0,
    lazy=lambda x, p0, p1: np.log10(x),
    doc="The base-10 logarithm of input; derivative 1 / (x log 10).",
)
tan = unary(
    "tan",
    np.tan,
    lambda x, r, p0, p1: 1.0 + r * r,
    saves="result",
    low=-1.2,
    high=1.2,
    lazy=lambda x, p0, p1: np.tan(x),
    doc="The tangent of input; derivative 1 + tan(x)^2.",
)
asin = unary(
    "asin",
    np.arcsin,
    lambda x, r, p0, p1: m.rsqrt(1.0 - x * x),
    low=-0.9,
    high=0.9,
    **_arc("asin"),
    lazy=lambda x, p0, p1: np.arcsin(x),
    doc="The inverse sine of input; derivative 1 / sqrt(1 - x^2).",
)
acos = unary(
    "acos",
    np.arccos,
    lambda x, r, p0, p1: -m.rsqrt(1.0 - x * x),
    low=-0.9,
    high=0.9,
    **_arc("acos"),
    lazy=lambda x, p0, p1: np.arccos(x),
    doc="The inverse cosine of input; derivative -1 / sqrt(1 - x^2).",
)
atan = unary(
    "atan",
    np.arctan,
    lambda x, r, p0, p1: 1.0 / (1.0 + x * x),
    **_arc("atan"),
    lazy=lambda x, p0, p1: np.arctan(x),
    doc="The inverse tangent of input; derivative 1 / (1 + x^2).",
)
sinh = unary(
    "sinh",
    np.sinh,
    lambda x, r, p0, p1: m.cosh(x),
    lazy=lambda x, p0, p1: np.sinh(x),
    doc="The hyperbolic sine of input; derivative cosh(x).",
)
cosh = unary(
    "cosh",
    np.cosh,
    lambda x, r, p0, p1: m.sinh(x),
    lazy=lambda x, p0, p1: np.cosh(x),
    doc="The hyperbolic cosine of input; derivative sinh(x).",
)
asinh = unary(
    "asinh",
    np.arcsinh,
    lambda x, r, p0, p1: m.rsqrt(x * x + 1.0),
    **_arc("asinh"),
    lazy=lambda x, p0, p1: np.arcsinh(x),
    doc="The inverse hyperbolic sine of input; derivative 1 / sqrt(x^2 + 1).",
)
acosh = unary(
    "acosh",
    np.arccosh,
    lambda x, r, p0, p1: m.rsqrt((x - 1.0) * (x + 1.0)),
    low=1.1,
    high=3.0,
    **_arc("acosh"),
    lazy=lambda x, p0, p1: np.arccosh(x),
    doc="The inverse hyperbolic cosine of input; derivative 1 / sqrt(x^2 - 1).",
)
atanh = unary(
    "atanh",
    np.arctanh,
    lambda x, r, p0, p1: 1.0 / (1.0 - x * x),
    low=-0.9,
    high=0.9,
    **_arc("atanh"),
    lazy=lambda x, p0, p1: np.arctanh(x),
    doc="The inverse hyperbolic tangent of input; derivative 1 / (1 - x^2).",
)
erf = unary(
    "erf",
    _vmath.erf_into,
    lambda x, r, p0, p1: _TWO_OVER_SQRT_PI * m.exp(-(x * x)),
    into=True,
    lazy=lambda x, p0, p1: _vmath.verf(x),
    doc="The error function of input; derivative 2 / sqrt(pi) e^(-x^2).",
    special=("erf",),
)
erfc = unary(
    "erfc",
    _vmath.erfc_into,
    lambda x, r, p0, p1: -_TWO_OVER_SQRT_PI * m.exp(-(x * x)),
    into=True,
    lazy=lambda x, p0, p1: _vmath.verfc(x),
    doc="1 - erf(input); derivative -2 / sqrt(pi) e^(-x^2).",
    special=("erfc",),
)

# ---------------------------------------------------------------------------------------------
# special functions (torch.special): the gamma family computed by compiled loops
# (kernels/_special.py: Cephes' algorithms, as torch's), the others' forwards by scipy.special;
# every derivative in the scalar vocabulary


@cached(**_vmath.LOOP)
def _lgamma_into(x, out):
    for i in range(x.size):
        out[i] = math.lgamma(np.float64(x[i]))


@cached(**_vmath.LOOP)
def _digamma_into(x, out):
    for i in range(x.size):
        out[i] = _special.digamma(np.float64(x[i]))


@cached(**_vmath.LOOP)
def _polygamma_into(x, out, n):
    for i in range(x.size):
        out[i] = _special.polygamma(n, np.float64(x[i]))


lgamma = unary(
    "lgamma",
    _lgamma_into,
    lambda x, r, p0, p1: m.digamma(x),
    into=True,
    lazy=lambda x, p0, p1: math.lgamma(x),
    special=("gammaln",),
    low=0.2,
    high=4.0,
    doc="log |Gamma(input)|; derivative digamma(x).",
)
digamma = unary(
    "digamma",
    _digamma_into,
    lambda x, r, p0, p1: m.polygamma(1.0, x),
    into=True,
    lazy=lambda x, p0, p1: _special.digamma(x),
    special=("digamma", "psi"),
    low=0.2,
    high=4.0,
    doc="d/dx log Gamma(input), -inf at 0 and NaN at the negative integers; derivative "
    "polygamma(1, x).",
)


def _polygamma_forward(x, n):
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    k = float(n)
    result = elementwise(lambda xf, out: _polygamma_into(xf, out, k), x, into=True)
    return result, (x,), (result.size,), (k, 0.0)


def _polygamma_api(apply, n, input):  # noqa: A002  (torch's argument names)
    # ng.polygamma(n, input), and the method input.polygamma(n) (its operands the other way)
    if not isinstance(n, numbers.Integral) and isinstance(input, numbers.Integral):
        n, input = input, n
    return apply(polygamma, input, n=n)


polygamma = unary(
    "polygamma",
    _polygamma_forward,
    lambda x, r, p0, p1: m.polygamma(p0 + 1.0, x),
    params="own",
    api=_polygamma_api,
    special=("polygamma",),
    cases=[
        Case(((3, 4),), {"n": 1}, low=0.2, high=4.0),
        Case(((5,),), {"n": 3}, low=0.5, high=4.0),
        Case(((),), {"n": 0}, low=0.5, high=4.0),
    ],
    doc="The n-th derivative of digamma at input; its derivative polygamma(n + 1, x).\n"
    "n: (int) the order of the derivative, n >= 0.",
)


def _scipy(name):
    """An eager forward from the scipy.special ufunc ``name``, in the input's dtype (scipy.special
    is imported at the first call: it added 30-70 ms to ``import nautograd``)."""

    def forward(x):
        import scipy.special

        return getattr(scipy.special, name)(x).astype(x.dtype, copy=False)

    forward.__name__ = name
    return forward


erfinv = unary(
    "erfinv",
    _scipy("erfinv"),
    lambda x, r, p0, p1: _SQRT_PI_OVER_2 * m.exp(r * r),
    saves="result",
    special=("erfinv",),
    low=-0.9,
    high=0.9,
    doc="The inverse of erf: y with erf(y) = input, for -1 <= input <= 1; derivative "
    "sqrt(pi) / 2 e^(y^2).",
)


def _logit(x, eps=None):
    z = x if eps is None else np.clip(x, x.dtype.type(eps), x.dtype.type(1.0 - eps))
    with np.errstate(divide="ignore", invalid="ignore"):
        result = np.log(z / (1 - z))
    # p0: eps, -1 without (torch's logit_backward: a zero gradient outside [eps, 1 - eps])
    return result, (x,), (result.size,), (-1.0 if eps is None else float(eps), 0.0)


logit = unary(
    "logit",
    _logit,
    lambda x, r, p0, p1: m.where(
        p0 >= 0.0,
        m.where(x < p0, 0.0, m.where(x > 1.0 - p0, 0.0, 1.0 / (x * (1.0 - x)))),
        1.0 / (x * (1.0 - x)),
    ),
    select=True,
    params="own",
    special=("logit",),
    cases=[
        Case(((3, 4),), low=0.05, high=0.95),
        Case(((6,),), {"eps": 0.2}, low=0.05, high=0.95, gradcheck=False),
    ],
    doc="log(p / (1 - p)) of p = input, clamped to [eps, 1 - eps] when eps is given; "
    "derivative 1 / (p (1 - p)), zero outside [eps, 1 - eps].\n"
    "eps: (float, optional) the clamp of input. Default: None, no clamp.",
)
sinc = unary(
    "sinc",
    np.sinc,
    lambda x, r, p0, p1: m.where(x == 0.0, 0.0, (m.cos(_PI * x) - r) / x),
    saves="both",
    special=("sinc",),
    doc="sin(pi input) / (pi input), 1 at 0; derivative (cos(pi x) - sinc(x)) / x, 0 at 0.",
)
entr = unary(
    "entr",
    _scipy("entr"),
    lambda x, r, p0, p1: -(1.0 + m.log(x)),
    methods=(),
    functions=(),
    special=("entr",),
    low=0.1,
    high=3.0,
    doc="-input log(input) for input > 0, 0 at 0, -inf below; derivative -(1 + log x).",
)
erfcx = unary(
    "erfcx",
    _scipy("erfcx"),
    lambda x, r, p0, p1: 2.0 * x * r - _TWO_OVER_SQRT_PI,
    saves="both",
    methods=(),
    functions=(),
    special=("erfcx",),
    doc="e^(input^2) erfc(input), without overflow; derivative 2 x erfcx(x) - 2 / sqrt(pi).",
)
ndtr = unary(
    "ndtr",
    _scipy("ndtr"),
    lambda x, r, p0, p1: _INV_SQRT_2PI * m.exp(-0.5 * x * x),
    methods=(),
    functions=(),
    special=("ndtr",),
    doc="The standard normal distribution function at input; derivative e^(-x^2 / 2) / sqrt(2 pi).",
)
log_ndtr = unary(
    "log_ndtr",
    _scipy("log_ndtr"),
    lambda x, r, p0, p1: _INV_SQRT_2PI * m.exp(-0.5 * x * x - r),
    saves="both",
    methods=(),
    functions=(),
    special=("log_ndtr",),
    low=-5.0,
    high=3.0,
    doc="The logarithm of the standard normal distribution function at input, accurate "
    "far in the left tail; derivative e^(-x^2 / 2 - log_ndtr(x)) / sqrt(2 pi).",
)
ndtri = unary(
    "ndtri",
    _scipy("ndtri"),
    lambda x, r, p0, p1: _SQRT_2PI * m.exp(0.5 * r * r),
    saves="result",
    methods=(),
    functions=(),
    special=("ndtri",),
    low=0.05,
    high=0.95,
    doc="The inverse of ndtr: the standard normal quantile of input; derivative "
    "sqrt(2 pi) e^(y^2 / 2).",
)


def _bessel_into(nu, scaled):
    # out = I_nu(x) (scaled: I_nu(x) e^-|x|), both 1-D
    def f(x, out):
        for i in range(x.size):
            v = np.float64(x[i])
            out[i] = _special.bessel_ie(nu, v) if scaled else _special.bessel_i(nu, v)

    f.__name__ = f.__qualname__ = f"_bessel_{'ie' if scaled else 'i'}{int(nu)}_into"
    return cached(**_vmath.LOOP)(f)


i0 = unary(
    "i0",
    _bessel_into(0.0, False),
    lambda x, r, p0, p1: m.i1(x),
    into=True,
    special=("i0",),
    doc="The modified Bessel function of the first kind of order 0, I_0(input); derivative I_1(x).",
)
i0e = unary(
    "i0e",
    _bessel_into(0.0, True),
    lambda x, r, p0, p1: m.i1e(x) - m.where(x > 0.0, r, m.where(x < 0.0, -r, 0.0)),
    saves="both",
    into=True,
    methods=(),
    functions=(),
    special=("i0e",),
    doc="I_0(input) e^-|input|; derivative i1e(x) - sgn(x) i0e(x).",
)
i1 = unary(
    "i1",
    _bessel_into(1.0, False),
    lambda x, r, p0, p1: m.where(abs(x) > _EPS, m.i0(x) - r / m.where(abs(x) > _EPS, x, _EPS), 0.5),
    saves="both",
    into=True,
    methods=(),
    functions=(),
    special=("i1",),
    doc="The modified Bessel function of the first kind of order 1, I_1(input); derivative "
    "I_0(x) - I_1(x) / x (1/2 at 0).",
)
i1e = unary(
    "i1e",
    _bessel_into(1.0, True),
    lambda x, r, p0, p1: m.where(
        abs(x) > _EPS,
        m.i0e(x) - r * (m.where(x > 0.0, 1.0, -1.0) + 1.0 / m.where(abs(x) > _EPS, x, _EPS)),
        0.5,
    ),
    saves="both",
    into=True,
    methods=(),
    functions=(),
    special=("i1e",),
    doc="I_1(input) e^-|input|; derivative i0e(x) - i1e(x) (sgn(x) + 1 / x) (1/2 at 0).",
)


def _gelu_tanh(x):
    c = x.dtype.type(_SQRT_2_OVER_PI)
    return 0.5 * x * (1 + np.tanh(c * (x + x.dtype.type(_GELU_C) * x * x * x)))


def _gelu_forward(x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    if approximate == "none":
        result = elementwise(_vmath.gelu_into, x, into=True)
    else:
        result = np.asarray(elementwise(_gelu_tanh, x), dtype=x.dtype)
    # p0: 1 for the tanh approximation
    return result, (x,), (result.size,), (float(approximate == "tanh"), 0.0)


def _gelu_d(x, r, p0, p1):
    if p0 == 1.0:
        # 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + c x^3)
        t = m.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x * x * x))
        du = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_C * x * x)
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
    # x Phi(x): Phi(x) + x phi(x)
    return m.gelu_grad(x)


gelu = unary(
    "gelu",
    _gelu_forward,
    _gelu_d,
    params="own",
    nn_functional=True,
    methods=(),
    cases=[Case(((3, 4),), low=-4, high=4), Case(((5,),), {"approximate": "tanh"}, low=-4, high=4)],
    doc="x Phi(x), Phi the standard normal CDF (approximate='tanh': torch's tanh approximation).",
)


def _silu_d(x, r, p0, p1):
    s = m.sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


silu = unary(
    "silu",
    _vmath.silu_into,
    _silu_d,
    nn_functional=True,
    methods=(),
    low=-4,
    high=4,
    into=True,
    lazy=lambda x, p0, p1: x * _sigmoid1(x),
    doc="x * sigmoid(x).",
)
# alpha (exp(x) - 1) for x <= 0 (NaN: NaN, as torch's vectorised loop, which takes all but a
# tensor's last few elements; its scalar loop gives 1 there)
elu = unary(
    "elu",
    lambda x, alpha=1.0: np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(np.minimum(x, 0))),
    lambda x, r, p0, p1: m.where(x > 0.0, 1.0, p0 * m.exp(x)),
    params=lambda alpha=1.0: (float(alpha), 0.0),
    nn_functional=True,
    methods=(),
    cases=[Case(((3, 4),)), Case(((6,),), {"alpha": 0.5})],
    lazy=lambda x, p0, p1: x if x > 0.0 else p0 * np.expm1(x),
    doc=(
        "x where x > 0, else alpha (e^x - 1).\n"
        "alpha: (number) the limit -alpha approached as x -> -inf. Default: 1."
    ),
)
leaky_relu = unary(
    "leaky_relu",
    lambda x, negative_slope=0.01: np.where(x > 0, x, x * x.dtype.type(negative_slope)),
    lambda x, r, p0, p1: m.where(x > 0.0, 1.0, p0),
    params=lambda negative_slope=0.01: (float(negative_slope), 0.0),
    nn_functional=True,
    methods=(),
    cases=[Case(((3, 4),)), Case(((6,),), {"negative_slope": 0.2})],
    lazy=lambda x, p0, p1: x if x > 0.0 else x * p0,
    doc="x where x > 0, else negative_slope * x.",
)


def _hardtanh(x, min_val=-1.0, max_val=1.0):
    if min_val > max_val:
        raise ValueError(
            f"hardtanh(): min_val ({min_val}) cannot be greater than max_val ({max_val})"
        )
    if x.dtype.kind != "f":  # (an integer x: a bound outside its range, -1 for uint8, is fine)
        return np.clip(x, min_val, max_val).astype(x.dtype)
    return np.clip(x, x.dtype.type(min_val), x.dtype.type(max_val))


# torch: zero at and beyond both ends (and at NaN, as its vectorised loop)
hardtanh = unary(
    "hardtanh",
    _hardtanh,
    lambda x, r, p0, p1: m.where(x > p0, m.where(x < p1, 1.0, 0.0), 0.0),
    select=True,
    params=lambda min_val=-1.0, max_val=1.0: (float(min_val), float(max_val)),
    nn_functional=True,
    methods=(),
    cases=[Case(((3, 4),)), Case(((6,),), {"min_val": -0.5, "max_val": 1.5})],
    int_ok=True,
    doc="input limited to [min_val, max_val].",
)


def _nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


# the gradient passes where x is finite
nan_to_num = unary(
    "nan_to_num",
    _nan_to_num,
    lambda x, r, p0, p1: m.where(m.isfinite(x), 1.0, 0.0),
    params=lambda nan=0.0, posinf=None, neginf=None: (0.0, 0.0),
    cases=[Case(((3, 4),)), Case(((5,),), {"nan": 1.0, "posinf": 2.0, "neginf": -2.0})],
    int_ok=True,
    doc=(
        "input with NaN replaced by nan, +inf by posinf and -inf by neginf (the "
        "dtype's largest finite values by default)."
    ),
)

# piecewise-constant ops: zero gradient, as torch (integer inputs stay integer)
_STEP = dict(saves=None, int_ok=True, low=-3.0, high=3.0)
sign = unary(
    "sign",
    np.sign,
    _zero_d,
    **_STEP,
    lazy=lambda x, p0, p1: np.sign(x),
    doc="-1, 0 or 1 by the sign of input; zero gradient.",
)
floor = unary(
    "floor",
    np.floor,
    _zero_d,
    **_STEP,
    lazy=lambda x, p0, p1: np.floor(x),
    doc="The largest integer <= input; zero gradient.",
)
ceil = unary(
    "ceil",
    np.ceil,
    _zero_d,
    **_STEP,
    lazy=lambda x, p0, p1: np.ceil(x),
    doc="The smallest integer >= input; zero gradient.",
)
trunc = unary(
    "trunc",
    np.trunc,
    _zero_d,
    methods=("trunc", "fix"),
    functions=("trunc", "fix"),
    **_STEP,
    lazy=lambda x, p0, p1: np.trunc(x),
    doc="input rounded toward zero; zero gradient.",
)
round_ = unary(
    "round",
    lambda x, decimals=0: np.round(x, decimals),
    _zero_d,
    params=lambda decimals=0: (0.0, 0.0),
    saves=None,
    int_ok=True,
    cases=[Case(((3, 4),), low=-3, high=3), Case(((5,),), {"decimals": 2}, low=-3, high=3)],
    doc="input rounded to decimals places, half to even; zero gradient.",
    special=("round",),
)

# ---------------------------------------------------------------------------------------------
# binary ops: (dx, dy) = partial(x, y)


@numba.njit
def _p_atan2(x, y):
    # atan2(x, y) = angle of (y, x): d/dx = y / (x^2 + y^2), d/dy = -x / (x^2 + y^2);
    # torch: 0 at the origin (where 1 / (x^2 + y^2) is infinite)
    r = x * x + y * y
    if r == 0.0:
        return 0.0, -0.0
    return y / r, -x / r


def _atan2_partials(ctx, x, y):
    # 1 / (x^2 + y^2), 0 at the origin (torch), times y and -x
    r = x * x + y * y
    recip = ctx.ng.where(r._data == 0, ctx.constant(0.0), 1.0 / ctx.ng.where(r._data == 0, 1.0, r))
    return y * recip, -x * recip


@numba.njit
def _p_logaddexp(x, y):
    # d/dx log(e^x + e^y) = sigmoid(x - y), written so that neither exp overflows
    z = x - y
    if z >= 0:
        e = math.exp(-z)
        return 1.0 / (1.0 + e), e / (1.0 + e)
    e = math.exp(z)
    return e / (1.0 + e), 1.0 / (1.0 + e)


@numba.njit
def _p_hypot(x, y):
    r = math.sqrt(x * x + y * y)
    return x / r, y / r


@numba.njit
def _p_fmod(x, y):
    # x - trunc(x / y) y
    q = x / y
    return 1.0, -(math.floor(q) if q >= 0 else math.ceil(q))


@numba.njit
def _p_remainder(x, y):
    # x - floor(x / y) y
    return 1.0, -math.floor(x / y)


def _bce(x, t):
    # -(t log x + (1 - t) log(1 - x)), each log clamped at -100 (torch: finite at 0 and 1)
    with np.errstate(divide="ignore"):
        return -(t * np.maximum(np.log(x), -100.0) + (1 - t) * np.maximum(np.log1p(-x), -100.0))


@numba.njit(error_model="numpy")
def _p_bce(x, t):
    # torch's binary_cross_entropy_backward: (x - t) / max(x (1 - x), 1e-12), finite at x = 0
    # and 1 where the composition's 1 / x is not; d/dt = -logit(x) = log(1 - x) - log(x)
    return (x - t) / max(x * (1.0 - x), 1e-12), np.log1p(-x) - np.log(x)


def _bce_partials(ctx, x, t):
    return (x - t) / (x * (1.0 - x)).clamp(min=1e-12), (-x).log1p() - x.log()


# binary_cross_entropy's elements (nn.functional.binary_cross_entropy reduces them): an op of
# its own for torch's gradient at probabilities 0 and 1
binary_cross_entropy_elements = _binary_op(
    "_binary_cross_entropy",
    _bce,
    _p_bce,
    formula=broadcast_formula(_bce_partials),
    functions=(),
    node_name="BinaryCrossEntropyBackward0",
    cases=[Case(((3, 4), (3, 4)), low=0.05, high=0.95), Case(((4,), (4,)), low=0.05, high=0.95)],
)


_TENSORS = [c for c in _BINARY_CASES if all(isinstance(s, tuple) for s in c.shapes)]
atan2 = _binary_op(
    "atan2",
    np.arctan2,
    _p_atan2,
    formula=broadcast_formula(lambda ctx, x, y: _atan2_partials(ctx, x, y)),
    methods=("atan2", "arctan2"),
    functions=("atan2", "arctan2"),
    cases=_TENSORS,
    doc="The angle of the point (other, input), atan(input / other) in the right quadrant.",
)
logaddexp = _binary_op(
    "logaddexp",
    np.logaddexp,
    _p_logaddexp,
    formula=broadcast_formula(lambda ctx, x, y: (ctx.ng.sigmoid(x - y), ctx.ng.sigmoid(y - x))),
    methods=("logaddexp",),
    cases=_TENSORS,
    doc="log(e^input + e^other), computed without overflow.",
)
hypot = _binary_op(
    "hypot",
    np.hypot,
    _p_hypot,
    formula=broadcast_formula(lambda ctx, x, y: (x / ctx.ng.hypot(x, y), y / ctx.ng.hypot(x, y))),
    methods=("hypot",),
    cases=_TENSORS,
    doc="sqrt(input^2 + other^2), computed without overflow.",
)
# kinks of fmod/remainder (x a multiple of y) are avoided by the ranges
fmod = _binary_op(
    "fmod",
    np.fmod,
    _p_fmod,
    formula=broadcast_formula(lambda ctx, x, y: (1.0, ctx.constant(-np.trunc(x._data / y._data)))),
    methods=("fmod",),
    int_ok=True,
    cases=[Case(((3, 4), (4,)), low=0.6, high=1.9), Case(((3, 4), 0.7), low=-1.9, high=1.9)],
    doc="The remainder of input / other with the sign of input (C's fmod).",
)
remainder = _binary_op(
    "remainder",
    np.remainder,
    _p_remainder,
    formula=broadcast_formula(lambda ctx, x, y: (1.0, ctx.constant(-np.floor(x._data / y._data)))),
    methods=("remainder",),
    dunders=("__mod__", "__rmod__"),
    int_ok=True,
    cases=[Case(((3, 4), (4,)), low=0.6, high=1.9), Case(((3, 4), 0.7), low=-1.9, high=1.9)],
    doc="The remainder of input / other with the sign of other (Python's %).",
)


def _xlog(log):
    """x log(y) (``log`` of y: log or log1p), 0 where x = 0 unless y is NaN (torch)."""

    def f(x, y):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = x * log(y)
        r = np.where(x == 0, np.zeros_like(r), r)
        return np.where(np.isnan(y), y, r).astype(r.dtype, copy=False)

    return f


@numba.njit(error_model="numpy")
def _p_xlogy(x, y):
    # d/dx log(y), 0 where x = 0 and y <= 0 (torch's mask); d/dy x / y
    dx = 0.0 if x == 0.0 and y <= 0.0 else math.log(y)
    return dx, x / y


@numba.njit(error_model="numpy")
def _p_xlog1py(x, y):
    dx = 0.0 if x == 0.0 and y <= -1.0 else math.log1p(y)
    return dx, x / (1.0 + y)


def _xlog_partials(log, low, dy):
    """xlogy's and xlog1py's partials on tensors (``low``: where log's argument is <= 0)."""

    def partials(ctx, x, y):
        stop = ctx.constant((x._data == 0) & (y._data <= low)).bool()
        return ctx.ng.where(stop, 0.0, log(y)), dy(x, y)

    return partials


_XLOG_CASES = [
    Case(((3, 4), (3, 4)), low=0.1, high=2.0),
    Case(((3, 4), (4,)), low=0.1, high=2.0),
    Case(((), (3,)), low=0.1, high=2.0),
    Case(((2, 3), 1.5), low=0.1, high=2.0),
    Case((1.5, (2, 3)), low=0.1, high=2.0),
]
xlogy = _binary_op(
    "xlogy",
    _xlog(np.log),
    _p_xlogy,
    formula=broadcast_formula(_xlog_partials(lambda y: y.log(), 0.0, lambda x, y: x / y)),
    methods=("xlogy",),
    special=("xlogy",),
    cases=_XLOG_CASES,
    doc="input log(other), 0 where input is 0 (unless other is NaN).",
)
xlog1py = _binary_op(
    "xlog1py",
    _xlog(np.log1p),
    _p_xlog1py,
    formula=broadcast_formula(
        _xlog_partials(lambda y: y.log1p(), -1.0, lambda x, y: x / (1.0 + y))
    ),
    functions=(),
    special=("xlog1py",),
    cases=_XLOG_CASES,
    doc="input log(1 + other), 0 where input is 0 (unless other is NaN).",
)

# ---------------------------------------------------------------------------------------------
# three broadcasting operands: result = f(a, b, c, value); partial(a, b, c, value) -> 3 partials


def _ternary_kernel(name, partial):
    def backward(G, G2, go, gi, V, so, sa, ip, fp):
        # ip: nary_params (n, nd, shape, strides of a, b, c) then the operands' sizes
        n, nd = ip[0], ip[1]
        m = 2 + 4 * nd
        g = view(G, go[0], n)
        a = saved(V, so, sa, 0, ip[m])
        b = saved(V, so, sa, 1, ip[m + 1])
        c = saved(V, so, sa, 2, ip[m + 2])
        oa = bcast_offsets(ip, 2, nd, 0, n)
        ob = bcast_offsets(ip, 2, nd, 1, n)
        oc = bcast_offsets(ip, 2, nd, 2, n)
        v = fp[0]
        # one loop per input with a constant tuple index (the partials' types may differ)
        if gi[0] >= 0:
            grad = view(G, gi[0], ip[m])
            for i in range(n):
                grad[oa[i]] += g[i] * partial(a[oa[i]], b[ob[i]], c[oc[i]], v)[0]
        if gi[1] >= 0:
            grad = view(G, gi[1], ip[m + 1])
            for i in range(n):
                grad[ob[i]] += g[i] * partial(a[oa[i]], b[ob[i]], c[oc[i]], v)[1]
        if gi[2] >= 0:
            grad = view(G, gi[2], ip[m + 2])
            for i in range(n):
                grad[oc[i]] += g[i] * partial(a[oa[i]], b[ob[i]], c[oc[i]], v)[2]

    backward.__name__ = backward.__qualname__ = f"{name}_backward"
    return kernel(backward)


def _ternary_op(name, f, partial, cases, **kw):
    """result = f(a, b, c[, value]); the attributes of f (addcmul's ``value``) are the op's."""

    def forward(a, b, c, **kwargs):
        out, ip = nary_params(name, [a.shape, b.shape, c.shape])
        result = np.asarray(f(a, b, c, **kwargs), dtype=a.dtype)
        value = float(kwargs.get("value", 1.0))
        return result, (a, b, c), ip + (a.size, b.size, c.size), (value,)

    attributes_of(forward, f, skip=3, nin=3)
    kw.setdefault("methods", (name,))
    return defop(name, forward, _ternary_kernel(name, partial), nin=3, cases=cases, **kw)


@numba.njit
def _p_lerp(x, end, weight, v):
    # x + weight (end - x)
    return 1.0 - weight, weight, end - x


@numba.njit
def _p_addcmul(x, t1, t2, v):
    # x + v t1 t2
    return 1.0, v * t2, v * t1


@numba.njit
def _p_addcdiv(x, t1, t2, v):
    # x + v t1 / t2
    return 1.0, v / t2, -v * t1 / (t2 * t2)


_TERNARY_CASES = [
    Case(((3, 4), (3, 4), (3, 4))),
    Case(((3, 4), (4,), (3, 1))),
    Case(((2, 1, 3), (3,), ())),
]


def _lerp(x, end, weight):
    return x + weight * (end - x)


lerp = _ternary_op(
    "lerp",
    _lerp,
    _p_lerp,
    formula=broadcast_formula(lambda ctx, x, end, w: (1.0 - w, w, end - x)),
    cases=_TERNARY_CASES + [Case(((3, 4), (3, 4), 0.3))],
    tensor_names=("input", "end", "weight"),
    doc=(
        "Linear interpolation input + weight * (end - input).\n"
        "end: (Tensor) the value reached at weight 1.\n"
        "weight: (Tensor or number) the interpolation weight."
    ),
)


def _addcmul(x, t1, t2, value=1.0):
    return x + x.dtype.type(value) * t1 * t2


def _addcdiv(x, t1, t2, value=1.0):
    return x + x.dtype.type(value) * t1 / t2


addcmul = _ternary_op(
    "addcmul",
    _addcmul,
    _p_addcmul,
    # (value: fp[0])
    formula=broadcast_formula(lambda ctx, x, t1, t2: (1.0, ctx.fp[0] * t2, ctx.fp[0] * t1)),
    cases=_TERNARY_CASES + [Case(((3,), (3,), (3,)), {"value": 0.5})],
    doc=(
        "input + value * tensor1 * tensor2.\n"
        "value: (number) the multiplier of the product. Default: 1."
    ),
)
addcdiv = _ternary_op(
    "addcdiv",
    _addcdiv,
    _p_addcdiv,
    formula=broadcast_formula(
        lambda ctx, x, t1, t2: (1.0, ctx.fp[0] / t2, -ctx.fp[0] * t1 / (t2 * t2))
    ),
    cases=[Case(c.shapes, c.kwargs, low=0.5, high=2.0) for c in _TERNARY_CASES]
    + [Case(((3,), (3,), (3,)), {"value": -2.0}, low=0.5, high=2.0)],
    doc=(
        "input + value * tensor1 / tensor2.\n"
        "value: (number) the multiplier of the quotient. Default: 1."
    ),
)

# ---------------------------------------------------------------------------------------------
# tests and logical ops: bool results, no gradient


def _predicate(name, f, nin=1, **kw):
    def forward(*xs):
        if nin == 2:
            binary_params(name, xs[0].shape, xs[1].shape)
        return f(*xs), (), (), ()

    forward.__name__ = name
    kw.setdefault("methods", (name,))
    cases = [Case(((3, 4),))] if nin == 1 else [Case(((3, 4), (4,)))]
    return defop(name, forward, nin=nin, int_result=True, int_ok=True, cases=cases, **kw)


isnan = _predicate("isnan", np.isnan, doc="True where input is NaN.")
isinf = _predicate("isinf", np.isinf, doc="True where input is +inf or -inf.")
isfinite = _predicate("isfinite", np.isfinite, doc="True where input is neither NaN nor infinite.")
isposinf = _predicate("isposinf", np.isposinf, doc="True where input is +inf.")
isneginf = _predicate("isneginf", np.isneginf, doc="True where input is -inf.")
signbit = _predicate(
    "signbit", np.signbit, doc="True where the sign bit of input is set (-0.0 included)."
)
logical_not = _predicate("logical_not", np.logical_not, doc="True where input is zero.")
logical_and = _predicate(
    "logical_and", np.logical_and, nin=2, doc="True where both input and other are nonzero."
)
logical_or = _predicate(
    "logical_or", np.logical_or, nin=2, doc="True where input or other is nonzero."
)
logical_xor = _predicate(
    "logical_xor",
    np.logical_xor,
    nin=2,
    doc="True where exactly one of input and other is nonzero.",
)
