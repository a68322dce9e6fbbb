"""Benchmark workloads, each written once against a torch-like module ``lib``.

``lib`` is ``nautograd`` or ``torch``; the same code runs on both so the ratio compares the
engines, not two programs.
"""

import numpy as np


def _F(lib):
    return lib.nn.functional


# ---------------------------------------------------------------------------------------------
# 1. scalar DAG: 100 scalar leaves, then ops cycling softplus(one earlier node), the sum of 4
#    earlier nodes, the product of 2 earlier nodes, and a softmax over 4 earlier nodes
#    (4 outputs); backward from the last node.


def scalar_dag_plan(n_ops=10_000, n_leaves=100, seed=0):
    """The random choices of earlier nodes, fixed so every library runs the same graph."""
    rng = np.random.default_rng(seed)
    plan = []
    count = n_leaves
    for i in range(n_ops):
        kind = i % 4
        k = (1, 4, 2, 4)[kind]
        # earlier nodes drawn from the most recent 200 keeps values in range
        lo = max(0, count - 200)
        plan.append((kind, rng.integers(lo, count, size=k).tolist()))
        count += 4 if kind == 3 else 1
    return plan


def scalar_dag_values(n_leaves=100, seed=1):
    """The leaves' values, shared by every library's version of the workload."""
    return np.random.default_rng(seed).uniform(-1, 1, n_leaves)


def scalar_dag_leaves(lib, n_leaves=100, seed=1):
    vals = scalar_dag_values(n_leaves, seed)
    return [lib.tensor(float(v), dtype=lib.float64, requires_grad=True) for v in vals]


def scalar_dag_forward(lib, leaves, plan):
    F = _F(lib)
    nodes = list(leaves)
    for kind, idx in plan:
        if kind == 0:
            nodes.append(F.softplus(nodes[idx[0]]))
        elif kind == 1:
            a, b, c, d = (nodes[j] for j in idx)
            nodes.append(a + b + c + d)
        elif kind == 2:
            nodes.append(nodes[idx[0]] * nodes[idx[1]])
        else:
            s = lib.softmax(lib.stack([nodes[j] for j in idx]), 0)
            nodes.extend(s.unbind(0))
    return nodes[-1]


# ---------------------------------------------------------------------------------------------
# 2. RNN chain: h = tanh(W @ h + x_t), T steps, hidden H, float64; loss = (h * h).sum()


def rnn_arrays(T=1000, H=32, seed=2):
    """(W (H, H), xs (T, H)) as numpy arrays, shared by every library's version."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((H, H)) / np.sqrt(H), rng.standard_normal((T, H)) * 0.1


def rnn_inputs(lib, T=1000, H=32, seed=2):
    W, xs = rnn_arrays(T, H, seed)
    return lib.tensor(W, requires_grad=True), [lib.tensor(x) for x in xs]


def rnn_loss(lib, W, xs):
    h = lib.zeros(W.shape[0], dtype=lib.float64)
    for x in xs:
        h = lib.tanh(W @ h + x)
    return (h * h).sum()


# ---------------------------------------------------------------------------------------------
# 3. MLP step: batch 128, 784-256-256-10, float32, relu, cross-entropy written as
#    -(onehot * log_softmax(h, 1)).sum(1).mean(), backward, SGD update


def mlp_arrays(batch=128, sizes=(784, 256, 256, 10), seed=3):
    """(params [W, b, ...], x, onehot) as float32 numpy arrays, shared by every library."""
    rng = np.random.default_rng(seed)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        W = rng.standard_normal((a, b)).astype(np.float32) / np.float32(np.sqrt(a))
        params += [W, np.zeros(b, np.float32)]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    labels = rng.integers(0, sizes[-1], batch)
    return params, x, np.eye(sizes[-1], dtype=np.float32)[labels]


def mlp_inputs(lib, batch=128, sizes=(784, 256, 256, 10), seed=3):
    params, x, onehot = mlp_arrays(batch, sizes, seed)
    return [lib.tensor(p, requires_grad=True) for p in params], lib.tensor(x), lib.tensor(onehot)


def mlp_step(lib, params, x, onehot, lr=0.01):
    F = _F(lib)
    h = x
    n = len(params) // 2
    for i in range(n):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n - 1:
            h = F.relu(h)
    loss = -(onehot * F.log_softmax(h, 1)).sum(1).mean()
    loss.backward()
    with lib.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None
    return loss


# ---------------------------------------------------------------------------------------------
# 4. custom Function chain: x <- 0.5 * Softplus.apply(x), n times, with a hand-written backward
#    (a Python node per step: the cost of handing nodes to Python), x of 16 float64; loss =
#    x.sum()


def softplus_function(lib):
    class Softplus(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return _F(lib).softplus(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * lib.sigmoid(x)

    return Softplus


def custom_chain_values(size=16, seed=4):
    return np.random.default_rng(seed).standard_normal(size)


def custom_chain_inputs(lib, size=16, seed=4):
    x = lib.tensor(custom_chain_values(size, seed), requires_grad=True)
    return x, softplus_function(lib)


def custom_chain_loss(x, fn, n=1000):
    for _ in range(n):
        x = fn.apply(x) * 0.5
    return x.sum()


def jax_custom_chain_fn(jax, n=1000):
    jnp = jax.numpy

    @jax.custom_vjp
    def softplus(x):
        return jnp.logaddexp(x, 0.0)

    def forward(x):
        return softplus(x), x

    def backward(x, grad):
        return (grad * jax.nn.sigmoid(x),)

    softplus.defvjp(forward, backward)

    def loss(x):
        for _ in range(n):
            x = softplus(x) * 0.5
        return x.sum()

    return jax.grad(loss)


# ---------------------------------------------------------------------------------------------
# jax: the same three workloads written as a jax user would (jax has no mutable .grad).
# The scalar DAG runs eagerly: jit-compiling a 10,000-op scalar graph takes minutes (8.4 s
# for 1,000 ops with jax 0.10 on a 2-core x86-64 machine), which is the cost nautograd's
# tape avoids. The RNN uses lax.scan and the MLP step is one jitted value_and_grad + update:
# jax at its best.


# ---------------------------------------------------------------------------------------------
# 6. Hessian-vector product (create_graph): a tanh network's loss, its gradient w.r.t. W1
#    with create_graph=True, then the gradient of <gradient, v> (double backward).


def hvp_arrays(batch=256, sizes=(64, 128, 1), seed=5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, sizes[0]))
    w1 = rng.standard_normal(sizes[:2]) / np.sqrt(sizes[0])
    w2 = rng.standard_normal(sizes[1:]) / np.sqrt(sizes[1])
    v = rng.standard_normal(sizes[:2])
    return x, w1, w2, v


def hvp_inputs(lib, batch=256, sizes=(64, 128, 1), seed=5):
    x, w1, w2, v = (lib.tensor(a) for a in hvp_arrays(batch, sizes, seed))
    w1.requires_grad_(True)
    return x, w1, w2, v


def hvp_loss(lib, x, w1, w2):
    h = lib.tanh(lib.tanh(x @ w1) @ w2)
    return (h * h).mean()


def hvp_step(lib, x, w1, w2, v):
    (g,) = lib.autograd.grad(hvp_loss(lib, x, w1, w2), w1, create_graph=True)
    (hv,) = lib.autograd.grad((g * v).sum(), w1)
    return hv


def jax_hvp_fn(jax):
    def loss(w1, w2, x):
        return hvp_loss(jax.numpy, x, w1, w2)

    def hvp(x, w1, w2, v):  # forward-over-reverse, jax's idiom for an HVP
        return jax.jvp(lambda w: jax.grad(loss)(w, w2, x), (w1,), (v,))[1]

    return jax.jit(hvp)


def jax_hvp_inputs(jax, batch=256, sizes=(64, 128, 1), seed=5):
    return tuple(jax.numpy.asarray(a) for a in hvp_arrays(batch, sizes, seed))


def jax_scalar_dag_fn(jax, plan):
    jnp = jax.numpy

    def f(leaves):
        nodes = list(leaves)
        for kind, idx in plan:
            if kind == 0:
                nodes.append(jax.nn.softplus(nodes[idx[0]]))
            elif kind == 1:
                a, b, c, d = (nodes[j] for j in idx)
                nodes.append(a + b + c + d)
            elif kind == 2:
                nodes.append(nodes[idx[0]] * nodes[idx[1]])
            else:
                s = jax.nn.softmax(jnp.stack([nodes[j] for j in idx]), axis=0)
                nodes.extend(s[k] for k in range(4))
        return nodes[-1]

    return f


def jax_scalar_dag_leaves(jax, n_leaves=100, seed=1):
    vals = scalar_dag_values(n_leaves, seed)
    return [jax.numpy.asarray(float(v), dtype=jax.numpy.float64) for v in vals]


def jax_rnn_step_fn(jax):
    jnp = jax.numpy

    def loss(W, xs):
        def step(h, x):
            return jnp.tanh(W @ h + x), None

        h, _ = jax.lax.scan(step, jnp.zeros(W.shape[0], W.dtype), xs)
        return (h * h).sum()

    return jax.jit(jax.value_and_grad(loss))


def jax_rnn_inputs(jax, T=1000, H=32, seed=2):
    W, xs = rnn_arrays(T, H, seed)
    return jax.numpy.asarray(W), jax.numpy.asarray(xs)


def jax_mlp_step_fn(jax, lr=0.01):
    jnp = jax.numpy

    def loss(params, x, onehot):
        h = x
        n = len(params) // 2
        for i in range(n):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i < n - 1:
                h = jax.nn.relu(h)
        return -(onehot * jax.nn.log_softmax(h, 1)).sum(1).mean()

    def step(params, x, onehot):
        value, grads = jax.value_and_grad(loss)(params, x, onehot)
        return [p - jnp.float32(lr) * g for p, g in zip(params, grads, strict=True)], value

    return jax.jit(step)


def jax_mlp_inputs(jax, batch=128, sizes=(784, 256, 256, 10), seed=3):
    params, x, onehot = mlp_arrays(batch, sizes, seed)
    asarray = jax.numpy.asarray
    return [asarray(p) for p in params], asarray(x), asarray(onehot)
