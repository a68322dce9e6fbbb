"""create_graph=True: gradients that are themselves differentiable.

Op-table-driven: for every case of every differentiable op, the first-order VJP computed with
create_graph (the op's differentiable formula) and its derivative with respect to both the
inputs and the cotangent, against torch 2.13 with random cotangents. Then the engine's
behaviour under create_graph as named tests (reference/pytorch_autograd.md sections 3 and
the test_autograd scenarios it lists).
"""

import numpy as np
import pytest
import torch
from op_cases import CASES, case_id, make_inputs, run_ng, run_torch

import nautograd as ng
from nautograd.kernels import OPS

# Ops whose backward has no differentiable formula yet: create_graph through them raises
# NotImplementedError naming the node (test_ops_without_a_formula_raise_naming_the_node)
NO_FORMULA = {"cholesky", "convolution"}

DIFF_CASES = [c for c in CASES if c[0].differentiable]


def _outputs(out):
    return list(out) if isinstance(out, tuple) else [out]


def _uses_op_without_formula(op):
    return op.name in NO_FORMULA or op.name in {"conv1d", "conv2d"}


def test_the_list_of_ops_without_a_formula_is_exact():
    assert {op.name for op in OPS if op.differentiable and op.formula is None} == NO_FORMULA


def _second_order(lib, outs, xs, rng_seed):
    """(first-order grads, grads of sum(w * first-order) w.r.t. inputs and cotangents)."""
    rng = np.random.default_rng(rng_seed)
    tensor = ng.tensor if lib is ng else torch.tensor
    cots = [tensor(rng.standard_normal(tuple(o.shape)), requires_grad=True) for o in outs]
    cots = [c.to(o.dtype) for c, o in zip(cots, outs, strict=True)]
    # (a cast keeps a leaf's graph: differentiate with respect to the cast's input)
    g = lib.autograd.grad(outs, xs, cots, create_graph=True, allow_unused=True)
    terms = []
    for gi in g:
        if gi is None:
            continue
        w = tensor(rng.standard_normal(tuple(gi.shape))).to(gi.dtype)
        terms.append((gi * w).sum())
    targets = list(xs) + [c for c in cots if c.requires_grad]
    if not terms:
        return g, [None] * len(targets)
    loss = terms[0]
    for t in terms[1:]:
        loss = loss + t
    if not loss.requires_grad:
        return g, [None] * len(targets)
    return g, lib.autograd.grad(loss, targets, allow_unused=True)


def _close(a, b, what):
    a = None if a is None else a.detach().numpy(force=True)
    b = None if b is None else b.detach().numpy(force=True)  # (force: torch's ZeroTensors)
    if a is None or b is None:
        other = b if a is None else a
        assert other is None or not np.any(other), f"{what}: one side is None, the other not 0"
        return
    np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10, err_msg=what)


@pytest.mark.parametrize("op,i,case", DIFF_CASES, ids=[case_id(c) for c in DIFF_CASES])
def test_double_backward_matches_torch(op, i, case, rng):
    arrays, kwargs = make_inputs(case, rng)
    ours_in, ours = run_ng(op, arrays, kwargs, call=case.call)
    ref_in, ref = run_torch(op, arrays, kwargs, call=case.call)
    xs = [t for t in ours_in if isinstance(t, ng.Tensor)]
    rxs = [t for t in ref_in if isinstance(t, torch.Tensor)]
    if _uses_op_without_formula(op):
        with pytest.raises(NotImplementedError, match="create_graph=True"):
            _second_order(ng, _outputs(ours), xs, 7)
        return
    g, gg = _second_order(ng, _outputs(ours), xs, 7)
    rg, rgg = _second_order(torch, _outputs(ref), rxs, 7)
    for k, (a, b) in enumerate(zip(g, rg, strict=True)):
        _close(a, b, f"first-order gradient {k}")
    assert len(gg) == len(rgg)
    for k, (a, b) in enumerate(zip(gg, rgg, strict=True)):
        _close(a, b, f"second-order gradient {k}")


def test_ops_without_a_formula_raise_naming_the_node():
    a = ng.tensor(np.eye(3) * 2.0 + 0.1, requires_grad=True)
    y = ng.linalg.cholesky(a).sum()
    with pytest.raises(NotImplementedError, match="LinalgCholeskyExBackward0|cholesky"):
        ng.autograd.grad(y, a, create_graph=True)
