"""The autoencoder pool's table logic (CSRL Figs. 2, 7, 8) on runs built in memory: the lr kept per (dataset,
model), k-means on the raw data counted once per seed, the task told by the data, the digits stand-in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterable.tables.csrl import ae_results, kmeans_raw, select_lr
from clusterable.tables.csrl.autoencoders import CLUSTERING, DENOISING, task
from clusterable.tables.report import Run


def run(choices: dict[str, str], config: dict[str, Any], metrics: dict[str, float], ok: bool = True) -> Run:
    """A run as it records itself (choices, resolved config), with no override strings."""
    payload = {"status": "ok" if ok else "failed", "metrics": metrics, "choices": choices, "config": config}
    return Run(Path("."), {}, payload)


def ae1(lr: float, seed: int, metrics: dict[str, float], ok: bool = True, denoise: bool = False) -> Run:
    config = {"optimizer": {"lr": lr}, "seed": seed, "dataset": {"reader": {"denoise": denoise}}}
    return run({"dataset": "d", "loss": "ae1"}, config, metrics, ok)


def test_lr_selection_keeps_the_best_mean_and_kmeans_counts_each_seed_once():
    runs = [ae1(lr, s, {"test/ari": v}) for lr, vals in ((0.1, (0.2, 0.4)), (0.01, (0.5, 0.5)))
            for s, v in enumerate(vals)]  # fmt: skip
    runs.append(ae1(0.001, 0, {}, ok=False))
    chosen = select_lr(runs, "test/ari", "max")[("d", "ae1")]
    assert (chosen.lr, chosen.cell.mean) == ("0.01", 0.5)  # the recorded lr, spelled as its override
    assert select_lr(runs, "test/ari", "min")[("d", "ae1")].lr == "0.1"
    pool = [run({"dataset": "d", "loss": m}, {"seed": s}, {"test/kmeans_raw/ari": v})
            for m in ("ae1", "ptae") for s, v in ((0, 0.6), (1, 0.8))]  # fmt: skip
    assert kmeans_raw(pool)["d"].values == [0.6, 0.8]


def test_the_task_is_what_the_data_were():
    assert task(ae1(0.1, 0, {}, denoise=True)) == DENOISING
    assert task(ae1(0.1, 0, {})) == CLUSTERING and task(run({}, {}, {})) == CLUSTERING
    chosen = select_lr([ae1(0.1, 0, {"train/loss": 2.0}, denoise=True), ae1(0.01, 0, {"train/loss": 1.0})],
                       "train/loss", "min")  # fmt: skip
    assert chosen[("d", "ae1")].lr == "0.01"
    res = ae_results(
        [ae1(0.1, 0, {"train/loss": 2.0}, denoise=True), ae1(0.01, 0, {"train/loss": 1.0})], ("d",)
    )
    assert res.loss[("d", "ae1")].lr == "0.1"  # the de-noising runs alone choose the de-noising lr


def test_missing_mnist_is_replaced_by_the_digits_stand_in_or_reported():
    runs = [run({"dataset": "digits_subset", "loss": "ae1"}, {"optimizer": {"lr": 0.1}}, {})]
    res = ae_results(runs, ("parallel_lines", "mnist_subset"))
    assert res.order == ["parallel_lines", "digits_subset"]
    assert res.missing == ["parallel_lines"] and res.datasets == ["digits_subset"]
