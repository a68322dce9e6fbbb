"""Numba set-up: the cache falls back to a user cache directory when the package is not
writable; scipy's BLAS is loaded without scipy.linalg's __init__; cache loads of our own
functions skip Numba's registry refresh."""

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
    _numba_setup.configure()
    assert numba.config.CACHE_DIR == os.path.join(str(tmp_path), "nautograd", "numba")
    assert os.path.isdir(numba.config.CACHE_DIR)


def test_explicit_numba_cache_dir_is_respected(monkeypatch):
    monkeypatch.setattr(numba.config, "CACHE_DIR", "/somewhere/else")
    _numba_setup.configure()
    assert numba.config.CACHE_DIR == "/somewhere/else"


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


def test_first_backward_with_blas_does_not_import_scipy_linalg():
    # scipy's BLAS is loaded without scipy.linalg's __init__ (0.2 s of start-up); a matmul's
    # backward calls that BLAS from compiled code.
    code = (
        "import sys, numpy as np, nautograd as ng; "
        "a = ng.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True); "
        "(a @ a.T).sum().backward(); "
        "print('scipy.linalg' in sys.modules, a.grad.tolist())"
    )
    a = np.arange(6.0).reshape(2, 3)
    expected = (np.ones((2, 2)) @ a * 2).tolist()
    assert _run(code) == f"False {expected}"


def test_scipy_linalg_imported_after_nautograd_has_its_blas_modules():
    code = (
        "import sys, numpy as np, nautograd, scipy.linalg; "
        "import scipy.linalg.cython_lapack as lapack; "
        "print(scipy.linalg.cython_blas is sys.modules['scipy.linalg.cython_blas'], "
        "lapack is scipy.linalg.cython_lapack, scipy.linalg.solve(2 * np.eye(2), np.ones(2)))"
    )
    assert _run(code) == "True True [0.5 0.5]"


def test_nautograd_imported_after_scipy_linalg_leaves_it_alone():
    code = (
        "import sys, scipy.linalg, nautograd._numba_setup as s; "
        "print(s.preload_scipy_lapack(), sum(type(f) is s._AttachToScipyLinalg "
        "for f in sys.meta_path))"
    )
    assert _run(code) == "False 0"


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


def test_products_use_the_openblas_numpy_bundles():
    # one BLAS thread pool for forward and backward products (kernels/_jit.py): numpy's when
    # its wheel bundles an OpenBLAS, scipy's (through Numba) otherwise
    from nautograd.kernels import _jit

    assert _jit.GEMM_LIBRARY == ("numpy" if _jit._numpy_cblas() else "scipy")


_MATMUL_CHILD = """
import json, sys
import numpy as np
import nautograd as ng
from nautograd.kernels import _jit

rng = np.random.default_rng(0)
out = {"library": _jit.GEMM_LIBRARY}
cases = [((64, 300), (300, 40)), ((300, 64), (300, 40)), ((2, 3, 5), (5, 4)), ((7,), (7, 3))]
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


@pytest.mark.parametrize("blas", ["numpy", "scipy"])
def test_matmul_matches_torch_through_either_blas(blas):
    # NAUTOGRAD_BLAS=scipy binds the kernels' gemm to the shims over scipy's BLAS (what a
    # numpy without its own OpenBLAS gets); the cached kernels find either by name
    import json

    import torch

    env = dict(os.environ, NAUTOGRAD_BLAS=blas)
    proc = subprocess.run(
        [sys.executable, "-c", _MATMUL_CHILD], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    from nautograd.kernels import _jit

    assert out.pop("library") == ("scipy" if blas == "scipy" else _jit.GEMM_LIBRARY)
    for key, (x, y, cot, result, gx, gy) in out.items():
        dt = torch.float32 if key.startswith("float32") else torch.float64
        tx, ty = (torch.tensor(a, dtype=dt, requires_grad=True) for a in (x, y))
        ref = (tx.T if key.endswith("1") else tx) @ ty
        ref_gx, ref_gy = torch.autograd.grad(ref, (tx, ty), torch.tensor(cot, dtype=dt))
        rtol, atol = (1e-4, 1e-3) if dt == torch.float32 else (1e-12, 1e-10)
        for a, b in ((result, ref), (gx, ref_gx), (gy, ref_gy)):
            np.testing.assert_allclose(np.array(a), b.detach().numpy(), rtol=rtol, atol=atol)
