"""Sweeps that survive Ctrl-C, SIGTERM, each other and a full disk: a joblib sweep stopped by Ctrl-C (its workers
included), every launcher stopped by SIGTERM (a cluster's time limit) as by Ctrl-C, a cell locked while it runs,
``-m`` with DDP refused before anything runs, and a full disk ending a run in one line with no truncated checkpoint
left behind.

The slow head (``loss=slow``, tests/helpers/slow_heads.py) sleeps every step and writes its process id to
``started/`` when it begins training, so a test knows a cell runs, and in which process.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers.running import SEARCHPATH, all_metrics, metrics_files

ROOT = Path(__file__).resolve().parents[1]
QUICK = ["trainer.enable_progress_bar=false", "evaluator=[classification]", "torch_threads=1"]
# Four slow cells (about 2 s an epoch each) on two joblib workers.
JOBLIB_SWEEP = [
    "-m",
    SEARCHPATH,
    "hydra/launcher=joblib",
    "hydra.launcher.n_jobs=2",
    "loss=slow",
    "seed=0,1,2,3",
    "name=survive",
    "trainer.max_epochs=2",
    *QUICK,
]


def _wait_for_start(tmp_path: Path, proc: subprocess.Popen, timeout: float = 120) -> list[int]:
    """The process ids of the cells that started training, once one has."""
    started, deadline = tmp_path / "started", time.monotonic() + timeout
    while time.monotonic() < deadline:
        if started.is_dir() and any(started.iterdir()):
            return [int(p.name) for p in started.iterdir()]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("no cell started training")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("to_group", [False, True], ids=["sigint-to-main", "ctrl-c-in-terminal"])
def test_ctrl_c_stops_a_joblib_sweep_and_its_workers_and_the_same_command_resumes(tmp_path, launch, to_group):
    proc = launch(*JOBLIB_SWEEP)
    try:
        _wait_for_start(tmp_path, proc)
        time.sleep(0.5)  # both workers under way
        if to_group:  # a terminal's Ctrl-C reaches every process of the command, the workers included
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert time.monotonic() - sent < 20, "Ctrl-C took more than seconds to stop the sweep"
    assert "Traceback" not in out + err, err
    (summary,) = [line for line in out.splitlines() if line.startswith("sweep: ")]
    assert "interrupted" in summary and " 0 ok," in summary, (out, err)
    workers = [int(p.name) for p in (tmp_path / "started").iterdir()]
    time.sleep(1)
    assert workers and not [pid for pid in workers if _alive(pid)], "a worker outlived its sweep"
    runs = all_metrics(tmp_path / "outputs")
    assert runs and all(m["status"] == "failed" and m["error"] == "interrupted" for m in runs)
    assert f"{len(runs)} interrupted" in summary
    assert not list((tmp_path / "outputs").rglob(".joblib-*")), "the launch's control folder was left behind"
    if not to_group:
        return  # the resume is the same either way: checked once
    again = launch(*JOBLIB_SWEEP)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0 and "sweep: 4 ok, 0 failed, 0 skipped (" in out, (out, err)
    assert sorted(m["status"] for m in all_metrics(tmp_path / "outputs")) == ["ok"] * 4


# 20-30 s each (every command starts an interpreter); the in-process versions follow.
# stacked-parallel: two groups (the encoders differ) of two members, each group in a worker (n_jobs=2).
LAUNCHERS = {
    "stacked": [],
    "basic": [],
    "joblib": ["hydra.launcher.n_jobs=2"],
    "stacked-parallel": ["hydra.launcher.n_jobs=2", "model.hidden=[8],[4]"],
}


@pytest.mark.parametrize("launcher", list(LAUNCHERS))
def test_sigterm_stops_a_sweep_as_ctrl_c_does_and_the_same_command_resumes(tmp_path, launch, launcher):
    # A cluster's time limit: SIGTERM to the command. Each launcher records the cells it runs `interrupted`, prints
    # the summary and exits 143 (128 + SIGTERM); a stacked grid's members are each recorded.
    args = [
        "-m",
        SEARCHPATH,
        f"hydra/launcher={launcher.split('-')[0]}",
        "loss=slow",
        "seed=0,1",
        "name=sigterm",
        "trainer.max_epochs=2",
        *QUICK,
        *LAUNCHERS[launcher],
    ]
    proc = launch(*args)
    try:
        _wait_for_start(tmp_path, proc)
        time.sleep(0.5)  # under way (both joblib workers)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, (out, err)
    assert "Traceback" not in out + err, err
    runs = all_metrics(tmp_path / "outputs")
    assert runs and all(m["status"] == "failed" and m["error"] == "interrupted" for m in runs), runs
    # The stack's two members, the basic launcher's one cell, the joblib cells under way, the groups' members.
    assert len(runs) == {"stacked": 2, "basic": 1}.get(launcher, len(runs))
    if launcher == "stacked-parallel":  # each worker had prepared its group's two cells, or was training them
        assert len(runs) in (2, 4), runs
        assert not list((tmp_path / "outputs").rglob(".joblib-*")), "the launch's control folder was left behind"
    (summary,) = [line for line in out.splitlines() if line.startswith("sweep: ")]
    assert summary.startswith(f"sweep: 0 ok, 0 failed, 0 skipped, {len(runs)} interrupted ("), (out, err)
    assert err.count("interrupted: ") == len(runs) and "run the same command again" in err
    if not launcher.startswith("stacked"):
        return  # the resume is the launchers' own, checked under Ctrl-C; the stacked ones here
    again = launch(*args)
    out, err = again.communicate(timeout=300)
    cells = 2 if launcher == "stacked" else 4
    assert again.returncode == 0 and f"sweep: {cells} ok, 0 failed, 0 skipped (" in out, (out, err)
    runs = all_metrics(tmp_path / "outputs")
    assert [m["status"] for m in runs] == ["ok"] * cells and {m["stacked"]["members"] for m in runs} == {2}


def test_sigterm_in_a_run_records_it_interrupted_with_exit_status_143_and_the_same_command_resumes(train):
    # The head sends SIGTERM to this process in its second epoch, inside Lightning's fit (whose own SIGTERM handler
    # runs first): the run is recorded as Ctrl-C records it, with the shell's status of a SIGTERM.
    before = signal.getsignal(signal.SIGTERM)
    args = [
        "-m",
        SEARCHPATH,
        "loss=interrupt_once",
        "+loss.send=SIGTERM",
        "name=sigterm",
        "trainer.max_epochs=3",
        *QUICK,
    ]
    first = train(*args)
    assert first.code == 143, first
    assert signal.getsignal(signal.SIGTERM) == before  # the command's handlers are its own
    (line,) = first.error_lines()
    assert line.startswith("interrupted: ") and "sigterm" in line and "run the same command again" in line
    assert "sweep: 0 ok, 0 failed, 0 skipped, 1 interrupted (" in first.out and "Traceback" not in first.err
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "failed" and m["error"] == "interrupted"
    second = train(*args)
    assert second.code == 0 and "sweep: 1 ok, 0 failed, 0 skipped (" in second.out, second
    assert [m["status"] for m in all_metrics(train.outputs)] == ["ok"]


def test_sigterm_records_every_member_of_a_stack_and_the_same_command_resumes(train, monkeypatch):
    from clusterable import interrupts
    from clusterable.stacked import fit

    original, calls = fit.fit, []

    def terminated(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # the stack's first epoch: no Lightning, its handler only
            # Else SIGTERM would end the test session.
            assert signal.getsignal(signal.SIGTERM) is interrupts.interrupt
            os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)

    monkeypatch.setattr(fit, "fit", terminated)
    args = [
        "-m",
        "hydra/launcher=stacked",
        "dataset=iris",
        "loss=cce",
        "seed=0,1",
        "name=stacked_sigterm",
        "logger=none",
        *QUICK,
    ]
    first = train(*args)
    assert first.code == 143 and "sweep: 0 ok, 0 failed, 0 skipped, 2 interrupted (" in first.out, first
    lines = first.error_lines()
    assert len(lines) == 2 and all(line.startswith("interrupted: ") for line in lines), lines
    runs = all_metrics(train.outputs)
    assert len(runs) == 2 and all(m["status"] == "failed" and m["error"] == "interrupted" for m in runs)
    again = train(*args)
    assert again.code == 0 and "sweep: 2 ok, 0 failed, 0 skipped (" in again.out, again
    assert [m["status"] for m in all_metrics(train.outputs)] == ["ok", "ok"]


def test_single_runs_started_at_one_instant_each_get_their_own_folder(train, monkeypatch):
    # A shell loop or a job array starts runs of one config in the same second, each its own process: the process
    # id in the folder's name keeps them apart (before, they shared a folder named to the second: busy, or skip).
    from datetime import datetime
    from types import SimpleNamespace

    from clusterable import resolvers

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 1, 2, 3, 4, 5, 678901)

    monkeypatch.setattr(resolvers, "datetime", Frozen)
    for pid in (101, 102, 103):
        monkeypatch.setattr(resolvers, "os", SimpleNamespace(getpid=lambda pid=pid: pid))
        result = train("dataset=iris", "loss=cce", "logger=none", *QUICK)
        assert result.code == 0 and "busy" not in result.out and "skip" not in result.out, result
    runs = {p.parent.name: json.loads(p.read_text())["status"] for p in metrics_files(train.outputs)}
    assert runs == {f"2026-01-02_03-04-05.678901_{pid}": "ok" for pid in (101, 102, 103)}
    assert {p.parent.parent.name for p in metrics_files(train.outputs)} == {"default"}  # runs/<name>/<stamp>


def test_three_single_runs_started_together_each_get_their_own_folder(tmp_path, launch):
    # Three interpreters at once (26 s on 2 busy cores): started together, they may meet in one second.
    args = ["dataset=iris", "loss=cce", "logger=none", "debug=fast", *QUICK]
    procs = [launch(*args) for _ in range(3)]
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0 and "busy" not in out and "Traceback" not in err, (out, err)
    files = metrics_files(tmp_path / "outputs")
    assert len({p.parent for p in files}) == 3, files
    assert all(json.loads(p.read_text())["status"] == "ok" for p in files)
    assert {p.parent.name.rsplit("_", 1)[1] for p in files} == {str(p.pid) for p in procs}  # each its own


def test_a_running_cell_is_busy_for_a_second_sweep_which_never_touches_it(train, tmp_path, launch):
    args = ["-m", SEARCHPATH, "loss=slow", "name=locked", "trainer.max_epochs=3", *QUICK]
    first = launch(*args)
    try:
        _wait_for_start(tmp_path, first)
        second = train(*args)  # the same cell, while the first process trains it
        assert second.code == 0 and "Traceback" not in second.out + second.err, second
        (busy,) = [line for line in second.out.splitlines() if line.startswith("busy ")]
        assert busy.endswith(": another process runs this cell") and "loss=slow" in busy
        assert "sweep: 0 ok, 0 failed, 0 skipped, 1 busy (" in second.out
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0 and "sweep: 1 ok, 0 failed, 0 skipped (" in out, (out, err)
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "ok"
    cell = metrics_files(train.outputs)[0].parent
    assert (cell / "checkpoints" / "best.ckpt").exists()  # the first process's checkpoint, never cleaned away
    third = train(*args)  # once it is recorded, the lock is free: a re-run reuses the finished cell
    assert "sweep: 0 ok, 0 failed, 1 skipped (" in third.out


def test_two_concurrent_sweeps_on_one_folder_share_the_cells_without_a_traceback(tmp_path, launch):
    args = ["-m", SEARCHPATH, "loss=slow", "seed=0,1", "name=shared", "trainer.max_epochs=2", *QUICK]
    procs = [launch(*args)]
    _wait_for_start(tmp_path, procs[0])
    procs.append(launch(*args))
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0 and "Traceback" not in out + err, (out, err)
    runs = all_metrics(tmp_path / "outputs")
    assert len(runs) == 2 and all(m["status"] == "ok" for m in runs)
    # Each cell was trained once: by one sweep, the other found it busy or finished.
    trained = sum(int(line.split()[1]) for out, _ in results for line in out.splitlines() if line.startswith("sweep:"))
    assert trained == 2, results


def test_the_cell_lock_is_held_until_the_run_is_recorded_and_released_if_the_process_dies(tmp_path):
    from clusterable.run.cell import lock_cell, release_cell

    cell = tmp_path / "cell"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from clusterable.run.cell import "
            f"lock_cell; assert lock_cell(Path({str(cell)!r})); print('locked', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert not lock_cell(cell)  # another process holds it
    finally:
        holder.kill()
        holder.wait()
    assert lock_cell(cell)  # the kernel released the dead process's lock
    assert lock_cell(cell)  # this process's own lock: taken again without waiting on itself
    release_cell(cell)


@pytest.mark.parametrize(
    "overrides",
    [
        ["trainer=ddp"],
        ["+trainer.strategy=ddp", "trainer.accelerator=cpu"],
        ["trainer.devices=2", "trainer.accelerator=cpu"],
        ["trainer.devices=1,2", "trainer.accelerator=cpu"],  # a swept trainer: refused by its cell
    ],
)
def test_multirun_with_ddp_is_refused_in_one_line_before_anything_runs(train, overrides):
    result = train("-m", "loss=cce,center", "name=ddp", *QUICK, *overrides)
    assert result.code == 2, result
    (line,) = result.error_lines()
    assert line.startswith("error: -m with DDP (") and "without -m" in line, line
    assert "Traceback" not in result.out + result.err and "sweep:" not in result.out
    assert not metrics_files(train.outputs)


def test_a_single_ddp_run_is_not_refused_by_the_sweep_check():
    from omegaconf import OmegaConf

    from clusterable.hydra_callbacks import ddp_in_sweep

    assert ddp_in_sweep(OmegaConf.create({"trainer": {"strategy": "auto", "devices": 1}})) is None
    slurm = {
        "trainer": {"strategy": "ddp", "devices": 4},
        "hydra": {"runtime": {"choices": {"hydra/launcher": "submitit_slurm"}}},
    }
    assert ddp_in_sweep(OmegaConf.create(slurm)) is None  # each SLURM job starts its own ranks
    assert ddp_in_sweep(OmegaConf.create({"trainer": {"strategy": "auto", "devices": "0,1"}})) is not None
    assert ddp_in_sweep(OmegaConf.create({"trainer": {"strategy": "auto", "devices": -1}})) is not None


def _full_disk_after(monkeypatch: pytest.MonkeyPatch, saves_ok: int) -> None:
    """Let ``saves_ok`` checkpoint saves through, then make every save write half its bytes and fail as a full
    disk does (the file is left truncated, as a real writer leaves it)."""
    from lightning.fabric.plugins.io import torch_io

    real, calls = torch_io._atomic_save, []

    def save(checkpoint, path):
        calls.append(path)
        if len(calls) <= saves_ok:
            return real(checkpoint, path)
        real(checkpoint, path)
        data = Path(path).read_bytes()
        Path(path).write_bytes(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch_io, "_atomic_save", save)


def test_a_full_disk_ends_the_run_in_one_line_and_leaves_no_truncated_checkpoint(train, monkeypatch):
    _full_disk_after(monkeypatch, saves_ok=0)
    result = train(SEARCHPATH, "loss=cce", "trainer.max_epochs=2", *QUICK)
    assert result.code == 1, result
    (line,) = result.error_lines()
    assert line.startswith("error: no space left on device writing ") and line.endswith("best.ckpt"), line
    assert "Traceback" not in result.out + result.err
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "failed" and m["error"] == line.removeprefix("error: ")
    run_dir = metrics_files(train.outputs)[0].parent
    assert not (run_dir / "traceback.txt").exists()
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == []  # neither half a best.ckpt nor a temp file


def test_a_full_disk_after_a_good_epoch_keeps_that_epoch_s_checkpoint_whole(train, monkeypatch):
    _full_disk_after(monkeypatch, saves_ok=1)
    result = train(
        SEARCHPATH, "loss=cce", "trainer.max_epochs=4", "checkpoint.monitor=train/loss", "checkpoint.mode=min", *QUICK
    )
    assert result.code == 1 and "no space left on device writing" in result.err, result
    run_dir = metrics_files(train.outputs)[0].parent
    (ckpt,) = (run_dir / "checkpoints").iterdir()
    assert ckpt.name == "best.ckpt" and torch.load(ckpt, weights_only=False)["epoch"] == 0  # loads: not truncated


def test_a_full_disk_in_a_sweep_still_ends_with_the_summary(train, monkeypatch):
    _full_disk_after(monkeypatch, saves_ok=0)
    result = train("-m", "loss=cce,center", "name=fulldisk", "trainer.max_epochs=1", *QUICK)
    assert result.code == 1 and "sweep: 0 ok, 2 failed, 0 skipped (" in result.out, result
    lines = result.error_lines()  # one a cell: each names its own checkpoint
    assert len(lines) == 2 and all(" no space left on device writing " in line for line in lines), lines
    assert "Traceback" not in result.out + result.err


def test_a_config_file_edited_during_a_sweep_fails_the_later_cells_not_mixes_them(train, monkeypatch, tmp_path):
    # Hydra composes each cell when it starts it: an experiment edited after the first cell would give the second
    # another config under the same experiment. The second cell is refused in one line; the first is kept.
    from clusterable.run import wrapper

    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    mine = conf / "mine.yaml"
    mine.write_text("# @package _global_\nname: mine\ntrainer:\n  max_epochs: 1\n")
    real, printed = wrapper.print_summary, []

    def summary_then_edit(*args, **kwargs):
        real(*args, **kwargs)
        printed.append(1)
        mine.write_text("# @package _global_\nname: mine\ntrainer:\n  max_epochs: 2\n")

    monkeypatch.setattr(wrapper, "print_summary", summary_then_edit)
    result = train(
        "-m",
        f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
        "experiment=mine",
        "loss=cce",
        "seed=0,1",
        "hydra/launcher=basic",
        *QUICK[1:],
    )
    assert result.code == 1 and "sweep: 1 ok, 1 failed, 0 skipped (" in result.out, result
    (line,) = result.error_lines()
    assert f"the config files changed after this sweep started ({mine} edited): one sweep never mixes" in line
    assert [m["config"]["trainer"]["max_epochs"] for m in all_metrics(train.outputs)] == [1]
    # the same command, the files as they are now: the finished cell is kept, the other trains
    again = train(
        "-m",
        f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
        "experiment=mine",
        "loss=cce",
        "seed=1",
        "hydra/launcher=basic",
        *QUICK[1:],
    )
    assert again.code == 0, again


def test_nothing_writable_at_all_is_still_one_line(train, monkeypatch):
    # The checkpoint and metrics.json both fail: the run cannot be recorded, but it says why and exits 1.
    import clusterable.record as record

    _full_disk_after(monkeypatch, saves_ok=0)

    def dump(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(record.json, "dump", dump)
    result = train("loss=cce", "trainer.max_epochs=1", *QUICK)
    assert result.code == 1, result
    (line,) = result.error_lines()
    assert line.startswith("error: no space left on device writing ") and "best.ckpt" in line, line
    assert "Traceback" not in result.out + result.err
    assert not metrics_files(train.outputs) and not list(train.outputs.rglob(".metrics-*"))


def test_an_outcome_record_that_cannot_be_written_does_not_crash_the_cell(tmp_path, monkeypatch):
    from clusterable import outcomes

    records = tmp_path / "records"
    records.mkdir()
    monkeypatch.setenv(outcomes.RECORDS_ENV, str(records))

    def write_text(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_text", write_text)
    outcomes.record_outcome(tmp_path / "cell", "ok", None)
    monkeypatch.undo()
    assert not list(records.iterdir())  # nothing half-written for the summary to read


def test_a_joblib_launcher_without_workers_is_refused_in_one_line(train):
    result = train("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=0", "loss=cce,center", *QUICK)
    assert result.code == 2, result
    (line,) = result.error_lines()
    assert line.startswith("error: hydra.launcher.n_jobs must be a number of workers"), line
    assert "Traceback" not in result.out + result.err and not metrics_files(train.outputs)


def test_a_full_disk_outside_any_run_still_ends_the_sweep_with_its_summary(train, monkeypatch):
    # Hydra's own files of the second cell cannot be written: the first cell's outcome is still summed up.
    from hydra.core import utils

    real, calls = utils._save_config, []

    def save_config(cfg, filename, output_dir):
        calls.append(filename)
        if calls.count("config.yaml") > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(Path(output_dir) / filename))
        return real(cfg, filename, output_dir)

    monkeypatch.setattr(utils, "_save_config", save_config)
    result = train("-m", "loss=cce,center", "name=hydrafull", "trainer.max_epochs=1", *QUICK)
    assert result.code == 1, result
    (line,) = result.error_lines()
    assert line.startswith("error: no space left on device writing ") and "config.yaml" in line, line
    assert "sweep: 1 ok, 0 failed, 0 skipped (" in result.out and "Traceback" not in result.out + result.err


def test_signals_held_off_are_dropped_by_a_handler_not_ignored():
    # SIG_IGN installed while a signal is pending makes CPython raise "OSError: Signal 15 ignored due to race
    # condition" when it gets to it: a traceback among a parallel sweep's interrupt lines. Held off by a handler
    # that does nothing, a signal sent in the shielded body is simply dropped.
    import signal

    from clusterable import interrupts
    from hydra_plugins.clusterable_launcher import _workers

    before = {s: signal.getsignal(s) for s in interrupts.INTERRUPTS}
    try:
        with interrupts.shielded():
            assert all(signal.getsignal(s) is interrupts.held for s in interrupts.INTERRUPTS)
            os.kill(os.getpid(), signal.SIGTERM)  # handled at the next bytecode: dropped
            for _ in range(1000):
                pass
        _workers._ignore_interrupts()
        assert all(signal.getsignal(s) is interrupts.held for s in interrupts.INTERRUPTS)
        os.kill(os.getpid(), signal.SIGINT)
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def test_ctrl_c_mid_trial_and_the_same_search_command_completes_the_remaining_trials(tmp_path, launch) -> None:
    """An Optuna search cut off inside its first trial: the rerun asks the interrupted trial's parameters again and
    completes all ``n_trials``; the interrupted trial is kept apart, never counted as one of them."""
    optuna = pytest.importorskip("optuna")
    args = [
        "-m",
        SEARCHPATH,
        "hparams_search=slow_lr",
        "dataset=iris",
        "loss=slow",
        "trainer.max_epochs=2",
        *QUICK,
    ]
    proc = launch(*args)
    try:
        _wait_for_start(tmp_path, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "Traceback" not in out + err, (out, err)
    again = launch(*args)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, (out, err)
    assert "optuna: resuming study search/slow_lr: 0 of 2 trials finished; 1 interrupted, asked again" in out
    assert "(2 of 3 trials complete, 1 interrupted (asked again))" in out, out
    db = tmp_path / "outputs" / "multirun" / "full" / "search" / "slow_lr" / "optuna.db"
    study = optuna.load_study(study_name="search/slow_lr", storage=f"sqlite:///{db}")
    first, *rest = study.trials
    assert first.state == optuna.trial.TrialState.FAIL and study.user_attrs["interrupted_trials"] == [0]
    assert [t.state for t in rest] == [optuna.trial.TrialState.COMPLETE] * 2
    assert rest[0].params == first.params  # asked again
