"""No import cycle among the package's modules: no module imports another that imports it back, directly or
through a chain, counting lazy imports inside functions too (they run as soon as the function does).

The imports are read with ``ast`` (nothing is executed): ``import a.b``, ``from a.b import c`` (an edge to
``a.b.c`` when that is a module, else to ``a.b``) and relative imports resolved against the importing module.
Imports under ``if TYPE_CHECKING:`` never run and are left out. Only edges between the walked modules count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = ("clusterable", "hydra_plugins.clusterable_sweeper")


def modules_of(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (dotted name -> file) under source root ``root``; a package is its
    ``__init__.py``."""
    folder = root.joinpath(*package.split("."))
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree`` at any depth (functions, classes, try blocks), except the bodies of
    ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules among ``known`` that module ``name`` (file ``path``) imports, lazily or not."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:  # relative: from the package that holds this module, up level - 1 packages
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        out.update(t for t in targets if t in known and t != name)
    return out


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    files = {}
    for package in packages:
        files.update(modules_of(root, package))
    known = set(files)
    return {name: imports_of(name, path, known) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(v: str) -> None:  # the package has ~100 modules: recursion depth is no concern
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_through(graph, set(c)) for c in components]


def _cycle_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle from the component's first module back to itself, inside the component."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    return [*paths[v], start]
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    following.append(w)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strongly connected component always has one


def test_the_cycle_finder_sees_lazy_relative_and_chained_imports(tmp_path: Path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "def f():\n    from .sub import c\n",  # lazy and relative
        "sub/__init__.py": "",
        "sub/c.py": "import pkg.a\n",  # back to a: a -> b -> sub.c -> a
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\n",
        "e.py": "from . import d\n",  # d -> e only under TYPE_CHECKING: no cycle
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.b"] == {"pkg.sub.c"} and graph["pkg.e"] == {"pkg.d"} and graph["pkg.d"] == set()
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]


@pytest.mark.parametrize("package", PACKAGES)
def test_the_walk_finds_the_modules(package):
    assert len(modules_of(SRC, package)) >= (20 if package == "clusterable" else 2)


def test_no_module_imports_another_that_imports_it_back():
    found = cycles(import_graph(SRC, PACKAGES))
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)
