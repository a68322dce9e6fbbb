"""User-defined compiled elementwise ops (nautograd.library), compared with torch."""

import math

import numpy as np
import pytest
import torch

import nautograd as ng
from nautograd.kernels.registry import kernel_table
from nautograd.library import elementwise
from nautograd.library import math as m

softsign = elementwise(
    "mylib::softsign",
    forward=lambda x: x / (1.0 + abs(x)),
    derivative=lambda x: 1.0 / ((1.0 + abs(x)) * (1.0 + abs(x))),
)
# a derivative of the result, written with library.math: differentiable again
softplus2 = elementwise(
    "mylib::softplus2",
    forward=lambda x: m.log1p(m.exp(x)) if x < 20.0 else x,
    derivative=lambda x: m.sigmoid(x),
)
expo = elementwise("mylib::expo", forward=lambda x: math.exp(x), derivative=lambda result: result)
# both the input and the result
xexp = elementwise(
    "mylib::xexp",
    forward=lambda x: x * math.exp(x),
    derivative=lambda x, result: result + math.exp(x),
)

# both, written with library.math: differentiable again
xexp2 = elementwise(
    "mylib::xexp2",
    forward=lambda x: x * m.exp(x),
    derivative=lambda x, result: result + m.exp(x),
)


def _close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


REFERENCE = {
    softsign: torch.nn.functional.softsign,
    softplus2: torch.nn.functional.softplus,
    expo: torch.exp,
    xexp: lambda t: t * torch.exp(t),
}


@pytest.mark.parametrize("op", list(REFERENCE), ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(), (3, 4), (1000,)])
def test_a_library_op_matches_torch_forward_and_backward(op, dtype, shape):
    rng = np.random.default_rng(0)
    a = rng.uniform(-3, 3, shape).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    x = ng.tensor(a, requires_grad=True)
    y = op(x)
    (y * ng.tensor(g)).sum().backward()
    xt = torch.tensor(a, requires_grad=True)
    yt = REFERENCE[op](xt)
    (yt * torch.tensor(g)).sum().backward()
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert y.dtype == (ng.float64 if dtype == np.float64 else ng.float32)
    _close(y.detach().numpy(), yt.detach().numpy(), tol)
    _close(x.grad.numpy(), xt.grad.numpy(), tol)


def test_a_library_op_runs_in_the_compiled_walk_with_its_own_node():
    x = ng.tensor([0.5, -2.0, 3.0], requires_grad=True)
    y = softsign(x)
    assert y.grad_fn.name() == "MylibSoftsignBackward0"
    y.sum().backward()
    from nautograd.kernels.registry import OPS

    op = next(o for o in OPS if o.name.startswith("mylib_softsign_"))
    assert kernel_table()[op.opcode, 0] != 0  # a compiled entry, not a Python node


def test_a_long_chain_of_a_library_op_on_scalars_matches_torch():
    # small float64 tensors: the deferred forward runs the op's compiled scalar forward
    x = ng.tensor(0.3, dtype=ng.float64, requires_grad=True)
    xt = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    y, yt = x, xt
    for _ in range(200):
        y = softsign(y) * 1.5 + 0.1
        yt = torch.nn.functional.softsign(yt) * 1.5 + 0.1
    y.backward()
    yt.backward()
    _close(y.item(), yt.item())
    _close(x.grad.item(), xt.grad.item())


def test_create_graph_through_a_library_op_written_with_library_math():
    a = np.array([-1.5, 0.2, 2.0])
    x = ng.tensor(a, requires_grad=True)
    (gx,) = ng.autograd.grad(softplus2(x).sum(), x, create_graph=True)
    (hx,) = ng.autograd.grad((gx * gx).sum(), x)
    xt = torch.tensor(a, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.nn.functional.softplus(xt).sum(), xt, create_graph=True)
    (ht,) = torch.autograd.grad((gt * gt).sum(), xt)
    _close(gx.detach().numpy(), gt.detach().numpy())
    _close(hx.numpy(), ht.numpy())


def test_double_backward_of_an_op_whose_derivative_reads_input_and_result_matches_torch():
    # the create_graph formula read the saved input where the derivative reads the result
    a = np.array([-1.5, 0.2, 2.0])
    x = ng.tensor(a, requires_grad=True)
    (gx,) = ng.autograd.grad(xexp2(x).sum(), x, create_graph=True)
    (hx,) = ng.autograd.grad(gx.sum(), x)
    xt = torch.tensor(a, requires_grad=True)
    (gt,) = torch.autograd.grad((xt * xt.exp()).sum(), xt, create_graph=True)
    (ht,) = torch.autograd.grad(gt.sum(), xt)
    _close(gx.detach().numpy(), gt.detach().numpy())
    _close(hx.numpy(), ht.numpy())
    assert ng.autograd.gradgradcheck(xexp2, (x,))


def test_gradcheck_and_gradgradcheck_pass_for_library_ops():
    x = ng.tensor(np.linspace(-2, 2, 7), requires_grad=True)
    for op in (softsign, softplus2, xexp):
        assert ng.autograd.gradcheck(op, (x,))
    assert ng.autograd.gradgradcheck(softplus2, (x,))


def test_create_graph_through_a_derivative_in_pythons_math_raises_clearly():
    x = ng.tensor([0.5, 1.0], requires_grad=True)
    (gx,) = ng.autograd.grad(xexp(x).sum(), x)  # first order: compiled, fine
    _close(gx.numpy(), (np.array([0.5, 1.0]) + 1) * np.exp([0.5, 1.0]))
    with pytest.raises(NotImplementedError, match="library.math"):
        ng.autograd.grad(xexp(x).sum(), x, create_graph=True)


def test_declaring_the_same_formulas_again_gives_the_same_op_and_new_ones_a_new_op():
    again = elementwise(
        "mylib::softsign",
        forward=lambda x: x / (1.0 + abs(x)),
        derivative=lambda x: 1.0 / ((1.0 + abs(x)) * (1.0 + abs(x))),
    )
    assert again is softsign
    other = elementwise(
        "mylib::softsign", forward=lambda x: 2.0 * x, derivative=lambda x: 2.0 + 0.0 * x
    )
    assert other is not softsign
    _close(other(ng.tensor([1.5])).numpy(), [3.0])


def test_select_passes_no_gradient_where_the_derivative_is_zero():
    step = elementwise(
        "mylib::ramp",
        forward=lambda x: x if x > 0.0 else 0.0,
        derivative=lambda x: 1.0 if x > 0.0 else 0.0,
        select=True,
    )
    x = ng.tensor([-1.0, 2.0], requires_grad=True)
    y = step(x)
    y.backward(ng.tensor([math.nan, 1.0]))
    _close(x.grad.numpy(), [0.0, 1.0])  # NaN * 0 would be NaN


def test_bad_declarations_raise():
    with pytest.raises(ValueError, match="namespace::op_name"):
        elementwise("softsign", forward=lambda x: x, derivative=lambda x: 1.0)
    with pytest.raises(TypeError, match="x, result, or both"):
        elementwise("mylib::bad", forward=lambda x: x, derivative=lambda y: 1.0)
    with pytest.raises(TypeError, match="must be functions"):
        elementwise("mylib::bad", forward=1.0, derivative=lambda x: 1.0)


def test_integer_inputs_are_promoted_as_torchs_unary_math():
    y = softsign(ng.tensor([1, -3]))
    assert y.is_floating_point()
    _close(y.numpy(), [0.5, -0.75], 1e-6)
