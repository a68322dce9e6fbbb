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
