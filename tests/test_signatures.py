"""Every public function nautograd shares with torch takes torch 2.13's argument names, in
torch's positional order: read from torch itself (the signature lines of its functions'
docstrings, and the Python signatures of nn.functional)."""

import inspect
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import nautograd as ng

# torch's arguments that have no meaning on nautograd's CPU tensors
NOT_APPLICABLE = {"out", "layout", "pin_memory", "memory_format", "_stacklevel"}
# names torch's docstrings give that torch itself does not take: {function: {documented:
# what torch binds (None: positional only)}} (test_torch_takes_its_bound_names_not_...)
TORCH_BINDS = {
    "cholesky_solve": {"B": "input", "L": "input2"},
    "true_divide": {"dividend": "input", "divisor": "other"},
    "broadcast_to": {"shape": "size"},
    "from_numpy": {"ndarray": None},
}


def _split(text):
    """The comma-separated parts of ``text`` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c in "[(" and 1 or (c in "])" and -1 or 0)
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def _torch_overloads(name, fn):
    """Each documented overload of torch.<name>: [(parameter, keyword_only)]."""
    overloads = []
    for line in (fn.__doc__ or "").splitlines():
        m = re.match(rf"^\s*{re.escape(name)}\((.*)\)\s*->", line)
        if not m:
            continue
        params = []
        keyword_only = False
        for part in _split(m.group(1)):
            part = part.strip().replace("\\*", "*")
            if not part:
                continue
            if part == "*":
                keyword_only = True
                continue
            pname = part.partition("=")[0].split(":")[0].strip().lstrip("*")
            pname = TORCH_BINDS.get(name, {}).get(pname, pname)
            if pname is not None:
                params.append((pname, keyword_only or part.startswith("*")))
        overloads.append(params)
    return overloads


def _shared_functions():
    names = []
    for name in sorted(ng.__all__):
        ours, theirs = getattr(ng, name), getattr(torch, name, None)
        if theirs is None or isinstance(ours, type) or not callable(ours):
            continue
        if _torch_overloads(name, theirs):
            names.append(name)
    return names


def _accepts(sig, pname):
    params = sig.parameters
    return pname in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _positional(sig):
    return [
        p.name
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


SHARED = _shared_functions()


def test_torch_takes_its_bound_names_not_the_documented_ones():
    b, factor = torch.ones(2, 1), torch.eye(2)
    calls = {
        "cholesky_solve": (lambda: torch.cholesky_solve(B=b, L=factor),
                           lambda: torch.cholesky_solve(input=b, input2=factor)),
        "true_divide": (lambda: torch.true_divide(dividend=b, divisor=2.0),
                        lambda: torch.true_divide(input=b, other=2.0)),
        "broadcast_to": (lambda: torch.broadcast_to(b, shape=(3, 2, 1)),
                         lambda: torch.broadcast_to(b, size=(3, 2, 1))),
        "from_numpy": (lambda: torch.from_numpy(ndarray=np.ones(2)),
                       lambda: torch.from_numpy(np.ones(2))),
    }  # fmt: skip
    assert set(calls) == set(TORCH_BINDS)
    for documented, bound in calls.values():
        with pytest.raises(TypeError):
            documented()
        bound()


def test_the_check_covers_the_functions_nautograd_shares_with_torch():
    assert len(SHARED) > 150


@pytest.mark.parametrize("name", SHARED)
def test_function_takes_torchs_argument_names_in_torchs_order(name):
    sig = inspect.signature(getattr(ng, name))
    variadic = any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())
    for params in _torch_overloads(name, getattr(torch, name)):
        for pname, keyword_only in params:
            if pname in NOT_APPLICABLE or (variadic and not keyword_only):
                continue  # (*size: torch documents its sizes by name, nautograd as *size)
            assert _accepts(sig, pname), f"{name}{sig} has no {pname!r} (torch: {params})"
    # the first overload's positional arguments, by position
    first = [p for p, kw in _torch_overloads(name, getattr(torch, name))[0] if not kw]
    if not variadic:
        ours = _positional(sig)
        assert ours[: len(first)] == first[: len(ours)], f"{name}{sig} against torch's {first}"


F_SHARED = sorted(
    name
    for name in dir(ng.nn.functional)
    if not name.startswith("_")
    and callable(getattr(TF, name, None))
    and not isinstance(getattr(TF, name), type)
)


@pytest.mark.parametrize("name", F_SHARED)
def test_nn_functional_takes_torchs_arguments_in_torchs_order(name):
    try:
        theirs = inspect.signature(getattr(TF, name))
    except (TypeError, ValueError):
        pytest.skip("torch's function has no Python signature")
    if all(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in theirs.parameters.values()):
        pytest.skip("torch's function takes *args, **kwargs")
    ours = inspect.signature(getattr(ng.nn.functional, name))
    for pname in theirs.parameters:
        if pname not in NOT_APPLICABLE:
            assert _accepts(ours, pname), f"{name}{ours} has no {pname!r}"
    positional = [p for p in _positional(theirs) if p not in NOT_APPLICABLE]
    assert _positional(ours)[: len(positional)] == positional, f"{name}{ours} vs {theirs}"


# what those arguments do, against torch


def _both(f):
    """f(lib) for torch and nautograd, as numpy arrays."""
    return [np.asarray(f(lib).detach()) for lib in (torch, ng)]


def _close(f, **kw):
    want, got = _both(f)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, **kw)


A = np.array([[7.0, -7.5, 0.5], [-3.0, 9.0, 2.0]])
B = np.array([[2.0, 2.0, -0.3], [2.0, -4.0, 0.7]])


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_rounding_modes_as_torch_with_a_zero_gradient(mode):
    _close(lambda lib: lib.div(lib.tensor(A), lib.tensor(B), rounding_mode=mode))
    _close(lambda lib: lib.tensor(A).div(2.5, rounding_mode=mode))
    ints = (np.array([7, -7, 6, -1]), np.array([2, 2, -4, 3]))
    _close(lambda lib: lib.div(lib.tensor(ints[0]), lib.tensor(ints[1]), rounding_mode=mode))
    _close(lambda lib: lib.tensor(ints[0]).divide(3, rounding_mode=mode))
    _close(lambda lib: lib.tensor(A).div_(lib.tensor(B), rounding_mode=mode))
    x = ng.tensor(A, requires_grad=True)
    (g,) = ng.autograd.grad(ng.div(x, 2.0, rounding_mode=mode).sum(), x)
    assert not np.any(g.numpy())
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ng.div(ng.tensor([1, 2]), ng.tensor([0, 1]), rounding_mode=mode)
    zero = np.array([5.0, -5.0, 0.0])
    _close(lambda lib: lib.div(lib.tensor(zero), 0.0, rounding_mode=mode))


def test_div_bad_rounding_mode_raises_torchs_error():
    for lib in (torch, ng):
        with pytest.raises(RuntimeError, match="div expected rounding_mode to be one of None"):
            lib.div(lib.tensor([1.0]), 2.0, rounding_mode="round")


def test_floor_division_operator_and_floor_divide_as_torch():
    _close(lambda lib: lib.tensor(A) // lib.tensor(B))
    _close(lambda lib: lib.tensor(A) // 2)
    _close(lambda lib: 7.5 // lib.tensor(B))
    _close(lambda lib: lib.floor_divide(lib.tensor([7, -7]), 2))
    _close(lambda lib: lib.tensor([7, -7]).floor_divide(lib.tensor([2, 3])))
    x = ng.tensor([7.0, -7.0])
    x //= 2
    np.testing.assert_array_equal(x.numpy(), [3.0, -4.0])


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "cumsum", "cumprod", "softmax"])
def test_dtype_casts_the_input_first_as_torch(name):
    args = {"sum": (), "mean": (), "prod": (), "cumsum": (1,), "cumprod": (1,), "softmax": (1,)}
    a = np.array([[1.5, 2.0, 3.0], [4.0, -1.0, 0.5]], dtype=np.float32)

    def f(lib):
        return getattr(lib, name)(lib.tensor(a), *args[name], dtype=lib.float64)

    _close(f, rtol=1e-12)
    _close(lambda lib: getattr(lib.tensor(a), name)(*args[name], dtype=lib.float64), rtol=1e-12)
    if name in ("sum", "cumsum", "prod"):  # integers to floating, and the other way round
        ints = np.array([[1, 2], [3, 4]])
        _close(lambda lib: getattr(lib, name)(lib.tensor(ints), *args[name], dtype=lib.float32))
    # the cast is recorded: the gradient comes back in the input's dtype
    x = ng.tensor(a, requires_grad=True)
    y = getattr(ng, name)(x, *args[name], dtype=ng.float64)
    (g,) = ng.autograd.grad((y * y).sum(), x)
    xt = torch.tensor(a, requires_grad=True)
    yt = getattr(torch, name)(xt, *args[name], dtype=torch.float64)
    (gt,) = torch.autograd.grad((yt * yt).sum(), xt)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-5)


def test_cholesky_upper_and_cholesky_solve_by_torchs_names():
    m = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    _close(lambda lib: lib.cholesky(lib.tensor(m), upper=True))
    _close(lambda lib: lib.linalg.cholesky(lib.tensor(m), upper=True))
    b = np.arange(6.0).reshape(3, 2)
    _close(
        lambda lib: lib.cholesky_solve(
            lib.tensor(b), input2=lib.linalg.cholesky(lib.tensor(m), upper=True), upper=True
        )
    )


def test_tensors_by_torchs_keyword_names():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2)
    _close(lambda lib: lib.mm(lib.tensor(a), mat2=lib.tensor(b)))
    _close(lambda lib: lib.mv(lib.tensor(a), vec=lib.tensor(b[:, 0])))
    _close(lambda lib: lib.dot(lib.tensor(a[0]), tensor=lib.tensor(b[:, 1])))
    _close(lambda lib: lib.outer(lib.tensor(a[0]), vec2=lib.tensor(b[0])))
    _close(lambda lib: lib.add(lib.tensor(a), other=lib.tensor(a), alpha=2))
    with pytest.raises(TypeError, match="missing required argument 'mat2'"):
        ng.mm(ng.tensor(a), other=ng.tensor(b))


def test_numpy_names_as_torch():
    a = np.arange(24.0).reshape(2, 3, 4)
    _close(lambda lib: lib.swapaxes(lib.tensor(a), 0, 2))
    _close(lambda lib: lib.swapaxes(lib.tensor(a), axis0=1, axis1=2))
    _close(lambda lib: lib.tensor(a).swapaxes(0, 1))
    _close(lambda lib: lib.swapdims(lib.tensor(a), 0, 1))
    _close(lambda lib: lib.concatenate([lib.tensor(a), lib.tensor(a)], axis=1))
    _close(lambda lib: lib.true_divide(lib.tensor(a), other=2.0))
    _close(lambda lib: lib.broadcast_to(lib.tensor(a[0, 0]), size=(3, 4)))
    _close(lambda lib: lib.gather(lib.tensor(a[0]), 1, lib.tensor([[0, 3], [1, 1], [2, 0]])))
    _close(
        lambda lib: lib.gather(lib.tensor(a[0]), 1, lib.tensor([[0], [1], [2]]), sparse_grad=False)
    )
    _close(lambda lib: lib.from_numpy(a))
    _close(lambda lib: lib.slogdet(input=lib.tensor(a[0, :3, :3] + 5 * np.eye(3))).logabsdet)


def test_a_generator_of_its_own_as_torch():
    g1 = ng.Generator().manual_seed(5)
    g2 = ng.Generator().manual_seed(5)
    ng.manual_seed(0)
    a = ng.rand(3, generator=g1)
    b = ng.rand(3)  # the global generator did not move
    ng.manual_seed(0)
    np.testing.assert_array_equal(ng.rand(3).numpy(), b.numpy())
    np.testing.assert_array_equal(ng.rand(3, generator=g2).numpy(), a.numpy())
    for f in (
        lambda g: ng.randn(2, 2, generator=g),
        lambda g: ng.randint(0, 10, (4,), generator=g),
        lambda g: ng.rand_like(ng.zeros(3), generator=g),
        lambda g: ng.randn_like(ng.zeros(3), generator=g),
        lambda g: ng.zeros(4).uniform_(generator=g),
    ):
        state = g1.get_state()
        first = f(g1).numpy()
        g1.set_state(state)
        np.testing.assert_array_equal(f(g1).numpy(), first)
    assert g1.initial_seed() == 5 and str(g1.device) == "cpu"
    with pytest.raises(RuntimeError, match="not supported"):
        ng.Generator(device="cuda")


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_weighted_pointwise_losses_as_torch(name, reduction):
    x, t, w = A, B, np.abs(B) + 0.1

    def f(lib):
        return getattr(lib.nn.functional, name)(
            lib.tensor(x), lib.tensor(t), reduction=reduction, weight=lib.tensor(w)
        )

    _close(f, rtol=1e-12)
    for lib in (torch, ng):
        with pytest.raises(ValueError, match="Weights and input must have the same size"):
            getattr(lib.nn.functional, name)(lib.tensor(x), lib.tensor(t), weight=lib.tensor(w[0]))


@pytest.mark.parametrize("size_average, reduce", [(None, False), (False, None), (True, True)])
def test_deprecated_size_average_and_reduce_as_torch(size_average, reduce):
    x, t = A, B
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss"):
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            ours = getattr(ng.nn.functional, name)(ng.tensor(x), ng.tensor(t), size_average, reduce)
        with pytest.warns(UserWarning):
            ref = getattr(TF, name)(torch.tensor(x), torch.tensor(t), size_average, reduce)
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)
    logits, target = np.log(np.abs(A) + 0.1), np.array([0, 2])
    with pytest.warns(UserWarning):
        ours = ng.nn.functional.cross_entropy(
            ng.tensor(logits), ng.tensor(target), None, size_average, -100, reduce
        )
    with pytest.warns(UserWarning):
        ref = TF.cross_entropy(
            torch.tensor(logits), torch.tensor(target), None, size_average, -100, reduce
        )
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)


def test_activation_inplace_flag_positionally_as_torch():
    for name, args in (("relu", ()), ("elu", (0.5,)), ("leaky_relu", (0.2,))):
        x = ng.tensor(A.copy())
        y = getattr(ng.nn.functional, name)(x, *args, True)
        xt = torch.tensor(A.copy())
        getattr(TF, name)(xt, *args, True)
        assert y is x
        np.testing.assert_allclose(x.numpy(), xt.numpy())
