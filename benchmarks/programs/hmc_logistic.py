"""Hamiltonian Monte Carlo on a Bayesian logistic regression posterior.

Reproduces the computation of the HMC sampler of hamiltorch (Cobb and Jalaian,
github.com/AdamCobb/hamiltorch, BSD-2-Clause) on its logistic-regression example: the log
posterior's gradient from ``autograd.grad`` at every leapfrog step, 10 leapfrog steps of
size 0.01 per proposal, a Metropolis-Hastings correction. 500 points, 20 features,
a N(0, 1) prior. A step is one proposal. float64.
"""

import numpy as np

NAME = "hmc_logistic"
DTYPE = "float64"
L, EPS = 10, 0.01


def setup(lib):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 20))
    w_true = rng.standard_normal(20)
    y = (rng.uniform(size=500) < 1 / (1 + np.exp(-X @ w_true))).astype(np.float64)
    w = lib.tensor(rng.standard_normal(20) * 0.1)
    return {"X": lib.tensor(X), "y": lib.tensor(y), "w": w, "rng": np.random.default_rng(1)}


def log_prob(lib, w, X, y):
    logits = X @ w
    return (y * logits - lib.nn.functional.softplus(logits)).sum() - 0.5 * (w * w).sum()


def grad_log_prob(lib, w, X, y):
    w = w.detach().requires_grad_(True)
    lp = log_prob(lib, w, X, y)
    (g,) = lib.autograd.grad(lp, w)
    return lp.detach(), g


def step(lib, state):
    X, y, w = state["X"], state["y"], state["w"]
    rng = state["rng"]
    p = lib.tensor(rng.standard_normal(w.shape[0]))
    lp0, g = grad_log_prob(lib, w, X, y)
    h0 = -lp0 + 0.5 * (p * p).sum()
    q = w
    p = p + 0.5 * EPS * g
    for i in range(L):
        q = q + EPS * p
        lp, g = grad_log_prob(lib, q, X, y)
        if i < L - 1:
            p = p + EPS * g
    p = p + 0.5 * EPS * g
    h1 = -lp + 0.5 * (p * p).sum()
    if np.log(rng.uniform()) < (h0 - h1).item():
        state["w"] = q
        return lp.item()
    return lp0.item()
