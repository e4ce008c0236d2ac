"""The private extension's type stubs (python/draftlattice/_core.pyi) name what it binds: every
public name of ``draftlattice._core`` has a stub and every stub a binding, with the same
argument names for functions and constructors."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from draftlattice import _core

STUBS = Path(_core.__file__).with_name("_core.pyi")


def _stubbed() -> dict[str, ast.AST]:
    tree = ast.parse(STUBS.read_text())
    return {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def _bound_arguments(obj) -> list[str] | None:
    """Argument names from pybind11's docstring signature (``name(a: T, b: T = ...) -> R``)."""
    doc = inspect.getdoc(obj) or ""
    match = re.match(r"\w+\((.*?)\) ->", doc.splitlines()[0] if doc else "")
    if match is None:
        return None
    names = re.findall(r"(?:^|, )(\w+):", match.group(1))
    return [n for n in names if n != "self"]


def test_every_binding_has_a_stub_and_every_stub_a_binding():
    bound = {name for name in dir(_core) if not name.startswith("_") and (callable(getattr(_core, name)))}
    stubbed = set(_stubbed())
    assert bound - stubbed == set(), "bound but not in _core.pyi"
    assert stubbed - bound == set(), "in _core.pyi but not bound"


def test_stubbed_functions_and_constructors_name_the_bound_arguments():
    for name, node in _stubbed().items():
        target = getattr(_core, name)
        if isinstance(node, ast.ClassDef):
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            if init is None or not issubclass(target, object) or target.__init__ is object.__init__:
                continue
            stub, bound = init, _bound_arguments(target.__init__)
        else:
            stub, bound = node, _bound_arguments(target)
        if bound is None:  # overloaded or undocumented signature: names are not comparable
            continue
        names = [a.arg for a in stub.args.posonlyargs + stub.args.args + stub.args.kwonlyargs if a.arg != "self"]
        assert names == bound, name
