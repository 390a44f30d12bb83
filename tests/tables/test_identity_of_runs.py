"""A table cell is one config, really: a run's identity is its recorded config, group options, data files and code,
never its folder name. A copied folder or a resume under another folder name is the same run (counted once); two
λ in one Table 2 cell, two data checksums or two code versions are two configs (refused in one line); the Table 2
built on winners from an incomplete grid says so; an array file that cannot be read is named in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from tables.rundirs import write_run

FILES = {"train-images-idx3-ubyte": {"path": "/data/train-images-idx3-ubyte.gz", "sha256": "a" * 64}}


def table2_run(outputs: Path, option: str, seed: int, acc: float, suffix: str = "", **config) -> Path:
    params = {"dataset": "fashion_mnist", "model": "ffnn", "loss": option, "seed": seed}
    path = write_run(
        outputs,
        "corel/fashion_table2",
        params,
        {"test/acc": acc},
        config={"protocol": {"budget": "cpu"}, "trainer": {"max_epochs": 10}, **config},
    )
    if suffix:  # the same run under another folder name (a resume with torch_threads=1 added, say)
        moved = path.with_name(path.name + suffix)
        shutil.move(path, moved)
        return moved
    return path


def test_a_copied_run_and_a_resume_under_another_folder_name_count_once(tmp_path: Path, make_tables) -> None:
    # two runs, and the same two again: a resume whose folder names gained torch_threads=1 (recorded, no identity)
    for seed in (0, 1):
        table2_run(tmp_path, "cce", seed, 0.80 + seed / 100, suffix=",torch_threads=1", torch_threads=1)
        table2_run(tmp_path, "cce", seed, 0.80 + seed / 100)
    # ... and a folder copied by hand
    src = next((tmp_path / "multirun" / "full" / "corel" / "fashion_table2").glob("*seed=0"))
    shutil.copytree(src, src.with_name("copy of seed 0"))
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "| FFNN | CCE | 80.50 ± 0.71 |" in out  # 2 seeds, not 5
    assert "Runs (seeds) per configuration: 2, over 1 configurations." in out
    assert "3 run folder(s) hold the same run as another" in out and "counted once" in out


def test_two_lambda_in_one_table2_cell_are_refused_in_one_line(tmp_path: Path, make_tables) -> None:
    table2_run(tmp_path, "center", 0, 0.88, loss={"lam": 0.1})
    table2_run(tmp_path, "center", 1, 0.90, loss={"lam": 0.3})
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 2 and out == "", out
    assert len(err.strip().splitlines()) == 1 and "differ in more than their seed: loss.lam (0.1: 1, 0.3: 1)" in err


def test_runs_that_read_different_files_are_two_configs(tmp_path: Path, make_tables) -> None:
    table2_run(tmp_path, "cce", 0, 0.88)
    path = table2_run(tmp_path, "cce", 1, 0.90)
    for run, sha in ((path, "b" * 64), (path.with_name(path.name.replace("seed=1", "seed=0")), "a" * 64)):
        write_notes(run, {"files": {"train-images-idx3-ubyte": {"path": "/x.gz", "sha256": sha}}})
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "data.train-images-idx3-ubyte.sha256" in err


def write_notes(run: Path, notes: dict | None = None, code: dict | None = None, **items) -> None:
    """Add what a real run records beside its config to a hand-made run: its ``data_notes``, ``code``, ``items``."""
    from clusterable.record import RunRecord

    payload = RunRecord.read(run).to_dict()
    if notes is not None:
        payload["data_notes"] = notes
    if code is not None:
        payload["code"] = code
    RunRecord.from_dict({**payload, **items}).write(run)  # a resolver's note as schema 1 held it: read into notes


def test_a_table2_on_winners_of_an_incomplete_grid_says_so(tmp_path: Path, make_tables) -> None:
    for seed in (0, 1):
        run = table2_run(tmp_path, "center", seed, 0.88, loss={"lam": 0.5}, tuned_lambda_from="corel/fashion_table1")
        write_notes(run, tuned_lambda=0.5, tuned_lambda_incomplete=[0.2, 0.4])
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "λ from an INCOMPLETE Table 1 grid in 2 run(s)" in out and "fashion_mnist/ffnn/center" in out


def test_two_code_versions_are_refused_unless_pooled_on_purpose(tmp_path: Path, make_tables) -> None:
    for seed, commit in ((0, "1" * 40), (1, "2" * 40)):
        write_notes(
            table2_run(tmp_path, "cce", seed, 0.88),
            code={"package": "0.1.0", "commit": commit, "dirty": False},
        )
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 2 and "code.commit" in err and len(err.strip().splitlines()) == 1, err
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path), "--pool-code-versions")
    assert code == 0, err
    assert "Runs of 2 code versions pooled on purpose (--pool-code-versions): 1111111111: 1 runs, 2222222222: 1" in out


def test_every_run_records_its_code_version(train) -> None:
    from clusterable.record import RunRecord

    result = train("trainer.max_epochs=1", "evaluator=[classification]", "+trainer.limit_train_batches=2")
    assert result.code == 0, result.err
    (run,) = [p.parent for p in train.outputs.rglob("metrics.json")]
    code = RunRecord.read(run).code
    assert code["package"] and len(code["commit"]) == 40 and isinstance(code["dirty"], bool)


def test_a_truncated_array_is_named_in_one_line(tmp_path: Path, make_tables) -> None:
    arrays = {"latent_test_seed0.npz": {"xy": np.zeros((4, 2)), "labels": np.arange(4)}}
    params = {"dataset": "mnist", "model": "cnn", "loss": "cce", "seed": 0}
    path = write_run(tmp_path, "corel/fig1", params, {"test/acc": 0.9}, arrays=arrays)
    data = (path / "latent_test_seed0.npz").read_bytes()
    (path / "latent_test_seed0.npz").write_bytes(data[: len(data) // 2])
    code, out, err = make_tables("corel/fig1", "--outputs", str(tmp_path))
    assert code == 2 and out == "", out
    assert len(err.strip().splitlines()) == 1 and "latent_test_seed0.npz cannot be read (BadZipFile" in err


def test_a_garbled_csv_log_is_named_in_one_line(tmp_path: Path, make_tables) -> None:
    run = table2_run(tmp_path, "cce", 0, 0.88)
    (run / "csv").mkdir()
    (run / "csv" / "metrics.csv").write_text("epoch,step,val/kmeans/acc\n0,10,0.5\n1,20,not-a-number\n")
    code, out, err = make_tables("corel/fashion_curves", "--outputs", str(tmp_path))
    assert code == 2 and out == "", out
    assert len(err.strip().splitlines()) == 1 and "metrics.csv cannot be read (ValueError" in err, err
