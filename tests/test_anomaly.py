"""Anomaly detection (torch.autograd.detect_anomaly / set_detect_anomaly), against torch."""

import warnings

import numpy as np
import pytest
import torch

import nautograd as ng

LIBS = [ng, torch]
W3 = "Anomaly Detection has been enabled"


@pytest.fixture(autouse=True)
def _anomaly_off():
    yield
    ng.autograd.set_detect_anomaly(False)
    torch.autograd.set_detect_anomaly(False)


def _messages(record):
    return [str(w.message) for w in record if issubclass(w.category, UserWarning)]


def _nan_backward(lib, anomaly_forward=True, check_nan=True):
    """sqrt(-1)'s backward gives NaN: (error text, warnings, x.grad)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with lib.autograd.set_detect_anomaly(anomaly_forward, check_nan):
            x = lib.tensor([-1.0, 4.0], requires_grad=True)
            y = x.sqrt()  # the forward line the warning points at
        with lib.autograd.set_detect_anomaly(True, check_nan):
            try:
                y.sum().backward()
                error = None
            except RuntimeError as e:
                error = str(e)
    return error, _messages(record), x.grad


@pytest.mark.parametrize("lib", LIBS, ids=["ng", "torch"])
def test_nan_in_a_gradient_raises_naming_the_node_and_warns_with_its_forward_line(lib):
    error, messages, _ = _nan_backward(lib)
    assert error == "Function 'SqrtBackward0' returned nan values in its 0th output."
    (w4,) = [m for m in messages if m.startswith("Error detected in")]
    head = "Error detected in SqrtBackward0. Traceback of forward call that caused the error:\n"
    assert w4.startswith(head)
    assert "test_anomaly.py" in w4 and "y = x.sqrt()" in w4


def test_the_forward_stack_ends_at_the_users_line_as_torch():
    stacks = []
    for lib in LIBS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.autograd.detect_anomaly():
                x = lib.tensor([1.0], requires_grad=True)
                y = x * 2
        stacks.append(y.grad_fn.metadata["traceback_"][-1])
    assert stacks[0].split(", in ")[1] == stacks[1].split(", in ")[1]  # function and source
    assert "y = x * 2" in stacks[0]


@pytest.mark.parametrize("lib", LIBS, ids=["ng", "torch"])
def test_without_forward_information_the_warning_says_so(lib):
    error, messages, _ = _nan_backward(lib, anomaly_forward=False)
    assert error == "Function 'SqrtBackward0' returned nan values in its 0th output."
    (w4,) = [m for m in messages if m.startswith("Error detected in")]
    assert w4.startswith(
        "Error detected in SqrtBackward0. No forward pass information available. Enable detect "
        "anomaly during forward pass for more information."
    )


def test_check_nan_false_and_anomaly_off_let_the_nan_through():
    for lib in LIBS:
        error, _, grad = _nan_backward(lib, check_nan=False)
        assert error is None and np.isnan(grad[0].item()) and grad[1].item() == 0.25
        x = lib.tensor([-1.0], requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x.sqrt().sum().backward()
        assert np.isnan(x.grad.item())


def test_modes_switches_and_warning_as_torch():
    seen = []
    for lib in LIBS:
        states = []
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            states.append(lib.is_anomaly_enabled())
            with lib.autograd.detect_anomaly(check_nan=False):
                states.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
            states.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
            lib.autograd.set_detect_anomaly(True)  # a plain call switches it on
            states.append(lib.is_anomaly_enabled())
            with lib.autograd.set_detect_anomaly(False):
                states.append(lib.is_anomaly_enabled())
            states.append(lib.is_anomaly_enabled())  # restored on exit
            lib.autograd.set_detect_anomaly(False)
            states.append(lib.is_anomaly_enabled())
        w3 = [m for m in _messages(record) if m.startswith(W3)]
        seen.append((states, len(w3), w3[0]))
    assert seen[0] == seen[1]


def _nan_function(lib, which):
    class Bad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            bad = g * float("nan")
            return (bad, g) if which == 0 else (g, bad)

    return Bad


@pytest.mark.parametrize("which", [0, 1])
def test_a_custom_function_returning_nan_is_named_with_its_output_index(which):
    errors = []
    for lib in LIBS:
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.tensor([3.0, 4.0], requires_grad=True)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            with lib.autograd.set_detect_anomaly(True):
                z = _nan_function(lib, which).apply(x, y)
                with pytest.raises(RuntimeError) as err:
                    (z * 2).sum().backward()
        errors.append((str(err.value), [m.split(".")[0] for m in _messages(record)]))
    assert errors[0] == errors[1]
    assert errors[0][0] == f"Function 'BadBackward' returned nan values in its {which}th output."


def test_second_backward_through_a_freed_graph_warns_with_the_nodes_forward_line():
    for lib in LIBS:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            with lib.autograd.set_detect_anomaly(True):
                x = lib.tensor([1.0, 2.0], requires_grad=True)
                y = (x * x).sum()
                y.backward()
                with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                    y.backward()
        (w4,) = [m for m in _messages(record) if m.startswith("Error detected in")]
        # the sum saved nothing and runs again; the product's saved x was freed
        assert w4.startswith("Error detected in MulBackward0. Traceback of forward call")
        assert "y = (x * x).sum()" in w4


def test_inplace_modification_error_gives_the_anomaly_hint():
    texts = []
    for lib in LIBS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.autograd.set_detect_anomaly(True):
                x = lib.tensor(np.arange(20.0), requires_grad=True)
                a = x * 1
                y = a.sin()  # saves a
                with lib.no_grad():
                    a.mul_(2)
                with pytest.raises(RuntimeError) as err:
                    y.sum().backward()
        texts.append(str(err.value).split("Hint: ")[1])
    assert texts[0] == texts[1]
    assert texts[0].startswith("the backtrace further above shows the operation")


def test_nan_under_create_graph_raises_the_same():
    for lib in LIBS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.autograd.set_detect_anomaly(True):
                x = lib.tensor([-1.0, 4.0], requires_grad=True)
                with pytest.raises(RuntimeError) as err:
                    lib.autograd.grad(x.sqrt().sum(), x, create_graph=True)
        assert str(err.value) == "Function 'SqrtBackward0' returned nan values in its 0th output."


def test_anomaly_mode_gives_the_same_gradients():
    # every node handed to Python and checked: the same results as the compiled walk
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    grads = []
    for on in (False, True):
        with ng.autograd.set_detect_anomaly(on):
            x = ng.tensor(a, requires_grad=True)
            w = ng.tensor(b, requires_grad=True)
            h = ng.tanh(x @ w)
            h.register_hook(lambda g: g * 2)
            loss = ng.log_softmax(h, 1).sum() + (h * h).mean()
            loss.backward()
            grads.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
    for u, v in zip(*grads, strict=True):
        np.testing.assert_array_equal(u, v)


def test_node_metadata_is_one_dict_per_node():
    x = ng.tensor([1.0], requires_grad=True)
    y = x * 2
    y.grad_fn.metadata["note"] = 1
    assert y.grad_fn.metadata == {"note": 1}
    assert (x * 3).grad_fn.metadata == {}
