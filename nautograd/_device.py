"""torch.device and the ``device=`` arguments: nautograd runs on the CPU.

A CPU device is accepted wherever torch accepts one; a CUDA request raises torch's error for a
build without CUDA, so code that checks ``cuda.is_available()`` first takes its CPU branch.
"""

import re

# the device types torch knows (torch 2.13's message lists them in this order)
_TYPES = (
    "cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga",
    "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone",
)  # fmt: skip
_PATTERN = re.compile(r"^([a-z]+)(?::(\d+))?$")


class device:
    """``torch.device``: a device type and an optional index (``device("cpu")``,
    ``device("cpu:0")``, ``device("cpu", 0)``)."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):  # noqa: A002  (torch's argument name)
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): a device and an index were both given")
            self.type, self.index = type.type, type.index
            return
        if not isinstance(type, str):
            raise TypeError(f"device() received an invalid combination of arguments: {type!r}")
        m = _PATTERN.match(type)
        if m is None or m.group(1) not in _TYPES:
            if m is not None or ":" not in type:
                raise RuntimeError(
                    f"Expected one of {', '.join(_TYPES)} device type at start of device "
                    f"string: {type}"
                )
            raise RuntimeError(f"Invalid device string: '{type}'")
        if m.group(2) is not None:
            if index is not None:
                raise RuntimeError(
                    "type (string) must not include an index because index was passed "
                    f"explicitly: {type}"
                )
            index = int(m.group(2))
        if index is not None and (not isinstance(index, int) or index < 0):
            raise RuntimeError(f"Device index must not be negative, got {index}")
        self.type = m.group(1)
        self.index = index

    def __eq__(self, other):
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __reduce__(self):
        return (device, (self.type, self.index))


CPU = device("cpu")


def check(d, where="tensor()"):
    """Validate a ``device=`` argument: None or the CPU pass; CUDA raises torch's error for a
    build without CUDA; any other device type says that nautograd runs on the CPU."""
    if d is None or d is CPU:
        return
    if isinstance(d, int) and not isinstance(d, bool):
        d = device("cuda", d)  # (torch reads a bare index as a CUDA device)
    elif not isinstance(d, device):
        if not isinstance(d, str):
            raise TypeError(f"{where}: device must be a str or a device, got {type(d).__name__}")
        d = device(d)
    if d.type == "cpu":
        return
    if d.type == "cuda":
        raise AssertionError("Torch not compiled with CUDA enabled")
    raise RuntimeError(
        f"{where}: device '{d}' is not available: nautograd computes on the CPU only"
    )
