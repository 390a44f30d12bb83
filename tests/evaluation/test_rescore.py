"""Re-scoring finished runs (``clusterable.rescore``): a new evaluator's metrics from the kept representations, or
from the best checkpoint embedded again, equal those of a fresh run that had the evaluator; the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterable.rescore import main as rescore

RUN = [
    "dataset=iris",
    "trainer.max_epochs=2",
    "logger=none",
    "trainer.enable_progress_bar=false",
    "save_representations=float32",
]


def _run_dir(outputs: Path, name: str) -> Path:
    (found,) = [p.parent for p in outputs.rglob("metrics.json") if f"/{name}/" in p.as_posix()]
    return found


@pytest.fixture
def runs(train) -> dict[str, Path]:
    """One run with the classification evaluator only, and the same run with clustering too."""
    assert train(*RUN, "evaluator=[classification]", "name=plain").code == 0
    assert train(*RUN, "evaluator=[classification,clustering]", "name=fresh").code == 0
    return {name: _run_dir(train.outputs, name) for name in ("plain", "fresh")}


def _metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def test_a_new_evaluator_scores_the_kept_representations_as_a_fresh_run_would(runs, capsys) -> None:
    assert (runs["plain"] / "representations.npz").exists() and (runs["plain"] / "head.pt").exists()
    assert rescore([str(runs["plain"]), "evaluator=[clustering]"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "rescore: 1 re-scored, 0 failed"
    plain, fresh = _metrics(runs["plain"]), _metrics(runs["fresh"])
    added = {k: v for k, v in plain["metrics"].items() if "kmeans" in k or "gmm" in k or "silhouette" in k}
    assert added and added == {k: fresh["metrics"][k] for k in added}
    (entry,) = plain["rescored"]
    assert entry["from"] == "its kept representations (representations.npz)" and "clustering" in entry["evaluator"]
    assert sorted(entry["keys"]) == sorted(added)


def test_a_run_without_kept_representations_is_embedded_again_from_its_checkpoint(runs, capsys) -> None:
    (runs["plain"] / "representations.npz").unlink()
    assert rescore([str(runs["plain"]), "evaluator=[clustering]"]) == 0
    out = capsys.readouterr().out
    assert "no kept representations: embedding its splits again from best.ckpt" in out
    plain, fresh = _metrics(runs["plain"]), _metrics(runs["fresh"])
    added = plain["rescored"][0]["keys"]
    assert added and all(plain["metrics"][k] == pytest.approx(fresh["metrics"][k], abs=1e-6) for k in added)


def test_what_cannot_be_rescored_is_one_line(runs, capsys, tmp_path) -> None:
    # every metric it already has: skipped, not failed; --replace scores it again
    before = _metrics(runs["fresh"])
    assert rescore([str(runs["fresh"]), "evaluator=[clustering]"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{runs['fresh']}: skipped: it already has all ") and "test/" in out[0]
    assert out[-1] == "rescore: 0 re-scored, 1 skipped (already scored; --replace scores them again), 0 failed"
    assert _metrics(runs["fresh"]) == before
    assert rescore([str(runs["fresh"]), "evaluator=[clustering]", "--replace"]) == 0
    # some of them: refused, nothing added (which setting made a metric must stay one)
    assert rescore([str(runs["fresh"]), "evaluator=[clustering,retrieval]"]) == 1
    assert "not re-scored: it already has test/" in capsys.readouterr().out
    # nothing kept, no checkpoint
    for name in ("representations.npz", "head.pt", "checkpoints/best.ckpt"):
        (runs["plain"] / name).unlink()
    assert rescore([str(runs["plain"]), "evaluator=[clustering]"]) == 1
    assert (
        "it kept no representations (representations.npz) and no checkpoint (checkpoints/best.ckpt): re-scoring it "
        "needs training again (run its cell again, with the evaluators added)" in capsys.readouterr().out
    )
    # the command line
    assert rescore([str(runs["fresh"])]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: name the evaluators to run: evaluator=[clustering] (and evaluator.<name>.<option>=...); without them "
        "it finishes runs whose evaluators failed, and none of these has one"
    )
    assert rescore([str(tmp_path / "nothing"), "evaluator=[clustering]"]) == 2
    assert "neither a run directory nor an experiment with runs" in capsys.readouterr().err
    assert rescore([str(runs["fresh"]), "evaluator=[nope]"]) == 2
    assert "nope" in capsys.readouterr().err
    assert rescore([str(runs["fresh"]), "evaluator=[]"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: evaluator=[] names no evaluator: name the evaluators to run: evaluator=[clustering] (and "
        "evaluator.<name>.<option>=...)"
    )


def test_the_projector_export_writes_vectors_and_labels(runs, tmp_path) -> None:
    assert rescore([str(runs["plain"]), "evaluator=[clustering]", "--projector", str(tmp_path / "proj")]) == 0
    vectors = (tmp_path / "proj" / f"{runs['plain'].name}.tsv").read_text().splitlines()
    labels = (tmp_path / "proj" / f"{runs['plain'].name}_labels.tsv").read_text().splitlines()
    assert len(vectors) == len(labels) > 0 and all(len(v.split("\t")) > 1 for v in vectors)
    # the config TensorBoard's projector reads, naming each run's files (a second run's export joins the first's)
    assert (
        rescore([str(runs["fresh"]), "evaluator=[classification]", "--replace", "--projector", str(tmp_path / "proj")])
        == 0
    )
    config = (tmp_path / "proj" / "projector_config.pbtxt").read_text()
    for run in (runs["fresh"], runs["plain"]):
        assert (
            f'embeddings {{\n  tensor_name: "{run.name}"\n  tensor_path: "{run.name}.tsv"\n'
            f'  metadata_path: "{run.name}_labels.tsv"\n}}\n'
        ) in config
    assert config.count("embeddings {") == 2


def test_a_run_recorded_before_runs_kept_representations_is_still_reused() -> None:
    """``save_representations`` changes what a run keeps, not what it computes: a finished run recorded without the
    key (every run before it existed) is the same config, so a resumed grid skips it."""
    from clusterable.rundir import config_changes

    old = {"seed": 0, "loss": {"lam": 0.5}}
    assert config_changes(old, {**old, "save_representations": "float16"}) == []
    assert config_changes({**old, "save_representations": "float16"}, {**old, "save_representations": "none"}) == []


def test_a_run_is_scored_on_another_dataset_under_its_name(runs, capsys) -> None:
    """Its checkpoint embeds the other data (here the stand-in of iris's shape): the metrics land under
    ``on/<dataset>/`` beside the run's own, which stay as they were, and the entry records the dataset."""
    before = _metrics(runs["plain"])
    assert rescore([str(runs["plain"]), "evaluator=[clustering]", "dataset=iris", "dataset.source=fake"]) == 0
    assert "metrics added under on/iris/ from best.ckpt" in capsys.readouterr().out
    after = _metrics(runs["plain"])
    added = {k: v for k, v in after["metrics"].items() if k not in before["metrics"]}
    assert added and all(k.startswith("on/iris/") for k in added) and "on/iris/test/kmeans/acc" in added
    assert {k: after["metrics"][k] for k in before["metrics"]} == before["metrics"]  # its own numbers untouched
    (entry,) = after["rescored"]
    assert entry["dataset"]["source"] == "fake" and entry["from"] == "best.ckpt, embedding iris"
    assert sorted(entry["keys"]) == sorted(added)
    # the same again: skipped; other data of another shape, or no evaluator named: one line each
    assert rescore([str(runs["plain"]), "evaluator=[clustering]", "dataset=iris", "dataset.source=fake"]) == 0
    assert "skipped: it already has all" in capsys.readouterr().out
    # the same keys from other data of that name: refused, not "already scored"
    assert rescore([str(runs["plain"]), "evaluator=[clustering]", "dataset=iris", "dataset.reader.noise_seed=3"]) == 1
    assert "not re-scored: it has on/iris/... from another iris config than this one" in capsys.readouterr().out
    # a key without its dataset, an unknown dataset: the command line's mistakes
    assert rescore([str(runs["plain"]), "evaluator=[clustering]", "dataset.source=fake"]) == 2
    assert "dataset.source=fake: name the dataset it changes (dataset=<name>" in capsys.readouterr().err
    assert rescore([str(runs["plain"]), "evaluator=[clustering]", "dataset=irs"]) == 2
    assert "error: dataset: no option 'irs'; available: " in capsys.readouterr().err
    assert rescore([str(runs["plain"]), "evaluator=[clustering]", "dataset=digits"]) == 1
    assert "not re-scored: digits's inputs are [64], the run's [4]" in capsys.readouterr().out
    assert rescore([str(runs["plain"]), "dataset=iris"]) == 2  # finishing a run would score its own data
    assert capsys.readouterr().err.startswith("error: scoring on another dataset: name the evaluators to run")
    # a checkpoint of another attempt than the record's: refused, as when the run's own data is embedded again
    record = json.loads((runs["plain"] / "metrics.json").read_text())
    (runs["plain"] / "metrics.json").write_text(json.dumps({**record, "best_epoch": 7}))
    assert (
        rescore([str(runs["plain"]), "evaluator=[clustering]", "dataset=iris", "dataset.source=fake", "--replace"]) == 1
    )
    assert "its record's best epoch is 7: another attempt's model" in capsys.readouterr().out


def test_an_evaluator_file_whose_header_hydra_did_not_read_is_one_line(runs, train, tmp_path, capsys) -> None:
    """A comment above ``# @package evaluator.<name>`` makes Hydra read the header as a comment, so the option lands
    at ``evaluator`` itself: training and re-scoring both say so in one line, naming the fix."""
    (tmp_path / "conf" / "evaluator").mkdir(parents=True)
    (tmp_path / "conf" / "evaluator" / "mine.yaml").write_text(
        "# conf/evaluator/mine.yaml\n# @package evaluator.mine\n"
        "_target_: clusterable.evaluation.classification.accuracy\n_partial_: true\n"
    )
    said = "its file's first line must be `# @package evaluator.<name>`"
    assert rescore([str(runs["plain"]), "-cd", str(tmp_path / "conf"), "evaluator=[mine]"]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
    result = train(*RUN, f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "evaluator=[mine]")
    assert result.code != 0 and said in result.err
