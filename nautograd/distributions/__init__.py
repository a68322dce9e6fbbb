"""torch.distributions: probability distributions with reparameterized samples and log-densities
written in nautograd's ops, so that gradients flow to their parameters."""

from .constraints import Constraint
from .continuous import Beta, Chi2, Dirichlet, Exponential, Gamma, Laplace, LogNormal, StudentT
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
    "Beta",
    "Categorical",
    "Chi2",
    "Constraint",
    "Dirichlet",
    "Distribution",
    "Exponential",
    "Gamma",
    "Independent",
    "Laplace",
    "LogNormal",
    "MultivariateNormal",
    "Normal",
    "StudentT",
    "Uniform",
    "kl_divergence",
    "register_kl",
]
