"""`train.py` as a user runs it: the default run, every mistake a user makes ending in one line and a truthful exit
code, divergence, Ctrl-C and resume, sweeps that never stop early and never mix, launchers and DDP.

Most cases run ``clusterable.cli.main`` in this process (the ``train`` fixture); the ones that need a real
interpreter (the README's first command, DDP's re-launched ranks) use a subprocess (``cli``).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from helpers.running import SEARCHPATH, all_metrics, by_override, metrics_files

from clusterable.data.memory.digits import read_digits

QUICK = ["trainer.max_epochs=2", "trainer.enable_progress_bar=false", "evaluator=[classification]"]


def assert_one_error_line(result, message: str) -> None:
    """Non-zero exit, exactly one line on stderr, naming ``message``, no traceback anywhere."""
    assert result.code != 0, result
    assert result.error_lines() == [result.error_lines()[0]] and message in result.err, result.err
    assert "Traceback" not in result.out + result.err


def assert_nothing_ok(outputs: Path) -> None:
    assert all(m["status"] == "failed" for m in all_metrics(outputs))


def test_default_run_end_to_end(cli):
    proc = cli("train.py")  # the README's first command: digits, FFNN, Gaussian-COREL, CPU
    assert "run: ok" in proc.stdout and "test/acc" in proc.stdout and "run dir:" in proc.stdout
    (path,) = metrics_files(cli.outputs)
    m = json.loads(path.read_text())
    assert m["status"] == "ok" and m["error"] is None and m["seed"] == 0 and m["mode"] == "full"
    assert m["provenance"] == {
        "data_source": "real",
        "debug": None,
        "limits": {},
        "max_epochs": 30,
        "max_steps": -1,
    }
    assert m["metrics"]["test/acc"] > 0.85, m["metrics"]  # digits are easy; a broken pipeline is not
    for key in ("test/kmeans/ari", "test/gmm/nmi", "test/kmeans/silhouette", "val/acc", "model/params"):
        assert key in m["metrics"]
    assert 0 <= m["best_epoch"] < 30 and m["timing"]["fit_s"] > 0
    run_dir = path.parent
    assert (run_dir / ".hydra" / "config.yaml").exists() and (run_dir / "csv" / "metrics.csv").exists()
    assert (run_dir / "checkpoints" / "best.ckpt").exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 & ~_umask()
    assert not [p for p in run_dir.rglob("*.log") if p.stat().st_size == 0], "empty log files left behind"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["loss.lam=1.5"], "loss.lam must be in [0, 1], got 1.5"),
        (["loss.lam=abc"], "loss.lam must be a number, got 'abc'"),
        (["loss.gamma=0"], "loss.gamma must be > 0"),
        (["+loss.lamda=0.5"], "loss.lamda is not an option of GaussianCOREL (did you mean lam?)"),
        (["+model.dropuot=0.5"], "model.dropuot is not an option of FFNN (did you mean dropout?)"),
        (["loss.learn_gamma=no"], "loss.learn_gamma must be a boolean (true or false), got 'no'"),
        (["loss.lr=-1"], "loss.lr must be > 0"),
        (["optimizer.lr=0"], "optimizer.lr must be a number > 0, got 0"),
        (["optimizer=sgd", "optimizer.momentum=fast"], "optimizer.momentum must be a number"),
        (["dataset.batch_size=0"], "dataset.batch_size must be a positive integer"),
        (["dataset.batch_size=1.5"], "dataset.batch_size must be an integer, got 1.5"),
        (["dataset.num_classes=5"], "dataset.num_classes is 5 but the labels"),
        (["trainer.max_epochs=0"], "trainer.max_epochs must be an integer >= 1"),
        (
            ["+trainer.max_epoch=3"],
            "trainer.max_epoch is not an option of Trainer (did you mean max_epochs?)",
        ),
        (["model.hidden=[500,0]"], "model.hidden must be a non-empty list of positive integers"),
        (["seed=abc"], "seed must be an integer, got 'abc'"),
        (["seed=-1"], "seed must be an integer in [0, 2^32)"),
        (["checkpoint.mode=maximum"], "checkpoint.mode must be one of 'min', 'max', got 'maximum'"),
        (["checkpoint.monitor=val/accuracy"], "checkpoint.monitor: 'val/accuracy' is never logged"),
        (
            ["loss=tae1", "model=identity"],
            "checkpoint.monitor: 'val/acc' is never logged by this run (loss=tae1)",
        ),
        (["eval_stages=[tset]"], "eval_stages: no split named 'tset'"),
        (["+evaluator.classification.topk=5"], "evaluator.classification.topk is not an option of accuracy"),
        (["mode=full", "debug=fast"], "mode is derived from the run"),
        ([SEARCHPATH, "experiment=typo"], "loss.lamda is not an option of GaussianCOREL"),
        (["paths.output_dir=/proc/no/such/folder"], "cannot write to the output folder /proc/no/such/folder"),
        (
            ["optimizer_steps=per_sample", "trainer.devices=2"],
            "optimizer_steps=per_sample runs on one device, not 2",
        ),
        (
            ["evaluator=[clustering,clustering_l2]", "evaluator.clustering_l2.key_prefix="],
            "evaluator.clustering and evaluator.clustering_l2 both return 'kmeans/acc'",
        ),
    ],
)
def test_every_mistake_is_one_line_before_training(train, overrides, message):
    result = train(*QUICK, *overrides)
    assert_one_error_line(result, message)
    assert "Epoch 0" not in result.out + result.err  # refused before any training
    assert_nothing_ok(train.outputs)


def test_a_key_that_does_not_exist_without_plus_is_one_line(train):
    result = train(*QUICK, "loss.lamda=0.3")
    assert result.code == 2
    assert_one_error_line(result, "error: loss.lamda is not a key of the config")
    assert not metrics_files(train.outputs)


def test_a_cell_that_does_not_compose_fails_alone(train):
    # cce has no lam: Hydra cannot compose that cell; the center cell still runs.
    result = train("-m", "loss=cce,center", "loss.lam=0.2", *QUICK)
    assert result.code == 1 and "sweep: 1 ok, 1 failed, 0 skipped" in result.out
    (line,) = result.error_lines()
    assert line.startswith("failed: loss=cce,") and "loss.lam is not a key of the config" in line
    assert [m["status"] for m in all_metrics(train.outputs)] == ["ok"]


def test_an_evaluator_option_out_of_range_names_the_evaluator_before_training(train):
    result = train(*QUICK, "trainer.max_epochs=1", "evaluator=[clustering]", "evaluator.clustering.kmeans_n_init=0")
    assert_one_error_line(result, "evaluator.clustering.kmeans_n_init must be >= 1, got 0")
    assert_nothing_ok(train.outputs)
    assert not list(train.outputs.rglob("metrics.csv"))  # refused when built, before the first epoch


@pytest.mark.parametrize(
    ("override", "group"),
    [
        ("loss=no_such_loss", "loss"),
        ("evaluator=[nonexistent]", "evaluator"),
        ("experiment=corel/nonexistent", "experiment"),
        ("loss/metric=nope", "loss/metric"),  # a group nested in another group's config
    ],
)
def test_an_unknown_option_lists_the_available_ones(train, override, group):
    result = train("loss=dml", override) if group == "loss/metric" else train(override)
    assert result.code == 2
    assert_one_error_line(result, f"error: {group}: no option")
    assert "available: " in result.err and (
        "corel/table2" in result.err
        or "classification" in result.err
        or "gaussian_corel" in result.err
        or "supcon" in result.err
    )
    assert not metrics_files(train.outputs)


@pytest.mark.parametrize("override", ["+protocol.budjet=cpu150", "protocol.recipy=recovered", "++protocol.tsk=x"])
def test_a_protocol_key_no_config_sets_is_refused(train, override):
    result = train(*QUICK, override)
    key = override.lstrip("+").split("=")[0]
    assert result.code == 2
    assert_one_error_line(result, f"error: {key}: no config sets {key}, so nothing reads it (protocol keys: ")
    assert "budget" in result.err and not metrics_files(train.outputs)


def test_a_protocol_key_a_config_of_your_own_sets_is_accepted(tmp_path):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from clusterable.preflight import unknown_protocol_key

    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\nprotocol:\n  my_setting: 3\n")
    overrides = OverridesParser.create().parse_overrides(["+protocol.my_setting=4"])
    from clusterable.config import CONFIG_DIR

    assert unknown_protocol_key(overrides, [Path(CONFIG_DIR)]) is not None
    assert unknown_protocol_key(overrides, [Path(CONFIG_DIR), tmp_path]) is None


@pytest.mark.parametrize("option", ["loss/cce.yaml", "dataset/iris.yaml", "evaluator/clustering.yaml"])
def test_an_option_of_your_own_with_a_package_options_name_is_refused(train, tmp_path, option):
    mine = tmp_path / "conf" / option
    mine.parent.mkdir(parents=True)
    mine.write_text("_target_: myproject.Thing\n")
    result = train(*QUICK, f"hydra.searchpath=[file://{tmp_path / 'conf'}]")
    group, name = option.removesuffix(".yaml").split("/")
    assert_one_error_line(result, f"error: {mine} has the name of the package's own {group}={name} (")
    assert "give it a name of its own" in result.err and not metrics_files(train.outputs)


def test_a_logger_whose_library_is_missing_is_refused_before_training(train, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as on an install without the wandb extra
    result = train(*QUICK, "logger=wandb")
    assert_one_error_line(
        result,
        "error: logger.wandb needs the wandb module, which is not installed: "
        "pip install 'clusterable[wandb]' (or logger=csv)",
    )
    assert_nothing_ok(train.outputs)
    assert not list(train.outputs.rglob("*.ckpt"))


@pytest.mark.parametrize(
    ("logger", "modules", "said"),
    [
        (
            "tensorboard",
            ("tensorboard", "tensorboardX"),
            "tensorboard or tensorboardX module, which is not installed: pip install tensorboard",
        ),
        ("mlflow", ("mlflow",), "mlflow module, which is not installed: pip install mlflow"),
        ("aim", ("aim",), "aim module, which is not installed: pip install aim"),
    ],
)
def test_each_logger_names_its_missing_package_in_one_line(train, monkeypatch, logger, modules, said):
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)
    result = train(*QUICK, f"logger={logger}")
    assert_one_error_line(result, f"error: logger.{logger} needs the {said} (or logger=csv)")
    assert_nothing_ok(train.outputs)


def test_narrowing_an_experiments_evaluators_leaves_out_their_settings(train):
    result = train("experiment=cross/fashion", "evaluator=[classification,clustering]", "debug=smoke")
    assert result.code == 0, result.err
    assert (
        "note: evaluator.clustering_l2, evaluator.retrieval, evaluator.latent_plot left out: settings of "
        "evaluators this run does not select"
    ) in result.out
    (payload,) = all_metrics(train.outputs)
    assert payload["status"] == "ok" and sorted(payload["config"]["evaluator"]) == [
        "classification",
        "clustering",
    ]
    assert "test/kmeans/acc" in payload["metrics"] and not any("recall" in k for k in payload["metrics"])
    # settings typed for an evaluator the command line does not select are a mistake: refused
    typed = train("experiment=cross/fashion", "evaluator=[classification]", "evaluator.retrieval.ks=[2]", "debug=smoke")
    assert_one_error_line(typed, "evaluator.retrieval sets ks, distances, r_precision but names no class")


def test_a_missing_dataset_names_its_files_and_folder(train, tmp_path):
    result = train(*QUICK, "dataset=mnist", "dataset.reader.download=false")
    assert_one_error_line(result, "train-images-idx3-ubyte")
    assert "dataset.root" in result.err and str(tmp_path / "outputs" / "data" / "mnist") in result.err
    assert_nothing_ok(train.outputs)


def test_a_corrupt_data_file_names_the_file(train, tmp_path):
    raw = tmp_path / "mnist" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
        (raw / name).write_bytes(b"\x00\x00\x08\x03" + b"\x00" * 20)  # an images header promising nothing sensible
    result = train(*QUICK, "dataset=mnist", f"dataset.root={tmp_path / 'mnist'}", "dataset.reader.download=false")
    assert_one_error_line(result, "is corrupt")
    assert "idx" in result.err
    assert_nothing_ok(train.outputs)


def test_optimizer_group_sgd_with_nesterov(train):
    result = train(*QUICK, "optimizer=sgd", "optimizer.nesterov=true", "optimizer.lr=0.05")
    assert result.code == 0, result
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "ok" and m["config"]["optimizer"]["_target_"] == "torch.optim.SGD"


def test_nan_after_a_good_epoch_keeps_that_epoch_and_the_sweep_goes_on(train):
    # A run whose loss becomes NaN at epoch 1 keeps its best checkpoint (epoch 0): evaluated there, recorded
    # diverged (a result of the grid, counted apart), never ok.
    result = train("-m", SEARCHPATH, "loss=nan_after,cce", "name=nanloss", *QUICK)
    runs = by_override(train.outputs, "loss")
    assert set(runs) == {"nan_after", "cce"}, runs.keys()
    diverged, ok = runs["nan_after"], runs["cce"]
    assert diverged["status"] == "diverged" and "nan" in diverged["error"] and diverged["failed_epoch"] == 1
    assert diverged["best_epoch"] == 0 and diverged["metrics"]["test/acc"] > 0.5  # epoch 0's weights, evaluated
    assert ok["status"] == "ok"
    assert result.code == 0 and "sweep: 1 ok, 1 diverged, 0 failed, 0 skipped" in result.out, result
    assert "Traceback" not in result.out + result.err


def test_nan_in_the_first_epoch_fails_the_run(train):
    # Nothing was learned before the runaway (no best checkpoint) and the head's loss is not unbounded: a failure.
    result = train(SEARCHPATH, "loss=nan_after", "loss.epoch=0", *QUICK)
    assert_one_error_line(result, "train/loss became nan at epoch 0: the run diverged")
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "failed" and m["failed_epoch"] == 0 and m["metrics"] == {}


def test_divergence_is_caught_on_every_part_even_when_they_cancel(train):
    result = train(SEARCHPATH, "loss=cancelling", *QUICK)
    # Its best epoch (0) is evaluated and shown, recorded diverged; asked for alone, it did not finish: exit 1.
    assert_one_error_line(
        result,
        "error: train/attract reached 1e+32 (limit ±1e+10) at epoch 1: the run diverged; "
        "the metrics above are those of its best epoch (0)",
    )
    assert "run: diverged" in result.out and "test/acc" in result.out
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "diverged" and m["failed_epoch"] == 1 and m["best_epoch"] == 0 and m["metrics"]


def test_the_generic_limit_in_the_first_epoch_is_a_result_for_an_unbounded_loss(train):
    # Gaussian-COREL below λ = 0.5 is unbounded below: a runaway past divergence_limit inside epoch 0, before
    # the head's own watch has a history, is diverged (a result of the grid), as the watch would say later.
    result = train("loss=gaussian_corel", "loss.lam=0.1", "divergence_limit=1.0", *QUICK)
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "diverged" and m["failed_epoch"] == 0 and "limit ±1" in m["error"], m["error"]
    assert result.code == 1 and "Traceback" not in result.err  # alone and with nothing evaluated: exit 1


def test_a_bad_cell_fails_alone_and_the_exit_code_says_so(train):
    # (Gaussian-COREL, the default loss: below λ = 0.5 a run would diverge, hence 0.7 as the third cell.)
    result = train("-m", "loss.lam=0.5,1.5,0.7", *QUICK)
    statuses = {lam: m["status"] for lam, m in by_override(train.outputs, "loss.lam").items()}
    assert statuses == {"0.5": "ok", "1.5": "failed", "0.7": "ok"}
    assert result.code == 1
    assert "sweep: 2 ok, 1 failed, 0 skipped" in result.out
    (line,) = result.error_lines()
    assert (
        line.startswith("failed: ") and "loss.lam=1.5" in line and line.endswith("loss.lam must be in [0, 1], got 1.5")
    )


def test_a_finished_cell_is_reused_only_with_the_same_config(train, tmp_path):
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    grid = conf / "grid.yaml"
    grid.write_text("# @package _global_\nname: resume\ntrainer:\n  max_epochs: 2\n")
    args = [
        "-m",
        f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
        "experiment=grid",
        "loss=cce,cosine_corel",
        *QUICK[1:],
    ]
    assert train(*args).code == 0
    files = metrics_files(train.outputs)
    assert len(files) == 2
    before = {p: (p.stat().st_mtime_ns, p.read_text()) for p in files}
    ckpts = {p: p.stat().st_mtime_ns for p in train.outputs.rglob("*.ckpt")}
    again = train(*args)
    assert again.code == 0 and again.out.count("metrics.json says ok") == 2
    assert "sweep: 0 ok, 0 failed, 2 skipped" in again.out
    assert {p: (p.stat().st_mtime_ns, p.read_text()) for p in files} == before
    assert {p: p.stat().st_mtime_ns for p in train.outputs.rglob("*.ckpt")} == ckpts
    # The experiment file is edited: the same cells, another config. They are re-run, not reused.
    grid.write_text(grid.read_text().replace("max_epochs: 2", "max_epochs: 3"))
    changed = train(*args)
    assert changed.code == 0 and "sweep: 2 ok, 0 failed, 0 skipped" in changed.out
    assert changed.out.count("its finished run had another config (trainer.max_epochs: 2 -> 3)") == 2
    assert metrics_files(train.outputs) == files
    assert {json.loads(p.read_text())["provenance"]["max_epochs"] for p in files} == {3}


def test_debug_and_fake_runs_never_share_a_cell_with_full_ones(train):
    quick = [*QUICK, "name=mixing", "loss=cce"]
    assert train("-m", *quick, "debug=fast").code == 0
    assert train("-m", *quick, "dataset.source=fake").code == 0
    full = train("-m", *quick)
    assert full.code == 0 and "says ok" not in full.out  # not skipped: the full cell is its own
    by_mode = {}
    for path in metrics_files(train.outputs):
        m = json.loads(path.read_text())
        by_mode.setdefault(m["mode"], []).append((path.parent, m["provenance"]))
    assert sorted(len(v) for v in by_mode.values()) == [1, 2] and len(by_mode["full"]) == 1
    ((full_dir, prov),) = by_mode["full"]
    assert "multirun/full/mixing" in str(full_dir) and prov["data_source"] == "real" and prov["debug"] is None
    assert all("multirun/smoke/mixing" in str(d) for d, _ in by_mode["smoke"])
    assert {p["debug"] for _, p in by_mode["smoke"]} == {"fast", None}
    assert {p["data_source"] for _, p in by_mode["smoke"]} == {"real", "fake"}


def test_ctrl_c_records_the_run_and_the_same_command_resumes_from_a_clean_cell(train, tmp_path):
    args = [
        "-m",
        SEARCHPATH,
        "loss=interrupt_once",
        "name=ctrlc",
        "trainer.max_epochs=3",
        "trainer.enable_progress_bar=false",
        "evaluator=[classification]",
    ]
    first = train(*args)
    assert first.code == 130
    (line,) = first.error_lines()
    assert line.startswith("interrupted: ") and "ctrlc" in line and "run the same command again" in line
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "failed" and m["error"] == "interrupted"
    cell = metrics_files(train.outputs)[0].parent
    assert (cell / "checkpoints" / "best.ckpt").exists()  # epoch 0's checkpoint, of the interrupted attempt
    second = train(*args)
    assert second.code == 0 and "sweep: 1 ok, 0 failed, 0 skipped" in second.out
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "ok"
    assert sorted(p.name for p in (cell / "checkpoints").iterdir()) == ["best.ckpt"]  # no best-v1.ckpt


def test_joblib_launcher_runs_four_cells_on_two_workers(train):
    losses = "loss=cce,center,cosine_corel,gaussian_corel"
    result = train(
        "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", losses, "name=joblib", *QUICK, "torch_threads=null"
    )
    assert result.code == 0 and "sweep: 4 ok, 0 failed, 0 skipped" in result.out
    runs = all_metrics(train.outputs)
    assert len(runs) == 4 and all(m["status"] == "ok" for m in runs)
    cores = os.cpu_count() or 1
    assert {m["torch_threads"] for m in runs} == {max(1, cores // 2)}  # the cores divided among the workers


def test_submitit_slurm_launcher_composes(tmp_path):
    from hydra import compose, initialize_config_dir

    from clusterable.config import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(
            "train",
            overrides=["hydra/launcher=submitit_slurm", "hydra.launcher.gpus_per_node=1"],
            return_hydra_config=True,
        )
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher") and cfg.hydra.launcher.gpus_per_node == 1


def test_submitit_local_executor_runs_a_sweep(train):
    result = train(
        "-m",
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
        "loss=cce,center",
        "name=submitit",
        *QUICK,
    )
    assert result.code == 0, result
    assert "sweep: 2 ok, 0 failed, 0 skipped" in result.out
    assert sorted(m["status"] for m in all_metrics(train.outputs)) == ["ok", "ok"]


def test_ddp_shards_batches_across_two_cpu_ranks_and_writes_one_metrics_file(cli, tmp_path):
    proc = cli(
        "train.py",
        SEARCHPATH,
        "loss=record_batches",
        "trainer=ddp",
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        "trainer.max_epochs=1",
        "trainer.enable_progress_bar=false",
        "evaluator=[classification]",
        "checkpoint.monitor=null",
    )
    assert proc.stdout.count("run: ok") == 1  # only rank 0 prints
    (path,) = metrics_files(cli.outputs)
    m = json.loads(path.read_text())
    assert m["status"] == "ok"
    ranks = [
        [int(i) for line in (tmp_path / "batches" / f"rank{r}.txt").read_text().splitlines() for i in line.split()]
        for r in (0, 1)
    ]
    n_train = len(read_digits()["train"]["labels"])
    assert len(ranks[0]) == len(ranks[1]) == (n_train + 1) // 2
    overlap = set(ranks[0]) & set(ranks[1])
    assert len(overlap) == n_train % 2  # disjoint but for the row that pads an odd count
    assert set(ranks[0]) | set(ranks[1]) == set(range(n_train))


def test_wandb_runs_are_closed_after_every_job_even_a_failed_one(train):
    # A W&B run left open would be reused by the next job of the sweep (one offline run folder for both).
    train("-m", SEARCHPATH, "loss=nan_after,cce", "logger=wandb", "name=wandb", "dataset.source=fake", *QUICK)
    folders = {}
    for path in metrics_files(train.outputs):
        offline = list((path.parent / "wandb").glob("offline-run-*"))
        assert len(offline) == 1, path.parent
        folders[json.loads(path.read_text())["status"]] = offline[0].name
    # nan_after diverges at epoch 1 (recorded diverged, its epoch 0 evaluated): its W&B run is closed too.
    assert set(folders) == {"ok", "diverged"} and len(set(folders.values())) == 2
