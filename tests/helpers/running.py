"""What the tests read back from a run: its exit code and output, its metrics.json files."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

# `hydra.searchpath=...` adds tests/helpers/conf: the failure-forcing heads and the experiment with a typo.
SEARCHPATH = f"hydra.searchpath=[file://{Path(__file__).parent / 'conf'}]"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def metrics_files(outputs: Path) -> list[Path]:
    return sorted(outputs.rglob("metrics.json"))


def all_metrics(outputs: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in metrics_files(outputs)]


def by_override(outputs: Path, key: str) -> dict[str, dict]:
    """Every run's metrics.json keyed by the value its command line gave ``key`` (``{"cce": {...}}``)."""
    out = {}
    for m in all_metrics(outputs):
        overrides = dict(o.split("=", 1) for o in m["overrides"] if "=" in o)
        out[overrides.get(key, "")] = m
    return out


def assert_refused(result: Result, message: str, outputs: Path) -> None:
    """A command refused before anything ran: exit 2, one ``error: <message>...`` line on stderr, no run recorded."""
    assert result.code == 2 and result.err.strip().startswith(f"error: {message}"), result.err
    assert len(result.error_lines()) == 1, result.err
    assert not metrics_files(outputs)


def script_module(path: Path) -> ModuleType:
    """A script of the repository (``scripts/records.py``, ``scripts/device_check.py``) imported as a module, for
    testing its functions without a subprocess."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
