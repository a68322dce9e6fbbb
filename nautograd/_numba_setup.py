"""Make Numba's on-disk cache usable before any cached module is imported.

`@njit(cache=True)` resolves its cache locator at decoration time and raises
"no locator available" when neither the package's ``__pycache__`` nor the user cache is
writable (reference/numba-measured.md, 1.3). We therefore pick a writable directory first.
"""

import importlib.machinery
import importlib.util
import os
import sys
import tempfile

import numba


def _writable(path):
    try:
        os.makedirs(path, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, delete=True)
        probe.close()
        return True
    except OSError:
        return False


def configure():
    if os.environ.get("NUMBA_CACHE_DIR") or numba.config.CACHE_DIR:
        return
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    if _writable(here):
        return
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for candidate in (
        os.path.join(base, "nautograd", "numba"),
        os.path.join(tempfile.gettempdir(), f"nautograd-numba-{os.getuid()}"),
    ):
        if _writable(candidate):
            numba.config.CACHE_DIR = candidate
            return


configure()


# Numba imports `scipy.linalg.cython_blas` when it first loads or compiles anything (its
# array-math registry checks that BLAS exists), and that runs scipy.linalg's __init__: 0.2 s
# of a new process's 0.9 s to its first backward (measured: 0.21 s against 0.01 s for loading
# the two extension modules themselves; DESIGN-NOTES "Start-up"). The BLAS/LAPACK modules
# need nothing from that __init__, so they are loaded under their own names, and attached to
# scipy.linalg when a user imports it later.
_SCIPY_LAPACK = ("cython_blas", "cython_lapack")


class _AttachToScipyLinalg:
    """Meta-path finder: once, when scipy.linalg is imported, sets the preloaded modules as
    its attributes (the import system only does that when it loads a submodule itself)."""

    def find_spec(self, name, path=None, target=None):
        if name != "scipy.linalg":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_attach(module):
            exec_module(module)
            for n in _SCIPY_LAPACK:
                setattr(module, n, sys.modules[f"scipy.linalg.{n}"])

        spec.loader.exec_module = exec_and_attach
        return spec


def preload_scipy_lapack():
    """Load scipy's cython_blas/cython_lapack without scipy.linalg's __init__ (falls back to
    Numba's own import, untouched, whenever anything here is not as expected)."""
    if "scipy.linalg" in sys.modules or any(
        f"scipy.linalg.{n}" in sys.modules for n in _SCIPY_LAPACK
    ):
        return False
    try:
        import scipy

        directory = os.path.join(os.path.dirname(scipy.__file__), "linalg")
        paths = []
        for n in _SCIPY_LAPACK:
            found = [
                os.path.join(directory, n + suffix)
                for suffix in importlib.machinery.EXTENSION_SUFFIXES
                if os.path.exists(os.path.join(directory, n + suffix))
            ]
            if not found:
                return False
            paths.append(found[0])
        modules = {}
        for n, p in zip(_SCIPY_LAPACK, paths, strict=True):
            spec = importlib.util.spec_from_file_location(f"scipy.linalg.{n}", p)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            modules[f"scipy.linalg.{n}"] = module
    except Exception:  # noqa: BLE001 -- any surprise: leave the import to Numba
        return False
    sys.meta_path.insert(0, _AttachToScipyLinalg())
    sys.modules.update(modules)
    return True


preload_scipy_lapack()
