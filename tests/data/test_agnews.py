"""AGNews-8's reader on tiny AG corpora written in the distributed formats (the tab-separated ``newsSpace`` dump,
plain and bzip2, and the ``newsspace200.xml`` dump): the Entertainment rebuild, the per-topic counts and their
one-line failure, truncation and empty documents, the cache, missing and corrupt files, the authors' npz, and the
synthetic stand-in."""

from __future__ import annotations

import bz2
import json
import logging
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np
import pytest
import spacy  # noqa: F401  (installed by the dev extra: a missing spaCy fails these tests, never skips them)
import torch

from clusterable.data import agnews
from clusterable.data import text_preprocess as tp
from clusterable.data.agnews import Article, article_text, read_agnews8, read_articles, topic_of
from clusterable.data.corpus import PAD, PAD_ID, SPECIAL_TOKENS, UNK, UNK_ID, Corpus
from clusterable.data.errors import CorruptFileError, DatasetNotFoundError

SEVEN = ("U.S.", "World", "Europe", "Sports", "Sci/Tech", "Health", "Business")
# One word per topic (none a stop word, each its own lemma), so that a document shows its topic.
TOPIC_WORD = dict(
    zip(SEVEN, ("senate", "summit", "brussels", "football", "software", "vaccine", "earnings"), strict=True)
)
# Six articles per topic, one word each.
ARTICLE_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
LONG = "abcdefghijklmnopqrstuvwxyzab"  # the words of the one document longer than 10 tokens
# Entertainment after the rebuild: the four articles from the supplement's sources (E! Online matched whatever
# its case and surrounding spaces), and the articles of those categories it leaves out.
KEPT = [
    ("E! Online", "Entertainment", "Oscars night", "Stars arrive in 2004"),
    ("  e! online ", "Top News", "The of and", None),  # nothing but stop words: empty after preprocessing
    ("TheCelebrityCafe.com", "Top Stories", "Premiere", " ".join(f"word{c}" for c in LONG)),  # 29 tokens
    ("Reuters Entertainment", "Entertainment", "Festival &amp; film", "<b>Director</b> wins $5bn"),
]
LEFT_OUT = [
    ("Reuters", "Entertainment", "Ceasefire talks", "Not entertainment at all"),
    ("E! Online Extra", "Top News", "Extra", "not the source named"),
    ("BBC News", "Top Stories", "Budget", "Top story from a news source"),
    ("Yahoo", "Italia", "Calcio", "Another category"),
]
TINY_COUNTS = {topic: 5 for topic in SEVEN} | {"Entertainment": 4}  # 5 of 6 sampled; all 4 Entertainment kept
N_DOCS = 39
RANK_AND_DATE = ("5", "2004-08-16 00:00:00")  # the fields after the description
AG_PAGE = agnews.GULLI_PAGE


@pytest.fixture(autouse=True)
def tiny_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agnews, "EXPECTED_COUNTS", dict(TINY_COUNTS))


def articles() -> list[tuple[str, str, str, str | None]]:
    """(source, category, title, description) of the fixture corpus, in file order."""
    rows: list[tuple[str, str, str, str | None]] = []
    for topic in SEVEN:
        for word in ARTICLE_WORDS:
            rows.append(
                ("Reuters", topic, f"{TOPIC_WORD[topic]} {word}", f"{word.capitalize()} said on Monday.")
            )
    rows[3] = (*rows[3][:3], "A line\nbroken in two\tand a tab")  # escaped in the dump
    return rows[:20] + KEPT[:2] + LEFT_OUT + rows[20:] + KEPT[2:]


def dump_field(value: str | bytes | None) -> bytes:
    """One field as MySQL's INTO OUTFILE writes it: NULL as \\N, backslash, tab and newline escaped."""
    if value is None:
        return b"\\N"
    data = value.encode() if isinstance(value, str) else value
    return data.replace(b"\\", b"\\\\").replace(b"\t", b"\\\t").replace(b"\n", b"\\\n")


def newsspace_bytes(rows: list[tuple[str, str, str, str | None]], extra: bytes = b"") -> bytes:
    out = bytearray()
    for i, (source, category, title, description) in enumerate(rows):
        fields = (source, f"http://example.com/{i}", title, None, category, description, *RANK_AND_DATE, None)
        out += b"\t".join(dump_field(f) for f in fields) + b"\n"
    return bytes(out) + extra


def write_newsspace(folder: Path, name: str = "newsSpace", compress: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = newsspace_bytes(articles(), extra=b"a line that is not a record\n")
    path = folder / name
    path.write_bytes(bz2.compress(data) if compress else data)
    return path


def write_xml(folder: Path, name: str = "newsspace200.xml") -> Path:
    """The XML dump: ``<all_news>`` holding the 8 field elements of one article after another."""
    folder.mkdir(parents=True, exist_ok=True)
    parts = ['<?xml version="1.0"?>\n<all_news>\n']
    for i, (source, category, title, description) in enumerate(articles()):
        fields = (source, f"http://example.com/{i}", title, None, category, description, *RANK_AND_DATE)
        elements = []
        for tag, value in zip(agnews.RAW_FIELDS[:8], fields, strict=True):
            # The dump's line continuations survive in the XML: a backslash before a line break.
            text = None if value is None else escape(value.replace("\n", "\\\n"))
            elements.append(f"<{tag}/>" if text is None else f"<{tag}>{text}</{tag}>")
        parts.append("".join(elements) + "\n")
    parts.append("</all_news>\n")
    path = folder / name
    path.write_text("".join(parts))
    return path


def read(root: Path, **kwargs) -> Corpus:
    """``read_agnews8`` with the fixture's per_topic, quietly, with the lookup lemmatiser whatever is installed."""
    kwargs = {"per_topic": 5, "progress": False, "lemmatiser": "lookup", **kwargs}
    return read_agnews8(str(root), **kwargs)


def words_of(corpus, split: str) -> list[list[str]]:
    return [[corpus.vocab[i] for i in row if i != PAD_ID] for row in corpus.splits[split]["inputs"].tolist()]


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message, message
    return message


# ------------------------------------------------------------------------------------------------ the formats


def test_the_dump_is_read_field_by_field(tmp_path: Path) -> None:
    stats: dict = {}
    got = list(read_articles(write_newsspace(tmp_path), stats))
    assert stats["records"] == len(articles()) and stats["malformed_records"] == 1
    assert stats["format"].startswith("newsSpace")
    assert [(a.source, a.category, a.title, a.description) for a in got] == articles()
    assert got[3].description == "A line\nbroken in two\tand a tab"  # escaped newline and tab
    assert got[21].description is None  # NULL


def test_the_dump_decodes_older_single_byte_records(tmp_path: Path) -> None:
    path = tmp_path / "newsSpace"
    utf8 = newsspace_bytes([("Reuters", "World", "Caf\xe9 \u2019quoted\u2019", "d\xe9j\xe0 vu")])
    single_byte = newsspace_bytes([("Reuters", "World", "TITLE", "d")]).replace(
        b"TITLE", "Caf\xe9 \u2019s".encode("cp1252")
    )
    path.write_bytes(utf8 + single_byte)
    titles = [a.title for a in read_articles(path)]
    assert titles == ["Caf\xe9 \u2019quoted\u2019", "Caf\xe9 \u2019s"]  # UTF-8, then Windows-1252


def test_the_xml_dump_gives_the_same_articles(tmp_path: Path) -> None:
    stats: dict = {}
    got = list(read_articles(write_xml(tmp_path), stats))
    assert stats["format"].startswith("newsspace200.xml")
    assert [(a.source, a.category, a.title, a.description) for a in got] == articles()


def test_xml_with_one_wrapper_element_per_article(tmp_path: Path) -> None:
    path = tmp_path / "wrapped.xml"
    path.write_text(
        "<all_news><article><source>E! Online</source><title>A</title><category>Entertainment</category></article>"
        "<article><source>Reuters</source><title>B</title><category>World</category>"
        "<description>d</description></article></all_news>"
    )
    got = list(read_articles(path))
    assert got == [Article("E! Online", "Entertainment", "A", None), Article("Reuters", "World", "B", "d")]


def test_a_bzip2_dump_reads_like_the_plain_one(tmp_path: Path) -> None:
    write_newsspace(tmp_path / "plain")
    write_newsspace(tmp_path / "packed", name="newsSpace.bz2", compress=True)
    plain, packed = read(tmp_path / "plain", cache=False), read(tmp_path / "packed", cache=False)
    assert packed.vocab == plain.vocab
    for split in ("train", "val", "test"):
        assert torch.equal(packed.splits[split]["inputs"], plain.splits[split]["inputs"])


def test_corrupt_files_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "newsSpace.bz2").write_bytes(b"BZh91AY&SY" + b"\x00garbage" * 20)
    with pytest.raises(CorruptFileError) as err:
        read(tmp_path)
    assert "newsSpace.bz2" in one_line(err) and AG_PAGE in str(err.value)
    (tmp_path / "newsSpace.bz2").unlink()
    (tmp_path / "newsspace200.xml").write_text("<all_news><source>x</source><title>oops</all_news>")
    with pytest.raises(CorruptFileError, match="not well-formed XML") as err:
        read(tmp_path)
    one_line(err)


# ------------------------------------------------------------------------------------------------ the recipe


@pytest.mark.parametrize(
    ("source", "category", "topic"),
    [("E! Online", "Entertainment", "Entertainment"), (" e! ONLINE ", "Top News", "Entertainment"),
     ("TheCelebrityCafe.com", "Top Stories", "Entertainment"), ("New York Times Entertainment", "Top News",
     "Entertainment"), ("Reuters", "Entertainment", None), ("E! Online Extra", "Entertainment", None),
     ("Reuters Entertainment", "World", "World"), ("Reuters", "Sci/Tech", "Sci/Tech"), ("Reuters", "Italia", None),
     ("Reuters", " U.S. ", "U.S."), ("Reuters", None, None), (None, "Top Stories", None)],
)  # fmt: skip
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
        for words, label in zip(
            words_of(corpus, split), corpus.splits[split]["labels"].tolist(), strict=True
        ):
            if label < 7 and split == "train":  # the topic's word is in the training vocabulary
                assert TOPIC_WORD[SEVEN[label]] in words
    # The Entertainment documents are the four kept articles: their words, from whichever split they are in.
    entertainment = [w for s in ("train", "val", "test") for w, y in zip(words_of(corpus, s),
                     corpus.splits[s]["labels"].tolist(), strict=True) if y == 7]  # fmt: skip
    assert len(entertainment) == 4 and [UNK] in entertainment  # the empty one, kept as one UNK
    kept_words = {
        w for source, _, title, text in KEPT for w in tp.preprocess(article_text(title, text), "lookup")
    }
    assert {w for doc in entertainment for w in doc} <= kept_words | {UNK}


def test_sampling_and_splits_are_seeded(tmp_path: Path) -> None:
    write_newsspace(tmp_path)
    a, b = read(tmp_path, cache=False), read(tmp_path, cache=False)
    c = read(tmp_path, cache=False, sample_seed=1)
    assert a.vocab == b.vocab and torch.equal(a.splits["train"]["inputs"], b.splits["train"]["inputs"])
    # Another 5 of 6 articles in some topic: other word counts (vocabulary order) or other documents.
    assert a.vocab != c.vocab or not torch.equal(a.splits["train"]["inputs"], c.splits["train"]["inputs"])


def test_a_topic_with_another_count_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    assert "topic Health has 6 documents, expected 7" in one_line(err) and "holds 6 articles" in str(
        err.value
    )


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
    with caplog.at_level(logging.WARNING, logger="clusterable.data.agnews"):
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


# ------------------------------------------------------------------------------------------------ the authors' npz


def npz_rows() -> list[tuple[str, str, str]]:
    """(topic, title, description) of an npz holding the recipe's selection (5 per topic, 4 Entertainment)."""
    rows = [(t, f"{TOPIC_WORD[t]} {w}", "said Monday") for t in SEVEN for w in ARTICLE_WORDS[:5]]
    return rows + [("TrueEntertainment", f"star {w}", "premiere") for w in ARTICLE_WORDS[:4]]


def test_npz_records_with_title_and_description(tmp_path: Path) -> None:
    data = np.array(npz_rows(), dtype=[("topic", "U20"), ("title", "U40"), ("description", "U40")])
    np.savez(tmp_path / "selected_filtered_data.npz", data=data)
    corpus = read(tmp_path)
    assert corpus.notes["source"] == "npz" and "unverified" in corpus.notes["format"]
    assert corpus.notes["documents_per_topic"] == TINY_COUNTS
    assert "star" in corpus.vocab and "senate" in corpus.vocab


def test_npz_object_array_of_dicts_with_tokens(tmp_path: Path) -> None:
    data = np.empty(N_DOCS, dtype=object)
    for i, (topic, title, _) in enumerate(npz_rows()):
        data[i] = {"category": topic, "tokens": title.split() + ["NUMBER"]}
    np.savez(tmp_path / "selected_filtered_data.npz", data=data)
    corpus = read(tmp_path, source="npz")
    assert corpus.notes["lemmatiser"].startswith("tokens as stored")
    assert "NUMBER" in corpus.vocab[:5] and "star" in corpus.vocab


def test_npz_of_an_unknown_layout_is_one_line(tmp_path: Path) -> None:
    np.savez(tmp_path / "selected_filtered_data.npz", data=np.array([[1, 2], [3, 4]]))
    with pytest.raises(CorruptFileError) as err:
        read(tmp_path)
    assert "data[0]" in one_line(err) and "ndarray of 2 items" in str(err.value)
    np.savez(tmp_path / "selected_filtered_data.npz", x=np.zeros(2))
    with pytest.raises(CorruptFileError, match="no array 'data' \\(its arrays: x\\)") as err:
        read(tmp_path)
    (tmp_path / "selected_filtered_data.npz").write_bytes(b"not a zip archive")
    with pytest.raises(CorruptFileError, match="not an .npz") as err:
        read(tmp_path)
    one_line(err)


def test_auto_prefers_the_raw_file(tmp_path: Path) -> None:
    write_newsspace(tmp_path)
    (tmp_path / "selected_filtered_data.npz").write_bytes(b"never read")
    assert read(tmp_path, cache=False).notes["source"] == "raw"


# ------------------------------------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    ("kwargs", "start"),
    [({"per_topic": 0}, "per_topic"), ({"per_topic": 6}, "per_topic"), ({"val_fraction": 0}, "val_fraction"),
     ({"test_fraction": 1.0}, "test_fraction"), ({"val_fraction": 0.5, "test_fraction": 0.5}, "val_fraction"),
     ({"max_length": 0}, "max_length"), ({"empty_documents": "keep"}, "empty_documents"),
     ({"source": "csv"}, "source"), ({"lemmatiser": "wordnet"}, "lemmatiser")],
)  # fmt: skip
def test_bad_settings_name_themselves(tmp_path: Path, kwargs: dict, start: str) -> None:
    with pytest.raises(ValueError, match=f"^{start}"):
        read(tmp_path, **kwargs)


def test_the_build_shows_progress(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_newsspace(tmp_path)
    read(tmp_path, progress=True, cache=False)
    assert "preprocessing AGNews once" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ fake corpus
