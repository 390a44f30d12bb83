"""The package ships its type hints (PEP 561's ``py.typed``): mypy checks a user's script over the public API as
it would any typed library, passing a correct one and naming the mistakes of a wrong one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

GOOD = '''"""A user's script over clusterable's public API."""

from pathlib import Path

from torch import Tensor

from clusterable.contracts import EvalContext
from clusterable.record import RunRecord
from clusterable.tables.report import Run, Table, load_runs


def my_evaluator(embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
    return {"spread": float(embeddings.std())}


def best(outputs: Path) -> float:
    runs, mode = load_runs(outputs, ("myproject",), "auto")
    values = [float(r.record.metrics["test/acc"]) for r in runs if r.ok]
    record: RunRecord | None = RunRecord.read(runs[0].path) if runs else None
    table = Table("mine", ["a"], [["1"]])
    first: Run | None = runs[0] if runs else None
    return max(values) if values and record is not None and table and first else 0.0
'''
WRONG = """from pathlib import Path

from clusterable.tables.report import load_runs

runs, mode = load_runs(Path("outputs"), 5, "auto")
total = mode + 1
"""


def test_mypy_passes_a_script_over_the_public_api_and_names_a_wrong_one(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "wrong.py").write_text(WRONG)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "cache"),
            "good.py",
            "wrong.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert not [e for e in errors if e.startswith("good.py")], done.stdout  # the package's hints are read and agree
    assert any(e.startswith("wrong.py:5:") and 'Argument 2 to "load_runs"' in e for e in errors), done.stdout
    assert any(e.startswith("wrong.py:6:") and "Unsupported operand" in e for e in errors), done.stdout
    assert "missing library stubs or py.typed marker" not in done.stdout
