"""Numba set-up: the cache falls back to a user cache directory when the package is not
writable; cache loads of our own functions skip Numba's registry refresh; products through
scipy's BLAS."""

import os
import subprocess
import sys

import numba
import numpy as np
import pytest

import nautograd as ng
from nautograd import _numba_setup


def test_cache_dir_falls_back_when_package_dir_is_not_writable(monkeypatch, tmp_path):
    here = os.path.dirname(_numba_setup.__file__)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    real = _numba_setup._writable
    monkeypatch.setattr(
        _numba_setup, "_writable", lambda p: False if p.startswith(here) else real(p)
    )
    base = _numba_setup._base()
    assert base == os.path.join(str(tmp_path), "nautograd", "numba")
    assert os.path.isdir(base)


def test_explicit_numba_cache_dir_is_respected(monkeypatch):
    monkeypatch.setattr(numba.config, "CACHE_DIR", "/somewhere/else")
    assert _numba_setup._base() == os.path.join("/somewhere/else", "nautograd")


def test_the_redirect_leaves_other_packages_caches_alone(monkeypatch):
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    with _numba_setup.cache_here():
        assert numba.config.CACHE_DIR == _numba_setup.CACHE_DIR
    assert numba.config.CACHE_DIR == ""


def test_import_in_a_fresh_process_uses_the_cache_and_runs_backward(tmp_path):
    code = (
        "import nautograd as ng; x = ng.tensor([1.0, 2.0], requires_grad=True); "
        "(x * x).sum().backward(); print(x.grad.tolist())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[2.0, 4.0]"


def _run(code):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_warm_cache_loads_the_engine_without_numbas_registry_refresh():
    # Numba refreshes its whole registry (numba.cpython.listobj among ~70 modules, 0.17 s)
    # before every cache load; our loads skip it (_numba_setup.light_cache_loads), and a
    # compile after them still finds the registry (a list in nopython code needs listobj)
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()  # (the child's first backward, in the cache for certain)
    code = (
        "import sys, numba, numpy as np, nautograd as ng; "
        "x = ng.tensor([1.0, 2.0], requires_grad=True); (x * x).sum().backward(); "
        "loaded = 'numba.cpython.listobj' in sys.modules; "
        "f = numba.njit(lambda n: sum([i * i for i in range(n)])); "
        "y = ng.tensor(np.ones((2, 2), np.float32), requires_grad=True); "
        "(y @ y).sum().backward(); "
        "print(loaded, f(4), x.grad.tolist(), y.grad.tolist())"
    )
    assert _run(code) == "False 14 [2.0, 4.0] [[4.0, 4.0], [4.0, 4.0]]"


def test_light_cache_loads_patch_numba_once_and_only_for_nautograd():
    from numba.core import caching

    assert _numba_setup.light_cache_loads() is True
    patched = caching.Cache.load_overload
    assert _numba_setup.light_cache_loads() is True
    assert caching.Cache.load_overload is patched  # (not wrapped twice)

    class Foreign:  # another package's cache: Numba's own load, refresh first
        _py_func = len  # (module "builtins")

    calls = []
    target = type("Target", (), {"refresh": lambda self: calls.append("refresh")})()
    with pytest.raises(AttributeError):  # (Numba's load goes on past its refresh)
        patched(Foreign(), (), target)
    assert calls == ["refresh"]


_MATMUL_CHILD = """
import json, sys
import numpy as np
import nautograd as ng

rng = np.random.default_rng(0)
out = {}
cases = [((64, 300), (300, 40)), ((300, 64), (300, 40)), ((2, 3, 5), (5, 4)), ((7,), (7, 3)),
         ((3, 40, 60), (60, 50))]
for dt in ("float32", "float64"):
    for i, (xs, ys) in enumerate(cases):
        x = ng.tensor(rng.standard_normal(xs).astype(dt), requires_grad=True)
        y = ng.tensor(rng.standard_normal(ys).astype(dt), requires_grad=True)
        if i == 1:
            result = x.T @ y  # a transposed (non-contiguous) operand
        else:
            result = x @ y
        cot = rng.standard_normal(result.shape).astype(dt)
        gx, gy = ng.autograd.grad(result, (x, y), ng.tensor(cot))
        out[f"{dt}{i}"] = [a.tolist() for a in (x, y, cot, result, gx, gy)]
json.dump(out, sys.stdout)
"""


def test_matmul_through_scipys_blas_matches_torch_in_a_new_process():
    # the kernels' products call scipy's BLAS through symbols bound at import (kernels/_jit.py):
    # a new process's cached kernels find them by name
    import json

    import torch

    proc = subprocess.run([sys.executable, "-c", _MATMUL_CHILD], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key, (x, y, cot, result, gx, gy) in out.items():
        dt = torch.float32 if key.startswith("float32") else torch.float64
        tx, ty = (torch.tensor(a, dtype=dt, requires_grad=True) for a in (x, y))
        ref = (tx.T if key.endswith("1") else tx) @ ty
        ref_gx, ref_gy = torch.autograd.grad(ref, (tx, ty), torch.tensor(cot, dtype=dt))
        rtol, atol = (1e-4, 1e-3) if dt == torch.float32 else (1e-12, 1e-10)
        for a, b in ((result, ref), (gx, ref_gx), (gy, ref_gy)):
            np.testing.assert_allclose(np.array(a), b.detach().numpy(), rtol=rtol, atol=atol)


def test_numba_pedantic_ir_warnings_from_nautograd_kernels_are_not_shown():
    # in a new process: pytest installs warning filters of its own around each test
    code = """
import warnings
from numba.core.errors import NumbaIRAssumptionWarning
import nautograd

def emitted(module):
    with warnings.catch_warnings(record=True) as seen:
        warnings.warn_explicit(NumbaIRAssumptionWarning("not in scope"),
                               NumbaIRAssumptionWarning, "kernel.py", 1, module=module)
    return len(seen)

print(emitted("nautograd.kernels._jit"), emitted("someone_elses_module"))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.split() == ["0", "1"], run.stdout + run.stderr
