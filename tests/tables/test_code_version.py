"""The code version a run records where there is no git checkout (an installed wheel): the SHA-256 of the package's
files, the same for one build wherever it lies and different when any file differs, said to be a package hash; and
the tables refuse runs of two such versions unless pooled on purpose. Checked on a fake installed tree (copies of
the package's files in a temporary site-packages), not on a built wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clusterable.record import RunRecord
from clusterable.rundir import code_version, package_hash, package_roots
from tables.rundirs import write_run

SRC = Path(__file__).resolve().parents[2] / "src"
NO_BYTECODE = shutil.ignore_patterns("__pycache__", "*.pyc")


def installed(where: Path) -> Path:
    """A fake ``site-packages`` at ``where``: the package and our Hydra plugins copied as a wheel lays them out;
    returns the package's folder."""
    shutil.copytree(SRC / "clusterable", where / "clusterable", ignore=NO_BYTECODE)
    for plugin in ("clusterable_launcher", "clusterable_sweeper"):
        shutil.copytree(SRC / "hydra_plugins" / plugin, where / "hydra_plugins" / plugin, ignore=NO_BYTECODE)
    return where / "clusterable"


def recorded_version(site: Path, cwd: Path) -> dict:
    """``code_version()`` as the installed copy records it, in a fresh interpreter that imports it from ``site``
    (put first on the path, as an installed package is found)."""
    env = {**os.environ, "PYTHONPATH": str(site), "CLUSTERABLE_TORCH_THREADS": "1"}
    script = "import json, clusterable.rundir as r; print(r.__file__); print(json.dumps(r.code_version()))"
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    where, version = proc.stdout.strip().splitlines()[-2:]
    assert Path(where).resolve().is_relative_to(site.resolve()), where  # the copy ran, not the checkout
    return json.loads(version)


def test_an_installed_build_records_the_hash_of_its_files(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    package = installed(site)
    version = recorded_version(site, tmp_path)
    assert version["kind"] == "package hash" and version["commit"] is None and version["dirty"] is None
    assert version["package_hash"] == package_hash(package_roots(package))
    assert len(version["package_hash"]) == 64
    # the plugins beside it are part of the code: the launchers train, the sweepers choose the cells
    plugins = [site / "hydra_plugins" / name for name in ("clusterable_launcher", "clusterable_sweeper")]
    assert package_roots(package) == [package, *plugins]


def test_the_hash_is_stable_for_one_build_and_differs_when_any_file_does(tmp_path: Path) -> None:
    package = installed(tmp_path / "a")
    first = package_hash(package_roots(package))
    assert package_hash(package_roots(package)) == first
    # the same build installed elsewhere, and once Python has written its bytecode beside it
    moved = installed(tmp_path / "elsewhere" / "lib")
    (moved / "__pycache__").mkdir(exist_ok=True)
    (moved / "__pycache__" / "cli.cpython-312.pyc").write_bytes(b"bytecode")
    (moved / "stray.pyc").write_bytes(b"bytecode")
    assert package_hash(package_roots(moved)) == first
    # any change of a file's bytes, name or presence, in the package or in a plugin, is another version
    changes = {
        "one byte of a module": lambda: _append(package / "tables" / "report.py", b"\n"),
        "a config file": lambda: _append(package / "conf" / "train.yaml", b"# x\n"),
        "a plugin": lambda: _append(package.parent / "hydra_plugins" / "clusterable_launcher" / "_workers.py", b"\n"),
        "a file added": lambda: (package / "extra.py").write_text(""),
        "a file renamed": lambda: (package / "rundir.py").rename(package / "rundir2.py"),
        "a file removed": lambda: (package / "checks.py").unlink(),
    }
    seen = {first}
    for what, change in changes.items():
        change()
        now = package_hash(package_roots(package))
        assert now not in seen, what
        seen.add(now)


def _append(path: Path, data: bytes) -> None:
    path.write_bytes(path.read_bytes() + data)


def test_a_checkout_records_its_commit_and_the_hash_of_the_same_files() -> None:
    version = code_version()
    if version["commit"] is None:
        pytest.skip("not a git checkout (or no git program): the installed route is the tests above")
    assert version["kind"] == "git commit" and isinstance(version["dirty"], bool)
    assert version["package_hash"] == package_hash(package_roots())


def hashed_run(outputs: Path, seed: int, code: dict) -> Path:
    run = write_run(
        outputs,
        "corel/fashion_table2",
        {"dataset": "fashion_mnist", "model": "ffnn", "loss": "cce", "seed": seed},
        {"test/acc": 0.88 + seed / 100},
        config={"protocol": {"budget": "cpu"}, "trainer": {"max_epochs": 10}},
    )
    RunRecord.from_dict({**RunRecord.read(run).to_dict(), "code": {"package": "0.1.0", **code}}).write(run)
    return run


def wheel(digit: str) -> dict:
    return {"commit": None, "dirty": None, "package_hash": digit * 64, "kind": "package hash"}


def test_runs_of_two_installed_builds_are_refused_unless_pooled_on_purpose(tmp_path: Path, make_tables) -> None:
    hashed_run(tmp_path, 0, wheel("a"))
    hashed_run(tmp_path, 1, wheel("b"))
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"code.package_hash ({json.dumps('a' * 64)}: 1, {json.dumps('b' * 64)}: 1)" in err
    assert err.rstrip().endswith("or pool the code versions on purpose (--pool-code-versions: the table names them)")
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path), "--pool-code-versions")
    assert code == 0, err
    assert "Runs of 2 code versions pooled on purpose (--pool-code-versions): package aaaaaaaaaa: 1 runs, " in out


def test_a_checkout_and_a_wheel_of_the_same_files_are_one_version(tmp_path: Path, make_tables) -> None:
    hashed_run(tmp_path, 0, wheel("a"))
    hashed_run(tmp_path, 1, {"commit": "1" * 40, "dirty": False, "package_hash": "a" * 64, "kind": "git commit"})
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 0 and "| FFNN | CCE | 88.50 ± 0.71 |" in out, err
    # a dirty tree's edits are told apart by their files, though the commit is one
    hashed_run(tmp_path, 2, {"commit": "1" * 40, "dirty": True, "package_hash": "c" * 64, "kind": "git commit"})
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 2 and "code.package_hash" in err and "code.dirty" in err, err
