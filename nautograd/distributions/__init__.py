"""torch.distributions: probability distributions with reparameterized samples and log-densities
written in nautograd's ops, so that gradients flow to their parameters."""

from .constraints import Constraint
from .distribution import Distribution
from .distributions import (
    Bernoulli,
    Categorical,
    Independent,
    MultivariateNormal,
    Normal,
    Uniform,
)
from .kl import kl_divergence, register_kl

__all__ = [
    "Bernoulli",
    "Categorical",
    "Constraint",
    "Distribution",
    "Independent",
    "MultivariateNormal",
    "Normal",
    "Uniform",
    "kl_divergence",
    "register_kl",
]
