"""nn.functional composites: state, randomness and errors the op table's cases do not reach."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import nautograd as ng

F = ng.nn.functional


def test_batch_norm_training_updates_running_stats_as_torch(rng):
    a = rng.standard_normal((8, 3, 4))
    rm, rv = np.zeros(3), np.ones(3)
    ours_m, ours_v = ng.tensor(rm.copy()), ng.tensor(rv.copy())
    ref_m, ref_v = torch.tensor(rm.copy()), torch.tensor(rv.copy())
    x, tx = ng.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    for _ in range(2):
        y = F.batch_norm(x, ours_m, ours_v, training=True, momentum=0.3)
        ty = TF.batch_norm(tx, ref_m, ref_v, training=True, momentum=0.3)
    np.testing.assert_allclose(ours_m.numpy(), ref_m.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours_v.numpy(), ref_v.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_dropout_is_seeded_and_scales_kept_elements():
    x = ng.ones(1000, requires_grad=True)
    ng.manual_seed(7)
    y1 = F.dropout(x, p=0.25)
    ng.manual_seed(7)
    y2 = F.dropout(x, p=0.25)
    np.testing.assert_array_equal(y1.detach().numpy(), y2.detach().numpy())
    kept = y1.detach().numpy() != 0
    np.testing.assert_allclose(y1.detach().numpy()[kept], 1 / 0.75)
    assert 0.65 < kept.mean() < 0.85
    y1.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 1 / 0.75, 0.0))
    assert F.dropout(x, p=0.5, training=False) is x


def test_cross_entropy_target_out_of_range_raises_naming_the_op():
    x = ng.randn(3, 4, requires_grad=True)
    with pytest.raises(IndexError, match=r"nll_loss\(\): Target 4 is out of bounds"):
        F.cross_entropy(x, ng.tensor([0, 4, 1]))
    with pytest.raises(RuntimeError, match="integer dtype"):
        F.nll_loss(x, ng.tensor([0.0, 1.0, 1.0]))


def test_conv2d_mismatched_channels_raises_with_shapes():
    with pytest.raises(
        RuntimeError, match=r"conv2d\(\): Given groups=1, weight of size \[4, 2, 3, 3\]"
    ):
        F.conv2d(ng.ones(1, 3, 5, 5), ng.ones(4, 2, 3, 3))


def test_conv2d_float32_matches_torch_on_a_small_network(rng):
    a = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32) * 0.3
    x, tx = ng.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    W, tW = ng.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = F.max_pool2d(F.relu(F.conv2d(x, W, stride=1, padding=1)), 2).sum()
    ty = TF.max_pool2d(TF.relu(TF.conv2d(tx, tW, stride=1, padding=1)), 2).sum()
    np.testing.assert_allclose(y.item(), ty.item(), rtol=1e-4)
    y.backward()
    ty.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(W.grad.numpy(), tW.grad.numpy(), rtol=1e-4, atol=1e-4)


_CONV_SHAPES = [
    ((0, 3, 5, 5), (4, 3, 3, 3), {}),
    ((2, 3, 5, 5), (4, 3, 3, 3), {"stride": 3}),
    ((2, 3, 9, 8), (4, 3, 3, 2), {"stride": (2, 3), "padding": (3, 2), "dilation": (2, 1)}),
    ((2, 4, 9, 8), (6, 2, 3, 3), {"groups": 2, "padding": 1}),
    ((4, 9, 8), (6, 4, 3, 3), {"padding": "same"}),
    ((3, 4, 20), (6, 2, 3), {"groups": 2, "padding": 2, "stride": 2, "dilation": 3}),
    ((5, 3, 1, 1), (4, 3, 1, 1), {}),
    ((2, 3, 5, 5), (4, 3, 5, 5), {"padding": 4}),
    # several blocks of output rows per image, batch items over the intra-op threads
    ((3, 2, 130, 140), (3, 2, 3, 3), {"padding": 1}),
]


@pytest.mark.parametrize("xs, ws, kw", _CONV_SHAPES)
def test_conv_forward_and_vjp_match_torch_with_a_random_cotangent(rng, xs, ws, kw):
    a, b = rng.standard_normal(xs), rng.standard_normal(ws)
    f, tf = (F.conv1d, TF.conv1d) if len(ws) == 3 else (F.conv2d, TF.conv2d)
    x, w = ng.tensor(a, requires_grad=True), ng.tensor(b, requires_grad=True)
    tx, tw = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    y, ty = f(x, w, **kw), tf(tx, tw, **kw)
    cot = rng.standard_normal(tuple(ty.shape))
    y.backward(ng.tensor(cot))
    ty.backward(torch.tensor(cot))
    for ours, ref in [(y.detach(), ty), (x.grad, tx.grad), (w.grad, tw.grad)]:
        np.testing.assert_allclose(ours.numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-10)


def test_conv2d_records_one_convolution_node_as_torch():
    y = F.conv2d(ng.ones(1, 2, 5, 5), ng.ones(3, 2, 3, 3, requires_grad=True))
    assert y.grad_fn.name() == "ConvolutionBackward0"


def test_conv2d_kernel_larger_than_padded_input_raises_with_sizes():
    with pytest.raises(
        RuntimeError,
        match=r"conv2d\(\): Calculated padded input size per channel: "
        r"\(4 x 6\)\. Kernel size: \(5 x 3\)",
    ):
        F.conv2d(ng.ones(1, 1, 2, 4), ng.ones(1, 1, 5, 3), padding=1)


def test_binary_cross_entropy_input_outside_unit_interval_raises():
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(ng.tensor([1.5]), ng.tensor([1.0]))
