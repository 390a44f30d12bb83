"""What a researcher installs and cites: the version written once and repeated where it must be, the license
declared."""

from __future__ import annotations

import ast
import datetime
import importlib
import re
import subprocess
import sys
from pathlib import Path

import hydra
import pytest
import yaml
from packaging.requirements import Requirement

import clusterable

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_is_written_once_and_pyproject_reads_it() -> None:
    project = _pyproject()
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "clusterable.__version__"}
    written = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "src").rglob("*.py")
        if re.search(r"^__version__\s*=", p.read_text(), re.MULTILINE)
    ]
    assert written == ["src/clusterable/__init__.py"], written
    assert re.fullmatch(r"\d+\.\d+\.\d+", clusterable.__version__), clusterable.__version__


def test_citation_cites_this_version_under_its_license() -> None:
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert citation["version"] == clusterable.__version__, "CITATION.cff's version is not clusterable.__version__"
    assert citation["license"] == "MIT" and citation["title"] and citation["authors"]
    datetime.date.fromisoformat(str(citation["date-released"]))


def test_the_changelog_has_a_section_for_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text
    assert re.search(rf"^## \[{re.escape(clusterable.__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M), (
        f"CHANGELOG.md has no '## [{clusterable.__version__}] - YYYY-MM-DD' section"
    )


def test_the_license_exists_and_pyproject_declares_it() -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "The clusterable authors" in license_text
    project = _pyproject()["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]


# ----------------------------------------------------------------------------------- Hydra's names the plugins use

PLUGINS = ROOT / "src" / "hydra_plugins"


def _from_hydra(module: str) -> bool:
    """Hydra's modules and its own plugins' (joblib, submitit), not ours under ``hydra_plugins``."""
    return module == "hydra" or module.startswith(("hydra.", "hydra_plugins.hydra_"))


def _dotted(expr: ast.expr, imported: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """(module, dotted name) of ``Name`` or ``Name.attr...`` when ``Name`` is one of the ``imported`` names."""
    if isinstance(expr, ast.Name) and expr.id in imported:
        return imported[expr.id]
    if isinstance(expr, ast.Attribute) and (base := _dotted(expr.value, imported)) is not None:
        return base[0], f"{base[1]}.{expr.attr}"
    return None


def _hydra_names_used() -> list[tuple[str, str, str]]:
    """(file, module, dotted name) for every name the plugins take from Hydra: each from-import, each attribute of
    an imported name (``BasicSweeper.split_arguments``) and each method reached through ``super()`` in a class
    whose base is one (``BasicSweeper.sweep``)."""
    used: list[tuple[str, str, str]] = []
    for path in sorted(PLUGINS.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text())
        imported: dict[str, tuple[str, str]] = {}  # local name -> (module, name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and _from_hydra(node.module or ""):
                for alias in node.names:
                    imported[alias.asname or alias.name] = (str(node.module), alias.name)
                    used.append((where, str(node.module), alias.name))

        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (name := _dotted(node, imported)) is not None:
                used.append((where, *name))
            if isinstance(node, ast.ClassDef):
                bases = [b for b in (_dotted(e, imported) for e in node.bases) if b is not None]
                for call in ast.walk(node):
                    if (
                        isinstance(call, ast.Attribute)
                        and isinstance(call.value, ast.Call)
                        and isinstance(call.value.func, ast.Name)
                        and call.value.func.id == "super"
                    ):
                        used += [(where, module, f"{name}.{call.attr}") for module, name in bases]
    return sorted(set(used))


def _resolves(module: str, name: str) -> bool:
    """Whether ``from module import first`` works and each further part of ``name`` is an attribute."""
    first, *rest = name.split(".")
    try:
        target = importlib.import_module(module)
        target = getattr(target, first) if hasattr(target, first) else importlib.import_module(f"{module}.{first}")
        for part in rest:
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return False
    return True


def test_every_hydra_name_the_plugins_use_resolves() -> None:
    """The sweeper and the launchers build on Hydra's private code (``hydra._internal``, the joblib launcher's
    ``_core``): an upgrade that moves a name fails here, naming it, rather than in a user's sweep."""
    used = _hydra_names_used()
    assert (
        "src/hydra_plugins/clusterable_sweeper/cell_sweeper.py",
        "hydra._internal.core_plugins.basic_sweeper",
        "BasicSweeper",
    ) in used
    assert any(module.startswith("hydra_plugins.hydra_joblib_launcher._") for _, module, _ in used), used
    missing = [f"{module}.{name} ({where})" for where, module, name in used if not _resolves(module, name)]
    assert not missing, (
        f"Hydra {hydra.__version__} lacks names the plugins use: {', '.join(missing)}; pyproject.toml pins "
        "hydra-core (and the launchers) to the versions they were written against"
    )


def test_hydra_is_pinned_to_the_minor_version_the_plugins_were_written_for() -> None:
    requirements = {(req := Requirement(line)).name: req.specifier for line in _pyproject()["project"]["dependencies"]}
    hydra_core = requirements["hydra-core"]
    assert hydra.__version__ in hydra_core and "1.3.2" in hydra_core and "1.4.0" not in hydra_core, hydra_core


# The import name of each distribution our code imports where the two differ.
DISTRIBUTION = {
    "PIL": "pillow",
    "faiss": "faiss-cpu",
    "hydra": "hydra-core",
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "pytorch_metric_learning": "pytorch-metric-learning",
}
# The project's own second package (the Hydra plugins) is no dependency.
OURS = {"hydra_plugins"}


def _third_party_imports() -> set[str]:
    """The top-level names ``src/`` imports that are neither the standard library nor ours."""
    found = set()
    for path in (ROOT / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {n for n in found if n not in sys.stdlib_module_names and n not in ("clusterable", "__future__")}


def test_every_direct_import_is_a_declared_dependency() -> None:
    declared = {Requirement(r).name.lower() for r in _pyproject()["project"]["dependencies"]}
    extras = {
        Requirement(r).name.lower() for rs in _pyproject()["project"]["optional-dependencies"].values() for r in rs
    }
    undeclared = sorted(
        name
        for name in _third_party_imports() - OURS
        if DISTRIBUTION.get(name, name).lower().replace("_", "-") not in declared | extras
    )
    assert not undeclared, f"src/ imports what pyproject.toml does not declare: {undeclared}"


def test_the_package_ships_its_type_hints_and_runs_as_a_module(capsys) -> None:
    """PEP 561's py.typed beside the code and in the package data; ``python -m clusterable`` is the training
    command, whose ``--version`` is clusterable's, not Hydra's."""
    assert (ROOT / "src" / "clusterable" / "py.typed").is_file()
    assert "py.typed" in _pyproject()["tool"]["setuptools"]["package-data"]["clusterable"]
    assert {"Typing :: Typed", "Intended Audience :: Science/Research"} <= set(_pyproject()["project"]["classifiers"])
    for module in ("clusterable", "clusterable.cli"):
        done = subprocess.run(
            [sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        assert done.returncode == 0 and done.stdout.startswith(f"clusterable {clusterable.__version__} ("), done
    done = subprocess.run([sys.executable, "-m", "clusterable", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stdout.startswith("clusterable: learn representations that cluster") and "powered by" not in done.stdout
    assert (
        "clusterable-tables" in done.stdout and "experiment/corel:" in done.stdout and "docs/extend.md" in done.stdout
    )
    assert len(done.stdout.splitlines()) < 60
