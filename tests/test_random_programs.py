"""Random multi-op programs (hypothesis) compared with torch: values and gradients."""

import numpy as np
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import nautograd as ng

# (name, arity, function of (lib, *operands)); every operand has shape SHAPE
UNARY = [
    ("exp", lambda lib, x: (x * 0.3).exp()),
    ("tanh", lambda lib, x: x.tanh()),
    ("sigmoid", lambda lib, x: x.sigmoid()),
    ("sin", lambda lib, x: x.sin()),
    ("softplus", lambda lib, x: lib.nn.functional.softplus(x)),
    ("relu", lambda lib, x: lib.nn.functional.relu(x)),
    ("sqrt", lambda lib, x: (x * x + 1.0).sqrt()),
    ("log1p", lambda lib, x: (x * x).log1p()),
    ("neg", lambda lib, x: -x),
    ("square", lambda lib, x: x**2),
    ("clamp", lambda lib, x: x.clamp(-0.5, 0.5)),
    ("softmax", lambda lib, x: lib.softmax(x, -1)),
    ("log_softmax", lambda lib, x: lib.log_softmax(x, 0)),
    ("transpose", lambda lib, x: x.t().t()),
    ("sum_keep", lambda lib, x: x.sum(1, keepdim=True) * x),
    ("mean_bcast", lambda lib, x: x - x.mean(0)),
    ("logsumexp", lambda lib, x: lib.logsumexp(x, 1, keepdim=True) + x),
]
BINARY = [
    ("add", lambda lib, x, y: x + y),
    ("sub", lambda lib, x, y: x - 2.0 * y),
    ("mul", lambda lib, x, y: x * y),
    ("div", lambda lib, x, y: x / (y * y + 1.0)),
    # (where and maximum compare x with y + 1e-3, not y: a program can build y equal to x up
    # to rounding, e.g. x + (exp(..) - x), and an ulp of difference in exp between the two
    # libraries then flips the branch: the value changes by O(1), the gradient moves)
    ("maximum", lambda lib, x, y: lib.maximum(x, y + 1e-3)),
    ("matmul", lambda lib, x, y: (x @ y.t()) @ x * 0.1),
    ("where", lambda lib, x, y: lib.where(x > y + 1e-3, x, y * 0.5)),
    ("stack", lambda lib, x, y: lib.stack([x, y]).sum(0)),
    ("cat", lambda lib, x, y: lib.cat([x, y], 0).sum(0) * x),
]
SHAPE = (3, 3)

step = st.one_of(
    st.tuples(st.just(1), st.integers(0, len(UNARY) - 1), st.integers(0, 99)),
    st.tuples(st.just(2), st.integers(0, len(BINARY) - 1), st.integers(0, 99), st.integers(0, 99)),
)


def run(lib, program, leaves):
    values = list(leaves)
    for item in program:
        if item[0] == 1:
            _, f = UNARY[item[1]]
            values.append(f(lib, values[item[2] % len(values)]))
        else:
            _, f = BINARY[item[1]]
            values.append(f(lib, values[item[2] % len(values)], values[item[3] % len(values)]))
    return values[-1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# a comparison of two values equal up to rounding (v3 > v0 + (v3 - v0)): exp differs from
# torch's by an ulp, which flipped where()'s branch before the 1e-3 margin
@example(
    program=[
        (1, 0, 0),
        (1, 8, 0),
        (2, 0, 13, 34),
        (2, 0, 0, 5),
        (1, 0, 0),
        (1, 0, 0),
        (2, 6, 3, 24),
    ],
    seed=0,
)
@given(program=st.lists(step, min_size=1, max_size=12), seed=st.integers(0, 2**16))
def test_random_program_matches_torch(program, seed):
    rng = np.random.default_rng(seed)
    init = [rng.uniform(-1, 1, SHAPE) for _ in range(3)]
    ours = [ng.tensor(a, requires_grad=True) for a in init]
    theirs = [torch.tensor(a, requires_grad=True) for a in init]
    out = run(ng, program, ours)
    ref = run(torch, program, theirs)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-9, atol=1e-10)
    if not ref.requires_grad:
        return
    cot = rng.standard_normal(ref.shape)
    g_ours = ng.autograd.grad(out, ours, ng.tensor(cot), allow_unused=True)
    g_ref = torch.autograd.grad(ref, theirs, torch.tensor(cot), allow_unused=True)
    for a, b in zip(g_ours, g_ref, strict=True):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-8, atol=1e-10)
