"""The op table.

An op is declared once with ``defop``: its torch name, a forward (numpy arrays in, result
arrays out, plus what to save and the integer/float attributes its backward needs), a
compiled backward kernel, and the cases the op-table tests run. The opcode, the
scheduler's dispatch chain, ``ng.<name>``, the ``Tensor`` methods and the tests are all
derived from this table.

Forward protocol::

    forward(*arrays, **kwargs) -> (result, saved, iparams, fparams)

``arrays`` are numpy arrays already promoted to one floating dtype (integer/bool inputs of
non-differentiable ops are passed as they are); ``result`` is an array or a tuple of
arrays (one per output); ``saved`` a tuple of arrays the backward reads; ``iparams`` a
tuple of ints and ``fparams`` a tuple of floats.

Backward protocol (all kernels share it, so dispatch is a plain ``if op == k`` chain)::

    kernel(G, G2, go, gi, V, so, sa, ip, fp)

``G`` is an array of the node's dtype (``G2`` of the other dtype, used only by casts) that
``_jit.view(G, slot, n)`` reads buffers through; ``go[k]`` the slot of the gradient of output
``k``, ``gi[j]`` the slot of the buffer that receives the gradient of input ``j`` (``-1``: not
needed), ``V``/``so``/``sa`` locate the saved values (see ``_jit.saved``), ``ip``/``fp`` the
node's attributes. Kernels *accumulate* (``grad_x[i] += ...``) so fan-out and ``x * x`` need
no special case; a kernel marked ``_jit.assigning`` may instead store into a buffer it is the
first writer of (``gi[len_inputs + j] == 1``), saving a zero fill and a read.
"""

import contextlib
import inspect
import logging
import threading
from dataclasses import dataclass, field

import numpy as np

from ._jit import LAZY  # the kernel table's lazy column

OPS = []
OP_BY_NAME = {}
COMPOSITES = []  # functions written with other ops (no kernel, no opcode): losses, conv, ...


@dataclass(eq=False)
class Op:
    name: str
    forward: object
    backward: object = None  # compiled kernel; None for ops without a gradient
    nin: int = 1  # number of tensor inputs; -1 = a sequence of tensors (cat, stack)
    node_name: str = ""  # grad_fn name, e.g. "MulBackward0"
    api: object = None  # frontend(apply, *args, **kwargs); None = apply(op, *args, **kwargs)
    methods: tuple = ()  # Tensor method names
    dunders: tuple = ()  # Tensor operator names bound to the default frontend
    functions: tuple = None  # names under ng.<name>; default (name,)
    nn_functional: bool = False  # also under ng.nn.functional
    linalg: tuple = ()  # names under ng.linalg
    special: tuple = ()  # names under ng.special
    differentiable: bool = True
    int_result: bool = False  # result dtype is not floating (comparisons)
    int_ok: bool = False  # integer/bool inputs stay integer (add, sum, shape ops); else promoted
    same_dtype: bool = False  # tensor inputs of different dtypes raise (products), not promoted
    opcode: int = -1
    composite: bool = False  # api is the whole op: it calls other ops through apply
    cases: list = field(default_factory=list)  # see tests/op_cases.py
    # the backward written with nautograd ops, used under create_graph=True so that gradients
    # can be differentiated again: formula(ctx, *grads) -> one gradient (or None) per input
    # (ctx: autograd/higher_order.py FormulaCtx)
    formula: object = None
    # the deferred forward (graph/deferred.py): (spec, forward). spec(shapes, kwargs) -> None
    # (not deferred: the eager path runs it, and raises its errors) or (out shape, or a tuple
    # of shapes for a multi-output op; ip; fp; saved mask; store elements written); forward:
    # a compiled kernel forward(S, xo, xn, k, top, ip, fp, oo, on) -> number of outputs,
    # writing the outputs' offsets and sizes in the store S into oo, on. The mask names the
    # saved values, as the eager forward saves them: bit j input j, bit 16 + j output j.
    lazy: object = None
    library: bool = False  # declared by a user (nautograd.library): no cases, no public names
    # the public function's docstring: a sentence of maths, then optional lines "name: text"
    # describing arguments that the shared glossary (ARGUMENTS) does not describe or that
    # mean something else for this op
    doc: str = ""
    tensor_names: tuple = None  # torch's names of the tensor arguments, when not the usual
    # {keyword: frontend(apply, *tensors, **attributes)}: a call of the function or a method
    # given this keyword goes to that frontend, its attributes named (div's rounding_mode, a
    # reduction's dtype); the operators take no keywords, so they never pay for the test
    keywords: dict = None
    # torch's names of the values the node saves, in the order it saves them: the node's
    # ``grad_fn._saved_<name>`` attributes (autograd/graph.py)
    saved_names: tuple = ()
    # forward-mode AD (autograd/forward_ad.py): "linear" (the op on the tangents), "bilinear"
    # (a product: op(t_a, b) + op(a, t_b)), or a function jvp(x, t, result, **attributes)
    # giving a one-input op's tangent with tensor ops (softmax); None: from ``d`` for a unary
    # elementwise op, else from the create_graph formula (the double-vjp identity)
    jvp: object = None


_FAMILY_FORMULAS = {}  # id of a shared backward kernel -> the create_graph formula of its ops


def formula_of(kernel):
    """Decorator: the create_graph formula of every op declared later with ``kernel`` as its
    backward (an op's own ``formula=`` wins). Families of ops share one kernel and one
    formula, as the unary functions do."""

    def register(f):
        _FAMILY_FORMULAS[id(kernel)] = f
        return f

    return register


def defop(name, forward, backward=None, **kw):
    """Declare an op; returns its Op record (the opcode is its position in the table)."""
    if name in OP_BY_NAME:
        raise ValueError(f"op {name!r} declared twice")
    op = Op(name, forward, backward, **kw)
    if op.formula is None and backward is not None:
        op.formula = _FAMILY_FORMULAS.get(id(backward))
    if not op.node_name:
        op.node_name = "".join(p.capitalize() for p in name.split("_")) + "Backward0"
    if op.functions is None:
        op.functions = (name,)
    if op.backward is None:
        op.differentiable = False
    # opcodes 0 is reserved for AccumulateGrad (see graph/tape.py)
    op.opcode = len(OPS) + 1
    OPS.append(op)
    OP_BY_NAME[name] = op
    return op


def cast_first(name):
    """The keyword frontend (``Op.keywords``) of torch's ``dtype=`` on reductions, scans and
    softmax: input cast to dtype (a recorded cast), then the op ``name``, as torch does."""

    def frontend(apply, input, dtype=None, **attributes):  # noqa: A002  (torch's names)
        if dtype is not None:
            input = apply(OP_BY_NAME["_to_copy"], input, dtype=dtype)
        return apply(OP_BY_NAME[name], input, **attributes)

    return frontend


def attributes_of(forward, f, skip=1, nin=1):
    """Give ``forward(*arrays, **kwargs)`` the attribute parameters of ``f`` (those after its
    first ``skip``), so the op's frontend also accepts them positionally, as torch does."""
    P = inspect.Parameter
    tensors = [P(f"x{i}", P.POSITIONAL_OR_KEYWORD) for i in range(nin)]
    attrs = list(inspect.signature(f).parameters.values())[skip:]
    forward.__signature__ = inspect.Signature(tensors + attrs)
    return forward


def defcomposite(name, fn, cases, **kw):
    """Declare a function written with other ops: ``fn(apply, *args, **kwargs)``. Its gradient
    is theirs; it gets ``ng.<name>`` (and methods, ``nn.functional``) and op-table tests."""
    if name in OP_BY_NAME:
        raise ValueError(f"op {name!r} declared twice")
    op = Op(name, None, None, api=fn, composite=True, cases=cases, **kw)
    if op.functions is None:
        op.functions = () if op.nn_functional else (name,)
    COMPOSITES.append(op)
    OP_BY_NAME[name] = op
    return op


def run_case(op, case, apply, inputs, kwargs):
    """Call ``op`` on a case's inputs (tensors or numbers) and kwargs, as the op's public
    function is called: the one convention the op-table tests and ``warmup`` share."""
    args = (inputs,) if op.nin == -1 else inputs
    if op.composite:

        def f(*a, **k):
            return op.api(apply, *a, **k)

    else:

        def f(*a, **k):
            return apply(op, *a, **k)

    if case.call is not None:
        return case.call(f, *args, **kwargs)
    return f(*args, **kwargs)


@dataclass
class Case:
    """A test case: input shapes (or scalars), kwargs, and the domain values are drawn from."""

    shapes: tuple
    kwargs: dict = field(default_factory=dict)
    low: float = -2.0
    high: float = 2.0
    grad: tuple = None  # which inputs are differentiated; default all float tensors
    torch: object = None  # torch reference callable(*tensors, **kwargs); default torch.<name>
    tol: float = None
    # call(f, *tensors, **kwargs): how to call the op function f (nautograd's and torch's)
    # when the tested tensors are not its leading positional arguments
    call: object = None
    gradcheck: bool = True  # False: the op stops a gradient by design (finite differences differ)

    def make_inputs(self, rng, dtype=np.float64):
        """numpy inputs (arrays, or the case's Python numbers) and kwargs for this case.

        A kwarg written ``"mask(3, 4)"`` becomes a random bool array of that shape;
        ``"uniform(3)"``, ``"zeros(3)"``, ``"ones(3)"`` float arrays; ``"eye(3)"`` 3 times the
        identity; ``"probs(3, 4)"`` rows of probabilities (summing to 1 along the last dim).
        """
        arrays = []
        for s in self.shapes:
            if isinstance(s, (int, float)) and not isinstance(s, bool):
                arrays.append(s)
            else:
                arrays.append(rng.uniform(self.low, self.high, size=s).astype(dtype))
        kwargs = {}
        for k, v in self.kwargs.items():
            if isinstance(v, str) and "(" in v and v.endswith(")"):
                kind, args = v[:-1].split("(", 1)
                shape = tuple(int(d) for d in args.split(",") if d.strip())
                if kind == "mask":
                    v = rng.random(shape) > 0.5
                elif kind == "uniform":
                    v = rng.uniform(0.5, 1.5, shape).astype(dtype)
                elif kind == "zeros":
                    v = np.zeros(shape, dtype)
                elif kind == "ones":
                    v = np.ones(shape, dtype)
                elif kind == "eye":
                    v = (3.0 * np.eye(shape[0])).astype(dtype)  # a well-conditioning shift
                elif kind == "probs":
                    p = rng.uniform(0.1, 1.0, shape)
                    v = (p / p.sum(-1, keepdims=True)).astype(dtype)
            kwargs[k] = v
        return arrays, kwargs


# ---------------------------------------------------------------------------------------------
# The compiled kernels' table. Column 0 and 1: the address of an op's backward entry for a
# float64 and a float32 node; column 2: its lazy (deferred) forward's entry (float64); 0 where
# not compiled yet. Columns 3 and 4: whether its backward kernel assigns into fresh buffers
# (kernels/_jit.assigning) and whether it runs in parts (kernels/_jit.parallel). The engine
# reads it as data, so compiling a kernel, or declaring an op, never recompiles the engine.
_TABLE = [np.zeros((1, 5), np.int64)]
_ENTRIES = {}  # (kernel, column) -> its cfunc (kept alive: the table holds its address)
_LOG = logging.getLogger("nautograd")
_TOLD = []


def kernel_table():
    """The table (see above), grown to the ops declared so far."""
    table = _TABLE[0]
    if len(table) != len(OPS) + 1:
        grown = np.zeros((len(OPS) + 1, 5), np.int64)
        grown[: len(table)] = table
        for op in OPS:
            if op.backward is not None:
                grown[op.opcode, 3] = getattr(op.backward, "assigns", False)
                grown[op.opcode, 4] = getattr(op.backward, "parallel", False)
        table = _TABLE[0] = grown
    return table


def _tell(what):
    if not _TOLD:
        _TOLD.append(True)
        _LOG.warning(
            "nautograd: compiling %s for its first use (cached on disk afterwards; "
            "`python -m nautograd warmup` compiles everything ahead of time)",
            what,
        )


@contextlib.contextmanager
def compiling(what):
    """Say once on stderr (logging) when compiling ``what`` takes more than 1.5 s, so that a
    first call does not look like a hang."""
    timer = threading.Timer(1.5, _tell, (what,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def load_kernels(opcodes, column):
    """Give every op of ``opcodes`` its compiled entry in ``column`` (0, 1: backward for
    float64, float32; ``LAZY``), compiling or loading from the cache what is missing."""
    from ._jit import BACKWARD_SIGS, LAZY_SIG, entry

    table = kernel_table()
    missing = sorted({int(c) for c in opcodes if table[c, column] == 0})
    if not missing:
        return
    with compiling(f"{len(missing)} kernel(s)"):
        for c in missing:
            if table[c, column]:
                continue  # (another op of the same kernel filled it)
            op = OPS[c - 1]
            fn = op.lazy[1] if column == LAZY else op.backward
            if fn is None:
                raise RuntimeError(f"nautograd: op {op.name} has no compiled kernel to run")
            cf = _ENTRIES.get((fn, column))
            sharing = [o for o in OPS if _kernel_of(o, column) is fn]
            if cf is None:
                sig = LAZY_SIG if column == LAZY else BACKWARD_SIGS[column]
                # (named after the first op declared with the kernel, whichever loads it)
                cf = _ENTRIES[fn, column] = entry(fn, _entry_name(sharing[0], column), sig)
            for other in sharing:
                table[other.opcode, column] = cf.address


def _kernel_of(op, column):
    if column == LAZY:
        return op.lazy[1] if op.lazy is not None else None
    return op.backward


def _entry_name(op, column):
    return f"{('backward64', 'backward32', 'lazy')[column]}_{op.name}"


def entry_names():
    """The names of every kernel's entry points (the first op declared with each kernel
    names it; they name the entries' cache files)."""
    names, seen = set(), set()
    for op in OPS:
        for column in (0, 1, LAZY):
            fn = _kernel_of(op, column)
            if fn is not None and (fn, column) not in seen:
                seen.add((fn, column))
                names.add(_entry_name(op, column))
    return names


def load_all():
    """Compile (or load) every kernel's entries (``warmup``)."""
    table = kernel_table()
    for column in (0, 1):
        load_kernels([op.opcode for op in OPS if op.backward is not None], column)
    load_kernels([op.opcode for op in OPS if op.lazy is not None], LAZY)
    return table
