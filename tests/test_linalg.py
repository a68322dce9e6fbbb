"""linalg.solve_triangular and cholesky_solve through the public API, against torch (the op
table's tests cover their forward, VJP and gradcheck on their own)."""

import numpy as np
import pytest
import torch

import nautograd as ng


def _spd(rng, n):
    a = rng.standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_solve_triangular_left_false_matches_torch(rng, upper, unitriangular):
    a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    b = rng.standard_normal((3, 4))
    grads = {}
    for lib in (ng, torch):
        A = lib.tensor(a, requires_grad=True)
        B = lib.tensor(b, requires_grad=True)
        X = lib.linalg.solve_triangular(A, B, upper=upper, left=False, unitriangular=unitriangular)
        (X * lib.tensor(np.arange(12.0).reshape(3, 4))).sum().backward()
        grads[lib.__name__] = (X.detach().numpy(), A.grad.numpy(), B.grad.numpy())
    for mine, theirs in zip(grads["nautograd"], grads["torch"], strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)


def test_solve_triangular_singular_diagonal_gives_inf_as_torch():
    a = np.array([[1.0, 0.0], [2.0, 0.0]])
    b = np.array([[1.0], [1.0]])
    mine = ng.linalg.solve_triangular(ng.tensor(a), ng.tensor(b), upper=False).numpy()
    theirs = torch.linalg.solve_triangular(torch.tensor(a), torch.tensor(b), upper=False).numpy()
    np.testing.assert_array_equal(mine, theirs)


def test_solve_triangular_mismatched_shapes_raise_naming_the_op():
    with pytest.raises(RuntimeError, match=r"solve_triangular\(\).*\(3, 3\).*\(2, 1\)"):
        ng.linalg.solve_triangular(ng.eye(3), ng.ones(2, 1), upper=True)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_of_a_factor_matches_torch_with_second_order(rng, upper):
    # a GP's data fit: alpha = K^-1 y from K's Cholesky factor; its gradient and a
    # Hessian-vector product through create_graph
    k = _spd(rng, 5)
    y = rng.standard_normal((5, 2))
    v = rng.standard_normal((5, 5))
    out = {}
    for lib in (ng, torch):
        K = lib.tensor(k, requires_grad=True)
        Y = lib.tensor(y, requires_grad=True)
        L = lib.linalg.cholesky(K)
        factor = L.mT if upper else L
        alpha = lib.cholesky_solve(Y, factor, upper=upper)
        fit = (Y * alpha).sum()
        gk, gy = lib.autograd.grad(fit, (K, Y), create_graph=True)
        (hv,) = lib.autograd.grad((gk * lib.tensor(v)).sum(), K)
        out[lib.__name__] = [t.detach().numpy() for t in (alpha, gk, gy, hv)]
    for mine, theirs in zip(out["nautograd"], out["torch"], strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-11)


def test_cholesky_solve_is_a_tensor_method():
    L = ng.linalg.cholesky(ng.tensor(_spd(np.random.default_rng(0), 3)))
    b = ng.ones(3, 1, dtype=ng.float64)
    np.testing.assert_allclose(b.cholesky_solve(L).numpy(), ng.cholesky_solve(b, L).numpy())
