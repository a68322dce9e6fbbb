import sys

import numpy as np
import pytest

import nautograd  # noqa: F401
from nautograd.graph.tape import current_tape


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _fresh_deferral_history():
    """Each test starts with the main thread's tape not in an eager spell of the deferred
    forward (tensor._batches_too_small) and with no batch open (an earlier test's, whose
    results died, would take the first ops: an open batch holds the tape's restart, see
    Tape.restart_due): the path an op takes does not depend on test order."""
    tape = current_tape()
    if tape.batch is not None:
        tape.run_batch()
    sys.modules["nautograd.tensor"].reset_small_batch_state(tape)
