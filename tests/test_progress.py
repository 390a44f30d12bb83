"""Progress lines on the long steps (issue item: k-means and t-SNE on large data, table building): each appears for
a large input and not for a small one. The thresholds are lowered by monkeypatching their module constants, so the
inputs stay a few hundred numbers.

k-means and t-SNE log through ``clusterable.logs``, whose console handler writes to the current ``sys.stdout``
(the ``clusterable`` logger does not propagate to the root logger, so ``caplog`` would not see them): captured
with ``capsys``. The table and site commands say their progress on stderr, their stdout unchanged."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from tables.rundirs import write_run
from torch import nn

from clusterable import rundir, site
from clusterable.contracts import EvalContext
from clusterable.evaluation import kmeans as kmeans_module
from clusterable.evaluation import latent_plot
from clusterable.evaluation.clustering import ClusterMetrics
from clusterable.evaluation.csrl import CSRLClustering
from clusterable.evaluation.kmeans import kmeans
from clusterable.evaluation.latent_plot import LatentPlot
from clusterable.tables import cli

SECONDS = r"\d+\.\d s"


@pytest.fixture(autouse=True)
def _one_thread():
    """Torch on one thread: the tensors are tiny, and a second thread on a busy 2-core machine only waits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def blobs(n: int = 120, k: int = 3, dim: int = 4) -> tuple[torch.Tensor, np.ndarray]:
    """(n, dim) points in k separated blobs and their (n,) labels."""
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(n) % k
    return torch.randn(k, dim, generator=g)[labels] * 20 + torch.randn(n, dim, generator=g), labels.numpy()


def context(x: torch.Tensor, y: np.ndarray) -> EvalContext:
    yt = torch.as_tensor(y)
    return EvalContext("test", {"inputs": x, "labels": yt}, nn.Identity(), x, x, yt)


# k-means (torch) ---------------------------------------------------------------------------------------------------


def test_torch_kmeans_on_large_data_says_its_start_restarts_and_iterations(capsys, monkeypatch) -> None:
    x, _ = blobs()
    quiet, _ = kmeans(x, 3, seed=0, n_init=2)
    assert capsys.readouterr().out == ""  # 120 x 4 in 3: far below KMEANS_PROGRESS_WORK
    monkeypatch.setattr(kmeans_module, "KMEANS_PROGRESS_WORK", 120 * 4 * 3)  # the size itself: large
    monkeypatch.setattr(kmeans_module, "KMEANS_PROGRESS_SECONDS", 0.0)  # an iteration line after every iteration
    loud, _ = kmeans(x, 3, seed=0, n_init=2)
    lines = capsys.readouterr().out.splitlines()
    assert torch.equal(loud, quiet)  # saying it changes nothing computed
    assert lines[0] == "kmeans: 120 x 4 (k=3) on cpu, 2 restarts of at most 20 iterations"
    restarts = [
        line
        for line in lines
        if re.fullmatch(rf"kmeans: restart \d/2 on 120 x 4 \(k=3\), \d+ iterations?, {SECONDS}", line)
    ]
    assert [r.split(" on ")[0] for r in restarts] == ["kmeans: restart 1/2", "kmeans: restart 2/2"]
    iterations = [line for line in lines if re.fullmatch(rf"kmeans: restart [12]/2, iteration \d+/20, {SECONDS}", line)]
    assert iterations and lines.index(iterations[0]) < lines.index(restarts[0])
    assert len(lines) == 1 + len(restarts) + len(iterations)


def test_torch_kmeans_says_nothing_just_below_the_threshold(capsys, monkeypatch) -> None:
    x, _ = blobs()
    monkeypatch.setattr(kmeans_module, "KMEANS_PROGRESS_WORK", 120 * 4 * 3 + 1)
    monkeypatch.setattr(kmeans_module, "KMEANS_PROGRESS_SECONDS", 0.0)
    kmeans(x, 3, seed=0, n_init=2)
    assert capsys.readouterr().out == ""


def test_iteration_lines_wait_for_the_interval(capsys, monkeypatch) -> None:
    x, _ = blobs()
    monkeypatch.setattr(kmeans_module, "KMEANS_PROGRESS_WORK", 1)
    kmeans(x, 3, seed=0)  # KMEANS_PROGRESS_SECONDS (10 s) never passes on 120 points: start and restart lines only
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].startswith("kmeans: restart 1/1 on 120 x 4 (k=3), ")


def test_cluster_metrics_torch_backend_says_it_too(capsys, monkeypatch) -> None:
    x, y = blobs()
    monkeypatch.setattr(kmeans_module, "KMEANS_PROGRESS_WORK", 1)
    ClusterMetrics(methods=["kmeans"], kmeans_backend="torch", kmeans_n_init=1)(x, torch.as_tensor(y), context(x, y))
    out = capsys.readouterr().out
    assert "kmeans: 120 x 4 (k=3) on cpu, 1 restart of at most 20 iterations\n" in out
    assert "kmeans: restart 1/1 on 120 x 4 (k=3), " in out


# k-means (scikit-learn) -------------------------------------------------------------------------------------------


def test_scikit_learn_kmeans_on_large_data_says_before_and_after(capsys, monkeypatch) -> None:
    x, y = blobs()
    metrics = ClusterMetrics(methods=["kmeans"], kmeans_n_init=2)
    quiet = metrics(x, torch.as_tensor(y), context(x, y))
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(kmeans_module, "KMEANS_PROGRESS_WORK", 120 * 4 * 3)
    assert metrics(x, torch.as_tensor(y), context(x, y)) == quiet
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "kmeans (scikit-learn): 120 x 4 (k=3), 2 restarts; this can take minutes"
    assert re.fullmatch(rf"kmeans \(scikit-learn\): 120 x 4 \(k=3\) done in {SECONDS}", lines[1])
    assert len(lines) == 2


def test_csrl_kmeans_says_it_for_the_representation_and_the_raw_inputs(capsys, monkeypatch) -> None:
    x, y = blobs()
    raw = torch.cat([x, x], dim=1)  # the split's inputs: another width than the representation
    ctx = EvalContext("test", {"inputs": raw, "labels": torch.as_tensor(y)}, nn.Identity(), x, x, torch.as_tensor(y))
    CSRLClustering(kmeans_n_init=1)(x, torch.as_tensor(y), ctx)
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(kmeans_module, "KMEANS_PROGRESS_WORK", 1)
    CSRLClustering(kmeans_n_init=1)(x, torch.as_tensor(y), ctx)
    starts = [line for line in capsys.readouterr().out.splitlines() if line.endswith("this can take minutes")]
    assert starts == [
        "kmeans (scikit-learn): 120 x 4 (k=3), 1 restart; this can take minutes",
        "kmeans (scikit-learn): 120 x 8 (k=3), 1 restart; this can take minutes",
    ]


# t-SNE ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [40, 41])
def test_tsne_on_large_data_says_before_and_after(capsys, monkeypatch, threshold) -> None:
    x, y = blobs(40, 2, dim=5)
    monkeypatch.setattr(latent_plot, "TSNE_PROGRESS_ROWS", threshold)
    LatentPlot(method="tsne")(x, torch.as_tensor(y), context(x, y))
    lines = capsys.readouterr().out.splitlines()
    if threshold > 40:  # 40 rows, below it
        assert lines == []
        return
    assert lines[0] == "t-SNE: 40 x 5 to 2-D; this can take minutes"
    assert re.fullmatch(rf"t-SNE: 40 x 5 done in {SECONDS}", lines[1]) and len(lines) == 2


# table building ---------------------------------------------------------------------------------------------------


def sweep(outputs: Path, runs: int) -> None:
    """``runs`` runs named myproject, seeds 0.. of one setting."""
    for seed in range(runs):
        params = {"loss": "supcon", "loss.temperature": 0.5, "seed": seed}
        write_run(outputs, "myproject", params, {"test/acc": 0.9 + seed / 100}, config={"optimized_metric": "test/acc"})


@pytest.mark.parametrize(
    ("runs", "every", "said"),
    [
        (5, 2, ["read 2 of 5 runs", "read 4 of 5 runs", "read 5 of 5 runs"]),
        (4, 2, ["read 2 of 4 runs", "read 4 of 4 runs"]),  # the last line once
        (4, 4, []),  # not more than READ_PROGRESS_EVERY: read in a blink
    ],
)
def test_find_runs_says_its_progress_through_many_records(tmp_path, monkeypatch, runs, every, said) -> None:
    sweep(tmp_path, runs)
    monkeypatch.setattr(rundir, "READ_PROGRESS_EVERY", every)
    lines: list[str] = []
    assert len(rundir.find_runs(tmp_path, lines.append)) == runs
    assert lines == said
    assert len(rundir.find_runs(tmp_path)) == runs  # no ``say``: nothing to say it to


def test_tables_command_says_progress_on_stderr_and_keeps_stdout(tmp_path, capsys, monkeypatch) -> None:
    sweep(tmp_path, 3)
    argv = ["--runs", "myproject", "--by", "loss.temperature", "--metrics", "test/acc", "--outputs", str(tmp_path)]
    assert cli.main(argv) == 0
    quiet_out, quiet_err = capsys.readouterr()
    assert quiet_err == ""
    monkeypatch.setattr(rundir, "READ_PROGRESS_EVERY", 2)
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert out == quiet_out  # the table, as scripts read it
    assert err.splitlines() == ["tables: read 2 of 3 runs", "tables: read 3 of 3 runs"]


def test_a_paper_table_says_its_reading_too(tmp_path, capsys, monkeypatch) -> None:
    sweep(tmp_path, 3)  # none of them corel/table1's: read, then no runs
    monkeypatch.setattr(rundir, "READ_PROGRESS_EVERY", 2)
    assert cli.main(["corel/table1", "--outputs", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[:2] == ["tables: read 2 of 3 runs", "tables: read 3 of 3 runs"]
    assert lines[2].startswith("no runs of experiment 'corel/table1' under ")


def test_site_says_its_reading_as_its_other_lines(tmp_path, monkeypatch) -> None:
    sweep(tmp_path / "outputs", 3)
    monkeypatch.setattr(rundir, "READ_PROGRESS_EVERY", 2)
    progress = io.StringIO()
    site.build_site(tmp_path / "outputs", tmp_path / "site", progress=progress)
    assert progress.getvalue().splitlines()[:3] == [
        "site: read 2 of 3 runs",
        "site: read 3 of 3 runs",
        f"site: 3 runs of 1 experiment under {tmp_path / 'outputs'}/",
    ]
