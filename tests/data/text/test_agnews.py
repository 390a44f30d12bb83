"""AGNews-8's reader (``agnews``) on tiny AG corpora in the distributed formats: the Entertainment rebuild, the
per-topic counts and their one-line failure, truncation and empty documents, missing files and bad settings.
The file formats and the authors' npz are tested in test_agnews_files.py, the cache in test_agnews_cache.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import spacy  # noqa: F401  (installed by the dev extra: a missing spaCy fails these tests, never skips them)
import torch

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError
from clusterable.data.text import agnews
from clusterable.data.text import preprocess as tp
from clusterable.data.text.agnews import article_text, topic_of
from clusterable.data.text.agnews_files import Article
from clusterable.data.text.corpus import PAD, SPECIAL_TOKENS, UNK, UNK_ID

from .conftest import (
    AG_PAGE,
    KEPT,
    N_DOCS,
    SEVEN,
    TINY_COUNTS,
    TOPIC_WORD,
    one_line,
    read,
    words_of,
    write_newsspace,
)

pytestmark = pytest.mark.usefixtures("tiny_counts")


# ------------------------------------------------------------------------------------------------ the recipe


@pytest.mark.parametrize(
    ("source", "category", "topic"),
    [
        ("E! Online", "Entertainment", "Entertainment"),
        (" e! ONLINE ", "Top News", "Entertainment"),
        ("TheCelebrityCafe.com", "Top Stories", "Entertainment"),
        ("New York Times Entertainment", "Top News", "Entertainment"),
        ("Reuters", "Entertainment", None),
        ("E! Online Extra", "Entertainment", None),
        ("Reuters Entertainment", "World", "World"),
        ("Reuters", "Sci/Tech", "Sci/Tech"),
        ("Reuters", "Italia", None),
        ("Reuters", " U.S. ", "U.S."),
        ("Reuters", None, None),
        (None, "Top Stories", None),
    ],
)
def test_topic_of_rebuilds_entertainment(source: str | None, category: str | None, topic: str | None) -> None:
    assert topic_of(Article(source, category, "t", "d")) == topic


def test_article_text_decodes_html() -> None:
    assert article_text("Title", None) == "Title"
    assert article_text(None, "desc") == "desc"
    assert article_text("AT&amp;T", "Bush #39;s &amp;quot;plan&amp;quot;") == 'AT&T Bush \'s "plan"'
    assert article_text("A", '<a href="x">link</a>\x08text  a < b') == "A link text a < b"


def test_the_recipe_on_a_fixture_corpus(tmp_path: Path) -> None:
    write_newsspace(tmp_path)
    corpus = read(tmp_path)
    notes = corpus.notes
    assert notes["available_per_topic"] == {**{t: 6 for t in SEVEN}, "Entertainment": 4}
    assert notes["documents_per_topic"] == TINY_COUNTS and notes["documents"] == N_DOCS
    assert notes["splits"] == {"train": N_DOCS - 8, "val": 4, "test": 4}  # 10% each, rounded
    assert "lookup lemmatiser" in notes["lemmatiser"] and notes["malformed_records"] == 1
    assert corpus.vocab[:5] == [PAD, UNK, *SPECIAL_TOKENS]
    labels = torch.cat([corpus.splits[s]["labels"] for s in ("train", "val", "test")])
    assert torch.bincount(labels).tolist() == [5] * 7 + [4]
    for split in ("train", "val", "test"):
        inputs = corpus.splits[split]["inputs"]
        assert inputs.dtype == torch.long and inputs.shape == (notes["splits"][split], notes["width"])
        for words, label in zip(words_of(corpus, split), corpus.splits[split]["labels"].tolist(), strict=True):
            if label < 7 and split == "train":  # the topic's word is in the training vocabulary
                assert TOPIC_WORD[SEVEN[label]] in words
    # The Entertainment documents are the four kept articles: their words, from whichever split they are in.
    entertainment = [
        w
        for s in ("train", "val", "test")
        for w, y in zip(words_of(corpus, s), corpus.splits[s]["labels"].tolist(), strict=True)
        if y == 7
    ]
    assert len(entertainment) == 4 and [UNK] in entertainment  # the empty one, kept as one UNK
    kept_words = {w for source, _, title, text in KEPT for w in tp.preprocess(article_text(title, text), "lookup")}
    assert {w for doc in entertainment for w in doc} <= kept_words | {UNK}


def test_sampling_and_splits_are_seeded(tmp_path: Path) -> None:
    write_newsspace(tmp_path)
    a, b = read(tmp_path, cache=False), read(tmp_path, cache=False)
    c = read(tmp_path, cache=False, sample_seed=1)
    assert a.vocab == b.vocab and torch.equal(a.splits["train"]["inputs"], b.splits["train"]["inputs"])
    # Another 5 of 6 articles in some topic: other word counts (vocabulary order) or other documents.
    assert a.vocab != c.vocab or not torch.equal(a.splits["train"]["inputs"], c.splits["train"]["inputs"])


def test_a_topic_with_another_count_fails_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_newsspace(tmp_path)
    monkeypatch.setitem(agnews.EXPECTED_COUNTS, "Entertainment", 3)
    with pytest.raises(CorruptFileError) as err:
        read(tmp_path)
    message = one_line(err)
    assert "topic Entertainment has 4 documents, expected 3" in message and "E! Online" in message
    # A topic with fewer articles than the recipe samples: 6 of each but Health, which should reach 7.
    monkeypatch.setattr(agnews, "EXPECTED_COUNTS", {**{t: 6 for t in SEVEN}, "Health": 7, "Entertainment": 4})
    with pytest.raises(CorruptFileError) as err:
        read(tmp_path, per_topic=7)
    assert "topic Health has 6 documents, expected 7" in one_line(err) and "holds 6 articles" in str(err.value)


def test_truncation_and_empty_documents_are_counted(tmp_path: Path) -> None:
    write_newsspace(tmp_path)
    corpus = read(tmp_path, max_length=10, cache=False)
    assert corpus.notes["truncated_documents"] == 1 and corpus.notes["width"] == 10
    assert corpus.notes["empty_documents"] == 1 and corpus.notes["empty_policy"] == "unk"
    dropped = read(tmp_path, empty_documents="drop", cache=False)
    assert dropped.notes["empty_documents"] == 1 and dropped.notes["documents"] == N_DOCS - 1
    assert dropped.notes["documents_per_topic"]["Entertainment"] == 3
    assert sum(dropped.notes["splits"].values()) == N_DOCS - 1
    assert not any(doc == [UNK] for s in ("train", "val", "test") for doc in words_of(dropped, s))


def test_unknown_words_outside_training_are_unk(tmp_path: Path) -> None:
    write_newsspace(tmp_path)
    corpus = read(tmp_path, val_fraction=0.3, test_fraction=0.3, cache=False)
    train_words = {w for doc in words_of(corpus, "train") for w in doc}
    assert set(corpus.vocab[5:]) == train_words - {UNK, *SPECIAL_TOKENS}
    held_out = torch.cat([corpus.splits[s]["inputs"].flatten() for s in ("val", "test")])
    assert (held_out == UNK_ID).any()  # an article word seen only in val/test


# ------------------------------------------------------------------------------------------------ missing files


def test_missing_files_are_one_line_naming_them(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as err:
        read(tmp_path / "nowhere")
    message = one_line(err)
    assert str(tmp_path / "nowhere") in message and "does not exist" in message
    assert "newsSpace" in message and "selected_filtered_data.npz" in message and AG_PAGE in message
    assert "kiankd/corel2019" in message and "dataset.source=fake" in message
    tmp_path.joinpath("empty").mkdir()
    with pytest.raises(DatasetNotFoundError) as err:
        read(tmp_path / "empty", source="raw", raw_file="mydump")
    assert "no mydump" in one_line(err) and "npz" not in str(err.value)


# ------------------------------------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    ("kwargs", "start"),
    [
        ({"per_topic": 0}, "per_topic"),
        ({"per_topic": 6}, "per_topic"),
        ({"val_fraction": 0}, "val_fraction"),
        ({"test_fraction": 1.0}, "test_fraction"),
        ({"val_fraction": 0.5, "test_fraction": 0.5}, "val_fraction"),
        ({"max_length": 0}, "max_length"),
        ({"empty_documents": "keep"}, "empty_documents"),
        ({"source": "csv"}, "source"),
        ({"lemmatiser": "wordnet"}, "lemmatiser"),
    ],
)
def test_bad_settings_name_themselves(tmp_path: Path, kwargs: dict, start: str) -> None:
    with pytest.raises(ValueError, match=f"^{start}"):
        read(tmp_path, **kwargs)


def test_the_build_shows_progress(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_newsspace(tmp_path)
    read(tmp_path, progress=True, cache=False)
    assert "preprocessing AGNews once" in capsys.readouterr().err
