"""The generated dispatch in graph/scheduler.py is fresh (Numba keys its cache on that file)."""

from nautograd.graph import _codegen
from nautograd.kernels import OPS


def test_scheduler_dispatch_is_fresh():
    assert _codegen.is_fresh(), "run `python -m nautograd.graph._codegen` and commit"


def test_dispatch_covers_every_differentiable_op():
    with open(_codegen.SCHEDULER) as fh:
        text = fh.read()
    for op in OPS:
        line = f"    if op == {op.opcode}:" if op.opcode == 1 else f"    elif op == {op.opcode}:"
        assert (line in text) == (op.backward is not None), op.name
