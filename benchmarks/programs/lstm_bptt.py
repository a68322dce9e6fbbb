"""A character-level LSTM trained by backpropagation through time, cell written by hand.

Karpathy's min-char-rnn (gist.github.com/karpathy/d4dee566867f8291f086, BSD) and char-rnn
(github.com/karpathy/char-rnn, MIT) with the LSTM cell of Hochreiter and Schmidhuber: the
four gates from one matrix product of [x_t, h_{t-1}], sequences of 25 characters, a batch
of 16, hidden size 64, a vocabulary of 32, cross-entropy at every step, gradient clipping
at norm 5, Adam (lr 2e-3). A step is one truncated-BPTT update. float32.
"""

import numpy as np

NAME = "lstm_bptt"
DTYPE = "float32"
V, H, T, B = 32, 64, 25, 16


def setup(lib):
    rng = np.random.default_rng(0)
    # a text with structure: a random walk over the vocabulary with favoured successors
    succ = rng.integers(0, V, (V, 3))
    text = [0]
    for _ in range(20000):
        text.append(
            int(succ[text[-1], rng.integers(0, 3)])
            if rng.uniform() < 0.9
            else int(rng.integers(0, V))
        )  # noqa: E501
    as32 = lambda a: lib.tensor(a, dtype=lib.float32, requires_grad=True)  # noqa: E731
    s = 1 / np.sqrt(H)
    params = {
        "W": as32(rng.uniform(-s, s, (V + H, 4 * H))),
        "b": as32(np.zeros(4 * H)),
        "Wy": as32(rng.uniform(-s, s, (H, V))),
        "by": as32(np.zeros(V)),
    }
    return {"text": np.array(text), "params": params, "pos": 0,
            "opt": lib.optim.Adam(list(params.values()), lr=2e-3)}  # fmt: skip


def step(lib, state):
    F = lib.nn.functional
    p, opt, text = state["params"], state["opt"], state["text"]
    starts = state["pos"] + np.arange(B) * 1000
    state["pos"] = (state["pos"] + T) % 900
    idx = starts[:, None] + np.arange(T + 1)[None, :]
    chars = text[idx]
    eye = np.eye(V, dtype=np.float32)
    h = lib.zeros(B, H, dtype=lib.float32)
    c = lib.zeros(B, H, dtype=lib.float32)
    loss = 0
    for t in range(T):
        x = lib.tensor(eye[chars[:, t]])
        gates = lib.cat([x, h], dim=1) @ p["W"] + p["b"]
        i, f, g, o = gates.chunk(4, dim=1)
        c = lib.sigmoid(f) * c + lib.sigmoid(i) * lib.tanh(g)
        h = lib.sigmoid(o) * lib.tanh(c)
        logits = h @ p["Wy"] + p["by"]
        loss = loss + F.cross_entropy(logits, lib.tensor(chars[:, t + 1]))
    loss = loss / T
    opt.zero_grad()
    loss.backward()
    lib.nn.utils.clip_grad_norm_(list(p.values()), 5.0)
    opt.step()
    return loss.item()
