"""Custom autograd Functions (ng.autograd.Function) against torch.autograd.Function.

Each Function is written once against a torch-like module ``lib`` (as benchmarks/workloads.py
does), run on nautograd and on torch, and compared: values, gradients with random
cotangents, what backward receives, error texts.
"""

import gc
import threading
import warnings

import numpy as np
import pytest
import torch

import nautograd as ng
from nautograd.graph.tape import current_tape


def exp_function(lib):
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = x.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad):
            (result,) = ctx.saved_tensors
            return grad * result

    return Exp


def square_function(lib, factor=2, detach=False, decorate=staticmethod):
    """x * x as a Function whose backward is ``factor * g * x`` (2: right), with x detached
    if asked (a backward that is not itself differentiable); ``decorate`` wraps backward."""

    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @decorate
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return factor * g * (x.detach() if detach else x)

    return Square


def scaled_function(lib, seen):
    """Non-tensor input and output; records what backward receives."""

    class Scaled(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y):
            ctx.k = k
            ctx.save_for_backward(x, None, y)
            return x * k * y, k, y.sum(0)

        @staticmethod
        def backward(ctx, grad, grad_k, grad_s):
            x, none, y = ctx.saved_tensors
            seen.append((grad_k, none, ctx.needs_input_grad))
            return grad * ctx.k * y, None, grad * ctx.k * x + grad_s

    return Scaled


def _pair(shape, rng, dtype=np.float64):
    a = rng.standard_normal(shape).astype(dtype)
    return ng.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _close(t, ref, tol=1e-12):
    np.testing.assert_allclose(np.asarray(t.detach()), ref.detach().numpy(), rtol=tol, atol=tol)


def test_custom_function_value_and_vjp_match_torch_in_a_graph_with_native_ops(rng):
    x, tx = _pair((3, 4), rng)
    cot = rng.standard_normal((3, 4))
    results = []
    for lib, v in ((ng, x), (torch, tx)):
        Exp = exp_function(lib)
        y = Exp.apply(v * 0.5)
        # fan-out: y feeds a native op and the Function again
        z = y * v + Exp.apply(y.sin())
        z.backward(lib.tensor(cot))
        results.append(z)
    _close(results[0], results[1])
    _close(x.grad, tx.grad)


def test_custom_function_node_is_named_after_the_class(rng):
    x, _ = _pair(3, rng)
    y = exp_function(ng).apply(x)
    assert type(y.grad_fn).__name__ == "ExpBackward"
    assert y.grad_fn.name() == "ExpBackward"
    assert "grad_fn=<ExpBackward>" in repr(y)
    assert isinstance(y.grad_fn, ng.autograd.graph.Node)
    ((acc, nr),) = y.grad_fn.next_functions
    assert acc.name() == "torch::autograd::AccumulateGrad" and acc.variable is x and nr == 0
    assert len(y.grad_fn.saved_tensors) == 1  # the ctx's attributes, as torch's grad_fn


def test_custom_function_with_non_tensor_inputs_and_outputs_matches_torch(rng):
    x, tx = _pair((2, 3), rng)
    y, ty = _pair((2, 3), rng)
    cot = rng.standard_normal((2, 3))
    seen = {"ng": [], "torch": []}
    outs = {}
    for key, lib, a, b in (("ng", ng, x, y), ("torch", torch, tx, ty)):
        out, k, s = scaled_function(lib, seen[key]).apply(a, 3.0, b)
        assert k == 3.0
        (out * lib.tensor(cot)).sum().backward()
        outs[key] = out
        if key == "ng":
            assert len(out.grad_fn.next_functions) == 2  # one edge per tensor input
    _close(outs["ng"], outs["torch"])
    _close(x.grad, tx.grad)
    _close(y.grad, ty.grad)
    # grad of the non-tensor output is None; the None saved stays None; s unused: zeros
    assert seen["ng"] == [(None, None, (True, False, True))]
    assert seen["torch"] == [(None, None, (True, False, True))]


def _two_outputs(lib, materialize, seen):
    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, a, b):
            seen.append(None if b is None else np.asarray(b.detach()).tolist())
            return a * 2 if b is None else a * 2 + b * 3

    return Two


@pytest.mark.parametrize("materialize", [True, False])
def test_unused_output_gradient_is_zeros_or_none_as_torch_materializes(materialize, rng):
    x, tx = _pair(2, rng)
    seen, tseen = [], []
    a, _ = _two_outputs(ng, materialize, seen).apply(x)
    a.sum().backward()
    ta, _ = _two_outputs(torch, materialize, tseen).apply(tx)
    ta.sum().backward()
    assert seen == tseen == ([[0.0, 0.0]] if materialize else [None])
    _close(x.grad, tx.grad)


def test_mark_non_differentiable_output_does_not_require_grad_and_gets_zeros(rng):
    seen = []

    class Sort(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            order = ng.tensor(np.argsort(x.detach().numpy()))
            mask = x > 0
            flag = x * 0
            ctx.mark_non_differentiable(flag)
            return x * 2, order, mask, flag

        @staticmethod
        def backward(ctx, g, g_order, g_mask, g_flag):
            seen.append((g_order.tolist(), g_mask.tolist(), g_flag.tolist()))
            return g * 2

    x = ng.tensor([1.0, -2.0], requires_grad=True)
    y, order, mask, flag = Sort.apply(x)
    assert y.requires_grad and not order.requires_grad and not flag.requires_grad
    assert flag.grad_fn is None and order.dtype == ng.int64
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    assert seen == [([0, 0], [False, False], [0.0, 0.0])]
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        flag.sum().backward()


def test_broadcast_gradient_from_a_custom_backward_is_summed_to_the_input_shape():
    for lib in (ng, torch):

        class Wide(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g, lib=lib):
                return lib.ones(4, 1, 3, dtype=lib.float64)

        x = lib.zeros(1, 3, dtype=lib.float64, requires_grad=True)
        Wide.apply(x).sum().backward()
        assert x.grad.tolist() == [[4.0, 4.0, 4.0]]


def _errors(lib, backward):
    class Bad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

    Bad.backward = staticmethod(backward)
    x = lib.ones(2, dtype=lib.float64, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        Bad.apply(x, 2).sum().backward()
    return str(info.value)


@pytest.mark.parametrize(
    "backward",
    [
        lambda ctx, g: g,  # too few
        lambda ctx, g: (g, g),  # a gradient for the non-tensor input
        lambda ctx, g: (g, None, g),  # too many
        lambda ctx, g: (torch.ones(3) if isinstance(g, torch.Tensor) else ng.ones(3), None),
        lambda ctx, g: (3.0, None),  # not a tensor
    ],
    ids=["too-few", "non-tensor-input", "too-many", "bad-shape", "not-a-tensor"],
)
def test_bad_gradients_from_a_custom_backward_raise_torchs_error(backward):
    assert _errors(ng, backward) == _errors(torch, backward).replace("torch.", "")


def test_extra_trailing_nones_from_a_custom_backward_are_accepted():
    for lib in (ng, torch):

        class Extra(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2, None, None

        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        Extra.apply(x).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]


def test_missing_or_doubled_methods_raise_torchs_error():
    texts = []
    for lib in (ng, torch):

        class NoBackward(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

        class NoForward(lib.autograd.Function):
            @staticmethod
            def backward(ctx, g):
                return g

        class Both(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

            @staticmethod
            def vjp(ctx, g):
                return g

        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        row = []
        with pytest.raises(NotImplementedError) as info:
            NoBackward.apply(x).sum().backward()
        row.append(str(info.value))
        with pytest.raises(NotImplementedError) as info:
            NoForward.apply(x)
        row.append(str(info.value))
        with pytest.raises(RuntimeError) as info:
            Both.apply(x).sum().backward()
        row.append(str(info.value))
        with pytest.warns(DeprecationWarning, match="should not be instantiated"):
            instance = NoBackward()
        with pytest.raises(RuntimeError) as info:
            instance(x)
        row.append(str(info.value))
        texts.append(row)
    assert texts[0] == texts[1]


def test_vjp_is_accepted_in_place_of_backward():
    class Double(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def vjp(ctx, g):
            return g * 2

    x = ng.ones(2, requires_grad=True)
    Double.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_second_backward_through_a_custom_function_that_saved_tensors_raises(rng):
    x, _ = _pair(3, rng)
    y = exp_function(ng).apply(x)
    y.sum().backward(retain_graph=True)
    y.sum().backward()  # retained: runs again and accumulates
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x.detach().numpy()))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        _ = y.grad_fn.saved_tensors


def test_custom_function_that_saved_nothing_can_run_backward_twice():
    class Double(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = ng.ones(2, requires_grad=True)
    y = Double.apply(x)
    y.sum().backward()
    y.sum().backward()
    assert x.grad.tolist() == [4.0, 4.0]


def test_saved_tensor_changed_in_place_raises_at_saved_tensors():
    Square = square_function(ng)
    x = ng.ones(2, requires_grad=True)
    w = x * 1
    y = Square.apply(w)
    with ng.no_grad():
        w.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*version 1; expected"):
        y.sum().backward()


def test_setup_context_form_binds_default_arguments_and_matches_ctx_form(rng):
    x, tx = _pair(3, rng)
    for lib, v in ((ng, x), (torch, tx)):

        class Power(lib.autograd.Function):
            @staticmethod
            def forward(x, p=3.0):
                return x**p

            @staticmethod
            def setup_context(ctx, inputs, output):
                x, p = inputs
                ctx.p = p
                ctx.save_for_backward(x)

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * ctx.p * x ** (ctx.p - 1), None

        Power.apply(v).sum().backward()
    _close(x.grad, tx.grad)


def test_mark_dirty_returns_the_input_with_a_new_grad_fn():
    class Twice(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    z = ng.ones(2, requires_grad=True)
    w = z * 1
    v = Twice.apply(w)
    assert v is w and type(w.grad_fn).__name__ == "TwiceBackward" and w._version == 2
    (v * 3).sum().backward()
    assert z.grad.tolist() == [6.0, 6.0]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used"):
        Twice.apply(z)

    class Forgets(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="Some elements marked as dirty"):
        Forgets.apply(z * 1)


def test_input_returned_as_is_becomes_a_new_tensor_with_the_function_as_grad_fn():
    for lib in (ng, torch):

        class Identity(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 3

        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        y = Identity.apply(x)
        assert y is not x and x.grad_fn is None and y.grad_fn is not None
        y.sum().backward()
        assert x.grad.tolist() == [3.0, 3.0]


def test_returning_the_same_tensor_twice_gives_one_tensor(rng):
    for lib in (ng, torch):

        class Dup(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                return y, y

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 * 2 + g2 * 2

        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        a, b = Dup.apply(x)
        assert a is b
        (a * 3).sum().backward()
        assert x.grad.tolist() == [6.0, 6.0]


def test_custom_function_under_no_grad_records_nothing():
    Exp = exp_function(ng)
    x = ng.ones(2, requires_grad=True)
    with ng.no_grad():
        y = Exp.apply(x)
    assert not y.requires_grad and y.grad_fn is None
    assert not Exp.apply(ng.ones(2)).requires_grad


def test_custom_function_in_float32_matches_float64(rng):
    a = rng.standard_normal(5)
    grads = []
    for dtype in (ng.float32, ng.float64):
        x = ng.tensor(a, dtype=dtype, requires_grad=True)
        y = exp_function(ng).apply(x * 2)
        assert y.dtype == dtype
        (y * y).sum().backward()
        assert x.grad.dtype == dtype
        grads.append(x.grad.numpy().astype(np.float64))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5)


def test_hooks_and_retain_grad_on_a_custom_function_output(rng):
    x, tx = _pair(3, rng)
    for lib, v in ((ng, x), (torch, tx)):
        y = exp_function(lib).apply(v)
        y.retain_grad()
        y.register_hook(lambda g: g * 10)
        (y * 2).sum().backward()
        assert y.grad.tolist() == [20.0, 20.0, 20.0]  # retain_grad sees the hooked grad
    _close(x.grad, tx.grad)


def test_grad_with_inputs_never_runs_a_custom_function_off_the_path():
    class Fails(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise AssertionError("must not run")

    x = ng.ones(2, requires_grad=True)
    y = ng.ones(2, requires_grad=True)
    out = (Fails.apply(x) + y * 3).sum()
    (gy,) = ng.autograd.grad(out, [y])
    assert gy.tolist() == [3.0, 3.0]


def test_custom_backward_can_run_a_backward_itself():
    """Checkpointing: the backward recomputes its forward with grad on and differentiates
    it (a backward inside a backward, on the same tape)."""

    class Checkpoint(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return (x.sin() * x).exp()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with ng.enable_grad():
                xd = x.detach().requires_grad_()
                y = (xd.sin() * xd).exp()
            (gx,) = ng.autograd.grad(y, [xd], g)
            return gx

    a = np.linspace(-1, 1, 5)
    x = ng.tensor(a, requires_grad=True)
    (Checkpoint.apply(x * 1) * 2).sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    ((tx.sin() * tx).exp() * 2).sum().backward()
    _close(x.grad, tx.grad)


def test_error_in_a_custom_backward_reaches_the_caller_and_the_tape_still_works():
    class Raises(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    x = ng.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="boom"):
        Raises.apply(x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_once_differentiable_backward_runs_without_grad():
    modes = []

    class Square(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @ng.autograd.function.once_differentiable
        def backward(ctx, g):
            modes.append(ng.is_grad_enabled())
            (x,) = ctx.saved_tensors
            return 2 * g * x

    x = ng.tensor([3.0], requires_grad=True)
    Square.apply(x).backward()
    assert x.grad.tolist() == [6.0] and modes == [False]


def test_many_custom_function_calls_in_a_training_loop_keep_the_tape_bounded():
    # (on a thread of its own: a tape earlier tests grew would hold more nodes before its
    # first sweep)
    box = []
    t = threading.Thread(target=lambda: box.append(_custom_function_loop_rows()))
    t.start()
    t.join()
    rows, functions = box[0]
    assert max(rows[1500:]) <= max(rows[:1500]) + 16 < 4096
    assert max(functions) < 1400


def _custom_function_loop_rows():
    Exp = exp_function(ng)
    w = ng.zeros(3, requires_grad=True)
    tape = current_tape()
    rows = []
    for _ in range(3000):
        loss = Exp.apply(w * 0.1).sum()
        loss.backward()
        with ng.no_grad():
            w -= 0.01 * w.grad
        w.grad = None
        rows.append((tape.n, len(tape.functions)))
    # the tape is swept as it fills (compaction): flat after the first sweeps (9,000 rows and
    # 3,000 contexts if nothing were freed)
    return tuple(zip(*rows, strict=True))


def test_custom_function_warns_nothing_on_ordinary_use():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = ng.ones(2, requires_grad=True)
        exp_function(ng).apply(x).sum().backward()


def test_saved_tensors_do_not_keep_the_tape_alive_after_the_graph_dies():
    # regression: saved tensors held their handles into the tape (a non-leaf input's node, a
    # leaf's AccumulateGrad) and the tape held the ctx, so after a backward that raised (the
    # node never released) the thread's tape could never reset
    class Fails(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    tape = current_tape()
    gc.collect()  # (earlier tests' garbage holding handles would die during the one below)
    live = tape.live

    def step():
        w = ng.ones(3, requires_grad=True)
        x = w * 2
        with pytest.raises(ValueError, match="boom"):
            Fails.apply(x, w).sum().backward()

    step()
    gc.collect()
    assert tape.live == live


def test_saved_tensors_are_aliases_sharing_memory_and_version():
    seen = []

    class Keep(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            seen.append(x)
            return g * 2

    x = ng.ones(3, requires_grad=True)
    Keep.apply(x).sum().backward()
    (saved,) = seen
    assert np.shares_memory(saved.numpy(), x.detach().numpy()) and not saved.requires_grad


def test_marked_tensors_do_not_keep_the_tape_alive():
    # regression: ctx.mark_dirty kept the dirty tensor (and its handle) in the ctx the tape
    # holds, so the tape never reset after the graph died
    class Twice(ng.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    tape = current_tape()
    live = tape.live

    def step():
        z = ng.ones(2, requires_grad=True)
        (Twice.apply(z * 1) * 3).sum().backward()
        assert z.grad.tolist() == [6.0, 6.0]

    step()
    gc.collect()
    assert tape.live == live


def test_hook_on_one_output_leaves_an_unused_output_undefined(rng):
    # a hook makes the node a Python one for the hook's sake; only the hooked output's
    # buffer is materialized for it, the other stays undefined (None without materialize)
    x, tx = _pair(2, rng)
    seen, tseen = [], []
    for lib, v, out in ((ng, x, seen), (torch, tx, tseen)):
        a, _ = _two_outputs(lib, False, out).apply(v)
        a.register_hook(lambda g: g * 2)
        a.sum().backward()
    assert seen == tseen == [None]
    _close(x.grad, tx.grad)


def _once_square(lib, once):
    return square_function(lib, decorate=lambda f: staticmethod(once(f)))


def test_once_differentiable_double_backward_raises_from_an_error_node():
    from torch.autograd.function import once_differentiable as torch_once

    results = []
    for lib, once in ((ng, ng.autograd.function.once_differentiable), (torch, torch_once)):
        Square = _once_square(lib, once)
        x = lib.tensor([3.0, 1.0], requires_grad=True)
        # a cotangent that requires grad: the result comes out of an Error node
        v = lib.ones(2, requires_grad=True)
        (g,) = lib.autograd.grad(Square.apply(x), x, v, create_graph=True)
        with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
            lib.autograd.grad(g.sum(), v)
        # differentiating through it raises torch's text
        (g2,) = lib.autograd.grad((Square.apply(x * 2) ** 2).sum(), x, create_graph=True)
        with pytest.raises(RuntimeError) as err:
            g2.sum().backward()
        # a cotangent that needs no grad: a plain tensor, as without the decorator
        (g3,) = lib.autograd.grad(Square.apply(x), x, lib.ones(2), create_graph=True)
        results.append((g.tolist(), g.grad_fn.name(), repr(g).split("grad_fn=")[1], str(err.value),
                        g2.tolist(), g3.requires_grad, g3.grad_fn))  # fmt: skip
    assert results[0] == results[1]
    assert results[0][3] == (
        "trying to differentiate twice a function that was marked with @once_differentiable"
    )
