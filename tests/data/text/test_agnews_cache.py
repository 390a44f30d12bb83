"""The cache of a built AGNews-8 corpus (``agnews_cache``): read instead of preprocessing, rebuilt for other
settings, another lemmatiser or a damaged file, and what its ``.json`` records."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import spacy  # noqa: F401  (installed by the dev extra: a missing spaCy fails these tests, never skips them)
import torch

from clusterable.data.text import preprocess as tp

from .conftest import (
    read,
    write_newsspace,
)

pytestmark = pytest.mark.usefixtures("tiny_counts")


# ------------------------------------------------------------------------------------------------ the cache


def test_the_cache_is_read_instead_of_preprocessing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_newsspace(tmp_path)
    built = read(tmp_path)
    assert built.notes["cache_hit"] is False
    assert sorted(p.suffix for p in (tmp_path / "cache").iterdir()) == [".json", ".npz"]

    def no_spacy(*args, **kwargs):
        raise AssertionError("preprocessed again")

    monkeypatch.setattr(tp, "load_preprocessor", no_spacy)
    cached = read(tmp_path)
    assert cached.notes["cache_hit"] is True and cached.vocab == built.vocab
    assert cached.notes["lemmatiser"] == built.notes["lemmatiser"]
    for split in ("train", "val", "test"):
        for key in ("inputs", "labels"):
            assert cached.splits[split][key].dtype == torch.long
            assert torch.equal(cached.splits[split][key], built.splits[split][key])


def test_a_changed_setting_builds_a_new_cache(tmp_path: Path) -> None:
    write_newsspace(tmp_path)
    read(tmp_path)
    other = read(tmp_path, split_seed=1)
    assert other.notes["cache_hit"] is False
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 2
    assert read(tmp_path, split_seed=1).notes["cache_hit"] is True


def test_another_lemmatiser_rebuilds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_newsspace(tmp_path)
    read(tmp_path)
    monkeypatch.setattr(tp, "lemmatiser_name", lambda lemmatiser="auto": "spacy 9 another lemmatiser")
    assert read(tmp_path).notes["cache_hit"] is False
    monkeypatch.setattr(tp, "lemmatiser_name", lambda lemmatiser="auto": None)  # spaCy gone: the cache serves
    assert read(tmp_path).notes["cache_hit"] is True


@pytest.mark.parametrize("damaged", ["npz", "json"])
def test_a_corrupt_cache_is_rebuilt(tmp_path: Path, damaged: str, caplog: pytest.LogCaptureFixture) -> None:
    write_newsspace(tmp_path)
    built = read(tmp_path)
    path = next((tmp_path / "cache").glob(f"*.{damaged}"))
    path.write_bytes(b"\x00" * path.stat().st_size)  # same size: only reading it tells
    with caplog.at_level(logging.WARNING, logger="clusterable.data.text.agnews_cache"):
        again = read(tmp_path)
    assert "unreadable" in caplog.text and again.notes["cache_hit"] is False
    assert torch.equal(again.splits["test"]["inputs"], built.splits["test"]["inputs"])
    assert read(tmp_path).notes["cache_hit"] is True  # rewritten


def test_the_cache_json_records_vocab_and_notes(tmp_path: Path) -> None:
    write_newsspace(tmp_path)
    corpus = read(tmp_path)
    meta = json.loads(next((tmp_path / "cache").glob("*.json")).read_text())
    assert meta["vocab"] == corpus.vocab and meta["notes"]["lemmatiser"] == corpus.notes["lemmatiser"]
    assert not list((tmp_path / "cache").glob("*.partial"))
