"""The random number generator behind rand/randn/randint and dropout (seeded by manual_seed)."""

import contextlib
import threading

import numpy as np

_state = {"rng": np.random.default_rng()}


class _Refusal(threading.local):
    error = None  # set while random ops must raise on this thread (func.vmap): makes it


_refusal = _Refusal()


def generator():
    error = _refusal.error
    if error is not None:
        raise error()
    return _state["rng"]


def numpy_generator(g):
    """The numpy generator behind a ``generator=`` argument: nautograd's own for None, a
    ``Generator``'s, or a numpy ``Generator`` as it is."""
    if g is None:
        return generator()
    if isinstance(g, Generator):
        return g._rng
    if isinstance(g, np.random.Generator):
        return g
    raise TypeError(f"generator must be a nautograd.Generator, not {type(g).__name__}")


class Generator:
    """A random number generator of its own (torch.Generator), for ``generator=`` arguments:
    its draws do not move the global one's (``manual_seed``). CPU only."""

    def __init__(self, device="cpu"):
        from ._device import device as _device

        self.device = _device(device)
        if self.device.type != "cpu":
            raise RuntimeError(f"Device type {self.device.type.upper()} is not supported.")
        self._seed = int(np.random.SeedSequence().entropy) % (1 << 63)
        self._rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed):
        """Seed this generator; returns it (as torch's)."""
        self._seed = int(seed) % (1 << 64)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self):
        """Seed from fresh entropy; returns the seed."""
        self.manual_seed(int(np.random.SeedSequence().entropy) % (1 << 63))
        return self._seed

    def initial_seed(self):
        """The seed this generator was last seeded with."""
        return self._seed

    def get_state(self):
        """The generator's state (pass it to ``set_state`` to replay its draws)."""
        return dict(self._rng.bit_generator.state)

    def set_state(self, new_state):
        """Restore a state from ``get_state``; returns the generator."""
        self._rng.bit_generator.state = new_state
        return self


def manual_seed(seed):
    """Seed nautograd's random number generator (rand, randn, randint, dropout)."""
    _state["rng"] = np.random.default_rng(int(seed))
    return _state["rng"]


@contextlib.contextmanager
def refused(error):
    """Random ops on this thread raise ``error()`` inside the block."""
    before = _refusal.error
    _refusal.error = error
    try:
        yield
    finally:
        _refusal.error = before


def refusal():
    """The exception factory random ops raise with on this thread, or None."""
    return _refusal.error


def get_state():
    return _state["rng"].bit_generator.state


def set_state(state):
    _state["rng"].bit_generator.state = state
