"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``,
``ParameterDict``."""

from collections import OrderedDict

from .module import Module


def _index(i, n):
    i = int(i)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range")
    return i % n


def _renumber(table, values):
    """``table`` holds ``values`` under ``"0"``, ``"1"``, ... (after a deletion)."""
    table.clear()
    for i, v in enumerate(values):
        table[str(i)] = v


class Sequential(Module):
    """Modules called in order, each on the previous one's output: ``Sequential(m0, m1, ...)``
    or ``Sequential(OrderedDict(name=module, ...))``."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        return self._modules[keys[_index(idx, len(keys))]]

    def __setitem__(self, idx, module):
        keys = list(self._modules)
        setattr(self, keys[_index(idx, len(keys))], module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        targets = keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(keys))]]
        for key in targets:
            del self._modules[key]
        # (torch renumbers the remaining modules)
        _renumber(self._modules, list(self._modules.values()))

    def append(self, module):
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self


class _Listing(Module):
    """A list over one of the Module's tables (``_table``), its items keyed ``"0"``, ``"1"``,
    ...; ``_put(key, value)`` registers an item."""

    _table = ""

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def _items(self):
        return self.__dict__[self._table]

    def __len__(self):
        return len(self._items())

    def __iter__(self):
        return iter(self._items().values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._items().values())[idx])
        return self._items()[str(_index(idx, len(self)))]

    def __setitem__(self, idx, value):
        self._put(str(_index(idx, len(self))), value)

    def __delitem__(self, idx):
        values = list(self._items().values())
        del values[idx if isinstance(idx, slice) else _index(idx, len(values))]
        _renumber(self._items(), values)

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        """Add ``value`` at the end; returns self."""
        self._put(str(len(self)), value)
        return self

    def extend(self, values):
        """Add each of ``values`` at the end; returns self."""
        for v in values:
            self.append(v)
        return self

    def insert(self, index, value):
        """Insert ``value`` before position ``index``."""
        values = list(self._items().values())
        values.insert(index, value)
        self._items().clear()
        for i, v in enumerate(values):
            self._put(str(i), v)


class ModuleList(_Listing):
    """A list of modules, registered as submodules ``"0"``, ``"1"``, ..."""

    _table = "_modules"

    def _put(self, key, module):
        self.add_module(key, module)


class _Mapping(Module):
    """The dict protocol over one of the Module's tables (``_table``: its name)."""

    _table = ""

    def _items(self):
        return self.__dict__[self._table]

    def __getitem__(self, key):
        return self._items()[key]

    def __delitem__(self, key):
        del self._items()[key]

    def __len__(self):
        return len(self._items())

    def __iter__(self):
        return iter(self._items())

    def __contains__(self, key):
        return key in self._items()

    def keys(self):
        return self._items().keys()

    def items(self):
        return self._items().items()

    def values(self):
        return self._items().values()

    def pop(self, key):
        return self._items().pop(key)

    def clear(self):
        self._items().clear()

    def update(self, pairs):
        """Add the (key, value) pairs of a mapping or an iterable of pairs."""
        for key, value in pairs.items() if hasattr(pairs, "items") else pairs:
            self[key] = value


class ModuleDict(_Mapping):
    """A dict of modules, registered under their keys."""

    _table = "_modules"

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        self.add_module(key, module)


class ParameterList(_Listing):
    """A list of Parameters (a plain tensor becomes one), registered as ``"0"``, ``"1"``, ..."""

    _table = "_parameters"

    def _put(self, key, value):
        self.register_parameter(key, _as_param(value))


class ParameterDict(_Mapping):
    """A dict of Parameters, registered under their keys."""

    _table = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        self.register_parameter(key, _as_param(value))


def _as_param(value):
    from ..parameter import Parameter

    return value if isinstance(value, Parameter) else Parameter(value)
