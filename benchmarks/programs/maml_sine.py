"""MAML on sine-wave regression, second-order (create_graph through the inner SGD step).

Reproduces the computation of Eric Jang's MAML (github.com/ericjang/maml-jax, Apache-2.0) as
translated to PyTorch in pytorch/pytorch ``functorch/examples/maml_regression/evjang.py``
(BSD-3): a 1-40-40-1 ReLU network given as a parameter list, 4 tasks of K=20 points, one
inner step of SGD (alpha 0.1) with ``create_graph=True``, the mean query loss optimised by
Adam (lr 1e-3). float32, as the original.
"""

import math

import numpy as np

NAME = "maml_sine"
DTYPE = "float32"
TASKS, K, ALPHA = 4, 20, 0.1


def net(lib, x, params):
    F = lib.nn.functional
    x = F.relu(F.linear(x, params[0], params[1]))
    x = F.relu(F.linear(x, params[2], params[3]))
    return F.linear(x, params[4], params[5])


def setup(lib):
    rng = np.random.default_rng(0)
    b = 1.0 / math.sqrt(40)
    arrays = [
        rng.uniform(-1.0, 1.0, (40, 1)),
        np.zeros(40),
        rng.uniform(-b, b, (40, 40)),
        np.zeros(40),
        rng.uniform(-b, b, (1, 40)),
        np.zeros(1),
    ]
    params = [lib.tensor(a, dtype=lib.float32, requires_grad=True) for a in arrays]
    opt = lib.optim.Adam(params, lr=1e-3)
    return {"params": params, "opt": opt, "rng": np.random.default_rng(1)}


def _tasks(lib, rng):
    amp = rng.uniform(0.1, 0.5, TASKS)
    phase = rng.uniform(0.0, np.pi, TASKS)

    def batch():
        x = rng.uniform(-5.0, 5.0, (TASKS, K, 1))
        y = amp[:, None, None] * np.sin(x + phase[:, None, None])
        return lib.tensor(x, dtype=lib.float32), lib.tensor(y, dtype=lib.float32)

    return (*batch(), *batch())


def step(lib, state):
    F = lib.nn.functional
    params, opt = state["params"], state["opt"]
    opt.zero_grad()
    x1, y1, x2, y2 = _tasks(lib, state["rng"])
    losses = []
    for i in range(TASKS):
        loss = F.mse_loss(net(lib, x1[i], params), y1[i])
        grads = lib.autograd.grad(loss, params, create_graph=True)
        fast = [p - ALPHA * g for p, g in zip(params, grads, strict=True)]
        losses.append(F.mse_loss(net(lib, x2[i], fast), y2[i]))
    loss2 = sum(losses) / len(losses)
    loss2.backward()
    opt.step()
    return loss2.item()
