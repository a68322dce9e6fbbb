"""Intra-op threads (ng.set_num_threads) and the vectorised forward loops (kernels/_vmath.py):
large inputs, split over threads, give torch's values and gradients."""

import threading

import numpy as np
import pytest
import torch

import nautograd as ng
from nautograd import _threads as threads

N = 1 << 18  # nautograd._threads.MIN_SIZE: split over the threads


@pytest.fixture
def two_threads():
    before = ng.get_num_threads()
    ng.set_num_threads(2)
    yield
    ng.set_num_threads(before)


def test_set_num_threads_roundtrip_and_rejects_bad_values():
    before = ng.get_num_threads()
    try:
        ng.set_num_threads(3)
        assert ng.get_num_threads() == 3
        for bad in (0, -1, 1.5, True):
            with pytest.raises(RuntimeError, match="set_num_threads"):
                ng.set_num_threads(bad)
    finally:
        ng.set_num_threads(before)


@pytest.mark.parametrize("name", ["exp", "sigmoid", "silu", "tanh", "log", "gelu"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_large_unary_matches_torch_on_threads(two_threads, name, dtype):
    rng = np.random.default_rng(0)
    x0 = rng.uniform(0.1 if name == "log" else -8, 8, N + 37).astype(dtype)  # ragged chunks
    g0 = rng.standard_normal(N + 37).astype(dtype)
    x, xt = ng.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    F, Ft = ng.nn.functional, torch.nn.functional
    y = getattr(F, name)(x) if hasattr(F, name) else getattr(x, name)()
    yt = getattr(Ft, name)(xt) if hasattr(Ft, name) else getattr(xt, name)()
    y.backward(ng.tensor(g0))
    yt.backward(torch.tensor(g0))
    tol = 1e-13 if dtype == np.float64 else 2e-6
    assert np.allclose(y.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    assert np.allclose(x.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=tol)


def test_threaded_and_single_threaded_results_are_identical():
    x0 = np.random.default_rng(1).standard_normal((512, 1024))  # ROWS_MIN: softmax rows split
    x = ng.tensor(x0)
    before = ng.get_num_threads()
    try:
        ng.set_num_threads(1)
        one = [x.exp().numpy(), x.sigmoid().numpy(), x.log_softmax(1).numpy()]
        ng.set_num_threads(2)
        two = [x.exp().numpy(), x.sigmoid().numpy(), x.log_softmax(1).numpy()]
    finally:
        ng.set_num_threads(before)
    for a, b in zip(one, two, strict=True):
        assert np.array_equal(a, b)


def test_exp_at_the_ends_of_its_range_matches_numpy():
    x0 = np.array(
        [-1e4, -746.0, -745.1, -744.0, -708.4, -1e-300, 0.0, 1e-10, 709.7, 709.78, 710.0, 1e4]
        + [np.inf, -np.inf, np.nan]
    )
    with np.errstate(over="ignore"):
        expected = np.exp(x0)
    got = ng.tensor(x0).exp().numpy()
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    ok = ~np.isnan(expected)
    assert np.allclose(got[ok], expected[ok], rtol=4e-16, atol=0)
    # subnormal results within one unit in the last place
    assert np.abs(got[2] - expected[2]) <= 5e-324


def test_exp_is_within_one_ulp_of_numpy_across_its_range():
    x0 = np.random.default_rng(2).uniform(-708, 709, 200_000)
    rel = np.abs(ng.tensor(x0).exp().numpy() / np.exp(x0) - 1)
    assert rel.max() < 4.5e-16


@pytest.mark.parametrize("shape,dim", [((3, 180000), 1), ((300, 1800), 0), ((40, 70, 200), 1)])
def test_large_softmax_over_threads_matches_torch(two_threads, shape, dim):
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal(shape) * 5
    g0 = rng.standard_normal(shape)
    for name in ("softmax", "log_softmax"):
        x, xt = ng.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
        y, yt = getattr(x, name)(dim), getattr(xt, name)(dim)
        y.backward(ng.tensor(g0))
        yt.backward(torch.tensor(g0))
        assert np.allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-13)
        assert np.allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-11, atol=1e-12)


def test_parts_run_on_other_threads_and_a_part_error_reaches_the_caller(two_threads):
    from nautograd._threads import run_parts

    seen = {}

    def record(p):
        seen[p] = threading.get_ident()

    run_parts(record, 3)  # more parts than workers: the caller runs the extra one
    assert sorted(seen) == [0, 1, 2]
    assert seen[0] == threading.get_ident() and seen[1] != seen[0]

    def fail(p):
        if p == 1:
            raise ValueError("part 1 failed")

    with pytest.raises(ValueError, match="part 1 failed"):
        run_parts(fail, 2)
    run_parts(record, 2)  # the team is usable after an error


def test_parts_from_two_threads_at_once_all_run(two_threads):
    # a second caller (or a nested one) runs its parts inline instead of waiting for the team
    from nautograd._threads import run_parts

    done = []

    def outer(p):
        run_parts(lambda q: done.append((p, q)), 2)

    threads = [threading.Thread(target=run_parts, args=(outer, 2)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(done) == sorted([(p, q) for p in range(2) for q in range(2)] * 3)


def test_large_sums_over_threads_match_torch(two_threads, rng):
    a = rng.standard_normal((300, 1800))  # above ROWS_MIN: split over the threads
    for dim in (1, 0, None, (0, 1)):
        for dtype in (np.float64, np.float32):
            x = ng.tensor(a.astype(dtype))
            t = torch.tensor(a.astype(dtype))
            tol = 1e-12 if dtype == np.float64 else 1e-4
            for f in ("sum", "mean"):
                ours = getattr(x, f)() if dim is None else getattr(x, f)(dim)
                ref = getattr(t, f)() if dim is None else getattr(t, f)(dim)
                np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape", [(128, 10), (300, 16), (7000, 10), (5, 17), (2, 1), (1, 4)], ids=str
)
def test_short_and_long_softmax_rows_match_torch(two_threads, shape, dtype):
    # rows of up to 16 elements take the blocked path (blocks of 256 rows; 7000 x 10 runs in
    # parts on two threads), longer rows the per-row one; a row of -inf and one holding -inf
    # and inf keep torch's nan/0 pattern
    rng = np.random.default_rng(4)
    x0 = (rng.standard_normal(shape) * 4).astype(dtype)
    x0[-1, 0] = -np.inf
    if shape[0] > 2:
        x0[1, :] = -np.inf
    g0 = rng.standard_normal(shape).astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for name in ("softmax", "log_softmax"):
        x, xt = ng.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
        y, yt = getattr(x, name)(1), getattr(xt, name)(1)
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), **tol)
        finite = np.isfinite(x0).all(axis=1)  # (torch's gradients of -inf rows are nan too)
        y.backward(ng.tensor(g0))
        yt.backward(torch.tensor(g0))
        np.testing.assert_allclose(x.grad.numpy()[finite], xt.grad.numpy()[finite], **tol)


@pytest.fixture
def split_calls(two_threads, monkeypatch):
    """The part count of every hand-off to the team from the forwards (_threads.run_parts
    as elementwise and parallel_for call it), in order."""
    calls = []
    real = threads.run_parts
    monkeypatch.setattr(
        threads, "run_parts", lambda fn, parts: (calls.append(parts), real(fn, parts))
    )
    return calls


def test_forward_splits_from_min_size_and_never_relus_memory_bound_loop(split_calls):
    # below MIN_SIZE the hand-off to the team costs more than a second thread saves, and
    # relu's compiled loop (``unsplit``) would have each part's result copied into the
    # output: both run on the calling thread
    calls = split_calls
    big = np.random.default_rng(0).uniform(0.5, 1.5, threads.MIN_SIZE)
    for name in ("exp", "sqrt", "tanh"):
        calls.clear()
        y = getattr(ng, name)(ng.tensor(big))
        assert calls == [2], name
        np.testing.assert_allclose(
            y.numpy(), getattr(torch, name)(torch.tensor(big)).numpy(), rtol=1e-14
        )
    calls.clear()
    y = ng.nn.functional.gelu(ng.tensor(big), approximate="tanh")  # a function of numpy calls
    assert calls == [2]
    ref = torch.nn.functional.gelu(torch.tensor(big), approximate="tanh")
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-14)
    calls.clear()
    ng.exp(ng.tensor(big[:-1]))
    ng.relu(ng.tensor(big))
    assert calls == []


def test_a_row_loop_splits_from_rows_min(split_calls):
    # a sum's rows are cheap: below ROWS_MIN elements the team's hand-off costs more
    calls = split_calls
    a = np.random.default_rng(4).standard_normal((512, threads.ROWS_MIN // 512))
    y = ng.tensor(a).sum(1)
    assert calls == [2]
    np.testing.assert_allclose(y.numpy(), a.sum(1), rtol=1e-12)
    calls.clear()
    ng.tensor(a[:-1]).sum(1)
    assert calls == []
