"""Where nautograd's compiled code is cached, and the decorator that caches it there.

Numba validates a cached function against its own source file only: an edit to a callee in
another file (a kernel helper, a kernel another file's kernel calls) would be served stale
(a documented limit of Numba's cache). nautograd's compiled functions are therefore cached in a
directory named after a hash of every file they are compiled from (``kernels/``, ``graph/``,
``_threads.py``): an edit anywhere there starts a new directory, and each function compiles
again when it is next used (kernels are compiled one by one, on demand: kernels/registry.py).
Nothing in the package is rewritten, so it works from a read-only installation: the cache
then goes to the user's cache directory.

``cached(**options)`` is ``numba.njit(cache=True, **options)`` with that directory; Numba
resolves a cache's directory when the function is decorated, so the decorator sets
``numba.config.CACHE_DIR`` for that moment only (other packages' caches are untouched).
"""

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import threading
import warnings

import numba
from numba.core.errors import NumbaIRAssumptionWarning

# Numba's "internal pedantic check" warns while it compiles kernels whose derivative
# closures it inlines; the compiled code is right (the op-table tests check every kernel),
# so the warning says nothing to a user. Silenced for nautograd's modules only.
warnings.filterwarnings("ignore", category=NumbaIRAssumptionWarning, module=r"nautograd\.")


def _writable(path):
    try:
        os.makedirs(path, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, delete=True)
        probe.close()
        return True
    except OSError:
        return False


PACKAGE = os.path.dirname(os.path.abspath(__file__))


# a file with compiled code: it imports Numba or declares kernels or cached functions
_COMPILED = re.compile(r"^(import numba|from numba|@kernel|@cached|@numba)", re.MULTILINE)


def compiled_sources():
    """The files nautograd's compiled functions are compiled from: those of ``kernels/`` and
    ``graph/`` with compiled code (pure-Python files such as the op registry are not: editing
    them recompiles nothing), and ``_threads.py``, whose thresholds compiled code reads."""
    files = [os.path.join(PACKAGE, "_threads.py")]
    for sub in ("kernels", "graph"):
        d = os.path.join(PACKAGE, sub)
        for f in sorted(os.listdir(d)):
            if f.endswith(".py"):
                with open(os.path.join(d, f)) as fh:
                    if _COMPILED.search(fh.read()):
                        files.append(os.path.join(d, f))
    return files


def source_hash():
    """A hash of the compiled sources and of the Numba and llvmlite versions compiling them
    (Numba's own index does not record llvmlite's)."""
    import llvmlite

    h = hashlib.sha256(f"{numba.__version__} {llvmlite.__version__}".encode())
    for path in compiled_sources():
        with open(path, "rb") as fh:
            h.update(os.path.relpath(path, PACKAGE).encode() + b"\0" + fh.read())
    return h.hexdigest()[:16]


def _base():
    """The folder the cache directories live in: under ``NUMBA_CACHE_DIR`` when the user set
    one, else the package's ``__pycache__``, else the user's cache directory."""
    if numba.config.CACHE_DIR:
        return os.path.join(numba.config.CACHE_DIR, "nautograd")
    here = os.path.join(PACKAGE, "__pycache__", "numba")
    if _writable(here):
        return here
    user = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for candidate in (
        os.path.join(user, "nautograd", "numba"),
        os.path.join(tempfile.gettempdir(), f"nautograd-numba-{os.getuid()}"),
    ):
        if _writable(candidate):
            return candidate
    raise RuntimeError(
        "nautograd: no writable directory for Numba's cache; set NUMBA_CACHE_DIR to one"
    )


def _configure():
    base = _base()
    path = os.path.join(base, source_hash())
    if not os.path.isdir(path):
        os.makedirs(path, exist_ok=True)
        # the caches of earlier sources are never loaded again
        for name in os.listdir(base):
            if name != os.path.basename(path):
                shutil.rmtree(os.path.join(base, name), ignore_errors=True)
    return path


CACHE_DIR = _configure()
_REDIRECT = threading.Lock()


@contextlib.contextmanager
def cache_here():
    """Functions decorated (or ``cfunc``s created) inside cache into ``CACHE_DIR``."""
    with _REDIRECT:
        previous = numba.config.CACHE_DIR
        numba.config.CACHE_DIR = CACHE_DIR
        try:
            yield
        finally:
            numba.config.CACHE_DIR = previous


def cached(**options):
    """``numba.njit(cache=True, **options)``, cached in ``CACHE_DIR``."""

    def decorate(fn):
        with cache_here():
            return numba.njit(cache=True, **options)(fn)

    return decorate


# Numba's Cache.load_overload refreshes the target context before it loads a cached function:
# Numba's whole registry of implementations (~70 modules imported and installed, its typing
# tables refreshed), which only compiling needs. Loading needs the runtime (NRT) initialised:
# the loaded object code calls its allocator. So our own functions' cache loads initialise
# that alone, and a compile still refreshes (numba.core.compiler refreshes both contexts
# before it types anything): 0.17 s less of a new process's ~0.8 s to its first backward
# (measured on the development VM).


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
