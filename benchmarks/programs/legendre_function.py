"""A custom ``autograd.Function`` in a training loop: y = a + b P3(c + d x) fitted to sin(x).

Reproduces the computation of the PyTorch tutorial "Defining New autograd Functions"
(pytorch/tutorials ``beginner_source/examples_autograd/polynomial_custom_function.py``,
BSD-3): the Legendre polynomial P3 as a Function with its own backward, 2,000 points,
four scalar parameters, plain gradient descent (lr 5e-6). float32, as the original.
"""

import math

NAME = "legendre_function"
DTYPE = "float32"
LR = 5e-6


def _legendre(lib):
    class LegendrePolynomial3(lib.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input**3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input**2 - 1)

    return LegendrePolynomial3


def setup(lib):
    dt = lib.float32
    x = lib.linspace(-math.pi, math.pi, 2000, dtype=dt)
    params = [lib.full((), v, dtype=dt, requires_grad=True) for v in (0.0, -1.0, 0.0, 0.3)]
    return {"x": x, "y": lib.sin(x), "params": params, "P3": _legendre(lib).apply}


def step(lib, state):
    a, b, c, d = state["params"]
    y_pred = a + b * state["P3"](c + d * state["x"])
    loss = (y_pred - state["y"]).pow(2).sum()
    loss.backward()
    with lib.no_grad():
        for p in state["params"]:
            p -= LR * p.grad
            p.grad = None
    return loss.item()
