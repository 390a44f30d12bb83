"""Shared fixtures: run ``train.py`` as a user would, in this process (``train``) or in a subprocess (``cli``),
in a temporary working directory with outputs under ``tmp_path / "outputs"``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.running import Result

ROOT = Path(__file__).resolve().parents[1]
# What a run's loggers write when their folder resolves to the working directory, which is the repository's root
# when pytest starts there (a csv/metrics.csv of a stacked-member test's draft was once committed that way).
STRAY = ("csv", "lightning_logs", "wandb")


# The fixtures that run a whole command (train.py in this process, a script in a subprocess): a test that takes one
# is marked ``command`` here, not by hand, and ``make test-fast`` leaves it out.
COMMAND_FIXTURES = frozenset({"train", "cli", "launch", "browser"})  # browser: headless Chromium, tests/test_site.py


def pytest_configure(config: pytest.Config) -> None:
    # One torch thread per test process: the tests' tensors are tiny, so a second thread buys nothing but its
    # start-up, and under ``pytest -n 2`` (``make test-fast``) each worker owns one core; two threads apiece would
    # put four on two cores (a CPU job against a second thread runs many times slower).
    import torch

    torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if COMMAND_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.command)


@pytest.fixture(autouse=True)
def _nothing_written_into_the_repository() -> Iterator[None]:
    """Fail the test after which a logger's folder appeared in the repository's root, naming it."""
    before = {name for name in STRAY if (ROOT / name).exists()}
    yield
    new = [name for name in STRAY if name not in before and (ROOT / name).exists()]
    assert not new, (
        f"this test wrote {', '.join(f'{n}/' for n in new)} into the repository ({ROOT}): a logger's save_dir "
        "resolved to the working directory; give its runs a folder under tmp_path"
    )


def _env(outputs: Path) -> dict[str, str]:
    return {
        "CLUSTERABLE_OUTPUTS": str(outputs),
        "CLUSTERABLE_DATA": str(outputs / "data"),
        "WANDB_MODE": "offline",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
        "HYDRA_FULL_ERROR": "0",
        # One CPU thread, whatever else runs on the machine: a run's numbers never depend on the load around it.
        "CLUSTERABLE_TORCH_THREADS": "1",
    }


@pytest.fixture
def train(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    """``train("loss=cce", ...)`` -> Result(exit code, stdout, stderr) of ``clusterable.cli.main`` run in this
    process (no ~7 s interpreter start per call)."""
    from clusterable.cli import main

    outputs = tmp_path / "outputs"
    for key, value in _env(outputs).items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["train.py", *args])
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        out, err = capsys.readouterr()
        return Result(code, out, err)

    run.outputs = outputs  # type: ignore[attr-defined]
    return run


@pytest.fixture
def cli(tmp_path: Path):
    """``cli("train.py", "loss=cce", ...)`` -> CompletedProcess; outputs go to ``tmp_path / "outputs"``."""
    outputs = tmp_path / "outputs"

    def run(script: str, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [sys.executable, str(ROOT / script), *args],
            cwd=tmp_path,
            env={**os.environ, **_env(outputs)},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{script} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    run.outputs = outputs  # type: ignore[attr-defined]
    return run


@pytest.fixture
def launch(tmp_path: Path):
    """``launch("-m", "loss=cce,center", ...)`` -> the ``train.py`` process started with those arguments, not waited
    for (its own process group, as a shell starts a command: a test sends it signals), outputs under
    ``tmp_path / "outputs"``."""

    def start(*args: str) -> subprocess.Popen:
        outputs = tmp_path / "outputs"
        env = {
            **os.environ,
            **_env(outputs),
            "OMP_NUM_THREADS": "1",
            "HYDRA_FULL_ERROR": os.environ.get("HYDRA_FULL_ERROR", ""),
        }
        env.pop("CLUSTERABLE_TORCH_THREADS")
        return subprocess.Popen(
            [sys.executable, str(ROOT / "train.py"), *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    return start
