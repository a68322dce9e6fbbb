"""Anomaly detection: ``detect_anomaly``, ``set_detect_anomaly`` (torch.autograd.anomaly_mode).

While enabled, every node recorded keeps the stack of its forward call
(``grad_fn.metadata["traceback_"]``), and a backward checks each node's gradients for NaN
("Function 'SqrtBackward0' returned nan values in its 0th output.") and, when a node fails,
warns with that node's forward stack before the error propagates (reference section I).
The switches are process-wide, as torch's.
"""

import warnings

import numpy as np

from ..graph.tape import ANOMALY
from .graph import node_name

W3 = (
    "Anomaly Detection has been enabled. This mode will increase the runtime and should only "
    "be enabled for debugging."
)


def is_anomaly_enabled():
    """Whether anomaly detection is on (``torch.is_anomaly_enabled``)."""
    return ANOMALY.enabled


def is_anomaly_check_nan_enabled():
    """Whether anomaly detection checks gradients for NaN
    (``torch.is_anomaly_check_nan_enabled``)."""
    return ANOMALY.check_nan


def _set(enabled, check_nan):
    ANOMALY.enabled = bool(enabled)
    ANOMALY.check_nan = bool(check_nan)


class detect_anomaly:
    """Context manager that enables anomaly detection for the autograd engine
    (``torch.autograd.detect_anomaly``); warns that it slows everything down."""

    def __init__(self, check_nan=True):
        self.prev = ANOMALY.enabled
        self.check_nan = check_nan
        self.prev_check_nan = ANOMALY.check_nan
        warnings.warn(W3, UserWarning, stacklevel=2)

    def __enter__(self):
        _set(True, self.check_nan)

    def __exit__(self, *exc):
        _set(self.prev, self.prev_check_nan)


class set_detect_anomaly:
    """Turns anomaly detection on or off at once; as a context manager, restores the previous
    setting on exit (``torch.autograd.set_detect_anomaly``)."""

    def __init__(self, mode, check_nan=True):
        self.prev = ANOMALY.enabled
        self.prev_check_nan = ANOMALY.check_nan
        _set(mode, check_nan)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _set(self.prev, self.prev_check_nan)


# ---------------------------------------------------------------------------------------------
# what the engine calls while anomaly detection is on


def warn_failed(tape, node):
    """W4: the forward stack of the node whose backward failed."""
    name = node_name(tape, node)
    stack = tape.metadata.get(node, {}).get("traceback_")
    if stack:
        msg = f"Error detected in {name}. Traceback of forward call that caused the error:\n"
        msg += "".join(stack)
    else:
        msg = (
            f"Error detected in {name}. No forward pass information available. Enable detect "
            "anomaly during forward pass for more information."
        )
    warnings.warn(msg, UserWarning, stacklevel=4)


def check_nan(tape, node, grads):
    """Raise torch's error if one of the gradients ``node`` produced (one per input, arrays
    or None) holds a NaN."""
    if not ANOMALY.check_nan:
        return
    for j, g in enumerate(grads):
        if g is not None and np.isnan(g).any():
            raise RuntimeError(
                f"Function '{node_name(tape, node)}' returned nan values in its {j}th output."
            )
