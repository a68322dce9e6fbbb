"""``torch.cuda`` for a build without CUDA: nothing is available, and code that checks
``is_available()`` first takes its CPU branch."""


def is_available():
    """False: nautograd computes on the CPU."""
    return False


def device_count():
    """0: no CUDA device."""
    return 0


def is_initialized():
    """False: this is a CPU build."""
    return False


def manual_seed(seed):
    """No CUDA generator to seed (torch ignores the call without CUDA too)."""


def manual_seed_all(seed):
    """No CUDA generator to seed (torch ignores the call without CUDA too)."""


def synchronize(device=None):
    """Raises torch's error for a build without CUDA."""
    raise AssertionError("Torch not compiled with CUDA enabled")
