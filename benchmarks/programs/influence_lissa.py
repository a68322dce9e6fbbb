"""Influence functions: inverse Hessian-vector products by the LiSSA recursion.

Koh and Liang, "Understanding Black-box Predictions via Influence Functions" (ICML 2017;
github.com/kohpangwei/influence-release, MIT), as its PyTorch port computes s_test
(github.com/nimarb/pytorch_influence_functions, MIT: the computation only, written here):
h <- v + (1 - damping) h - H h / scale, where H h is the Hessian-vector product of a
minibatch loss from a gradient with ``create_graph=True`` and a second ``autograd.grad``.
L2-regularised logistic regression with 100 features on 2,000 points, minibatches of 200.
A step is 10 iterations of the recursion. float64.
"""

import numpy as np

NAME = "influence_lissa"
DTYPE = "float64"
DAMPING, SCALE = 0.01, 25.0


def setup(lib):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 100))
    y = (rng.uniform(size=2000) < 0.5).astype(np.float64)
    w = lib.tensor(rng.standard_normal(100) * 0.1, requires_grad=True)
    state = {"X": lib.tensor(X), "y": lib.tensor(y), "w": w, "rng": np.random.default_rng(1)}
    test_loss = loss_fn(lib, w, state["X"][:1], state["y"][:1])
    (v,) = lib.autograd.grad(test_loss, w)
    state["v"] = v
    state["h"] = v.clone()
    return state


def loss_fn(lib, w, X, y):
    F = lib.nn.functional
    return F.binary_cross_entropy_with_logits(X @ w, y) + 0.005 * (w * w).sum()


def hvp(lib, w, X, y, h):
    (g,) = lib.autograd.grad(loss_fn(lib, w, X, y), w, create_graph=True)
    (Hh,) = lib.autograd.grad((g * h).sum(), w)
    return Hh


def step(lib, state):
    w, v, h, rng = state["w"], state["v"], state["h"], state["rng"]
    for _ in range(10):
        idx = rng.integers(0, 2000, 200)
        X, y = state["X"][lib.tensor(idx)], state["y"][lib.tensor(idx)]
        h = v + (1 - DAMPING) * h - hvp(lib, w, X, y, h) / SCALE
    state["h"] = h.detach()
    return (h * v).sum().item()
