"""The random number generator behind rand/randn/randint and dropout (seeded by manual_seed)."""

import numpy as np

_state = {"rng": np.random.default_rng()}


def generator():
    return _state["rng"]


def manual_seed(seed):
    """Seed nautograd's random number generator (rand, randn, randint, dropout)."""
    _state["rng"] = np.random.default_rng(int(seed))
    return _state["rng"]
