"""Regression tests for crashes, silent wrong results and races (each named after its symptom),
compared with torch 2.13 where torch defines the answer."""

import itertools
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest
import torch

import nautograd as ng

NAN, INF = float("nan"), float("inf")


def _run_python(code):
    """Run ``code`` in a new interpreter: a crash there fails the test, not the whole run."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )


def _grads(lib, f, *values, dtype=None):
    """(f(*xs) detached, [x.grad for each x]) for float64 leaves made from ``values``."""
    dtype = dtype or lib.float64
    xs = [lib.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    y = f(lib, *xs)
    y.sum().backward()
    return y.detach(), [x.grad for x in xs]


def _same(a, b):
    if a is None or b is None:
        assert a is None and b is None
        return
    np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=1e-6, atol=1e-9)


def _like_torch(f, *values):
    """f's value and input gradients on nautograd and torch, NaN and inf included."""
    y, gs = _grads(ng, f, *values)
    ty, tgs = _grads(torch, f, *values)
    _same(y, ty)
    for g, tg in zip(gs, tgs, strict=True):
        _same(g, tg)


# -- memory safety: compiled code never trusts recorded sizes against live buffers --------------


@pytest.mark.parametrize("n", [5_000, 100_000])
def test_replacing_data_with_a_smaller_tensor_before_backward_raises_instead_of_corrupting_memory(
    n,
):
    result = _run_python(
        f"""
        import numpy as np, nautograd as ng
        x = ng.tensor(np.random.rand({n}), requires_grad=True)
        y = (x * x).sum()
        x.data = ng.tensor(np.random.rand(7))
        try:
            y.backward()
        except RuntimeError as e:
            print("raised:", e)
        """
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"the gradient has {n} elements but the tensor has shape [7]" in result.stdout


def test_replacing_data_with_float32_before_backward_gives_a_gradient_of_the_recorded_dtype():
    result = _run_python(
        """
        import numpy as np, nautograd as ng
        a = np.random.rand(100_000)
        x = ng.tensor(a, requires_grad=True)
        y = (x * x).sum()
        x.data = ng.tensor(a.astype(np.float32))
        y.backward()
        assert x.grad.dtype == np.float64 and x.grad.shape == (100_000,), x.grad
        np.testing.assert_allclose(x.grad.numpy(), 2 * a)
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ok" in result.stdout


@pytest.mark.parametrize("n", [3, 5_000])
def test_a_graph_recorded_after_replacing_data_uses_the_new_size(n):
    x = ng.tensor(np.ones(10), requires_grad=True)
    (x * x).sum().backward()
    x.data = ng.tensor(np.arange(float(n)))
    x.grad = None
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.arange(float(n)))


def test_a_cast_to_an_integer_dtype_does_not_require_grad():
    x = ng.rand(4, requires_grad=True)
    for cast in (
        lambda t: t.long(),
        lambda t: t.int(),
        lambda t: t.bool(),
        lambda t: t.to(ng.int16),
    ):
        assert not cast(x).requires_grad
        assert cast(x).grad_fn is None


def test_backward_through_an_integer_cast_raises_torchs_error_instead_of_crashing():
    result = _run_python(
        """
        import nautograd as ng
        try:
            ng.rand(4, requires_grad=True).long().float().sum().backward()
        except RuntimeError as e:
            print("raised:", e)
        """
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "element 0 of tensors does not require grad and does not have a grad_fn" in (
        result.stdout
    )


# -- silent wrong results --------------------------------------------------------------------

_INTS = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64]


@pytest.mark.parametrize("dtype", _INTS)
def test_sums_products_and_scans_of_bool_and_integer_tensors_are_int64_without_wrapping(dtype):
    a = (np.array([[200, 100, 1], [3, 0, 7]]) % (2 if dtype is np.bool_ else 120)).astype(dtype)
    if dtype is np.uint8:
        a = np.array([[200, 100, 1], [3, 0, 7]], np.uint8)  # sums past 255
    x, t = ng.tensor(a), torch.from_numpy(a)
    for f in (
        lambda m, v: v.sum(),
        lambda m, v: v.sum(0),
        lambda m, v: v.sum(dim=1, keepdim=True),
        lambda m, v: v.prod(),
        lambda m, v: v.prod(1),
        lambda m, v: v.cumsum(1),
        lambda m, v: v.cumprod(0),
    ):
        r, tr = f(ng, x), f(torch, t)
        assert str(r.dtype) == str(tr.dtype).removeprefix("torch."), (f, r, tr)
        np.testing.assert_array_equal(r.numpy(), tr.numpy())


def test_an_accuracy_count_from_a_comparison_sum_is_an_integer():
    pred, y = ng.tensor([1, 2, 3, 4]), ng.tensor([1, 0, 3, 4])
    correct = (pred == y).sum()
    assert correct.dtype == np.int64 and correct.item() == 3


_DTYPES = [*_INTS, np.float16, np.float32, np.float64]
_BINARY = {
    "add": (lambda m, x, y: x + y),
    "mul": (lambda m, x, y: x * y),
    "sub": (lambda m, x, y: x - y if x.dtype != m.bool and y.dtype != m.bool else x + y),
    "maximum": (lambda m, x, y: m.maximum(x, y)),
    "where": (lambda m, x, y: m.where(x > 0 if x.dtype != m.bool else x, x, y)),
    "cat": (lambda m, x, y: m.cat([x.reshape(-1), y.reshape(-1)])),
}


@pytest.mark.parametrize("name", list(_BINARY))
def test_dtype_promotion_matches_torch_for_every_pair_of_dtypes(name):
    f = _BINARY[name]
    wrong = []
    for a, b in itertools.product(_DTYPES, repeat=2):
        for sa, sb in [((2,), (2,)), ((2,), ()), ((), (2,)), ((), ())]:
            x, y = np.ones(sa, a), np.ones(sb, b)
            expected = f(torch, torch.from_numpy(x), torch.from_numpy(y)).dtype
            got = f(ng, ng.tensor(x), ng.tensor(y)).dtype
            if str(got) != str(expected).removeprefix("torch."):
                wrong.append((a.__name__, b.__name__, sa, sb, str(got), str(expected)))
    assert not wrong


def test_float32_with_an_int64_tensor_stays_float32_and_differentiable():
    w = ng.ones(3, dtype=ng.float32, requires_grad=True)
    i = ng.tensor([1, 2, 3])
    for y in (w + i, w * i, ng.maximum(w, i), w**i, ng.cat([w, i])):
        assert y.dtype == np.float32 and y.requires_grad
    (w * i).sum().backward()
    assert w.grad.dtype == np.float32
    np.testing.assert_array_equal(w.grad.numpy(), [1, 2, 3])


def test_integer_matrix_products_stay_integer():
    a, b = np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4)
    for f in (lambda m, x, y: x @ y, lambda m, x, y: m.mm(x, y), lambda m, x, y: x[0] @ y):
        r, t = f(ng, ng.tensor(a), ng.tensor(b)), f(torch, torch.tensor(a), torch.tensor(b))
        assert r.dtype == np.int64
        np.testing.assert_array_equal(r.numpy(), t.numpy())


def test_bce_with_logits_gradient_at_a_zero_logit_matches_torch():
    target = [1.0, 0.0, 1.0, 0.5]
    for kwargs in ({}, {"pos_weight": [2.0, 0.5, 1.0, 3.0]}):

        def f(m, x, kwargs=kwargs):
            kw = {k: m.tensor(v, dtype=m.float64) for k, v in kwargs.items()}
            t = m.tensor(target, dtype=m.float64)
            return m.nn.functional.binary_cross_entropy_with_logits(x, t, **kw)

        _like_torch(f, [0.0, 0.0, 2.0, -40.0])


def test_bce_gradient_at_probabilities_0_and_1_is_finite_like_torch():
    def f(m, x, t):
        return m.nn.functional.binary_cross_entropy(x, t, reduction="sum")

    y, (gx, _) = _grads(ng, f, [0.0, 1.0, 0.5, 0.0], [1.0, 0.0, 1.0, 0.0])
    assert np.isfinite(gx.numpy()).all()
    _same(y, _grads(torch, f, [0.0, 1.0, 0.5, 0.0], [1.0, 0.0, 1.0, 0.0])[0])
    # the input's gradient (torch's target gradient is infinite at 0 and 1: compare inside)
    _like_torch(f, [0.0, 1.0, 0.5, 1e-300], [0.2, 0.7, 1.0, 0.3])


@pytest.mark.parametrize("shape", [(), (3,)])
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_with_dim_of_1d_and_0d_tensors_give_0d_results(shape, name):
    a = np.arange(1.0, 1.0 + np.prod(shape, dtype=int)).reshape(shape)
    for dim in (0, -1):
        r = getattr(ng.tensor(a), name)(dim=dim)
        t = getattr(torch.tensor(a), name)(dim=dim)
        assert r.values.shape == t.values.shape == () and r.indices.shape == ()
        assert r.values.item() == t.values.item() and r.indices.item() == t.indices.item()


@pytest.mark.parametrize("correction", [3, 4, 7])
def test_var_and_std_with_correction_at_least_n_are_inf_like_torch(correction):
    a = [1.0, 3.0, 2.0]
    for name in ("var", "std"):
        r = getattr(ng.tensor(a), name)(correction=correction)
        with pytest.warns(UserWarning):
            t = getattr(torch.tensor(a, dtype=torch.float64), name)(correction=correction)
        assert r.item() == t.item() == INF


def test_atan2_gradient_at_the_origin_is_zero_like_torch():
    _like_torch(lambda m, y, x: m.atan2(y, x), [0.0, 1.0, 0.0], [0.0, 0.0, -2.0])


def test_zero_to_the_power_of_a_tensor_has_torchs_gradients():
    _like_torch(lambda m, e: 0.0**e, [0.0, 1.0, 2.0, -1.0])
    _like_torch(lambda m, b, e: b**e, [0.0, 0.0, 0.0, 2.0], [0.0, 1.0, 2.0, 0.0])


def test_softmax_and_log_softmax_of_a_row_with_inf_give_nan_like_torch():
    for name in ("softmax", "log_softmax"):
        for row in ([INF, 1.0], [-INF, -INF], [NAN, 0.0], [-INF, 1.0]):
            r = getattr(ng, name)(ng.tensor(row), 0)
            t = getattr(torch, name)(torch.tensor(row, dtype=torch.float64), 0)
            np.testing.assert_array_equal(r.numpy(), t.numpy(), err_msg=f"{name}{row}")


@pytest.mark.parametrize(
    "f",
    [
        lambda m, x: m.nn.functional.relu(x),
        lambda m, x: m.nn.functional.elu(x),
        lambda m, x: m.nn.functional.leaky_relu(x, 0.1),
        lambda m, x: m.nn.functional.hardtanh(x),
        lambda m, x: x.max(),
        lambda m, x: x.min(),
        lambda m, x: x.amax(),
        lambda m, x: x.amin(0),
        lambda m, x: x.max(0).values,
        lambda m, x: m.maximum(x, m.tensor([0.0, NAN, 2.0, 1.0] + [0.25] * 12, dtype=m.float64)),
        lambda m, x: m.minimum(x, m.tensor([0.0, NAN, 2.0, 1.0] + [0.25] * 12, dtype=m.float64)),
    ],
    ids=[
        "relu",
        "elu",
        "leaky_relu",
        "hardtanh",
        "max",
        "min",
        "amax",
        "amin",
        "max_dim",
        "maximum",
        "minimum",
    ],  # fmt: skip
)
def test_nan_propagation_through_gradients_matches_torch(f):
    # 16 elements: torch's vectorised loops take them all (its scalar loop, which runs the
    # last few elements of other sizes, gives elu and hardtanh another gradient at NaN)
    _like_torch(f, [NAN, 1.0, 2.0, 0.0, *np.linspace(-1.5, 1.5, 12)])


def test_gradients_of_empty_float32_tensors_are_float32():
    for f in (lambda x: (x * 2).sum(), lambda x: x.exp().sum(), lambda x: (x @ x.T).sum()):
        x = ng.zeros(0, 3, dtype=ng.float32, requires_grad=True)
        f(x).backward()
        assert x.grad.dtype == np.float32 and x.grad.shape == (0, 3)


@pytest.mark.parametrize(
    "f",
    [
        lambda m, x: m.relu(x).sum(),
        lambda m, x: (2 * x).sum(),
        lambda m, x: x.abs().sum(),
        lambda m, x: x.clamp(-0.5, 0.5).sum(),
        lambda m, x: x.max(),
    ],
)
def test_hessians_of_piecewise_linear_functions_are_zero_like_torch(f):
    a = [1.0, -1.0, 0.25]
    h = ng.autograd.functional.hessian(lambda x: f(ng, x), ng.tensor(a))
    t = torch.autograd.functional.hessian(
        lambda x: f(torch, x), torch.tensor(a, dtype=torch.float64)
    )
    np.testing.assert_array_equal(h.numpy(), t.numpy())


@pytest.mark.parametrize("n", [2, 5, 100])
def test_an_in_place_change_through_detach_of_a_saved_value_raises_the_version_error(n):
    for lib in (ng, torch):
        x = lib.tensor(np.arange(1.0, n + 1), requires_grad=True)
        y = x**2
        x.detach().zero_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_the_version_check_of_a_small_saved_value_does_not_depend_on_an_earlier_backward():
    # (PyTorch's test_no_grad_modifies_version, after other graphs have come and gone)
    for _ in range(3):
        for _ in range(300):  # earlier graphs, enough to compact and reset the tape
            a = ng.tensor(np.ones(5), requires_grad=True)
            (a * a).sum().backward()
        x = ng.tensor(np.random.rand(5), requires_grad=True)
        y = ng.tensor(np.random.rand(5), requires_grad=True)
        z = (x * y).sum()
        with ng.no_grad():
            x *= 2
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()


class _NoneForFirst(ng.autograd.Function):
    @staticmethod
    def forward(ctx, x, z):
        return x * z

    @staticmethod
    def backward(ctx, grad):
        return None, grad


@pytest.mark.parametrize("n", [1, 5_000])
def test_a_custom_function_returning_none_leaves_the_gradient_none(n):
    x = ng.tensor(np.ones(n), requires_grad=True)
    z = ng.tensor(np.ones(n), requires_grad=True)
    _NoneForFirst.apply(x, z).sum().backward()
    assert x.grad is None
    np.testing.assert_array_equal(z.grad.numpy(), np.ones(n))
    with pytest.raises(RuntimeError, match="index 0 appears to not have been used"):
        ng.autograd.grad(_NoneForFirst.apply(x, z).sum(), [x, z])
    gx, gz = ng.autograd.grad(_NoneForFirst.apply(x, z).sum(), [x, z], allow_unused=True)
    assert gx is None and gz is not None
    # another path to x defines its gradient
    x.grad = None
    (_NoneForFirst.apply(x, z).sum() + 3 * x.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(n, 3.0))


def test_a_hook_on_an_unused_unbind_output_receives_none_like_torch():
    for lib in (ng, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, b = x.unbind()
        got = []
        b.register_hook(got.append)
        (a * 2).backward()
        assert got == [None]
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0])


# -- valid input that failed ------------------------------------------------------------------


def test_softmax_log_softmax_and_cross_entropy_accept_read_only_arrays():
    a = np.random.default_rng(0).random((3, 4))
    a.flags.writeable = False
    x = ng.from_numpy(a)
    t = torch.from_numpy(a.copy())
    target = [0, 1, 3]
    for r, e in (
        (ng.softmax(x, 1), torch.softmax(t, 1)),
        (ng.log_softmax(x, 1), torch.log_softmax(t, 1)),
        (
            ng.nn.functional.cross_entropy(x, ng.tensor(target)),
            torch.nn.functional.cross_entropy(t, torch.tensor(target)),
        ),
    ):
        np.testing.assert_allclose(r.numpy(), e.numpy())
    f32 = ng.ones(1, 4, dtype=ng.float32).expand(3, 4)
    np.testing.assert_allclose(ng.softmax(f32, 1).numpy(), np.full((3, 4), 0.25))


@pytest.mark.parametrize(
    "shapes",
    [((3, 0), (0, 4)), ((0, 3), (3, 4)), ((3, 4), (4, 0)), ((2, 0, 3), (3, 5)), ((0,), (0,))],
)
def test_backward_of_products_with_a_zero_size_dimension_gives_zero_gradients(shapes):
    for f in (
        lambda m, x, y: m.matmul(x, y),
        lambda m, x, y: m.einsum("...ij,jk->...ik", x, y) if y.ndim == 2 and x.ndim >= 2 else x @ y,
    ):
        got, want = [], []
        for lib, out in ((ng, got), (torch, want)):
            x = lib.ones(*shapes[0], dtype=lib.float64, requires_grad=True)
            y = lib.ones(*shapes[1], dtype=lib.float64, requires_grad=True)
            f(lib, x, y).sum().backward()
            out.extend([x.grad, y.grad])
        for g, t in zip(got, want, strict=True):
            assert tuple(g.shape) == tuple(t.shape)
            np.testing.assert_array_equal(g.numpy(), t.numpy())


def test_linear_backward_with_an_empty_batch_gives_zero_gradients():
    for lib in (ng, torch):
        x = lib.ones(0, 3, dtype=lib.float64, requires_grad=True)
        w = lib.ones(4, 3, dtype=lib.float64, requires_grad=True)
        b = lib.ones(4, dtype=lib.float64, requires_grad=True)
        lib.nn.functional.linear(x, w, b).sum().backward()
        assert tuple(x.grad.shape) == (0, 3)
        np.testing.assert_array_equal(w.grad.numpy(), np.zeros((4, 3)))
        np.testing.assert_array_equal(b.grad.numpy(), np.zeros(4))


@pytest.mark.parametrize(
    "a",
    [
        [[1.0, 2.0], [2.0, 4.0]],
        [[0.0, 0.0], [0.0, 0.0]],
        [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],
    ],
)
def test_det_backward_at_a_singular_matrix_gives_the_adjugate_gradient(a):
    # d det(A) / dA = adj(A)^T, which exists where A^-1 does not. (torch 2.13 returns zeros
    # wherever det(A) == 0, also where the adjugate is not zero; this is the derivative.)
    _, (g,) = _grads(ng, lambda m, x: m.linalg.det(x), a)
    a = np.array(a)
    n = len(a)
    cofactors = np.array(
        [
            [(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) for j in range(n)]
            for i in range(n)
        ]
    )
    np.testing.assert_allclose(g.numpy(), cofactors, atol=1e-9)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: x.sum(dim=0),
        lambda x: x.sum(dim=-1, keepdim=True),
        lambda x: x.mean(dim=0),
        lambda x: x.amax(dim=0),
        lambda x: x.prod(dim=0),
        lambda x: x.logsumexp(dim=0),
        lambda x: x.norm(dim=0),
        lambda x: x.max(dim=0).values,
        lambda x: x.cumsum(0),
        lambda x: x.softmax(0),
    ],
)
def test_reductions_with_a_dim_on_0d_tensors_match_torch(f):
    _like_torch(lambda m, x: f(x), 2.5)


def test_clamp_with_tensor_bounds_matches_torch():
    def f(m, x, lo, hi):
        return m.clamp(x, lo, hi) * m.tensor([1.0, 2.0, 3.0, 4.0], dtype=m.float64)

    _like_torch(f, [1.0, 5.0, -3.0, 0.5], [0.0, 0.0, 0.0, 0.5], [2.0, 2.0, 2.0, 1.0])
    _like_torch(lambda m, x, lo: x.clamp(min=lo), [[1.0, -1.0], [0.0, 3.0]], [0.5, 0.0])
    _like_torch(lambda m, x, hi: x.clamp(max=hi), [1.0, -1.0], [0.0])
    # min greater than max: every element becomes max
    _like_torch(lambda m, x, lo, hi: m.clamp(x, lo, hi), [1.0, -1.0], [3.0, 3.0], [2.0, 2.0])


# -- threads ------------------------------------------------------------------------------------


def test_threads_sharing_a_leaf_each_get_their_own_gradient_from_grad():
    w = ng.tensor(np.linspace(0.1, 1.0, 8), requires_grad=True)
    wrong = []

    def work(k):
        for i in range(200):
            x = ng.tensor(np.full(8, float(k + 1)))
            (g,) = ng.autograd.grad((w * x).sum(), [w], allow_unused=True)
            if g is None or not np.allclose(g.numpy(), k + 1):
                wrong.append((k, i, g))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


@pytest.mark.parametrize("n", [16, 4_096, 200_000])
def test_concurrent_backward_into_one_leaf_loses_no_update(n):
    w = ng.tensor(np.zeros(n), requires_grad=True)

    def work():
        for _ in range(50):
            (w * 1.0).sum().backward()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(w.grad.numpy(), np.full(n, 200.0))


def _owner_and_guest(lib, dtype, create_graph, backward, function):
    """The main thread records graphs and hands them to a second thread, which
    differentiates them while the main thread keeps recording and differentiating its own;
    returns (main thread's gradients, second thread's gradients) as numpy arrays."""
    w = lib.tensor(np.linspace(0.1, 1.0, 16), dtype=dtype, requires_grad=True)
    x = lib.tensor(np.linspace(0.2, 2.0, 16), dtype=dtype, requires_grad=True)

    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, grad):
            (a,) = ctx.saved_tensors
            return 2.0 * a * grad

    def graph(i):
        h = (x * (0.1 * i + 1.0)).exp() * w
        return (Square.apply(h) if function else h).sum()

    graphs = [graph(i) for i in range(30)]
    theirs, errors = [], []

    def guest():
        try:
            for y in graphs:
                if create_graph:
                    (g,) = lib.autograd.grad(y, x, create_graph=True)
                    (gg,) = lib.autograd.grad((g * g).sum(), x)
                    theirs.append(np.concatenate([g.detach().numpy(), gg.numpy()]))
                else:
                    (g,) = lib.autograd.grad(y, x)
                    theirs.append(g.numpy().copy())
        except Exception as e:  # (reported by the main thread)
            errors.append(e)

    t = threading.Thread(target=guest)
    t.start()
    ours = []
    for k in range(120):
        z = (w * w.sin() * (k + 1.0)).tanh().sum()
        if backward:
            w.grad = None
            z.backward()
            ours.append(w.grad.numpy().copy())
        else:
            ours.append(lib.autograd.grad(z, w)[0].numpy().copy())
    t.join()
    assert not errors, errors
    return np.array(ours), np.array(theirs)


@pytest.mark.parametrize(
    "dtype, create_graph, backward, function",
    [
        ("float64", False, False, False),  # (small float64: the deferred forward)
        ("float32", False, True, False),
        ("float64", True, False, False),
        ("float64", False, True, True),
        ("float32", True, False, True),
    ],
)
def test_a_second_thread_differentiating_a_graph_while_its_thread_keeps_recording_is_exact(
    dtype, create_graph, backward, function
):
    # (main thread: wrong gradients, or internal errors that left the tape broken)
    ours, theirs = _owner_and_guest(ng, getattr(ng, dtype), create_graph, backward, function)
    t_ours, t_theirs = _owner_and_guest(
        torch, getattr(torch, dtype), create_graph, backward, function
    )
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(ours, t_ours, rtol=tol, atol=tol)
    np.testing.assert_allclose(theirs, t_theirs, rtol=tol, atol=tol)
    q = ng.tensor([1.0, 2.0], requires_grad=True)  # (the tape is still whole)
    (q * q).sum().backward()
    np.testing.assert_array_equal(q.grad.numpy(), [2.0, 4.0])


# -- memory -------------------------------------------------------------------------------------


def test_a_reference_cycle_through_an_attribute_of_a_deferred_result_is_collected():
    import gc
    import weakref

    from nautograd.graph.tape import current_tape

    refs = []
    for _ in range(20):
        x = ng.tensor([0.5, -1.0, 2.0], requires_grad=True)
        h = ng.tanh(x * 2.0) + x  # small float64 ops: deferred results
        for _ in range(5):
            h = ng.nn.functional.softplus(h) * 0.5
        h.me = h  # a cycle through an attribute, before the value is ever read
        refs.append(weakref.ref(h))
        h.sum().backward()
        del h, x
    gc.collect()
    assert all(r() is None for r in refs)
    # nothing the dead graphs recorded is kept alive
    tape = current_tape()
    assert not tape.batches


def test_a_long_loop_with_attribute_cycles_on_deferred_results_holds_no_memory():
    import gc
    import tracemalloc

    def step():
        x = ng.tensor(np.linspace(-1.0, 1.0, 8), requires_grad=True)
        h = x
        for _ in range(20):
            h = ng.tanh(h) * 0.9 + x
        h.me = h
        h.sum().backward()

    tracemalloc.start()
    for _ in range(600):  # (the tape grows at first: dead graphs wait for the collector)
        step()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(600):
        step()
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown < 2_000_000, grown  # ~88 KB a step (~50 MB here) while the cycles leaked


@pytest.mark.parametrize(
    "f",
    [
        lambda m, x, c: m.maximum(x, c),
        lambda m, x, c: m.minimum(x, c),
        lambda m, x, c: m.where(x > c, x, c),
        lambda m, x, c: x.clamp(-1.0, 1.0) + c,
        lambda m, x, c: m.nn.functional.hardtanh(x) + c,
    ],
    ids=["maximum", "minimum", "where", "clamp", "hardtanh"],
)
def test_a_nan_gradient_does_not_pass_where_a_piecewise_op_selects_the_other_side(f):
    grads = []
    for lib in (ng, torch):
        x = lib.tensor([-2.0, 0.5, 3.0], dtype=lib.float64, requires_grad=True)
        c = lib.tensor([0.0, 0.0, 0.0], dtype=lib.float64, requires_grad=True)
        f(lib, x, c).backward(lib.tensor([NAN, INF, NAN], dtype=lib.float64))
        grads.append((x.grad, c.grad))
    for g, t in zip(grads[0], grads[1], strict=True):
        np.testing.assert_array_equal(g.numpy(), t.numpy())


def test_the_product_of_a_single_infinite_element_has_gradient_one_like_torch():
    _like_torch(lambda m, x: x.prod(), INF)
    _like_torch(lambda m, x: (x * 2.0).prod() * x, -INF)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_pointwise_losses_with_a_0d_operand_of_another_dtype_promote_like_torch(name):
    for lib_pairs in ((np.float32, np.float64), (np.float64, np.float32)):
        for swap in (False, True):
            a = np.ones((3, 3), lib_pairs[0]) * 0.5
            b = np.asarray(2.0, lib_pairs[1])
            if swap:
                a, b = b, a
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's broadcasting warning
                r = getattr(ng.nn.functional, name)(ng.tensor(a), ng.tensor(b))
                t = getattr(torch.nn.functional, name)(torch.tensor(a), torch.tensor(b))
            assert str(r.dtype) == str(t.dtype).removeprefix("torch."), (a.dtype, b.dtype)
            np.testing.assert_allclose(r.item(), t.item(), rtol=1e-6)


@pytest.mark.parametrize("name", ["huber_loss", "smooth_l1_loss"])
def test_piecewise_losses_at_an_infinite_difference_have_torchs_finite_gradient(name):
    def f(m, x):
        t = m.tensor([1.0, 0.0, 0.0, 0.0], dtype=m.float64)
        return getattr(m.nn.functional, name)(x, t, reduction="sum")

    _like_torch(f, [-INF, 0.5, 3.0, INF])


@pytest.mark.parametrize(
    "f",
    [
        lambda x: x.amax(),
        lambda x: x.amin(),
        lambda x: x.max(),
        lambda x: x.reshape(2, 2).amax(1),
        lambda x: x.norm(float("inf")),
    ],
    ids=["amax", "amin", "max", "amax_dim", "norm_inf"],
)
@pytest.mark.parametrize("g", [NAN, INF])
def test_a_non_finite_gradient_into_an_extreme_reduction_spreads_as_torchs(f, g):
    grads = []
    for lib in (ng, torch):
        x = lib.tensor([1.0, 3.0, 3.0, -2.0], dtype=lib.float64, requires_grad=True)
        y = f(x)
        y.backward(lib.full(tuple(y.shape), g, dtype=lib.float64))
        grads.append(x.grad)
    np.testing.assert_array_equal(grads[0].numpy(), grads[1].numpy())


@pytest.mark.parametrize("correction", [3, 4])
@pytest.mark.parametrize("values", [[1.0, 2.0, 4.0], [1.0, 2.0, 3.0]])
@pytest.mark.parametrize("create_graph", [False, True])
def test_var_and_std_of_every_element_with_correction_at_least_n_have_torchs_gradient(
    correction, values, create_graph
):
    # torch: inf (var) or nan (std) for a reduction of every element, nan where x == mean;
    # the formula 2 (x - mean) / (n - correction) for a reduction over a dim
    reductions = [
        lambda x: x.var(correction=correction),
        lambda x: x.var(dim=0, correction=correction),
        lambda x: x.std(correction=correction),
        lambda x: x.std(dim=0, correction=correction),
    ]
    for reduce in reductions:
        grads = []
        for lib in (torch, ng):
            x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
            with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
                y = reduce(x)
            (g,) = lib.autograd.grad(y, x, create_graph=create_graph)
            grads.append(np.asarray(g.detach()))
        np.testing.assert_array_equal(grads[1], grads[0])


@pytest.mark.parametrize("loss", ["huber_loss", "smooth_l1_loss"])
def test_huber_and_smooth_l1_gradient_at_a_nan_difference_is_nan_as_torch(loss):
    nan, inf = float("nan"), float("inf")
    values, targets = [nan, inf, -inf, 0.5, 3.0, inf], [0.5, inf, 0.0, nan, 1.0, 1.0]
    x = ng.tensor(values, requires_grad=True)
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    for reduction in ("sum", "none"):
        x.grad = None
        tx.grad = None
        r = getattr(ng.nn.functional, loss)(x, ng.tensor(targets), reduction=reduction)
        tr = getattr(torch.nn.functional, loss)(
            tx, torch.tensor(targets, dtype=torch.float64), reduction=reduction
        )
        r.sum().backward()
        tr.sum().backward()
        np.testing.assert_allclose(r.detach().numpy(), tr.detach().numpy(), equal_nan=True)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), equal_nan=True)


@pytest.mark.parametrize(
    "shapes", [((3, 1), (1, 4)), ((3, 1), (1,)), ((1,), (1, 4)), ((20, 1), (1, 20))]
)
@pytest.mark.parametrize("requires_grad", [False, True])  # eager, and the deferred forward
def test_matmul_with_inner_dimension_one_gives_torchs_signed_zeros(shapes, requires_grad):
    # torch's mm of inner size 1 keeps a -0.0 product; its mv, vm and dot add from +0.0
    rng = np.random.default_rng(0)
    a = np.where(rng.uniform(size=shapes[0]) < 0.5, -1.0, 0.0)
    b = np.where(rng.uniform(size=shapes[1]) < 0.5, 0.0, -2.0)
    result = (ng.tensor(a, requires_grad=requires_grad) @ ng.tensor(b)).detach().numpy()
    expected = (torch.tensor(a) @ torch.tensor(b)).numpy()
    np.testing.assert_array_equal(np.signbit(result), np.signbit(expected))
    np.testing.assert_array_equal(result, expected)
