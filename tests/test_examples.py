"""The examples in examples/ run and learn (each is also a script a newcomer runs)."""

import os
import runpy
import subprocess
import sys

import numpy as np
import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _load(name):
    return runpy.run_path(os.path.join(EXAMPLES, name))


def test_logistic_regression_learns():
    first, last, accuracy = _load("logistic_regression.py")["train"](steps=100, verbose=False)
    assert first == pytest.approx(0.6931471805599453)  # log 2 at zero weights
    assert last < 0.35
    assert accuracy > 0.85


def test_mlp_synthetic_learns():
    first, last, accuracy = _load("mlp_synthetic.py")["train"](steps=300, verbose=False)
    assert last < 0.6 * first
    assert accuracy > 0.8


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py")))
def test_example_runs_as_a_script(name, tmp_path):
    proc = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()


def test_custom_function_example_matches_the_unrolled_gradient_and_learns():
    example = _load("custom_function.py")
    assert example["check_gradient"]() < 1e-10
    first, last = example["train"](steps=60, verbose=False)
    assert last < 0.05 * first


def test_newton_example_converges_quadratically_with_the_exact_hessian():
    norms, hessian_error = _load("newton_hessian.py")["newton"](verbose=False)
    assert hessian_error < 1e-12  # functional.hessian against the closed form
    assert norms[-1] < 1e-12 and len(norms) <= 8
    # quadratic convergence: once close, the gradient norm roughly squares each step
    close = [k for k in range(len(norms) - 1) if norms[k] < 1e-3]
    assert close
    for k in close:
        assert norms[k + 1] < 100 * norms[k] ** 2


def test_per_sample_gradients_match_torch_func_vmap_grad():
    torch = pytest.importorskip("torch")
    from torch.func import grad, vmap

    m = _load("per_sample_gradients.py")
    x, onehot, _ = m["make_data"](n=24)
    params = m["init_params"]()
    grads = m["per_sample_gradients"](params, x, onehot)

    def loss_one(p, xi, yi):
        w1, b1, w2, b2 = p
        h = torch.tanh(xi @ w1 + b1)
        return -(yi * torch.log_softmax(h @ w2 + b2, dim=0)).sum()

    tp = tuple(torch.tensor(p.detach().numpy()) for p in params)
    expected = vmap(grad(loss_one), in_dims=(None, 0, 0))(
        tp, torch.tensor(x.numpy()), torch.tensor(onehot.numpy())
    )
    for g, e, p in zip(grads, expected, params, strict=True):
        assert g.shape == (24, *p.shape)
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-13)


def test_dp_sgd_with_per_sample_gradients_learns():
    first, last, accuracy, clipped = _load("per_sample_gradients.py")["train"](
        steps=30, verbose=False
    )
    assert last < 0.3 * first
    assert accuracy > 0.9
    assert clipped[0] == 1.0 and min(clipped) < 0.5  # clipping acts, then gradients shrink


ROOT = os.path.dirname(EXAMPLES)


def _python_blocks(path):
    import re

    with open(os.path.join(ROOT, path)) as fh:
        return re.findall(r"```python\n(.*?)```", fh.read(), re.S)


@pytest.mark.parametrize(
    "path", ["README.md", "docs/index.md", "docs/getting-started.md", "docs/guide/porting.md"]
)
def test_the_code_in_the_readme_and_the_docs_runs(path):
    for block in _python_blocks(path):
        exec(compile(block, path, "exec"), {"print": lambda *a, **k: None})


def test_the_readme_speaks_of_the_project_not_of_its_history():
    import re

    with open(os.path.join(ROOT, "README.md")) as fh:
        text = fh.read()
    assert not re.search(r"\b[0-9a-f]{7,40}\b", text), "a commit id"
    for word in ("session", "dry run", "DESIGN", "round of", "yesterday", "diary"):
        assert word.lower() not in text.lower(), word
