"""Graph inspection: the ``grad_fn`` node objects."""

from ..graph.tape import ACC, OP_ACCUMULATE_GRAD
from ..kernels import OPS


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
        return node_name(self._tape, self._node)

    @property
    def next_functions(self):
        tape, i = self._tape, self._node
        out = []
        for e in range(tape.edge_ptr[i], tape.edge_ptr[i + 1]):
            c = int(tape.edge_node[e])
            out.append((None, 0) if c < 0 else (make_node(tape, c), int(tape.edge_input_nr[e])))
        return tuple(out)

    @property
    def variable(self):
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
        return type(self).__name__  # <Function>Backward, as the ctx's class

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._tape.obj[self._node], name)
