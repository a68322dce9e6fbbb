"""Research programs run unchanged on torch and nautograd (a backend switch: ``lib``).

Each program reproduces the computation of a published research program (named in its
docstring, with its licence) in code of our own. A module defines:

- ``NAME``: the program's short name; ``DTYPE``: "float32" or "float64" (as the original);
- ``setup(lib) -> state``: data and initial parameters, drawn from numpy with a fixed seed,
  so both libraries start from the same numbers;
- ``step(lib, state) -> float``: one iteration of the program's main loop (a training step,
  a sampler transition), returning the scalar it reports (a loss, a log-probability).

``python -m nautograd bench`` times one ``step`` per repetition against torch
(``benchmarks/run.py``); ``tests/test_programs.py`` checks that both libraries agree over
several steps.
"""

import importlib

PROGRAMS = (
    "maml_sine",
    "legendre_function",
    "pinn_poisson",
    "hnn_spring",
    "hmc_logistic",
    "langevin_mixture",
    "gp_marginal_likelihood",
    "influence_lissa",
    "planar_flow",
    "lstm_bptt",
    "sliced_score_matching",
    "implicit_deq",
)


def load(name):
    """The program module ``name``."""
    return importlib.import_module(f"benchmarks.programs.{name}")


def prepared(name, lib):
    """(setup() -> state, step(state) -> float) of program ``name`` on ``lib``, each run with
    the library's default dtype set to the program's (torch's float32 for programs written
    for it; nautograd's own default is float64) and restored after."""
    module = load(name)
    dtype = getattr(lib, module.DTYPE)

    def in_dtype(f, *args):
        old = lib.get_default_dtype()
        lib.set_default_dtype(dtype)
        try:
            return f(*args)
        finally:
            lib.set_default_dtype(old)

    return (lambda: in_dtype(module.setup, lib)), (lambda st: in_dtype(module.step, lib, st))


def params_from(lib, module, arrays):
    """Overwrite ``module``'s parameters, in order, with ``arrays`` (numpy)."""
    with lib.no_grad():
        for p, a in zip(module.parameters(), arrays, strict=True):
            p.copy_(lib.tensor(a, dtype=p.dtype))


def linear_init(rng, sizes, dtype):
    """Weights and biases of a stack of Linear layers as torch initialises them (U(-1/sqrt(in),
    1/sqrt(in))), drawn from ``rng``: [W0, b0, W1, b1, ...] with W of shape (out, in)."""
    out = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        bound = 1 / fan_in**0.5
        out.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(dtype))
        out.append(rng.uniform(-bound, bound, fan_out).astype(dtype))
    return out
