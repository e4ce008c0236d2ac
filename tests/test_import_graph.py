"""The package's import graph has no cycle, and ``hf/`` stays glue (issue 24).

Every ``import`` and ``from ... import`` counts, at module level and inside functions alike: an
import moved into a function still makes the two modules depend on each other, it only hides the
cycle from the interpreter until the function runs. An edge goes to the module named (a
submodule named in ``from PKG import SUBMODULE``) and to the packages above it whose ``__init__``
the import runs first (``import a.b.c`` runs ``a/b/__init__.py``), except the importer's own
packages, which are always being imported already. Dynamic imports
(``importlib.import_module`` with a computed name) are not seen.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "python" / "draftlattice"
HF_MAX_LINES = 900


def module_names(package_dir: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every ``*.py`` under ``package_dir`` (and ``*.pyi`` stubs:
    the compiled extension ``_core`` is a module of the graph too)."""
    modules = {}
    for path in sorted([*package_dir.rglob("*.py"), *package_dir.rglob("*.pyi")]):
        parts = [package, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that the module ``name`` (file ``path``) imports, anywhere in it."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                anchor = here[: len(here) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:  # `from PKG import SUBMODULE` imports the submodule
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    own_packages = set(_packages_above(name))
    found = set()
    for target in targets:
        # `from a.b import NAME` where NAME is no module: the nearest module that exists
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
            found.update(set(_packages_above(target)) - own_packages - {name})
    return found


def _packages_above(name: str) -> list[str]:
    """``a.b.c`` -> ``[a, a.b]``: the packages whose ``__init__`` runs before ``a.b.c``."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(package_dir: Path, package: str) -> dict[str, set[str]]:
    modules = module_names(package_dir, package)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for succ in sorted(graph.get(node, ())):
            if state.get(succ) == 1:
                return path[path.index(succ) :] + [succ]
            if succ not in state and (cycle := visit(succ)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_draftlattice_has_no_import_cycle():
    graph = import_graph(PACKAGE_DIR, "draftlattice")
    assert len(graph) > 50, f"found only {len(graph)} modules under {PACKAGE_DIR}"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_is_found_through_function_level_and_relative_imports(tmp_path):
    """``leaf`` imports ``top`` inside a function; ``top`` imports ``leaf`` (and runs ``sub``'s
    ``__init__``): the checker sees the cycle that the interpreter would only meet at run time."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import leaf\n")
    (package / "sub" / "leaf.py").write_text("def f():\n    from ..top import g\n")
    (package / "top.py").write_text("import pkg.sub.leaf as leaf\ng = 1\n")
    graph = import_graph(package, "pkg")
    assert graph["pkg.sub"] == {"pkg.sub.leaf"}
    assert graph["pkg.sub.leaf"] == {"pkg.top"}
    assert graph["pkg.top"] == {"pkg.sub", "pkg.sub.leaf"}
    assert find_cycle(graph) == ["pkg.sub", "pkg.sub.leaf", "pkg.top", "pkg.sub"]

    (package / "top.py").write_text("g = 1\n")
    assert find_cycle(import_graph(package, "pkg")) is None


def test_cycle_through_a_package_init_is_found(tmp_path):
    """``a.py`` imports ``pkg.inner.b``, which runs ``pkg/inner/__init__.py`` first, which imports ``a``."""
    package = tmp_path / "pkg"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .inner.b import x\n")
    (package / "inner" / "__init__.py").write_text("from ..a import x\n")
    (package / "inner" / "b.py").write_text("x = 1\n")
    assert find_cycle(import_graph(package, "pkg")) == ["pkg.a", "pkg.inner", "pkg.a"]


def test_hf_is_glue_of_at_most_900_lines():
    counts = {path.name: len(path.read_text().splitlines()) for path in sorted((PACKAGE_DIR / "hf").glob("*.py"))}
    total = sum(counts.values())
    assert total <= HF_MAX_LINES, f"hf/ holds {total} lines (at most {HF_MAX_LINES}): {counts}"
