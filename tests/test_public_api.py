"""The public names are written out for tools: the stubs are fresh and complete, and every
public function, class, method and property has a docstring."""

import importlib
import inspect
import os
import re
import subprocess
import sys
import types

import pytest

import nautograd as ng
from nautograd import _stub

# the public modules; the API reference (docs/api/) renders each of them
PUBLIC_MODULES = [
    "nautograd",
    "nautograd.autograd",
    "nautograd.autograd.forward_ad",
    "nautograd.autograd.functional",
    "nautograd.autograd.graph",
    "nautograd.nn",
    "nautograd.nn.functional",
    "nautograd.nn.init",
    "nautograd.nn.utils",
    "nautograd.optim",
    "nautograd.optim.lr_scheduler",
    "nautograd.distributions",
    "nautograd.func",
    "nautograd.utils.checkpoint",
    "nautograd.linalg",
    "nautograd.special",
    "nautograd.library",
    "nautograd.cuda",
]


def test_the_stubs_are_fresh():
    for path, text in _stub.stubs().items():
        with open(path) as fh:
            assert fh.read() == text, f"{path} is stale: run `python -m nautograd._stub`"


def _public_objects():
    seen = set()
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        names = getattr(module, "__all__", None) or [n for n in dir(module) if n[0] != "_"]
        for n in names:
            obj = getattr(module, n)
            if isinstance(obj, types.ModuleType) or not callable(obj) or id(obj) in seen:
                continue
            if not getattr(obj, "__module__", "").startswith("nautograd"):
                continue
            seen.add(id(obj))
            yield f"{name}.{n}", obj


def _members(cls):
    """The public methods and properties a class defines itself."""
    for name, attr in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(attr, property):
            yield name, attr
        elif callable(getattr(attr, "__func__", attr)):
            yield name, getattr(cls, name)


def _property_doc(cls, name):
    return any(
        isinstance(vars(c).get(name), property) and vars(c)[name].__doc__ for c in cls.__mro__
    )


def test_every_public_function_class_method_and_property_has_a_docstring():
    missing = []
    for path, obj in _public_objects():
        if not inspect.getdoc(obj):
            missing.append(path)
        if isinstance(obj, type):
            for name, attr in _members(obj):
                ok = (
                    _property_doc(obj, name) if isinstance(attr, property) else inspect.getdoc(attr)
                )
                if not ok:
                    missing.append(f"{path}.{name}")
    assert not missing, "no docstring: " + ", ".join(missing)


def test_every_argument_of_every_op_is_described():
    from nautograd.kernels import opdocs
    from nautograd.kernels.registry import COMPOSITES, OPS

    public = [
        op for op in OPS + COMPOSITES if op.functions or op.methods or op.linalg or op.special
    ]
    public += [op for op in OPS + COMPOSITES if op.nn_functional]
    bad = {op.name: opdocs.undescribed(op) for op in public if opdocs.undescribed(op)}
    assert not bad, bad
    assert all(op.doc for op in public), [op.name for op in public if not op.doc]


def test_op_functions_show_torch_signatures():
    assert str(inspect.signature(ng.add)) == "(input, other, alpha=1)"
    assert str(inspect.signature(ng.lerp)) == "(input, end, weight)"
    assert str(inspect.signature(ng.nn.functional.relu)) == "(input, inplace=False)"
    assert "Args:" in ng.sum.__doc__ and "keepdim (bool)" in ng.sum.__doc__


ROOT = os.path.join(os.path.dirname(__file__), "..")


def test_every_public_module_is_in_the_api_reference():
    text = ""
    api = os.path.join(ROOT, "docs", "api")
    for f in sorted(os.listdir(api)):
        with open(os.path.join(api, f)) as fh:
            text += fh.read()
    for name in PUBLIC_MODULES:
        assert f"::: {name}\n" in text, name


# functions that share their name with a module: shown by the path of their definition
_DEFINITIONS = {
    "nautograd.tensor": "nautograd.creation.tensor",
    "nautograd.autograd.gradcheck": "nautograd.autograd.gradcheck.gradcheck",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The docs site, built as CI builds it (``mkdocs build --strict``: a broken reference,
    a missing page or an unresolved identifier fails)."""
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def test_the_docs_site_builds_and_every_public_name_has_an_entry(site):
    ids = set()
    for page in site.glob("api/*/index.html"):
        ids.update(re.findall(r'id="([\w.]+)"', page.read_text()))
    missing = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [n for n in dir(module) if n[0] != "_"]
        for n in names:
            if isinstance(getattr(module, n), types.ModuleType):
                continue
            path = f"{module_name}.{n}"
            if _DEFINITIONS.get(path, path) not in ids:
                missing.append(path)
    assert not missing, "not in the API reference: " + ", ".join(missing)
    assert (site / "examples" / "newton_hessian" / "index.html").exists()


def test_the_api_reference_shows_only_public_names(site):
    leaked = []
    for page in site.glob("api/*/index.html"):
        for ident in set(re.findall(r'id="(nautograd[\w.]*)"', page.read_text())):
            module_name, _, name = ident.rpartition(".")
            if not module_name:
                continue  # the page's own module
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue  # a class member
            exported = getattr(module, "__all__", None)
            if exported is not None and name not in exported and ident not in _DEFINITIONS.values():
                leaked.append(ident)
    assert not leaked, "not public, yet in the API reference: " + ", ".join(sorted(leaked))
