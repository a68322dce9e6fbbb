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


# --- Node.register_prehook / Node.register_hook ----------------------------------------------


def _hook_order(lib, mode):
    log = []
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = a.clone()
    c = b * 3
    b.register_hook(lambda g: log.append("tensor_pre_b"))
    a.register_hook(lambda g: log.append("tensor_pre_a"))
    b.grad_fn.register_prehook(lambda go: log.append("pre(b)"))
    b.grad_fn.register_hook(lambda gi, go: log.append("post(b)"))
    acc = b.grad_fn.next_functions[0][0]
    acc.register_prehook(lambda go: log.append("acc_pre"))
    acc.register_hook(lambda gi, go: log.append(("acc_post", len(gi), [g.tolist() for g in go])))
    a.register_post_accumulate_grad_hook(lambda p: log.append("post_acc"))
    loss = c.sum()
    if mode == "backward":
        loss.backward()
    elif mode == "grad(b)":
        lib.autograd.grad(loss, [b])
    elif mode == "grad(a)":
        lib.autograd.grad(loss, [a])
    elif mode == "backward(inputs=[b])":
        loss.backward(inputs=[b])
    elif mode == "create_graph":
        loss.backward(create_graph=True)
    return log


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize(
    "mode", ["backward", "grad(b)", "grad(a)", "backward(inputs=[b])", "create_graph"]
)
def test_tensor_node_and_accumulate_grad_hooks_fire_in_torch_order(mode):
    assert _hook_order(ng, mode) == _hook_order(torch, mode)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("n", [3, 5000])
def test_node_prehook_and_posthook_see_and_replace_gradients_as_torch(create_graph, n):
    def run(lib):
        log = []
        x = lib.tensor(np.linspace(0.1, 1.0, n), requires_grad=True)
        w = lib.tensor(np.full(n, 2.0), requires_grad=True)
        y = (x * w).exp()
        y.grad_fn.register_prehook(lambda go: log.append(("pre", [g.sum().item() for g in go])))
        y.grad_fn.register_hook(
            lambda gi, go: log.append(("post", [g.sum().item() for g in gi], len(go)))
        )
        m = y.grad_fn.next_functions[0][0]
        m.register_hook(lambda gi, go: tuple(None if g is None else g * 10 for g in gi))
        m.register_prehook(lambda go: (go[0] * 2,))
        y.sum().backward(create_graph=create_graph)
        return log, x.grad.detach().numpy(), w.grad.detach().numpy()

    (log, gx, gw), (tlog, tgx, tgw) = run(ng), run(torch)
    assert [entry[0] for entry in log] == [entry[0] for entry in tlog]
    np.testing.assert_allclose(log[0][1], tlog[0][1])
    np.testing.assert_allclose(log[1][1], tlog[1][1])
    np.testing.assert_allclose(gx, tgx, rtol=1e-12)
    np.testing.assert_allclose(gw, tgw, rtol=1e-12)


def test_node_posthook_gets_none_for_an_input_that_needs_no_gradient():
    def run(lib):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * lib.tensor([3.0, 4.0])
        y.grad_fn.register_hook(lambda gi, go: seen.append([g is None for g in gi]))
        y.sum().backward()
        return seen, len(y.grad_fn.next_functions)

    assert run(ng) == run(torch)


def test_node_posthook_accumulates_with_other_consumers():
    # x feeds two products; a hook on one scales only that one's contribution
    def run(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = x * 1.0
        a = h * 2.0
        b = h * 5.0
        a.grad_fn.register_hook(lambda gi, go: (gi[0] * 100, None))
        (a.sum() + b.sum()).backward()
        return x.grad.tolist()

    assert run(ng) == run(torch)


@pytest.mark.parametrize(
    "hook, kind",
    [
        (lambda *args: 1, "post"),
        (lambda *args: 1, "pre"),
        (lambda gi, go: (gi[0], gi[0]), "post"),
        (lambda go: (go[0], go[0]), "pre"),
        (lambda gi, go: (gi[0][:1],), "post"),
        (lambda go: (go[0][:1],), "pre"),
    ],
)
def test_node_hook_returning_a_wrong_value_raises_torch_error(hook, kind):
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        getattr(y.grad_fn, "register_hook" if kind == "post" else "register_prehook")(hook)
        try:
            y.sum().backward()
        except (RuntimeError, TypeError) as e:
            return type(e).__name__, str(e).replace("<lambda>", "hook")
        return None

    assert run(ng) == run(torch) is not None


def test_node_hook_replacing_a_none_gradient_raises_torch_error():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
        try:
            y.sum().backward()
        except RuntimeError as e:
            return str(e)

    assert run(ng) == run(torch) == "can't replace a None gradient with a non-None value"


def test_node_hook_handle_removes_it():
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    seen = []
    handle = y.grad_fn.register_hook(lambda gi, go: seen.append(1))
    pre = y.grad_fn.register_prehook(lambda go: seen.append(2))
    handle.remove()
    pre.remove()
    y.sum().backward()
    assert seen == []
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]))


def test_accumulate_grad_prehook_replaces_what_is_accumulated():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        acc = y.grad_fn.next_functions[0][0]
        acc.register_prehook(lambda go: (go[0] + 1,))
        y.sum().backward()
        return x.grad.tolist()

    assert run(ng) == run(torch) == [4.0, 4.0]


def test_custom_function_node_posthook_sees_and_replaces_its_gradients():
    def run(lib):
        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 2 * x * grad

        seen = []
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        y = Square.apply(x)

        def hook(gi, go):
            seen.append(([g.tolist() for g in gi], [g.tolist() for g in go]))
            return (gi[0] * 2,)

        y.grad_fn.register_hook(hook)
        y.sum().backward()
        return seen, x.grad.tolist()

    assert run(ng) == run(torch)


# --- GradientEdge -----------------------------------------------------------------------------


def test_gradient_edges_as_roots_and_inputs_match_torch():
    def run(lib):
        G = lib.autograd.graph
        f64 = lib.float64

        def t(values):
            return lib.tensor(values, dtype=f64, requires_grad=True)

        out = []
        x = t([1.0, 2.0])
        y = x * 2
        z = y.exp()
        e, ex = G.get_gradient_edge(y), G.get_gradient_edge(x)
        out.append((type(e).__name__, e.output_nr, e.node.name(), ex.node.name()))
        out.append([g.tolist() for g in lib.autograd.grad(z.sum(), e, retain_graph=True)])
        out.append([g.tolist() for g in lib.autograd.grad(z.sum(), (e, ex), retain_graph=True)])
        with pytest.raises(RuntimeError) as info:
            G.get_gradient_edge(lib.ones(2))
        out.append(str(info.value))
        lib.autograd.backward(G.get_gradient_edge((x * 3).sum()), lib.tensor(1.0, dtype=f64))
        out.append(x.grad.tolist())
        with pytest.raises(RuntimeError) as info:
            lib.autograd.backward(G.get_gradient_edge(x * 4))
        out.append(str(info.value))
        lib.autograd.backward(G.get_gradient_edge((x * 4).sum()))  # implicit: a scalar edge
        out.append(x.grad.tolist())
        m = t([[1.0, 2.0], [3.0, 4.0]])
        lib.autograd.backward(G.get_gradient_edge(m.tanh()), lib.ones(2, 2, dtype=f64))
        out.append(np.round(m.grad.numpy(), 12).tolist())
        return out

    assert run(ng) == run(torch)


def test_gradient_edge_is_a_fixed_position_across_inplace_changes_and_outlives_its_tensor():
    def run(lib):
        G = lib.autograd.graph
        a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        b = a * 1
        old = G.get_gradient_edge(b)
        b *= 2
        grads = lib.autograd.grad((b * b).sum(), (old, b))
        p = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        q = p.exp()
        eq = G.get_gradient_edge(q)
        r = (q * q).sum()
        del q
        (gq,) = lib.autograd.grad(r, eq)
        return [g.tolist() for g in grads], np.round(gq.numpy(), 12).tolist()

    assert run(ng) == run(torch)


# torch's grad_fn._saved_<name>: what the table's ops saved, by torch's names


@pytest.mark.parametrize(
    "f, names",
    [
        (lambda lib, x, y: x.exp(), ["result"]),
        (lambda lib, x, y: x.sin(), ["self"]),
        (lambda lib, x, y: x.tanh(), ["result"]),
        (lambda lib, x, y: x.sigmoid(), ["result"]),
        (lambda lib, x, y: x * y, ["self", "other"]),
        (lambda lib, x, y: x / y, ["self", "other"]),
        (lambda lib, x, y: lib.atan2(x, y), ["self", "other"]),
        (lambda lib, x, y: x.reshape(2, 2) @ y.reshape(2, 2), ["self", "mat2"]),
        (lambda lib, x, y: lib.mv(x.reshape(2, 2), y[:2]), ["self", "vec"]),
    ],
)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_saved_values_by_torchs_names(f, names, dtype):
    a, b = np.array([0.3, -1.2, 2.0, 0.7]), np.array([1.5, 0.4, -0.8, 2.5])
    results = []
    for lib in (torch, ng):
        x = lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True)
        y = lib.tensor(b, dtype=getattr(lib, dtype), requires_grad=True)
        fn = f(lib, x, y).grad_fn
        results.append([np.asarray(getattr(fn, f"_saved_{n}").detach()) for n in names])
    for ours, ref in zip(results[1], results[0], strict=True):
        assert ours.dtype == ref.dtype and ours.shape == ref.shape
        np.testing.assert_allclose(ours, ref, rtol=1e-6)


def test_saved_values_are_freed_by_backward_and_unknown_names_raise_as_torch():
    for lib in (torch, ng):
        x = lib.tensor([0.5, 1.0], requires_grad=True)
        y = x.tanh()
        y.sum().backward(retain_graph=True)
        assert y.grad_fn._saved_result is not None  # (kept by retain_graph)
        y.sum().backward()
        with pytest.raises(RuntimeError, match="directly access saved tensors after they have"):
            getattr(y.grad_fn, "_saved_result")  # noqa: B009  (the access raises)
        with pytest.raises(AttributeError, match="'ExpBackward0' object has no attribute"):
            getattr(x.exp().grad_fn, "_saved_other")  # noqa: B009
        assert not hasattr(x.exp().grad_fn, "_saved_self")
