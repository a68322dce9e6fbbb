"""Langevin dynamics sampling with scores from autograd: 1,000 particles on a mixture.

The unadjusted Langevin algorithm x <- x + eps grad log p(x) + sqrt(2 eps) z, with the score
from ``autograd.grad`` of the log density, as score-based sampling code runs it (the
Langevin sampler of Song and Ermon, "Generative Modeling by Estimating Gradients of the
Data Distribution", NeurIPS 2019, github.com/ermongroup/ncsn, GPL-3.0: the computation
only, written here). The target is a mixture of 8 Gaussians on a circle (logsumexp of the
components). A step is 10 Langevin updates. float32.
"""

import numpy as np

NAME = "langevin_mixture"
DTYPE = "float32"
EPS = 1e-2


def setup(lib):
    rng = np.random.default_rng(0)
    angles = np.arange(8) * 2 * np.pi / 8
    mu = np.stack([np.cos(angles), np.sin(angles)], 1) * 4
    x = rng.standard_normal((1000, 2))
    as32 = lambda a: lib.tensor(a, dtype=lib.float32)  # noqa: E731
    return {"mu": as32(mu), "x": as32(x), "rng": np.random.default_rng(1), "as32": as32}


def log_density(lib, x, mu):
    d2 = ((x.unsqueeze(1) - mu.unsqueeze(0)) ** 2).sum(-1)  # (particles, components)
    return lib.logsumexp(-0.5 * d2 / 0.25, dim=1)


def step(lib, state):
    x, mu, rng, as32 = state["x"], state["mu"], state["rng"], state["as32"]
    for _ in range(10):
        x = x.detach().requires_grad_(True)
        (score,) = lib.autograd.grad(log_density(lib, x, mu).sum(), x)
        noise = as32(rng.standard_normal(tuple(x.shape)))
        x = x.detach() + EPS * score + (2 * EPS) ** 0.5 * noise
    state["x"] = x
    return log_density(lib, x, mu).mean().item()
