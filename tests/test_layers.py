"""The layers of docs/architecture.md hold: import-linter's contracts (pyproject.toml)."""

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter not installed")
def test_import_contracts_are_kept():
    out = subprocess.run(
        ["lint-imports"], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "broken" in out.stdout and " 0 broken" in out.stdout


def _sources(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path, "rb") as fh:
                    out[path] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_the_package_imports_and_runs_without_writing_its_source_files(tmp_path):
    # a fresh copy of the package imports and runs a backward: no source file is rewritten
    # or added at import (the compiled code's cache goes to __pycache__ or the user's cache)
    pkg = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "nautograd"), pkg / "nautograd",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    before = _sources(pkg)
    code = (
        "import nautograd as ng; x = ng.tensor([1.0, 2.0], requires_grad=True); "
        "(x * x).sum().backward(); print(x.grad.tolist())"
    )
    env = dict(os.environ, PYTHONPATH=str(pkg), PYTHONDONTWRITEBYTECODE="1")
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "cache")
    code += "; print(ng.__file__)"
    # (from the copy's folder: ``-c`` puts the working directory first on sys.path)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(pkg),
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    grads, path = out.stdout.strip().splitlines()[-2:]
    assert grads == "[2.0, 4.0]"
    assert path == str(pkg / "nautograd" / "__init__.py")
    assert _sources(pkg) == before
    assert (tmp_path / "cache" / "nautograd").is_dir()
