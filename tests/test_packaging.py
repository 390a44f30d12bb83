"""What a researcher installs and cites: the version written once and repeated where it must be, the license
declared."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest
import yaml

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
    assert citation["version"] == clusterable.__version__, (
        "CITATION.cff's version is not clusterable.__version__"
    )
    assert citation["license"] == "MIT" and citation["title"] and citation["authors"]
    datetime.date.fromisoformat(str(citation["date-released"]))


def test_the_changelog_has_a_section_for_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text
    assert re.search(
        rf"^## \[{re.escape(clusterable.__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M
    ), f"CHANGELOG.md has no '## [{clusterable.__version__}] - YYYY-MM-DD' section"


def test_the_license_exists_and_pyproject_declares_it() -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "The clusterable authors" in license_text
    project = _pyproject()["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
