"""Error texts the engine and custom Functions share (torch 2.13's, reference E1 and E4)."""

import numpy as np

RELEASED_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


def modified_inplace(shape, dtype, version, expected):
    """E4: a saved value was changed in place after it was saved."""
    from ..graph.tape import ANOMALY

    kind = "Float" if dtype == np.float32 else "Double"
    if ANOMALY.enabled:
        hint = (
            "Hint: the backtrace further above shows the operation that failed to compute its "
            "gradient. The variable in question was changed in there or anywhere later. Good "
            "luck!"
        )
    else:
        hint = (
            "Hint: enable anomaly detection to find the operation that failed to compute its "
            "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False)."
        )
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [torch.{kind}Tensor {list(shape)}] is at version {version}; expected "
        f"version {expected} instead. {hint}"
    )
