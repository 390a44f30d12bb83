"""The run layer without Hydra running: ``clusterable.run.run(cfg, ctx)`` on a config composed by a test, the one
place that reads Hydra's runtime (``clusterable.cli``), and the top-level keys a config may hold."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

import clusterable
from clusterable.config import CONFIG_DIR
from clusterable.run import RunContext, run
from clusterable.run.checks import top_level_keys

FAST = [
    "dataset=iris",
    "trainer.max_epochs=2",
    "torch_threads=1",
    "logger=none",
    "evaluator=[classification]",
]


def composed(*overrides: str):
    """``train`` composed with Hydra's compose API (its node kept, as the command line would see it)."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("train", overrides=[*FAST, *overrides], return_hydra_config=True)


def run_in_process(tmp_path: Path, *overrides: str) -> dict:
    cfg = composed(*overrides)
    ctx = RunContext.from_hydra(cfg.hydra, tmp_path / "run")
    del cfg.hydra
    hydra_state = HydraConfig.instance().cfg  # an earlier in-process train.py run leaves Hydra's state set
    HydraConfig.instance().cfg = None
    try:
        assert not HydraConfig.initialized()  # nothing of Hydra's global state is there for the run to read
        return run(cfg, ctx).to_dict()  # metrics.json as written
    finally:
        HydraConfig.instance().cfg = hydra_state


def test_run_is_called_in_process_without_hydra(tmp_path: Path) -> None:
    payload = run_in_process(tmp_path, "loss=cce", "seed=3")
    assert payload["status"] == "ok", payload["error"]
    assert payload["choices"]["loss"] == "cce" and payload["choices"]["dataset"] == "iris"
    assert payload["config"]["seed"] == 3 and payload["mode"] == "full"
    recorded = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert recorded["metrics"]["test/acc"] == payload["metrics"]["test/acc"]


def test_the_same_config_in_the_same_folder_is_reused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    first = run_in_process(tmp_path, "loss=cce")
    capsys.readouterr()
    again = run_in_process(tmp_path, "loss=cce")
    assert again["status"] == "ok" and again["metrics"]["test/acc"] == first["metrics"]["test/acc"]
    assert capsys.readouterr().out.startswith(f"skip {tmp_path / 'run'}: metrics.json says ok")


def test_an_unknown_top_level_key_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    payload = run_in_process(tmp_path, "+sead=3")
    assert payload["status"] == "failed"
    assert payload["error"].startswith("sead is not a top-level key of the config (did you mean seed?); accepted: ")
    assert "\n" not in payload["error"] and not (tmp_path / "run" / "traceback.txt").exists()


def test_an_unknown_top_level_key_on_the_command_line_exits_1(train) -> None:
    result = train("+protocl.row=x", "dataset=iris", "trainer.max_epochs=1", "logger=none")
    assert result.code == 1 and result.error_lines() == [
        "error: protocl is not a top-level key of the config (did you mean protocol?); accepted: "
        + ", ".join(top_level_keys())
    ], result


def test_only_the_command_line_reads_hydras_runtime() -> None:
    """``HydraConfig`` appears in ``clusterable/cli.py`` alone: the run layer gets a ``RunContext``."""
    package = Path(clusterable.__file__).parent
    readers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if any(
            isinstance(n, ast.Name | ast.Attribute) and "HydraConfig" in ast.unparse(n)
            for n in ast.walk(ast.parse(path.read_text()))
        )
    )
    assert readers == ["cli.py"]


@pytest.mark.parametrize(("busy", "threads", "said"), [(1.2, 1, True), (0.2, None, False), (None, None, False)])
def test_the_default_cpu_threads_leave_the_busy_cores_alone(monkeypatch, capsys, busy, threads, said) -> None:
    import torch

    from clusterable.run import training

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr(training, "busy_elsewhere", lambda: busy)
    before = torch.get_num_threads()
    try:
        cfg = OmegaConf.create({"torch_threads": None})
        # Busy cores elsewhere: only the free ones; else torch's default (None: left as it was).
        assert training.cpu_threads(cfg, RunContext(run_dir=Path("."))) == (threads or before)
    finally:
        torch.set_num_threads(before)
    assert ("torch_threads: 1 of 2 cores (other processes keep 1.2 busy" in capsys.readouterr().out) == said


def test_busy_elsewhere_leaves_this_process_out() -> None:
    from clusterable.run.training import busy_elsewhere

    busy = busy_elsewhere(0.2)
    assert busy is None or 0 <= busy <= (os.cpu_count() or 1) + 0.5


def test_boudiafs_selection_rule_is_a_checkpoint_option(tmp_path: Path) -> None:
    # checkpoint.rule=boudiaf: R@1 rounded, ties to the later epoch, the untrained network a candidate
    # (callbacks.BoudiafCheckpoint, tested against their code in tests/test_boudiaf_checkpoint.py): wired here.
    payload = run_in_process(
        tmp_path,
        "dataset=digits_zeroshot",
        "loss=cce",
        "evaluator=[retrieval]",
        "validation_evaluators=[retrieval]",
        "checkpoint.monitor=val/recall@1/cos",
        "checkpoint.rule=boudiaf",
    )
    assert payload["status"] == "ok", payload["error"]
    assert payload["best_epoch"] in (None, 0, 1) and (tmp_path / "run" / "checkpoints" / "best.ckpt").is_file()


def test_boudiafs_rule_needs_a_monitor(tmp_path: Path) -> None:
    payload = run_in_process(tmp_path, "checkpoint.monitor=null", "checkpoint.rule=boudiaf")
    assert payload["status"] == "failed" and payload["error"] == (
        "checkpoint.rule=boudiaf selects an epoch by checkpoint.monitor, which is null"
    )


def test_a_config_that_does_not_resolve_never_overwrites_a_finished_run(tmp_path: Path) -> None:
    assert run_in_process(tmp_path, "loss=cce")["status"] == "ok"
    payload = run_in_process(tmp_path, "loss=cce", "+protocol.root=${oc.env:CLUSTERABLE_TEST_UNSET_VARIABLE}")
    assert payload["status"] == "failed" and payload["error"].startswith("config: ")
    assert payload["error"].endswith("; the cell's finished run is left as it was")
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["status"] == "ok"


@pytest.mark.parametrize(
    "overrides",
    [
        ["trainer.precision=bf16-true"],  # the model computes in bfloat16, which NumPy has no dtype for
        ["trainer.precision=bf16-true", "loss=cce"],  # a classifying head: logits from a float32 copy
        ["trainer.precision=bf16-mixed"],
        ["trainer.precision=16-true", "loss=cce", "+optimizer.eps=1e-4"],  # float16 (scikit-learn refuses it)
    ],
    ids=["bf16-true", "bf16-true-cce", "bf16-mixed", "16-true"],
)
def test_every_half_precision_that_trains_is_evaluated(tmp_path: Path, overrides: list[str]) -> None:
    evaluators = "evaluator=[classification,clustering]"
    payload = run_in_process(tmp_path, evaluators, "trainer.max_epochs=10", *overrides)
    assert payload["status"] == "ok", payload["error"]
    metrics = payload["metrics"]  # iris, 3 classes: 0.97 in float32 after 10 epochs, 0.67 in float16
    assert metrics["test/acc"] > 0.5 and 0.5 < metrics["test/kmeans/nmi"] <= 1, metrics
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["status"] == "ok"


def test_evaluators_get_float32_rows_and_head_and_the_trained_head_is_left_alone() -> None:
    import torch

    from clusterable.contracts import EvalContext
    from clusterable.evaluation.runner import call_evaluators

    head = torch.nn.Linear(3, 2).to(torch.bfloat16)
    seen = {}

    def look(embeddings, labels, context):
        seen.update(
            rows=embeddings.dtype,
            output=context.encoder_output.dtype,
            head=context.head.weight.dtype,
            logits=context.head(context.encoder_output).dtype,
        )
        return {"n": len(labels)}

    rows = torch.randn(4, 3, dtype=torch.bfloat16)
    context = EvalContext(
        stage="val", split={}, head=head, encoder_output=rows, train_embeddings=None, train_labels=None
    )
    assert call_evaluators({"look": look}, rows, torch.zeros(4), context) == {"val/n": 4.0}
    assert set(seen.values()) == {torch.float32}
    assert head.weight.dtype == torch.bfloat16  # validation evaluators score a model that is still training


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["trainer.precision=16-true"],
            "trainer.precision=16-true keeps the optimizer's state in float16, where "
            "its eps=1e-08 is 0: its first step divides by zero and the loss turns NaN; set +optimizer.eps=1e-4 or use "
            "trainer.precision=bf16-true or bf16-mixed",
        ),
        (
            ["trainer.precision=transformer-engine"],
            "trainer.precision=transformer-engine needs NVIDIA's "
            "transformer_engine package (and a GPU), which is not installed; use bf16-mixed or bf16-true",
        ),
    ],
    ids=["16-true-adam", "transformer-engine"],
)
def test_a_precision_that_cannot_train_the_run_is_refused_before_training(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    import importlib.util

    if "transformer-engine" in overrides[0] and importlib.util.find_spec("transformer_engine") is not None:
        pytest.skip("transformer_engine is installed here")
    payload = run_in_process(tmp_path, *overrides)
    assert payload["status"] == "failed" and payload["error"] == message
    assert payload["timing"].get("fit_s") is None  # refused before training
    assert not (tmp_path / "run" / "csv").exists()


@pytest.mark.parametrize(
    ("monitor", "mode"),
    [
        ("val/acc", "max"),
        ("val/loss", "min"),
        ("train/loss", "min"),
        ("train/attract", "min"),
        ("val/recall@1/cos", "max"),
        ("val/l2/kmeans/nmi", "max"),
        ("val/knn/acc", "max"),
        ("null", "max"),
        ("val/separation", None),
    ],
)
def test_the_checkpoint_mode_follows_the_monitor(monitor: str, mode: str | None) -> None:
    cfg = composed(f"checkpoint.monitor={monitor}")
    assert OmegaConf.select(cfg, "checkpoint.mode") == mode


def test_every_experiment_keeps_the_checkpoint_mode_its_runs_recorded() -> None:
    # Finished runs are reused only while their resolved config is unchanged: before the mode followed the monitor
    # it was `max` everywhere, which each experiment's monitor (val/acc, val/recall@1/cos, or null) still gives.
    experiments = sorted((Path(CONFIG_DIR) / "experiment").rglob("*.yaml"))
    assert len(experiments) > 10
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        for path in experiments:
            name = str(path.relative_to(Path(CONFIG_DIR) / "experiment").with_suffix(""))
            cfg = compose("train", overrides=[f"experiment={name}", "debug=smoke"])
            assert OmegaConf.select(cfg, "checkpoint.mode") == "max", name


def test_a_loss_monitor_selects_its_lowest_epoch(train) -> None:
    # Before, checkpoint.monitor=val/loss kept `mode: max` and tested the epoch of the highest validation loss.
    import csv

    result = train(
        "dataset=iris",
        "loss=cce",
        "checkpoint.monitor=val/loss",
        "trainer.max_epochs=5",
        "evaluator=[classification]",
        "trainer.enable_progress_bar=false",
    )
    assert result.code == 0, result
    (record,) = train.outputs.rglob("metrics.json")
    payload = json.loads(record.read_text())
    assert payload["config"]["checkpoint"]["mode"] == "min"
    with open(record.parent / "csv" / "metrics.csv") as f:
        losses = {int(row["epoch"]): float(row["val/loss"]) for row in csv.DictReader(f) if row["val/loss"]}
    assert len(losses) == 5 and payload["best_epoch"] == min(losses, key=losses.get), (payload, losses)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["checkpoint.monitor=val/loss", "checkpoint.mode=max"],
            "checkpoint.mode=max with checkpoint.monitor="
            "val/loss, which is minimised: the checkpoint would keep its worst epoch; set checkpoint.mode=min, or "
            "leave checkpoint.mode out (it follows the monitor)",
        ),
        (
            ["checkpoint.monitor=val/acc", "checkpoint.mode=min"],
            "checkpoint.mode=min with checkpoint.monitor=val/acc, "
            "which is maximised: the checkpoint would keep its worst epoch; set checkpoint.mode=max, or leave "
            "checkpoint.mode out (it follows the monitor)",
        ),
        (
            ["checkpoint.monitor=val/separation"],
            "checkpoint.mode: which way checkpoint.monitor=val/separation "
            "improves is not known (it is not a loss, an accuracy, a recall, an NMI, ...); set checkpoint.mode=max or "
            "checkpoint.mode=min",
        ),
        # Said which way, a metric of one's own passes this check (and meets the next: it is never logged here).
        (
            ["checkpoint.monitor=val/separation", "checkpoint.mode=max"],
            "checkpoint.monitor: 'val/separation' is never logged by this run",
        ),
    ],
    ids=["max-of-a-loss", "min-of-an-accuracy", "unknown", "unknown-with-mode"],
)
def test_a_checkpoint_mode_that_is_not_the_monitors_way_is_refused_before_training(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    payload = run_in_process(tmp_path, *overrides)
    assert payload["status"] == "failed" and payload["error"].startswith(message), payload["error"]
    assert payload["timing"].get("fit_s") is None  # nothing trained
