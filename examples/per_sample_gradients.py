"""Per-sample gradients and DP-SGD with ``ng.func.vmap(ng.func.grad(loss))``.

    python examples/per_sample_gradients.py

Differentially private SGD (Abadi et al., 2016) needs the gradient of every example's loss
on its own: each is clipped to norm at most C, the clipped gradients are summed, Gaussian
noise of scale sigma * C is added and the sum is divided by the batch size. The per-sample
gradients are ``vmap(grad(loss), in_dims=(None, 0, 0))``, as with ``torch.func``: ``grad``
of one example's loss, mapped over the batch, which runs each op once for the whole batch.
They are checked against one ``backward()`` per example on its own, and against the
Jacobian of the vector of per-example losses (``autograd.functional.jacobian``).
"""

import numpy as np

import nautograd as ng

F = ng.nn.functional


def make_data(n=512, d=10, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = 1.5 * rng.standard_normal((classes, d))
    labels = rng.integers(0, classes, n)
    x = centers[labels] + rng.standard_normal((n, d))
    return ng.tensor(x), ng.tensor(np.eye(classes)[labels]), labels


def init_params(d=10, hidden=16, classes=3, seed=1):
    rng = np.random.default_rng(seed)
    return (
        ng.tensor(rng.standard_normal((d, hidden)) / np.sqrt(d), requires_grad=True),
        ng.zeros(hidden, dtype=ng.float64, requires_grad=True),
        ng.tensor(rng.standard_normal((hidden, classes)) / np.sqrt(hidden), requires_grad=True),
        ng.zeros(classes, dtype=ng.float64, requires_grad=True),
    )


def per_example_losses(params, x, onehot):
    """The cross-entropy of every example: a vector with one entry per row of ``x``."""
    w1, b1, w2, b2 = params
    h = ng.tanh(x @ w1 + b1)
    return -(onehot * F.log_softmax(h @ w2 + b2, dim=1)).sum(1)


def example_loss(params, x, onehot):
    """The cross-entropy of one example (``x`` a row, ``onehot`` its label)."""
    w1, b1, w2, b2 = params
    h = ng.tanh(x @ w1 + b1)
    return -(onehot * F.log_softmax(h @ w2 + b2, dim=0)).sum()


def per_sample_gradients(params, x, onehot):
    """One gradient per example and parameter: a tuple of (batch, *param.shape) tensors."""
    grads = ng.func.vmap(ng.func.grad(example_loss), in_dims=(None, 0, 0))
    return grads(tuple(p.detach() for p in params), x, onehot)


def clip_and_noise(grads, clip, sigma, rng):
    """DP-SGD's gradient: each example's gradient clipped to norm ``clip`` (over all
    parameters together), summed, Gaussian noise of scale ``sigma * clip`` added, / batch."""
    batch = grads[0].shape[0]
    flat = np.concatenate([g.numpy().reshape(batch, -1) for g in grads], axis=1)
    norms = np.linalg.norm(flat, axis=1)
    scale = np.minimum(1.0, clip / np.maximum(norms, 1e-12))
    noisy = []
    for g in grads:
        clipped = (g.numpy() * scale.reshape((batch,) + (1,) * (g.ndim - 1))).sum(0)
        noisy.append((clipped + sigma * clip * rng.standard_normal(clipped.shape)) / batch)
    return noisy, norms


def train(steps=60, batch=64, lr=0.5, clip=1.0, sigma=0.5, seed=0, verbose=True):
    """DP-SGD on a small MLP; returns (first loss, last loss, accuracy, per-step clip rate)."""
    x, onehot, labels = make_data(seed=seed)
    params = init_params()
    rng = np.random.default_rng(seed + 2)
    history, clipped = [], []
    for step in range(steps):
        idx = rng.choice(x.shape[0], batch, replace=False)
        grads = per_sample_gradients(params, x[idx], onehot[idx])
        noisy, norms = clip_and_noise(grads, clip, sigma, rng)
        clipped.append(float((norms > clip).mean()))
        with ng.no_grad():
            for p, g in zip(params, noisy, strict=True):
                p -= lr * ng.tensor(g)
            history.append(per_example_losses(params, x, onehot).mean().item())
        if verbose and (step % 10 == 0 or step == steps - 1):
            print(f"step {step:3d}  loss {history[-1]:.4f}  clipped {clipped[-1]:.0%}")
    with ng.no_grad():
        w1, b1, w2, b2 = params
        predicted = (ng.tanh(x @ w1 + b1) @ w2 + b2).numpy().argmax(1)
    return history[0], history[-1], float((predicted == labels).mean()), clipped


if __name__ == "__main__":
    x, onehot, _ = make_data()
    params = init_params()
    grads = per_sample_gradients(params, x[:8], onehot[:8])
    # the same gradients from one backward per example
    worst = 0.0
    for i in range(8):
        for p in params:
            p.grad = None
        per_example_losses(params, x[i : i + 1], onehot[i : i + 1]).sum().backward()
        worst = max(worst, *(float(np.abs(g[i].numpy() - p.grad.numpy()).max())
                             for g, p in zip(grads, params, strict=True)))  # fmt: skip
    print(f"per-sample gradients vs one backward per example: max difference {worst:.1e}")
    jac = ng.autograd.functional.jacobian(
        lambda *p: per_example_losses(p, x[:8], onehot[:8]), tuple(params)
    )
    worst = max(float(np.abs(g.numpy() - j.numpy()).max()) for g, j in zip(grads, jac, strict=True))
    print(f"per-sample gradients vs the Jacobian of the losses: max difference {worst:.1e}")
    first, last, accuracy, _ = train()
    print(f"DP-SGD: loss {first:.3f} -> {last:.3f}, accuracy {accuracy:.1%}")
