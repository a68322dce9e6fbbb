"""The public names are written out for tools: nautograd/__init__.pyi is fresh and complete."""

import nautograd as ng
from nautograd import _stub


def test_the_stub_is_fresh():
    with open(_stub.PATH) as fh:
        assert fh.read() == _stub.render(), "run `python -m nautograd._stub` and commit"


def test_every_public_name_is_in_the_stub_and_exists():
    import ast

    with open(_stub.PATH) as fh:
        tree = ast.parse(fh.read())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
    names -= {"Any", "_np"}
    for name in names:
        assert hasattr(ng, name), name
    from nautograd.tensor import FUNCTIONS

    assert set(FUNCTIONS) <= names
    assert {"Tensor", "tensor", "no_grad", "autograd", "library", "float32"} <= names
