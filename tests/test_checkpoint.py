"""utils.checkpoint against torch.utils.checkpoint."""

import warnings

import numpy as np
import pytest
import torch
import torch.utils.checkpoint

import nautograd as ng

X = np.random.RandomState(0).rand(4, 3)
WEIGHTS = [
    np.linspace(-1, 1, 15).reshape(5, 3),
    np.linspace(0, 0.5, 5),
    np.linspace(-1, 1, 10).reshape(2, 5),
    np.linspace(0, 1, 2),
]


def _layers(lib):
    lin1 = lib.nn.Linear(3, 5).double()
    lin2 = lib.nn.Linear(5, 2).double()
    with lib.no_grad():
        for p, w in zip([*lin1.parameters(), *lin2.parameters()], WEIGHTS, strict=True):
            p.copy_(lib.tensor(w))
    return lin1, lin2


def _both(program):
    results = []
    for lib in (torch, ng):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = program(lib)
        results.append([None if t is None else np.asarray(t) for t in out])
    for got, want in zip(results[1], results[0], strict=True):
        assert (got is None) == (want is None)
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_gives_torchs_values_and_gradients(use_reentrant):
    def program(lib):
        lin1, lin2 = _layers(lib)
        x = lib.tensor(X, requires_grad=True)

        def segment(h):
            return lin2(lib.tanh(lin1(h)))

        y = lib.utils.checkpoint.checkpoint(segment, x, use_reentrant=use_reentrant)
        (y**2).sum().backward()
        return [y.detach(), x.grad, lin1.weight.grad, lin2.bias.grad]

    _both(program)


def test_checkpoint_without_reentry_works_with_autograd_grad_and_closed_over_leaves():
    def program(lib):
        lin1, lin2 = _layers(lib)
        x = lib.tensor(X, requires_grad=True)
        y = lib.utils.checkpoint.checkpoint(
            lambda h: lin2(lib.tanh(lin1(h))), x, use_reentrant=False
        )
        return lib.autograd.grad((y**3).sum(), [lin1.weight, x])

    _both(program)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_sequential_matches_torch(use_reentrant):
    def program(lib):
        lin1, lin2 = _layers(lib)
        x = lib.tensor(X, requires_grad=True)
        model = lib.nn.Sequential(lin1, lib.nn.Tanh(), lin2, lib.nn.Tanh())
        cp = lib.utils.checkpoint
        z = cp.checkpoint_sequential(model, 2, x, use_reentrant=use_reentrant)
        z.sum().backward()
        return [z.detach(), x.grad, lin1.weight.grad, lin2.weight.grad]

    _both(program)


def test_recomputation_sees_the_same_random_numbers():
    ng.manual_seed(3)
    x = ng.rand(50, dtype=ng.float64, requires_grad=True)

    def segment(h):
        return ng.nn.functional.dropout(h, 0.5, True) * h

    y = ng.utils.checkpoint.checkpoint(segment, x, use_reentrant=False)
    y.sum().backward()
    kept = y.detach().numpy() != 0
    # d(mask * h * h / (1 - p))/dh = 2 * mask * h / (1 - p): zero exactly where the forward's
    # mask was
    np.testing.assert_array_equal(x.grad.numpy() != 0, kept)
    np.testing.assert_allclose(x.grad.numpy()[kept], 4 * x.detach().numpy()[kept])


def test_second_derivatives_through_a_checkpoint():
    def program(lib):
        x = lib.tensor([0.3, -1.2, 2.0], dtype=lib.float64, requires_grad=True)
        y = lib.utils.checkpoint.checkpoint(lambda h: (h.sin() * h).sum(), x, use_reentrant=False)
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        (h,) = lib.autograd.grad(g.sum(), x)
        return [g.detach(), h]

    _both(program)


def test_checkpoint_errors_and_warnings_are_torchs():
    x = ng.rand(3, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        ng.utils.checkpoint.checkpoint(lambda h: h.exp(), x)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: b"):
        ng.utils.checkpoint.checkpoint(lambda h, b=1: h * b, x, b=2, use_reentrant=True)
    w = ng.rand(3, requires_grad=True)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        y = ng.utils.checkpoint.checkpoint(lambda h: h * w, x.detach(), use_reentrant=True)
    assert not y.requires_grad
    y = ng.utils.checkpoint.checkpoint(lambda h: h * w, x.detach(), use_reentrant=False)
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), x.detach().numpy())


def test_non_tensor_arguments_and_outputs_pass_through():
    x = ng.tensor([1.0, 2.0], dtype=ng.float64, requires_grad=True)
    y, label = ng.utils.checkpoint.checkpoint(
        lambda h, k: (h * k, "scaled"), x, 3.0, use_reentrant=False
    )
    assert label == "scaled"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_checkpoint_nodes_do_not_keep_the_tape_alive():
    from nautograd.graph.tape import current_tape

    w = ng.rand(4, dtype=ng.float64, requires_grad=True)
    for _ in range(5):
        x = w * 2
        y = ng.utils.checkpoint.checkpoint(lambda h: (h.sin() * h).sum(), x, use_reentrant=False)
        y.backward()
    del x, y
    assert current_tape().live <= 4
