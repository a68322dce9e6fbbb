"""A Hamiltonian neural network on the ideal mass-spring system (second order).

Reproduces the computation of Greydanus, Dzamba and Yosinski, "Hamiltonian Neural Networks"
(NeurIPS 2019; github.com/greydanus/hamiltonian-nn, Apache-2.0): an MLP H(q, p) with tanh
layers 2-200-200-1, the vector field (dH/dp, -dH/dq) from ``autograd.grad`` with
``create_graph=True``, trained by Adam (lr 1e-3) to match the true time derivatives of
noisy spring trajectories. A step is one training step on a batch of 256 states plus an
RK4 rollout of 10 steps of the learned field from one state (no graph), as the original's
evaluation integrates it. float32, as the original.
"""

import numpy as np

from . import linear_init, params_from

NAME = "hnn_spring"
DTYPE = "float32"
SIZES = (2, 200, 200, 1)


def setup(lib):
    nn = lib.nn
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(2, 200), nn.Tanh(), nn.Linear(200, 200), nn.Tanh(),
                          nn.Linear(200, 1))  # fmt: skip
    params_from(lib, model, linear_init(rng, SIZES, np.float32))
    # spring: H = (q^2 + p^2) / 2, so dq/dt = p, dp/dt = -q; states on circles of radius 0.1-1
    r = rng.uniform(0.1, 1.0, 2048)
    phi = rng.uniform(0, 2 * np.pi, 2048)
    x = np.stack([r * np.cos(phi), r * np.sin(phi)], 1) + rng.normal(0, 0.01, (2048, 2))
    dx = np.stack([x[:, 1], -x[:, 0]], 1)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    as32 = lambda a: lib.tensor(a, dtype=lib.float32)  # noqa: E731
    return {"model": model, "opt": opt, "x": as32(x), "dx": as32(dx), "i": 0}


def field(lib, model, x, create_graph):
    x = x.detach().requires_grad_(True)
    H = model(x)
    dH = lib.autograd.grad(H.sum(), x, create_graph=create_graph)[0]
    return lib.stack([dH[:, 1], -dH[:, 0]], dim=1)


def rk4(lib, model, x, h, n):
    for _ in range(n):
        k1 = field(lib, model, x, False)
        k2 = field(lib, model, x + h / 2 * k1, False)
        k3 = field(lib, model, x + h / 2 * k2, False)
        k4 = field(lib, model, x + h * k3, False)
        x = (x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)).detach()
    return x


def step(lib, state):
    model, opt = state["model"], state["opt"]
    i = state["i"]
    state["i"] = (i + 256) % 2048
    x, dx = state["x"][i : i + 256], state["dx"][i : i + 256]
    opt.zero_grad()
    loss = ((field(lib, model, x, True) - dx) ** 2).mean()
    loss.backward()
    opt.step()
    end = rk4(lib, model, state["x"][:1], 0.1, 10)
    return loss.item() + 1e-3 * float(end.abs().sum())
