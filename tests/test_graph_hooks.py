"""Post-accumulate-grad hooks, multi-grad hooks and increment_version, against torch."""

import numpy as np
import pytest
import torch

import nautograd as ng

LIBS = pytest.mark.parametrize("lib", [torch, ng], ids=["torch", "nautograd"])


def _post_hook_ordering(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)

    def minus(t):
        t.grad.sub_(2)

    def divide(t):
        t.grad.div_(5)

    x.register_post_accumulate_grad_hook(minus)
    x.register_post_accumulate_grad_hook(divide)
    x.register_hook(lambda g: g + 0.5)  # (runs before accumulation)
    (x * 10).sum().backward()
    return x.grad


def test_post_accumulate_grad_hooks_run_in_order_after_accumulation():
    np.testing.assert_allclose(_post_hook_ordering(ng).numpy(), _post_hook_ordering(torch))


def _optimizer_in_backward(lib, hooked):
    lib.manual_seed(0)
    model = lib.nn.Linear(3, 2).double()
    x = lib.tensor(np.linspace(-1, 1, 12).reshape(4, 3))
    optimizers = {p: lib.optim.SGD([p], lr=0.1) for p in model.parameters()}
    handles = []
    if hooked:
        for p in model.parameters():

            def step(param):
                optimizers[param].step()
                optimizers[param].zero_grad()

            handles.append(p.register_post_accumulate_grad_hook(step))
    for _ in range(3):
        (model(x) ** 2).sum().backward()
        if not hooked:
            for opt in optimizers.values():
                opt.step()
                opt.zero_grad()
    for h in handles:
        h.remove()
    (model(x) ** 2).sum().backward()  # (no step: the hooks are gone)
    return [p.detach().numpy().copy() for p in model.parameters()] + [
        p.grad.numpy().copy() for p in model.parameters()
    ]


def test_an_optimizer_step_inside_backward_matches_optimizer_step():
    for got, want in zip(
        _optimizer_in_backward(ng, True), _optimizer_in_backward(ng, False), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-12)


@LIBS
def test_post_accumulate_grad_hook_errors_are_torchs(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot be registered on non-leaf tensors"):
        (x * 1).register_post_accumulate_grad_hook(lambda t: None)
    x.register_post_accumulate_grad_hook(lambda t: t.grad)
    with pytest.raises(RuntimeError, match="post accumulate grad hooks should return None"):
        x.sum().backward()


def test_post_accumulate_grad_hooks_run_under_create_graph():
    seen = []
    for lib in (torch, ng):
        y = lib.tensor([1.0, 3.0], requires_grad=True)
        y.register_post_accumulate_grad_hook(lambda t, seen=seen: seen.append(t.grad.tolist()))
        (g,) = lib.autograd.grad((y**2).sum(), y, create_graph=True)
        g.sum().backward()
    assert seen[0] == seen[1] == [2.0, 2.0]


def _multi_hooks(lib):
    calls, first = [], []
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0], requires_grad=True)
    c = lib.tensor([5.0], requires_grad=True)
    d = lib.tensor([7.0], requires_grad=True)
    graph = lib.autograd.graph
    h = graph.register_multi_grad_hook(
        (a, b, c, d), lambda grads: calls.append([g is not None for g in grads])
    )
    ((a * 2).sum() + b * 3 + c).sum().backward(inputs=[b, c])
    ((a * 2).sum() + b * 3).sum().backward()
    h2 = graph.register_multi_grad_hook((a, b), lambda g: first.append(1), mode="any")
    ((a * 2).sum() + b * 3).sum().backward()
    (d * 2).sum().backward()  # reaches neither a nor b: no "any" call
    h.remove()
    h2.remove()
    ((a * 2).sum() + b * 3).sum().backward()
    return calls, first


def test_multi_grad_hooks_fire_once_per_backward_as_torchs():
    assert _multi_hooks(ng) == _multi_hooks(torch)


@LIBS
def test_multi_grad_hook_errors_are_torchs(lib):
    a = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="Expects mode to be one of"):
        lib.autograd.graph.register_multi_grad_hook((a,), print, mode="foo")
    calls = []
    lib.autograd.graph.register_multi_grad_hook((a,), calls.append)

    def fail(grad):
        raise ValueError("hook failed")

    b = a * 2
    b.register_hook(fail)
    with pytest.raises(ValueError, match="hook failed"):
        b.sum().backward()
    assert calls == []


@LIBS
def test_increment_version_makes_saved_values_stale(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    y = a * a
    lib.autograd.graph.increment_version(a)
    assert a._version == 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_variable_execution_engine_queue_callback_runs_after_accumulation_as_torch():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        seen = []

        def hook(grad):
            engine = lib.autograd.Variable._execution_engine
            engine.queue_callback(lambda: seen.append(x.grad.clone()))
            return grad

        x.register_hook(hook)
        (x * x).sum().backward()
        return [s.tolist() for s in seen]

    assert run(ng) == run(torch) == [[2.0, 4.0]]
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during"):
        ng.autograd.Variable._execution_engine.queue_callback(lambda: None)
