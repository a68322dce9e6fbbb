"""The deferred forward (graph/deferred.py): small float64 ops record a row and compute when a
value or the graph is needed. Every op-table test in float64 also runs through it; these
check that it is taken, and the places where its laziness could show."""

import sys
import threading

import numpy as np
import pytest
import torch

import nautograd as ng
from nautograd.graph.tape import current_tape

tensor_module = sys.modules["nautograd.tensor"]  # (ng.tensor is the function)


def _deferred(t):
    return type(t) is tensor_module._Lazy


def close(a, b, tol=1e-12):
    a = a.detach().numpy() if hasattr(a, "detach") else a
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_small_float64_ops_are_deferred_until_a_value_is_read():
    x = ng.tensor([0.5, -1.0, 2.0], dtype=ng.float64, requires_grad=True)
    y = ng.nn.functional.softplus(x) * x + 1.0
    assert _deferred(y) and current_tape().batch is not None
    assert y.shape == (3,) and y.dtype == ng.float64  # known without running the batch
    assert current_tape().batch is not None
    value = y.tolist()  # reading it runs the batch
    assert current_tape().batch is None and not _deferred(y)
    xt = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    close(np.array(value), torch.nn.functional.softplus(xt) * xt + 1.0)


def test_deferred_graphs_match_torch_values_and_gradients_with_random_cotangents():
    rng = np.random.default_rng(0)
    w0, h0, xs = (
        rng.standard_normal((5, 5)) / 2,
        rng.standard_normal(5),
        rng.standard_normal((6, 5)),
    )
    g = rng.standard_normal(4)

    def run(lib):
        F = lib.nn.functional
        w = lib.tensor(w0, requires_grad=True)
        h = h_leaf = lib.tensor(h0, requires_grad=True)
        for x in xs:
            h = lib.tanh(w @ h + lib.tensor(x)) * 0.9 - h / 3.0
        s = lib.stack([h.sum(), h.mean(), F.softplus(h).sum(), (h * h).sum()])
        parts = lib.softmax(s, 0).unbind(0)
        out = lib.stack([parts[0] * 2.0, parts[1].exp(), F.log_softmax(s, 0)[2], parts[3]])
        (out * lib.tensor(g)).sum().backward()
        return out, w.grad, h_leaf.grad

    for ng_result, torch_result in zip(run(ng), run(torch), strict=True):
        close(ng_result, torch_result)


@pytest.mark.parametrize(
    "xs, ys",
    [((7, 33), (33,)), ((32, 32), (32,)), ((5,), (5, 3)), ((6, 4), (4, 9)), ((13,), (13,))],
    ids=["mv-odd", "mv-rnn", "vec-mat", "mm", "dot"],
)
def test_deferred_products_match_torch_values_and_gradients(xs, ys):
    # matmul_lazy: a dot product per row when y is a column (summed in vector lanes), rows
    # of y otherwise
    rng = np.random.default_rng(len(xs) * 10 + xs[0])
    x0, y0 = rng.standard_normal(xs), rng.standard_normal(ys)
    x, y = ng.tensor(x0, requires_grad=True), ng.tensor(y0, requires_grad=True)
    xt, yt = torch.tensor(x0, requires_grad=True), torch.tensor(y0, requires_grad=True)
    result = ng.tanh(x) @ y
    expected = torch.tanh(xt) @ yt
    assert _deferred(result)
    g = rng.standard_normal(tuple(expected.shape))
    (result * ng.tensor(g)).sum().backward()
    (expected * torch.tensor(g)).sum().backward()
    close(result, expected)
    close(x.grad, xt.grad)
    close(y.grad, yt.grad)


def test_an_input_written_through_numpy_between_two_uses_reaches_the_second():
    # each use copies the input when it is recorded, as an eager op reads its operands then
    x = ng.tensor([1.0, 2.0], dtype=ng.float64, requires_grad=True)
    a = x * 1.0
    x.detach().numpy()[0] = 10.0
    b = x * 1.0
    assert _deferred(a) and _deferred(b)
    assert a.tolist() == [1.0, 2.0]
    assert b.tolist() == [10.0, 2.0]


def test_an_input_used_twice_in_a_batch_is_copied_once():
    w = ng.tensor(np.linspace(-1, 1, 20), requires_grad=True)
    x = ng.tensor(np.linspace(0, 1, 20))
    y = (w * x).tanh() * w + w
    assert _deferred(y)
    batch = current_tape().batch
    assert len(batch.arrays) == 2  # w and x, once each
    g = np.linspace(1, 2, 20)
    y.backward(ng.tensor(g))
    wt = torch.tensor(np.linspace(-1, 1, 20), requires_grad=True)
    xt = torch.tensor(np.linspace(0, 1, 20))
    yt = (wt * xt).tanh() * wt + wt
    yt.backward(torch.tensor(g))
    close(y, yt)
    close(w.grad, wt.grad)


def test_an_input_sharing_a_numpy_array_written_between_two_uses_reaches_the_second():
    def from_numpy(a):
        return ng.from_numpy(a).requires_grad_()

    def tensor_of(a):
        return ng.Tensor(a, requires_grad=True)

    def data_set_to(a):
        x = ng.tensor([0.0, 0.0], requires_grad=True)
        x * 1.0  # (imported before its memory is shared)
        x.data = a
        return x

    for share in (from_numpy, tensor_of, data_set_to):
        a = np.array([1.0, 2.0])
        x = share(a)
        first = x * 1.0
        a[0] = 10.0
        second = x * 1.0
        assert _deferred(first) and _deferred(second)
        assert first.tolist() == [1.0, 2.0], share.__name__
        assert second.tolist() == [10.0, 2.0], share.__name__


def test_an_input_changed_in_place_between_two_uses_in_a_batch():
    # the second use reads the new value; a node that saved the old one raises in backward
    for lib in (ng, torch):
        w = lib.tensor(np.linspace(-1, 1, 20), requires_grad=True)
        x = lib.tensor(np.linspace(0, 1, 20))
        first = w * x  # saves x
        with lib.no_grad():
            x.add_(1.0)
        second = w * x
        close(second.detach(), np.linspace(-1, 1, 20) * (np.linspace(0, 1, 20) + 1.0))
        with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
            (first + second).sum().backward()


@pytest.mark.parametrize("n", [3, 40])
def test_an_input_first_used_unsaved_then_changed_in_place_reaches_the_next_use(n):
    # x's first use (an add, which saves nothing) imports it before it has a version counter
    # (version 0, none made); the in-place change makes one at version 1: the next use in
    # the batch imports the new value, through x itself or through a view of it
    for lib in (ng, torch):
        h = lib.tanh(lib.tensor(np.linspace(-1, 1, n), requires_grad=True))
        x = lib.tensor(np.linspace(0, 1, n))
        first = h + x
        with lib.no_grad():
            x.add_(1.0)
        second = h + x
        with lib.no_grad():
            x[:].mul_(2.0)  # through a view: x's counter, shared
        third = h * x
        close(first.detach(), np.tanh(np.linspace(-1, 1, n)) + np.linspace(0, 1, n))
        close(second.detach(), np.tanh(np.linspace(-1, 1, n)) + np.linspace(0, 1, n) + 1.0)
        close(third.detach(), np.tanh(np.linspace(-1, 1, n)) * (np.linspace(0, 1, n) + 1) * 2)


def test_a_big_input_saved_by_a_deferred_node_is_kept_by_reference_as_torch_keeps_it():
    # a saved input of more than 16 elements is kept as the eager path and torch keep it: its
    # own memory (a raw write before backward reaches the gradient), its version checked
    results = []
    for lib in (ng, torch):
        a = np.eye(6) * 0.5
        W = lib.from_numpy(a).requires_grad_()
        h = lib.tensor(np.arange(6.0), requires_grad=True)
        out = (W @ h).sum()
        a *= 2.0  # no version change
        out.backward()
        results.append(h.grad)
        W = lib.tensor(np.eye(6) * 0.5, requires_grad=True)
        out = (W @ h).sum()
        with lib.no_grad():
            W.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.backward()
    close(results[0], results[1])
    close(results[0], np.ones(6))


def test_an_unbound_output_is_a_view_of_its_input_once_read():
    x = ng.tensor([1.0, 2.0, 3.0], dtype=ng.float64, requires_grad=True)
    y = x * 2.0
    first, second, third = y.unbind(0)
    assert _deferred(second)
    with ng.no_grad():
        second.mul_(10.0)  # torch's unbind gives views: y changes with it
    assert y.tolist() == [2.0, 40.0, 6.0]
    assert y._version == second._version == 1


def test_a_deferred_result_changed_in_place_after_it_was_read_raises_in_backward():
    for lib in (ng, torch):
        x = lib.tensor([0.1, 0.2, 0.3], dtype=lib.float64, requires_grad=True)
        y = x.exp()  # saves its result
        with lib.no_grad():
            y.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_an_input_changed_in_place_before_the_batch_ran_raises_in_backward():
    # the version was read when the op was recorded, not when its batch ran
    for lib in (ng, torch):
        w = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)
        x = lib.tensor([2.0, 3.0], dtype=lib.float64)
        y = (w * x).sum()
        with lib.no_grad():
            x.mul_(2.0)
        with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
            y.backward()


@pytest.mark.parametrize("n", [3, 40])  # at most SMALL elements (copied), and more (by address)
def test_an_input_first_used_unsaved_then_saved_raises_when_changed_in_place(n):
    # x enters the batch through an add, which saves nothing (no version entry, no address),
    # then a mul in the same batch saves it: that use must still check its version
    for lib in (ng, torch):
        w = lib.tensor(np.linspace(0.5, 1.5, n), dtype=lib.float64, requires_grad=True)
        x = lib.tensor(np.linspace(-1.0, 2.0, n), dtype=lib.float64)
        h = lib.tanh(w)
        y = ((h + x) * x).sum()
        if lib is ng:
            assert _deferred(y)
        with lib.no_grad():
            x.mul_(2.0)
        with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
            y.backward()


@pytest.mark.parametrize("n", [3, 40])
def test_an_input_first_used_unsaved_then_saved_gives_torchs_gradient(n):
    rng = np.random.default_rng(5)
    w0, x0, b0, g0 = rng.standard_normal((4, n))
    grads = []
    for lib in (ng, torch):
        w = lib.tensor(w0, requires_grad=True)
        x = lib.tensor(x0)
        b = lib.tensor(b0, requires_grad=True)
        h = lib.tanh(w) + x + b  # x, b: first used by adds, which save nothing
        h = lib.sigmoid(h * x * b)  # saved by the muls
        if lib is ng:
            assert _deferred(h)
        h.backward(lib.tensor(g0))  # a random cotangent
        grads.append((h.detach(), w.grad, b.grad))
    for ours, theirs in zip(grads[0], grads[1], strict=True):
        close(ours, theirs)


def test_inputs_used_across_batches_are_imported_into_each():
    # an import is marked with its batch (Tensor._imp): a later batch must not take it
    rng = np.random.default_rng(7)
    W0, x0, g0 = rng.standard_normal((6, 6)), rng.standard_normal(6), rng.standard_normal(6)
    results = []
    for lib in (ng, torch):
        W = lib.tensor(W0, requires_grad=True)
        x = lib.tensor(x0)
        h = lib.tanh(x)
        values = []
        for _ in range(3):
            h = h * 1.5  # (imports before W's: W's value id differs between the batches)
            h = lib.tanh(W @ h + x)
            values.append(h.sum().item())  # runs the batch
            with lib.no_grad():
                x.mul_(0.5)  # a new version for the next batch
        h.backward(lib.tensor(g0))
        results.append((values, W.grad))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    close(results[0][1], results[1][1])


def test_positional_int_attributes_of_deferred_ops_reach_their_nodes():
    # softmax(x, d) and x.unbind(d) share one attribute dict per (op, d) among their nodes:
    # each node must still see its own dim, here through double backward (create_graph
    # formulas read the attributes) against torch
    rng = np.random.default_rng(11)
    x0, g0 = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    results = []
    for lib in (ng, torch):
        x = lib.tensor(x0, requires_grad=True)
        y = x * 1.0
        for _ in range(3):  # (from the second round on, the fast path with shared attributes)
            y = lib.softmax(y, 0) * lib.log_softmax(y, 1) + lib.softmax(y, 1)
            y = y + lib.stack(y.unbind(1), 1) * lib.stack(y.unbind(0), 0)
        if lib is ng:
            assert _deferred(y)
        (g,) = lib.autograd.grad(y, x, lib.tensor(g0), create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), x)
        results.append((y.detach(), g.detach(), gg))
    for ours, theirs in zip(*results, strict=True):
        close(ours, theirs, 1e-10)


def test_stack_of_deferred_values_takes_the_fast_path_and_matches_torch(monkeypatch):
    # the items' count and shape find the op's head (Tape.add_head): from the second round
    # on no stack reaches _lazy; items of two shapes raise stack's error
    rng = np.random.default_rng(12)
    a0, b0 = rng.standard_normal(3), rng.standard_normal(3)
    general = []
    lazy = tensor_module._lazy
    monkeypatch.setattr(tensor_module, "_lazy", lambda *a: general.append(a[0].name) or lazy(*a))

    def program(lib, a, b):
        x, y = a * 2.0, b.exp()
        return [lib.stack([x, y, x]), lib.stack([x, y], 0), lib.stack([y, x, x, y], dim=1)]

    gs = [rng.standard_normal(shape) for shape in ((3, 3), (2, 3), (3, 4))]
    outs = []
    for lib in (ng, torch):
        a, b = (lib.tensor(v, requires_grad=True) for v in (a0, b0))
        for _ in range(2):
            general.clear()
            ys = program(lib, a, b)
        if lib is ng:
            assert all(_deferred(y) for y in ys) and "stack" not in general
        sum((y * lib.tensor(g)).sum() for y, g in zip(ys, gs, strict=True)).backward()
        outs.append([y.detach() for y in ys] + [a.grad, b.grad])
        with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
            lib.stack([a * 2.0, (a * 2.0)[:2]])
    for ours, theirs in zip(*outs, strict=True):
        close(ours, theirs)


def test_the_unary_frontends_fast_path_keeps_their_argument_handling():
    # _unary_fast takes x alone and x with an int attribute; everything else goes through
    # the frontend's argument handling, with its errors
    x = ng.tensor([0.5, -1.0, 2.0], dtype=ng.float64, requires_grad=True)
    h = x * 2.0
    for _ in range(2):  # (the second round takes the fast path)
        a, b, c = ng.tanh(h), h.tanh(), ng.softmax(h, 0)
        d = ng.softmax(h, dim=0)
        assert all(_deferred(t) for t in (a, b, c, d))
        with pytest.raises(TypeError, match=r"tanh\(\) takes 1 positional arguments? but 2"):
            ng.tanh(h, 0)
        with pytest.raises(TypeError, match="multiple values for argument 'dim'"):
            ng.softmax(h, 0, dim=0)
    ht = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64) * 2.0
    close(a, torch.tanh(ht))
    close(b, torch.tanh(ht))
    for t in (c, d):
        close(t, torch.softmax(ht, 0))


def test_the_switch_turns_the_deferred_forward_off():
    tensor_module.DEFER[0] = False
    try:
        x = ng.tensor([0.5, 1.0], dtype=ng.float64, requires_grad=True)
        y = x.tanh() * x
        assert not _deferred(y)
    finally:
        tensor_module.DEFER[0] = True
    y.sum().backward()
    close(x.grad, np.tanh([0.5, 1.0]) + np.array([0.5, 1.0]) / np.cosh([0.5, 1.0]) ** 2)


def test_float32_big_and_no_grad_ops_run_eagerly():
    x32 = ng.ones(3, dtype=ng.float32, requires_grad=True)
    big = ng.ones(tensor_module.DEFER_MAX + 1, dtype=ng.float64, requires_grad=True)
    small = ng.ones(3, dtype=ng.float64, requires_grad=True)
    assert not _deferred(x32 * 2.0)
    assert not _deferred(big * 2.0)
    with ng.no_grad():
        assert not _deferred(small * 2.0)
    assert _deferred(small * 2.0)


def _fast_path_ops(h, lib=ng):
    """Each of the deferred forward's fast paths, on the deferred value ``h``: a unary
    function, one with an int attribute, a binary operator, an op on a sequence, and an op
    with several outputs."""
    return [lib.tanh(h), lib.softmax(h, 0), h * h, lib.stack([h, h]), *h.unbind(0)]


def test_the_fast_paths_follow_every_grad_mode_change_on_deferred_inputs():
    x = ng.tensor([0.5, -1.0], dtype=ng.float64, requires_grad=True)
    h = x * 2.0
    _fast_path_ops(h)  # (the ops' row heads are known: the next calls take the fast paths)
    assert _deferred(h) and all(t.requires_grad for t in _fast_path_ops(h))

    class Twice(ng.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            ctx.inside = _fast_path_ops(y)  # the forward runs with grad mode off
            return y * 2.0

        @staticmethod
        def backward(ctx, grad):
            return grad * 2.0

    modes = {
        "no_grad": ng.no_grad,
        "set_grad_enabled(False)": lambda: ng.set_grad_enabled(False),
        "inference_mode": ng.inference_mode,
    }
    for name, mode in modes.items():
        with mode():
            assert not any(t.requires_grad for t in _fast_path_ops(h)), name
            with ng.enable_grad():
                assert all(t.requires_grad for t in _fast_path_ops(h)), name
            assert not any(t.requires_grad for t in _fast_path_ops(h)), name
        assert all(t.requires_grad for t in _fast_path_ops(h)), name
    ng.set_grad_enabled(False)
    try:
        assert not any(t.requires_grad for t in _fast_path_ops(h))
    finally:
        ng.set_grad_enabled(True)
    out = Twice.apply(h)
    assert out.requires_grad and not any(t.requires_grad for t in out.grad_fn.inside)
    assert all(t.requires_grad for t in _fast_path_ops(h))
    out.sum().backward()
    close(x.grad, [4.0, 4.0])


def test_a_thread_whose_tape_is_made_inside_a_functions_forward_keeps_the_fast_paths(
    monkeypatch,
):
    # a new thread's first recorded op runs under enable_grad inside a Function's forward:
    # its tape is made there, and after apply the thread's grad-mode state must name it
    # (grad_mode._State.recording is derived from the mode and the tape, not restored from
    # a copy taken before the tape existed), or every later op misses the fast paths
    grad_state = sys.modules["nautograd.autograd.grad_mode"]._state

    class Inner(ng.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            with ng.enable_grad():
                (ng.tensor([1.0], requires_grad=True) * 2.0).sum()  # the thread's tape
            return y * 2.0

        @staticmethod
        def backward(ctx, grad):
            return grad * 2.0

    found = []

    def body():
        x = ng.tensor([0.5, -1.0], dtype=ng.float64, requires_grad=True)
        out = Inner.apply(x)
        tape = current_tape()
        found.append((grad_state.enabled, grad_state.recording is tape))
        h = out * 3.0
        _fast_path_ops(h)
        general = len(calls)
        found.append(all(_deferred(t) for t in _fast_path_ops(h)) and len(calls) == general)
        h.sum().backward()
        found.append(x.grad.tolist())

    calls = []
    lazy = tensor_module._lazy
    monkeypatch.setattr(tensor_module, "_lazy", lambda *a: calls.append(a[0].name) or lazy(*a))
    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert found == [(True, True), True, [6.0, 6.0]]


def test_ops_on_unread_results_of_a_batch_that_ran_go_to_a_new_batch():
    # the fast paths take a batch as open while the tape has not reached its stop; a batch
    # that ran has stop -1 (Tape.run_batch), so an op on one of its results not yet read
    # goes to the general path, which imports it into the next batch
    x0 = np.array([0.5, -1.0, 2.0])
    results = []
    for lib in (ng, torch):
        x = lib.tensor(x0, requires_grad=True)
        h = x * 2.0
        ops = _fast_path_ops(h, lib)  # (the heads: later calls take the fast paths)
        a = h.exp()
        b = h * h
        b.tolist()  # runs the batch: a is still deferred, unread
        if lib is ng:
            assert _deferred(a) and a._b.S is not None and a._b.stop == -1
        later = _fast_path_ops(a, lib) + [a * h, h * a]
        if lib is ng:
            batch = later[0]._b
            assert all(_deferred(t) and t._b is batch for t in later)
            assert batch is not a._b
        loss = sum(t.sum() * (k + 1.0) for k, t in enumerate(later + ops))
        loss.backward()
        results.append([t.detach() for t in later] + [x.grad])
    for ours, theirs in zip(*results, strict=True):
        close(ours, theirs)


def test_value_ids_and_nodes_past_the_end_of_the_id_table_count_on(monkeypatch):
    # the fast paths take the next value id and node number from tensor._NEXT and count on
    # with i + 1 past its end: a short table makes a batch cross it in every kind of op
    monkeypatch.setattr(tensor_module, "_NEXT", list(range(1, 24)))
    rng = np.random.default_rng(13)
    x0 = rng.standard_normal(4)
    results = []
    for lib in (ng, torch):
        x = lib.tensor(x0, requires_grad=True)
        h = x * 1.5
        outs = []
        for _ in range(12):
            parts = _fast_path_ops(h, lib)
            h = lib.tanh(h) + lib.softmax(h, 0) * h.sum()
            outs += parts
        if lib is ng:
            assert all(_deferred(t) for t in outs)
            assert current_tape().batch.nv > 24 and current_tape().n > 24
        sum(t.sum() * (k % 5 + 1.0) for k, t in enumerate(outs)).backward()
        results.append([t.detach() for t in outs] + [x.grad])
    for ours, theirs in zip(*results, strict=True):
        close(ours, theirs, 1e-10)


def test_a_deferred_result_used_on_another_thread_extends_its_graph():
    # (torch: a graph is not tied to a thread; the op records where its input's graph is)
    x = ng.tensor([1.0, 2.0], dtype=ng.float64, requires_grad=True)
    y = x * 3.0
    assert _deferred(y)
    box = {}

    def other():
        box["z"] = (y * y).sum()
        box["g"] = ng.autograd.grad(box["z"], x, retain_graph=True)[0]

    t = threading.Thread(target=other)
    t.start()
    t.join()
    close(box["g"], 18.0 * np.array([1.0, 2.0]))
    box["z"].backward()  # (and on this thread)
    close(x.grad, 18.0 * np.array([1.0, 2.0]))


def test_grad_fn_and_hooks_of_a_deferred_result():
    x = ng.tensor([1.0, 2.0], dtype=ng.float64, requires_grad=True)
    y = x * x
    assert _deferred(y)
    assert y.grad_fn.name() == "MulBackward0"
    seen = []
    z = y.sin()
    z.register_hook(lambda g: seen.append(g.tolist()))
    z.retain_grad()
    z.sum().backward()
    assert seen == [[1.0, 1.0]]
    close(z.grad, np.ones(2))
    close(x.grad, np.cos([1.0, 4.0]) * 2 * np.array([1.0, 2.0]))


def test_anomaly_mode_keeps_the_forward_stack_of_deferred_nodes():
    x = ng.tensor([1.0, -1.0], dtype=ng.float64, requires_grad=True)
    with ng.autograd.detect_anomaly():
        y = x.sqrt()  # nan at -1
        assert _deferred(y)
        assert "test_deferred.py" in "".join(y.grad_fn.metadata["traceback_"])


def test_code_that_reads_a_value_after_every_op_stops_deferring_for_a_while():
    # each deferred op here starts a batch the next line runs at once: after a few such
    # batches the ops run eagerly (a batch of one op cost ~20 us to run)
    x = ng.tensor([0.5, 1.0], dtype=ng.float64, requires_grad=True)
    kinds = []
    for _ in range(3 * tensor_module.SMALL_RUNS):
        y = x * 2.0
        kinds.append(_deferred(y))
        y.tolist()
    assert kinds[0] and not kinds[-1]
    # ops that keep recording without reading defer again after the spell
    for _ in range(tensor_module.EAGER_SPELL):
        x * 2.0
    h = x
    for _ in range(20):
        h = h * 0.5 + x
    assert _deferred(h)


def test_each_eager_spell_that_follows_another_lasts_longer_until_a_big_batch():
    x = ng.tensor([0.5, 1.0], dtype=ng.float64, requires_grad=True)

    def starts_of_deferred_runs(n):
        # the op numbers where a run of deferred ops begins, when each result is read at once
        kinds = []
        for _ in range(n):
            y = x * 2.0
            kinds.append(_deferred(y))
            y.tolist()
        return [i for i, k in enumerate(kinds) if k and (i == 0 or not kinds[i - 1])]

    spell = tensor_module.EAGER_SPELL
    starts = starts_of_deferred_runs(2 * spell + 3 * spell + 20)
    assert len(starts) == 3
    # each run: SMALL_RUNS deferred ops, the op that starts the spell, the spell
    assert starts[1] - starts[0] == tensor_module.SMALL_RUNS + 1 + spell
    assert starts[2] - starts[1] == tensor_module.SMALL_RUNS + 1 + 2 * spell
    # a graph that records many ops before its value is read: the next spell is the first's
    while not _deferred(x * 2.0):
        pass
    h = x
    for _ in range(20):
        h = h * 0.5 + x
    h.tolist()
    starts = starts_of_deferred_runs(spell + 20)
    assert starts[1] - starts[0] == tensor_module.SMALL_RUNS + 1 + spell


def test_an_eager_result_of_another_thread_next_to_a_deferred_value_raises():
    # the fast path for an operand from outside checks its tape as the general path does
    box = {}

    def other():
        x = ng.tensor([1.0, 2.0, 3.0], dtype=ng.float64, requires_grad=True)
        e = x * 2.0
        e.tolist()  # (now a plain tensor recorded on this thread's tape)
        box["e"] = e
        box["x"] = x

    t = threading.Thread(target=other)
    t.start()
    t.join()
    x = ng.tensor([0.5, 1.0, 1.5], dtype=ng.float64, requires_grad=True)
    y = x * 2.0
    y + ng.tensor([1.0, 2.0, 3.0], dtype=ng.float64)  # (the head for this key)
    assert _deferred(y) and not _deferred(box["e"])
    with pytest.raises(RuntimeError, match="another thread's tape"):
        y + box["e"]


def test_deferred_softplus_and_sigmoid_equal_the_eager_forward_to_the_bit():
    x0 = np.linspace(-30.0, 30.0, 16)
    results = []
    for defer in (True, False):
        tensor_module.DEFER[0] = defer
        try:
            x = ng.tensor(x0, requires_grad=True)
            outs = [ng.nn.functional.softplus(x), ng.nn.functional.softplus(x, 2.0, 5.0)]
            outs.append(ng.sigmoid(x))
            assert all(_deferred(o) for o in outs) == defer
            results.append([o.detach().numpy().copy() for o in outs])
        finally:
            tensor_module.DEFER[0] = True
    for lazy, eager in zip(*results, strict=True):
        np.testing.assert_array_equal(lazy, eager)


def test_deferred_and_eager_tanh_agree_to_the_bit_and_with_torch_within_2_ulp():
    # both run the branch-free vtanh (kernels/_vmath.py) that the executor vectorises
    x0 = np.concatenate(
        [np.linspace(-25.0, 25.0, 2001), np.geomspace(1e-300, 0.7, 300), [0.0, -0.0, 0.6249]]
    )
    x0 = np.concatenate([x0, -x0[-303:]])
    results = []
    for defer in (True, False):
        tensor_module.DEFER[0] = defer
        try:
            x = ng.tensor(x0, requires_grad=True)
            out = ng.tanh(x)
            assert _deferred(out) == defer
            results.append(out.detach().numpy().copy())
        finally:
            tensor_module.DEFER[0] = True
    np.testing.assert_array_equal(results[0], results[1])
    expected = torch.tanh(torch.tensor(x0)).numpy()
    ulps = np.abs(results[0] - expected) / np.spacing(np.maximum(np.abs(expected), 1e-300))
    assert ulps.max() <= 2.0
    assert np.array_equal(np.signbit(results[0]), np.signbit(expected))  # tanh(-0.0) = -0.0


def test_an_unhashable_attribute_of_a_deferred_op_raises_the_ops_type_error():
    # the fast paths looked the attribute up in a dict: "unhashable type: 'list'"
    x = ng.tensor([1.0, 2.0], dtype=ng.float64, requires_grad=True)
    h = x * 2.0
    assert _deferred(h)
    for call in (
        lambda: ng.softmax(h, [0]),
        lambda: ng.softmax(h, dim=[0]),
        lambda: h.unbind([0]),
        lambda: ng.stack([h, h], [0]),
    ):
        with pytest.raises(TypeError, match="dim must be an int, got list"):
            call()


def test_a_deferred_division_by_zero_gives_inf_and_nan_as_torch():
    # the lazy forwards are inlined into the executor and compile under its flags: with
    # Python's error model a float division by zero would raise ZeroDivisionError there
    values = [1.0, -2.0, 0.0]
    x = ng.tensor(values, dtype=ng.float64, requires_grad=True)
    result = (x * 1.0) / ng.tensor([0.0, 0.0, 0.0], dtype=ng.float64)
    assert _deferred(result)
    xt = torch.tensor(values, dtype=torch.float64)
    np.testing.assert_array_equal(result.detach().numpy(), (xt / 0.0).numpy())


def test_a_node_saving_two_big_inputs_checks_each_and_only_its_own():
    # a deferred node keeps what it saved by address through its version entries, one entry
    # tuple per value shared by the nodes that saved it (Tape._note_batch_versions): a node
    # that saved A and B raises when B changes in place; one that saved A alone does not
    rng = np.random.default_rng(11)
    a0, b0, h0 = rng.standard_normal((6, 6)), rng.standard_normal((6, 6)), rng.standard_normal(6)
    for lib in (ng, torch):
        A = lib.tensor(a0, requires_grad=True)
        B = lib.tensor(b0, requires_grad=True)
        h = lib.tensor(h0, requires_grad=True)
        only_a = (A @ h).sum()  # saves A (and h)
        both = (A @ B).sum()  # saves A and B
        if lib is ng:
            assert _deferred(only_a) and _deferred(both)
        with lib.no_grad():
            B.mul_(2.0)
        (grad_h,) = lib.autograd.grad(only_a, h, retain_graph=True)
        close(grad_h, a0.sum(0))
        with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
            both.backward()


def test_double_backward_through_a_deferred_node_that_saved_a_big_input_by_address():
    # create_graph reads a deferred node's by-address values from its version entries
    rng = np.random.default_rng(12)
    w0, h0, v0 = rng.standard_normal((6, 6)), rng.standard_normal(6), rng.standard_normal((6, 6))
    results = []
    for lib in (ng, torch):
        W = lib.tensor(w0, requires_grad=True)
        h = lib.tensor(h0, requires_grad=True)
        loss = lib.tanh(W @ h).sum()
        if lib is ng:
            assert _deferred(loss)
        (grad_W,) = lib.autograd.grad(loss, W, create_graph=True)
        (grad_W * lib.tensor(v0)).sum().backward()
        results.append((grad_W.detach(), W.grad, h.grad))
    for ours, theirs in zip(*results, strict=True):
        close(ours, theirs)


def test_double_backward_through_a_node_saving_a_slice_and_a_reshape_of_one_tensor():
    # x[:20] and x.reshape(20, 20) start at one address with different sizes: a deferred
    # node that saved both must give create_graph each of them (the by-address lookup
    # returned the 400-element array for the slice: "cannot reshape array of size 400")
    x0 = np.random.default_rng(13).standard_normal(400) * 0.1
    results = []
    for lib in (ng, torch):
        x = lib.tensor(x0, requires_grad=True)
        loss = lib.tanh(x[:20] @ x.reshape(20, 20)).sum()
        if lib is ng:
            assert _deferred(loss)
        (grad_x,) = lib.autograd.grad(loss, x, create_graph=True)
        (grad_x * grad_x).sum().backward()
        results.append((grad_x.detach(), x.grad))
    for ours, theirs in zip(*results, strict=True):
        close(ours, theirs)


def test_a_detached_deferred_result_made_a_leaf_gets_its_gradient_and_frees_its_handles():
    # a deferred result holds no handle: one that becomes a leaf is a plain Tensor by the
    # time it has an AccumulateGrad handle (its value is read first)
    tape = current_tape()
    x = ng.tensor([0.5, -1.0], dtype=ng.float64, requires_grad=True)
    y = x * 3.0
    assert _deferred(y)
    y.detach_()
    y.requires_grad_()
    assert y.is_leaf and not _deferred(y)
    (y * y).sum().backward()
    close(y.grad, 2 * np.array([1.5, -3.0]))
    live, acc_live = tape.live, tape.acc_live
    del y
    assert (tape.live, tape.acc_live) == (live - 1, acc_live - 1)
    z = x * 2.0
    assert _deferred(z)
    live = tape.live
    w = z * 2.0
    assert tape.live == live  # deferred results hold no handle
    w.tolist()  # runs their batch: w gets a handle; the batch keeps its 2 nodes while z lives
    assert not _deferred(w) and _deferred(z)
    assert tape.live == live + 1 + 2
    del w
    assert tape.live == live + 2
    del z  # the batch dies with its last deferred result
    assert tape.live == live


def test_a_sweep_keeps_every_node_of_a_live_batch_and_renumbers_them():
    # compaction keeps a live run batch's nodes in one run and moves its first node: a
    # result read after the sweep gets the handle of its own node (its gradient below)
    tape = current_tape()
    x = ng.tensor([0.5, -1.0], dtype=ng.float64, requires_grad=True)
    dead = [ng.exp(x * float(k)) for k in range(50)]
    dead[-1].tolist()  # (its batch runs)
    y = ng.tanh(x * 3.0) * x
    z = ng.sin(y) + y
    z.sum()  # (still deferred)
    n0 = tape.batch.n0
    del dead
    tape.reserve(0)  # runs y's batch
    assert _deferred(y) and _deferred(z)
    assert tape.batch is None and tape.n > n0
    tape.compact()
    assert tape.n < n0 + 10  # the dead batch's nodes are gone, y's batch is whole
    (grad_x,) = ng.autograd.grad(z.sum(), x)
    xt = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    yt = torch.tanh(xt * 3.0) * xt
    (torch.sin(yt) + yt).sum().backward()
    close(grad_x, xt.grad)
    close(y, yt)


def test_a_batch_whose_last_result_dies_on_another_thread_is_let_go():
    # the batch's weak reference dies where its last result does: the tape then counts its
    # nodes no more (a count kept beside the dict could lose that update across threads)
    import gc

    gc.collect()  # (batches of earlier tests' garbage cycles would be counted too)
    tape = current_tape()
    x = ng.tensor([0.5, -1.0], dtype=ng.float64, requires_grad=True)
    y = ng.tanh(x * 2.0)
    tape.reserve(0)  # runs the batch; y stays deferred
    assert _deferred(y) and len(tape.batches) == 1
    live, nodes = tape.live, sum(tape.batches.values())
    box = [y]
    del y
    worker = threading.Thread(target=box.clear)
    worker.start()
    worker.join()
    assert not tape.batches and tape.live == live - nodes


def test_a_forced_deferred_result_gives_its_handle_back_when_it_dies():
    # a forced result gives its handle back when it dies, as any tensor
    tape = current_tape()
    x = ng.tensor([0.5, -1.0], dtype=ng.float64, requires_grad=True)
    y = x * 2.0
    y.tolist()
    assert not _deferred(y) and y._h >= 0
    h = y._h
    del y
    assert tape.h2node[h] == -1 and h in tape.free_h


def test_results_of_cached_compiled_functions_keep_numpys_dtype_objects():
    # a product of 2^16 multiply-adds or more runs in a cached compiled function, whose
    # result carried a dtype object unpickled from Numba's cache: equal to float32, not it,
    # and every op downstream of it left the fast paths (and the deferred forward)
    for dt in (np.float32, np.float64):
        x = ng.tensor(np.ones((16, 64), dt))
        w = ng.tensor(np.ones((64, 256), dt), requires_grad=True)
        y = x @ w
        assert y._data.dtype is np.dtype(dt)
        assert ng.sigmoid(y).sum()._data.dtype is np.dtype(dt)
