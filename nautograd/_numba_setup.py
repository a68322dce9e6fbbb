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


# Numba's Cache.load_overload refreshes the target context before it loads a cached function:
# Numba's whole registry of implementations (~70 modules imported and installed, its typing
# tables refreshed), which only compiling needs. Loading needs the runtime (NRT) initialised:
# the loaded object code calls its allocator. So our own functions' cache loads initialise
# that alone, and a compile still refreshes (numba.core.compiler refreshes both contexts
# before it types anything): 0.17 s less of a new process's ~0.8 s to its first backward
# (DESIGN-NOTES "Start-up").


def light_cache_loads():
    """Make the cache loads of nautograd's own compiled functions skip Numba's registry
    refresh (other packages' loads are untouched). False, leaving Numba as it is, when its
    internals are not the ones this was written against."""
    try:
        from numba.core import caching
        from numba.core.runtime import nrt
    except ImportError:
        return False
    cache = caching.Cache
    original = cache.load_overload
    if getattr(original, "_nautograd", False):
        return True
    if not (
        hasattr(cache, "_load_overload")
        and hasattr(cache, "_guard_against_spurious_io_errors")
        and hasattr(getattr(nrt, "rtsys", None), "initialize")
    ):
        return False

    def load_overload(self, sig, target_context):
        module = getattr(getattr(self, "_py_func", None), "__module__", None) or ""
        if not module.startswith("nautograd."):
            return original(self, sig, target_context)
        nrt.rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
        return None  # (the guard swallowed an error, as in Numba's own)

    load_overload._nautograd = True
    cache.load_overload = load_overload
    return True


light_cache_loads()
