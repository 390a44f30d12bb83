"""Config folders of your own (``clusterable.searchpath``): ``-cd``/``--config-dir``, ``hydra.searchpath`` and
``$CLUSTERABLE_SEARCHPATH`` become one override, which training, its preflight and ``clusterable-eval`` all read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterable.config import CONFIG_DIR
from clusterable.rescore import main as rescore
from clusterable.searchpath import ENV, SearchPathError, with_searchpath

KMEANS_ONLY = """# @package evaluator.kmeans_only
_target_: clusterable.evaluation.clustering.ClusterMetrics
methods: [kmeans]
"""


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    """A config folder of one's own: a loss option (a copy of cce under another name) and an evaluator option."""
    folder = tmp_path / "myconf"
    (folder / "loss").mkdir(parents=True)
    (folder / "evaluator").mkdir()
    (folder / "loss" / "my_cce.yaml").write_text((Path(CONFIG_DIR) / "loss" / "cce.yaml").read_text())
    (folder / "evaluator" / "kmeans_only.yaml").write_text(KMEANS_ONLY)
    return folder


def test_every_way_in_ends_as_one_override(conf: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    entry, second = f"file://{conf.resolve()}", f"file://{other.resolve()}"
    assert with_searchpath(["loss=cce", "-cd", str(conf)], {}) == ["loss=cce", f"hydra.searchpath=[{entry}]"]
    assert with_searchpath([f"--config-dir={conf}", "-m"], {}) == ["-m", f"hydra.searchpath=[{entry}]"]
    assert with_searchpath(["seed=1"], {ENV: f"{conf}:{other}"}) == ["seed=1", f"hydra.searchpath=[{entry},{second}]"]
    # the command line's entries first, the environment's after, each folder once
    given = f"hydra.searchpath=[{second}]"
    assert with_searchpath([given, "-cd", str(conf)], {ENV: str(other)}) == [f"hydra.searchpath=[{second},{entry}]"]
    assert with_searchpath(["seed=1"], {}) == ["seed=1"]


@pytest.mark.parametrize(
    ("args", "environ", "said"),
    [
        (["-cd", "/no/such/conf"], {}, "-cd: no folder '/no/such/conf'"),
        (["--config-dir"], {}, "--config-dir needs a folder"),
        (["-cd", "-m"], {}, "-cd needs a folder"),
        ([], {ENV: "/no/such/conf"}, f"${ENV}: no folder '/no/such/conf'"),
    ],
)
def test_a_folder_that_is_not_there_is_one_line(args, environ, said) -> None:
    with pytest.raises(SearchPathError, match=said.replace("$", r"\$")):
        with_searchpath(args, environ)


RUN = ["dataset=iris", "trainer.max_epochs=1", "logger=none", "trainer.enable_progress_bar=false"]


def test_training_takes_its_options_from_cd_or_the_environment(train, conf: Path, monkeypatch) -> None:
    result = train(*RUN, "-cd", str(conf), "loss=my_cce", "name=by_cd")
    assert result.code == 0, result.err
    monkeypatch.setenv(ENV, str(conf))
    result = train(*RUN, "loss=my_cce", "name=by_env")
    assert result.code == 0, result.err
    monkeypatch.delenv(ENV)
    result = train(*RUN, "loss=my_cce", "name=without")
    assert result.code == 2 and "loss: no option 'my_cce'" in result.err
    result = train(*RUN, "-cd", str(conf / "nope"))
    assert result.code == 2 and result.err.strip() == f"error: -cd: no folder '{conf / 'nope'}'"


def test_your_own_evaluator_rescores_your_runs(train, conf: Path, capsys) -> None:
    assert train(*RUN, "evaluator=[classification]", "name=plain").code == 0
    (run_dir,) = [p.parent for p in train.outputs.rglob("metrics.json")]
    assert rescore([str(run_dir), "evaluator=[kmeans_only]"]) == 2  # not on the package's search path
    assert "kmeans_only" in capsys.readouterr().err
    assert rescore([str(run_dir), "evaluator=[kmeans_only]", "-cd", str(conf)]) == 0
    record = json.loads((run_dir / "metrics.json").read_text())
    assert "test/kmeans/acc" in record["metrics"] and "test/gmm/acc" not in record["metrics"]
    assert "kmeans_only" in record["rescored"][0]["evaluator"]
