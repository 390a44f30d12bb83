"""Optional dependencies are extras, and a run that needs a missing one says which, in one line: the launchers
(``hydra/launcher=joblib``, ``submitit_*``: ``pip install 'clusterable[launchers]'``) and Palmer penguins
(``dataset=penguins``: ``clusterable[penguins]``). A missing package is simulated with ``sys.modules[name] = None``
(an import of it fails) and, for the launchers, their options taken out of Hydra's config store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hydra.core.config_store import ConfigStore

from clusterable.data.errors import DatasetError
from clusterable.data.memory import tabular

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = {
    "launchers": ("hydra-joblib-launcher", "hydra-submitit-launcher"),
    "penguins": ("palmerpenguins",),
}
PLUGINS = {
    "joblib": [
        "hydra_plugins.hydra_joblib_launcher",
        "hydra_plugins.hydra_joblib_launcher.config",
        "hydra_plugins.hydra_joblib_launcher.joblib_launcher",
        "hydra_plugins.hydra_joblib_launcher._core",
    ],
    "submitit": [
        "hydra_plugins.hydra_submitit_launcher",
        "hydra_plugins.hydra_submitit_launcher.config",
        "hydra_plugins.hydra_submitit_launcher.submitit_launcher",
    ],
}


def _names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip() for r in requirements}


def test_the_optional_packages_are_extras_and_dev_has_them() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required, extras = _names(project["dependencies"]), project["optional-dependencies"]
    for extra, packages in EXTRAS.items():
        assert set(packages) == _names(extras[extra]), extra
        assert not set(packages) & required, f"{packages} are still hard dependencies"
        assert set(packages) <= _names(extras["dev"]), f"dev lacks {extra}: their tests need them"


def _without_launchers(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if neither launcher plugin were installed: their modules cannot be imported and their options are not
    in Hydra's config store (where Hydra's plugin scan, or ours, put them)."""
    for modules in PLUGINS.values():
        for module in modules:
            monkeypatch.setitem(sys.modules, module, None)
    stored = ConfigStore.instance().repo.setdefault("hydra", {}).setdefault("launcher", {})
    for name in ("joblib.yaml", "submitit_local.yaml", "submitit_slurm.yaml"):
        if name in stored:
            monkeypatch.delitem(stored, name)


@pytest.mark.parametrize("launcher", ["joblib", "submitit_slurm", "submitit_local"])
def test_a_launcher_without_its_extra_names_the_extra(train, monkeypatch: pytest.MonkeyPatch, launcher: str) -> None:
    _without_launchers(monkeypatch)
    result = train("-m", f"hydra/launcher={launcher}", "loss=cce", "seed=0,1")
    assert result.code == 2 and result.err.strip() == (
        f"error: hydra/launcher={launcher} needs the launchers extra, which is not installed: "
        "pip install 'clusterable[launchers]' (in a checkout: pip install -e '.[launchers]')"
    ), result.err
    assert not list(train.outputs.rglob("metrics.json"))


def test_our_joblib_module_imports_cleanly_without_the_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hydra's plugin scan imports it on every command: without the extra it must register nothing and raise
    nothing (an ImportError there is a warning printed on every run)."""
    import importlib.util

    _without_launchers(monkeypatch)
    path = ROOT / "src" / "hydra_plugins" / "clusterable_launcher" / "joblib_launcher.py"
    spec = importlib.util.spec_from_file_location("joblib_launcher_without_plugin", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not hasattr(module, "JoblibLauncher")
    assert "joblib.yaml" not in ConfigStore.instance().repo["hydra"]["launcher"]


def test_penguins_without_their_extra_is_one_dataset_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "palmerpenguins", None)
    with pytest.raises(DatasetError) as err:
        tabular.read_penguins()
    assert str(err.value) == (
        "dataset=penguins reads the palmerpenguins package, which is not installed: pip install "
        "'clusterable[penguins]' (in a checkout: pip install -e '.[penguins]')"
    )
