"""Law et al. 2017's (DSCL) Tables 1-3 and our digits table on hand-made runs: the published numbers beside ours,
cited rows marked, rows not run, the architecture, and the paper's claims held, failed or uncheckable."""

from __future__ import annotations

from pathlib import Path

import pytest
from scipy import stats

from clusterable.tables import dscl
from clusterable.tables.common import published
from clusterable.tables.report import load_runs, p_text

from .rundirs import write_run

GOOGLENET = {"_target_": "clusterable.models.backbones.GoogLeNet", "weights": "imagenet"}
FFNN = {"_target_": "clusterable.models.FFNN", "hidden": [256, 128]}
# (NMI, R@1) as fractions per row and SC mode (True: with SC). Chosen so that every claim of the paper holds but
# one: end-to-end beats last-layer on NMI with SC (60 vs 58), while last-layer keeps the better R@1 (56 vs 55).
NUMBERS = {
    "vanilla": {True: (0.40, 0.30), False: (0.38, 0.29)},
    "softmax": {True: (0.50, 0.45), False: (0.49, 0.44)},
    "end_to_end": {True: (0.60, 0.55), False: (0.57, 0.52)},
    "last_layer": {True: (0.58, 0.56), False: (0.55, 0.53)},
}


def metrics_of(numbers: dict[bool, tuple[float, float]], ks: list[int], seed: int) -> dict[str, float]:
    """Both evaluations' metrics as the DSCL runs report them; R@K = R@1 + (K - 1) / 1000, seed 1 is 0.2 above."""
    out = {}
    for sc, (nmi, r1) in numbers.items():
        out[dscl.nmi_key(sc)] = nmi + seed * 0.002
        for k in ks:
            out[dscl.recall_key(k, sc)] = r1 + (k - 1) / 1000 + seed * 0.002
    return out


# What each dscl_row preset makes a run record (the tables tell the row by it): the loss it selects, trainable and
# trainer.max_steps.
ROW_SETTINGS = {
    "vanilla": ("dscl", "all", 0),
    "softmax": ("ce", "all", 100),
    "end_to_end": ("dscl", "all", 100),
    "last_layer": ("dscl", "embedding_layer", 200),
}


def write_row(
    outputs: Path,
    experiment: str,
    row: str,
    seed: int,
    metrics: dict | None,
    *,
    model: dict,
    dataset: str,
    loss: str | None = None,
    trainable: str | None = None,
) -> Path:
    """One run of ``dscl_row=<row>`` as it records itself; ``loss`` / ``trainable`` replace the preset's."""
    preset_loss, preset_trainable, steps = ROW_SETTINGS[row]
    config = {"model": model, "trainable": trainable or preset_trainable, "trainer": {"max_steps": steps}}
    return write_run(
        outputs,
        experiment,
        {"dscl_row": row, "seed": seed},
        metrics,
        config=config,
        choices={"dataset": dataset, "loss": loss or preset_loss},
    )


def write_rows(
    outputs: Path, experiment: str, rows: dict, *, model: dict, dataset: str, ks: list[int], seeds=(0, 1)
) -> None:
    for row, numbers in rows.items():
        for seed in seeds:
            write_row(outputs, experiment, row, seed, metrics_of(numbers, ks, seed), model=model, dataset=dataset)


def by_label(table) -> dict[tuple[str, str], list[str]]:
    return {(r[0], r[1]): r for r in table.rows}


def test_published_numbers_are_the_papers_three_tables():
    pub = published("dscl")
    for name, ks in (("table1", [1, 2, 4, 8]), ("table2", [1, 2, 4, 8]), ("table3", [1, 10, 100])):
        assert pub["ks"][name] == ks
        rows = pub[name]
        cited = [r["method"] for r in rows if r.get("cited")]
        assert cited == ["Triplet semihard", "Lifted struct", "Npairs", "NMI-based"]
        own = sorted((r["row"], r["sc"]) for r in rows if not r.get("cited"))
        assert own == sorted((row, sc) for row in dscl.ROWS for sc in (True, False))  # each exactly once
        assert all(len(r["values"]) == 1 + len(ks) for r in rows)

    def values(name: str, row: str, sc: bool) -> list[float]:
        return next(r["values"] for r in pub[name] if r.get("row") == row and r.get("sc") == sc)

    assert values("table1", "vanilla", True) == [53.53, 42.56, 55.55, 67.86, 78.39]
    assert values("table2", "last_layer", True)[1] == 73.07
    assert values("table3", "end_to_end", False) == [88.70, 64.52, 81.53, 92.35]
    assert next(r for r in pub["table3"] if r["method"] == "NMI-based")["values"][0] == 89.48


def test_table1_puts_ours_beside_the_papers_and_cited_rows(tmp_path):
    write_rows(tmp_path, "dscl/table1", NUMBERS, model=GOOGLENET, dataset="cub200", ks=[1, 2, 4, 8])
    runs, _ = load_runs(tmp_path, "dscl/table1")
    table = dscl.table1(runs, tmp_path)
    assert table.header == ["Method", "SC", "Arch", "NMI", "R@1", "R@2", "R@4", "R@8"]
    rows = by_label(table)
    assert [r[0] for r in table.rows[:4]] == [
        "Triplet semihard (cited)",
        "Lifted struct (cited)",
        "Npairs (cited)",
        "NMI-based (cited)",
    ]
    assert table.rows[3][3:] == ["59.23", "48.18", "61.44", "71.83", "81.92"]
    # The paper's row, then ours, per row and SC mode.
    paper = rows[("DSCL last layer (paper)", "with SC")]
    assert paper[2:] == ["BN-Inception (ImageNet)", "59.16", "53.22", "66.09", "76.70", "85.33"]
    ours = rows[("DSCL end-to-end (ours)", "with SC")]
    # Seeds 0.600 and 0.602: mean 60.10 %, std 0.14; R@8 = 0.55 + 0.007 (+ 0.002).
    assert ours[2:] == [
        "GoogLeNet (ImageNet)",
        "60.10 ± 0.14",
        "55.10 ± 0.14",
        "55.20 ± 0.14",
        "55.40 ± 0.14",
        "55.80 ± 0.14",
    ]
    assert rows[("Vanilla network (ours)", "without SC")][3] == "38.10 ± 0.14"  # k-means NMI, not SC's
    labels = [r[0] for r in table.rows]
    assert labels.index("Softmax regression (paper)") + 1 == labels.index("Softmax regression (ours)")
    assert len(table.rows) == 4 + 4 * 2 * 2
    assert any("rows of T" in n and "our assumption" in n for n in table.notes)
    assert any("Our architecture: GoogLeNet (ImageNet)" in n for n in table.notes)

    softmax, sc_vs_kmeans, last_vs_end, vanilla = table.claims
    # Each pair is Welch's t over the two seeds (0.2 points apart), the gaps 1 point or more: each is shown.
    assert softmax.holds is True and softmax.detail.startswith("Welch's t over seeds, one-sided, α = 0.05; ")
    assert softmax.detail.endswith(" and 5 more (8 of 8 hold)")
    assert sc_vs_kmeans.holds is True and vanilla.holds is True
    assert last_vs_end.holds is False and last_vs_end.verdict == "reversed"
    nmi = stats.ttest_ind([0.58, 0.582], [0.60, 0.602], equal_var=False, alternative="less").pvalue
    r1 = stats.ttest_ind([0.56, 0.562], [0.55, 0.552], equal_var=False, alternative="greater").pvalue
    where = "DSCL last layer vs DSCL end-to-end, with SC"
    assert last_vs_end.detail == (
        f"Welch's t over seeds, one-sided, α = 0.05; difference (p): {where}, NMI -2.00 (reversed, {p_text(nmi)}); "
        f"{where}, R@1 +1.00 ({p_text(r1)})"
    )
    markdown = table.markdown()
    assert "- [reversed] Fine-tuning only the last layer" in markdown
    assert "| DSCL last layer (paper) | with SC | BN-Inception (ImageNet) | 59.16 |" in markdown


def test_missing_rows_read_not_run_and_their_claims_cannot_be_checked(tmp_path):
    dscl_only = {row: NUMBERS[row] for row in ("end_to_end", "last_layer")}
    bninception = {"_target_": "clusterable.models.backbones.BNInceptionEncoder", "weights": None}
    write_rows(tmp_path, "dscl/table1", dscl_only, model=bninception, dataset="cub200", ks=[1, 2, 4, 8])
    # A last-layer seed that failed, and a run on another dataset (an override of the experiment's): neither counts.
    write_row(tmp_path, "dscl/table1", "last_layer", 2, None, model=bninception, dataset="cub200")
    write_rows(
        tmp_path,
        "dscl/table1",
        {"softmax": NUMBERS["softmax"]},
        model=bninception,
        dataset="cars196",
        ks=[1, 2, 4, 8],
        seeds=(5,),
    )
    runs, _ = load_runs(tmp_path, "dscl/table1")
    table = dscl.table1(runs, tmp_path)
    rows = by_label(table)
    for row in ("Vanilla network", "Softmax regression"):
        for sc in ("with SC", "without SC"):
            assert rows[(f"{row} (ours)", sc)][2:] == ["–"] + ["not run"] * 5
            assert rows[(f"{row} (paper)", sc)][3] != "not run"  # the paper's numbers stay
    assert rows[("DSCL last layer (ours)", "with SC")][2:4] == [
        "BN-Inception (random init)",
        "58.10 ± 0.14 (1 failed)",
    ]
    assert any("1 of 6 runs left out" in n for n in table.notes)
    softmax, sc_vs_kmeans, last_vs_end, vanilla = table.claims
    assert softmax.holds is None and vanilla.holds is None and softmax.detail == "numbers missing"
    assert sc_vs_kmeans.holds is True and last_vs_end.holds is False
    assert "- [cannot check] DSCL beats softmax regression" in table.markdown()


def test_a_row_is_what_the_run_ran_not_the_preset_it_named(tmp_path):
    # The end_to_end preset with only the embedding layer trainable is a last-layer run; the vanilla preset with
    # training steps and a loss the paper has no row for is none; the rows come from the runs' recorded settings.
    write_row(
        tmp_path,
        "dscl/digits",
        "end_to_end",
        0,
        metrics_of(NUMBERS["last_layer"], dscl.DIGITS_KS, 0),
        model=FFNN,
        dataset="digits_zeroshot",
        trainable="embedding_layer",
    )
    path = write_row(
        tmp_path,
        "dscl/digits",
        "softmax",
        0,
        metrics_of(NUMBERS["softmax"], dscl.DIGITS_KS, 0),
        model=FFNN,
        dataset="digits_zeroshot",
        loss="cce",
    )
    runs, _ = load_runs(tmp_path, "dscl/digits")
    assert sorted(dscl.row_of(r) or "none" for r in runs) == ["last_layer", "none"], path
    rows = by_label(dscl.digits(runs, tmp_path))
    assert rows[("DSCL last layer (ours)", "with SC")][3] == "58.00 ± 0.00"
    assert rows[("DSCL end-to-end (ours)", "with SC")][3] == "not run"
    assert rows[("Softmax regression (ours)", "with SC")][3] == "not run"


def test_digits_has_our_rows_only_and_no_last_layer_claim(tmp_path):
    numbers = {**NUMBERS, "last_layer": {True: (0.62, 0.58), False: (0.50, 0.56)}}
    numbers["softmax"] = {True: (0.65, 0.40), False: (0.45, 0.40)}  # softmax's SC NMI beats both DSCL rows'
    write_rows(tmp_path, "dscl/digits", numbers, model=FFNN, dataset="digits_zeroshot", ks=dscl.DIGITS_KS)
    runs, _ = load_runs(tmp_path, "dscl/digits")
    table = dscl.digits(runs, tmp_path)
    assert table.header[3:] == ["NMI", "R@1", "R@2", "R@4", "R@8"]
    assert [r[0] for r in table.rows] == [f"{name} (ours)" for name in dscl.ROWS.values() for _ in range(2)]
    assert all(r[2] == "FFNN (random init)" for r in table.rows)
    assert by_label(table)[("DSCL last layer (ours)", "without SC")][3] == "50.10 ± 0.14"
    assert any("digits 0-4" in n and "untrained network" in n for n in table.notes)
    texts = [c.text for c in table.claims]
    assert len(texts) == 3 and not any("last layer" in t for t in texts)  # the paper claims it on CUB and Cars
    softmax, sc_vs_kmeans, vanilla = table.claims
    # The two reversed pairs are named first, each with its p.
    assert softmax.verdict == "reversed" and softmax.detail.count("reversed, p") == 2
    shown = softmax.detail.split("difference (p): ")[1].split("; ")
    assert all("with SC, NMI" in pair and "reversed, p" in pair for pair in shown[:2])
    assert sc_vs_kmeans.holds is True and vanilla.holds is True


def test_table3_has_the_products_ks_and_no_last_layer_claim():
    table = dscl.table3([], Path("unused"))
    assert table.header[3:] == ["NMI", "R@1", "R@10", "R@100"]
    assert "Stanford Online Products" in table.title and "Table 3" in table.title
    assert [c.holds for c in table.claims] == [None, None, None]


def test_make_tables_finds_every_dscl_table(tmp_path, make_tables):
    assert dscl.SOURCES == {name: f"dscl/{name}" for name in ("table1", "table2", "table3", "digits")}
    write_rows(tmp_path, "dscl/table2", NUMBERS, model=GOOGLENET, dataset="cars196", ks=[1, 2, 4, 8])
    code, out, err = make_tables("dscl/table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "### Law et al. 2017 (DSCL), Table 2: NMI and Recall@K (%) on Cars196 — full runs" in out
    assert "| Npairs (cited) |  |  | 57.79 |" in out and "8 runs (0 failed) of dscl/table2 [full]" in out
    assert (tmp_path / "tables" / "dscl_table2.md").is_file()
    code, _, err = make_tables("dscl/digits", "--outputs", str(tmp_path))
    assert code == 1 and "python train.py -m experiment=dscl/digits" in err
    with pytest.raises(SystemExit) as exc:
        make_tables("dscl/table4", "--outputs", str(tmp_path))
    assert exc.value.code == 2


@pytest.mark.slow
@pytest.mark.parametrize("table", ["table1", "table3"])
def test_smoke_pipeline_fills_every_row(train, make_tables, table):
    # Fake images, random GoogLeNet, a few steps: every row trains (or not: vanilla) and is scored with and
    # without SC. table3 adds SOP's class-balanced batches and the torch k-means.
    result = train("-m", f"experiment=dscl/{table}", "debug=smoke", "hydra.sweeper.params.seed=0", "torch_threads=2")
    assert result.code == 0 and "4 ok, 0 failed" in result.out, result.out[-2000:] + result.err
    code, out, err = make_tables(f"dscl/{table}", "--outputs", str(train.outputs))
    assert code == 0, err
    ours = [line for line in out.splitlines() if line.startswith("|") and "(ours)" in line]
    assert len(ours) == 8 and all("not run" not in line and "failed" not in line for line in ours)
    assert "GoogLeNet (random init)" in out and "SMOKE" in out


def test_the_digits_rows_run_for_real(train, make_tables):
    # The README's digits table, one seed and fewer steps: every row is a real run on scikit-learn's digits.
    result = train(
        "-m",
        "experiment=dscl/digits",
        "hydra.sweeper.params.seed=0",
        "protocol.steps.end_to_end=30",
        "protocol.steps.last_layer=30",
        "protocol.steps.softmax=30",
        "torch_threads=1",
    )
    assert result.code == 0 and "4 ok, 0 failed" in result.out, result.out[-2000:] + result.err
    code, out, err = make_tables("dscl/digits", "--outputs", str(train.outputs))
    assert code == 0, err
    assert "full runs" in out and "FFNN (random init)" in out
    rows = [line for line in out.splitlines() if line.startswith("|") and "(ours)" in line]
    assert len(rows) == 8 and all(line.count("±") == 5 for line in rows)
