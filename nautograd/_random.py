"""The random number generator behind rand/randn/randint and dropout (seeded by manual_seed)."""

import contextlib
import threading

import numpy as np

_state = {"rng": np.random.default_rng()}
# a message set while random ops must raise on this thread (func.vmap's randomness="error")
_refusal = threading.local()


def generator():
    message = getattr(_refusal, "message", None)
    if message is not None:
        raise RuntimeError(message)
    return _state["rng"]


def manual_seed(seed):
    """Seed nautograd's random number generator (rand, randn, randint, dropout)."""
    _state["rng"] = np.random.default_rng(int(seed))
    return _state["rng"]


@contextlib.contextmanager
def refused(message):
    """Random ops on this thread raise RuntimeError(message) inside the block."""
    before = getattr(_refusal, "message", None)
    _refusal.message = message
    try:
        yield
    finally:
        _refusal.message = before


def get_state():
    return _state["rng"].bit_generator.state


def set_state(state):
    _state["rng"].bit_generator.state = state
