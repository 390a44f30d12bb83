"""A metric re-scored after training (``clusterable.rescore``) counts as made with the evaluator settings it was
re-scored with: a cell never pools it with the same metric made otherwise (one line, exit 2, naming the setting,
the metric and the run), a cell re-scored all alike pools and the table's note names the settings, copies of one
run re-scored differently are refused, and the metrics a re-scoring did not touch pool as before."""

from __future__ import annotations

import shutil
from pathlib import Path

from clusterable.record import RunRecord
from clusterable.tables.report import Run, config_differences, load_runs
from tables.rundirs import write_run

# The evaluator node a digits_table2 run records (its experiment's [classification, clustering]).
CLUSTERING = {
    "_target_": "clusterable.evaluation.clustering.ClusterMetrics",
    "methods": ["kmeans", "gmm"],
    "num_clusters": None,
    "silhouette_sample": 2000,
    "kmeans_n_init": 3,
}
EVALUATOR = {"classification": {"_partial_": True}, "clustering": CLUSTERING}
CLUSTER_KEYS = [f"test/{m}/{k}" for m in ("kmeans", "gmm") for k in ("acc", "ari", "v_measure", "silhouette")]


def digits_run(outputs: Path, loss: str, seed: int, kmeans: float) -> Path:
    """A finished corel/digits_table2 run (the table of k-means / GMM of its test representations reads it)."""
    metrics = {key: kmeans for key in CLUSTER_KEYS} | {"test/acc": 0.99}
    params = {"dataset": "digits", "model": "ffnn", "loss": loss, "seed": seed}
    return write_run(outputs, "corel/digits_table2", params, metrics, config={"evaluator": EVALUATOR})


def rescore(run: Path, value: float, **clustering) -> None:
    """What ``clusterable.rescore <run> evaluator=[clustering] evaluator.clustering.<k>=<v> --replace`` writes: the
    clustering metrics replaced, and a ``rescored`` entry with the evaluators' composed configs and the keys."""
    record = RunRecord.read(run)
    record.metrics.update({key: value for key in CLUSTER_KEYS})
    record.rescored = [
        *(record.rescored or []),
        {
            "evaluator": {"clustering": {**CLUSTERING, **clustering}},
            "keys": CLUSTER_KEYS,
            "from": "its kept representations (representations.npz)",
            "at": "2026-01-01T00:00:00",
        },
    ]
    record.write(run)


def grid(outputs: Path) -> dict[int, Path]:
    """CCE and Cosine-COREL at 3 seeds each; CCE's runs by seed."""
    for seed in range(3):
        digits_run(outputs, "cosine_corel", seed, 0.97)
    return {seed: digits_run(outputs, "cce", seed, 0.95 + seed / 100) for seed in range(3)}


def test_one_seed_rescored_with_other_settings_is_never_pooled(tmp_path: Path, make_tables) -> None:
    cce = grid(tmp_path)
    rescore(cce[1], 0.30, num_clusters=3)
    code, out, err = make_tables("corel/digits_table3_4", "--outputs", str(tmp_path))
    assert code == 2 and out == "", out
    assert len(err.strip().splitlines()) == 1, err
    assert "the 3 runs of the cell dataset=digits, model=ffnn, loss=cce were computed differently" in err
    assert "evaluator.clustering.num_clusters of re-scored test/kmeans/acc (null: 2, 3: 1)" in err
    assert f"({cce[1]})" in err and "clusterable.rescore" in err
    # the test accuracy was not re-scored: its table pools the three seeds, and says what was re-scored how
    code, out, err = make_tables("corel/digits_table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "| FFNN | CCE | 99.00 ± 0.00 |" in out
    assert (
        "1 of 6 runs re-scored after training (clusterable.rescore): test/gmm/acc, test/gmm/ari, "
        "test/gmm/silhouette and 5 more, with evaluator settings other than their recorded config's: "
        "evaluator.clustering.num_clusters=3 (recorded: null)"
    ) in out


def test_a_cell_rescored_alike_pools_and_the_note_names_the_settings(tmp_path: Path, make_tables) -> None:
    cce = grid(tmp_path)
    for seed, run in cce.items():
        rescore(run, 0.30 + seed / 100, num_clusters=3)
    code, out, err = make_tables("corel/digits_table3_4", "--outputs", str(tmp_path))
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("| Digits | FFNN | CCE |"))
    assert row.split(" | ")[3] == "31.00 ± 1.00", row  # the three re-scored seeds, and nothing else
    assert "3 of 6 runs re-scored after training" in out
    assert "evaluator.clustering.num_clusters=3 (recorded: null) (the other 3 runs made theirs with their " in out


def test_a_rescoring_with_the_recorded_settings_pools_with_the_runs_never_rescored(tmp_path: Path, make_tables) -> None:
    cce = grid(tmp_path)
    rescore(cce[0], 0.95)  # --replace with the run's own evaluator settings: the same numbers, made the same way
    code, out, err = make_tables("corel/digits_table3_4", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "| Digits | FFNN | CCE | 96.00 ± 1.00 |" in out
    assert "1 of 6 runs re-scored after training" in out and "with their recorded evaluator settings." in out


def test_copies_of_one_run_rescored_differently_are_refused(tmp_path: Path, make_tables) -> None:
    cce = grid(tmp_path)
    copy = cce[2].with_name("copy of seed 2")
    shutil.copytree(cce[2], copy)
    rescore(copy, 0.30, kmeans_n_init=10)
    code, out, err = make_tables("corel/digits_table3_4", "--outputs", str(tmp_path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "2 folders hold the same run but made its test/gmm/acc with different evaluator settings" in err
    assert str(copy) in err and str(cce[2]) in err
    # re-scored again with the recorded settings (the last re-scoring of a key is what its value is): the copy is
    # one run with the original again, counted once
    rescore(copy, 0.97)
    code, out, err = make_tables("corel/digits_table3_4", "--outputs", str(tmp_path))
    assert code == 0 and "1 run folder(s) hold the same run as another" in out, err


def test_a_grouping_without_a_metric_compares_every_rescored_metric(tmp_path: Path) -> None:
    cce = grid(tmp_path)
    rescore(cce[0], 0.30, silhouette_sample=500)
    runs, _ = load_runs(tmp_path, "corel/digits_table2")
    group = [r for r in runs if r.get("loss") == "cce"]
    differ = config_differences(group)
    assert set(differ) == {f"evaluator.clustering.silhouette_sample of re-scored {k}" for k in CLUSTER_KEYS}
    assert config_differences(group, metric="test/acc") == {}
    # a run recorded before re-scoring existed, or never re-scored, reads its recorded leaves for every metric
    plain = Run(cce[1], {}, RunRecord.read(cce[1]))
    assert plain.rescored == {} and plain.leaves_for("test/kmeans/acc") == plain.leaves
