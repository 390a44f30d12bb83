"""scripts/bench.py and its cases (scripts/benchmarks/): the command line, the case names and their order (the
JSON line's key order), the JSON line, and the shared timers and memory probe. The cases' figures themselves are
measured by running the bench, never in a test."""

import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The cases in the order they run, as `--only` names them: users' scripts and the docs name them.
CASES = [
    "train_overhead", "train_overhead_digits", "vae_epoch", "startup", "clustering_eval", "probes", "per_sample_ae",
    "cluster_heads", "retrieval_eval", "sc_partition", "pairwise_losses", "image_pipeline", "resnet50_training",
    "dscl", "text",
]  # fmt: skip


@pytest.fixture
def bench(monkeypatch):
    """The ``benchmarks`` package, imported as ``python scripts/bench.py`` imports it (scripts/ on the path)."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    return importlib.import_module("benchmarks")


def test_cases_keep_their_names_and_order(bench):
    assert list(bench.CASES) == CASES
    assert all(callable(fn) for fn in bench.CASES.values())


def test_help_lists_every_case_with_its_goal():
    done = subprocess.run(
        [sys.executable, "scripts/bench.py", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    listed = [
        line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ") and line[2] != " "
    ]
    assert [name for name in listed if name in CASES] == CASES
    assert "--only" in done.stdout


def test_every_case_module_says_its_goal_or_that_it_is_reported(bench):
    for module in bench.MODULES:
        summary = bench.summary(module)
        assert "goal" in summary.lower() or summary.endswith("Reported."), summary


def test_only_runs_one_case_and_the_last_line_is_one_json_object(bench, monkeypatch, capsys):
    ran = []

    def case(name: str, out: dict):
        def measure() -> dict:
            ran.append(name)
            return out

        return measure

    monkeypatch.setattr(
        bench, "CASES", {"a": case("a", {"a_s": 0.123456, "a_note": "x"}), "b": case("b", {"b_n": 3})}
    )
    bench.main("doc", ["--only", "b"])
    out, err = capsys.readouterr()
    assert ran == ["b"]
    assert list(json.loads(out.strip().splitlines()[-1])) == ["torch_threads", "b_n"]
    assert err.splitlines() == ["[bench] b ...", "[bench]   b_n: 3"]

    bench.main("doc", [])
    out, err = capsys.readouterr()
    result = json.loads(out.strip().splitlines()[-1])
    assert ran == ["b", "a", "b"]
    assert list(result) == ["torch_threads", "a_s", "a_note", "b_n"]
    assert result["a_s"] == 0.123456 and isinstance(result["torch_threads"], int)
    assert "[bench]   a_s: 0.1235" in err.splitlines()


def test_only_refuses_an_unknown_case(bench, capsys):
    with pytest.raises(SystemExit) as stop:
        bench.main("doc", ["--only", "nope"])
    assert stop.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_best_of_is_the_fastest_call_and_alternated_takes_turns(bench, monkeypatch):
    common = importlib.import_module("benchmarks.common")
    clock, calls = [0.0], []
    monkeypatch.setattr(common.time, "perf_counter", lambda: clock[0])

    def takes(name: str, seconds: list[float]):
        def fn() -> None:
            calls.append(name)
            clock[0] += seconds.pop(0)

        return fn

    assert common.best_of(takes("f", [3.0, 1.0, 2.0])) == 1.0
    assert calls == ["f"] * 3
    calls.clear()
    assert common.alternated(takes("p", [5.0, 2.0, 4.0]), takes("q", [1.0, 7.0, 0.5]), rounds=3) == (2.0, 0.5)
    assert calls == ["p", "q"] * 3


def test_the_memory_probe_of_a_child_script_sees_its_peak(bench):
    """A child allocating and freeing 200 MB after the probe reports at least that much extra peak memory."""
    common = importlib.import_module("benchmarks.common")
    script = textwrap.dedent(f"""
        import json
        {common.indented(common.MEMORY_PROBE, " " * 8)}
        block = b"x" * 200_000_000
        del block
        {common.indented(common.MEMORY_PEAK, " " * 8)}
        print("not the report")
        print(json.dumps({{"extra_mb": (peak - before) / 1024, "how": how}}))
    """)
    out = common.run_child(script)
    assert out["extra_mb"] >= 190, out
    assert out["how"] in ("VmHWM - VmRSS before", "ru_maxrss - VmRSS before (the peak may predate the call)")
