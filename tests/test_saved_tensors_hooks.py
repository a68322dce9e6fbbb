"""autograd.graph.saved_tensors_hooks, save_on_cpu and disable_saved_tensors_hooks, against
torch (float64 on both sides)."""

import numpy as np
import pytest
import torch

import nautograd as ng


def _t(lib, values):
    return lib.tensor(values, dtype=lib.float64, requires_grad=True)


@pytest.mark.parametrize("n", [3, 100])  # values copied into the tape, and kept by address
def test_pack_hook_result_is_what_backward_uses(n):
    def run(lib):
        G = lib.autograd.graph
        x = _t(lib, np.linspace(0.5, 1.5, n))
        with G.saved_tensors_hooks(lambda t: t * 2, lambda t: t):
            y = x.pow(2)  # saves x: the gradient uses 2 * x
        y.sum().backward()
        return x.grad.numpy()

    np.testing.assert_allclose(run(ng), run(torch), rtol=1e-14)


def test_pack_runs_once_per_save_and_unpack_once_per_use():
    def run(lib):
        G = lib.autograd.graph
        calls = [0, 0]

        def pack(t):
            calls[0] += 1
            return t

        def unpack(t):
            calls[1] += 1
            return t

        a = _t(lib, [1.0, 2.0, 3.0])
        with G.saved_tensors_hooks(pack, unpack):
            z = (a * a).exp()  # mul saves both operands, exp its result
        packed = list(calls)
        z.sum().backward(retain_graph=True)
        once = list(calls)
        z.sum().backward()
        return packed, once, list(calls), a.grad.tolist()

    mine = run(ng)
    assert mine == run(torch)
    assert mine[:3] == ([3, 0], [3, 3], [3, 6])


def test_innermost_saved_tensors_hooks_win():
    def run(lib):
        G = lib.autograd.graph
        c = _t(lib, [1.0, 2.0, 3.0])
        with G.saved_tensors_hooks(lambda t: t * 5, lambda t: t):
            with G.saved_tensors_hooks(lambda t: t * 3, lambda t: t * 2):
                y = c * c
        y.sum().backward()
        return c.grad.tolist()

    assert run(ng) == run(torch) == [12.0, 24.0, 36.0]


def test_saved_tensors_hooks_apply_to_double_backward_and_custom_functions():
    def run(lib):
        G = lib.autograd.graph
        d = _t(lib, [1.0, 2.0])
        with G.saved_tensors_hooks(lambda t: t * 2, lambda t: t):
            y = d.pow(3)
        (g,) = lib.autograd.grad(y.sum(), d, create_graph=True)

        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 2 * x * grad

        e = _t(lib, [1.0, 2.0])
        with G.saved_tensors_hooks(lambda t: t * 10, lambda t: t):
            s = Square.apply(e)
        s.sum().backward()
        return g.tolist(), e.grad.tolist()

    assert run(ng) == run(torch)


def test_unpack_hook_returning_a_non_tensor_raises_torch_error():
    def run(lib):
        G = lib.autograd.graph
        x = _t(lib, [1.0, 2.0])
        with G.saved_tensors_hooks(lambda t: t, lambda t: 1):
            y = x.exp()
        with pytest.raises(TypeError) as info:
            y.sum().backward()
        return str(info.value)

    assert run(ng) == run(torch)


def test_pack_hook_modifying_its_input_in_place_raises_torch_error():
    def run(lib):
        G = lib.autograd.graph
        h = _t(lib, [1.0, 2.0]) * 1

        def pack(t):
            t.add_(1)
            return t

        with pytest.raises(RuntimeError) as info:
            with G.saved_tensors_hooks(pack, lambda t: t):
                h.pow(2)
        return str(info.value)

    assert run(ng) == run(torch)


def test_disable_saved_tensors_hooks_raises_its_message_and_nests():
    def run(lib):
        G = lib.autograd.graph
        messages = []
        with G.disable_saved_tensors_hooks("outer"):
            with G.disable_saved_tensors_hooks("inner"):
                with pytest.raises(RuntimeError) as info:
                    with G.saved_tensors_hooks(lambda t: t, lambda t: t):
                        pass
                messages.append(str(info.value))
            with pytest.raises(RuntimeError) as info:
                with G.saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
            messages.append(str(info.value))
        with G.saved_tensors_hooks(lambda t: t, lambda t: t):
            pass  # allowed again
        return messages

    assert run(ng) == run(torch) == ["inner", "outer"]


def test_save_on_cpu_gives_the_same_gradients():
    def run(lib):
        h = _t(lib, [1.0, 2.0])
        with lib.autograd.graph.save_on_cpu():
            y = (h * h).exp()
        y.sum().backward()
        return h.grad.numpy()

    np.testing.assert_allclose(run(ng), run(torch), rtol=1e-14)


def test_graph_released_after_backward_raises_with_packed_saved_tensors():
    def run(lib):
        G = lib.autograd.graph
        k = _t(lib, [1.0, 2.0])
        with G.saved_tensors_hooks(lambda t: t, lambda t: t):
            y = k.exp()
        y.sum().backward()
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
        return str(info.value)[:60]

    assert run(ng) == run(torch)


def test_deferred_forward_resumes_after_saved_tensors_hooks():
    from nautograd.tensor import DEFER

    before = DEFER[0]
    with ng.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        assert DEFER[0] is False
    assert DEFER[0] == before
