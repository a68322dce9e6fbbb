"""Kernels compile on demand into a cache keyed by the compiled sources (nautograd/_numba_setup.py,
kernels/registry.py load_kernels)."""

import json
import os
import subprocess
import sys

import numpy as np

import nautograd as ng
from nautograd import _numba_setup
from nautograd.kernels import OP_BY_NAME, OPS
from nautograd.kernels.registry import LAZY, kernel_table, load_kernels

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(ng.__file__)))


def test_the_cache_key_covers_every_compiled_source():
    files = {os.path.relpath(p, _numba_setup.PACKAGE) for p in _numba_setup.compiled_sources()}
    for f in ("_jit.py", "_vmath.py", "pointwise.py", "elementwise.py", "reduce.py", "nn.py"):
        assert os.path.join("kernels", f) in files
    for f in ("scheduler.py", "deferred.py", "tape.py"):
        assert os.path.join("graph", f) in files
    assert "_threads.py" in files
    # pure-Python files: editing them recompiles nothing
    assert os.path.join("kernels", "registry.py") not in files
    assert os.path.join("kernels", "_shapes.py") not in files


def test_editing_a_compiled_source_changes_the_cache_directory(monkeypatch, tmp_path):
    a = tmp_path / "a.py"
    a.write_text("x = 1\n")
    monkeypatch.setattr(_numba_setup, "compiled_sources", lambda: [str(a)])
    monkeypatch.setattr(_numba_setup, "PACKAGE", str(tmp_path))
    before = _numba_setup.source_hash()
    a.write_text("x = 2\n")
    assert _numba_setup.source_hash() != before


def test_the_kernel_table_has_an_entry_for_every_loaded_kernel():
    x = ng.tensor(np.linspace(0.1, 1.0, 5), requires_grad=True)
    (x.exp() * x).sum().backward()
    table = kernel_table()
    for name in ("exp", "mul", "sum"):
        assert table[OP_BY_NAME[name].opcode, 0] != 0, name
    # every op sharing a kernel shares its entry
    exp, log = OP_BY_NAME["exp"], OP_BY_NAME["log"]
    if exp.backward is log.backward:
        load_kernels([exp.opcode], 0)
        assert table[log.opcode, 0] == table[exp.opcode, 0]


def test_lazy_entries_load_for_deferred_ops():
    load_kernels([OP_BY_NAME["add"].opcode], LAZY)
    assert kernel_table()[OP_BY_NAME["add"].opcode, LAZY] != 0
    assert len(kernel_table()) == len(OPS) + 1


_FIRST_BACKWARD = """
import json, os, sys, time
import nautograd as ng
from nautograd import _numba_setup
x = ng.tensor([1.0, -2.0, 3.0], requires_grad=True)
(-x).sum().backward()
names = sorted(f for _, _, fs in os.walk(_numba_setup.CACHE_DIR) for f in fs if f.endswith(".nbi"))
print(json.dumps({"grad": x.grad.tolist(), "dir": _numba_setup.CACHE_DIR, "names": names}))
"""


def test_a_first_backward_compiles_only_the_kernels_its_graph_uses(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    stale = tmp_path / "nautograd" / "0000000000000000"
    stale.mkdir(parents=True)
    run = [sys.executable, "-c", _FIRST_BACKWARD]
    out = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["grad"] == [-1.0, -1.0, -1.0]
    assert got["dir"].startswith(str(tmp_path / "nautograd"))
    assert not stale.exists()  # the caches of other sources are removed
    entries = [n for n in got["names"] if ".backward" in n or ".lazy_" in n]
    assert entries and all(("_neg" in n or "_sum" in n) for n in entries), entries
    # a second process loads everything from the cache: no new files
    again = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["names"] == got["names"]


def test_every_compiled_kernel_has_a_name_of_its_own():
    # Numba names a compiled function's symbol after its qualified name and a per-process
    # counter: two kernels made by one factory with the same name, compiled in different
    # processes, could get the same symbol, and a process loading both entries from the
    # cache linked one op's entry to the other's code (softplus's deferred forward computed
    # sqrt in the bounds-checked cache)
    seen = {}
    for op in OPS:
        for kind, fn in (("backward", op.backward), ("lazy", op.lazy and op.lazy[1])):
            if fn is None:
                continue
            name = fn.py_func.__module__ + "." + fn.py_func.__qualname__
            assert seen.setdefault(name, fn) is fn, f"{kind} kernel of {op.name}: {name}"
