"""The signature and docstring of each op's public function, derived from its declaration.

An op declares ``doc``: one sentence of maths, then optional lines ``name: text`` for the
arguments this glossary does not describe, or that mean something else for the op. Tensor
arguments take torch's names (``input``, ``other``, ...); the attributes are the forward's
parameters. ``tests/test_public_api.py`` fails when an argument has no description.
"""

import inspect

# torch's names for an op's tensor arguments, by their number
TENSOR_NAMES = {1: ("input",), 2: ("input", "other"), 3: ("input", "tensor1", "tensor2")}

# what an argument means wherever it appears (an op's doc may say otherwise)
ARGUMENTS = {
    "input": "(Tensor) the input.",
    "other": "(Tensor or number) the second operand, broadcast against input.",
    "tensor1": "(Tensor or number) the first factor.",
    "tensor2": "(Tensor or number) the second factor (or divisor).",
    "tensors": "(sequence of Tensor) the tensors to join; same shape but along dim.",
    "tensor": "(Tensor) the input.",
    "condition": "(Tensor of bool) where to take input.",
    "A": "(Tensor) a square matrix or a batch of them.",
    "alpha": "(number) the multiplier of other. Default: 1.",
    "value": "(number) the value to write or the multiplier, as the op says.",
    "dim": "(int or tuple of int, optional) the dimension(s) to work along; negative counts "
    "from the end.",
    "keepdim": "(bool) keep the reduced dimensions with size 1. Default: False.",
    "dims": "(int or tuple of int) the dimensions.",
    "dim0": "(int) the first dimension.",
    "dim1": "(int) the first dimension of the 2-D planes.",
    "dim2": "(int) the second dimension of the 2-D planes.",
    "start_dim": "(int) the first dimension to merge. Default: 0.",
    "end_dim": "(int) the last dimension to merge. Default: -1.",
    "dimension": "(int) the dimension to slide along.",
    "size": "(int or tuple of int) the sizes of the result's dimensions (or of the window).",
    "shape": "(int or tuple of int) the new shape; one entry may be -1.",
    "sizes": "(tuple of int) the sizes dim is split into.",
    "step": "(int) the distance between the starts of neighbouring windows.",
    "start": "(int) the first index.",
    "length": "(int) the number of elements.",
    "offset": "(int) which diagonal: 0 the main one, > 0 above, < 0 below. Default: 0.",
    "diagonal": "(int) which diagonal: 0 the main one, > 0 above, < 0 below. Default: 0.",
    "source": "(int or tuple of int) the dimensions to move.",
    "destination": "(int or tuple of int) where they go.",
    "shifts": "(int or tuple of int) how many places to roll, per dimension in dims.",
    "repeats": "(int...) how many copies along each dimension.",
    "index": "(Tensor of int64, or int) the positions to take or to write.",
    "indices": "(Tensor of int64) the positions to take.",
    "mask": "(Tensor of bool) where to write, broadcast against input.",
    "src": "(Tensor) the values to add.",
    "pad": "(tuple of int) the widths (before, after) of the last dimension, then the one "
    "before it, ...",
    "mode": "(str) 'constant', 'reflect', 'replicate' or 'circular'. Default: 'constant'.",
    "exponent": "(Tensor or number) the power.",
    "min": "(Tensor or number, optional) the lower bound.",
    "max": "(Tensor or number, optional) the upper bound.",
    "beta": "(number) the sharpness, or where the quadratic part ends. Default: 1.",
    "threshold": "(number) above beta * x > threshold the result is x. Default: 20.",
    "approximate": "(str) 'none' (the exact CDF) or 'tanh'. Default: 'none'.",
    "negative_slope": "(number) the slope for x < 0. Default: 0.01.",
    "min_val": "(number) the lower bound. Default: -1.",
    "max_val": "(number) the upper bound. Default: 1.",
    "nan": "(number) replaces NaN. Default: 0.",
    "posinf": "(number, optional) replaces +inf.",
    "neginf": "(number, optional) replaces -inf.",
    "decimals": "(int) the number of decimal places. Default: 0.",
    "num_classes": "(int) the number of classes; -1 infers it. Default: -1.",
    "split_size_or_sections": "(int or list of int) the size of each piece, or the sizes.",
    "chunks": "(int) the number of pieces.",
    "equation": "(str) the subscripts, as 'ij,jk->ik'.",
    "operands": "(Tensor...) the tensors the subscripts name.",
    "target": "(Tensor) the targets, of input's shape (class losses: class indices or "
    "probabilities).",
    "reduction": "(str) 'none', 'mean' or 'sum'. Default: 'mean'.",
    "dtype": "(dtype, optional) input is cast to it before the op (torch's dtype=).",
    "rounding_mode": "(str, optional) None: true division; 'trunc' rounds the quotient "
    "toward zero, 'floor' down (no gradient then, as torch).",
    "sparse_grad": "(bool) False only: nautograd's gradients are dense.",
    "mat2": "(Tensor) the second matrix (or batch of matrices).",
    "vec": "(Tensor) the vector.",
    "vec2": "(Tensor) the second vector.",
    "upper": "(bool) the upper factor (or triangle) instead of the lower.",
    "size_average": "(bool, optional) deprecated (see reduction): with reduce, the reduction.",
    "reduce": "(bool, optional) deprecated (see reduction): with size_average, the reduction.",
    "delta": "(number) where the quadratic part ends. Default: 1.",
    "weight": "(Tensor, optional) the weights (per class for class losses, the layer's "
    "weight for layers).",
    "ignore_index": "(int) a target value that contributes nothing. Default: -100.",
    "label_smoothing": "(float) the share of probability spread over every class. Default: 0.",
    "pos_weight": "(Tensor, optional) the weight of positive examples, per class.",
    "log_target": "(bool) target holds log-probabilities. Default: False.",
    "bias": "(Tensor, optional) added to the result.",
    "p": "(number or str) the probability of zeroing (dropout), or the order of the norm.",
    "ord": "(number) the order of the norm (inf and -inf too). Default: 2.",
    "training": "(bool) apply it (True) or return input (False).",
    "inplace": "(bool) write the result into input (recorded as torch records in-place ops).",
    "normalized_shape": "(int or tuple of int) the trailing dimensions to normalise over.",
    "eps": "(float) added to the variance. Default: 1e-5.",
    "running_mean": "(Tensor, optional) the running mean, updated in training.",
    "running_var": "(Tensor, optional) the running variance, updated in training.",
    "momentum": "(float) the running statistics' update weight. Default: 0.1.",
    "stride": "(int or tuple of int) the step between windows.",
    "padding": "(int or tuple of int) the zeros added on each side.",
    "dilation": "(int or tuple of int) the spacing between kernel elements. Default: 1.",
    "groups": "(int) the number of blocked connections from input to output channels.",
    "kernel_size": "(int or tuple of int) the window size.",
    "ceil_mode": "(bool) round the output size up. Default: False.",
    "return_indices": "(bool) also return the argmax positions. Default: False.",
    "count_include_pad": "(bool) count padding zeros in the mean. Default: True.",
    "divisor_override": "(int, optional) divide by this instead of the window size.",
    "left": "(bool) solve A X = B (True) or X A = B. Default: True.",
    "correction": "(int) the difference between the sample count and the divisor.",
}
_HIDDEN = {"op"}  # forward parameters that only name the op in error texts


def _overrides(op):
    """The op's summary and its ``name: text`` argument lines."""
    lines = op.doc.split("\n")
    args = {}
    for line in lines[1:]:
        name, _, text = line.partition(":")
        args[name.strip()] = text.strip()
    return lines[0], args


def signature(op):
    """The public function's ``inspect.Signature``, with torch's argument names."""
    P = inspect.Parameter
    if op.api is not None:
        params = list(inspect.signature(op.api).parameters.values())[1:]
        return inspect.Signature(params)
    if op.nin == -1:
        # (the frontend takes the first attribute positionally too: cat(tensors, 1))
        params = list(inspect.signature(op.forward).parameters.values())[1:]
        params[:1] = [p.replace(kind=P.POSITIONAL_OR_KEYWORD) for p in params[:1]]
        params = [P("tensors", P.POSITIONAL_OR_KEYWORD)] + params
    else:
        names = op.tensor_names or TENSOR_NAMES[op.nin]
        params = [P(n, P.POSITIONAL_OR_KEYWORD) for n in names]
        for p in list(inspect.signature(op.forward).parameters.values())[op.nin :]:
            if p.kind is p.POSITIONAL_OR_KEYWORD and p.name not in _HIDDEN:
                params.append(p)
    _, extra = _overrides(op)
    known = {p.name for p in params}
    # keywords the forward takes through **kwargs (var's correction), and those a keyword
    # frontend takes (Op.keywords)
    for name in [*extra, *(op.keywords or ())]:
        if name not in known and (name in ARGUMENTS or name in (op.keywords or ())):
            params.append(P(name, P.KEYWORD_ONLY, default=None))
            known.add(name)
    return inspect.Signature(params)


def undescribed(op):
    """The arguments of ``op``'s signature that nothing describes."""
    _, extra = _overrides(op)
    return [
        p.name
        for p in signature(op).parameters.values()
        if p.name not in extra and p.name not in ARGUMENTS
    ]


def docstring(op):
    """The docstring of ``op``'s public function: the maths, torch's names for it, the node its
    backward records, and the arguments."""
    summary, extra = _overrides(op)
    names = [f"torch.{n}" for n in op.functions]
    names += [f"torch.nn.functional.{op.name}"] if op.nn_functional else []
    names += [f"torch.linalg.{n}" for n in op.linalg]
    names += [f"torch.special.{n}" for n in op.special]
    names += [f"Tensor.{n}" for n in op.methods]
    if op.composite:
        grad = "its gradient is that of the ops it is written with"
    elif op.differentiable:
        grad = f"backward node ``{op.node_name}``"
    else:
        grad = "no gradient"
    lines = [summary or f"The op {op.name}.", ""]
    if names:
        lines.append("As " + ", ".join(f"``{n}``" for n in names) + f"; {grad}.")
    params = [p for p in signature(op).parameters.values() if p.kind is not p.VAR_KEYWORD]
    if params:
        lines += ["", "Args:"]
        for p in params:
            star = "*" if p.kind is p.VAR_POSITIONAL else ""
            text = extra.get(p.name) or ARGUMENTS.get(p.name, "")
            kind, paren, rest = text[1:].partition(") ")
            if text.startswith("(") and paren:  # Google style: name (type): text
                lines.append(f"    {star}{p.name} ({kind}): {rest}")
            else:
                lines.append(f"    {star}{p.name}: {text}")
    return "\n".join(lines)
