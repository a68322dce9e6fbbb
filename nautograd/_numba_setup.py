"""Make Numba's on-disk cache usable before any cached module is imported.

`@njit(cache=True)` resolves its cache locator at decoration time and raises
"no locator available" when neither the package's ``__pycache__`` nor the user cache is
writable (reference/numba-measured.md, 1.3). We therefore pick a writable directory first.
"""

import os
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
