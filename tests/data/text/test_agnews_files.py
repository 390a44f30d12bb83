"""Gulli's AG corpus files and the authors' npz, read by ``agnews_files`` (directly, and through the AGNews-8
reader): the dump field by field, older single-byte records, the XML dump, bzip2, corrupt files, and the npz
layouts this reader knows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from clusterable.data.errors import CorruptFileError
from clusterable.data.text.agnews_files import Article, PickledFileError, read_articles

from .conftest import (
    AG_PAGE,
    ARTICLE_WORDS,
    N_DOCS,
    SEVEN,
    TINY_COUNTS,
    TOPIC_WORD,
    articles,
    newsspace_bytes,
    one_line,
    read,
    write_newsspace,
    write_xml,
)

pytestmark = pytest.mark.usefixtures("tiny_counts")


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
    with pytest.raises(PickledFileError, match="dataset.corpus.allow_pickle=true reads it if you trust the file"):
        read(tmp_path, source="npz")  # pickled objects are not read unless the user says so
    corpus = read(tmp_path, source="npz", allow_pickle=True)
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
