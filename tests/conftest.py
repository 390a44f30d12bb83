"""Shared fixtures: run `train.py` / `make_tables.py` as a user would, in a temporary working directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env(outputs: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        CLUSTERABLE_OUTPUTS=str(outputs), CLUSTERABLE_DATA=str(outputs / "data"), WANDB_MODE="offline",
        PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), env.get("PYTHONPATH", "")]), HYDRA_FULL_ERROR="0",
    )  # fmt: skip
    return env


@pytest.fixture
def cli(tmp_path: Path):
    """``cli("train.py", "loss=cce", ...)`` -> CompletedProcess; outputs go to ``tmp_path / "outputs"``."""
    outputs = tmp_path / "outputs"

    def run(script: str, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [sys.executable, str(ROOT / script), *args], cwd=tmp_path, env=_env(outputs),
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{script} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    run.outputs = outputs  # type: ignore[attr-defined]
    return run
