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


# The modules every layer may import: they import nothing of the project (outcomes: only the record's statuses).
GROUND_FLOOR = {
    "clusterable.record": set(),
    "clusterable.metric_names": set(),
    "clusterable.searchpath": set(),
    "clusterable.extras": set(),
    "clusterable.logs": set(),
    "clusterable.outcomes": {"clusterable.record"},
}
# The front door: the command line and Hydra's callbacks. The run layer is called by it and never reaches it.
FRONT_DOOR = {"clusterable.cli", "clusterable.hydra_callbacks"}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, frontier = set(), [start]
    while frontier:
        for w in graph[frontier.pop()] - seen:
            seen.add(w)
            frontier.append(w)
    return seen


def test_the_ground_floor_imports_nothing_of_the_project():
    graph = import_graph(SRC, PACKAGES)
    for module, allowed in GROUND_FLOOR.items():
        assert graph[module] <= allowed, f"{module} imports {sorted(graph[module] - allowed)}"


def test_the_run_layer_never_reaches_the_front_door():
    graph = import_graph(SRC, PACKAGES)
    for module in (m for m in graph if m == "clusterable.run" or m.startswith("clusterable.run.")):
        assert not reachable(graph, module) & FRONT_DOOR, (module, sorted(reachable(graph, module) & FRONT_DOOR))
    # nor do the resolvers, which every config runs: no import runs back up to the run layer
    assert not {m for m in reachable(graph, "clusterable.resolvers") if m.startswith("clusterable.run.")}


def local_imports(root: Path) -> int:
    """Import statements inside functions below ``root``: each hides a dependency from the module's head."""
    count = 0

    def walk(node: ast.AST, in_function: bool) -> None:
        nonlocal count
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and in_function:
                count += 1
            walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    for path in root.rglob("*.py"):
        walk(ast.parse(path.read_text()), False)
    return count


# Ratchets: each count may fall (lower its ceiling here when it does) but never rise. A function-local import is
# kept where it defers a heavy or optional dependency (torch, Lightning, an extra) or breaks what would be a cycle.
LOCAL_IMPORTS_CEILING = 128  # 128: pruning.py defers optuna, an extra the run layer needs only in a pruned search
FMT_SKIP_CEILING = 0  # the formatter and the lint check share one line width: no line needs skipping


def test_function_local_imports_do_not_grow():
    found = local_imports(SRC)
    assert found <= LOCAL_IMPORTS_CEILING, f"{found} function-local imports, the ceiling is {LOCAL_IMPORTS_CEILING}"


def test_no_line_skips_the_formatter():
    root = SRC.parent
    skipped = [
        f"{p.relative_to(root)}:{i}"
        for folder in ("src", "tests", "scripts")
        for p in (root / folder).rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "fmt: " + "skip" in line or "fmt: " + "off" in line
    ]
    assert len(skipped) <= FMT_SKIP_CEILING, skipped[:5]


def test_the_counters_count(tmp_path: Path):
    (tmp_path / "m.py").write_text("import os\n\ndef f():\n    import sys\n    def g():\n        from a import b\n")
    assert local_imports(tmp_path) == 2
