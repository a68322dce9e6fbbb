"""Inference tensors (``inference_mode``) and ``set_multithreading_enabled``, against torch."""

import pytest
import torch

import nautograd as ng


def _outcome(f):
    try:
        f()
        return "ok"
    except RuntimeError as e:
        return str(e)


def _both(check):
    return check(ng), check(torch)


def test_tensors_made_under_inference_mode_are_inference_tensors():
    def check(lib):
        with lib.inference_mode():
            a = lib.ones(3)
            b = a * 2
            c = lib.tensor([1.0, 2.0])
        n = lib.ones(3)
        with lib.inference_mode():
            v = n[:2]  # a view of a normal tensor stays normal
        return [
            a.is_inference(),
            b.is_inference(),
            c.is_inference(),
            v.is_inference(),
            lib.is_inference(a),
            (a + 1).is_inference(),  # made outside: normal
            a.view(3).is_inference(),  # a view of an inference tensor
            a.clone().is_inference(),
            n.is_inference(),
        ]

    mine, theirs = _both(check)
    assert mine == theirs


def test_inplace_on_inference_tensor_outside_inference_mode_raises_torch_error():
    def check(lib):
        with lib.inference_mode():
            a = lib.ones(3)
            a.add_(1)  # inside: allowed
        return [
            _outcome(lambda: a.add_(1)),
            _outcome(lambda: a.mul_(2)),
            _outcome(lambda: a.exp_()),
            _outcome(lambda: a[0].add_(1)),
            _outcome(lambda: a.__setitem__(0, 5.0)),
            _outcome(lambda: a.zero_()),
        ], a

    (mine, a), (theirs, _) = _both(check)
    assert mine == theirs
    assert mine[0].startswith("Inplace update to inference tensor outside InferenceMode")
    # torch writes before it raises; nautograd raises before writing
    assert a.tolist() == [2.0, 2.0, 2.0]


def test_inference_tensor_has_no_version_counter_and_cannot_require_grad_outside():
    def check(lib):
        with lib.inference_mode():
            a = lib.ones(3)
            c = lib.ones(2, requires_grad=True)  # inside: allowed
        return [
            _outcome(lambda: a._version),
            _outcome(lambda: a.requires_grad_()),
            c.requires_grad,
            c.is_inference(),
        ]

    mine, theirs = _both(check)
    assert mine == theirs


@pytest.mark.parametrize("n", [3, 300])
def test_saving_an_inference_tensor_for_backward_raises_torch_error(n):
    def check(lib):
        with lib.inference_mode():
            a = lib.ones(n)
        w = lib.ones(n, requires_grad=True)
        results = [
            _outcome(lambda: w * a),  # mul saves both operands
            _outcome(lambda: w.exp() * a),
            _outcome(lambda: (w + a).sum()),  # add saves nothing: allowed
        ]
        loss = (w * 2).sum()  # the graph still works after the error
        loss.backward()
        return results + [w.grad.tolist()]

    mine, theirs = _both(check)
    assert mine == theirs
    assert mine[0].startswith("Inference tensors cannot be saved for backward.")


def test_view_made_in_inference_mode_modified_in_place_outside_raises():
    def check(lib):
        leaf = lib.ones(3, requires_grad=True)
        x = leaf * 1
        with lib.inference_mode():
            v = x[:2]
        n = lib.ones(3)
        with lib.inference_mode():
            u = n[:2]
        return [_outcome(lambda: v.add_(1)), _outcome(lambda: u.add_(1))]

    mine, theirs = _both(check)
    assert mine == theirs


def test_set_multithreading_enabled_is_a_thread_local_mode_as_torch():
    def check(lib):
        seen = []
        with lib.autograd.set_multithreading_enabled(False):
            seen.append(lib.autograd.is_multithreading_enabled())
            x = lib.ones(2, requires_grad=True)
            (x * x).sum().backward()
            seen.append(x.grad.tolist())
        seen.append(lib.autograd.is_multithreading_enabled())
        lib.autograd.set_multithreading_enabled(False)
        seen.append(lib.autograd.is_multithreading_enabled())
        lib.autograd.set_multithreading_enabled(True)
        return seen

    mine, theirs = _both(check)
    assert mine == theirs == [False, [2.0, 2.0], True, False]
