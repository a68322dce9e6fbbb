"""Our own matrix products (kernels/_gemm.py): values and gradients against torch through
the public API, the split over worker threads, the workers' life (parking, waking,
set_num_threads, fork) and the BLAS fallback."""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

import nautograd as ng
from nautograd.kernels import _gemm

own = pytest.mark.skipif(not _gemm.ENABLED, reason="products go to BLAS on this CPU")

# (m, k, n): edge rows and columns, one register a row (n <= 16), a row split (one column
# tile), a column split
SHAPES = [(2, 3, 2), (9, 17, 33), (5, 40, 16), (130, 300, 70), (256, 128, 10), (128, 784, 256)]


@own
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_products_and_their_gradients_match_torch(m, k, n, dtype, transposed):
    rng = np.random.default_rng(m * k + n)
    x0 = rng.standard_normal((k, m) if transposed else (m, k)).astype(dtype)
    y0 = rng.standard_normal((n, k) if transposed else (k, n)).astype(dtype)
    g0 = rng.standard_normal((m, n)).astype(dtype)

    def run(lib):
        x = lib.tensor(x0, requires_grad=True)
        y = lib.tensor(y0, requires_grad=True)
        result = (x.T @ y.T) if transposed else (x @ y)
        result.backward(lib.tensor(g0))
        return [t.detach().numpy() for t in (result, x.grad, y.grad)]

    tol = (
        dict(rtol=1e-4, atol=1e-4 * k**0.5)
        if dtype == "float32"
        else dict(rtol=1e-10, atol=1e-12 * k**0.5)
    )
    for ours, theirs in zip(run(ng), run(torch), strict=True):
        np.testing.assert_allclose(ours, theirs, **tol)


@own
def test_a_fresh_output_is_stored_without_reading_it():
    # beta 0 (a fresh gradient buffer, the forward's result) ignores c's contents, NaN too
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 70))
    y = rng.standard_normal((70, 50))
    c = np.full((40, 50), np.nan)
    _gemm._matmul_into(c, x, y, False, False)
    np.testing.assert_allclose(c, x @ y, rtol=1e-12)


@own
def test_a_product_with_no_depth_is_zeros():
    x = ng.zeros((3, 0), requires_grad=True)
    y = ng.zeros((0, 4), requires_grad=True)
    result = x @ y
    assert result.shape == (3, 4) and not result.detach().numpy().any()
    result.sum().backward()
    assert x.grad.shape == (3, 0) and y.grad.shape == (0, 4)


def _state(w=0):
    return int(_gemm._CTL[_gemm._W0 + 2 * _gemm._LINE * w + _gemm._STATE])


def _done(w=0):
    return int(_gemm._CTL[_gemm._W0 + 2 * _gemm._LINE * w + _gemm._DONE])


@own
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no workers")
def test_workers_take_parts_park_when_idle_and_wake_for_a_big_product():
    ng.set_num_threads(2)
    x = np.random.default_rng(1).standard_normal((512, 512)).astype(np.float32)
    ng.tensor(x) @ ng.tensor(x)  # starts the worker
    # idle for more than SPIN_S it parks (polled: a loaded machine schedules it late)
    end = time.perf_counter() + 5
    while _state() != _gemm.PARKED and time.perf_counter() < end:
        time.sleep(0.01)
    assert _state() == _gemm.PARKED
    before = _done()
    # a product of at least WAIT_WORK multiply-adds wakes the worker and waits (up to 2 ms)
    # for it; on a loaded machine a later product takes it
    for _ in range(50):
        result = _gemm.matmul(x, x)
        if _done() > before:
            break
    assert _done() > before
    np.testing.assert_allclose(result, x.astype(np.float64) @ x, rtol=1e-4, atol=1e-3)


@own
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no workers")
def test_set_num_threads_stops_and_restarts_the_workers():
    x = np.random.default_rng(2).standard_normal((256, 300))
    expected = x @ x.T
    try:
        ng.set_num_threads(1)
        assert not _gemm._WORKERS_.threads and _gemm._CTL[_gemm._WORKERS] == 0
        done = _done()
        np.testing.assert_allclose((ng.tensor(x) @ ng.tensor(x).T).numpy(), expected, atol=1e-10)
        assert _done() == done  # the calling thread did it all
    finally:
        ng.set_num_threads(2)
    _gemm.matmul(x, x.T)
    assert _gemm._WORKERS_.threads
    np.testing.assert_allclose(_gemm.matmul(x, x.T), expected, rtol=1e-12, atol=1e-10)


@own
def test_two_threads_multiplying_at_once_get_their_own_products():
    rng = np.random.default_rng(3)
    pairs = [(rng.standard_normal((200, 300)), rng.standard_normal((300, 150))) for _ in range(2)]
    errors = []

    def work(x, y):
        try:
            for _ in range(30):
                np.testing.assert_allclose(_gemm.matmul(x, y), x @ y, rtol=1e-10, atol=1e-10)
        except AssertionError as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=p) for p in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


_FORK_CHILD = """
import os, numpy as np
import nautograd as ng
from nautograd.kernels import _gemm
x = np.random.default_rng(4).standard_normal((300, 300))
_gemm.matmul(x, x)  # the parent's workers are running
pid = os.fork()
if pid == 0:  # the child has no workers: its products must not wait for them
    ok = np.allclose(_gemm.matmul(x, x), x @ x) and np.allclose(_gemm.matmul(x, x), x @ x)
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


@own
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_multiplies_without_the_parents_workers():
    out = subprocess.run(
        [sys.executable, "-c", _FORK_CHILD], capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip() == "0", out.stderr


def test_nautograd_gemm_blas_sends_products_to_blas():
    code = (
        "import numpy as np, nautograd as ng\n"
        "from nautograd.kernels import _gemm\n"
        "x = np.arange(12.0).reshape(3, 4)\n"
        "print(_gemm.ENABLED, np.array_equal((ng.tensor(x) @ ng.tensor(x.T)).numpy(), x @ x.T))"
    )
    env = {**os.environ, "NAUTOGRAD_GEMM": "blas"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.stdout.split() == ["False", "True"], out.stderr


@own
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_gradient_summed_over_two_products_matches_torch(dtype):
    # the second product's gradient adds into the first's buffer (beta 1), whole blocks of
    # it in the micro-kernel and its edges through the edge tile
    rng = np.random.default_rng(5)
    x0, z0 = (rng.standard_normal((70, 90)).astype(dtype) for _ in range(2))
    w0 = rng.standard_normal((90, 45)).astype(dtype)
    g0 = rng.standard_normal((70, 45)).astype(dtype)

    def run(lib):
        x, w = lib.tensor(x0, requires_grad=True), lib.tensor(w0, requires_grad=True)
        z = lib.tensor(z0)
        (x @ w + z @ w * 2.0 + x @ w.T.T).backward(lib.tensor(g0))
        return x.grad.numpy(), w.grad.numpy()

    tol = 1e-4 if dtype == "float32" else 1e-10
    for ours, theirs in zip(run(ng), run(torch), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


@own
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batched_broadcast_products_match_torch(dtype):
    # item by item through our products, the broadcast operand read in place
    rng = np.random.default_rng(6)
    x0 = rng.standard_normal((3, 1, 70, 90)).astype(dtype)
    y0 = rng.standard_normal((2, 90, 45)).astype(dtype)
    g0 = rng.standard_normal((3, 2, 70, 45)).astype(dtype)

    def run(lib):
        x, y = lib.tensor(x0, requires_grad=True), lib.tensor(y0, requires_grad=True)
        result = x @ y
        result.backward(lib.tensor(g0))
        return result.detach().numpy(), x.grad.numpy(), y.grad.numpy()

    tol = 1e-4 if dtype == "float32" else 1e-10
    for ours, theirs in zip(run(ng), run(torch), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


@own
@pytest.mark.parametrize("groups", [1, 2])
def test_convolutions_run_on_our_products_and_match_torch(groups):
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal((2, 8, 20, 20))
    w0 = rng.standard_normal((16, 8 // groups, 3, 3))
    g0 = rng.standard_normal((2, 16, 20, 20))

    def run(lib):
        x, w = lib.tensor(x0, requires_grad=True), lib.tensor(w0, requires_grad=True)
        result = lib.nn.functional.conv2d(x, w, padding=1, groups=groups)
        result.backward(lib.tensor(g0))
        return result.detach().numpy(), x.grad.numpy(), w.grad.numpy()

    for ours, theirs in zip(run(ng), run(torch), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


@own
@pytest.mark.parametrize("transposed", [False, True])
def test_products_of_fewer_rows_than_a_block_match_torch(transposed):
    # c of 2..7 rows: sums of op(y)'s rows, or dot products when y is transposed
    rng = np.random.default_rng(8)
    for m in (2, 4, 7):
        x0 = rng.standard_normal((9, m) if transposed else (m, 9))
        y0 = rng.standard_normal((300, 9) if transposed else (9, 300))
        g0 = rng.standard_normal((m, 300))

        def run(lib, x0=x0, y0=y0, g0=g0):
            x, y = lib.tensor(x0, requires_grad=True), lib.tensor(y0, requires_grad=True)
            result = (x.T @ y.T) if transposed else (x @ y)
            result.backward(lib.tensor(g0))
            return result.detach().numpy(), x.grad.numpy(), y.grad.numpy()

        for ours, theirs in zip(run(ng), run(torch), strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


@own
def test_a_worker_told_to_stop_while_parked_exits_instead_of_spinning():
    # a worker slot no thread uses: waking a stopped worker must not undo the stop, and a
    # worker whose slot was reset returns at once rather than spinning for ever
    w = _gemm.MAX_WORKERS - 1
    i = _gemm._W0 + 2 * _gemm._LINE * w + _gemm._STATE
    assert w not in _gemm._WORKERS_.threads
    _gemm._CTL[i] = _gemm.EXIT
    assert not _gemm._unpark(w) and _gemm._CTL[i] == _gemm.EXIT
    _gemm._CTL[i] = _gemm.PARKED
    assert _gemm._unpark(w) and _gemm._CTL[i] == _gemm.SPINNING
    _gemm._CTL[i] = _gemm.NONE
    result = []
    t = threading.Thread(target=lambda: result.append(_gemm._serve(w)), daemon=True)
    t.start()
    t.join(10)
    assert result == [_gemm.EXIT]
