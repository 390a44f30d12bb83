"""One identity per run: the tables read what a run recorded (its group choices, then its resolved config) through
``Run.get``, never its override strings, so a table built from runs whose recorded ``overrides`` were blanked is
the same table; runs recorded before metrics.json held the choices take them from ``.hydra/hydra.yaml``."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from clusterable.record import RunRecord
from clusterable.tables.report import Run, as_text, hydra_choices, load_runs

from .rundirs import blank_overrides, corel_table2_runs, csrl_runs, write_run
from .test_corel_tuned_lambda import table1_runs
from .test_dml_tables import table4_runs
from .test_dscl_tables import GOOGLENET, NUMBERS, write_row, write_rows
from .test_make_tables import CSRL_SOURCES
from .test_safir_tables import knn, run_of


def test_run_get_reads_a_group_choice_then_the_resolved_config():
    config = {
        "loss": {"_target_": "x.CCE", "num_clusters": None, "metric": {"_target_": "x.Triplet"}},
        "seed": 3,
        "dataset": {"name": "mnist", "labelled_percent": 0.01},
        "protocol": {"task": "denoising"},
    }
    choices = {"loss": "cce", "loss/metric": "triplet", "dataset": "mnist", "scheduler": None}
    run = Run(Path("."), {"loss": "center"}, RunRecord(choices=choices, config=config))
    # A group's name gives the option (not its config node, nor the override string: display only).
    assert run.get("loss") == "cce" and run.get("loss/metric") == "triplet" and run.get("dataset") == "mnist"
    assert run.get("scheduler", "none") is None  # a group left unselected is recorded as null
    # Any other key is a dotted path into the resolved config, typed as recorded.
    assert run.get("seed") == 3 and run.get("dataset.labelled_percent") == 0.01
    assert run.get("protocol.task") == "denoising" and run.get("loss.metric._target_") == "x.Triplet"
    assert run.get("loss.num_clusters", 7) is None  # recorded as null: not the default
    assert run.get("loss.lam") is None and run.get("loss.lam", 0.5) == 0.5 and run.get("seed.x", "-") == "-"
    # As text (a cell's key, a label), a value is spelled as a sweep spells its override.
    spelled = ["0.1", "1.0", "10", "True", "null", "cce"]
    assert [as_text(v) for v in (0.1, 1.0, 10, True, None, "cce")] == spelled


def test_a_run_recorded_before_choices_takes_them_from_its_hydra_yaml(tmp_path):
    params = {"dataset": "mnist", "model": "cnn", "loss": "cce", "seed": 1}
    path = write_run(tmp_path, "corel/table2", params, {"test/acc": 0.9}, mode=None)  # a legacy record
    assert RunRecord.read(path).choices is None and (path / ".hydra" / "hydra.yaml").is_file()
    (run,), _ = load_runs(tmp_path, "corel/table2")
    assert (run.get("dataset"), run.get("model"), run.get("loss"), run.get("seed")) == (
        "mnist",
        "cnn",
        "cce",
        1,
    )
    assert run.record.choices == {"experiment": "corel/table2", **{k: params[k] for k in ("dataset", "model", "loss")}}
    # A run without the file records none; an unreadable file is none.
    (path / ".hydra" / "hydra.yaml").write_text("hydra: [unclosed")
    assert hydra_choices(path) == {} and hydra_choices(tmp_path / "nowhere") == {}


# ---- the acceptance test: blanked overrides, the same tables ----------------------------------------------------


def corel(outputs: Path) -> None:
    corel_table2_runs(outputs)
    table1_runs(outputs)
    corel_table2_runs(outputs / "legacy", mode=None, seeds=(2,))  # legacy records pool with the new ones


def dscl(outputs: Path) -> None:
    write_rows(outputs, "dscl/table1", NUMBERS, model=GOOGLENET, dataset="cub200", ks=[1, 2, 4, 8])
    write_row(outputs, "dscl/table1", "last_layer", 2, None, model=GOOGLENET, dataset="cub200")  # failed
    write_row(outputs, "dscl/table1", "softmax", 3, {"test/sc/nmi": 0.1}, model=GOOGLENET, dataset="cars196")


def safir(outputs: Path) -> None:
    rng = np.random.default_rng(0)
    for seed in (0, 1):
        for pl in (0.01, 10):
            run_of(outputs, "safir/table6_1", model="dml", pl=pl, ls=2, seed=seed, metrics=knn(0.3 + 0.1 * seed))
            for alpha in (0.25, 1.0):
                run_of(
                    outputs,
                    "safir/table6_1",
                    model="dml_ae",
                    pl=pl,
                    ls=2,
                    seed=seed,
                    alpha=alpha,
                    metrics=knn(0.5 - 0.1 * seed),
                )
        for model in ("dml_unit", "dml_gmm"):
            run_of(outputs, "safir/table6_3", model=model, pl=0.1, ls=4, seed=seed, alpha=0.66, metrics=knn(0.12))
        run_of(
            outputs,
            "safir/table6_5",
            model="mvae",
            pl=10,
            ls=10,
            seed=seed,
            metrics=knn(0.2),
            dataset="organamnist",
            metric="center",
        )
        for gamma in (0.0, 2.0):
            probes = {f"test/{p}/acc": 0.6 + 0.1 * gamma for p in ("linear", "rf", "knn")}
            run_of(outputs, "safir/table6_6", model="mvae_joint", pl=100, ls=5, seed=seed, gamma=gamma, metrics=probes)
    for model in ("dml_unit", "dml_gmm"):
        path = run_of(
            outputs,
            "safir/fig6_2",
            model=model,
            pl=10,
            ls=2,
            seed=0,
            alpha=0.33,
            metrics=knn(0.3),
            dataset="organamnist",
        )
        np.savez(path / "latent_test_raw.npz", xy=rng.normal(size=(40, 2)), labels=rng.integers(0, 3, 40))


def dml(outputs: Path) -> None:
    table4_runs(
        outputs, {"cub200": (0.676, 0.692), "cars196": (0.891, 0.893), "sop": (0.808, 0.811), "inshop": (0.906, 0.906)}
    )
    for loss, r1 in (("ce", 0.8), ("triplet", 0.7)):
        for seed in range(2):
            metrics = {"test/recall@1/cos": r1 + seed / 100, "test/map@r/cos": r1 / 2, "test/kmeans/nmi": 0.5}
            write_run(
                outputs, "dml/losses", {"loss": loss, "seed": seed}, metrics, choices={"dataset": "digits_zeroshot"}
            )


CASES = {
    "corel": (corel, ["corel/table1", "corel/fig2", "corel/table2"]),
    "csrl": (csrl_runs, [f"csrl/{name}" for name in CSRL_SOURCES]),
    "dscl": (dscl, ["dscl/table1"]),
    "safir": (
        safir,
        ["safir/table6_1", "safir/table6_3", "safir/table6_5", "safir/table6_6", "safir/fig6_2"],
    ),
    "dml": (dml, ["boudiaf/table4", "dml/losses"]),
}


@pytest.mark.catalogue
@pytest.mark.parametrize("paper", sorted(CASES))
def test_a_table_from_runs_with_blank_overrides_is_the_same_table(tmp_path, make_tables, paper):
    build, tables = CASES[paper]
    build(tmp_path / "runs")
    shutil.copytree(tmp_path / "runs", tmp_path / "blank")
    runs = len(list((tmp_path / "runs").rglob("metrics.json")))
    assert blank_overrides(tmp_path / "blank") == runs > 0
    assert all(not RunRecord.read(p.parent).overrides for p in (tmp_path / "blank").rglob("metrics.json"))
    for table in tables:
        made = {}
        for name in ("runs", "blank"):
            outputs = tmp_path / name
            code, out, err = make_tables(table, "--outputs", str(outputs))
            assert code == 0, (table, err)
            made[name] = out.replace(str(outputs), "<outputs>")
        assert made["blank"] == made["runs"], table
        rows = [line for line in made["runs"].splitlines() if line.startswith("| ")][1:]  # below the header
        assert any(any(c.isdigit() for c in row.split(" | ", 1)[1]) for row in rows), made["runs"]  # numbers
