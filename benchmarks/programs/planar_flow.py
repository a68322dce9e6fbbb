"""A normalizing flow with log-det-Jacobians: 16 planar layers fitted by reverse KL.

Rezende and Mohamed, "Variational Inference with Normalizing Flows" (ICML 2015): planar
layers z' = z + u_hat tanh(w.z + b) with the invertibility reparametrisation of u, the
log |det J| = log |1 + u_hat . psi(z)| of each layer, fitted to the unnormalised density
exp(-U1(z)) of the paper's Table 1 by minimising E[log q_K(z_K) + U1(z_K)] with Adam
(lr 1e-3), 512 samples a step (the computation only, written here). float32.
"""

import numpy as np

NAME = "planar_flow"
DTYPE = "float32"
LAYERS = 16


def setup(lib):
    rng = np.random.default_rng(0)
    as32 = lambda a: lib.tensor(a, dtype=lib.float32, requires_grad=True)  # noqa: E731
    params = []
    for _ in range(LAYERS):
        params += [as32(rng.normal(0, 0.1, 2)), as32(rng.normal(0, 0.1, 2)), as32(np.zeros(()))]
    return {"params": params, "opt": lib.optim.Adam(params, lr=1e-3),
            "rng": np.random.default_rng(1)}  # fmt: skip


def potential(lib, z):
    z1, z2 = z[:, 0], z[:, 1]
    norm = lib.sqrt((z**2).sum(1))
    a = lib.exp(-0.5 * ((z1 - 2) / 0.6) ** 2)
    b = lib.exp(-0.5 * ((z1 + 2) / 0.6) ** 2)
    return 0.5 * ((norm - 2) / 0.4) ** 2 - lib.log(a + b + 1e-9) + 0 * z2


def flow(lib, z, params):
    F = lib.nn.functional
    log_det = 0
    for k in range(LAYERS):
        u, w, b = params[3 * k : 3 * k + 3]
        wu = (w * u).sum()
        u_hat = u + (-1 + F.softplus(wu) - wu) * w / (w * w).sum()
        a = lib.tanh(z @ w + b)
        psi = (1 - a**2).unsqueeze(1) * w
        log_det = log_det + lib.log((1 + psi @ u_hat).abs() + 1e-9)
        z = z + a.unsqueeze(1) * u_hat
    return z, log_det


def step(lib, state):
    opt = state["opt"]
    opt.zero_grad()
    z0 = lib.tensor(state["rng"].standard_normal((512, 2)), dtype=lib.float32)
    log_q0 = -0.5 * (z0**2).sum(1) - np.log(2 * np.pi)
    zK, log_det = flow(lib, z0, state["params"])
    loss = (log_q0 - log_det + potential(lib, zK)).mean()
    loss.backward()
    opt.step()
    return loss.item()
