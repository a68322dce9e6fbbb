"""A custom autograd Function: a fixed-point layer with an implicit backward.

    python examples/custom_function.py

The layer returns z* solving z = tanh(W z + x). Its forward iterates to convergence without
recording anything (no graph of hundreds of steps); its backward uses the implicit function
theorem instead of unrolling: with D = diag(1 - z*^2) and J = D W, the vector-Jacobian
product of a cotangent g is  v = D u  where  (I - J)^T u = g,  and then
grad_W = v z*^T,  grad_x = v.

The script checks that gradient against autograd through the unrolled iteration, then
trains W so that the layer's fixed points for a few inputs match a hidden matrix's.
"""

import numpy as np

import nautograd as ng


class FixedPoint(ng.autograd.Function):
    """z* = tanh(W z* + x), differentiated implicitly."""

    @staticmethod
    def forward(ctx, W, x, tol=1e-12, max_iter=500):
        z = ng.zeros_like(x)
        for _ in range(max_iter):
            z_next = ng.tanh(W @ z + x)
            done = float((z_next - z).abs().max()) < tol
            z = z_next
            if done:
                break
        ctx.save_for_backward(W, z)
        return z

    @staticmethod
    def backward(ctx, grad):
        W, z = ctx.saved_tensors
        d = 1 - z * z  # tanh' at the fixed point
        eye = ng.eye(len(z), dtype=z.dtype)
        u = ng.linalg.solve((eye - d.unsqueeze(1) * W).T, grad)
        v = d * u
        return ng.outer(v, z), v, None, None


def unrolled(W, x, steps=200):
    """The same fixed point, differentiated by recording every iteration."""
    z = ng.zeros_like(x)
    for _ in range(steps):
        z = ng.tanh(W @ z + x)
    return z


def check_gradient(n=6, seed=0):
    """Largest difference between the implicit and the unrolled gradients."""
    rng = np.random.default_rng(seed)
    W0 = 0.4 * rng.standard_normal((n, n)) / np.sqrt(n)  # a contraction: the iteration converges
    x0 = rng.standard_normal(n)
    g = rng.standard_normal(n)
    grads = []
    for layer in (FixedPoint.apply, unrolled):
        W = ng.tensor(W0, requires_grad=True)
        x = ng.tensor(x0, requires_grad=True)
        z = layer(W, x)
        z.backward(ng.tensor(g))
        grads.append((W.grad.numpy(), x.grad.numpy()))
    (gW, gx), (uW, ux) = grads
    return max(np.abs(gW - uW).max(), np.abs(gx - ux).max())


def train(steps=150, lr=0.1, n=6, samples=8, seed=1, verbose=True):
    """Fit W so that the layer's fixed points for a few inputs match those of a hidden
    "teacher" matrix. Returns (first loss, last loss)."""
    rng = np.random.default_rng(seed)
    xs = ng.tensor(rng.standard_normal((samples, n)))
    teacher = ng.tensor(0.5 * rng.standard_normal((n, n)) / np.sqrt(n))
    targets = [FixedPoint.apply(teacher, xs[i]) for i in range(samples)]
    W = ng.zeros((n, n), requires_grad=True)
    losses = []
    for step in range(steps):
        loss = sum(((FixedPoint.apply(W, xs[i]) - targets[i]) ** 2).sum() for i in range(samples))
        loss.backward()
        with ng.no_grad():
            W -= lr * W.grad
        W.grad = None
        losses.append(loss.item())
        if verbose and step % 30 == 0:
            print(f"step {step:4d}  loss {loss.item():.6f}")
    return losses[0], losses[-1]


if __name__ == "__main__":
    print(f"implicit vs unrolled gradient: max difference {check_gradient():.2e}")
    first, last = train()
    print(f"loss {first:.4f} -> {last:.4f}")
