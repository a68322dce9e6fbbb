"""Reductions: zeros, ties, (values, indices) results and errors, against torch."""

import math

import numpy as np
import pytest
import torch

import nautograd as ng


def _vjp_both(fn_ng, fn_torch, a, rng):
    x, tx = ng.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    out, ref = fn_ng(x), fn_torch(tx)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    cot = rng.standard_normal(tuple(ref.shape))
    (g,) = ng.autograd.grad(out, [x], ng.tensor(cot))
    (tg,) = torch.autograd.grad(ref, [tx], torch.tensor(cot))
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)
    return g


@pytest.mark.parametrize("zeros", [[], [2], [1, 4]], ids=["none", "one", "two"])
def test_prod_with_zeros_matches_torch(zeros, rng):
    a = rng.uniform(0.5, 1.5, (3, 6))
    a[:, zeros] = 0.0
    _vjp_both(lambda x: x.prod(1), lambda x: x.prod(1), a, rng)
    _vjp_both(lambda x: x.prod(), lambda x: x.prod(), a[:1], rng)


@pytest.mark.parametrize(
    "zeros", [[], [0], [2], [1, 4], [5]], ids=["none", "first", "one", "two", "last"]
)
def test_cumprod_with_zeros_matches_torch(zeros, rng):
    a = rng.uniform(0.5, 1.5, (2, 6))
    a[:, zeros] = 0.0
    _vjp_both(lambda x: x.cumprod(1), lambda x: x.cumprod(1), a, rng)


def test_prod_over_several_dims():
    a = np.arange(1.0, 25.0).reshape(2, 3, 4)
    x = ng.tensor(a, requires_grad=True)
    y = x.prod((0, 2))
    np.testing.assert_allclose(y.detach().numpy(), a.prod((0, 2)))
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), a.prod((0, 2), keepdims=True) / a)


def test_amax_and_max_split_ties_evenly_as_torch(rng):
    a = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    _vjp_both(lambda x: x.amax(1), lambda x: x.amax(1), a, rng)
    _vjp_both(lambda x: x.max(), lambda x: x.max(), a, rng)
    _vjp_both(lambda x: x.min(), lambda x: x.min(), a, rng)
    _vjp_both(
        lambda x: ng.linalg.vector_norm(x, math.inf),
        lambda x: torch.linalg.vector_norm(x, math.inf),
        a,
        rng,
    )


def test_max_with_dim_returns_values_and_indices(rng):
    a = rng.standard_normal((3, 5))
    x = ng.tensor(a, requires_grad=True)
    values, indices = ng.max(x, 1)
    ref = torch.max(torch.tensor(a), 1)
    np.testing.assert_array_equal(values.detach().numpy(), ref.values.numpy())
    np.testing.assert_array_equal(indices.numpy(), ref.indices.numpy())
    assert values.requires_grad and not indices.requires_grad
    assert indices.dtype == ng.int64
    r = x.min(dim=0, keepdim=True)
    assert r.values.shape == (1, 5) and r.indices.shape == (1, 5)
    _vjp_both(lambda x: x.max(1).values, lambda x: x.max(1).values, a, rng)
    _vjp_both(
        lambda x: x.min(-2, keepdim=True).values, lambda x: x.min(-2, keepdim=True).values, a, rng
    )


def test_max_of_two_tensors_is_maximum(rng):
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    np.testing.assert_array_equal(ng.max(ng.tensor(a), ng.tensor(b)).numpy(), np.maximum(a, b))


def test_std_with_zero_spread_has_zero_gradient():
    x = ng.tensor([2.0, 2.0, 2.0], requires_grad=True)
    x.std().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])


def test_var_unbiased_false_is_correction_zero(rng):
    a = rng.standard_normal((4, 3))
    _vjp_both(lambda x: x.var(0, unbiased=False), lambda x: x.var(0, unbiased=False), a, rng)
    _vjp_both(
        lambda x: x.std(dim=(0, 1), correction=0), lambda x: x.std(dim=(0, 1), correction=0), a, rng
    )


def test_logcumsumexp_with_large_values_does_not_overflow(rng):
    a = np.array([[800.0, 1.0, 799.0, -900.0]])
    _vjp_both(lambda x: x.logcumsumexp(1), lambda x: x.logcumsumexp(1), a, rng)


def test_reduction_errors_name_the_op():
    with pytest.raises(IndexError, match=r"amax\(\): Dimension out of range"):
        ng.ones(2, 3).amax(2)
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim to be specified"):
        ng.ones(0).max()
    with pytest.raises(IndexError, match=r"argmax\(\): Dimension out of range"):
        ng.ones(2).argmax(1)
    with pytest.raises(IndexError, match=r"cumsum\(\): Dimension out of range"):
        ng.ones(2).cumsum(-2)


def test_integer_cumsum_widens_to_int64_as_torch():
    x = ng.tensor(np.array([1, 2, 3], np.int32))
    assert x.cumsum(0).dtype == torch_dtype_name_to_ng(
        torch.tensor([1], dtype=torch.int32).cumsum(0).dtype
    )


def torch_dtype_name_to_ng(dt):
    return np.dtype(str(dt).replace("torch.", ""))
