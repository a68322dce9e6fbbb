"""Gaussian-process regression: hyperparameters fitted by the log marginal likelihood.

Rasmussen and Williams, "Gaussian Processes for Machine Learning" (2006), Algorithm 2.1,
as exact-GP code fits it (e.g. GPyTorch's ``ExactMarginalLogLikelihood``,
github.com/cornellius-gp/gpytorch, MIT: the computation only, written here): an RBF kernel
with a length scale, a signal and a noise scale (log-parametrised), the Cholesky factor for
the log determinant, a linear solve for the data fit, Adam (lr 0.05). 200 points in 1-D.
A step is one optimiser step. float64.
"""

import math

import numpy as np

NAME = "gp_marginal_likelihood"
DTYPE = "float64"


def setup(lib):
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(-3, 3, 200))
    y = np.sin(2 * x) + 0.3 * x + rng.normal(0, 0.2, 200)
    params = [lib.tensor(v, requires_grad=True) for v in (0.0, 0.0, -1.0)]
    return {"x": lib.tensor(x), "y": lib.tensor(y), "params": params,
            "opt": lib.optim.Adam(params, lr=0.05)}  # fmt: skip


def neg_log_marginal_likelihood(lib, x, y, log_ls, log_sf, log_sn):
    n = x.shape[0]
    d2 = (x.unsqueeze(1) - x.unsqueeze(0)) ** 2
    K = lib.exp(2 * log_sf) * lib.exp(-0.5 * d2 / lib.exp(2 * log_ls))
    K = K + lib.exp(2 * log_sn) * lib.eye(n, dtype=x.dtype)
    L = lib.linalg.cholesky(K)
    alpha = lib.linalg.solve(K, y.unsqueeze(1)).squeeze(1)
    return (
        0.5 * (y * alpha).sum() + lib.log(lib.diagonal(L)).sum() + 0.5 * n * math.log(2 * math.pi)
    )


def step(lib, state):
    opt = state["opt"]
    opt.zero_grad()
    loss = neg_log_marginal_likelihood(lib, state["x"], state["y"], *state["params"])
    loss.backward()
    opt.step()
    return loss.item()
