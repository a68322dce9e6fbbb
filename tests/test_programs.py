"""The research programs of benchmarks/programs run unchanged on nautograd and agree with
torch 2.13 step by step (what they report: losses, log-probabilities)."""

import numpy as np
import pytest
import torch

import nautograd as ng
from benchmarks.programs import PROGRAMS, load, prepared


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_agrees_with_torch(name):
    rtol = 1e-4 if load(name).DTYPE == "float32" else 1e-8
    reports = []
    for lib in (ng, torch):
        setup, step = prepared(name, lib)
        state = setup()
        reports.append([step(state) for _ in range(3)])
    np.testing.assert_allclose(reports[0], reports[1], rtol=rtol)
    assert ng.get_default_dtype() == ng.float64  # (restored after each step)
