"""torch.autograd.functional: vjp, jvp, vhp, hvp, jacobian, hessian.

Built on ``autograd.grad`` as torch's are, with torch 2.13's semantics and error texts
(torch 2.13's autograd.functional). Forward-mode products use torch's double
backward trick (the VJP is linear in its cotangent, so differentiating it with respect to
the cotangent gives the JVP); second derivatives use ``create_graph=True``.
Reverse-mode ``jacobian(vectorize=True)`` gives the same result as the row-by-row loop, and
runs it; ``strategy="forward-mode"`` is ``func.jacfwd``: every basis tangent of an input in
one batched forward pass.
"""

import numpy as np

from ..tensor import Tensor, _wrap
from .engine import grad as _grad
from .grad_mode import enable_grad, is_grad_enabled, set_grad_enabled

__all__ = ["vjp", "jvp", "vhp", "hvp", "jacobian", "hessian"]


def _as_tuple(x, arg_name, fn_name):
    is_tuple = isinstance(x, tuple)
    items = x if is_tuple else (x,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = (
                f"the value at index {i} has type" if is_tuple else f"the given {arg_name} has type"
            )
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors "
                f"but {where} {type(el)}."
            )
    return is_tuple, items


def _unpack(res, to_unpack):
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _preprocess(inputs, create_graph, need_graph):
    """Fresh inputs to differentiate with respect to: with create_graph a tensor that
    requires grad keeps its graph (torch's ``view_as``), otherwise a detached leaf."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.reshape(t.shape))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _postprocess(x, create_graph):
    if isinstance(x[0], Tensor):
        return x if create_graph else tuple(t.detach() for t in x)
    return tuple(_postprocess(t, create_graph) for t in x)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
            )
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, other, strict=True)):
        if a.shape != b.shape:
            prefix = f"Entry {i} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prefix}v has invalid size: should be torch.Size({list(b.shape)}) but got "
                f"torch.Size({list(a.shape)})."
            )


_STRICT = {
    "outputs": "Output {i} of the user-provided function does not require gradients. The "
    "outputs must be computed in a differentiable manner from the input when running in "
    "strict mode.",
    "grad_inputs": "The gradient with respect to input {i} is independent of the inputs of "
    "the user-provided function. This is not allowed in strict mode.",
    "jacobian": "While computing the hessian, found that the jacobian of the user-provided "
    "function with respect to input {i} is independent of the input. This is not allowed in "
    "strict mode. You should ensure that your function is twice differentiable and that the "
    "jacobian depends on the inputs (this would be violated by a linear function for "
    "example).",
    "hessian": "The hessian of the user-provided function with respect to input {i} is "
    "independent of the input. This is not allowed in strict mode. You should ensure that "
    "your function is thrice differentiable and that the hessian depends on the inputs.",
}


def _check_requires_grad(tensors, kind, strict):
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This is "
                "not allowed in strict mode."
            )
        if not t.requires_grad:
            raise RuntimeError(_STRICT[kind].format(i=i))


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None,
                   is_grads_batched=False):  # fmt: skip
    """autograd.grad over the outputs that require grad (None for every input if none does)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [
        (o, g)
        for o, g in zip(outputs, grad_outputs, strict=True)
        if o is not None and o.requires_grad
    ]
    if not pairs:
        return (None,) * len(inputs)
    return _grad(
        [o for o, _ in pairs],
        inputs,
        [g for _, g in pairs],
        allow_unused=True,
        create_graph=create_graph,
        retain_graph=retain_graph,
        is_grads_batched=is_grads_batched,
    )


_ZERO_MSG = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
    "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
    "grad_outputs when using the double backward trick to compute forward mode gradients. "
    "This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
    "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
    "{i} in the grad_jacobian. This is not allowed in strict mode as it prevents from using "
    "the double backward trick to replace forward mode AD.",
}


def _results(outputs, outputs_tuple, res, res_tuple, create_graph):
    """(outputs, result) as the caller passed them: tuples or single tensors, detached
    unless create_graph."""
    return (
        _unpack(_postprocess(outputs, create_graph), outputs_tuple),
        _unpack(_postprocess(res, create_graph), res_tuple),
    )


def _zeros_like(t, requires_grad=False):
    return _wrap(np.zeros_like(t._data), requires_grad)


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    out = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_ZERO_MSG[stage].format(i=i))
            g = _zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of input {i}. This is "
                "not allowed in strict mode when create_graph=True."
            )
        out.append(g)
    return tuple(out)


def _v_or_single(v, ref, ref_is_tuple, fn_name, create_graph, message):
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _preprocess(v, create_graph, need_graph=False)
        _validate_v(v, ref, ref_is_tuple)
        return v
    if len(ref) != 1 or ref[0].numel() != 1:
        raise RuntimeError(message)
    return None


_V_OUTPUT = (
    "The vector v can only be None if the user-provided function returns a single Tensor "
    "with a single element."
)
_V_INPUT = (
    "The vector v can only be None if the input to the user-provided function is a single "
    "Tensor with a single element."
)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``: the vector-Jacobian product of ``func`` at ``inputs``."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _preprocess(inputs, create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "vjp"
        )
        _check_requires_grad(outputs, "outputs", strict)
        v = _v_or_single(v, outputs, is_outputs_tuple, "vjp", create_graph, _V_OUTPUT)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(res, inputs, strict, create_graph, "back")
    return _results(outputs, is_outputs_tuple, res, is_inputs_tuple, create_graph)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``: the Jacobian-vector product, by the double backward trick."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _preprocess(inputs, create_graph, need_graph=True)
        v = _v_or_single(v, inputs, is_inputs_tuple, "jvp", create_graph, _V_INPUT)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "jvp"
        )
        _check_requires_grad(outputs, "outputs", strict)
        # u -> u^T J is linear in u: its derivative with respect to u, applied to v, is J v
        grad_outputs = tuple(_zeros_like(o, requires_grad=True) for o in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        res = _fill_in_zeros(res, outputs, strict, create_graph, "back_trick")
    return _results(outputs, is_outputs_tuple, res, is_outputs_tuple, create_graph)


def jacobian(
    func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"
):
    """The Jacobian of ``func`` at ``inputs``: shape ``output.shape + input.shape`` for one
    output and one input; a tuple (per output) of tuples (per input) otherwise. Reverse mode,
    one VJP per output element."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".'
        )
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either set '
                '`create_graph=False` or `strategy="reverse-mode"`.'
            )
        return _jacfwd(func, inputs, strict, vectorize)
    if vectorize and strict:
        raise RuntimeError(
            "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
            "supported together. Please either set `strict=False` or `vectorize=False`."
        )
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _preprocess(inputs, create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "jacobian"
        )
        _check_requires_grad(outputs, "outputs", strict)
        jac = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]
            flat = out.reshape(-1)
            for j in range(out.numel()):
                vj = _autograd_grad(
                    (flat[j],), inputs, retain_graph=True, create_graph=create_graph
                )
                for k, (g, inp) in enumerate(zip(vj, inputs, strict=True)):
                    if g is not None:
                        if strict and create_graph and not g.requires_grad:
                            raise RuntimeError(
                                "The jacobian of the user-provided function is independent of "
                                f"input {i}. This is not allowed in strict mode when "
                                "create_graph=True."
                            )
                        rows[k].append(g)
                    else:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is independent of "
                                f"input {k}. This is not allowed in strict mode."
                            )
                        rows[k].append(_zeros_like(inp))
            jac.append(
                tuple(
                    _stack(r, out.shape + inp.shape, inp)
                    for r, inp in zip(rows, inputs, strict=True)
                )
            )
        jac = _postprocess(tuple(jac), create_graph)
        return _unpack(jac, (is_outputs_tuple, is_inputs_tuple))


def _jacfwd(func, inputs, strict, vectorize):
    """jacobian(strategy="forward-mode"): ``func.jacfwd``, every input element's basis
    tangent in one batched forward pass (one pass per element where an op has no batching
    rule), as torch batches them with vmap."""

    if strict:
        raise RuntimeError(
            "torch.autograd.functional.jacobian: `strict=True` and "
            '`strategy="forward-mode"` are not supported together (yet). Please either set '
            '`strict=False` or `strategy="reverse-mode"`.'
        )
    if not vectorize:
        raise NotImplementedError(
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
            "only implemented for `vectorize=True`."
        )
    from .. import func as ng_func

    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    shape = []

    def checked(*xs):
        result = func(*xs)
        is_tuple, _ = _as_tuple(result, "outputs", "jacobian")
        shape[:] = [is_tuple]
        return result

    # func.jacfwd: one forward pass whose tangents are the batch of basis vectors
    jac = ng_func.jacfwd(checked, argnums=tuple(range(len(inputs))))(*inputs)
    per_output = jac if shape[0] else (jac,)
    jac = [[j.detach() for j in per_input] for per_input in per_output]
    # (lists, as torch's forward mode returns them, where its reverse mode gives tuples)
    return _unpack(jac, (shape[0], is_inputs_tuple))


def _stack(rows, shape, inp):
    from ..tensor import FUNCTIONS

    if not rows:  # an output with no elements
        return _wrap(np.zeros(shape, inp._data.dtype))
    return FUNCTIONS["stack"](rows, dim=0).reshape(shape)


def hessian(
    func,
    inputs,
    create_graph=False,
    strict=False,
    vectorize=False,
    outer_jacobian_strategy="reverse-mode",
):
    """The Hessian of the scalar function ``func`` at ``inputs`` (the Jacobian of its
    gradient): shape ``input.shape + input.shape``; tuples of tuples for several inputs."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def single_output(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should contain a single "
                "element"
            )
        return out.reshape(())

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            # (as torch: inputs that require grad keep their tangent through _preprocess)
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(single_output, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(
        jac_func,
        inputs,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _unpack(res, (is_inputs_tuple, is_inputs_tuple))


def _gradient_of_scalar(func, inputs, v, name, create_graph, strict):
    """vhp's and hvp's first half: the inputs and v checked, the scalar output of ``func``
    and its gradient with a graph. Returns (is_inputs_tuple, inputs, v, is_outputs_tuple,
    outputs, gradient)."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
        inputs = _preprocess(inputs, create_graph, need_graph=True)
        v = _v_or_single(v, inputs, is_inputs_tuple, name, create_graph, _V_INPUT)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", name
        )
        _check_requires_grad(outputs, "outputs", strict)
        if is_outputs_tuple or not isinstance(outputs[0], Tensor):
            raise RuntimeError(f"The function given to {name} should return a single Tensor")
        if outputs[0].numel() != 1:
            raise RuntimeError(
                f"The Tensor returned by the function given to {name} should contain a single "
                "element"
            )
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)`` for a scalar ``func``: a vector-Hessian product."""
    is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _gradient_of_scalar(
        func, inputs, v, "vhp", create_graph, strict
    )
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(res, inputs, strict, create_graph, "double_back")
    return _results(outputs, is_outputs_tuple, res, is_inputs_tuple, create_graph)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` for a scalar ``func``: a Hessian-vector product (by the double
    backward trick, as torch computes it)."""
    is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _gradient_of_scalar(
        func, inputs, v, "hvp", create_graph, strict
    )
    with enable_grad():
        grad_jac = tuple(_zeros_like(t, requires_grad=True) for t in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        res = _fill_in_zeros(res, inputs, strict, create_graph, "double_back_trick")
    return _results(outputs, is_outputs_tuple, res, is_inputs_tuple, create_graph)
