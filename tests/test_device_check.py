"""The prepared device check (scripts/device_check.sh): its projection from hand-made figures, and the whole dry
run on this CPU (slow: a bench and a stacked grid in child processes)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers.running import script_module

ROOT = Path(__file__).resolve().parents[1]


def _module():
    return script_module(ROOT / "scripts" / "device_check.py")


def test_the_projection_costs_each_stack_its_steps_at_the_fastest_measured_step_plus_the_time_outside_them():
    check = _module()
    bench = {
        "stacked_steps_cuda_ffnn_m10_ms": 4.0,
        "stacked_steps_cuda_ffnn_m10_compiled_ms": 2.0,
        "stacked_steps_cuda_ffnn_m20_ms": 6.0,
        "stacked_steps_cuda_ffnn_m20_graphed_ms": 3.0,
        "stacked_steps_cuda_cnn_m10_ms": 10.0,
        "stacked_steps_cuda_cnn_m20_ms": 20.0,
    }
    assert check._best_step_ms(bench, "cuda", "ffnn", 10) == 2.0  # the compiled one
    assert check._best_step_ms(bench, "cuda", "ffnn", 20) == 3.0  # the graphed one
    assert check._best_step_ms(bench, "cuda", "cnn", 40) == 40.0  # nearest width (20), scaled to 40 members
    assert check._best_step_ms(bench, "cuda", "ae3", 10) is None
    group = {"wall_s": 100.0, "steps": 64_500, "step_ms": 1.0}  # 64.5 s of steps, 35.5 s outside them
    report = {"cuda": True, "stacked_steps": bench, "corel_group": group}
    projection = check._projection(False, report)
    steps = check.EPOCHS * check.STEPS_PER_EPOCH
    expected = {
        ("table1", "ffnn"): 6 * (steps * 3.0 / 1e3 + 35.5),
        ("table1", "cnn"): 6 * (steps * 20.0 / 1e3 + 35.5),
        ("table2", "ffnn"): 8 * (steps * 2.0 / 1e3 + 35.5),
        ("table2", "cnn"): 8 * (steps * 10.0 / 1e3 + 35.5),
    }
    got = {(r["table"], r["model"]): r["seconds"] for r in projection["rows"]}
    assert got == pytest.approx(expected)
    assert projection["total_s"] == pytest.approx(sum(expected.values()))
    with pytest.raises(RuntimeError, match="the COREL group did not train"):
        check._projection(False, {"cuda": True, "stacked_steps": bench, "corel_group": {"error": "x"}})


@pytest.mark.slow
def test_the_dry_run_goes_through_every_step_and_writes_its_json(tmp_path: Path) -> None:
    env = {**os.environ, "CLUSTERABLE_OUTPUTS": str(tmp_path / "outputs")}
    done = subprocess.run(
        ["bash", "scripts/device_check.sh", "--dry-run", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out" / "device_check.json").read_text())
    assert report["dry_run"] and report["corel_group"]["statuses"] == ["ok"]
    assert report["corel_group"]["members"] == 2 and report["projection"]["total_s"] > 0
    assert report["side_by_side"]["statuses"] == ["ok"] and report["side_by_side"]["gain"] > 0
    assert "stacked_steps_cpu_ffnn_m2_ms" in report["stacked_steps"]
    assert done.stdout.splitlines()[-1].startswith("  projected COREL Tables 1+2, image half:")
