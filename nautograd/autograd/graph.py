"""Graph inspection and hooks: the ``grad_fn`` node objects, ``register_multi_grad_hook``,
``increment_version``."""

import threading
from typing import Any, NamedTuple

import numpy as np

from ..graph.tape import ACC, F32, HAS_SAVED, OP_ACCUMULATE_GRAD, PY, RELEASED
from ..kernels import OPS

__all__ = [
    "Node",
    "GradientEdge",
    "get_gradient_edge",
    "register_multi_grad_hook",
    "increment_version",
    "saved_tensors_hooks",
    "save_on_cpu",
    "disable_saved_tensors_hooks",
]


def make_node(tape, node):
    """The ``grad_fn`` object of tape row ``node``: a ``<Function>Backward`` object for a
    custom Function's node, a ``Node`` otherwise."""
    cls = getattr(tape.obj[node], "_node_cls", None)
    return (cls or Node)(tape, node)


def node_name(tape, node):
    """torch's name of a node: ``MulBackward0``, a custom Function's ``<Name>Backward`` (its
    ctx class), ``torch::autograd::AccumulateGrad``."""
    op = int(tape.op[node])
    if op != OP_ACCUMULATE_GRAD:
        return OPS[op - 1].node_name
    if tape.flags[node] & ACC:
        return "torch::autograd::AccumulateGrad"
    return type(tape.obj[node]).__name__


class Node:
    """A recorded node (``tensor.grad_fn``), as torch.autograd.graph.Node."""

    __slots__ = ("_tape", "_h", "_value")

    def __init__(self, tape, node):
        self._tape = tape
        self._h = tape.new_handle(node)  # keeps the node through compaction
        self._value = None  # (shape, dtype) of its output, when a GradientEdge was taken

    def __del__(self):
        try:
            self._tape.drop_handle(self._h)
        except Exception:
            pass

    @property
    def _node(self):
        self._tape.flush()
        return self._tape.h2node[self._h]

    def name(self):
        """The node's class name, as torch names it (``MulBackward0``)."""
        return node_name(self._tape, self._node)

    @property
    def next_functions(self):
        """One ``(node, input_nr)`` pair per input: the node its gradient goes to (None for an
        input without a gradient)."""
        tape, i = self._tape, self._node
        out = []
        for e in range(tape.edge_ptr[i], tape.edge_ptr[i + 1]):
            c = int(tape.edge_node[e])
            out.append((None, 0) if c < 0 else (make_node(tape, c), int(tape.edge_input_nr[e])))
        return tuple(out)

    @property
    def variable(self):
        """The leaf tensor of an ``AccumulateGrad`` node."""
        if not self._tape.flags[self._node] & ACC:
            raise AttributeError("only AccumulateGrad nodes have a variable")
        return self._tape.obj[self._node]()

    def _sequence_nr(self):
        return self._node

    def register_prehook(self, fn):
        """``fn(grad_outputs) -> tuple or None``, run when this node runs, before it (after the
        tensor hooks of its outputs); a returned tuple replaces the gradients of its outputs.
        Returns a handle whose ``remove()`` removes it."""
        return self._register("pre", fn)

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs) -> tuple or None``, run after this node ran; a
        returned tuple replaces the gradients it passes on (one per ``next_functions``
        entry). For an ``AccumulateGrad`` node ``grad_inputs`` is empty and it runs after the
        leaf's ``.grad`` was updated. Returns a handle whose ``remove()`` removes it."""
        return self._register("post", fn)

    def _register(self, kind, fn):
        from .hooks import RemovableHandle

        tape, node = self._tape, self._node
        if tape.flags[node] & ACC:
            leaf = tape.obj[node]()
            if leaf._acc_hooks is None:
                leaf._acc_hooks = {"pre": [], "post": []}
            fns = leaf._acc_hooks[kind]
        else:
            fns = tape.hooks.setdefault(node, {}).setdefault(kind, [])
            tape.flags[node] |= PY  # (the engine hands the node to Python, which runs them)
        fns.append(fn)
        return RemovableHandle(fns, fn)

    @property
    def metadata(self):
        """A dict kept with the node for the user; anomaly mode stores the stack of the
        forward call in ``metadata["traceback_"]`` (torch's Node.metadata)."""
        return self._tape.metadata.setdefault(self._node, {})

    def __getattr__(self, name):
        # torch's saved values of the table's ops: grad_fn._saved_self, _saved_result, ...
        if not name.startswith("_saved_"):
            raise AttributeError(name)
        tape, node = self._tape, self._node
        op = int(tape.op[node])
        names = OPS[op - 1].saved_names if op != OP_ACCUMULATE_GRAD else ()
        key = name[len("_saved_") :]
        if key in names:
            return _saved_value(tape, node, names.index(key), key == "result")
        raise AttributeError(f"'{self.name()}' object has no attribute '{name}'")

    def __eq__(self, other):
        return isinstance(other, Node) and other._tape is self._tape and other._node == self._node

    def __hash__(self):
        return hash((id(self._tape), self._node))

    def __repr__(self):
        name = self.name().split("::")[-1]
        return f"<{name} object at {hex(id(self))}>"


def _saved_value(tape, node, k, result):
    """Saved value ``k`` of ``node`` as a new tensor (torch's ``_saved_*``): in its input's
    shape, or its output's (``result``, of an elementwise op: the input's shape too)."""
    from ..tensor import _wrap
    from ._errors import RELEASED_MSG
    from .higher_order import FormulaCtx

    flags = int(tape.flags[node])
    if flags & RELEASED and flags & HAS_SAVED:
        raise RuntimeError(RELEASED_MSG)
    shapes = tape.meta[node]
    if int(tape.edge_ptr[node + 1] - tape.edge_ptr[node]) == 1:
        shapes = (shapes,)
    value = FormulaCtx(tape, node, shapes, None, [], ()).saved(k)
    shape = tuple(shapes[0] if result else shapes[k])
    return _wrap(np.array(value).reshape(shape))


class PyNode(Node):
    """The node of a custom Function call. Attributes not found here are read from the
    Function's ``ctx`` (``grad_fn.saved_tensors``, what forward stored on ctx), as torch's
    grad_fn is the ctx itself. Each Function has a subclass named ``<Function>Backward``."""

    __slots__ = ()

    def name(self):
        """The custom Function's class name followed by ``Backward``."""
        return type(self).__name__  # <Function>Backward, as the ctx's class

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._tape.obj[self._node], name)


class _MultiHandle:
    """The handle ``register_multi_grad_hook`` returns: ``remove()`` removes every hook."""

    def __init__(self, handles):
        self._handles = handles

    def remove(self):
        for handle in self._handles:
            handle.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """Call ``fn`` once per backward from the gradients of ``tensors``.

    ``mode="all"``: ``fn(grads)`` when the backward has finished, with the gradient of each
    tensor it reached (None for the others); ``mode="any"``: ``fn(grad)`` on the first
    gradient computed. Counted per backward call (per thread). Not called when the backward
    reaches none of them, or raises."""
    from .engine import current_task, queue_callback

    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    n = len(tensors)  # (the hooks keep no reference to the tensors: it would keep their nodes)
    lock = threading.Lock()
    state = {}  # id(graph task) -> the gradients so far ("all"), or True ("any")

    def hook_for(i):
        def hook(grad):
            key = id(current_task())
            with lock:
                seen = state.get(key)
                if seen is None:
                    seen = state[key] = True if mode == "any" else [None] * n
                    first = True
                else:
                    first = False
                if mode == "all":
                    seen[i] = grad
            if mode == "any":
                if first:
                    queue_callback(lambda: state.pop(key, None))
                    fn(grad)
            elif first:
                queue_callback(lambda: fn(state.pop(key)))

        return hook

    return _MultiHandle([t.register_hook(hook_for(i)) for i, t in enumerate(tensors)])


def increment_version(tensor):
    """Add 1 to the version counter of ``tensor`` (or of each tensor of a sequence), as an
    in-place change would: nodes that saved it raise in backward."""
    from ..tensor import Tensor

    for t in [tensor] if isinstance(tensor, Tensor) else tensor:
        t._bump()


class GradientEdge(NamedTuple):
    """A fixed position in the graph: output ``output_nr`` of ``node``. Usable wherever a
    tensor is as a root of ``backward``/``grad`` and as an input of ``grad``; after an in-place
    change of the tensor it was taken from, it still names the old value's gradient."""

    node: Any
    output_nr: int
    ownership_token: Any = None


def get_gradient_edge(tensor):
    """The ``GradientEdge`` of ``tensor``: its ``grad_fn`` and output, or for a leaf its
    ``AccumulateGrad`` node."""
    from ..graph.tape import current_tape
    from ..tensor import _accumulator

    if not tensor.requires_grad:
        raise RuntimeError(
            "It is not possible to get the gradient edge for a Tensor that does not require "
            "gradients"
        )
    if tensor._h >= 0:
        node = tensor.grad_fn
    else:
        tape = current_tape()
        tape.reserve(1)
        node = make_node(tape, _accumulator(tape, tensor))
    node._value = (tensor._data.shape, tensor._data.dtype)  # (the tape keeps sizes only)
    return GradientEdge(node, tensor._out if tensor._h >= 0 else 0)


def edge_tensor(edge):
    """A tensor that stands for ``edge`` as a root or input of backward/grad: a leaf's own
    tensor for an AccumulateGrad edge, else a handle on (node, output) with no memory of its
    own."""
    from ..tensor import Tensor, _new

    node, k = edge.node, edge.output_nr
    if not isinstance(node, Node):
        raise TypeError(f"GradientEdge: expected a Node, got {type(node).__name__}")
    tape, i = node._tape, node._node
    if tape.flags[i] & ACC:
        return tape.obj[i]()
    if node._value is not None:
        shape, dtype = node._value
    else:
        shape = (int(tape.out_numel[tape.out_ptr[i] + k]),)
        dtype = np.dtype(np.float32) if tape.flags[i] & F32 else np.dtype(np.float64)
    t = _new(Tensor)
    t._data = np.broadcast_to(np.zeros((), dtype), shape)
    t._rg = True
    t._tape = tape
    t._out = k
    t._vc = None
    t._imp = None
    t._h = tape.new_handle(i)
    return t


# --- saved tensors hooks -------------------------------------------------------------------

_saved_hooks = threading.local()  # .stack: [(pack, unpack), ...]; .disabled: a message or None
_SAVED_HOOKS_LOCK = threading.Lock()
_DEFER_BEFORE = []


def current_saved_hooks():
    """The innermost (pack, unpack) of this thread's ``saved_tensors_hooks``, or None."""
    stack = getattr(_saved_hooks, "stack", None)
    return stack[-1] if stack else None


class saved_tensors_hooks:
    """Within this context every tensor an op saves for backward is given to
    ``pack_hook(tensor)`` when it is saved, and what that returns is kept instead; backward
    gets the tensor ``unpack_hook(packed)`` returns, each time it needs it (as torch's). The
    innermost context of the thread wins; hooks stay with what was saved under them."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        message = getattr(_saved_hooks, "disabled", None)
        if message is not None:
            raise RuntimeError(message)
        from ..tensor import DEFER, SAVED_HOOKS_OPEN, current_tape

        tape = current_tape()
        with _SAVED_HOOKS_LOCK:
            if SAVED_HOOKS_OPEN[0] == 0:
                # the deferred forward records saved values in compiled code: off meanwhile
                _DEFER_BEFORE[:] = [DEFER[0]]
                DEFER[0] = False
            SAVED_HOOKS_OPEN[0] += 1
        if tape.batch is not None:
            tape.run_batch()
        if not hasattr(_saved_hooks, "stack"):
            _saved_hooks.stack = []
        _saved_hooks.stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        from ..tensor import DEFER, SAVED_HOOKS_OPEN

        _saved_hooks.stack.pop()
        with _SAVED_HOOKS_LOCK:
            SAVED_HOOKS_OPEN[0] -= 1
            if SAVED_HOOKS_OPEN[0] == 0 and _DEFER_BEFORE:
                DEFER[0] = _DEFER_BEFORE.pop()


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are packed as copies in CPU memory and unpacked from them (torch's
    offloading context; on a CPU-only library the copy is all there is to it)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(tensor):
            return tensor.device, tensor.detach().clone()

        def unpack(packed):
            return packed[1]

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:
    """Within this context, entering ``saved_tensors_hooks`` raises ``RuntimeError``
    with ``error_message``."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        self.prev = getattr(_saved_hooks, "disabled", None)
        _saved_hooks.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        _saved_hooks.disabled = self.prev


def call_pack(pack, tensor):
    """``pack(tensor)``, with this thread's hooks set aside meanwhile: ops in a pack hook save
    their tensors as they are (no pack within a pack). A pack hook that changes ``tensor`` in
    place raises torch's error."""
    version = tensor._vc[0] if tensor._vc is not None else 0
    stack = _saved_hooks.stack
    stack.append(None)
    try:
        packed = pack(tensor)
    finally:
        stack.pop()
    if (tensor._vc[0] if tensor._vc is not None else 0) != version:
        raise RuntimeError(PACK_MODIFIED)
    return packed


def unpack_checked(unpack, packed):
    """``unpack(packed)``, which must give a tensor (torch's check)."""
    from ..tensor import Tensor

    t = unpack(packed)
    if not isinstance(t, Tensor):
        raise TypeError(
            "Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
            f"{type(t).__name__}"
        )
    return t


PACK_MODIFIED = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to "
    "pack hook cannot be modified by in-place operations as this can lead to unexpected "
    "side-effects. Please open an issue if you need to perform in-place operations on the "
    "input to a pack hook."
)
