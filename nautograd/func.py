"""torch.func's transforms: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian,
linearize, vmap, functional_call, stack_module_state.

Each transform calls the function on tensors of its own and differentiates the graph it
records with the same engine as ``backward()``: reverse mode through ``autograd.grad``,
forward mode through ``autograd.forward_ad``. They compose (``jacfwd(jacrev(f))``,
``vmap(grad(f))``) because a transform's results stay differentiable whenever something
outside it needs them: an enclosing transform, a tangent of an open forward-AD level, or a
tensor that requires grad reached by the function's graph (an argument, or one captured by
a closure). Otherwise the backward runs without recording itself (``create_graph=False``),
the fast path.

``vmap`` evaluates the function once on batched values (``_batching.py``): each op runs once
for the whole batch through its batching rule, as torch.func.vmap's do. A function that
uses an op without a rule (or reads a value, or calls ``autograd`` itself) runs again once
per sample, and its results are stacked; the ``nautograd`` logger says so at DEBUG level.
"""

import contextlib
import functools
import logging
import threading

import numpy as np

from . import _random
from ._batching import BatchedTensor, Unbatchable, batched_mode, new_level, per_sample_draws
from .autograd import forward_ad
from .autograd.engine import grad as _autograd_grad
from .autograd.engine import reached_leaves
from .autograd.functional import _autograd_grad as _grad_of_used
from .autograd.grad_mode import enable_grad, is_grad_enabled
from .tensor import FUNCTIONS, Tensor, _wrap

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "stack_module_state",
    "vjp",
    "vmap",
]

# -- pytrees: tuples, lists, dicts and namedtuples of leaves (None is an empty node) ----------


class _Spec:
    """The structure of a pytree: ``kind`` ("leaf", "none", tuple, list, dict or a
    namedtuple class), the dict keys, and the children's specs."""

    __slots__ = ("kind", "keys", "children", "n")

    def __init__(self, kind, keys=None, children=()):
        self.kind, self.keys, self.children = kind, keys, children
        self.n = 1 if kind == "leaf" else sum(c.n for c in children)

    def __eq__(self, other):
        return (
            isinstance(other, _Spec)
            and self.kind == other.kind
            and self.keys == other.keys
            and self.children == other.children
        )

    def __repr__(self):
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(
            repr(c) if self.keys is None else f"{k!r}: {c!r}"
            for k, c in zip(self.keys or [None] * len(self.children), self.children, strict=True)
        )
        if self.kind is dict:
            return "{" + inner + "}"
        if self.kind is list:
            return "[" + inner + "]"
        if self.kind is tuple:
            return "(" + inner + ("," if len(self.children) == 1 else "") + ")"
        return f"{self.kind.__name__}({inner})"


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def tree_flatten(tree):
    """(leaves, spec) of ``tree``."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    if tree is None:
        return _Spec("none")
    if isinstance(tree, (tuple, list)):
        kind = type(tree) if _is_namedtuple(tree) else (tuple if isinstance(tree, tuple) else list)
        return _Spec(kind, None, tuple(_flatten(x, leaves) for x in tree))
    if isinstance(tree, dict):
        keys = tuple(tree.keys())
        return _Spec(dict, keys, tuple(_flatten(tree[k], leaves) for k in keys))
    leaves.append(tree)
    return _Spec("leaf")


def tree_unflatten(leaves, spec):
    """The pytree of structure ``spec`` holding ``leaves`` in order."""
    it = iter(leaves)
    return _build(spec, it)


def _build(spec, it):
    if spec.kind == "leaf":
        return next(it)
    if spec.kind == "none":
        return None
    items = [_build(c, it) for c in spec.children]
    if spec.kind is dict:
        return dict(zip(spec.keys, items, strict=True))
    if spec.kind is tuple or spec.kind is list:
        return spec.kind(items)
    return spec.kind(*items)


def _broadcast_prefix(prefix, spec):
    """``prefix`` (an int or None for a whole subtree, or a structure matching ``spec``'s
    top) flattened to one item per leaf of ``spec``; None when the structures differ."""
    if prefix is None or isinstance(prefix, int):
        return [prefix] * spec.n
    if spec.kind in ("leaf", "none"):
        return None
    if isinstance(prefix, dict):
        if spec.kind is not dict or set(prefix) != set(spec.keys):
            return None
        parts = [
            _broadcast_prefix(prefix[k], c) for k, c in zip(spec.keys, spec.children, strict=True)
        ]
    elif isinstance(prefix, (tuple, list)):
        if spec.kind is dict or len(prefix) != len(spec.children):
            return None
        if isinstance(prefix, list) != (spec.kind is list):
            return None
        parts = [_broadcast_prefix(p, c) for p, c in zip(prefix, spec.children, strict=True)]
    else:
        return [prefix] * spec.n  # (a wrong kind of leaf: the caller names it)
    if any(p is None for p in parts):
        return None
    return [x for p in parts for x in p]


# -- nesting -----------------------------------------------------------------------------------

_nesting = threading.local()
_log = logging.getLogger("nautograd")


@contextlib.contextmanager
def _transform():
    """Marks a differentiating transform running on this thread: a transform inside it keeps
    its results differentiable for it."""
    _nesting.depth = getattr(_nesting, "depth", 0) + 1
    try:
        yield
    finally:
        _nesting.depth -= 1


def _outer_needs_graph(outputs, inputs, grad_enabled):
    """Whether the gradients of ``outputs`` with respect to ``inputs`` must be recorded:
    grad mode was on where the transform was called (``grad_enabled``) and an enclosing
    transform, an open forward-AD level or a tensor that requires grad outside ``inputs``
    can see them."""
    if not grad_enabled:
        return False
    if getattr(_nesting, "depth", 0) > 1 or forward_ad._current_level >= 0:
        return True
    ours = {id(_physical(x)) for x in inputs}
    return any(id(t) not in ours for t in reached_leaves([_physical(o) for o in outputs]))


def _is_tensor(x):
    return isinstance(x, (Tensor, BatchedTensor))


def _batched_size():
    """The batch size of the batched vmap running on this thread (the innermost), or 0."""
    sizes = getattr(_nesting, "batched", None)
    return sizes[-1][0] if sizes else 0


def _batched_level():
    """The level of the innermost batched vmap running on this thread."""
    return _nesting.batched[-1][1]


def _name(func):
    return getattr(func, "__name__", repr(func))


# -- arguments ---------------------------------------------------------------------------------


def _check_argnums(argnums, nargs):
    def one(a):
        if not isinstance(a, int) or isinstance(a, bool):
            raise RuntimeError(f"argnum must be int, got: {type(a)}")
        if 0 <= a < nargs:
            return a
        if -nargs <= a < 0:
            return a + nargs
        raise RuntimeError(f"Got argnum={a}, but only {nargs} positional inputs")

    if isinstance(argnums, int) and not isinstance(argnums, bool):
        return one(argnums)
    if isinstance(argnums, tuple):
        if not argnums:
            raise RuntimeError("argnums must be non-empty")
        if len(set(argnums)) != len(argnums):
            raise RuntimeError(f"argnums elements must be unique, got {argnums}")
        return tuple(one(a) for a in argnums)
    raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")


def _diff_args(args, argnums):
    return args[argnums] if isinstance(argnums, int) else tuple(args[a] for a in argnums)


def _replace(args, argnums, new):
    args = list(args)
    if isinstance(argnums, int):
        args[argnums] = new
    else:
        for a, v in zip(argnums, new, strict=True):
            args[a] = v
    return tuple(args)


def _differentiable(x):
    """A tensor standing for ``x`` that gradients are taken with respect to: ``x`` itself
    through an alias when it is in a graph already (results stay differentiable for it),
    else a fresh leaf sharing its memory (with ``x``'s tangent, if it has one). Inside a
    batched vmap every sample gets its own: a value that is not batched is repeated."""
    if not _is_tensor(x):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
    if type(x) is BatchedTensor:
        p = x._p
        p = p.view_as(p) if p.requires_grad else p.detach().requires_grad_()
        return BatchedTensor(p, x._level)
    b = _batched_size()
    if b:
        level = _batched_level()
        if x.requires_grad:
            return BatchedTensor(x.unsqueeze(0).expand(b, *x.shape), level)
        leaf = x.detach().unsqueeze(0).expand(b, *x.shape).requires_grad_()
        return BatchedTensor(leaf, level)
    if x.requires_grad:
        return x.view_as(x)
    leaf = x.detach().requires_grad_(True)
    tangent = forward_ad.tangent_of(x)
    if tangent is not None:  # (an enclosing jacfwd's dual: forward over reverse)
        forward_ad.attach_tangent(leaf, tangent)
    return leaf


def _zeros(x):
    if type(x) is BatchedTensor:
        return BatchedTensor(_wrap(np.zeros(x._p.shape, x.dtype)), x._level)
    return _wrap(np.zeros(x.shape, x.dtype))


def _physical(x):
    return x._p if type(x) is BatchedTensor else x


def _grads(outputs, inputs, cotangents, create):
    """Gradients of ``outputs`` (cotangents ``cotangents``, None for ones) with respect to
    ``inputs``, zeros where an input is unused. Batched values (inside vmap) are
    differentiated as their stacked samples, which depend on each other not at all."""
    roots, cots = [], []
    for o, c in zip(outputs, cotangents, strict=True):
        if not o.requires_grad:
            continue
        if type(o) is BatchedTensor:
            p = o._p
            if c is None:
                c = _wrap(np.ones(p.shape, p.dtype))
            elif type(c) is not BatchedTensor:  # (the same cotangent for every sample)
                c = c.unsqueeze(0).expand(p.shape[0], *c.shape)
            elif c._level != o._level:
                raise Unbatchable("a cotangent of another batch")
            o = p
        elif type(c) is BatchedTensor:
            raise Unbatchable("a batched cotangent of a value that is not batched")
        roots.append(o)
        cots.append(_physical(c))
    if not roots:
        return [_zeros(x) for x in inputs]
    grads = _autograd_grad(
        roots,
        [_physical(x) for x in inputs],
        cots,
        retain_graph=True,
        create_graph=create,
        allow_unused=True,
    )
    return [
        _zeros(x) if g is None else (BatchedTensor(g, x._level) if type(x) is BatchedTensor else g)
        for g, x in zip(grads, inputs, strict=True)
    ]


def _plain(x, create):
    """What a transform returns of a value computed inside it: itself while something
    outside differentiates it, else detached."""
    if create or not _is_tensor(x):
        return x
    return x.detach()


def _plain_tree(tree, create):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([_plain(x, create) for x in leaves], spec)


def _call_on_inputs(func, args, kwargs, argnums, has_aux, api):
    """``func`` called with the arguments ``argnums`` replaced by tensors to differentiate
    with respect to (``_differentiable``): (those tensors flat, their structure, the output,
    aux)."""
    nums = _check_argnums(argnums, len(args))
    leaves, spec = tree_flatten(_diff_args(args, nums))
    inputs = [_differentiable(x) for x in leaves]
    call = _replace(args, nums, tree_unflatten(inputs, spec))
    output, aux = _split_aux(func(*call, **kwargs), has_aux, api)
    return inputs, spec, output, aux


def _split_aux(output, has_aux, api):
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(
            f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True"
        )
    return output


# -- grad, grad_and_value, vjp -----------------------------------------------------------------


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning ``(gradient, value)`` of ``func`` (``(gradient, (value, aux))``
    with ``has_aux``): the gradient of its scalar output with respect to the arguments
    ``argnums`` (an int or a tuple of ints; each argument a tensor or a pytree of tensors),
    structured as those arguments. As ``torch.func.grad_and_value``."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        outer = is_grad_enabled()
        with enable_grad(), _transform():
            inputs, spec, output, aux = _call_on_inputs(
                func, args, kwargs, argnums, has_aux, "grad_and_value(f)(*args)"
            )
            if not _is_tensor(output):
                raise RuntimeError(
                    f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                    f"{type(output)}"
                )
            if output.dim() != 0:
                raise RuntimeError(
                    "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, "
                    f"got tensor with {output.dim()} dims. Maybe you wanted to use the vjp or "
                    "jacrev APIs instead?"
                )
            create = _outer_needs_graph([output], inputs, outer)
            grads = _grads([output], inputs, [None], create)
        grads = tree_unflatten(grads, spec)
        value = _plain(output, create)
        if has_aux:
            return grads, (value, _plain_tree(aux, create))
        return grads, value

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of ``func``'s scalar output with respect to the
    arguments ``argnums`` (``(gradient, aux)`` with ``has_aux``). As ``torch.func.grad``."""
    inner = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        grads, value = inner(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)`` (and ``aux`` with ``has_aux``): ``vjp_fn(cotangents)``
    returns the vector-Jacobian product for every primal, as a tuple structured as
    ``primals``; it can be called more than once. As ``torch.func.vjp``."""
    outer = is_grad_enabled()
    with enable_grad(), _transform():
        leaves, spec = tree_flatten(primals)
        inputs = [_differentiable(x) for x in leaves]
        output, aux = _split_aux(func(*tree_unflatten(inputs, spec)), has_aux, "vjp(f, *primals)")
        outs, out_spec = tree_flatten(output)
        for o in outs:
            if not _is_tensor(o):
                raise RuntimeError(
                    f"vjp(f, *primals): expected f(*primals) to return only tensors, got "
                    f"unsupported type {type(o)}"
                )
            if np.dtype(o.dtype).kind != "f":
                raise RuntimeError(
                    "vjp(f, ...): All outputs of f must be floating-point or complex Tensors, "
                    f"got Tensor with dtype torch.{np.dtype(o.dtype).name}"
                )
        create = _outer_needs_graph(outs, inputs, outer)

    def vjp_fn(cotangents):
        cots, cot_spec = tree_flatten(cotangents)
        if cot_spec != out_spec:
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure of "
                f"outputs to the function. cotangents: {cot_spec!r}, primal output: "
                f"{out_spec!r}"
            )
        for c, o in zip(cots, outs, strict=True):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(
                    f"Mismatch in shape: grad_output has a shape of torch.Size({list(c.shape)})"
                    f" and output has a shape of torch.Size({list(o.shape)})."
                )
        outer_fn = is_grad_enabled()
        with enable_grad(), _transform():
            needs = outer_fn and (create or any(c.requires_grad for c in cots))
            grads = _grads(outs, inputs, cots, needs)
        return tree_unflatten([_plain(g, needs) for g in grads], spec)

    result = _plain_tree(output, create)
    if has_aux:
        return result, vjp_fn, _plain_tree(aux, create)
    return result, vjp_fn


# -- jvp, linearize ----------------------------------------------------------------------------


def _check_tensors(items, api, what):
    if not items:
        raise RuntimeError(f"{api}: Expected {what} to contain at least one Tensor.")
    for x in items:
        if not _is_tensor(x):
            raise RuntimeError(f"{api}: Expected {what} to only contain Tensors, got {type(x)}")


def _jvp_checks(primals, tangents, api):
    if not isinstance(primals, tuple):
        raise RuntimeError(
            f"{api}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals)."
        )
    flat_p, p_spec = tree_flatten(primals)
    flat_t, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(
            f"{api}: Expected primals and tangents to have the same python structure. For "
            "example, if primals is a tuple of 3 tensors, tangents also must be. Got primals "
            f"with structure {p_spec!r} and tangents with structure {t_spec!r}"
        )
    _check_tensors(flat_p, api, "primals")
    _check_tensors(flat_t, api, "tangents")
    _check_tangents(flat_t, flat_p)
    return flat_p, p_spec, flat_t


def _check_tangents(flat_t, flat_p):
    """torch's errors for a tangent whose shape or dtype is not its primal's."""
    for i, (p, t) in enumerate(zip(flat_p, flat_t, strict=True)):
        if tuple(t.shape) != tuple(p.shape):
            raise RuntimeError(
                f"tangent:{i} with shape torch.Size({list(t.shape)}) in flattened pytree "
                f"doesn't match the shape torch.Size({list(p.shape)}) of the corresponding "
                "primal."
            )
        if t.dtype != p.dtype:
            raise RuntimeError(
                f"tangent:{i} with dtype torch.{np.dtype(t.dtype).name} in flattened pytree "
                f"doesn't match the dtype torch.{np.dtype(p.dtype).name} of the corresponding "
                "primal."
            )


def _outputs(output, api):
    outs, spec = tree_flatten(output)
    for o in outs:
        if not _is_tensor(o):
            raise RuntimeError(
                f"{api}: expected f(*args) to return only tensors, got unsupported type {type(o)}"
            )
    return outs, spec


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(func(*primals), J·tangents)`` (and ``aux`` with ``has_aux``): the Jacobian-vector
    product, by forward-mode AD (by reverse mode twice inside an open forward level, where a
    second level cannot open). As ``torch.func.jvp``."""
    api = "jvp(f, primals, tangents)"
    flat_p, p_spec, flat_t = _jvp_checks(primals, tangents, api)
    if forward_ad._current_level >= 0 or _batched_size():
        return _jvp_by_vjps(func, flat_p, p_spec, flat_t, strict, has_aux, api)
    with _transform(), forward_ad.dual_level():
        duals = [forward_ad.make_dual(p, t) for p, t in zip(flat_p, flat_t, strict=True)]
        output, aux = _split_aux(func(*tree_unflatten(duals, p_spec)), has_aux, api)
        outs, spec = _outputs(output, api)
        values, jvps = [], []
        for o in outs:
            primal, tangent = forward_ad.unpack_dual(o)
            if tangent is None:
                if strict:
                    raise RuntimeError(
                        "jvp(f, primals, tangents, strict=True): The output of f is "
                        "independent of the inputs. This is not allowed with strict=True."
                    )
                tangent = _zeros(o)
            values.append(primal)
            jvps.append(tangent)
        aux_leaves, aux_spec = tree_flatten(aux)
        aux_leaves = [forward_ad.unpack_dual(a).primal if isinstance(a, Tensor) else a
                      for a in aux_leaves]  # fmt: skip
    result = (tree_unflatten(values, spec), tree_unflatten(jvps, spec))
    if has_aux:
        return (*result, tree_unflatten(aux_leaves, aux_spec))
    return result


def _jvp_by_vjps(func, flat_p, p_spec, flat_t, strict, has_aux, api):
    # u -> u^T J is linear in u: its derivative with respect to u, applied to v, is J v
    with enable_grad(), _transform():
        inputs = [_differentiable(p) for p in flat_p]
        output, aux = _split_aux(func(*tree_unflatten(inputs, p_spec)), has_aux, api)
        outs, spec = _outputs(output, api)
        us = [_zeros(o).requires_grad_(True) for o in outs]
        grads = _grads(outs, inputs, us, True)
        jvps = _grads(grads, us, flat_t, True)
    if strict and not any(o.requires_grad for o in outs):
        raise RuntimeError(
            "jvp(f, primals, tangents, strict=True): The output of f is independent of the "
            "inputs. This is not allowed with strict=True."
        )
    result = (tree_unflatten(outs, spec), tree_unflatten(jvps, spec))
    return (*result, aux) if has_aux else result


def linearize(func, *primals):
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is the Jacobian-vector product at
    ``primals``, from the graph recorded once here (each call differentiates the recorded
    vector-Jacobian product, which is linear in its cotangent: no new forward pass). As
    ``torch.func.linearize``."""
    with enable_grad(), _transform():
        leaves, spec = tree_flatten(primals)
        _check_tensors(leaves, "linearize", "primals")
        inputs = [_differentiable(x) for x in leaves]
        output = func(*tree_unflatten(inputs, spec))
        outs, out_spec = _outputs(output, "linearize")
        us = [_zeros(o).requires_grad_(True) for o in outs]
        grads = _grads(outs, inputs, us, True)

    def jvp_fn(*tangents):
        flat_t, t_spec = tree_flatten(tangents)
        if t_spec != spec:
            raise RuntimeError(
                f"Expected the tangents {t_spec!r} to have the same argspec as the primals {spec!r}"
            )
        _check_tangents(flat_t, leaves)
        with enable_grad(), _transform():
            jvps = _grads(grads, us, flat_t, False)
        return tree_unflatten([g.detach() for g in jvps], out_spec)

    return tree_unflatten([o.detach() for o in outs], out_spec), jvp_fn


# -- Jacobians ---------------------------------------------------------------------------------


def _jacobian_tree(rows, outs, out_spec, in_spec):
    """The pytree a Jacobian transform returns: per output leaf, the input structure with
    ``rows[i][j]`` (output i's Jacobian with respect to input j) at each input leaf."""
    per_output = [tree_unflatten(rows[i], in_spec) for i in range(len(outs))]
    return tree_unflatten(per_output, out_spec)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """A function returning the Jacobian of ``func`` with respect to the arguments
    ``argnums``, by reverse mode (the vector-Jacobian products of every output element's
    basis cotangent, batched in one backward where that pays): for an output of shape ``S``
    and an input of shape ``T``, a tensor of shape ``S + T``; pytrees of outputs and inputs
    give the nested structure torch.func.jacrev gives."""
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        outer = is_grad_enabled()
        with enable_grad(), _transform():
            inputs, spec, output, aux = _call_on_inputs(
                func, args, kwargs, argnums, has_aux, "jacrev(f, ...)(*args)"
            )
            outs, out_spec = _outputs(output, "jacrev(f, ...)(*args)")
            create = _outer_needs_graph(outs, inputs, outer)
            rows = _reverse_rows(outs, inputs, create)
        result = _jacobian_tree(rows, outs, out_spec, spec)
        if has_aux:
            return result, _plain_tree(aux, create)
        return result

    return wrapper


def _reverse_rows(outs, inputs, create):
    """``rows[i][j]``: d outs[i] / d inputs[j], of shape outs[i].shape + inputs[j].shape: the
    vector-Jacobian products of every basis cotangent, stacked by
    ``grad(is_grads_batched=True)`` (one create_graph backward whose formulas run batched,
    as torch's jacrev vmaps its vjp, where that pays), or one backward per element inside a
    vmap (the outputs are batched values there)."""
    sizes = [o.numel() for o in outs]
    total = sum(sizes)
    if _batched_size():
        stacked = _looped_vjps(outs, inputs, sizes, total, create)
    else:
        stacked = _stacked_vjps(outs, inputs, sizes, total, create)
    rows = []
    start = 0
    for o, m in zip(outs, sizes, strict=True):
        rows.append([
            _plain(s[start : start + m].reshape(*o.shape, *x.shape), create)
            for s, x in zip(stacked, inputs, strict=True)
        ])  # fmt: skip
        start += m
    return rows


def _basis(outs, sizes, total, k=None):
    """The cotangents of output element ``k`` (of every element, stacked, when None)."""
    cots = []
    start = 0
    for o, m in zip(outs, sizes, strict=True):
        if k is None:
            c = np.zeros((total, m), o.dtype)
            c[start : start + m] = np.eye(m, dtype=o.dtype)
            cots.append(_wrap(c.reshape(total, *o.shape)))
        else:
            c = np.zeros(m, o.dtype)
            if start <= k < start + m:
                c[k - start] = 1
            cots.append(_wrap(c.reshape(o.shape)))
        start += m
    return cots


def _stacked_vjps(outs, inputs, sizes, total, create):
    grads = _grad_of_used(outs, inputs, _basis(outs, sizes, total), create_graph=create,
                          retain_graph=True, is_grads_batched=True)  # fmt: skip
    return [_wrap(np.zeros((total, *x.shape), x.dtype)) if g is None else g
            for g, x in zip(grads, inputs, strict=True)]  # fmt: skip


def _looped_vjps(outs, inputs, sizes, total, create):
    parts = [[] for _ in inputs]
    for k in range(total):
        grads = _grads(outs, inputs, _basis(outs, sizes, total, k), create)
        for j, g in enumerate(grads):
            parts[j].append(g)
    return [_stack_rows(p, x, total) for p, x in zip(parts, inputs, strict=True)]


def _stack(tensors, dim=0):
    return FUNCTIONS["stack"](tensors, dim=dim)  # (an op: recorded as any other)


def _stack_rows(parts, x, total):
    if not parts:
        return _wrap(np.zeros((total, *x.shape), x.dtype))
    return _stack(parts)


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """A function returning the Jacobian of ``func`` with respect to the arguments
    ``argnums``, by forward mode: one forward pass whose tangents are the batch of every
    basis vector of an input (vmap's rules; one pass per element where an op has none), or
    reverse mode inside an open forward level or a vmap, where a second tangent level cannot
    open. Shapes and structure as ``jacrev``'s. As ``torch.func.jacfwd``."""
    _check_randomness(randomness)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if forward_ad._current_level >= 0 or _batched_size():  # (tangents: one level)
            return jacrev(func, argnums, has_aux=has_aux)(*args, **kwargs)
        api = "jacfwd(f, ...)(*args)"
        with _transform():
            nums = _check_argnums(argnums, len(args))
            leaves, spec = tree_flatten(_diff_args(args, nums))
            for x in leaves:
                if not isinstance(x, Tensor):
                    raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
            outs = aux = out_spec = None
            columns = []  # per input: per output, its tangents stacked (x.numel(), *o.shape)
            for j in range(len(leaves)):
                outs, out_spec, aux, cols = _tangent_columns(
                    func, args, kwargs, nums, leaves, spec, j, has_aux, api
                )
                columns.append(cols)
            if outs is None:  # (every input empty: one call for the outputs' shapes)
                output, aux = _split_aux(func(*args, **kwargs), has_aux, api)
                outs, out_spec = _outputs(output, api)
            # (the tangents may be recorded ops of a transform inside: they stay
            # differentiable only for what is outside this one)
            keep = is_grad_enabled() and (
                _nesting.depth > 1
                or any(x.requires_grad for x in leaves)
                or bool(reached_leaves(outs))
            )
            rows = [[_plain(_columns_to_jacobian(columns[j], i, o, x), keep)
                     for j, x in enumerate(leaves)] for i, o in enumerate(outs)]  # fmt: skip
        result = _jacobian_tree(rows, outs, out_spec, spec)
        return (result, _plain_tree(aux, keep)) if has_aux else result

    return wrapper


def _unpack_tree(tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten(
        [forward_ad.unpack_dual(a).primal if isinstance(a, Tensor) else a for a in leaves], spec
    )


def _tangent_columns(func, args, kwargs, nums, leaves, spec, j, has_aux, api):
    """``func``'s outputs and, per output, its tangents for every basis tangent of input
    ``j``, stacked: one forward pass whose tangents are a batch (vmap's rules, as torch's
    jacfwd vmaps its jvp), or one pass per element where an op has no batching rule.
    Returns (outputs, their structure, aux, stacked tangents or None per output)."""
    x = leaves[j]
    n = x.numel()
    if n == 0:
        return None, None, None, None
    if n > 1:
        try:
            eye = _wrap(np.eye(n, dtype=x.dtype).reshape(n, *x.shape))
            basis = BatchedTensor(eye, new_level())
            with batched_mode():
                outs, out_spec, aux, tangents = _jvp_pass(
                    func, args, kwargs, nums, leaves, spec, j, basis, has_aux, api
                )
            cols = []
            for o, t in zip(outs, tangents, strict=True):
                if t is None:
                    cols.append(_wrap(np.zeros((n, *o.shape), o.dtype)))
                elif type(t) is BatchedTensor:
                    if t._level != basis._level:
                        raise Unbatchable("a tangent of another batch")
                    cols.append(t._p)
                else:  # (the same for every basis tangent)
                    cols.append(t.unsqueeze(0).expand(n, *o.shape))
            return outs, out_spec, aux, cols
        except Unbatchable as e:
            _log.debug("jacfwd: %s has no batching rule; one forward pass per input element", e)
    per_k = []
    for k in range(n):
        e = np.zeros(n, x.dtype)
        e[k] = 1
        outs, out_spec, aux, tangents = _jvp_pass(
            func, args, kwargs, nums, leaves, spec, j, _wrap(e.reshape(x.shape)), has_aux, api
        )
        per_k.append([_zeros(o) if t is None else t for o, t in zip(outs, tangents, strict=True)])
    return outs, out_spec, aux, [_stack([c[i] for c in per_k]) for i in range(len(outs))]


def _jvp_pass(func, args, kwargs, nums, leaves, spec, j, tangent, has_aux, api):
    with forward_ad.dual_level():
        duals = list(leaves)
        duals[j] = forward_ad.make_dual(leaves[j], tangent)
        call = _replace(args, nums, tree_unflatten(duals, spec))
        output, aux = _split_aux(func(*call, **kwargs), has_aux, api)
        outs, out_spec = _outputs(output, api)
        tangents = [forward_ad.unpack_dual(o).tangent for o in outs]
        outs = [forward_ad.unpack_dual(o).primal for o in outs]
        aux = _unpack_tree(aux)
    return outs, out_spec, aux, tangents


def _columns_to_jacobian(columns, i, o, x):
    if columns is None:
        return _wrap(np.zeros((*o.shape, *x.shape), o.dtype))
    cols = columns[i].movedim(0, -1) if o.dim() else columns[i]  # o.shape + (x.numel(),)
    return cols.reshape(*o.shape, *x.shape)


def hessian(func, argnums=0):
    """The Hessian of ``func`` with respect to the arguments ``argnums``, as
    ``torch.func.hessian`` (shapes and structure as ``jacrev(jacrev(func))``'s).

    torch computes it forward over reverse (``jacfwd(jacrev(func))``); here it is reverse over
    reverse, the same derivatives: the gradient's graph is recorded once and differentiated
    for the batch of basis cotangents, cheaper on this engine than forward over reverse's
    batch of tangents through the function and its recorded backward (16 inputs: 3.4 ms
    against 4.3 ms; torch 6 ms; ``benchmarks/func_transforms.py``)."""
    return jacrev(jacrev(func, argnums), argnums)


# -- vmap --------------------------------------------------------------------------------------

_RANDOMNESS = ("error", "different", "same")


def _check_randomness(randomness):
    if randomness not in _RANDOMNESS:
        raise RuntimeError(
            "Only allowed values for randomness are 'error', 'different', or 'same'. Got "
            f"{randomness}"
        )


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over a dimension of its inputs: ``in_dims`` says which dimension of
    each argument is mapped (an int or None, or a structure matching the arguments),
    ``out_dims`` where the mapped dimension goes in each output. ``randomness``: "error"
    (random ops inside raise), "different" (each sample draws its own) or "same" (every
    sample draws the same values); ``chunk_size`` samples are evaluated at a time. As
    ``torch.func.vmap``: ``func`` runs once on batched values, each op once for the whole
    batch; if it uses an op that has no batching rule yet, it runs again once per sample
    (the ``nautograd`` logger names the op at DEBUG level)."""
    _check_randomness(randomness)
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    name = _name(func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        size, flat_dims, flat_args, spec = _batched_inputs(in_dims, args, name)
        if not any(type(a) is BatchedTensor for a in flat_args):  # (else: inside a vmap)
            try:
                return _vmap_batched(func, flat_args, flat_dims, spec, size, out_dims,
                                     randomness, chunk_size, name, kwargs)  # fmt: skip
            except Unbatchable as e:  # (an op without a batching rule: once per sample)
                _log.debug("vmap(%s): %s has no batching rule; running per sample", name, e)
        return _vmap_loop(func, flat_args, flat_dims, spec, size, out_dims, randomness,
                          name, kwargs)  # fmt: skip

    return wrapper


def _vmap_batched(func, flat_args, flat_dims, spec, size, out_dims, randomness, chunk_size,
                  name, kwargs):  # fmt: skip
    """``func`` evaluated once on batched values (_batching.py), ``chunk_size`` samples at a
    time; raises Unbatchable where an op has no batching rule."""
    step = max(size if chunk_size is None else min(chunk_size, size), 1)
    parts = []
    for start in range(0, max(size, 1), step):  # (an empty batch: one evaluation of it)
        n = min(step, size - start)
        level = new_level()
        batched = [
            a if d is None else BatchedTensor(_chunk(a, d, start, n, size).movedim(d, 0), level)
            for a, d in zip(flat_args, flat_dims, strict=True)
        ]
        sizes = _nesting.__dict__.setdefault("batched", [])
        sizes.append((n, level))
        try:
            with batched_mode(), _random_mode(randomness, batched=True):
                result = func(*tree_unflatten(batched, spec), **kwargs)
        finally:
            sizes.pop()
        parts.append(_unbatched_outputs(result, out_dims, n, name, level))
    if len(parts) == 1:
        return parts[0]
    return _joined_chunks(parts, out_dims)


def _chunk(a, d, start, n, size):
    return a if n == size else a.narrow(d, start, n)


def _joined_chunks(parts, out_dims):
    leaves0, spec = tree_flatten(parts[0])
    dims = _broadcast_prefix(out_dims, spec) if spec.kind != "leaf" else [_one_dim(out_dims)]
    columns = [tree_flatten(p)[0] for p in parts]
    joined = []
    for k, d in enumerate(dims):
        items = [c[k] for c in columns]
        joined.append(items[0] if d is None else FUNCTIONS["cat"](items, dim=d))
    return tree_unflatten(joined, spec)


def _one_dim(out_dims):
    return out_dims[0] if isinstance(out_dims, tuple) else out_dims


def _unbatched_outputs(result, out_dims, size, name, level):
    """The outputs of a batched evaluation (of ``level``) with their mapped dim at
    ``out_dims``; a value of another level (an enclosing vmap's) is one that this evaluation
    did not batch."""
    leaves, spec = tree_flatten(result)
    flat_out = _flat_out_dims(out_dims, spec, name)
    outputs = []
    for x, d in zip(leaves, flat_out, strict=True):
        ours = type(x) is BatchedTensor and x._level == level
        if d is None:
            if ours:
                raise ValueError(
                    f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim "
                    "is None"
                )
            outputs.append(x)
            continue
        nd = _checked_output(x, d, name)
        if ours:
            outputs.append(x._p.movedim(0, d))
        else:  # (the same for every sample)
            outputs.append(x.unsqueeze(d).expand(*x.shape[: d % nd], size, *x.shape[d % nd :]))
    return tree_unflatten(outputs, spec)


def _vmap_loop(func, flat_args, flat_dims, spec, size, out_dims, randomness, name, kwargs):
    """``func`` run once per sample, the results stacked."""
    results = []
    same = _random.get_state() if randomness == "same" else None
    with _random_mode(randomness):
        for b in range(size):
            if same is not None:  # (every sample draws what the first one drew)
                _random.set_state(same)
            sample = [
                a if d is None else a.select(d, b)
                for a, d in zip(flat_args, flat_dims, strict=True)
            ]
            results.append(func(*tree_unflatten(sample, spec), **kwargs))
    return _stack_outputs(results, out_dims, size, name)


def _batched_inputs(in_dims, args, name):
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or "
            f"a (potentially nested) tuple matching the structure of inputs, got: "
            f"{type(in_dims)}."
        )
    if not args:
        raise ValueError(
            f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
            "trying to vmap over a function with no inputs. The latter is unsupported."
        )
    flat_args, spec = tree_flatten(args)
    flat_dims = _broadcast_prefix(in_dims, spec)
    if flat_dims is None:
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with "
            f"the structure of `inputs`. in_dims has structure {tree_flatten(in_dims)[1]!r} "
            f"but inputs has structure {spec!r}."
        )
    for i, (a, d) in enumerate(zip(flat_args, flat_dims, strict=True)):
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                "but in_dim must be either an integer dimension or None."
            )
        if d is not None and not _is_tensor(a):
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                f"but the input is of type {type(a)}. We cannot vmap over non-Tensor "
                "arguments, please use None as the respective in_dim"
            )
        if d is not None and not -a.dim() <= d < a.dim():
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some "
                f"input, but that input is a Tensor of dimensionality {a.dim()} so expected "
                f"in_dim to satisfy -{a.dim()} <= in_dim < {a.dim()}."
            )
        if d is not None and d < 0:
            flat_dims[i] = d % a.dim()
    sizes = [a.shape[d] for a, d in zip(flat_args, flat_dims, strict=True) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            "vmap: Expected all tensors to have the same size in the mapped dimension, got "
            f"sizes {sizes} for the mapped dimension"
        )
    return sizes[0], flat_dims, flat_args, spec


def _flat_out_dims(out_dims, spec, name):
    """``out_dims`` as one dim (or None) per output leaf of structure ``spec``."""

    def incompatible():
        raise ValueError(
            f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible "
            f"with the structure of `outputs`. out_dims has structure "
            f"{tree_flatten(out_dims)[1]!r} but outputs has structure {spec!r}."
        )

    if spec.kind == "leaf":
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            flat_out = list(out_dims)
        elif isinstance(out_dims, int) or out_dims is None:
            flat_out = [out_dims]
        else:
            incompatible()
    else:
        flat_out = _broadcast_prefix(out_dims, spec)
        if flat_out is None:
            incompatible()
    for d in flat_out:
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError(
                f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a "
                "python collection of ints representing where in the outputs the vmapped "
                "dimension should appear."
            )
    return flat_out


def _checked_output(x, d, name):
    """An output ``x`` that gets the mapped dim at ``d`` (not None): torch's errors for one
    that is not a tensor and for ``d`` out of range; returns the output's rank with it."""
    if not _is_tensor(x):
        raise ValueError(
            f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(x)}. "
            "Did you mean to set out_dims= to None for output?"
        )
    nd = x.dim() + 1
    if not -nd <= d < nd:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {d})"
        )
    return nd


def _stack_outputs(results, out_dims, size, name):
    if not results:
        raise ValueError(f"vmap({name}, ...): the mapped dimension has size 0")
    _, spec = tree_flatten(results[0])
    flat_out = _flat_out_dims(out_dims, spec, name)
    per_sample = [tree_flatten(r)[0] for r in results]
    outputs = []
    for k, d in enumerate(flat_out):
        items = [leaves[k] for leaves in per_sample]
        if d is None:
            outputs.append(items[0])
            continue
        _checked_output(items[0], d, name)
        outputs.append(_stack(items, dim=d))
    return tree_unflatten(outputs, spec)


_RANDOM_ERROR = (
    "vmap: called random operation while in randomness error mode. Please either use the "
    "'same' or 'different' randomness flags on vmap or perform the randomness operation out "
    "of vmap"
)


def _random_mode(randomness, batched=False):
    """Random ops inside vmap: with "error" they raise (as torch's); evaluated batched with
    "different", they stop the batched evaluation (one draw would serve every sample)."""
    if randomness == "error":
        return _random.refused(lambda: RuntimeError(_RANDOM_ERROR))
    if randomness == "different" and batched:
        return _random.refused(per_sample_draws)
    return contextlib.nullcontext()


# -- modules -----------------------------------------------------------------------------------


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):  # fmt: skip
    """``module(*args, **kwargs)`` with its parameters and buffers replaced by the tensors of
    ``parameter_and_buffer_dicts`` (a dict name -> tensor, or a tuple of them) for this call
    only. As ``torch.func.functional_call``: tied tensors follow each other with
    ``tie_weights``; ``strict`` requires exactly the module's names."""
    if isinstance(parameter_and_buffer_dicts, dict):
        given = dict(parameter_and_buffer_dicts)
    elif isinstance(parameter_and_buffer_dicts, (tuple, list)):
        given = {}
        for d in parameter_and_buffer_dicts:
            repeated = sorted(set(given) & set(d))
            if repeated:
                raise ValueError(
                    f"{repeated} appeared in multiple dictionaries; behavior of functional call "
                    "is ambiguous"
                )
            given.update(d)
    else:
        raise ValueError(
            "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
            f"{type(parameter_and_buffer_dicts)}"
        )
    names = _member_names(module)
    if tie_weights:
        given = _untied(names, given)
    if strict:
        known = set(names)
        unexpected = sorted(k for k in given if k not in known)
        missing = sorted(k for k in names if k not in given)
        msgs = []
        if unexpected:
            msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if msgs:
            raise RuntimeError(
                f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(msgs)
            )
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, given):
        return module(*args, **(kwargs or {}))


def _member_names(module):
    """name -> tensor of every parameter and buffer, tied ones under each of their names."""
    out = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        out[name] = p
    for name, b in module.named_buffers(remove_duplicate=False):
        out[name] = b
    return out


def _untied(names, given):
    by_tensor = {}
    for name, t in names.items():
        by_tensor.setdefault(id(t), []).append(name)
    out = dict(given)
    for tied in by_tensor.values():
        if len(tied) < 2:
            continue
        values = [given[n] for n in tied if n in given]
        if not values:
            continue
        if len({id(v) for v in values}) != 1:
            keys = sorted(n for n in tied if n in given)
            raise ValueError(
                f"functional_call got multiple values for keys {keys}, which are tied. "
                "Consider using tie_weights=False"
            )
        for n in tied:
            out[n] = values[0]
    return out


@contextlib.contextmanager
def _swapped(module, given):
    saved = []
    try:
        for name, value in given.items():
            owner, leaf = _owner(module, name)
            for table in ("_parameters", "_buffers"):
                members = owner.__dict__.get(table)
                if members is not None and leaf in members:
                    saved.append((members, leaf, members[leaf], None))
                    members[leaf] = value
                    break
            else:  # (not a member: an attribute for the call, as torch's)
                saved.append((owner, leaf, None, owner.__dict__.get(leaf, _MISSING)))
                object.__setattr__(owner, leaf, value)
        yield
    finally:
        for where, leaf, member, attr in reversed(saved):
            if attr is None:
                where[leaf] = member
            elif attr is _MISSING:
                object.__delattr__(where, leaf)
            else:
                object.__setattr__(where, leaf, attr)


_MISSING = object()


def _owner(module, name):
    *path, leaf = name.split(".")
    for part in path:
        module = getattr(module, part)
    return module, leaf


def stack_module_state(models):
    """``(params, buffers)``: each parameter and buffer of the models (all of the same
    structure) stacked along a new first dimension, for ``vmap`` over ``functional_call``.
    As ``torch.func.stack_module_state``: the stacked parameters are new leaves."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode."
        )
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(named):
        names = [n for n, _ in named(models[0])]
        out = {}
        for n in names:
            tensors = [dict(named(m))[n] for m in models]
            out[n] = _stack([t.detach() for t in tensors])
        return out

    params = stacked(lambda m: m.named_parameters())
    for p, n in zip(params.values(), dict(models[0].named_parameters()).values(), strict=True):
        p.requires_grad_(n.requires_grad)
    buffers = stacked(lambda m: m.named_buffers())
    return params, buffers
