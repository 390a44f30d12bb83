"""Each run folder keeps its console lines (``clusterable.logs``): a single run's, a stacked member's with its
stack's, never another run's; the console shows them as printed; rank zero only; no empty log."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

STAMP = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]\[clusterable\.[\w.]+\]\[(INFO|WARNING|ERROR)\] - ")
QUICK = ["dataset=iris", "loss=center", "trainer.max_epochs=1", "logger=none", "trainer.enable_progress_bar=false"]


def _log(run_dir: Path) -> str:
    return (run_dir / "clusterable.log").read_text()


def test_a_single_run_keeps_its_console_lines_in_its_folder(train) -> None:
    result = train(*QUICK)
    assert result.code == 0, result.err
    run_dir = Path(re.search(r"^run dir: (.+)$", result.out, re.M).group(1))
    assert result.out.splitlines()[0] == "run: ok"  # the console: the message as it was printed
    log = _log(run_dir)
    logged = [line for line in log.splitlines() if STAMP.match(line)]
    assert logged and STAMP.sub("", logged[0]) == "run: ok"  # the file: with its time, logger and level
    assert f"run dir: {run_dir}" in log and "test/acc" in log


def test_a_failed_run_says_why_on_stderr_and_in_its_log(train) -> None:
    result = train(*QUICK, "checkpoint.monitor=val/nope")
    assert result.code == 1
    error = result.err.strip().splitlines()[-1]
    assert error.startswith("error: checkpoint.mode: which way checkpoint.monitor=val/nope improves is not known")
    assert "error:" not in result.out
    run_dir = Path(re.search(r"^run dir: (.+)$", result.out, re.M).group(1))
    assert f"[ERROR] - {error}" in _log(run_dir)


def test_each_stacked_member_keeps_its_stack_s_lines_and_only_its_own(train) -> None:
    result = train("-m", *QUICK, "seed=0,1", "hydra/launcher=stacked", "hydra.launcher.speed_check=false")
    assert result.code == 0, result.err
    assert "stacked: 2 cells as one model (seed vary), 1 epochs on cpu" in result.out
    sweep = train.outputs / "multirun" / "full" / "default"
    members = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert len(members) == 2
    for member, other in (members, members[::-1]):
        log = _log(member)
        assert "stacked: 2 cells as one model (seed vary)" in log and "stacked: epoch 1/1" in log
        assert f"run dir: {member}" in log and f"run dir: {other}" not in log
        assert log.count("run: ok") == 1
    # run again: the finished cells are skipped, their logs left as they were (the skip is said on the console)
    before = {m: _log(m) for m in members}
    again = train("-m", *QUICK, "seed=0,1", "hydra/launcher=stacked", "hydra.launcher.speed_check=false")
    assert again.code == 0 and again.out.count("skip ") == 2
    assert {m: _log(m) for m in members} == before


def test_a_line_reaches_each_open_log_once_and_nothing_off_rank_zero(tmp_path, monkeypatch, capsys) -> None:
    from clusterable.logs import get_logger, run_log

    log = get_logger("test_run_logs")
    assert log.name == "clusterable.test_run_logs"
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    with run_log(first, second), run_log(first):  # a member's own block inside its stack's
        log.info("both")
        with run_log(second):
            log.warning("again")
    log.info("after")  # no log open: the console only
    assert first.read_text().count("both") == 1 and "again" in first.read_text()
    assert second.read_text().count("again") == 1 and "after" not in second.read_text()
    out, err = capsys.readouterr()
    assert out == "both\nafter\n" and err == "again\n"
    with run_log(tmp_path / "quiet.log"):
        pass
    assert not (tmp_path / "quiet.log").exists()  # nothing said, no file
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setattr("clusterable.logs.rank", lambda: 1)
    with run_log(tmp_path / "rank1.log"):
        log.info("rank one")
    assert capsys.readouterr() == ("", "") and not (tmp_path / "rank1.log").exists()


def test_the_clusterable_logger_does_not_repeat_its_lines_through_the_root_logger(capsys) -> None:
    from clusterable.logs import get_logger

    root = logging.getLogger()
    handler = logging.StreamHandler()
    root.addHandler(handler)
    try:
        get_logger("x").info("once")
    finally:
        root.removeHandler(handler)
    out, err = capsys.readouterr()
    assert out == "once\n" and err == ""


@pytest.mark.parametrize("name", ["clusterable.run.wrapper", "hydra_plugins.clusterable_launcher.stacked_launcher"])
def test_every_module_logs_below_the_clusterable_logger(name: str) -> None:
    from clusterable.logs import get_logger

    assert get_logger(name).name.startswith("clusterable.")
