"""The generated dispatch in graph/scheduler.py is fresh (Numba keys its cache on that file)."""

import importlib
import subprocess
import sys

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


_CACHED_MODULE = """
import numba

@numba.njit(cache=True)
def twice(x):
    return 2 * x
"""

_CALL = (
    "import sys; sys.path.insert(0, {d!r}); import cached_mod as m; m.twice(2); "
    "print(len(m.twice.stats.cache_hits))"
)


def test_a_kernel_source_change_recompiles_the_kernel_modules_cached_functions(tmp_path):
    # they call compiled code of other files (kernels/_gemm.py), which Numba's cache does not
    # track: ensure_fresh flushes them when it rewrites the dispatch
    (tmp_path / "cached_mod.py").write_text(_CACHED_MODULE)
    run = [sys.executable, "-c", _CALL.format(d=str(tmp_path))]
    subprocess.run(run, check=True, capture_output=True)  # compiles and saves
    hits = subprocess.run(run, check=True, capture_output=True, text=True).stdout.split()
    assert hits == ["1"]  # served from the cache
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("cached_mod")
        assert _codegen.flush_cached([module]) == 1
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("cached_mod", None)
    hits = subprocess.run(run, check=True, capture_output=True, text=True).stdout.split()
    assert hits == ["0"]  # compiled again
