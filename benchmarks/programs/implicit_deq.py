"""A deep equilibrium (implicit) layer trained with implicit differentiation.

The fixed-point layer of Kolter, Duvenaud and Johnson's "Deep Implicit Layers" tutorial
(NeurIPS 2020, implicit-layers-tutorial.org, chapters 1 and 4: the computation only, written
here): z* = tanh(W z* + x) found by forward iteration without a graph, one more application
with a graph, and a tensor hook that solves the backward fixed point
g = J' g + grad by iterating ``autograd.grad(f0, z0, g, retain_graph=True)``. A classifier
Linear(20, 32) -> DEQ(32) -> Linear(32, 4) with cross-entropy on 64 synthetic points, Adam
(lr 1e-3). float32, as the original.
"""

import numpy as np

NAME = "implicit_deq"
DTYPE = "float32"
ITERS, TOL = 30, 1e-4


def forward_iteration(f, x0, max_iter=ITERS, tol=TOL):
    """The tutorial's solver: iterate f from x0 until the relative change is below tol."""
    f0 = f(x0)
    res = []
    for _ in range(max_iter):
        x = f0
        f0 = f(x)
        res.append((f0 - x).norm().item() / (1e-5 + f0.norm().item()))
        if res[-1] < tol:
            break
    return f0, res


def deq_layer(lib, linear, x):
    def f(z, x):
        return lib.tanh(linear(z) + x)

    with lib.no_grad():
        z, _ = forward_iteration(lambda z: f(z, x), lib.zeros_like(x))
    z = f(z, x)
    # the backward fixed point through a hook on z, with one recorded application f0
    z0 = z.clone().detach().requires_grad_()
    f0 = f(z0, x)

    def backward_hook(grad):
        g, _ = forward_iteration(
            lambda y: lib.autograd.grad(f0, z0, y, retain_graph=True)[0] + grad, grad
        )
        return g

    z.register_hook(backward_hook)
    return z


def setup(lib):
    nn = lib.nn
    rng = np.random.default_rng(0)
    layers = [nn.Linear(20, 32), nn.Linear(32, 32, bias=False), nn.Linear(32, 4)]
    arrays = [
        [rng.uniform(-0.22, 0.22, (32, 20)), rng.uniform(-0.22, 0.22, 32)],
        [rng.normal(0, 0.3 / np.sqrt(32), (32, 32))],  # (a contraction: the fixed point exists)
        [rng.uniform(-0.17, 0.17, (4, 32)), rng.uniform(-0.17, 0.17, 4)],
    ]
    with lib.no_grad():
        for layer, values in zip(layers, arrays, strict=True):
            for p, a in zip(layer.parameters(), values, strict=True):
                p.copy_(lib.tensor(a, dtype=lib.float32))
    params = [p for layer in layers for p in layer.parameters()]
    centers = rng.standard_normal((4, 20))
    return {"layers": layers, "opt": lib.optim.Adam(params, lr=1e-3), "centers": centers,
            "rng": np.random.default_rng(1)}  # fmt: skip


def step(lib, state):
    F = lib.nn.functional
    embed, implicit, head = state["layers"]
    rng = state["rng"]
    labels = rng.integers(0, 4, 64)
    x = state["centers"][labels] + rng.standard_normal((64, 20))
    x = lib.tensor(x, dtype=lib.float32)
    opt = state["opt"]
    opt.zero_grad()
    logits = head(deq_layer(lib, implicit, embed(x)))
    loss = F.cross_entropy(logits, lib.tensor(labels))
    loss.backward()
    opt.step()
    return loss.item()
