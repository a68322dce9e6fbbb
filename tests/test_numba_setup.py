"""The Numba cache falls back to a user cache directory when the package is not writable."""

import os
import subprocess
import sys

import numba

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
