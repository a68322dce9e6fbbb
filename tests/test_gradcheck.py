"""autograd.gradcheck / gradgradcheck: the op table passes, and failures read as torch's."""

import re
import warnings

import numpy as np
import pytest
import torch
from op_cases import CASES, case_id, make_inputs
from test_function import square_function

import nautograd as ng
from nautograd.kernels.registry import Case, run_case

FD_CASES = [c for c in CASES if c[0].differentiable and c[2].gradcheck]


def _case_function(op, arrays, kwargs, case):
    """(func, inputs) for gradcheck: func takes the case's tensor and number inputs."""
    inputs = tuple(
        ng.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) else a for a in arrays
    )
    kw = {k: (ng.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}

    def func(*xs):
        return run_case(op, Case((), call=case.call), ng.tensor_apply, list(xs), kw)

    return func, inputs


def _float64_outputs(func, inputs):
    out = func(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    return all(o.dtype == np.float64 for o in outs if o.requires_grad)


@pytest.mark.parametrize("op,i,case", FD_CASES, ids=[case_id(c) for c in FD_CASES])
def test_every_op_passes_gradcheck_and_gradgradcheck(op, i, case, rng):
    arrays, kwargs = make_inputs(case, rng)
    func, inputs = _case_function(op, arrays, kwargs, case)
    if not _float64_outputs(func, inputs):
        pytest.skip("finite differences need a float64 result")
    assert ng.autograd.gradcheck(func, inputs, fast_mode=True)
    assert ng.autograd.gradgradcheck(func, inputs, fast_mode=True)


def _wrong_square(lib, factor, detach=False):
    return square_function(lib, factor, detach)


def _error(fn):
    """(exception type, text) of what ``fn`` raises, the text's tensors written as the list
    of their numbers (the two libraries print tensors with different padding, and torch
    writes -0. where nautograd's accumulated zeros are 0.)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        text = str(e).replace(", dtype=torch.float64", "")
        numbers = [float(v) + 0.0 for v in re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", text)]
        return type(e).__name__, re.sub(r"tensor\([^)]*\)", "tensor", text), numbers
    return None


def _both(make):
    """make(lib) -> a thunk; the (exception type, text) it raises with nautograd and torch."""
    return _error(make(ng)), _error(make(torch))


X = np.array([0.3, -0.7, 1.2])


def test_a_wrong_backward_fails_with_torchs_jacobian_mismatch():
    def make(lib, fast=False):
        x = lib.tensor(X, requires_grad=True)
        return lambda: lib.autograd.gradcheck(_wrong_square(lib, 3).apply, (x,), fast_mode=fast)

    ours, theirs = _both(make)
    assert ours == theirs
    assert ours[0] == "GradcheckError"
    assert ours[1].startswith("Jacobian mismatch for output 0 with respect to input 0,\n")
    # fast mode: the same first line, then its slow-mode recomputation
    (_, ours, numbers), (_, theirs, _) = _error(make(ng, True)), _error(make(torch, True))
    # (u and v come from different generators: the fast-mode numbers differ)
    assert re.sub(r"-?\d+\.\d+", "x", ours) == re.sub(r"-?\d+\.\d+", "x", theirs)
    assert "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876" in ours
    assert numbers[-1] == pytest.approx(1.2)  # the max difference: 3 x - 2 x at x = 1.2


def test_raise_exception_false_returns_false():
    for lib in (ng, torch):
        x = lib.tensor(X, requires_grad=True)
        f = _wrong_square(lib, 3).apply
        assert lib.autograd.gradcheck(f, (x,), raise_exception=False) is False
        assert lib.autograd.gradcheck(_wrong_square(lib, 2).apply, (x,)) is True


def test_input_errors_and_warnings_as_torch():
    def nothing_requires_grad(lib):
        return lambda: lib.autograd.gradcheck(lambda x: x * 2, (lib.tensor(X),))

    def stride_zero(lib):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        return lambda: lib.autograd.gradcheck(lambda y: y * 2, (x.expand(3, 2),))

    def constant_function(lib):
        x = lib.tensor(X, requires_grad=True)
        return lambda: lib.autograd.gradcheck(lambda x: x.detach() * 2, (x,))

    for make in (nothing_requires_grad, stride_zero, constant_function):
        ours, theirs = _both(make)
        assert ours == theirs and ours is not None, make.__name__
    texts = []
    for lib in (ng, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float32, requires_grad=True)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            err = _error(lambda lib=lib, x=x: lib.autograd.gradcheck(lambda y: y * 2, (x,)))
        texts.append(([str(w.message) for w in record], err[1].split("\n")[0]))
    assert texts[0] == texts[1]  # float32: the warning, and the differences are too coarse


def test_non_reentrant_and_unscaled_backwards_fail_as_torch():
    def non_reentrant(lib):
        calls = []

        class Drift(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                calls.append(1)
                return g * 2 + len(calls) * 1e-3

        x = lib.tensor(X, requires_grad=True)
        return lambda: lib.autograd.gradcheck(Drift.apply, (x,), atol=1e-2)

    def not_multiplied(lib):
        class Ones(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return lib.ones_like(g)

        x = lib.tensor(X[:1], requires_grad=True)
        return lambda: lib.autograd.gradcheck(Ones.apply, (x,))

    for make, start in (
        (non_reentrant, "Backward is not reentrant, i.e., running backward with same input"),
        (not_multiplied, "backward not multiplied by grad_output"),
    ):
        ours, theirs = _both(make)
        assert ours == theirs, make.__name__
        assert ours[0] == "GradcheckError" and ours[1].startswith(start)


def test_gradgradcheck_catches_a_wrong_second_derivative():
    for lib in (ng, torch):
        x = lib.tensor(X, requires_grad=True)
        good = _wrong_square(lib, 2).apply
        bad = _wrong_square(lib, 2, detach=True).apply  # its backward is not differentiated
        assert lib.autograd.gradgradcheck(good, (x,))
        err = _error(lambda lib=lib, bad=bad, x=x: lib.autograd.gradgradcheck(bad, (x,)))
        assert err[0] == "GradcheckError"
        assert err[1].startswith("Jacobian mismatch for output 0 with respect to input 0,")


def test_several_inputs_and_outputs_with_numbers_among_the_inputs():
    def f(x, k, w):
        return ng.tanh(w @ x) * k, (x * x).sum()

    x = ng.tensor(X, requires_grad=True)
    w = ng.tensor(np.arange(6.0).reshape(2, 3) / 5, requires_grad=True)
    assert ng.autograd.gradcheck(f, (x, 3, w))
    assert ng.autograd.gradcheck(f, (x, 3, w), fast_mode=True)
    assert ng.autograd.gradgradcheck(f, (x, 3, w))


def test_fast_mode_leaves_the_users_random_state_alone():
    ng.manual_seed(0)
    a = ng.rand(4)
    ng.manual_seed(0)
    ng.autograd.gradcheck(lambda x: x.exp(), (ng.tensor(X, requires_grad=True),), fast_mode=True)
    assert ng.rand(4).tolist() == a.tolist()


def test_check_batched_grad_runs_batched_cotangents():
    x = ng.tensor(X, requires_grad=True)
    w = ng.tensor(np.arange(6.0).reshape(2, 3) / 5, requires_grad=True)
    f = lambda x, w: (ng.tanh(w @ x), (x * x).sum())  # noqa: E731
    assert ng.autograd.gradcheck(f, (x, w), check_batched_grad=True)
    assert ng.autograd.gradgradcheck(f, (x, w), check_batched_grad=True)


def test_check_batched_forward_grad_runs_batched_tangents():
    x = ng.tensor(X, requires_grad=True)
    w = ng.tensor(np.arange(6.0).reshape(2, 3) / 5, requires_grad=True)
    f = lambda x, w: (ng.tanh(w @ x), (x * x).sum(), ng.softmax(w, 1))  # noqa: E731
    assert ng.autograd.gradcheck(f, (x, w), check_forward_ad=True, check_batched_forward_grad=True)


def test_check_batched_forward_grad_finds_a_tangent_that_differs_when_batched():
    class Wrong(ng.autograd.Function):
        # a jvp that is right one tangent at a time and wrong on a batch of them
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return t * (3 if type(t).__name__ == "BatchedTensor" else 2)

    x = ng.tensor(X, requires_grad=True)
    assert ng.autograd.gradcheck(Wrong.apply, (x,), check_forward_ad=True)
    with pytest.raises(
        ng.autograd.GradcheckError, match="batched gradient computation with forward-mode AD"
    ):
        ng.autograd.gradcheck(
            Wrong.apply, (x,), check_forward_ad=True, check_batched_forward_grad=True
        )


def test_unsupported_checks_say_so():
    x = ng.tensor(X, requires_grad=True)
    with pytest.raises(AssertionError, match="requires check_forward_ad to be True"):
        ng.autograd.gradcheck(lambda x: x * 2, (x,), check_batched_forward_grad=True)
    with pytest.raises(AssertionError, match="Expected at least one of check_fwd_over_rev"):
        ng.autograd.gradgradcheck(lambda x: x * 2, (x,), check_rev_over_rev=False)


def _undefined_aware(lib, on_none):
    """A Function that does not materialize its gradients: its backward sees None for an
    output gradient no one defined, and answers ``on_none(x)`` when both are None."""

    class Twice(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            if g1 is None and g2 is None:
                return on_none(lib, x)
            return (0 if g1 is None else g1) * 2 + (0 if g2 is None else g2) * 3

    return Twice


def _raise(lib, x):
    raise RuntimeError("an undefined gradient")


def test_undefined_output_gradients_reach_a_backward_as_none_as_torch():
    # torch's gradcheck puts an UndefinedGrad node after the outputs (all of them, then one
    # at a time): a backward must take None and give None or zeros
    for on_none in (
        lambda lib, x: None,  # fine: an undefined gradient in, an undefined one out
        lambda lib, x: lib.zeros_like(x),  # fine too
        _raise,  # "Expected backward function to handle undefined output grads."
        lambda lib, x: lib.ones_like(x),  # "Expected all input grads to be undefined or zero"
    ):

        def make(lib, on_none=on_none):
            x = lib.tensor(X, requires_grad=True)
            f = _undefined_aware(lib, on_none).apply
            return lambda: lib.autograd.gradcheck(f, (x,))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the backwards-compatibility warning, as torch's
            ours, theirs = _both(make)
        assert ours == theirs
    assert ours[0] == "GradcheckError"
    assert ours[1].startswith("Expected all input grads to be undefined or zero")
