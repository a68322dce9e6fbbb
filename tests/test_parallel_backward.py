"""Backward nodes run in parts on the intra-op threads (kernels/_jit.parallel), and a large
root gradient is read in place: gradients match torch's and a single thread's, with fresh
and already-written buffers, broadcast operands, fan-out and the root's hooks."""

import numpy as np
import pytest
import torch

import nautograd as ng

R, C = 731, 740  # 540,940 elements: above the scheduler's PAR_MIN (2^19), ragged parts


def _families(lib):
    F = lib.nn.functional

    def unsq(t, d):
        return t.unsqueeze(d)

    return {
        "exp": lambda x, b: x.exp(),
        "gelu": lambda x, b: F.gelu(x),
        "softplus": lambda x, b: F.softplus(x),
        "mul_same": lambda x, b: x * x.sin(),
        "x_plus_x": lambda x, b: x + x,
        "mul_bias_row": lambda x, b: x * b,
        "mul_bias_col": lambda x, b: x * unsq(b[:R], 1),
        "div_scalar_tensor": lambda x, b: x / (b[0] + 3.0),
        "scalar_tensor_times_x": lambda x, b: b[1] * x,
        "mul_general": lambda x, b: unsq(x[:, :8], 0) * unsq(unsq(b[:10], 1), 1),
        "add_bias_row": lambda x, b: x + b,
        "sub_bias_col": lambda x, b: unsq(b[:R], 1) - x,
        "add_scalar_tensor": lambda x, b: x + b[2],
        "add_general": lambda x, b: unsq(x[:, :8], 0) + unsq(unsq(b[:10], 1), 1),
        "sum_rows": lambda x, b: x.sum(1),
        "sum_cols": lambda x, b: x.sum(0),
        "mean_all": lambda x, b: x.mean() * b,
        "sum_general": lambda x, b: x.reshape(R, 37, 20).sum((0, 2)),
        "var_rows": lambda x, b: x.var(1),
        "std_cols": lambda x, b: x.std(0),
        "amax_rows": lambda x, b: x.amax(1),
        "prod_cols": lambda x, b: (x * 0.01 + 1.0).prod(0),
        "norm_rows": lambda x, b: lib.linalg.vector_norm(x, 3, dim=1),
        "log_softmax_rows": lambda x, b: F.log_softmax(x, 1),
        "softmax_cols": lambda x, b: F.softmax(x, 0),
        "cumsum_rows": lambda x, b: x.cumsum(1),
        "cumsum_cols": lambda x, b: x.cumsum(0),
        "cumprod_rows": lambda x, b: (x * 0.1 + 1.0).cumprod(1),
        "logcumsumexp_cols": lambda x, b: x.logcumsumexp(0),
        # the same leaf reached twice: the second kernel adds into a written buffer
        "fan_out": lambda x, b: x.exp() + F.log_softmax(x, 1) * b,
    }


def _grads(lib, name, threads, x0, b0, g0):
    if lib is ng:
        ng.set_num_threads(threads)
    x = lib.tensor(x0, requires_grad=True)
    b = lib.tensor(b0, requires_grad=True)
    y = _families(lib)[name](x, b)
    y.backward(lib.tensor(g0[: y.numel()].reshape(tuple(y.shape))))
    return x.grad.numpy(), b.grad.numpy() if b.grad is not None else None


@pytest.fixture
def restore_threads():
    before = ng.get_num_threads()
    yield
    ng.set_num_threads(before)


@pytest.mark.parametrize("name", list(_families(ng)))
def test_large_backward_in_parts_matches_torch_and_one_thread(restore_threads, name):
    rng = np.random.default_rng(7)
    x0 = rng.uniform(-2, 2, (R, C))
    b0 = rng.uniform(-2, 2, C)
    g0 = rng.standard_normal(R * C * 10)
    gx, gb = _grads(ng, name, 2, x0, b0, g0)
    tx, tb = _grads(torch, name, 2, x0, b0, g0)
    np.testing.assert_allclose(gx, tx, rtol=1e-10, atol=1e-10)
    if tb is None:
        assert gb is None
    else:
        np.testing.assert_allclose(gb, tb, rtol=1e-9, atol=1e-9)
    sx, sb = _grads(ng, name, 1, x0, b0, g0)
    np.testing.assert_allclose(gx, sx, rtol=1e-12, atol=1e-12)


def test_large_backward_in_parts_accumulates_into_existing_grad(restore_threads):
    ng.set_num_threads(2)
    x0 = np.random.default_rng(1).uniform(-1, 1, (R, C))
    x = ng.tensor(x0, requires_grad=True)
    x.exp().sum().backward()
    x.exp().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x0), rtol=1e-12)


def test_large_root_gradient_is_not_modified_by_backward():
    x0 = np.random.default_rng(2).uniform(-1, 1, (R, C))
    g0 = np.random.default_rng(3).standard_normal((R, C))
    x = ng.tensor(x0, requires_grad=True)
    g = ng.tensor(g0.copy())
    y = x * 2.0
    y.backward(g, retain_graph=True)
    y.backward(g)
    np.testing.assert_array_equal(g.numpy(), g0)
    np.testing.assert_allclose(x.grad.numpy(), 4 * g0)


def test_large_root_retain_grad_and_hook_see_the_root_gradient():
    x0 = np.random.default_rng(4).uniform(-1, 1, (R, C))
    g0 = np.random.default_rng(5).standard_normal((R, C))
    x = ng.tensor(x0, requires_grad=True)
    y = x.exp()
    y.retain_grad()
    y.backward(ng.tensor(g0))
    np.testing.assert_allclose(y.grad.numpy(), g0)
    x.grad = None
    y = x.exp()
    y.register_hook(lambda grad: grad * 3.0)
    y.backward(ng.tensor(g0))
    np.testing.assert_allclose(x.grad.numpy(), 3 * g0 * np.exp(x0), rtol=1e-12)


def test_large_root_gradient_of_grad_targets_the_root():
    x = ng.tensor(np.ones((R, C)), requires_grad=True)
    y = x * 2.0
    g0 = np.random.default_rng(6).standard_normal((R, C))
    (gy,) = ng.autograd.grad(y, [y], ng.tensor(g0))
    np.testing.assert_allclose(gy.numpy(), g0)


def test_cumsum_forward_matches_torch_on_threads(restore_threads):
    ng.set_num_threads(2)
    x0 = np.random.default_rng(8).standard_normal((R, C)).astype(np.float32)
    for dim in (0, 1, -1):
        np.testing.assert_allclose(
            ng.tensor(x0).cumsum(dim).numpy(),
            torch.tensor(x0).cumsum(dim).numpy(),
            rtol=1e-4,
            atol=1e-4,
        )


def test_a_node_of_par_min_gradient_elements_runs_in_parts_and_a_smaller_one_does_not(
    restore_threads, monkeypatch
):
    from nautograd.autograd import engine
    from nautograd.graph.scheduler import PAR_MIN

    ng.set_num_threads(2)
    calls = []
    real = engine.run_parts
    monkeypatch.setattr(
        engine, "run_parts", lambda fn, parts: (calls.append(parts), real(fn, parts))
    )
    for n, expected in ((PAR_MIN, [2]), (PAR_MIN - 1, [])):
        calls.clear()
        x0 = np.random.default_rng(n).uniform(-1, 1, n)
        g0 = np.random.default_rng(n + 1).standard_normal(n)
        x = ng.tensor(x0, requires_grad=True)
        x.exp().backward(ng.tensor(g0))
        assert calls == expected, n
        np.testing.assert_allclose(x.grad.numpy(), g0 * np.exp(x0), rtol=1e-13)
