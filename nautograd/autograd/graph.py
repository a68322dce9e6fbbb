"""Graph inspection and hooks: the ``grad_fn`` node objects, ``register_multi_grad_hook``,
``increment_version``."""

import threading

from ..graph.tape import ACC, OP_ACCUMULATE_GRAD
from ..kernels import OPS

__all__ = ["Node", "register_multi_grad_hook", "increment_version"]


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

    __slots__ = ("_tape", "_h")

    def __init__(self, tape, node):
        self._tape = tape
        self._h = tape.new_handle(node)  # keeps the node through compaction

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

    @property
    def metadata(self):
        """A dict kept with the node for the user; anomaly mode stores the stack of the
        forward call in ``metadata["traceback_"]`` (torch's Node.metadata)."""
        return self._tape.metadata.setdefault(self._node, {})

    def __eq__(self, other):
        return isinstance(other, Node) and other._tape is self._tape and other._node == self._node

    def __hash__(self):
        return hash((id(self._tape), self._node))

    def __repr__(self):
        name = self.name().split("::")[-1]
        return f"<{name} object at {hex(id(self))}>"


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
