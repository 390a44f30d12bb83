"""Tiny AG corpora written in the distributed formats (the tab-separated ``newsSpace`` dump, plain and bzip2, and
the ``newsspace200.xml`` dump) for the AGNews-8 tests, and the reader called on them."""

from __future__ import annotations

import bz2
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from clusterable.data.text import agnews, agnews_files
from clusterable.data.text.agnews import read_agnews8
from clusterable.data.text.corpus import PAD_ID, Corpus

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
AG_PAGE = agnews_files.GULLI_PAGE


@pytest.fixture
def tiny_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe's per-topic counts shrunk to the fixture corpus's (the AGNews test modules use it throughout)."""
    monkeypatch.setattr(agnews, "EXPECTED_COUNTS", dict(TINY_COUNTS))


def articles() -> list[tuple[str, str, str, str | None]]:
    """(source, category, title, description) of the fixture corpus, in file order."""
    rows: list[tuple[str, str, str, str | None]] = []
    for topic in SEVEN:
        for word in ARTICLE_WORDS:
            rows.append(("Reuters", topic, f"{TOPIC_WORD[topic]} {word}", f"{word.capitalize()} said on Monday."))
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
        for tag, value in zip(agnews_files.RAW_FIELDS[:8], fields, strict=True):
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
