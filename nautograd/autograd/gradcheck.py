"""``gradcheck`` and ``gradgradcheck``: finite differences against the analytical Jacobian.

torch.autograd.gradcheck's checks and texts (reference section I; torch 2.13's
``torch/autograd/gradcheck.py``), for real inputs: the numerical Jacobian by central
differences of every input element (slow mode) or along one random direction per input
(``fast_mode``: ``v^T J u``), compared with ``allclose`` against the Jacobian assembled from
``autograd.grad`` one output element at a time, which is computed twice and must agree
within ``nondet_tol`` (reentrancy); then that a zero ``grad_output`` gives zero gradients.
Nautograd has no undefined gradients: ``check_undefined_grad`` runs the backward with zero
output gradients, which is what torch's built-in ops and Functions that materialize grads see.
"""

import warnings

import numpy as np

from ..tensor import Tensor, _wrap
from .engine import grad as _grad


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck``/``gradgradcheck`` when a check fails (a RuntimeError)."""


FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""

FAST_FAIL_SLOW_OK_MSG = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck:

If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `fast_mode=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_fast_mode=False`
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_fast_mode=False`
""".strip()

_UNDEFINED_NOTE = (
    'Please look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"'
)


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _differentiable_outputs(x):
    return tuple(o for o in _as_tuple(x) if isinstance(o, Tensor) and o.requires_grad)


def _diff_inputs(inputs):
    return [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]


def _check_inputs(inputs):
    any_requires_grad = False
    for idx, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t.requires_grad):
            continue
        if t.dtype != np.float64:
            warnings.warn(
                f"Input #{idx} requires gradient and is not a double precision floating point "
                "or complex. This check will likely fail if all the inputs are not of double "
                "precision floating point or complex. ",
                stacklevel=4,
            )
        # (numpy gives an empty array zero strides: nothing overlaps there)
        strides = zip(t._data.strides, t.shape, strict=True)
        if t.numel() and any(s == 0 and n > 1 for s, n in strides):
            raise RuntimeError(
                f"The {idx}th input has a dimension with stride 0. gradcheck only supports "
                "inputs that are non-overlapping to be able to compute the numerical "
                "gradients correctly. You should call .contiguous on the input before "
                "passing it to gradcheck."
            )
        any_requires_grad = True
    if not any_requires_grad:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of "
            "them have requires_grad=True."
        )


def _evaluate(func, inputs):
    """The function's outputs as flat float64 copies (every tensor output, in order; an
    output may be an input itself, which the next perturbation changes)."""
    return [
        np.array(o._data, np.float64).reshape(-1)
        for o in _as_tuple(func(*inputs))
        if isinstance(o, Tensor)
    ]


def _perturbed(func, inputs, set_to, values):
    """The outputs at the input set to ``values[0]``, then ``values[1]``; then ``values[2]``
    (the original) is put back."""
    orig = values
    set_to(orig[0])
    a = _evaluate(func, inputs)
    set_to(orig[1])
    b = _evaluate(func, inputs)
    set_to(orig[2])
    return a, b


def _numerical_jacobian(func, inputs, eps):
    """``[input i][output o]``: (input numel, output numel) arrays of central differences,
    ``(f(x + eps e_k) - f(x - eps e_k)) / (2 eps)`` in row k (inputs that require grad)."""
    result = []
    for t in _diff_inputs(inputs):
        data = t._data  # perturbed in place, as torch perturbs ``.data``
        columns = None
        for k in range(data.size):
            idx = np.unravel_index(k, data.shape)
            orig = data[idx].copy()

            def set_to(value, idx=idx, data=data):
                data[idx] = value

            a, b = _perturbed(func, inputs, set_to, (orig - eps, orig + eps, orig))
            if columns is None:
                columns = [np.zeros((data.size, x.size)) for x in a]
            for jac, xa, xb in zip(columns, a, b, strict=True):
                jac[k] = (xb - xa) / (2 * eps)
        result.append(columns or [])
    return result


def _vjp(output, diff, v):
    return _grad(output, diff, _wrap(v.reshape(output.shape)), retain_graph=True, allow_unused=True)


def _analytical_jacobian(inputs, output, nondet_tol, check_grad_dtypes):
    """``[input i]``: (input numel, output numel) arrays from one ``grad`` per output
    element, computed twice (the reentrancy check)."""
    diff = _diff_inputs(inputs)
    n = output.numel()
    jacobians = [[np.zeros((t.numel(), n)) for t in diff] for _ in range(2)]
    types_ok = sizes_ok = True
    for jac in jacobians:
        for j in range(n):
            v = np.zeros(n, output._data.dtype)
            v[j] = 1
            for i, g in enumerate(_vjp(output, diff, v)):
                if g is None:
                    continue
                types_ok &= g.dtype == diff[i].dtype
                if g.numel() != diff[i].numel():
                    sizes_ok = False
                    continue
                jac[i][:, j] = g._data.reshape(-1)
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not all(_within(a, b, nondet_tol) for a, b in zip(*jacobians, strict=True)):
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with same input and "
            "grad_output multiple times gives different values, although analytical gradient "
            "matches numerical gradient."
            f"The tolerance for nondeterminism was {nondet_tol}." + FAILED_NONDET_MSG
        )
    return jacobians[0]


def _within(a, b, tol):
    return a.size == 0 or float(np.abs(a - b).max()) <= tol


def _mismatch(analytical, numerical, o, i):
    # Jacobians print as tensors; fast mode's v^T J u as Python floats, as torch's
    def show(x):
        return x if isinstance(x, float) else _wrap(x)

    return (
        f"Jacobian mismatch for output {o:d} with respect to input {i:d},\n"
        f"numerical:{show(numerical)}\nanalytical:{show(analytical)}\n"
    )


def _check_no_differentiable_outputs(numerical):
    for per_input in numerical:
        for jac in per_input:
            if np.count_nonzero(jac):
                raise GradcheckError("Numerical gradient for function expected to be zero")


def _slow_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes, tol):
    numerical = _numerical_jacobian(func, inputs, eps)
    if not outputs:
        _check_no_differentiable_outputs(numerical)
        return
    tensors = [o for o in _as_tuple(func_out) if isinstance(o, Tensor)]
    keep = [k for k, o in enumerate(tensors) if o.requires_grad]
    for o_idx, output in enumerate(outputs):
        analytical = _analytical_jacobian(inputs, output, tol, check_grad_dtypes)
        for i, a in enumerate(analytical):
            n = numerical[i][keep[o_idx]]
            if not np.allclose(a, n, rtol, atol):
                raise GradcheckError(_mismatch(a, n, o_idx, i))


def _unit_vector(rng, size, dtype):
    v = rng.random(size).astype(dtype)
    return v / np.linalg.norm(v) if size else v


def _fast_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes, tol):
    # torch's fast mode: q = v^T J u for a random direction u per input and v per output;
    # the numerical q from a central difference along u, the analytical from one vjp with v
    rng = np.random.default_rng(0)  # a generator of its own: the user's seed is untouched
    diff = _diff_inputs(inputs)
    all_u = [_unit_vector(rng, t.numel(), t._data.dtype) for t in diff]
    all_v = [_unit_vector(rng, o.numel(), o._data.dtype) for o in outputs]
    tensors = [o for o in _as_tuple(func_out) if isinstance(o, Tensor)]
    keep = [k for k, o in enumerate(tensors) if o.requires_grad]
    jvps = []  # [input i][output k]: J_k u_i from central differences
    for t, u in zip(diff, all_u, strict=True):
        data = t._data
        orig = data.copy()
        du = u.reshape(data.shape) * eps

        def set_to(value, data=data):
            data[...] = value

        a, b = _perturbed(func, inputs, set_to, (orig - du, orig + du, orig))
        jvps.append([(xb - xa) / (2 * eps) for xa, xb in zip(a, b, strict=True)])
    if not outputs:
        for per_input in jvps:
            for jvp in per_input:
                if jvp.size and float(np.abs(jvp).max()) > tol:
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        return
    for o_idx, (output, v) in enumerate(zip(outputs, all_v, strict=True)):
        first = _vjp(output, diff, v)
        second = _vjp(output, diff, v)
        for i, (g1, g2, u) in enumerate(zip(first, second, all_u, strict=True)):
            a = 0.0 if g1 is None else float(g1._data.reshape(-1) @ u)
            a2 = 0.0 if g2 is None else float(g2._data.reshape(-1) @ u)
            if abs(a - a2) > tol:
                raise GradcheckError(
                    "Backward is not reentrant, i.e., running backward with same input and "
                    "grad_output multiple times gives different values, although analytical "
                    "gradient matches numerical gradient."
                    f"The tolerance for nondeterminism was {tol}." + FAILED_NONDET_MSG
                )
            n = float(v @ jvps[i][keep[o_idx]])
            # atol scaled by v^T M u (M all ones), as torch's _adjusted_atol
            if not np.allclose(a, n, rtol, atol * float(u.sum()) * float(v.sum())):
                raise GradcheckError(
                    _mismatch(a, n, o_idx, i)
                    + _slow_mode_report(func, inputs, outputs, i, o_idx, keep, eps, rtol, atol)
                )


def _slow_mode_report(func, inputs, outputs, i, o_idx, keep, eps, rtol, atol):
    numerical = _numerical_jacobian(func, inputs, eps)[i][keep[o_idx]]
    analytical = _analytical_jacobian(inputs, outputs[o_idx], float("inf"), False)[i]
    diff = float(np.abs(numerical - analytical).max()) if numerical.size else 0.0
    msg = (
        "\nThe above quantities relating the numerical and analytical jacobians are computed \n"
        "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for more "
        "background \nabout fast mode. Below, we recompute numerical and analytical jacobians "
        "in slow mode:\n\n"
        f"Numerical:\n {_wrap(numerical)}\n"
        f"Analytical:\n{_wrap(analytical)}\n\n"
        f"The max per-element difference (slow mode) is: {diff}.\n"
    )
    if np.allclose(analytical, numerical, rtol, atol):
        msg += FAST_FAIL_SLOW_OK_MSG
    return msg


def _test_backward_mul_by_grad_output(outputs, inputs):
    diff = _diff_inputs(inputs)
    if not diff:
        raise GradcheckError("no Tensors requiring grad found in input")
    zeros = [_wrap(np.zeros_like(o._data)) for o in outputs]
    for gi, di in zip(_grad(outputs, diff, zeros, allow_unused=True), diff, strict=True):
        if gi is None:
            continue
        if np.any(gi._data != 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if gi.dtype != di.dtype:
            raise GradcheckError("grad is incorrect type")
        if gi.shape != di.shape:
            raise GradcheckError("grad is incorrect size")


def _warn_bc_breaking():
    warnings.warn(
        "Backwards compatibility: New undefined gradient support checking feature is enabled "
        "by default, but it may break existing callers of this function. If this is true for "
        'you, you can call this function with "check_undefined_grad=False" to disable the '
        "feature",
        stacklevel=5,
    )


def _test_undefined_backward_mode(func, inputs):
    diff = _diff_inputs(inputs)
    if not diff:
        raise GradcheckError("no Tensors requiring grad found in input")
    outputs = _differentiable_outputs(func(*inputs))
    zeros = [_wrap(np.zeros_like(o._data)) for o in outputs]
    try:
        grads = _grad(outputs, diff, zeros, allow_unused=True)
    except RuntimeError as e:
        _warn_bc_breaking()
        raise GradcheckError(
            f"Expected backward function to handle undefined output grads. {_UNDEFINED_NOTE}"
        ) from e
    for gi in grads:
        if gi is not None and np.any(gi._data != 0):
            _warn_bc_breaking()
            raise GradcheckError(
                "Expected all input grads to be undefined or zero when all output grads are "
                f"undefined or zero. {_UNDEFINED_NOTE}"
            )


def _gradcheck_helper(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                      check_grad_dtypes, check_backward_ad, fast_mode):  # fmt: skip
    tupled = _as_tuple(inputs)
    _check_inputs(tupled)
    func_out = func(*tupled)
    outputs = _differentiable_outputs(func_out)
    if not check_backward_ad:
        return True
    check = _fast_gradcheck if fast_mode else _slow_gradcheck
    check(func, func_out, tupled, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol)
    if not outputs:
        return True
    _test_backward_mul_by_grad_output(outputs, tupled)
    if check_undefined_grad:
        _test_undefined_backward_mode(func, tupled)
    return True


def _no_forward_ad(name, flag):
    raise NotImplementedError(
        f"{name}({flag}=True) needs forward-mode AD, which nautograd does not have yet"
    )


def gradcheck(
    func,
    inputs,
    *,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    raise_exception=True,
    nondet_tol=0.0,
    check_undefined_grad=True,
    check_grad_dtypes=False,
    check_batched_grad=False,
    check_batched_forward_grad=False,
    check_forward_ad=False,
    check_backward_ad=True,
    fast_mode=False,
    masked=None,
):
    """Check the gradients of ``func`` at ``inputs`` against finite differences, as
    ``torch.autograd.gradcheck``.

    Every floating tensor of ``inputs`` with ``requires_grad=True`` is perturbed by ``eps``
    (use float64: float32 differences are too coarse, and a warning says so); the numerical
    and analytical Jacobians of every output that requires grad must satisfy
    ``allclose(analytical, numerical, rtol, atol)``. ``fast_mode=True`` compares
    ``v^T J u`` for random unit ``u``, ``v`` instead of whole Jacobians. Returns True, or
    raises ``GradcheckError`` (returns False instead with ``raise_exception=False``).
    ``check_batched_grad`` and the forward-mode checks raise NotImplementedError (nautograd
    has neither batched grad_outputs nor forward AD yet).
    """
    if check_batched_grad:
        raise NotImplementedError(
            "gradcheck(check_batched_grad=True) needs autograd.grad(is_grads_batched=True), "
            "which nautograd does not support yet"
        )
    if check_forward_ad:
        _no_forward_ad("gradcheck", "check_forward_ad")
    if check_batched_forward_grad:
        _no_forward_ad("gradcheck", "check_batched_forward_grad")
    args = (func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad, check_grad_dtypes,
            check_backward_ad, fast_mode)  # fmt: skip
    if not raise_exception:
        try:
            return _gradcheck_helper(*args)
        except GradcheckError:
            return False
    return _gradcheck_helper(*args)


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    gen_non_contig_grad_outputs=False,
    raise_exception=True,
    nondet_tol=0.0,
    check_undefined_grad=True,
    check_grad_dtypes=False,
    check_batched_grad=False,
    check_fwd_over_rev=False,
    check_rev_over_rev=True,
    fast_mode=False,
    masked=False,
):
    """Check second derivatives, as ``torch.autograd.gradgradcheck``: ``gradcheck`` of the
    function ``(inputs, grad_outputs) -> autograd.grad(func(inputs), inputs, grad_outputs,
    create_graph=True)``. Without ``grad_outputs``, random ones in [-1, 1) are drawn (from a
    generator of its own)."""
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError(
            "Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True"
        )
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_undefined_grad=True requires check_rev_over_rev to be True"
        )
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_rev_over_rev to be True"
        )
    if check_fwd_over_rev:
        _no_forward_ad("gradgradcheck", "check_fwd_over_rev")
    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        tupled_grad_outputs = tuple(
            Tensor(
                rng.uniform(-1, 1, x.shape).astype(
                    x._data.dtype if x._data.dtype.kind == "f" else np.float64
                ),
                requires_grad=True,
            )
            for x in _differentiable_outputs(func(*tupled_inputs))
        )
    else:
        tupled_grad_outputs = _as_tuple(grad_outputs)
    num_outputs = len(tupled_grad_outputs)
    diff_input_indices = {
        i for i, x in enumerate(tupled_inputs) if isinstance(x, Tensor) and x.requires_grad
    }

    def new_func(*args):
        input_args = args[:-num_outputs] if num_outputs else args
        outputs = _differentiable_outputs(func(*input_args))
        grads = args[len(input_args) :]
        diff_input_args = [x for i, x in enumerate(input_args) if i in diff_input_indices]
        grad_inputs = _grad(outputs, diff_input_args, grads, create_graph=True, allow_unused=True)
        return tuple(g for g in grad_inputs if g is not None)

    return gradcheck(
        new_func,
        tupled_inputs + tupled_grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        check_batched_grad=check_batched_grad,
        fast_mode=fast_mode,
        check_backward_ad=check_rev_over_rev,
        masked=masked,
    )
