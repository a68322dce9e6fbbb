"""``nn.Module``: parameters, buffers and submodules registered by attribute assignment,
with torch's traversal, ``state_dict`` and hook semantics (torch 2.13's error texts)."""

from collections import OrderedDict, namedtuple

import numpy as np

from ... import _device
from ...autograd.grad_mode import no_grad
from ...autograd.hooks import RemovableHandle
from ...tensor import Tensor, dtype_name
from ..parameter import Buffer, Parameter


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


_LEGACY = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
           "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
           "bool": "Bool"}  # fmt: skip


def _type_name(value):
    """torch's name of ``value``'s type in its messages (``torch.FloatTensor``)."""
    if isinstance(value, Tensor):
        return f"torch.{_LEGACY.get(value.dtype.name, value.dtype.name)}Tensor"
    return type(value).__module__ + "." + type(value).__qualname__


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class Module:
    """Base class of all neural network modules (``torch.nn.Module``).

    Subclasses call ``super().__init__()``, assign their Parameters, buffers and submodules as
    attributes, and define ``forward``; calling the module runs its forward hooks around it.
    """

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected argument: Module.__init__ "
                "takes none"
            )
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", {})
        setattr_(self, "_buffers", {})
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", {})
        setattr_(self, "_forward_hooks", [])
        setattr_(self, "_forward_pre_hooks", [])

    def forward(self, *input):
        """The module's computation; subclasses define it and are called as ``module(*args)``."""
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args, **kwargs):
        pre = self.__dict__.get("_forward_pre_hooks")
        post = self.__dict__.get("_forward_hooks")
        if not pre and not post:
            return self.forward(*args, **kwargs)
        for hook in list(pre):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        out = self.forward(*args, **kwargs)
        for hook in list(post):
            result = hook(self, args, out)
            if result is not None:
                out = result
        return out

    # -- registration -------------------------------------------------------------------------

    def _check_init(self, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def register_parameter(self, name, param):
        """Add ``param`` (a Parameter or None) as parameter ``name``."""
        self._check_init("parameter")
        self._check_name(name, "parameter", self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_type_name(param)}' object to parameter '{name}' "
                "(torch.nn.Parameter or None required)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must "
                "be created explicitly. To express '{name}' as a function of another Tensor, "
                "compute the value in the forward() method."
            )
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add ``tensor`` (or None) as buffer ``name``; only persistent buffers are saved in
        ``state_dict``."""
        self._check_init("buffer")
        self._check_name(name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_type_name(tensor)}' object to buffer '{name}' "
                "(torch Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add ``module`` (or None) as submodule ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        self._check_init("module")
        self._check_name(name, "module", self._modules)
        self._modules[name] = module

    register_module = add_module

    def _check_name(self, name, kind, own):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in own:
            raise KeyError(f"attribute '{name}' already exists")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_type_name(value)}' as parameter '{name}' "
                    "(torch.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_type_name(value)}' as child module '{name}' "
                    "(torch.nn.Module or None expected)"
                )
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if isinstance(value, Buffer):
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            self._forget(name)
            persistent = value.__dict__.pop("persistent")
            self.register_buffer(name, value, persistent)
            return
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_type_name(value)}' as buffer '{name}' "
                    "(torch.nn.Buffer, torch.Tensor or None expected)"
                )
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _forget(self, name):
        d = self.__dict__
        d.pop(name, None)
        for table in ("_parameters", "_buffers", "_modules"):
            d[table].pop(name, None)
        d["_non_persistent_buffers_set"].discard(name)

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and name in t:
                return t[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if name in d.get(table, ()):
                del d[table][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = set(super().__dir__())
        for table in ("_parameters", "_buffers", "_modules"):
            keys.update(self.__dict__.get(table, ()))
        return sorted(keys)

    # -- traversal ----------------------------------------------------------------------------

    def _named_members(self, get, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for module_prefix, module in mods:
            for k, v in get(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k), v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """Iterator over (name, parameter), this module's and (``recurse``) its
        submodules'."""
        return self._named_members(
            lambda m: m._parameters.items(), prefix, recurse, remove_duplicate
        )

    def parameters(self, recurse=True):
        """Iterator over the parameters (each once)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """Iterator over (name, buffer)."""
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """Iterator over the buffers."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        """Iterator over (name, immediate submodule)."""
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def children(self):
        """Iterator over the immediate submodules."""
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Iterator over (name, module) of this module and all below it, depth first."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        """Iterator over this module and all below it."""
        for _, module in self.named_modules():
            yield module

    def get_submodule(self, target):
        """The submodule at the dotted path ``target`` ("" is self)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        """The parameter at the dotted path ``target``."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target):
        """The buffer at the dotted path ``target``."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}`")
        return mod._buffers[name]

    # -- state ----------------------------------------------------------------------------------

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of every parameter and persistent buffer by dotted name (detached
        unless ``keep_vars``)."""
        if args:
            raise TypeError("state_dict(): destination, prefix and keep_vars are keywords")
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(
                    destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars
                )
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from ``state_dict``; with ``strict``, missing and
        unexpected keys are errors. Returns ``(missing_keys, unexpected_keys)``."""
        if not hasattr(state_dict, "keys"):
            raise TypeError(
                f"Expected state_dict to be dict-like, got {type(state_dict).__name__}."
            )
        missing, unexpected, errors = [], [], []
        own = {}
        for name, module in self.named_modules():
            pre = name + "." if name else ""
            for k, v in module._parameters.items():
                if v is not None:
                    own[pre + k] = (module, k, True)
            for k, v in module._buffers.items():
                if v is not None and k not in module._non_persistent_buffers_set:
                    own[pre + k] = (module, k, False)
        for key, (module, k, is_param) in own.items():
            if key not in state_dict:
                missing.append(key)
                continue
            value = state_dict[key]
            target = module._parameters[k] if is_param else module._buffers[k]
            if not isinstance(value, Tensor):
                errors.append(
                    f'While copying the parameter named "{key}", expected torch.Tensor or '
                    f"Tensor-like object from checkpoint but received {type(value)}"
                )
                continue
            if value.shape != target.shape:
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {value.shape} from "
                    f"checkpoint, the shape in current model is {target.shape}."
                )
                continue
            if assign:
                new = Parameter(value, target.requires_grad) if is_param else value
                (module._parameters if is_param else module._buffers)[k] = new
            else:
                with no_grad():
                    target.copy_(value)
        unexpected = [k for k in state_dict.keys() if k not in own]
        if strict:
            if unexpected:
                errors.insert(
                    0,
                    "Unexpected key(s) in state_dict: "
                    + ", ".join(f'"{k}"' for k in unexpected)
                    + ". ",
                )
            if missing:
                errors.insert(
                    0,
                    "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ",
                )
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        return _IncompatibleKeys(missing, unexpected)

    # -- modes and conversions ------------------------------------------------------------------

    def train(self, mode=True):
        """Set training mode (``self.training``) here and below; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        """Evaluation mode: ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` of every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of every parameter (to None, or to zeros)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad = p.grad.detach()
                p.grad.zero_()

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first) and on self; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply(self, convert):
        """Convert every parameter and buffer in place: the same objects get new values
        (their ``.grad`` converted too), so optimizers holding them keep working."""
        for module in self.modules():
            for table in (module._parameters, module._buffers):
                for t in table.values():
                    if t is None:
                        continue
                    a = convert(t._data)
                    if a is t._data:
                        continue
                    t.data = a
                    if t._grad is not None:
                        t._grad = Tensor(convert(t._grad._data))
        return self

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(tensor)``: floating
        parameters and buffers converted to the dtype, in place; returns self."""
        dtype = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, (str, _device.device, int)) and not isinstance(a, bool):
                dev = a
            elif a is not None:
                dtype = a
        _device.check(dev, "Module.to()")
        if dtype is None:
            return self
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise TypeError(
                "nn.Module.to only accepts floating point or complex dtypes, but got desired "
                f"dtype={dtype_name(dtype)}"
            )
        return self._apply(lambda a: a.astype(dtype) if a.dtype.kind == "f" else a)

    def cpu(self):
        """Self: nautograd computes on the CPU."""
        return self

    def cuda(self, device=None):
        """Raises torch's error for a build without CUDA."""
        _device.check("cuda" if device is None else device, "Module.cuda()")
        return self

    def double(self):
        """Floating parameters and buffers to float64."""
        return self.to(np.float64)

    def float(self):
        """Floating parameters and buffers to float32."""
        return self.to(np.float32)

    def type(self, dst_type):
        """Every parameter and buffer to ``dst_type``."""
        dst_type = np.dtype(dst_type)
        return self._apply(lambda a: a.astype(dst_type))

    # -- hooks --------------------------------------------------------------------------------

    def register_forward_pre_hook(self, hook, prepend=False):
        """``hook(module, args)`` before each forward; a non-None result replaces args."""
        hooks = self._forward_pre_hooks
        hooks.insert(0, hook) if prepend else hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def register_forward_hook(self, hook, prepend=False):
        """``hook(module, args, output)`` after each forward; a non-None result replaces
        the output."""
        hooks = self._forward_hooks
        hooks.insert(0, hook) if prepend else hooks.append(hook)
        return RemovableHandle(hooks, hook)

    # -- printing -------------------------------------------------------------------------------

    def extra_repr(self):
        """The text between this module's parentheses in its repr."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            child_lines.append(f"({key}): " + _addindent(repr(module), 2))
        lines = lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra.split("\n")) == 1 and not child_lines:
                main += extra
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)
