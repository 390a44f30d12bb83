"""`train.py` end to end as a user runs it: the default run, bad input, a forced NaN, and resumable sweeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FAST = ["trainer.max_epochs=2", "trainer.enable_progress_bar=false"]


def metrics_files(outputs: Path) -> list[Path]:
    return sorted(outputs.rglob("metrics.json"))


def test_default_run_end_to_end(cli):
    proc = cli("train.py")  # the README's first command: digits, FFNN, Gaussian-COREL, CPU
    assert "run: ok" in proc.stdout and "test/acc" in proc.stdout and "run dir:" in proc.stdout
    (path,) = metrics_files(cli.outputs)
    m = json.loads(path.read_text())
    assert m["status"] == "ok" and m["error"] is None and m["seed"] == 0
    assert m["metrics"]["test/acc"] > 0.85, m["metrics"]  # digits are easy; a broken pipeline is not
    for key in ("test/kmeans/ari", "test/gmm/nmi", "test/kmeans/silhouette", "val/acc", "model/params"):
        assert key in m["metrics"]
    assert 0 <= m["best_epoch"] < 30 and m["timing"]["fit_s"] > 0
    run_dir = path.parent
    assert (run_dir / ".hydra" / "config.yaml").exists() and (run_dir / "csv" / "metrics.csv").exists()
    assert (run_dir / "checkpoints" / "best.ckpt").exists()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("loss.lam=1.5", "loss.lam must be in [0, 1]"),
        ("loss.gamma=0", "loss.gamma must be > 0"),
        ("optimizer.lr=0", "optimizer.lr must be > 0"),
        ("dataset.batch_size=0", "dataset.batch_size must be a positive integer"),
        ("trainer.max_epochs=0", "trainer.max_epochs must be an integer >= 1"),
        ("model.hidden=[500,0]", "model.hidden must be a non-empty list of positive integers"),
    ],
)
def test_invalid_values_fail_before_training(cli, override, message):
    proc = cli("train.py", *FAST, override, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr  # one short message, not a stack trace
    assert "Epoch 0" not in proc.stdout + proc.stderr
    for path in metrics_files(cli.outputs):
        assert json.loads(path.read_text())["status"] == "failed"


def test_unknown_option_lists_available_ones(cli):
    proc = cli("train.py", "loss=no_such_loss", check=False)
    assert proc.returncode != 0
    assert "Available options in 'loss'" in proc.stderr and "gaussian_corel" in proc.stderr
    assert not metrics_files(cli.outputs)


def test_missing_dataset_names_files_and_folder(cli, tmp_path):
    proc = cli("train.py", "dataset=mnist", "dataset.reader.download=false", *FAST, check=False)
    assert proc.returncode != 0
    assert "train-images-idx3-ubyte" in proc.stderr and "dataset.root" in proc.stderr
    assert str(tmp_path / "outputs" / "data" / "mnist") in proc.stderr
    for path in metrics_files(cli.outputs):
        assert json.loads(path.read_text())["status"] == "failed"


def test_nan_loss_fails_the_run_and_the_sweep_goes_on(cli):
    nan_loss = Path(__file__).parent / "helpers" / "conf"
    proc = cli(
        "train.py", "-m", f"hydra.searchpath=[file://{nan_loss}]", "loss=nan_after,cce", "name=nan", *FAST
    )
    runs = {p.parent.name.split(",")[0]: json.loads(p.read_text()) for p in metrics_files(cli.outputs)}
    assert set(runs) == {"loss=nan_after", "loss=cce"}, runs.keys()
    failed, ok = runs["loss=nan_after"], runs["loss=cce"]
    assert failed["status"] == "failed" and "nan" in failed["error"] and failed["failed_epoch"] == 1
    assert ok["status"] == "ok"
    assert "run failed" in proc.stdout + proc.stderr


def test_rerunning_a_sweep_skips_finished_runs(cli):
    args = ["-m", "loss=cce,cosine_corel", "name=resume", "dataset.source=fake", *FAST]
    cli("train.py", *args)
    files = metrics_files(cli.outputs)
    assert len(files) == 2
    before = {p: (p.stat().st_mtime_ns, p.read_text()) for p in files}
    ckpts = {p: p.stat().st_mtime_ns for p in cli.outputs.rglob("*.ckpt")}
    proc = cli("train.py", *args)
    assert proc.stdout.count("metrics.json says ok") == 2
    assert {p: (p.stat().st_mtime_ns, p.read_text()) for p in files} == before
    assert {p: p.stat().st_mtime_ns for p in cli.outputs.rglob("*.ckpt")} == ckpts


def test_wandb_runs_are_closed_after_every_job_even_a_failed_one(cli):
    # A W&B run left open would be reused by the next job of the sweep (one offline run folder for both).
    nan_loss = Path(__file__).parent / "helpers" / "conf"
    cli("train.py", "-m", f"hydra.searchpath=[file://{nan_loss}]", "loss=nan_after,cce", "logger=wandb",
        "name=wandb", "dataset.source=fake", *FAST)  # fmt: skip
    folders = {}
    for path in metrics_files(cli.outputs):
        offline = list((path.parent / "wandb").glob("offline-run-*"))
        assert len(offline) == 1, path.parent
        folders[json.loads(path.read_text())["status"]] = offline[0].name
    assert set(folders) == {"ok", "failed"} and len(set(folders.values())) == 2
