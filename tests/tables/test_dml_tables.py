"""Boudiaf et al.'s Table 4 and the one-recipe metric-learning table on hand-made runs (numbers, layout, claims),
and both experiments' smoke pipelines end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
from scipy import stats

from clusterable.tables import boudiaf, dml
from clusterable.tables.report import load_runs, p_text

from .rundirs import write_run

KS = {
    "cub200": [1, 2, 4, 8, 16, 32],
    "cars196": [1, 2, 4, 8, 16, 32],
    "sop": [1, 10, 100, 1000],
    "inshop": [1, 10, 20, 30, 40, 50],
}


def table4_runs(tmp_path: Path, r1: dict[str, tuple[float, float]]) -> list:
    """Two seeds per dataset; R@1 (l2, cos) as given, R@K = R@1 + K / 1000 otherwise."""
    for dataset, (l2, cos) in r1.items():
        for seed in (0, 1):
            metrics = {}
            for dist, base in (("l2", l2), ("cos", cos)):
                for k in KS[dataset]:
                    metrics[f"test/recall@{k}/{dist}"] = base + (k - 1) / 1000 + seed * 0.002
            config = {"model": {"_target_": "clusterable.models.backbones.ResNet50", "weights": "imagenet"}}
            write_run(
                tmp_path,
                "boudiaf/table4",
                {"dataset": dataset, "seed": seed},
                metrics,
                config=config,
                choices={"model": "resnet50", "loss": "ce"},
            )
    runs, _ = load_runs(tmp_path, "boudiaf/table4")
    return runs


def test_table4_puts_ours_beside_the_papers_and_cited_rows(tmp_path):
    runs = table4_runs(
        tmp_path, {"cub200": (0.676, 0.692), "cars196": (0.891, 0.893), "sop": (0.808, 0.811), "inshop": (0.906, 0.906)}
    )
    table = boudiaf.table4(runs, tmp_path)
    ours = [r for r in table.rows if r[1] == "Cross-Entropy (ours)"]
    assert len(ours) == 8 and all(r[3] == "ResNet-50" for r in ours)
    cub_cos = next(r for r in ours if r[0] == "CUB-200-2011" and r[2] == "cos")
    assert cub_cos[4] == "69.3 ± 0.1"  # mean of 0.692 and 0.694, std 0.0014, in %
    cited = [r for r in table.rows if r[1].endswith("(cited)")]
    assert any(r[1] == "Multi-Similarity (cited)" and r[4] == "65.7" for r in cited)
    paper = [r for r in table.rows if r[1] == "Cross-Entropy (paper)" and r[0] == "In-Shop"]
    assert [r[4] for r in paper] == ["90.6", "90.6"]
    # Ours equal the paper's CE rows. Cosine "at least matches" ℓ2 is tested as "above" (Welch's t over the two
    # seeds): equal on In-Shop, as in the paper, it is not shown (t = 0: p = 0.5); the cited numbers are beaten,
    # and Cars is within a point (the one-sample t of our seeds against each number).
    verdicts = [c.verdict for c in table.claims]
    assert verdicts == ["not shown (p = 0.5)", "holds", "holds"]
    assert "In-Shop +0.0 (p = 0.5)" in table.claims[0].detail
    assert table.claims[1].detail.startswith("one-sample t over seeds against the number, one-sided, α = 0.05; ")


def test_table4_claims_fail_when_ours_fall_short(tmp_path):
    runs = table4_runs(
        tmp_path, {"cub200": (0.70, 0.60), "cars196": (0.80, 0.85), "sop": (0.81, 0.812), "inshop": (0.90, 0.91)}
    )
    cos_vs_l2, beats_cited, cars = boudiaf.table4(runs, tmp_path).claims
    assert [c.verdict for c in (cos_vs_l2, beats_cited, cars)] == ["reversed"] * 3
    assert cos_vs_l2.holds is False and "CUB-200-2011" in cos_vs_l2.detail
    assert beats_cited.holds is False and "CUB-200-2011" in beats_cited.detail  # 60.1 < MS's 65.9 (D&C)
    assert cars.holds is False  # 85.1 is more than a point below NormSoftmax's 89.3


def test_table4_without_runs_says_not_run_and_cannot_check(tmp_path):
    table = boudiaf.table4([], tmp_path)
    assert all(r[4] == "not run" for r in table.rows if r[1] == "Cross-Entropy (ours)")
    assert [c.holds for c in table.claims] == [None, None, None]


def test_losses_table_rows_and_the_ce_claim(tmp_path):
    for loss, r1 in (("ce", 0.8), ("triplet", 0.7), ("contrastive", 0.75), ("proxy_anchor", 0.85)):
        for seed in range(3):
            metrics = {"test/recall@1/cos": r1 + seed / 100, "test/map@r/cos": r1 / 2, "test/kmeans/nmi": 0.5}
            write_run(tmp_path, "dml/losses", {"dataset": "digits_zeroshot", "loss": loss, "seed": seed}, metrics)
    runs, _ = load_runs(tmp_path, "dml/losses")
    table = dml.losses(runs, tmp_path)
    rows = {r[1]: r for r in table.rows}
    assert rows["Cross-entropy (Boudiaf)"][2:] == ["81.0 ± 1.0", "40.0 ± 0.0", "50.0 ± 0.0", "3"]
    assert rows["SupCon"][2] == "missing" and rows["SupCon"][-1] == "0"
    (claim,) = table.claims
    # Checked on the pairwise losses that have numbers (CE 81.0 vs triplet 71.0, contrastive 76.0); the rest named.
    ce = [0.80, 0.81, 0.82]

    def p(other: float) -> str:
        values = [other + seed / 100 for seed in range(3)]
        return p_text(stats.ttest_ind(ce, values, equal_var=False, alternative="greater").pvalue)

    assert claim.holds is True and claim.detail == (
        f"Welch's t over seeds, one-sided, α = 0.05; difference (p): digits_zeroshot: vs Contrastive +5.0 ({p(0.75)}); "
        f"digits_zeroshot: vs Triplet (semi-hard) +10.0 ({p(0.7)}); checked on 2 of 5, no numbers for digits_zeroshot: "
        "vs Multi-Similarity, digits_zeroshot: vs SupCon, digits_zeroshot: vs NCA"
    )


def test_dml_losses_runs_for_real_on_digits_zeroshot(train, make_tables):
    # Three losses, one seed, a few epochs: the real data path (retrieval, clustering, the table) end to end.
    result = train(
        "-m",
        "experiment=dml/losses",
        "loss=ce,triplet,proxy_anchor",
        "hydra.sweeper.params.seed=0",
        "trainer.max_epochs=3",
        "torch_threads=1",
    )
    assert result.code == 0, result.err
    code, out, err = make_tables("dml/losses", "--outputs", str(train.outputs))
    assert code == 0, err
    assert "— full runs" in out and "3 runs (0 failed)" in out
    rows = {line.split(" | ")[1]: line for line in out.splitlines() if line.startswith("| digits_zeroshot")}
    for name in ("Cross-entropy (Boudiaf)", "Triplet (semi-hard)", "ProxyAnchor"):
        assert rows[name].count("±") == 3, rows[name]
    r1 = float(rows["Cross-entropy (Boudiaf)"].split(" | ")[2].split(" ±")[0])
    assert r1 > 50  # 5 unseen digits: chance is ~20%


@pytest.mark.slow
def test_boudiaf_table4_smoke_pipeline_on_one_dataset(train, make_tables):
    result = train(
        "-m",
        "experiment=boudiaf/table4",
        "debug=smoke",
        "dataset=cub200",
        "hydra.sweeper.params.seed=0",
        "torch_threads=2",
    )
    assert result.code == 0, result.err
    code, out, err = make_tables("boudiaf/table4", "--outputs", str(train.outputs))
    assert code == 0, err
    ours = [line for line in out.splitlines() if "Cross-Entropy (ours)" in line and "CUB" in line]
    assert len(ours) == 2 and all(line.count("±") == 6 for line in ours)
    assert "ResNet-50 (random init)" in ours[0] and "SMOKE" in out
