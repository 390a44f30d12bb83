"""Fixtures of the table tests: scripts/make_tables.py run in this process."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def make_tables(capsys):
    """``make_tables(*argv) -> (exit code, stdout, stderr)`` of scripts/make_tables.py, in this process."""
    spec = importlib.util.spec_from_file_location("make_tables", ROOT / "scripts" / "make_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = module.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run
