"""A physics-informed neural network for the 2-D Poisson equation (second order).

The PINN of Raissi, Perdikaris and Karniadakis (J. Comput. Phys. 2019; the authors' code is
github.com/maziarraissi/PINNs, MIT) in the form its PyTorch ports use: an ``nn.Sequential``
tanh network u(x, y), the residual u_xx + u_yy + f from two nested ``autograd.grad`` calls
with ``create_graph=True`` and ``grad_outputs=ones_like``, a boundary loss, Adam. Written here
for -Laplace(u) = 2 pi^2 sin(pi x) sin(pi y) on the unit square, u = 0 on its boundary;
256 collocation and 128 boundary points, layers 2-32-32-32-1. float32, as those ports.
"""

import math

import numpy as np

from . import linear_init, params_from

NAME = "pinn_poisson"
DTYPE = "float32"
SIZES = (2, 32, 32, 32, 1)


def setup(lib):
    nn = lib.nn
    rng = np.random.default_rng(0)
    layers = []
    for i in range(len(SIZES) - 1):
        layers.append(nn.Linear(SIZES[i], SIZES[i + 1]))
        if i < len(SIZES) - 2:
            layers.append(nn.Tanh())
    model = nn.Sequential(*layers)
    params_from(lib, model, linear_init(rng, SIZES, np.float32))
    xy = rng.uniform(0, 1, (256, 2))
    t = rng.uniform(0, 1, 32)
    edge = np.concatenate(
        [np.stack([t, 0 * t], 1), np.stack([t, 0 * t + 1], 1),
         np.stack([0 * t, t], 1), np.stack([0 * t + 1, t], 1)]
    )  # fmt: skip
    f = 2 * math.pi**2 * np.sin(math.pi * xy[:, :1]) * np.sin(math.pi * xy[:, 1:])
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    as32 = lambda a: lib.tensor(a, dtype=lib.float32)  # noqa: E731
    return {"model": model, "opt": opt, "xy": as32(xy), "edge": as32(edge), "f": as32(f)}


def residual(lib, model, xy, f):
    x = xy[:, 0:1].clone().requires_grad_(True)
    y = xy[:, 1:2].clone().requires_grad_(True)
    u = model(lib.cat([x, y], dim=1))
    ones = lib.ones_like(u)
    u_x, u_y = lib.autograd.grad(u, (x, y), grad_outputs=ones, create_graph=True)
    u_xx = lib.autograd.grad(u_x, x, grad_outputs=lib.ones_like(u_x), create_graph=True)[0]
    u_yy = lib.autograd.grad(u_y, y, grad_outputs=lib.ones_like(u_y), create_graph=True)[0]
    return u_xx + u_yy + f


def step(lib, state):
    model, opt = state["model"], state["opt"]
    opt.zero_grad()
    r = residual(lib, model, state["xy"], state["f"])
    loss = (r**2).mean() + (model(state["edge"]) ** 2).mean()
    loss.backward()
    opt.step()
    return loss.item()
