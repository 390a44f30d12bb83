"""scripts/bench.py and its cases (scripts/benchmarks/): the command line, the case names and their order (the
JSON line's key order), the JSON line, and the shared timers and memory probe. The cases' figures themselves are
measured by running the bench, never in a test."""

import ast
import importlib
import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The cases in the order they run, as `--only` names them: users' scripts and the docs name them.
CASES = [
    "train_overhead",
    "train_overhead_digits",
    "vae_epoch",
    "startup",
    "clustering_eval",
    "probes",
    "per_sample_ae",
    "cluster_heads",
    "retrieval_eval",
    "sc_partition",
    "pairwise_losses",
    "image_pipeline",
    "resnet50_training",
    "dscl",
    "text",
    "stacked_steps",
    "run_overhead",
    "search_pruning",
]


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
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ") and line[2] != " "]
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

    monkeypatch.setattr(bench, "CASES", {"a": case("a", {"a_s": 0.123456, "a_note": "x"}), "b": case("b", {"b_n": 3})})
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


def _clusterable_imports() -> set[tuple[str, str, str]]:
    """(file, module, name) of every ``from clusterable... import name`` in the bench's modules: the imports at the
    top, those inside the cases (run only when the case runs) and those of the child scripts the cases write."""
    child_import = re.compile(r"^\s*from (clusterable[\w.]*) import ([\w, ]+)$", re.M)
    found = set()
    for path in sorted((ROOT / "scripts" / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("clusterable"):
                found |= {(path.name, node.module, alias.name) for alias in node.names}
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # f-strings' parts included
                for module, names in child_import.findall(node.value):
                    found |= {(path.name, module, name.split(" as ")[0].strip()) for name in names.split(",")}
    return found


def test_every_clusterable_name_the_cases_import_exists():
    """A case imports most of what it measures inside ``measure()`` (so that ``--help`` stays quick), where a moved
    or renamed module would only show when someone runs that case."""
    found = _clusterable_imports()
    assert {module for _, module, _ in found} >= {
        "clusterable.evaluation.retrieval",
        "clusterable.heads.dscl",
    }
    missing = []
    for file, module, name in sorted(found):
        try:
            imported = importlib.import_module(module)
        except ImportError as error:
            missing.append(f"{file}: {module} ({error})")
            continue
        submodule = hasattr(imported, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None
        if not hasattr(imported, name) and not submodule:
            missing.append(f"{file}: {module}.{name}")
    assert not missing, missing


def test_the_framework_path_does_the_plain_loops_work(bench):
    """The overhead cases time the same training in both paths: with one batch of every row (so that the order of
    rows does not matter), an epoch of ``framework_loop`` leaves the same parameters as an epoch of ``plain_loop``."""
    import torch

    from clusterable.heads import CCELoss
    from clusterable.models import FFNN

    loops = importlib.import_module("benchmarks.loops")
    g = torch.Generator().manual_seed(0)
    split = {"inputs": torch.rand(96, 12, generator=g), "labels": torch.randint(0, 10, (96,), generator=g)}
    trained = []
    for path in ("plain", "framework"):
        torch.manual_seed(0)
        encoder = FFNN((12,), hidden=(16,))
        head = CCELoss(num_classes=10, embedding_dim=encoder.embedding_dim)
        before = [p.detach().clone() for p in (*encoder.parameters(), *head.parameters())]
        if path == "plain":
            loops.plain_loop(encoder, head, split, batch_size=96, epochs=2)
        else:
            loops.framework_loop(encoder, head, {"train": split, "val": split, "test": split}, 96, 2)
        after = [p.detach() for p in (*encoder.parameters(), *head.parameters())]
        assert all(not torch.equal(a, b) for a, b in zip(before, after, strict=True)), path  # it trained
        trained.append(after)
    for plain, framework in zip(*trained, strict=True):
        torch.testing.assert_close(framework, plain, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_resnet50_training_runs_its_three_settings_on_the_cpu(bench):
    """The GPU case at a toy size on the CPU (4 images of 32 x 32, 7 steps, the first 5 untimed): the datamodule,
    module and trainer options it passes are the framework's, and it reports a rate for each setting."""
    out = bench.CASES["resnet50_training"](batch=4, steps=7, side=32, accelerator="cpu")
    settings = ["bf16-mixed/channels_last", "bf16-mixed", "32-true"]
    assert list(out) == ["resnet50_device", *(f"resnet50_img_per_s/{s}" for s in settings)]
    assert out["resnet50_device"] == "cpu"
    assert all(out[f"resnet50_img_per_s/{s}"] > 0 for s in settings), out


@pytest.mark.parametrize(
    ("record", "figures"),
    [
        ("search_pruning_43d7091.json", ("767 s", "1,099 s", "629 s", "**1.43x**", "0.8986", "0.8960", "0.8954")),
        ("search_pruning_aeb26da.json", ("1,356 s", "952 s", "(0.70x")),
    ],
)
def test_the_search_benchmark_s_figures_in_the_docs_are_its_kept_records(record: str, figures: tuple) -> None:
    """docs/benchmarks.md's search_pruning figures are those of the bench's JSON kept in results/benchmarks/."""
    root = Path(__file__).resolve().parents[1]
    kept = json.loads((root / "results" / "benchmarks" / record).read_text())["figures"]
    page = (root / "docs" / "benchmarks.md").read_text()
    stacked, one_by_one = kept["search_pruning_stacked_pruned_s"], kept["search_pruning_one_by_one_s"]
    built = [f"{stacked:,.0f} s", f"{one_by_one:,.0f} s", f"{one_by_one / stacked:.2f}x"]
    if "search_pruning_one_by_one_pruned_s" in kept:
        built += [f"{kept['search_pruning_one_by_one_pruned_s']:,.0f} s"]
        ways = ("stacked_pruned", "one_by_one", "one_by_one_pruned")
        built += [f"{kept[f'search_pruning_{w}_best']:.4f}" for w in ways]
    assert all(b in "".join(figures) for b in built), (built, figures)
    assert all(f in page for f in figures)
    assert f"results/benchmarks/{record}" in page
