"""A small MLP classifier on a synthetic two-spirals dataset (float32, SGD with momentum).

python examples/mlp_synthetic.py
"""

import numpy as np

import nautograd as ng

F = ng.nn.functional


def spirals(n=400, noise=0.1, seed=0):
    """Two interleaved spirals in the plane: (points float32 (2n, 2), one-hot labels (2n, 2))."""
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0, 1, n)) * 3 * np.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], 1) / (3 * np.pi)
    x = np.concatenate([arm, -arm]) + noise * rng.standard_normal((2 * n, 2))
    labels = np.concatenate([np.zeros(n, int), np.ones(n, int)])
    onehot = np.eye(2)[labels]
    return ng.tensor(x.astype(np.float32)), ng.tensor(onehot.astype(np.float32)), labels


def init(sizes=(2, 64, 64, 2), seed=1):
    rng = np.random.default_rng(seed)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        w = (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        params += [
            ng.tensor(w, requires_grad=True),
            ng.zeros(b, dtype=ng.float32, requires_grad=True),
        ]
    return params


def forward(params, x):
    h = x
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        if i + 2 < len(params):
            h = F.tanh(h)
    return h


def train(steps=400, lr=0.05, momentum=0.9, seed=0, verbose=True):
    """Returns (first loss, last loss, training accuracy)."""
    x, onehot, labels = spirals(seed=seed)
    params = init(seed=seed + 1)
    velocity = [ng.zeros_like(p) for p in params]
    losses = []
    for step in range(steps):
        loss = -(onehot * F.log_softmax(forward(params, x), 1)).sum(1).mean()
        loss.backward()
        with ng.no_grad():
            for p, v in zip(params, velocity, strict=True):
                v.mul_(momentum).add_(p.grad)
                p -= lr * v
                p.grad = None
        losses.append(loss.item())
        if verbose and step % 50 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    with ng.no_grad():
        predicted = forward(params, x).numpy().argmax(1)
    accuracy = float((predicted == labels).mean())
    if verbose:
        print(f"final loss {losses[-1]:.4f}, training accuracy {accuracy:.3f}")
    return losses[0], losses[-1], accuracy


if __name__ == "__main__":
    train()
