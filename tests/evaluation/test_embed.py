"""Embedding data with a finished run (``clusterable.embed``): its own data's embeddings equal those its evaluation
scored, other data of the same shape is embedded too, a faiss index finds each point itself; the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clusterable.embed import main as embed

RUN = ["dataset=iris", "trainer.max_epochs=2", "logger=none", "trainer.enable_progress_bar=false"]


@pytest.fixture
def run_dir(train) -> Path:
    assert train(*RUN, "evaluator=[classification]", "save_representations=float32", "name=emb").code == 0
    (found,) = [p.parent for p in train.outputs.rglob("metrics.json")]
    return found


def test_the_run_s_own_data_is_embedded_as_its_evaluation_saw_it(run_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "emb"
    assert embed([str(run_dir), "--out", str(out), "--splits", "train,test", "--faiss"]) == 0
    assert capsys.readouterr().out.startswith("embedded train ")
    kept = np.load(run_dir / "representations.npz")
    test = np.load(out / "test.npz")
    key = next(k for k in kept.files if "test" in k and "represent" in k)
    np.testing.assert_allclose(test["embeddings"], kept[key], rtol=1e-5, atol=1e-6)
    assert len(test["labels"]) == len(test["embeddings"])
    assert (out / "projector_config.pbtxt").read_text().count("embeddings {") == 2
    faiss = pytest.importorskip("faiss")
    index = faiss.read_index(str(out / "test.faiss"))
    assert index.ntotal == len(test["embeddings"])
    distances, found = index.search(test["embeddings"][:5].astype(np.float32), 1)
    assert np.allclose(distances[:, 0], 0, atol=1e-4)
    assert np.allclose(test["embeddings"][found[:, 0]], test["embeddings"][:5])


def test_other_data_of_the_same_shape_is_embedded(run_dir: Path, tmp_path: Path) -> None:
    assert embed([str(run_dir), "dataset=iris", "dataset.source=fake", "--out", str(tmp_path / "fake")]) == 0
    own = tmp_path / "own"
    assert embed([str(run_dir), "--out", str(own)]) == 0
    fake, real = np.load(tmp_path / "fake" / "test.npz"), np.load(own / "test.npz")
    assert fake["embeddings"].shape[1] == real["embeddings"].shape[1]
    assert not np.allclose(fake["embeddings"][: len(real["embeddings"])], real["embeddings"][: len(fake["embeddings"])])


def test_what_cannot_be_embedded_is_one_line(run_dir: Path, tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "e")
    assert embed([str(run_dir), "dataset=digits", "--out", out]) == 1
    assert capsys.readouterr().err.strip().endswith("digits's inputs are [64], the run's [4]")
    assert embed([str(run_dir), "--splits", "dev", "--out", out]) == 1
    assert "no split 'dev'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        embed([str(run_dir), "loss=cce", "--out", out])
    assert exit_.value.code == 2 and "loss=cce: only dataset=... and dataset.<key>=..." in capsys.readouterr().err
    assert embed([str(run_dir), "dataset.source=fake", "--out", out]) == 2  # which dataset's source?
    assert "error: dataset.source=fake: name the dataset it changes" in capsys.readouterr().err
    assert embed([str(run_dir), "dataset=irs", "--out", out]) == 2
    assert "error: dataset: no option 'irs'; available: " in capsys.readouterr().err
    record = json.loads((run_dir / "metrics.json").read_text())  # a checkpoint of another attempt: refused
    (run_dir / "metrics.json").write_text(json.dumps({**record, "best_epoch": 7}))
    assert embed([str(run_dir), "--out", out]) == 1
    assert "its record's best epoch is 7: another attempt's model" in capsys.readouterr().err
    (run_dir / "checkpoints" / "best.ckpt").unlink()
    assert embed([str(run_dir), "--out", out]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kept no checkpoint" in err[0]
