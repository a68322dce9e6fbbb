"""ng.autograd.functional against torch.autograd.functional: values, shapes, errors."""

import numpy as np
import pytest
import torch

import nautograd as ng
from nautograd.autograd import functional as F

TF = torch.autograd.functional


def _t(lib, a):
    return ng.tensor(a) if lib is ng else torch.tensor(a)


def _close(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _close(x, y)
        return
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


# functions written once, run with either library's tensors
def f_vec(x):
    return (x.exp() * x.sin()).reshape(2, 2)  # (4,) -> (2, 2)


def f_pair(x, y):
    return (x * y).tanh().sum(), x.exp() @ y.reshape(3, 1)


def f_scalar(x):
    return (x * x * x).sum() + (x.sin() * x[0]).sum()


def f_scalar2(x, y):
    return ((x @ y).exp() + (x * x).sum() * y.sum()).sum()


@pytest.fixture
def data(rng):
    return {
        "x4": rng.uniform(-1, 1, 4),
        "x3": rng.uniform(-1, 1, 3),
        "y3": rng.uniform(-1, 1, 3),
        "m": rng.uniform(-1, 1, (2, 3)),
        "v4": rng.standard_normal(4),
        "v22": rng.standard_normal((2, 2)),
    }


def test_jacobian_matches_torch(data):
    for lib_f in (f_vec,):
        _close(
            F.jacobian(lib_f, ng.tensor(data["x4"])), TF.jacobian(lib_f, torch.tensor(data["x4"]))
        )
    ours = F.jacobian(f_pair, (ng.tensor(data["x3"]), ng.tensor(data["y3"])))
    ref = TF.jacobian(f_pair, (torch.tensor(data["x3"]), torch.tensor(data["y3"])))
    _close(ours, ref)
    assert ours[1][0].shape == (1, 3)  # output (1,) x input (3,)


def test_hessian_matches_torch(data):
    _close(
        F.hessian(f_scalar, ng.tensor(data["x4"])), TF.hessian(f_scalar, torch.tensor(data["x4"]))
    )
    ours = F.hessian(f_scalar2, (ng.tensor(data["m"]), ng.tensor(data["y3"])))
    ref = TF.hessian(f_scalar2, (torch.tensor(data["m"]), torch.tensor(data["y3"])))
    _close(ours, ref)
    assert ours[0][1].shape == (2, 3, 3)


def test_hessian_of_a_cube_is_diagonal():
    h = F.hessian(lambda x: (x**3).sum(), ng.ones(2, dtype=ng.float64))
    np.testing.assert_array_equal(h.numpy(), [[6.0, 0.0], [0.0, 6.0]])


@pytest.mark.parametrize("name", ["vjp", "jvp"])
def test_vjp_and_jvp_match_torch(name, data):
    x, v_out, v_in = data["x4"], data["v22"], data["v4"]
    v = v_out if name == "vjp" else v_in
    ours = getattr(F, name)(f_vec, ng.tensor(x), ng.tensor(v))
    ref = getattr(TF, name)(f_vec, torch.tensor(x), torch.tensor(v))
    _close(ours, ref)


@pytest.mark.parametrize("name", ["vhp", "hvp"])
def test_vhp_and_hvp_match_torch(name, data):
    ours = getattr(F, name)(f_scalar, ng.tensor(data["x4"]), ng.tensor(data["v4"]))
    ref = getattr(TF, name)(f_scalar, torch.tensor(data["x4"]), torch.tensor(data["v4"]))
    _close(ours, ref)
    args = (ng.tensor(data["m"]), ng.tensor(data["y3"]))
    vs = (ng.tensor(np.ones((2, 3))), ng.tensor(np.arange(3.0)))
    targs = tuple(torch.tensor(a.numpy()) for a in args)
    tvs = tuple(torch.tensor(a.numpy()) for a in vs)
    _close(getattr(F, name)(f_scalar2, args, vs), getattr(TF, name)(f_scalar2, targs, tvs))


def test_create_graph_results_are_differentiable(data):
    x = ng.tensor(data["x4"], requires_grad=True)
    tx = torch.tensor(data["x4"], requires_grad=True)
    _, hv = F.hvp(f_scalar, x, ng.ones(4, dtype=ng.float64), create_graph=True)
    _, thv = TF.hvp(f_scalar, tx, torch.ones(4, dtype=torch.float64), create_graph=True)
    assert hv.requires_grad
    (g,) = ng.autograd.grad(hv.sum(), x)
    (tg,) = torch.autograd.grad(thv.sum(), tx)
    _close(g, tg)
    j = F.jacobian(f_vec, x)
    assert not j.requires_grad  # without create_graph the results are detached


def test_unused_input_gives_zeros_or_raises_in_strict_mode():
    def f(x, y):
        return x * 2

    jac = F.jacobian(f, (ng.ones(2, dtype=ng.float64), ng.ones(3, dtype=ng.float64)))
    np.testing.assert_array_equal(jac[1].numpy(), np.zeros((2, 3)))
    with pytest.raises(
        RuntimeError, match="Output 0 of the user-provided function is independent of input 1"
    ):
        F.jacobian(f, (ng.ones(2), ng.ones(3)), strict=True)


def test_functional_errors_have_torchs_text():
    x = ng.ones(3, dtype=ng.float64)
    with pytest.raises(RuntimeError, match="^The vector v can only be None if the user-provided"):
        F.vjp(lambda t: t * 2, x)
    with pytest.raises(
        RuntimeError,
        match=r"^v has invalid size: should be torch.Size\(\[3\]\) but got torch.Size\(\[2\]\).$",
    ):
        F.vjp(lambda t: t * 2, x, ng.ones(2))
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        F.vjp(lambda t: [t], x, ng.ones(3))
    with pytest.raises(RuntimeError, match="should contain a single element"):
        F.hessian(lambda t: t * 2, x)
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        F.hvp(lambda t: (t.sum(), t.sum()), x, x)
    with pytest.raises(AssertionError, match='Expected strategy to be either "forward-mode"'):
        F.jacobian(lambda t: t, x, strategy="sideways")
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True`"):
        F.jacobian(lambda t: t, x, strict=True, vectorize=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not"):
        F.jacobian(lambda t: ng.ones(2), x, strict=True)
    for name, Ft in (("ours", F), ("torch", TF)):
        lib = ng if name == "ours" else torch
        t = lib.ones(3, dtype=lib.float64)
        with pytest.raises(RuntimeError) as err:
            Ft.vjp(lambda a: a * 2, t, lib.ones(2, dtype=lib.float64))
        if name == "ours":
            ours = str(err.value)
        else:
            assert ours == str(err.value)
