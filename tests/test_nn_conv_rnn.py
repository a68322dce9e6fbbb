"""Convolution, pooling, batch-norm and recurrent modules against torch's, with the same
parameters: outputs, states, gradients and running statistics."""

import numpy as np
import pytest
import torch

import nautograd as ng

RS = np.random.RandomState(0)
SEQ = RS.randn(5, 3, 4)
IMG = RS.randn(2, 3, 6, 6)


def _pair(name, *args, **kwargs):
    """The torch and nautograd module ``name``, in float64, nautograd's with torch's
    parameter values (checked to have the same names in the same order)."""
    tm = getattr(torch.nn, name)(*args, **kwargs).double()
    nm = getattr(ng.nn, name)(*args, **kwargs).double()
    tp, np_ = list(tm.named_parameters()), list(nm.named_parameters())
    assert [n for n, _ in tp] == [n for n, _ in np_]
    with ng.no_grad():
        for (_, a), (_, b) in zip(tp, np_, strict=True):
            assert tuple(a.shape) == tuple(b.shape)
            b.copy_(ng.tensor(a.detach().numpy()))
    return tm, nm


def _check(run, *modules):
    results = []
    for lib, mods in ((torch, [m[0] for m in modules]), (ng, [m[1] for m in modules])):
        outs = run(lib, *mods)
        grads = [p.grad for m in mods for p in m.parameters()]
        results.append([np.asarray(o.detach()) for o in outs] + [np.asarray(g) for g in grads])
    for got, want in zip(results[1], results[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


RECURRENT = [
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"batch_first": True, "bias": False}),
    ("GRU", {"num_layers": 2}),
    ("GRU", {"bidirectional": True, "batch_first": True}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("RNN", {}),
]


@pytest.mark.parametrize(("name", "kwargs"), RECURRENT, ids=lambda v: str(v))
def test_recurrent_layers_match_torch(name, kwargs):
    pair = _pair(name, 4, 6, **kwargs)

    def run(lib, m):
        x = lib.tensor(SEQ, requires_grad=True)
        directions = 2 if kwargs.get("bidirectional") else 1
        batch = SEQ.shape[0] if kwargs.get("batch_first") else SEQ.shape[1]
        h0 = lib.tensor(np.full((kwargs.get("num_layers", 1) * directions, batch, 6), 0.1))
        state = (h0, h0 * 2) if name == "LSTM" else h0
        out, h = m(x, state)
        h = h[0] + h[1] if name == "LSTM" else h
        ((out**2).sum() + h.sum()).backward()
        return [out, h, x.grad]

    _check(run, pair)


def test_unbatched_sequences_and_default_states_match_torch():
    pair = _pair("LSTM", 4, 5)

    def run(lib, m):
        x = lib.tensor(SEQ[:, 0], requires_grad=True)
        out, (h, c) = m(x)
        (out.sum() + c.sum()).backward()
        return [out, h, c, x.grad]

    _check(run, pair)


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell", "RNNCell"])
def test_recurrent_cells_match_torch(name):
    pair = _pair(name, 4, 6)

    def run(lib, m):
        x = lib.tensor(SEQ[0], requires_grad=True)
        state = None
        for _ in range(3):
            state = m(x, state)
        h = state[0] if name == "LSTMCell" else state
        (h**2).sum().backward()
        return [h, x.grad]

    _check(run, pair)


def test_conv_batchnorm_pool_stack_matches_torch_in_train_and_eval():
    conv = _pair("Conv2d", 3, 4, 3, padding=1, stride=1)
    conv1 = _pair("Conv1d", 3, 2, 2, dilation=2)
    norm = _pair("BatchNorm2d", 4)

    def run(lib, c, c1, b):
        x = lib.tensor(IMG, requires_grad=True)
        y = lib.nn.MaxPool2d(2)(b(c(x)))
        z = lib.nn.AvgPool2d(3, stride=1)(b(c(x)))
        w = lib.nn.BatchNorm1d(2).double()(c1(x[:, :, 0]))
        ((y**2).sum() + z.sum() + (w**2).sum()).backward()
        b.eval()
        return [y, z, w, x.grad, b.running_mean, b.running_var, b(c(x))]

    _check(run, conv, conv1, norm)


def test_module_errors_and_reprs_are_torchs():
    for lib in (torch, ng):
        with pytest.raises(ValueError, match="expected 4D input"):
            lib.nn.BatchNorm2d(3)(lib.zeros(2, 3))
        with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
            lib.nn.Conv2d(3, 4, 3, groups=2)
        with pytest.raises(ValueError, match="Unknown nonlinearity"):
            lib.nn.RNN(2, 3, nonlinearity="gelu")
    assert repr(ng.nn.Conv2d(3, 4, 3, padding=1)) == repr(torch.nn.Conv2d(3, 4, 3, padding=1))
    assert repr(ng.nn.LSTM(4, 6, num_layers=2, bidirectional=True)) == repr(
        torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True)
    )
    assert repr(ng.nn.BatchNorm1d(5)) == repr(torch.nn.BatchNorm1d(5))
    assert repr(ng.nn.BatchNorm1d(5, bias=False)) == repr(torch.nn.BatchNorm1d(5, bias=False))
