"""``train.py -m hydra/launcher=stacked`` as a user runs it: cells grouped by the stacking rule, each recorded as
its own run, the summary and exit status per cell, a cell that cannot stack run alone, Ctrl-C and resume, a full
disk."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from clusterable.stacked.grouping import plan, stack_key

SWEEP = [
    "-m",
    "hydra/launcher=stacked",
    "dataset=iris",
    "trainer.max_epochs=2",
    "logger=none",
    "evaluator=[classification]",
    "model.hidden=[8,8]",
    "trainer.enable_progress_bar=false",
]


def records(outputs: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in outputs.rglob("metrics.json")}


def test_cells_that_differ_in_seed_and_lambda_train_as_one_stack(train) -> None:
    result = train(*SWEEP, "loss=center", "loss.lam=0.3,0.6", "seed=0,1")
    assert result.code == 0, result.err
    assert "stacked: 4 cells as one model (loss.lam, seed vary)" in result.out
    assert "sweep: 4 ok, 0 failed, 0 skipped" in result.out
    found = records(train.outputs)
    assert len(found) == 4 and all(v["stacked"]["members"] == 4 for v in found.values())
    assert sorted(v["stacked"]["index"] for v in found.values()) == [0, 1, 2, 3]
    assert set(next(iter(found.values()))["stacked"]["varies"]) == {"loss.lam", "seed"}


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (["loss=cce", "+trainer.gradient_clip_val=1.0"], None),  # found from the config: never grouped
        # found once built: the PML losses branch on tensors, which vmap refuses
        (
            ["loss=triplet", "checkpoint.monitor=val/loss", "checkpoint.mode=min"],
            "stacked: PMLHead does not run stacked (RuntimeError: vmap: ",
        ),
    ],
)
def test_cells_that_cannot_stack_run_alone(train, overrides: list[str], said: str | None) -> None:
    result = train(*SWEEP, "seed=0,1", *overrides)
    assert result.code == 0, result.err
    assert "sweep: 2 ok" in result.out
    assert (
        (said in result.out and "these 2 cells run one by one" in result.out)
        if said
        else "as one model" not in result.out
    )
    assert all("stacked" not in r for r in records(train.outputs).values())


def test_a_member_whose_config_is_refused_fails_alone(train) -> None:
    result = train(*SWEEP, "loss=center", "loss.lam=0.5,7", "seed=0")
    assert result.code == 1
    found = records(train.outputs)
    bad = next(v for k, v in found.items() if "loss.lam=7" in k)
    good = next(v for k, v in found.items() if "loss.lam=0.5" in k)
    assert bad["status"] == "failed" and "lam" in bad["error"] and "\n" not in bad["error"]
    assert good["status"] == "ok"
    assert "sweep: 1 ok, 0 failed" not in result.out and "1 failed" in result.out


def test_an_interrupted_stack_is_recorded_and_the_same_command_redoes_only_it(
    train, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clusterable.stacked import fit

    calls = []
    original = fit.fit

    def interrupt_the_second_stack(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(fit, "fit", interrupt_the_second_stack)
    args = [*SWEEP, "loss=cce,center", "seed=0,1"]
    first = train(*args)
    assert first.code == 130
    assert "sweep: 2 ok, 0 failed, 0 skipped, 2 interrupted" in first.out
    found = records(train.outputs)
    assert sorted(v["status"] for v in found.values()) == ["failed", "failed", "ok", "ok"]
    assert all(v["error"] == "interrupted" for v in found.values() if v["status"] == "failed")
    again = train(*args)
    assert again.code == 0 and "sweep: 2 ok, 0 failed, 2 skipped" in again.out
    assert all(v["status"] == "ok" for v in records(train.outputs).values())


def test_max_members_bounds_a_stack_and_is_checked(train) -> None:
    result = train(*SWEEP, "loss=cce", "seed=0,1,2", "hydra.launcher.max_members=2")
    assert result.code == 0, result.err
    sizes = sorted(r["stacked"]["members"] for r in records(train.outputs).values() if "stacked" in r)
    assert sizes == [2, 2]  # the third cell is a group of one: a single run
    bad = train(*SWEEP, "loss=cce", "seed=0,1", "hydra.launcher.max_members=0")
    assert bad.code == 2 and bad.err.strip() == (
        "error: hydra.launcher.max_members must be a number of cells (1 or more), got 0"
    )


def test_a_group_is_composed_once_the_sweeper_s_configs_handed_to_the_launcher(train, monkeypatch) -> None:
    # Composing a cell costs 0.3-0.6 s: in csrl/fig2 (540 cells) composing each twice cost more than training. The
    # sweeper composes one cell of a group and derives its siblings (tests/test_sweeper.py: derived == composed).
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    composed: list[tuple[str, ...]] = []
    original = ConfigLoaderImpl.load_sweep_config

    def counted(self, master_config, sweep_overrides):
        composed.append(tuple(sweep_overrides))
        return original(self, master_config, sweep_overrides)

    monkeypatch.setattr(ConfigLoaderImpl, "load_sweep_config", counted)
    result = train(*SWEEP, "loss=center", "seed=0,1,2")
    assert result.code == 0 and "sweep: 3 ok" in result.out, result.err
    assert len(composed) == 1
    seeds = sorted(r["config"]["seed"] for r in records(train.outputs).values())
    assert seeds == [0, 1, 2]


def test_groups_side_by_side_share_the_cores_and_memory_by_n_jobs() -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from clusterable.config import CONFIG_DIR
    from clusterable.run import RunContext

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "train", overrides=["hydra/launcher=stacked", "hydra.launcher.n_jobs=3"], return_hydra_config=True
        )
    cfg.hydra.runtime.output_dir = "/tmp/unused"
    # composed, not launched: the launcher has not said how many run side by side; it says so in each cell
    assert RunContext.from_hydra(cfg.hydra).parallel_jobs == 1
    with open_dict(cfg):
        cfg.hydra.launcher.parallel_jobs = 3
    assert RunContext.from_hydra(cfg.hydra).parallel_jobs == 3  # cpu_threads and memory_bound divide by it


def test_groups_train_side_by_side_in_worker_processes_with_n_jobs(train) -> None:
    # Two groups (the encoders differ), each a stack of two seeds, each in its own worker process: every member
    # is its own run, as in one process; each worker divides the cores and the device's memory by n_jobs.
    result = train(*SWEEP, "loss=center", "seed=0,1", "model.hidden=[8,8],[4]", "hydra.launcher.n_jobs=2")
    assert result.code == 0, result.err
    assert "stacked: 2 groups, 2 at a time" in result.out
    assert "sweep: 4 ok, 0 failed, 0 skipped" in result.out
    found = records(train.outputs)
    assert len(found) == 4 and {r["stacked"]["members"] for r in found.values()} == {2}
    assert {tuple(r["stacked"]["cells"]) for r in found.values()} == {
        tuple(sorted(k for k in found if f"hidden={h}" in k)) for h in ("[8,8]", "[4]")
    }
    bad = train(*SWEEP, "loss=cce", "seed=0,1", "hydra.launcher.n_jobs=0")
    assert bad.code == 2 and bad.err.strip() == (
        "error: hydra.launcher.n_jobs must be a number of groups trained at once (1 or more) or auto, got 0"
    )


@pytest.mark.parametrize(
    ("accelerator", "cuda", "cores", "groups", "jobs"),
    [
        ("cpu", False, 2, 36, 2),
        ("cpu", False, 64, 36, 8),
        ("cpu", False, 16, 3, 3),
        ("auto", False, 2, 36, 2),
        ("auto", True, 16, 36, 1),
        ("gpu", True, 16, 36, 1),
    ],
)
def test_n_jobs_auto_trains_a_group_a_cpu_core_and_one_at_a_time_on_a_gpu(
    monkeypatch, accelerator: str, cuda: bool, cores: int, groups: int, jobs: int
) -> None:
    import os

    import torch

    from hydra_plugins.clusterable_launcher import stacked_launcher

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    resolved = [{"trainer": {"accelerator": accelerator}}, None]  # a cell that does not resolve counts as CPU
    assert stacked_launcher.auto_jobs(resolved, groups) == jobs


def test_n_jobs_auto_is_a_number_in_each_cell_s_hydra_record(train, monkeypatch) -> None:
    """``auto`` becomes the launch's number before any cell runs: the runs divide the cores by it, and each
    member's ``.hydra/hydra.yaml`` records it."""
    from hydra_plugins.clusterable_launcher import stacked_launcher

    monkeypatch.setattr(stacked_launcher, "auto_jobs", lambda resolved, groups: 1)  # in this process
    result = train(*SWEEP, "loss=cce", "seed=0,1", "hydra.launcher.n_jobs=auto")
    assert result.code == 0, result.err
    hydra_files = list(train.outputs.rglob(".hydra/hydra.yaml"))
    assert len(hydra_files) == 2 and all("parallel_jobs: 1\n" in f.read_text() for f in hydra_files)


def test_a_group_that_would_train_slower_stacked_runs_one_by_one(train, monkeypatch) -> None:
    """The probe's timings say stacking loses: the members run one by one, each a complete single run, and the
    line says why with both timings."""
    from clusterable.stacked import speed

    slow = speed.StepTimes(stacked_s=0.5, single_s=0.001, members=2, steps=20)
    monkeypatch.setattr(speed, "STEP_OVERHEAD_S", 0.0)
    monkeypatch.setattr(speed, "RUN_OVERHEAD_S", 0.0)
    monkeypatch.setattr(speed, "worth_timing", lambda bound_s, speed_check, compile: speed_check)  # even this short
    monkeypatch.setattr(speed, "time_steps", lambda *args: slow)
    result = train(*SWEEP, "loss=cce", "seed=0,1")
    assert result.code == 0, result.err
    assert (
        "stacked: stacking is slower here: a step of 2 stacked members takes 500.00 ms against 2 x 1.00 ms "
        "one by one (+0.0 ms Lightning's loop): 20 steps project to 10 s stacked, 0 s one by one; these 2 cells run "
        "one by one"
    ) in result.out
    found = records(train.outputs)
    assert len(found) == 2 and all(r["status"] == "ok" and "stacked" not in r for r in found.values())
    for record in train.outputs.rglob("metrics.json"):
        run_dir = record.parent
        assert (run_dir / "checkpoints" / "best.ckpt").is_file() and (run_dir / ".hydra").is_dir()
    # speed_check=false stacks them anyway
    again = train(*SWEEP, "loss=cce", "seed=2,3", "hydra.launcher.speed_check=false")
    assert again.code == 0 and "stacked: 2 cells as one model" in again.out
    wrong = train(*SWEEP, "loss=cce", "seed=0,1", "hydra.launcher.compile=fast")
    assert (
        wrong.code == 2 and wrong.err.strip() == "error: hydra.launcher.compile must be auto, true or false, got 'fast'"
    )
    bad = train(*SWEEP, "loss=cce", "seed=0,1", "hydra.launcher.speed_check=maybe")
    assert bad.code == 2 and bad.err.strip() == "error: hydra.launcher.speed_check must be true or false, got 'maybe'"


def _config(**changes) -> dict:
    config = {
        "seed": 0,
        "optimizer": {"_target_": "torch.optim.Adam", "lr": 0.001},
        "loss": {"_target_": "clusterable.heads.center.CenterLoss", "lam": 0.5},
        "dataset": {"_target_": "clusterable.data.memory.datamodule.InMemoryDataModule", "batch_size": 16},
        "trainer": {"max_epochs": 3},
        "logger": {"csv": {"save_dir": "a"}},
    }
    for key, value in changes.items():
        node, *path = key.split("__")
        target = config
        for part in [node, *path][:-1]:
            target = target[part]
        target[[node, *path][-1]] = value
    return config


def test_the_grouping_rule() -> None:
    same = [
        _config(seed=1),
        _config(loss__lam=0.9),
        _config(loss__alpha=0.9),
        _config(optimizer__lr=0.1),
        _config(logger__csv__save_dir="b"),
    ]
    assert len({stack_key(c) for c in [_config(), *same]}) == 1
    other = [
        _config(trainer__max_epochs=4),
        _config(dataset__batch_size=8),
        _config(optimizer___target_="torch.optim.SGD"),
    ]
    keys = {stack_key(c) for c in [_config(), *other]}
    assert len(keys) == 4
    assert stack_key(_config(scheduler={"_target_": "x"})) is None
    assert plan([_config(), _config(seed=1), None, _config(seed=2), _config(trainer__max_epochs=9)], 2) == [
        [0, 1],
        [2],
        [3],
        [4],
    ]


def test_a_group_larger_than_memory_allows_trains_as_several_stacks(train, monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterable.stacked import stack

    monkeypatch.setattr(stack, "_available_memory", lambda: 1)  # room for one member at a time
    result = train(*SWEEP, "loss=cce", "seed=0,1")
    assert result.code == 0, result.err
    assert "stacked: memory allows 1 members of ~" in result.out and "the 2 cells train as 2 stacks" in result.out
    assert sorted(r["stacked"]["members"] for r in records(train.outputs).values()) == [1, 1]


def test_a_launcher_that_does_not_exist_is_one_line(train) -> None:
    result = train("-m", "hydra/launcher=stack", "loss=cce", "seed=0,1")
    assert result.code == 2 and result.err.strip() == (
        "error: hydra/launcher=stack: no such option of hydra/launcher; options: basic, joblib, stacked, "
        "stacked_per_core, submitit_local, submitit_slurm"
    )


def _enospc(path: str | Path) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def test_a_full_disk_writing_the_members_checkpoints_records_each_member_failed(
    train, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every save writes half its bytes and fails as a full disk does: each member ends as its single run would.
    import torch

    real = torch.save

    def half_then_full(obj, f, *args, **kwargs):
        real(obj, f, *args, **kwargs)
        Path(f).write_bytes(Path(f).read_bytes()[: Path(f).stat().st_size // 2])
        raise _enospc(f)  # the temporary file's name: the write names the checkpoint itself

    monkeypatch.setattr(torch, "save", half_then_full)
    result = train(*SWEEP, "loss=cce", "seed=0,1")
    assert result.code == 1 and "sweep: 0 ok, 2 failed, 0 skipped (" in result.out, result
    assert "Traceback" not in result.out + result.err
    found = records(train.outputs)
    assert len(found) == 2
    for cell, record in found.items():
        assert record["status"] == "failed" and record["error"].startswith("no space left on device writing ")
        assert record["error"].endswith(f"{cell}/checkpoints/best.ckpt"), record["error"]
        (run_dir,) = [p.parent for p in train.outputs.rglob("metrics.json") if p.parent.name == cell]
        assert not list((run_dir / "checkpoints").iterdir())  # neither half a best.ckpt nor a temporary file


def test_a_full_disk_writing_the_next_cells_files_records_the_prepared_members_failed(
    train, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hydra's own files of the stack's second cell cannot be written: the first cell, locked and cleaned for the
    # stack, is recorded failed with the one line; the sweep stops there, as the basic launcher's does.
    from hydra.core import utils

    real, calls = utils._save_config, []

    def save_config(cfg, filename, output_dir):
        calls.append(filename)
        if calls.count("config.yaml") > 1:
            raise _enospc(Path(output_dir) / filename)
        return real(cfg, filename, output_dir)

    monkeypatch.setattr(utils, "_save_config", save_config)
    result = train(*SWEEP, "loss=cce", "seed=0,1,2")
    assert result.code == 1 and "sweep: 0 ok, 1 failed, 0 skipped (" in result.out, result
    assert "Traceback" not in result.out + result.err
    error, failed = result.error_lines()[0], result.error_lines()[1:]
    assert error.startswith("error: no space left on device writing ") and "seed=1" in error, error
    assert error.endswith(".hydra/config.yaml"), error
    ((cell, record),) = records(train.outputs).items()
    assert "seed=0" in cell and record["status"] == "failed"
    assert record["error"] == error.removeprefix("error: ")
    assert failed == [f"failed: {cell}: {record['error']}"]  # the summary's line of the one cell recorded


# A value each refused option takes in a run that the stacked loop does not implement.
REFUSED_SAMPLES = {
    "validation_evaluators": ["clustering"],
    "channels_last": True,
    "trainable": "embedding_layer",
    "checkpoint.rule": "boudiaf",
    "scheduler": {"_target_": "clusterable.schedules.warmup_cosine"},
    "callbacks": {"early_stopping": {"_target_": "lightning.pytorch.callbacks.EarlyStopping", "monitor": "val/acc"}},
    "trainer.devices": 2,
    "trainer.strategy": "ddp",
    "trainer.num_nodes": 2,
    "trainer.precision": "bf16-mixed",
    "trainer.limit_train_batches": 0.5,
    "trainer.limit_val_batches": 0.5,
    "trainer.check_val_every_n_epoch": 2,
    "trainer.val_check_interval": 0.5,
    "trainer.max_steps": 10,
    "trainer.min_steps": 10,
    "trainer.min_epochs": 2,
    "trainer.max_time": "00:01:00:00",
    "trainer.fast_dev_run": True,
    "trainer.overfit_batches": 2,
    "trainer.accumulate_grad_batches": 2,
    "trainer.gradient_clip_val": 1.0,
    "trainer.gradient_clip_algorithm": "value",
    "trainer.deterministic": True,
    "trainer.benchmark": True,
    "trainer.detect_anomaly": True,
    "trainer.profiler": "simple",
    "trainer.plugins": ["x"],
    "trainer.callbacks": ["x"],
    "trainer.sync_batchnorm": True,
    "trainer.reload_dataloaders_every_n_epochs": 1,
    "trainer.logger": True,
}


def test_every_option_of_a_run_is_classified_by_the_stack_and_each_refusal_is_enforced() -> None:
    """The stack's tables name every top-level key and config group a run has and every option of Lightning's
    Trainer: a new one fails here until it is classified. Each refused option, set, makes a cell run alone."""
    import inspect

    import lightning

    from clusterable.run.checks import GROUPS, TOP_LEVEL
    from clusterable.stacked.grouping import TOP_LEVEL_RULES, TRAINER_RULES, why_not_stackable

    assert set(TOP_LEVEL_RULES) == set(TOP_LEVEL) | set(GROUPS)
    trainer_options = set(inspect.signature(lightning.Trainer.__init__).parameters) - {"self"}
    assert set(TRAINER_RULES) == trainer_options
    refused = {f"trainer.{k}" for k, r in TRAINER_RULES.items() if not isinstance(r, str)}
    refused |= {k for k, r in TOP_LEVEL_RULES.items() if not isinstance(r, str)}
    assert refused == set(REFUSED_SAMPLES)
    assert why_not_stackable(_config()) is None
    for key, value in REFUSED_SAMPLES.items():
        config = _config()
        node, _, option = key.rpartition(".")
        (config.setdefault(node, {}) if node else config)[option] = value
        assert why_not_stackable(config) is not None, key
    unknown = _config()
    unknown["trainer"]["new_option"] = 1
    assert why_not_stackable(unknown) == "trainer.new_option (the stacked loop does not know it) has no stacked version"
