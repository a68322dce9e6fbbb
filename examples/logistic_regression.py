"""Logistic regression by gradient descent, written as a PyTorch user would.

    python examples/logistic_regression.py

Fits weights to a synthetic, linearly separable-ish dataset with the binary cross-entropy
written out from log-sigmoid, and prints the loss and accuracy as they improve.
"""

import numpy as np

import nautograd as ng


def make_data(n=512, d=5, seed=0):
    rng = np.random.default_rng(seed)
    true_w = rng.standard_normal(d)
    x = rng.standard_normal((n, d))
    y = (x @ true_w + 0.3 * rng.standard_normal(n) > 0).astype(np.float64)
    return ng.tensor(x), ng.tensor(y)


def train(steps=200, lr=0.5, seed=0, verbose=True):
    """Returns (first loss, last loss, accuracy)."""
    x, y = make_data(seed=seed)
    w = ng.zeros(x.shape[1], requires_grad=True)
    b = ng.zeros((), requires_grad=True)
    losses = []
    for step in range(steps):
        logits = x @ w + b
        # -[y log s(z) + (1-y) log(1-s(z))] = softplus(z) - y z, the stable form
        loss = (ng.nn.functional.softplus(logits) - y * logits).mean()
        loss.backward()
        with ng.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad = None
        b.grad = None
        losses.append(loss.item())
        if verbose and step % 50 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    with ng.no_grad():
        accuracy = ((x @ w + b > 0).numpy() == (y.numpy() > 0.5)).mean()
    if verbose:
        print(f"final loss {losses[-1]:.4f}, accuracy {accuracy:.3f}")
    return losses[0], losses[-1], float(accuracy)


if __name__ == "__main__":
    train()
