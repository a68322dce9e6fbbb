"""Bitwise operators on bool and integer tensors, against torch."""

import numpy as np
import pytest
import torch

import nautograd as ng


@pytest.mark.parametrize("dtype", ["bool", "int64", "int32"])
def test_bitwise_operators_match_torch(dtype):
    a = np.array([0, 1, 1, 0, 5, 6])[:, None] % (2 if dtype == "bool" else 7)
    b = np.array([1, 1, 0, 0, 3, 2]) % (2 if dtype == "bool" else 7)
    results = []
    for lib in (torch, ng):
        x = lib.tensor(a.astype(dtype))
        y = lib.tensor(b.astype(dtype))
        scalar = True if dtype == "bool" else 3
        out = [x & y, x | y, x ^ y, ~x, x & scalar, scalar | y, x.bitwise_xor(y)]
        results.append([np.asarray(o) for o in out])
    for got, want in zip(results[1], results[0], strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("lib", [torch, ng], ids=["torch", "nautograd"])
def test_bitwise_and_of_floats_raises_torchs_error(lib):
    with pytest.raises(NotImplementedError, match='"bitwise_and_cpu" not implemented for'):
        lib.ones(2) & lib.ones(2)
