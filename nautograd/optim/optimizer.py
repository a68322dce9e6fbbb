"""``torch.optim.Optimizer``: parameter groups, per-parameter state, ``zero_grad``,
``state_dict``. Updates run under ``no_grad`` on the parameters' arrays in place (each a new
version of the parameter, as torch's in-place updates are)."""

from collections import defaultdict
from copy import deepcopy

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor, _wrap


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()


def _type_name(x):
    if isinstance(x, Tensor):
        return f"torch.{x.dtype.name}Tensor"
    return type(x).__name__


class Optimizer:
    """Base class of the optimizers: ``Optimizer(params, defaults)``, where ``params`` is an
    iterable of tensors or of dicts (parameter groups with their own options)."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got {_type_name(params)}"
            )
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Add a group of parameters with its own options (the defaults fill the rest)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is " + _type_name(p)
                )
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group)
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(
                    f"parameter group didn't specify a value of required optimization parameter {name}"  # noqa: E501
                )
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params):
            import warnings

            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, "
                "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for more "
                "information",
                stacklevel=3,
            )
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of the optimized parameters (to None, or to zeros)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    g = p.grad.detach()
                    g.zero_()
                    p.grad = g

    def step(self, closure=None):
        """One update of every parameter with a gradient; ``closure`` (re-evaluating the
        loss) is called first under grad mode and its loss returned."""
        loss = None
        if closure is not None:
            from ..autograd.grad_mode import enable_grad

            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, p.grad._data, self.state[p], group)
                        p._bump()
        return loss

    def _update(self, p, grad, state, group):
        raise NotImplementedError

    def state_dict(self):
        """``{"state": {index: state}, "param_groups": [options with parameter indices]}``."""
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {
            index[id(p)]: {k: (v.clone() if isinstance(v, Tensor) else v) for k, v in s.items()}
            for p, s in self.state.items()
            if id(p) in index
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore what ``state_dict`` returned (the groups must match in sizes)."""
        state_dict = deepcopy(state_dict)
        groups, saved = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved, strict=True)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of "
                "optimizer's group"
            )
        by_index = {}
        for g, s in zip(groups, saved, strict=True):
            for p, i in zip(g["params"], s["params"], strict=True):
                by_index[i] = p
        self.state = defaultdict(dict)
        for i, s in state_dict["state"].items():
            p = by_index.get(int(i))
            if p is None:
                continue
            self.state[p] = {
                k: (_wrap(v._data.astype(p.dtype)) if isinstance(v, Tensor) and k != "step"
                    else v)
                for k, v in s.items()
            }  # fmt: skip
        for g, s in zip(groups, saved, strict=True):
            params = g["params"]
            g.clear()
            g.update({k: v for k, v in s.items() if k != "params"})
            g["params"] = params

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        lines.append(")")
        return "\n".join(lines)

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, state):
        self.__dict__.update(state)


def _check(name, value, low=0.0):
    if value is required:
        return
    if not value >= low:
        raise ValueError(f"Invalid {name}: {value}")
