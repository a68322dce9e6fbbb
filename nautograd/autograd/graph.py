"""Graph inspection: the ``grad_fn`` node objects."""

from ..graph.tape import ACC, OP_ACCUMULATE_GRAD
from ..kernels import OPS


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
        op = int(self._tape.op[self._node])
        if op == OP_ACCUMULATE_GRAD:
            return "torch::autograd::AccumulateGrad"
        return OPS[op - 1].node_name

    @property
    def next_functions(self):
        tape, i = self._tape, self._node
        out = []
        for e in range(tape.edge_ptr[i], tape.edge_ptr[i + 1]):
            c = int(tape.edge_node[e])
            out.append((None, 0) if c < 0 else (Node(tape, c), int(tape.edge_input_nr[e])))
        return tuple(out)

    @property
    def variable(self):
        if not self._tape.flags[self._node] & ACC:
            raise AttributeError("only AccumulateGrad nodes have a variable")
        return self._tape.obj[self._node]()

    def _sequence_nr(self):
        return self._node

    def __eq__(self, other):
        return isinstance(other, Node) and other._tape is self._tape and other._node == self._node

    def __hash__(self):
        return hash((id(self._tape), self._node))

    def __repr__(self):
        name = self.name().split("::")[-1]
        return f"<{name} object at {hex(id(self))}>"
