"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local)."""

import functools
import inspect

from ..graph.tape import _state  # noqa: E402  (the thread's recording state)


def is_grad_enabled():
    """True when operations are recorded for backward (this thread)."""
    return _state.enabled


def _set(mode):
    _state.enabled = mode = bool(mode)
    _state.recording = _state.tape if mode else None


def is_inference_mode_enabled():
    """True inside ``inference_mode()``."""
    return _state.inference


class _DecoratorContextManager:
    """A context manager usable as a decorator (with or without parentheses), also on
    generator functions, where the mode holds inside the frame and the caller's mode returns
    at each ``yield``, as in torch."""

    def __call__(self, func):
        if inspect.isclass(func):
            import warnings

            warnings.warn(
                "Decorating classes is deprecated and will be disabled in future "
                "versions. You should only decorate functions or methods.",
                FutureWarning,
                stacklevel=2,
            )
        if inspect.isgeneratorfunction(func):
            return self._wrap_generator(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)

        return wrapper

    def _wrap_generator(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            gen = func(*args, **kwargs)
            try:
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    except BaseException as exc:
                        with self.clone():
                            response = gen.throw(exc)
                    else:
                        with self.clone():
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value

        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_DecoratorContextManager):
    """Context manager / decorator that disables recording (results never require grad)."""

    def __new__(cls, orig_func=None):
        if orig_func is None or cls is not no_grad:
            return super().__new__(cls)
        return cls()(orig_func)  # used as @no_grad without parentheses

    def __enter__(self):
        self.prev = is_grad_enabled()
        _set(False)

    def __exit__(self, *exc):
        _set(self.prev)


class enable_grad(_DecoratorContextManager):
    """Context manager / decorator that enables recording."""

    def __new__(cls, orig_func=None):
        if orig_func is None or cls is not enable_grad:
            return super().__new__(cls)
        return cls()(orig_func)

    def __enter__(self):
        self.prev = is_grad_enabled()
        _set(True)

    def __exit__(self, *exc):
        _set(self.prev)


class set_grad_enabled(_DecoratorContextManager):
    """Sets grad mode on or off. Called as a function it changes the mode at once; as a
    context manager or decorator it restores the previous mode afterwards."""

    def __init__(self, mode):
        self.prev = is_grad_enabled()
        self.mode = bool(mode)
        _set(self.mode)

    def __call__(self, func):
        _set(self.prev)
        return super().__call__(func)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _set(self.prev)

    def clone(self):
        """A new context manager of the same mode."""
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """Like no_grad (results are never recorded); ``inference_mode(False)`` is a no-op."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode) if isinstance(mode, bool) else True

    def __enter__(self):
        self.prev = is_grad_enabled()
        self.prev_inf = is_inference_mode_enabled()
        if self.mode:
            _set(False)
            _state.inference = True

    def __exit__(self, *exc):
        _set(self.prev)
        _state.inference = self.prev_inf

    def clone(self):
        """A new context manager of the same mode."""
        return self.__class__(self.mode)


def is_multithreading_enabled():
    """Whether ``set_multithreading_enabled`` allows a multithreaded backward (this thread)."""
    return getattr(_state, "multithreading", True)


class set_multithreading_enabled(_DecoratorContextManager):
    """Enable or disable a multithreaded backward, as a context manager or a function
    (thread-local), as torch's. nautograd's backward always runs on the calling thread (torch
    uses other threads only for accelerator devices), and large nodes use the intra-op
    threads of ``set_num_threads`` either way, so the mode changes nothing but what
    ``is_multithreading_enabled`` returns."""

    def __init__(self, mode):
        self.prev = is_multithreading_enabled()
        _state.multithreading = bool(mode)
        self.mode = mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _state.multithreading = self.prev

    def clone(self):
        """A new context manager of the same mode."""
        return self.__class__(self.mode)
