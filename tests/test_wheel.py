"""What an installed package carries and runs, outside the repository: its configs are package data, its commands
(``clusterable-train``, ``clusterable-tables``) resolve, and, slow, a wheel built from this checkout installs into a
fresh virtual environment and trains, sweeps and makes a table from an empty folder."""

from __future__ import annotations

import glob
import importlib
import importlib.resources
import importlib.util
import os
import shutil
import site
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

import clusterable
from clusterable.config import CONFIG_DIR

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "clusterable"
COMMANDS = {"clusterable-train": "clusterable.cli:main", "clusterable-tables": "clusterable.tables.cli:main"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_configs_are_package_data() -> None:
    assert (importlib.resources.files("clusterable") / "conf" / "train.yaml").is_file()
    assert Path(CONFIG_DIR) == Path(clusterable.__file__).resolve().parent / "conf"
    # setuptools globs each package-data pattern from the package's folder, as glob.glob(recursive=True) does.
    patterns = _pyproject()["tool"]["setuptools"]["package-data"]["clusterable"]
    covered = {Path(f) for p in patterns for f in glob.glob(str(PACKAGE / p), recursive=True)}
    yaml = {p for p in PACKAGE.rglob("*.y*ml") if "__pycache__" not in p.parts}
    missing = sorted(str(p.relative_to(ROOT)) for p in yaml - covered)
    assert not missing, f"YAML files of the package no package-data pattern in pyproject.toml covers: {missing}"
    assert {p for p in yaml if p.is_relative_to(PACKAGE / "conf")}, "no configs under src/clusterable/conf"


def test_the_commands_resolve_to_callables() -> None:
    scripts = _pyproject()["project"]["scripts"]
    assert scripts.items() >= COMMANDS.items(), scripts
    for name, target in scripts.items():  # every command the package declares, not only these two
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr)), f"{name} -> {target} is not callable"


def test_the_checkout_script_and_the_command_are_one_program(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """scripts/make_tables.py runs clusterable.tables.cli; its hint names the checkout's training command."""
    from clusterable.tables import cli

    spec = importlib.util.spec_from_file_location("make_tables", ROOT / "scripts" / "make_tables.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.cli is cli
    empty = tmp_path / "outputs"
    assert script.main(["dscl/digits", "--outputs", str(empty)]) == 1
    assert "\n  python train.py -m experiment=dscl/digits" in capsys.readouterr().err
    assert cli.main(["dscl/digits", "--outputs", str(empty)]) == 1
    assert "\n  clusterable-train -m experiment=dscl/digits" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- the wheel, outside the repo


def _wheel(tmp: Path) -> Path:
    """A wheel of this checkout, built offline (no build isolation) from a copy of what the build reads."""
    try:
        setuptools = tuple(int(x) for x in metadata.version("setuptools").split(".")[:2])
    except metadata.PackageNotFoundError:
        setuptools = (0, 0)
    if setuptools < (77, 0):
        pytest.skip("building the wheel offline needs setuptools >= 77 in this environment")
    tree = tmp / "tree"
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    wheels = tmp / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), "."],
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("clusterable-*.whl")
    return wheel


def _venv(tmp: Path, wheel: Path) -> Path:
    """A fresh virtual environment with the wheel installed without its dependencies, which it finds in this
    environment's site-packages (a .pth file: the folders are added, the .pth files in them, such as an editable
    install's, are not read). Returns its bin folder."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "clusterable-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return venv / "bin"


@pytest.mark.slow
def test_the_wheel_trains_sweeps_and_makes_a_table_outside_the_repository(tmp_path: Path) -> None:
    start = time.perf_counter()
    wheel = _wheel(tmp_path)
    names = subprocess.run(
        [sys.executable, "-m", "zipfile", "-l", str(wheel)], check=True, capture_output=True, text=True
    ).stdout
    assert "clusterable/conf/train.yaml" in names and "clusterable/conf/experiment/corel/table2.yaml" in names
    bin_dir = _venv(tmp_path, wheel)
    work = tmp_path / "elsewhere"  # an empty folder outside the repository
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLUSTERABLE_", "PYTHON"))}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        CLUSTERABLE_TORCH_THREADS="1",
        WANDB_MODE="offline",
    )

    def run(*command: str, timeout: float = 600) -> str:
        proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"{' '.join(command)} ended {proc.returncode}:\n{proc.stderr[-2000:]}"
        return proc.stdout

    where = run("python", "-c", "import clusterable.config as c; print(c.__file__); print(c.CONFIG_DIR)")
    assert all(Path(line).is_relative_to(tmp_path / "venv") for line in where.split()), where

    out = run("clusterable-train", "debug=fast")
    assert "run: ok" in out and list((work / "outputs" / "runs" / "default").glob("*/metrics.json")), out[-500:]

    out = run("clusterable-train", "-m", "experiment=corel/table2", "debug=smoke", timeout=1200)
    assert "sweep: 48 ok, 0 failed" in out, out[-500:]
    out = run("clusterable-tables", "corel/table2")
    assert "48 runs (0 failed) of corel/table2 [smoke]" in out, out[-500:]
    assert (work / "outputs" / "tables" / "smoke" / "corel_table2.md").is_file()
    assert not (work / "data").exists() or not any((work / "data").iterdir())  # fake data: nothing downloaded
    print(f"wheel {wheel.stat().st_size / 1e3:.0f} kB; built, installed and run in {time.perf_counter() - start:.0f} s")
