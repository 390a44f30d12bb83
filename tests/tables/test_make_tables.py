"""scripts/make_tables.py in-process on hand-made run directories: titles name the mode, runs of one mode and one
data source only, exit codes, legacy metrics.json files, and every CSRL figure reachable by name."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from clusterable.record import RunRecord
from clusterable.tables import csrl
from clusterable.tables.report import MixedRuns, Run, load_runs, require_uniform

from .rundirs import corel_table2_runs, csrl_runs, write_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def make_tables():
    """``make_tables(*argv) -> (exit code, stdout, stderr)``, run in this process."""
    spec = importlib.util.spec_from_file_location("make_tables", ROOT / "scripts" / "make_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.fixture
def run_main(make_tables, capsys):
    def run(*argv: str) -> tuple[int, str, str]:
        code = make_tables(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def title(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("### "))


def test_full_runs_make_a_table_titled_full(tmp_path, run_main):
    n = corel_table2_runs(tmp_path, mode="full", source="real")
    code, out, err = run_main("corel/table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert title(out) == "### COREL Table 2: test accuracy (%), mean ± std over seeds — full runs"
    assert "> Full runs (data=real, max_epochs=100)." in out
    assert f"{n} runs (0 failed) of corel/table2 [full]" in out and "SMOKE" not in out
    written = sorted(p.name for p in (tmp_path / "tables").iterdir())
    assert written == ["corel_table2.csv", "corel_table2.md", "corel_table2.tex"]
    assert "— full runs" in (tmp_path / "tables" / "corel_table2.md").read_text()


def test_smoke_runs_make_a_table_titled_smoke(tmp_path, run_main):
    corel_table2_runs(tmp_path, mode="smoke", source="fake")
    code, out, err = run_main("corel/table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert title(out).endswith("— SMOKE runs (fake data / few batches: tests the pipeline only)")
    assert "> SMOKE RUNS (data=fake, debug=smoke, max_epochs=2, trainer.limit_train_batches=3)" in out
    assert "of corel/table2 [smoke]" in out
    assert (tmp_path / "tables" / "smoke" / "corel_table2.md").is_file()
    assert not (tmp_path / "tables" / "corel_table2.md").exists()


def test_auto_takes_the_full_runs_only_when_both_exist(tmp_path, run_main):
    full = corel_table2_runs(tmp_path, mode="full", source="real", seeds=(0, 1))
    smoke = corel_table2_runs(tmp_path, mode="smoke", source="fake", seeds=(0, 1, 2))
    code, out, _ = run_main("corel/table2", "--outputs", str(tmp_path))
    assert code == 0 and f"{full} runs (0 failed) of corel/table2 [full]" in out and "SMOKE" not in out
    assert "95.50 ± 0.71" in out and "96.00 ± 1.00" not in out  # Gaussian-COREL: seeds 0, 1 only
    code, out, _ = run_main("corel/table2", "--outputs", str(tmp_path), "--mode", "smoke")
    assert code == 0 and f"{smoke} runs (0 failed) of corel/table2 [smoke]" in out


@pytest.mark.parametrize("mode", ["smoke", "full"])
def test_runs_mixing_data_sources_are_refused(tmp_path, run_main, mode):
    corel_table2_runs(tmp_path, mode=mode, source="real", seeds=(0, 1, 2))
    corel_table2_runs(tmp_path / "old", mode=mode, source="fake", seeds=(3,))
    code, out, err = run_main("corel/table2", "--outputs", str(tmp_path), "--mode", mode)
    assert code == 2 and out == ""
    fake_dir = tmp_path / "old" / "multirun" / mode / "corel" / "table2"
    assert err == (
        "error: corel/table2: the runs mix data sources (real: 48, fake: 16); "
        f"remove or move the fake ones ({fake_dir})\n"
    )
    assert not (tmp_path / "tables").exists()


def test_legacy_metrics_without_provenance_load_as_full_real_runs(tmp_path, run_main):
    n = corel_table2_runs(tmp_path, mode=None)  # no mode, no provenance: as older train.py wrote them
    runs, mode = load_runs(tmp_path, "corel/table2")
    assert mode == "full" and len(runs) == n
    assert {(r.mode, r.data_source, str(r.provenance)) for r in runs} == {("full", "real", "{}")}
    # They pool with new full runs on real data ...
    write_run(
        tmp_path / "new",
        "corel/table2",
        {"dataset": "mnist", "model": "cnn", "loss": "cce", "seed": 5},
        {"test/acc": 0.9},
        mode="full",
        source="real",
    )
    code, out, err = run_main("corel/table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert f"{n + 1} runs (0 failed) of corel/table2 [full]" in out and "— full runs" in title(out)
    # ... but not with runs that say their data were fake.
    write_run(
        tmp_path / "new",
        "corel/table2",
        {"dataset": "mnist", "model": "cnn", "loss": "cce", "seed": 6},
        {"test/acc": 0.9},
        mode="full",
        source="fake",
    )
    code, _, err = run_main("corel/table2", "--outputs", str(tmp_path))
    assert code == 2 and f"(real: {n + 1}, fake: 1)" in err


def test_runs_of_two_modes_are_never_one_table():
    runs = [Run(Path(f"/o/multirun/{m}/x/seed=0"), {}, RunRecord(status="ok", mode=m)) for m in ("full", "smoke")]
    with pytest.raises(MixedRuns, match=r"the runs mix modes \(full: 1, smoke: 1\); remove or move the smoke ones"):
        require_uniform(runs)
    require_uniform(runs[:1])
    require_uniform([])


def test_no_runs_says_what_to_run_and_usage_errors_exit_2(tmp_path, run_main):
    code, _, err = run_main("corel/table2", "--outputs", str(tmp_path))
    assert code == 1 and "python train.py -m experiment=corel/table2" in err
    corel_table2_runs(tmp_path, mode="smoke", source="fake")
    code, _, err = run_main("corel/table2", "--outputs", str(tmp_path), "--mode", "full")
    assert code == 1 and "(mode full)" in err
    for argv in (["corel/table9"], ["nopaper/table1"], ["corel/table2", "--mode", "fast"]):
        with pytest.raises(SystemExit) as exc:
            run_main(*argv, "--outputs", str(tmp_path))
        assert exc.value.code == 2
    assert not (tmp_path / "tables").exists()


CSRL_SOURCES = {
    "fig2": "csrl/autoencoders",
    "fig7": "csrl/autoencoders",
    "fig8": "csrl/autoencoders",
    "fig3": "csrl/fig3",
    "fig9": "csrl/fig9",
    "fig10": "csrl/fig10",
    "fig11": "csrl/fig11",
    "fig4": "csrl/fig4",
    "fig12": "csrl/fig4",
    "fig5": "csrl/fig5",
    "fig13": "csrl/fig5",
}


@pytest.fixture(scope="module")
def csrl_outputs(tmp_path_factory) -> Path:
    outputs = tmp_path_factory.mktemp("csrl")
    csrl_runs(outputs, mode="smoke", source="fake")
    return outputs


def test_csrl_figures_keep_their_names_and_sources():
    assert csrl.SOURCES == CSRL_SOURCES
    assert all(callable(getattr(csrl, name)) for name in CSRL_SOURCES)


@pytest.mark.parametrize("name", list(CSRL_SOURCES))
def test_every_csrl_figure_is_drawn_through_make_tables(csrl_outputs, run_main, name):
    code, out, err = run_main(f"csrl/{name}", "--outputs", str(csrl_outputs))
    assert code == 0, err
    assert title(out).startswith(f"### CSRL Figure {name[3:]}:") and "— SMOKE runs" in title(out)
    assert "[smoke]" in out and "- [" in out  # the paper's claims, checked
    png = csrl_outputs / "tables" / "smoke" / f"csrl_{name}.png"
    assert png.stat().st_size > 1000


def test_the_outputs_default_to_where_train_py_writes(tmp_path, run_main, monkeypatch):
    # train.py writes below $CLUSTERABLE_OUTPUTS when it is set (src/clusterable/conf/train.yaml): the tables read
    # the same place.
    n = corel_table2_runs(tmp_path / "elsewhere", mode="full", source="real")
    monkeypatch.setenv("CLUSTERABLE_OUTPUTS", str(tmp_path / "elsewhere"))
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main("corel/table2")
    assert code == 0 and f"{n} runs (0 failed) of corel/table2 [full]" in out, err
    assert (tmp_path / "elsewhere" / "tables" / "corel_table2.md").is_file() and not (tmp_path / "outputs").exists()
