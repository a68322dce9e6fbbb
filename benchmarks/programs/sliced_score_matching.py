"""Sliced score matching: a score network trained by the variance-reduced SSM objective.

Song, Garg, Shi and Ermon, "Sliced Score Matching: A Scalable Approach to Density and Score
Estimation" (UAI 2019; github.com/ermongroup/sliced_score_matching, GPL-3.0: the computation
of its ``sliced_score_estimation_vr`` loss only, written here): for projections v ~ N(0, I),
loss = mean(v' d(v' s(x))/dx + |s(x)|^2 / 2), the Hessian-vector term from ``autograd.grad``
with ``create_graph=True``. A 2-64-64-2 softplus network on samples of a two-moon-like
mixture, 128 points a step, Adam (lr 1e-3). float32, as the original.
"""

import numpy as np

NAME = "sliced_score_matching"
DTYPE = "float32"
BATCH = 128


def setup(lib):
    nn = lib.nn
    rng = np.random.default_rng(0)
    score = nn.Sequential(nn.Linear(2, 64), nn.Softplus(), nn.Linear(64, 64), nn.Softplus(),
                          nn.Linear(64, 2))  # fmt: skip
    arrays = [
        rng.uniform(-0.7, 0.7, (64, 2)), rng.uniform(-0.7, 0.7, 64),
        rng.uniform(-0.125, 0.125, (64, 64)), rng.uniform(-0.125, 0.125, 64),
        rng.uniform(-0.125, 0.125, (2, 64)), rng.uniform(-0.125, 0.125, 2),
    ]  # fmt: skip
    with lib.no_grad():
        for p, a in zip(score.parameters(), arrays, strict=True):
            p.copy_(lib.tensor(a, dtype=lib.float32))
    opt = lib.optim.Adam(score.parameters(), lr=1e-3)
    return {"score": score, "opt": opt, "rng": np.random.default_rng(1)}


def _samples(rng):
    # two arcs of a circle with noise (the moons of the paper's toy experiments)
    t = rng.uniform(0, np.pi, BATCH)
    side = rng.integers(0, 2, BATCH)
    x = np.stack([np.cos(t) + side, np.sin(t) * (1 - 2 * side) + 0.5 * side], 1)
    return x + 0.1 * rng.standard_normal((BATCH, 2))


def ssm_vr_loss(lib, score, x, v):
    x = x.requires_grad_(True)
    s = score(x)
    loss1 = (s * s).sum(-1) / 2
    (grad,) = lib.autograd.grad((s * v).sum(), x, create_graph=True)
    loss2 = (v * grad).sum(-1)
    return (loss1 + loss2).mean()


def step(lib, state):
    score, opt, rng = state["score"], state["opt"], state["rng"]
    x = lib.tensor(_samples(rng), dtype=lib.float32)
    v = lib.tensor(rng.standard_normal((BATCH, 2)), dtype=lib.float32)
    opt.zero_grad()
    loss = ssm_vr_loss(lib, score, x, v)
    loss.backward()
    opt.step()
    return loss.item()
