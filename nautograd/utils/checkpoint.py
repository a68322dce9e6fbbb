"""``torch.utils.checkpoint``: a segment whose activations are recomputed in backward.

``checkpoint(function, *args)`` runs ``function`` and keeps none of its intermediate values:
its outputs come from one node whose backward runs ``function`` again (with the random
state it first saw) and differentiates that run. The forward records ``function`` once to
learn which leaves it reads besides ``args`` (parameters it closes over), then drops that
graph: the node's inputs are ``args`` and those leaves, so their gradients reach
``backward()`` and ``autograd.grad`` alike.
"""

import warnings

from .. import _random
from ..autograd.engine import grad as _grad
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, is_grad_enabled
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]

_EXPLICIT = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting "
    "in PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
    "use_reentrant=False is recommended, but if you need to preserve the current default "
    "behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
    "differences between the two variants."
)
_EXPLICIT_SEQUENTIAL = (
    "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be "
    "passed explicitly. In version 2.9 we will raise an exception if use_reentrant is not "
    "passed. use_reentrant=False is recommended, but if you need to preserve the current "
    "default behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
    "differences between the two variants."
)


_GRAD, _NO_GRAD = object(), object()  # a tensor argument that requires grad, or does not


def _detached(args):
    """``args`` with each tensor replaced by a detached alias that requires grad as it did."""
    return [
        a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a for a in args
    ]


def _leaves(outputs, inputs):
    """The leaves that require grad in the graphs of ``outputs``, other than ``inputs``."""
    skip = {id(x) for x in inputs if isinstance(x, Tensor)}
    found, seen = [], set()
    stack = [t.grad_fn for t in outputs if isinstance(t, Tensor) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        key = (id(node._tape), node._node)
        if key in seen:
            continue
        seen.add(key)
        leaf = getattr(node, "variable", None)
        if leaf is not None:
            if id(leaf) not in skip:
                skip.add(id(leaf))
                found.append(leaf)
            continue
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return found


def _as_tuple(outputs):
    return outputs if isinstance(outputs, tuple) else (outputs,)


class CheckpointFunction(Function):
    """The node of a checkpointed segment (inputs: its tensor arguments, then the leaves its
    function reads)."""

    @staticmethod
    def forward(ctx, segment, *tensors):
        ctx.segment = segment
        ctx.save_for_backward(*tensors[: segment["ntensors"]])
        outputs = segment.pop("outputs")
        return outputs if segment["tuple"] else outputs[0]

    @staticmethod
    def backward(ctx, *grads):
        segment = ctx.segment
        saved = iter(ctx.saved_tensors)
        # under create_graph the saved inputs are attached to the graph again: the
        # recomputation is differentiated from them, so its gradient is differentiable
        attached = is_grad_enabled()
        inputs = [
            (next(saved) if attached else next(saved).detach().requires_grad_(a is _GRAD))
            if a is _GRAD or a is _NO_GRAD
            else a
            for a in segment["args"]
        ]
        gen = _random.generator()
        state = gen.bit_generator.state
        if segment["rng"] is not None:
            gen.bit_generator.state = segment["rng"]
        try:
            with enable_grad():
                outputs = _as_tuple(segment["function"](*inputs, **segment["kwargs"]))
        finally:
            gen.bit_generator.state = state
        pairs = [
            (o, g)
            for o, g in zip(outputs, grads, strict=False)
            if isinstance(o, Tensor) and o.requires_grad and g is not None
        ]
        targets = [x for x, a in zip(inputs, segment["args"], strict=True) if a is _GRAD]
        targets += segment["leaves"]
        if not pairs or not targets:
            found = [None] * len(targets)
        else:
            found = _grad(
                [o for o, _ in pairs],
                targets,
                [g for _, g in pairs],
                allow_unused=True,
                create_graph=is_grad_enabled(),
            )
        found = iter(found)
        result = [None]
        for a in segment["args"]:
            if a is _GRAD:
                result.append(next(found))
            elif a is _NO_GRAD:
                result.append(None)
        result.extend(found)
        return tuple(result)


def checkpoint(
    function,
    *args,
    use_reentrant=None,
    context_fn=None,
    determinism_check="default",
    debug=False,
    preserve_rng_state=True,
    **kwargs,
):
    """Run ``function(*args, **kwargs)`` keeping none of its intermediate values; backward
    runs it again (``torch.utils.checkpoint.checkpoint``). ``use_reentrant`` left None warns
    and means True, as in torch 2.13: then keyword arguments raise, and outputs do not
    require grad unless an argument does."""
    if use_reentrant is None:
        warnings.warn(_EXPLICIT, UserWarning, stacklevel=2)
        use_reentrant = True
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if not is_grad_enabled():
        return function(*args, **kwargs)
    any_input = any(isinstance(a, Tensor) and a.requires_grad for a in args)
    if use_reentrant and not any_input:
        warnings.warn(
            "None of the inputs have requires_grad=True. Gradients will be None",
            UserWarning,
            stacklevel=2,
        )
    gen = _random.generator()
    rng = gen.bit_generator.state if preserve_rng_state else None
    inputs = _detached(args)
    outputs = function(*inputs, **kwargs)
    as_tuple = _as_tuple(outputs)
    detached = tuple(o.detach() if isinstance(o, Tensor) else o for o in as_tuple)
    if (use_reentrant and not any_input) or not any(
        isinstance(o, Tensor) and o.requires_grad for o in as_tuple
    ):
        return detached if isinstance(outputs, tuple) else detached[0]
    leaves = _leaves(as_tuple, inputs)
    tensors = [a for a in args if isinstance(a, Tensor)]
    segment = {
        "function": function,
        # the tensors themselves are saved by save_for_backward: a reference here would keep
        # their nodes (and the tape) alive through the node's own context
        "args": [
            (_GRAD if a.requires_grad else _NO_GRAD) if isinstance(a, Tensor) else a for a in args
        ],
        "kwargs": kwargs,
        "ntensors": len(tensors),
        "leaves": leaves,
        "rng": rng,
        "tuple": isinstance(outputs, tuple),
        "outputs": detached,
    }
    return CheckpointFunction.apply(segment, *tensors, *leaves)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run the modules (or functions) ``functions`` in sequence on ``input``, checkpointing
    ``segments`` groups of them; the last group runs normally
    (``torch.utils.checkpoint.checkpoint_sequential``)."""
    if use_reentrant is None:
        warnings.warn(_EXPLICIT_SEQUENTIAL, UserWarning, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(
            run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve
        )
    return run(end + 1, len(functions) - 1)(input)
