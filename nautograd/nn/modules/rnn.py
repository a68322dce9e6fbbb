"""Recurrent modules: ``RNN``, ``LSTM``, ``GRU`` and their cells, with torch's parameter
names and shapes (``weight_ih_l0``, ``bias_hh_l0_reverse``, ...), gate order, initialisation
U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) and input/output layouts."""

import math

from ... import creation
from ...tensor import FUNCTIONS
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _stack(tensors, dim=0):
    return FUNCTIONS["stack"](tensors, dim=dim)


def _cat(tensors, dim=0):
    return FUNCTIONS["cat"](tensors, dim=dim)


def _rnn_step(x, h, w_hh, b_hh, relu):
    pre = x + F.linear(h, w_hh, b_hh)
    return F.relu(pre) if relu else pre.tanh()


def _lstm_step(x, h, c, w_hh, b_hh):
    # gates i, f, g, o (torch's order): c' = f c + i g; h' = o tanh(c')
    i, f, g, o = (x + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_step(x, h, w_hh, b_hh):
    # r, z, n (torch's order): n = tanh(x_n + r (W_hn h + b_hn)); h' = (1 - z) n + z h
    xr, xz, xn = x.chunk(3, -1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return (1 - z) * n + z * h


class RNNBase(Module):
    """The stacked, optionally bidirectional recurrent layer behind RNN, LSTM and GRU."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):  # fmt: skip
        super().__init__()
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of "
                "an element being zeroed"
            )
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size != 0:
            raise NotImplementedError("LSTM(proj_size=...) is not supported")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        gates = _GATES[mode] * hidden_size
        directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(directions):
                size = input_size if layer == 0 else hidden_size * directions
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (gates, size)), ("weight_hh", (gates, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                for name, shape in shapes:
                    p = Parameter(creation.empty(*shape, dtype=dtype, device=device))
                    setattr(self, name + suffix, p)
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    @property
    def all_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    def _weights(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda name: getattr(self, name + suffix, None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")

    def forward(self, input, hx=None):
        lstm = self.mode == "LSTM"
        unbatched = input.ndim == 2
        if input.ndim not in (2, 3):
            raise ValueError(
                f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D "
                "tensor instead"
            )
        if unbatched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                f"{input.shape[-1]}"
            )
        steps, batch = input.shape[0], input.shape[1]
        directions = 2 if self.bidirectional else 1
        state_shape = (self.num_layers * directions, batch, self.hidden_size)
        if hx is None:
            zeros = creation.zeros(*state_shape, dtype=input.dtype)
            h0, c0 = zeros, zeros
        else:
            h0, c0 = hx if lstm else (hx, None)
            if unbatched:
                h0 = h0.unsqueeze(1)
                c0 = c0.unsqueeze(1) if c0 is not None else None
            for name, t in (("hidden", h0), ("cell", c0)):
                if t is not None and tuple(t.shape) != state_shape:
                    raise RuntimeError(f"Expected {name} size {state_shape}, got {list(t.shape)}")
        h_last, c_last = [], []
        layer_input = input
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
                k = layer * directions + direction
                # the input's share of every step at once: one product over (L * N) rows
                xs = F.linear(layer_input, w_ih, b_ih).unbind(0)
                order = range(steps - 1, -1, -1) if direction else range(steps)
                h, c = h0[k], (c0[k] if lstm else None)
                seq = [None] * steps
                for t in order:
                    if lstm:
                        h, c = _lstm_step(xs[t], h, c, w_hh, b_hh)
                    elif self.mode == "GRU":
                        h = _gru_step(xs[t], h, w_hh, b_hh)
                    else:
                        h = _rnn_step(xs[t], h, w_hh, b_hh, self.mode == "RNN_RELU")
                    seq[t] = h
                outputs.append(_stack(seq))
                h_last.append(h)
                c_last.append(c)
            layer_input = outputs[0] if directions == 1 else _cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input
        h_n = _stack(h_last)
        c_n = _stack(c_last) if lstm else None
        if unbatched:
            output = output.squeeze(1)
            h_n = h_n.squeeze(1)
            c_n = c_n.squeeze(1) if lstm else None
        elif self.batch_first:
            output = output.transpose(0, 1)
        return (output, (h_n, c_n)) if lstm else (output, h_n)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """An Elman RNN: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or relu)."""

    def __init__(self, *args, nonlinearity="tanh", **kwargs):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """A long short-term memory layer; ``forward(input, (h_0, c_0))`` returns
    ``output, (h_n, c_n)``."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """A gated recurrent unit layer."""

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)


class _CellBase(Module):
    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gates = self._gates * hidden_size
        self.weight_ih = Parameter(creation.empty(gates, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(creation.empty(gates, hidden_size, dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(creation.empty(gates, dtype=dtype, device=device))
            self.bias_hh = Parameter(creation.empty(gates, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _state(self, input, hx):
        if input.ndim not in (1, 2):
            raise ValueError(
                f"{type(self).__name__}: Expected input to be 1D or 2D, got {input.ndim}D instead"
            )
        if hx is None:
            batch = () if input.ndim == 1 else (input.shape[0],)
            return creation.zeros(*batch, self.hidden_size, dtype=input.dtype)
        return hx

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        return s if self.bias else s + ", bias=False"


class RNNCell(_CellBase):
    """One step of an Elman RNN."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):  # fmt: skip
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        h = self._state(input, hx)
        x = F.linear(input, self.weight_ih, self.bias_ih)
        return _rnn_step(x, h, self.weight_hh, self.bias_hh, self.nonlinearity == "relu")


class LSTMCell(_CellBase):
    """One LSTM step: ``forward(input, (h, c))`` returns ``(h', c')``."""

    _gates = 4

    def forward(self, input, hx=None):
        if hx is None:
            h = c = self._state(input, None)
        else:
            h, c = hx
        x = F.linear(input, self.weight_ih, self.bias_ih)
        return _lstm_step(x, h, c, self.weight_hh, self.bias_hh)


class GRUCell(_CellBase):
    """One GRU step."""

    _gates = 3

    def forward(self, input, hx=None):
        h = self._state(input, hx)
        x = F.linear(input, self.weight_ih, self.bias_ih)
        return _gru_step(x, h, self.weight_hh, self.bias_hh)
