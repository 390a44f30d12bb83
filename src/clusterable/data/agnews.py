"""AGNews-8: the 8-topic corpus Kenyon-Dean et al. 2019 (COREL) built from Gulli's AG corpus of news articles.

**The recipe** (paper, "Experimental design"; supplement, section 1 and its Table 1). The 8 topics U.S., World,
Europe, Sports, Sci/Tech, Health, Business and Entertainment (``TOPICS``, in the paper's order: the label of a
topic is its position). Entertainment is rebuilt: the articles of the categories Entertainment, Top News and Top
Stories whose source is E! Online, TheCelebrityCafe.com or has "entertainment" in its name (``is_entertainment_source``:
the source, stripped and case-folded, equals ``e! online`` or ``thecelebritycafe.com``, or contains
``entertainment``); the other seven topics are the articles whose category is the topic's name, exactly. 12,000
articles per topic are sampled with a fixed seed; Entertainment has only 10,721 after the rebuild, so all of them
are kept: 94,721 documents (``EXPECTED_COUNTS``, checked on every build: a topic with another count fails with one
line naming it and both counts). A document is the article's title and description, concatenated, then
``text_preprocess.preprocess``'d (punctuation, spaCy tokens and lemmas, stop words, MONEY / YEAR / NUMBER).

**Our choices** where the paper is silent (its validation and test fractions were stripped from the text):
    - the validation and test sets are ``val_fraction`` and ``test_fraction`` of the 94,721 documents (10% each by
      default), stratified by topic and seeded (``split_off``), test first, then validation from the rest;
    - the vocabulary is every token of the training split, after ``PAD`` and ``UNK`` (ids 0 and 1) and the number
      tokens MONEY, YEAR, NUMBER (ids 2-4, always present so that their vectors always have a row); the words by
      decreasing count, ties alphabetical; a validation or test token outside it is ``UNK``;
    - a document longer than ``max_length`` tokens is truncated (the count is in the notes); a document left empty
      by the preprocessing is kept as one ``UNK`` token or dropped (``empty_documents``; counted too);
    - before preprocessing, HTML entities are decoded ("&#39;s" is a possessive, not the number 39; some text is
      escaped twice, and some lost its "&": "#39;") and HTML tags removed ("<b>", "<a href=...>").

**The distributed files** (http://groups.di.unipi.it/~gulli/AG_corpus_of_news_articles.html), read as found,
plain or compressed (bzip2 or gzip, told by their first bytes, whatever their name):
    - ``newsSpace`` (``newsSpace.bz2``): a MySQL dump (``SELECT ... INTO OUTFILE`` defaults), one article per
      line, 9 tab-separated fields source, url, title, image, category, description, rank, pubdate, video; NULL is
      ``\\N``; a backslash escapes a tab, a newline (an article's line breaks are backslash + newline), a
      backslash, and stands before ``0 b n r t Z`` for NUL, backspace, newline, carriage return, tab, Ctrl-Z.
      The bytes are mostly UTF-8, with older records in a single-byte encoding: a field that is not UTF-8 is read
      as Windows-1252 (Latin-1 where that fails). A line with another number of fields (8, without video, is
      accepted) is skipped and counted.
    - ``newsspace200.xml`` (``.bz``): one ``<all_news>`` element whose children are the fields of one article
      after another, ``<source>``, ``<url>``, ``<title>``, ``<image>``, ``<category>``, ``<description>``,
      ``<rank>``, ``<pubdate>``; a new article starts where a field repeats (and at the end of a wrapper element,
      if a copy wraps each article in one); a backslash before a line break is dropped.
This description rests on what public readers of these files rely on (loaders of the tab-separated dump that join
backslash-continued lines and split them on tabs into the 9 fields above, XML loaders that walk ``<all_news>``'s
flat children in cycles of the 8 tags) and on MySQL's documented ``INTO OUTFILE`` escaping, not on a copy of the
files: the notes of a build count the records read and the dump's lines skipped, to check a real copy against it.

**The authors' release** ``selected_filtered_data.npz`` (kiankd/corel2019, ``agnews/``): its ``agnews/example.py``
shows only that the archive holds an array under the key ``data``, one entry per document, and the file itself is
not in the repository's stored copy, so the layout of an entry is NOT verified. This reader accepts entries that
are mappings or NumPy records with a topic field (``topic``, ``category`` or ``label``, the topic's name;
``TrueEntertainment``, the name in the authors' ``stats.txt``, is Entertainment) and either ``tokens`` (already
preprocessed: used as they are) or ``title`` and ``description`` (or ``text``) (preprocessed here); any other
layout fails with one line describing the first entry. Object arrays are unpickled: read only a file you trust.

**Cache.** The built corpus is kept in ``<root>/cache/agnews8-<key>.npz`` (token ids and labels of each split) and
``.json`` (vocabulary, notes, key), written atomically; the key hashes every setting of the recipe, the source
file's name, size and modification time, ``EXPECTED_COUNTS`` and ``PREPROCESS_VERSION``, so that any change builds a
new cache. The lemmatiser used is recorded in the ``.json``: a cache built with another lemmatiser than the one this
machine would use now is rebuilt; where spaCy is not installed, the cache is used as it is. A cache that cannot be
read is rebuilt (with a warning).
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import html
import json
import logging
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

import numpy as np
import torch

from clusterable.data import text_preprocess
from clusterable.data.corpus import PAD, PAD_ID, SPECIAL_TOKENS, UNK, UNK_ID, Corpus
from clusterable.data.datamodule import split_off
from clusterable.data.errors import CorruptFileError, DatasetNotFoundError

__all__ = [
    "ENTERTAINMENT_CATEGORIES",
    "ENTERTAINMENT_SOURCES",
    "EXPECTED_COUNTS",
    "NPZ_FILE",
    "RAW_FILES",
    "TOPICS",
    "Article",
    "article_text",
    "build_vocab",
    "is_entertainment_source",
    "read_agnews8",
    "read_articles",
    "select_documents",
    "topic_of",
]

log = logging.getLogger(__name__)

# The paper's order; a topic's label is its position here.
TOPICS = ("U.S.", "World", "Europe", "Sports", "Sci/Tech", "Health", "Business", "Entertainment")
ENTERTAINMENT_CATEGORIES = ("Entertainment", "Top News", "Top Stories")
ENTERTAINMENT_SOURCES = ("e! online", "thecelebritycafe.com")  # case-folded; or "entertainment" in the name
ENTERTAINMENT_WORD = "entertainment"
# Documents per topic after the recipe's sampling (supplement, Table 1: 94,721 in all). A module attribute, not a
# constant inside a function, so that tests can shrink it for tiny fixture files.
EXPECTED_COUNTS: dict[str, int] = {topic: 12_000 for topic in TOPICS} | {"Entertainment": 10_721}
# The raw files looked for when ``raw_file`` is not given, in this order: the dump as distributed and unpacked.
RAW_FILES = ("newsSpace", "newsSpace.bz2", "newsspace200.xml", "newsspace200.xml.bz", "newsspace200.xml.bz2")
NPZ_FILE = "selected_filtered_data.npz"
RAW_FIELDS = ("source", "url", "title", "image", "category", "description", "rank", "pubdate", "video")
GULLI_PAGE = "http://groups.di.unipi.it/~gulli/AG_corpus_of_news_articles.html"
AUTHORS_REPO = "https://github.com/kiankd/corel2019 (agnews/selected_filtered_data.npz)"
CACHE_VERSION = 1  # part of the cache key: a change in what the cache holds must not reuse an older one
NPZ_TOPIC_ALIASES = {
    "TrueEntertainment": "Entertainment"
}  # the authors' stats.txt name for the rebuilt topic


class Article(NamedTuple):
    """The fields of one article the recipe uses (None where the file has NULL or no such field)."""

    source: str | None
    category: str | None
    title: str | None
    description: str | None


# ------------------------------------------------------------------------------------------------ the recipe


def is_entertainment_source(source: str | None) -> bool:
    """The supplement's entertainment sources: E! Online, TheCelebrityCafe.com (the name, stripped and case-folded,
    equal to ``ENTERTAINMENT_SOURCES``) or any source with "entertainment" in its name (case-insensitive)."""
    if not source:
        return False
    name = source.strip().casefold()
    return name in ENTERTAINMENT_SOURCES or ENTERTAINMENT_WORD in name


def topic_of(article: Article) -> str | None:
    """The recipe's topic of ``article``, or None: Entertainment for an Entertainment / Top News / Top Stories
    article from an entertainment source; the category itself for the other seven topics (exact names)."""
    category = (article.category or "").strip()
    if category in ENTERTAINMENT_CATEGORIES:
        return "Entertainment" if is_entertainment_source(article.source) else None
    return category if category in TOPICS else None


_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_ORPHAN_ENTITY = re.compile(r"(?<![&\w])#(\d{2,4});")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def article_text(title: str | None, description: str | None) -> str:
    """The document of one article: title and description joined by a space, HTML entities decoded (twice at
    most: some text is escaped twice), entities that lost their "&" ("#39;") decoded, HTML tags and control
    characters replaced by spaces, runs of spaces collapsed."""
    text = " ".join(part for part in (title, description) if part)
    for _ in range(2):
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = decoded
    text = _ORPHAN_ENTITY.sub(lambda m: chr(int(m[1])), text)
    text = _CONTROL.sub(" ", _TAG.sub(" ", text))
    return " ".join(text.split())


def select_documents(
    topics: Sequence[str | None], per_topic: int, seed: int, where: str
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Sample the recipe's documents: ``min(per_topic, available)`` of each topic, without replacement, from one
    ``numpy.random.default_rng(seed)`` drawn topic after topic in ``TOPICS`` order.

    Args:
        topics: each candidate document's topic (None: not one of the 8).
        per_topic: the most documents kept of a topic (the recipe: 12,000).
        seed: the sampling seed.
        where: the file the documents come from, for the error message.

    Returns:
        (the chosen documents' positions in ``topics``, in file order within each topic, topic after topic; their
        labels (positions in ``TOPICS``); the number available of each topic).

    Raises:
        CorruptFileError: a topic's count is not ``min(per_topic, EXPECTED_COUNTS[topic])`` (one line: the topic,
            both counts, the file).
    """
    pools: dict[str, list[int]] = {topic: [] for topic in TOPICS}
    for i, topic in enumerate(topics):
        if topic is not None:
            pools[topic].append(i)
    rng = np.random.default_rng(seed)
    chosen, labels = [], []
    for label, topic in enumerate(TOPICS):
        pool = np.asarray(pools[topic], dtype=np.int64)
        count = min(per_topic, len(pool))
        expected = min(per_topic, EXPECTED_COUNTS[topic])
        if count != expected:
            raise CorruptFileError(_count_message(topic, count, expected, len(pool), per_topic, where))
        picked = (
            np.sort(rng.choice(len(pool), size=count, replace=False))
            if count < len(pool)
            else np.arange(count)
        )
        chosen.append(pool[picked])
        labels.append(np.full(count, label, dtype=np.int64))
    return np.concatenate(chosen), np.concatenate(labels), {t: len(p) for t, p in pools.items()}


def _count_message(topic: str, count: int, expected: int, available: int, per_topic: int, where: str) -> str:
    if topic == "Entertainment":
        why = (
            "its articles are those of Entertainment / Top News / Top Stories from E! Online, "
            "TheCelebrityCafe.com or a source with 'entertainment' in its name"
        )
        cause = f"{where} is not the whole AG corpus, or the authors matched the sources otherwise"
    else:
        why = f"its category holds {available:,} articles, the recipe samples {per_topic:,}"
        cause = f"{where} is not the whole AG corpus"
    return (
        f"AGNews-8 topic {topic} has {count:,} documents, expected {expected:,} (COREL's supplement, Table 1; "
        f"{why}): {cause}"
    )


def build_vocab(documents: Sequence[Sequence[str]]) -> list[str]:
    """``[PAD, UNK, MONEY, YEAR, NUMBER]`` then every other token of ``documents`` by decreasing count, ties in
    alphabetical order (so the same documents always give the same ids)."""
    head = [PAD, UNK, *SPECIAL_TOKENS]
    counts = Counter(token for doc in documents for token in doc)
    for token in head:
        counts.pop(token, None)
    return head + sorted(counts, key=lambda token: (-counts[token], token))


# ------------------------------------------------------------------------------------------------ the reader


def read_agnews8(
    root: str,
    source: Literal["auto", "raw", "npz"] = "auto",
    raw_file: str | None = None,
    npz_file: str = NPZ_FILE,
    per_topic: int = 12_000,
    sample_seed: int = 0,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    split_seed: int = 0,
    max_length: int = 100,
    empty_documents: Literal["unk", "drop"] = "unk",
    lemmatiser: Literal["auto", "trained", "lookup"] = "auto",
    cache: bool = True,
    progress: bool = True,
) -> Corpus:
    """AGNews-8 as COREL built it (see the module docstring), from the files in ``root``.

    Args:
        root: the folder holding the AG corpus file (or the authors' npz); the cache goes to ``<root>/cache``.
        source: ``raw`` (Gulli's file), ``npz`` (the authors' release) or ``auto`` (the raw file if there is one,
            else the npz).
        raw_file: the raw file's name in ``root``; None: the first of ``RAW_FILES`` present.
        npz_file: the authors' release's name in ``root``.
        per_topic: the most documents sampled of a topic (the recipe: 12,000, also the largest allowed).
        sample_seed: seed of the per-topic sampling.
        val_fraction: the share of the documents held out for validation (stratified by topic).
        test_fraction: the share held out for the test set (stratified by topic).
        split_seed: seed of the validation and test hold-outs.
        max_length: the most tokens of a document; longer ones are truncated (counted in the notes).
        empty_documents: a document the preprocessing leaves empty is kept as one ``UNK`` (``unk``) or dropped
            (``drop``); counted in the notes.
        lemmatiser: ``auto`` (spaCy's trained English pipeline if installed, else its lookup lemmatiser),
            ``trained`` or ``lookup`` (see ``text_preprocess``).
        cache: read the built corpus from ``<root>/cache`` when it is there, and write it there after a build.
        progress: show tqdm bars (stderr) while the corpus is read and preprocessed.

    Returns:
        A ``Corpus``: ``{"train", "val", "test"}`` with ``inputs`` (N, L) long token ids (PAD-padded to the
        longest document, L <= ``max_length``) and ``labels`` (N,) long in [0, 8) (``TOPICS``); the vocabulary;
        notes (source file, lemmatiser, counts per topic and split, documents truncated and empty, the cache).

    Raises:
        ValueError: a setting out of range (the message starts with the parameter's name).
        DatasetNotFoundError: no corpus file in ``root`` (one line naming the files, the folder, where to get them).
        CorruptFileError: a file that is not what its format promises, or a topic count that is not the recipe's.
        text_preprocess.TextDependencyError: spaCy is needed (no cache) and not installed.
    """
    _check_settings(source, per_topic, val_fraction, test_fraction, max_length, empty_documents)
    text_preprocess.resolve_lemmatiser(lemmatiser)  # a bad name fails here, before any file is read
    folder = Path(root).expanduser().resolve()
    kind, path = _find_source(folder, source, raw_file, npz_file)
    settings = {
        "source": kind, "per_topic": per_topic, "sample_seed": sample_seed, "val_fraction": val_fraction,
        "test_fraction": test_fraction, "split_seed": split_seed, "max_length": max_length,
        "empty_documents": empty_documents, "expected_counts": dict(EXPECTED_COUNTS), "topics": list(TOPICS),
        "preprocess_version": text_preprocess.PREPROCESS_VERSION, "cache_version": CACHE_VERSION,
    }  # fmt: skip
    stat = path.stat()
    identity = {**settings, "file": path.name, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    cache_base = folder / "cache" / f"agnews8-{key[:16]}"
    if cache:
        corpus = _load_cache(cache_base, key, lemmatiser)
        if corpus is not None:
            return corpus
    start = time.perf_counter()
    if kind == "raw":
        documents, labels, notes = _raw_documents(path, per_topic, sample_seed, lemmatiser, progress)
    else:
        documents, labels, notes = _npz_documents(path, per_topic, sample_seed, lemmatiser, progress)
    corpus = _assemble(documents, labels, settings, notes)
    corpus.notes.update(
        file=str(path), source=kind, settings=settings, build_seconds=round(time.perf_counter() - start, 1)
    )
    if cache:
        _write_cache(cache_base, key, corpus)
    return corpus


def _check_settings(
    source: str, per_topic: int, val_fraction: float, test_fraction: float, max_length: int, empty: str
) -> None:
    if source not in ("auto", "raw", "npz"):
        raise ValueError(f"source must be auto, raw or npz, got {source!r}")
    most = max(EXPECTED_COUNTS.values())
    if isinstance(per_topic, bool) or not isinstance(per_topic, int) or not 1 <= per_topic <= most:
        raise ValueError(
            f"per_topic must be an integer in [1, {most:,}] (the recipe samples {most:,}; more is not known to "
            f"exist in every topic), got {per_topic!r}"
        )
    for name, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    if val_fraction + test_fraction >= 1:
        raise ValueError(
            f"val_fraction + test_fraction must be below 1 (the rest is the training split), got "
            f"{val_fraction} + {test_fraction}"
        )
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a positive integer (tokens per document), got {max_length!r}")
    if empty not in ("unk", "drop"):
        raise ValueError(f"empty_documents must be unk or drop, got {empty!r}")


def _find_source(folder: Path, source: str, raw_file: str | None, npz_file: str) -> tuple[str, Path]:
    """(``raw`` or ``npz``, the file's path), or a ``DatasetNotFoundError`` naming what was looked for."""
    raw_names = [raw_file] if raw_file is not None else list(RAW_FILES)
    if source in ("auto", "raw"):
        for name in raw_names:
            if (folder / name).is_file():
                return "raw", folder / name
    if source in ("auto", "npz") and (folder / npz_file).is_file():
        return "npz", folder / npz_file
    raw_what = f"{' / '.join(raw_names)} (Gulli's AG corpus: {GULLI_PAGE})"
    npz_what = f"{npz_file} (the authors' preprocessed release: {AUTHORS_REPO})"
    what = {"raw": raw_what, "npz": npz_what, "auto": f"{raw_what} or {npz_what}"}[source]
    exists = "" if folder.is_dir() else " (the folder does not exist)"
    raise DatasetNotFoundError(
        f"AGNews-8 not found: no {what} in {folder}{exists}. Put the file there, or set the dataset's root to the "
        "folder that holds it; dataset.source=fake runs offline on a synthetic stand-in."
    )


def _raw_documents(
    path: Path, per_topic: int, seed: int, lemmatiser: str, progress: bool
) -> tuple[list[list[str]], np.ndarray, dict[str, Any]]:
    """Read Gulli's file, sample the recipe's documents and preprocess them: (token lists, labels, notes)."""
    # Loaded first: without spaCy the build fails at once, not after reading the whole file.
    preprocessor = text_preprocess.load_preprocessor(lemmatiser)  # type: ignore[arg-type]
    texts: list[tuple[str | None, str | None]] = []
    topics: list[str | None] = []
    stats: dict[str, Any] = {"records": 0, "malformed_records": 0}
    for article in read_articles(path, stats, progress):
        topic = topic_of(article)
        if topic is not None:  # only candidates are kept: a third of the corpus, in memory for one build
            topics.append(topic)
            texts.append((article.title, article.description))
    if stats["records"] == 0:
        raise CorruptFileError(f"AG corpus file {path} holds no article record; {_replace()}")
    chosen, labels, pools = select_documents(topics, per_topic, seed, str(path))
    documents = [article_text(*texts[i]) for i in chosen]
    del texts
    tokens = preprocessor.many(documents, progress=progress, total=len(documents))
    notes = {
        "format": stats.get("format"), "records": stats["records"], "malformed_records": stats["malformed_records"],
        "available_per_topic": pools, "lemmatiser": preprocessor.name,
    }  # fmt: skip
    return tokens, labels, notes


def _replace() -> str:
    return f"replace it with the file from {GULLI_PAGE}"


# ------------------------------------------------------------------------------------------------ raw formats


def read_articles(
    path: str | Path, stats: dict[str, Any] | None = None, progress: bool = False
) -> Iterator[Article]:
    """The articles of Gulli's file at ``path``, in file order: the tab-separated ``newsSpace`` dump or the
    ``newsspace200.xml`` dump, plain, bzip2 or gzip (told by the first bytes; see the module docstring).

    ``stats`` (if given) receives ``format``, ``records`` and ``malformed_records`` (lines of the dump with another
    number of fields than 8 or 9, skipped).

    Raises:
        CorruptFileError: a compressed file that ends early or is not what its first bytes say, or XML that is not
            well-formed (one line naming the file).
    """
    path = Path(path)
    stats = {} if stats is None else stats
    stats.setdefault("records", 0)
    stats.setdefault("malformed_records", 0)
    bar = _bar(progress, f"reading {path.name}", "article")
    try:
        with _open_raw(path) as stream:
            head = stream.read(1024)
        is_xml = head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<")
        stats["format"] = "newsspace200.xml (XML)" if is_xml else "newsSpace (tab-separated MySQL dump)"
        with _open_raw(path) as stream:
            articles = _xml_articles(stream, path) if is_xml else _dump_articles(stream, stats)
            for article in articles:
                stats["records"] += 1
                bar.update(1)
                yield article
    except (OSError, EOFError, zlib.error) as err:  # bz2 / gzip: truncated or garbled data
        raise CorruptFileError(
            f"AG corpus file {path} is corrupt: it cannot be read to the end ({_first_line(err)}); {_replace()}"
        ) from None
    finally:
        bar.close()


def _open_raw(path: Path) -> IO[bytes]:
    """``path`` opened for reading bytes, decompressed if its first bytes are bzip2's or gzip's."""
    with open(path, "rb") as f:
        magic = f.read(3)
    if magic == b"BZh":
        return bz2.open(path, "rb")
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


# The escapes of MySQL's INTO OUTFILE: a backslash before one of these letters stands for a control character;
# before anything else (tab, newline, backslash) for that character itself.
_ESCAPES = {b"0": b"\0", b"b": b"\b", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"Z": b"\x1a"}
_PIECES = re.compile(rb"\\(.)|(\t)|([^\\\t]+)", re.S)
_NULL = b"\\N"


def _dump_articles(stream: IO[bytes], stats: dict[str, Any]) -> Iterator[Article]:
    """The articles of the tab-separated dump: lines joined where a newline is escaped, split into fields."""
    pending: list[bytes] = []
    for line in stream:
        pending.append(line)
        body = line[:-1] if line.endswith(b"\n") else line
        if line.endswith(b"\n") and (len(body) - len(body.rstrip(b"\\"))) % 2 == 1:
            continue  # an escaped newline: the article goes on on the next line
        record = b"".join(pending).rstrip(b"\r\n") if len(pending) > 1 else body.rstrip(b"\r")
        pending = []
        if not record:
            continue
        fields = _fields(record)
        if len(fields) not in (len(RAW_FIELDS), len(RAW_FIELDS) - 1):
            stats["malformed_records"] += 1
            continue
        source, _, title, _, category, description = (_decode(f) for f in fields[:6])
        yield Article(source, category, title, description)
    if pending:  # the file ends inside an escaped newline: a truncated last record
        stats["malformed_records"] += 1


def _fields(record: bytes) -> list[bytes | None]:
    """The fields of one record of the dump, unescaped; ``None`` for NULL (``\\N``)."""
    fields: list[bytes | None] = [None if f == _NULL else f for f in record.split(b"\t")]
    if not any(f is not None and b"\\" in f for f in fields):
        return fields  # the usual case: no escape but NULLs, no tab inside a field
    fields, buffer, pieces, null = [], bytearray(), 0, False
    for escaped, tab, text in _PIECES.findall(record):
        if tab:
            fields.append(None if null and pieces == 1 else bytes(buffer))
            buffer, pieces, null = bytearray(), 0, False
            continue
        pieces += 1
        if text:
            buffer += text
        else:
            null = escaped == b"N"
            buffer += _ESCAPES.get(escaped, escaped)
    fields.append(None if null and pieces == 1 else bytes(buffer))
    return fields


def _decode(field: bytes | None) -> str | None:
    """UTF-8, or (older records) Windows-1252, or Latin-1, which decodes any byte."""
    if field is None:
        return None
    for encoding in ("utf-8", "cp1252"):
        try:
            return field.decode(encoding)
        except UnicodeDecodeError:
            pass
    return field.decode("latin-1")


_XML_FIELDS = frozenset(RAW_FIELDS)


def _xml_articles(stream: IO[bytes], path: Path) -> Iterator[Article]:
    """The articles of the XML dump: the field elements in document order, a new article wherever a field
    repeats or a wrapper element ends; the tree is cleared as it goes, so memory stays small."""
    fields: dict[str, str | None] = {}
    root = None
    try:
        for event, element in ET.iterparse(stream, events=("start", "end")):
            if event == "start":
                root = element if root is None else root
                continue
            tag = element.tag
            if tag in _XML_FIELDS:
                if tag in fields:
                    yield _xml_article(fields)
                    fields = {}
                    root.clear()  # type: ignore[union-attr]
                fields[tag] = element.text
            # A wrapper element (one per article in some copies) ends, or the root: the article is complete.
            elif fields and len(element):
                yield _xml_article(fields)
                fields = {}
                if element is not root:
                    root.clear()  # type: ignore[union-attr]
    except ET.ParseError as err:
        raise CorruptFileError(
            f"AG corpus file {path} is not well-formed XML ({err}); {_replace()}"
        ) from None
    if fields:
        yield _xml_article(fields)


def _xml_article(fields: dict[str, str | None]) -> Article:
    def text(name: str) -> str | None:
        value = fields.get(name)
        # The XML dump keeps the database's line continuations: a backslash before a line break.
        return None if value is None else value.replace("\\\n", "\n")

    return Article(text("source"), text("category"), text("title"), text("description"))


# ------------------------------------------------------------------------------------------------ the authors' npz


_ZIP_MAGIC = b"PK\x03\x04"


def _npz_documents(
    path: Path, per_topic: int, seed: int, lemmatiser: str, progress: bool
) -> tuple[list[list[str]], np.ndarray, dict[str, Any]]:
    """The authors' release (unverified layout, see the module docstring): (token lists, labels, notes)."""
    data = _npz_data(path)
    topics: list[str | None] = []
    contents: list[str | list[str]] = []
    for i, entry in enumerate(data):
        topic, content = _npz_entry(entry, i, path)
        topic = NPZ_TOPIC_ALIASES.get(topic, topic)
        topics.append(topic if topic in TOPICS else None)
        contents.append(content)
    chosen, labels, pools = select_documents(topics, per_topic, seed, str(path))
    texts = [(j, contents[i]) for j, i in enumerate(chosen) if isinstance(contents[i], str)]
    tokens: list[list[str]] = [list(contents[i]) if not isinstance(contents[i], str) else [] for i in chosen]
    name = "tokens as stored in the file (not preprocessed here)"
    if texts:
        preprocessor = text_preprocess.load_preprocessor(lemmatiser)  # type: ignore[arg-type]
        done = preprocessor.many([t for _, t in texts], progress=progress, total=len(texts))
        for (j, _), doc in zip(texts, done, strict=True):
            tokens[j] = doc
        name = preprocessor.name
    notes = {
        "format": "selected_filtered_data.npz (the authors' release; entry layout unverified)",
        "records": len(data), "available_per_topic": pools, "lemmatiser": name,
    }  # fmt: skip
    return tokens, labels, notes


def _npz_data(path: Path) -> np.ndarray:
    """The archive's ``data`` array; object arrays (pickled entries) are read too."""

    def corrupt(what: str) -> CorruptFileError:
        return CorruptFileError(
            f"AGNews npz file {path} is corrupt: {what}; replace it with {NPZ_FILE} from {AUTHORS_REPO}"
        )

    # np.load would take anything but a zip archive for a pickle and say so: say what the file is not instead.
    with open(path, "rb") as f:
        if f.read(4) != _ZIP_MAGIC:
            raise corrupt("it is not an .npz (zip) archive")
    try:
        for allow_pickle in (False, True):
            with np.load(path, allow_pickle=allow_pickle) as archive:
                if "data" not in archive.files:
                    raise corrupt(
                        f"it has no array 'data' (its arrays: {', '.join(archive.files) or 'none'})"
                    )
                try:
                    return np.asarray(archive["data"])
                except ValueError:  # an object array: its entries are pickled Python objects
                    if allow_pickle:
                        raise
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as err:
        raise corrupt(f"it cannot be read ({_first_line(err)})") from None
    raise AssertionError("unreachable")  # the loop returns or raises


def _npz_entry(entry: Any, index: int, path: Path) -> tuple[str, str | list[str]]:
    """(topic, text or tokens) of one entry of the authors' ``data`` array, for the layouts this reader knows."""
    fields: dict[str, Any] | None = None
    if isinstance(entry, dict):
        fields = entry
    elif isinstance(entry, np.void) and entry.dtype.names:
        fields = {name: entry[name] for name in entry.dtype.names}
    if fields is not None:
        topic = next((fields[k] for k in ("topic", "category", "label") if k in fields), None)
        tokens = fields.get("tokens")
        if isinstance(topic, (str, np.str_)):
            if tokens is not None and not isinstance(tokens, (str, np.str_)):
                return str(topic), [str(t) for t in tokens]
            if "title" in fields or "description" in fields:
                return str(topic), article_text(_str(fields.get("title")), _str(fields.get("description")))
            if "text" in fields:
                return str(topic), article_text(_str(fields["text"]), None)
    raise CorruptFileError(
        f"AGNews npz file {path}: data[{index}] has a layout this reader does not know ({_describe(entry)}); it "
        "reads entries that are mappings or records with a topic name (topic, category or label) and tokens, or "
        "title and description, or text (the release's layout could not be verified)"
    )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _describe(entry: Any) -> str:
    if isinstance(entry, dict):
        return f"a dict with keys {', '.join(map(str, list(entry)[:10]))}"
    if isinstance(entry, np.void) and entry.dtype.names:
        return f"a record with fields {', '.join(entry.dtype.names)}"
    if isinstance(entry, (tuple, list, np.ndarray)):
        kinds = ", ".join(type(x).__name__ for x in list(entry)[:10])
        return f"a {type(entry).__name__} of {len(entry)} items ({kinds})"
    return f"a {type(entry).__name__}"


# ------------------------------------------------------------------------------------------------ the corpus


def _assemble(
    documents: list[list[str]], labels: np.ndarray, settings: dict[str, Any], notes: dict[str, Any]
) -> Corpus:
    """Empty documents, splits, truncation, vocabulary and token ids: the ``Corpus`` of the chosen documents."""
    empty = [i for i, doc in enumerate(documents) if not doc]
    if settings["empty_documents"] == "drop":
        keep = np.setdiff1d(np.arange(len(documents)), np.asarray(empty, dtype=np.int64))
        documents, labels = [documents[i] for i in keep], labels[keep]
    else:
        for i in empty:
            documents[i] = [UNK]
    n = len(documents)
    counts = {"test": round(settings["test_fraction"] * n), "val": round(settings["val_fraction"] * n)}
    for split, count in counts.items():
        if count < 1:
            raise ValueError(f"{split}_fraction of {n} documents holds none: raise it")
    if n - counts["test"] - counts["val"] < 1:
        raise ValueError(f"val_fraction and test_fraction leave no training document of {n}")
    rows = {"labels": torch.as_tensor(labels), "index": torch.arange(n)}
    rest, test = split_off(rows, counts["test"], seed=settings["split_seed"])
    train, val = split_off(rest, counts["val"], seed=settings["split_seed"])
    max_length = settings["max_length"]
    truncated = sum(len(doc) > max_length for doc in documents)
    order = {name: split["index"].numpy() for name, split in (("train", train), ("val", val), ("test", test))}
    vocab = build_vocab([documents[i][:max_length] for i in order["train"]])
    ids = {token: i for i, token in enumerate(vocab)}
    width = max(1, max((min(len(doc), max_length) for doc in documents), default=1))
    splits = {}
    for name, rows_of in order.items():
        inputs = np.full((len(rows_of), width), PAD_ID, dtype=np.int64)
        for r, i in enumerate(rows_of):
            doc = documents[i][:max_length]
            inputs[r, : len(doc)] = [ids.get(token, UNK_ID) for token in doc]
        splits[name] = {"inputs": torch.from_numpy(inputs), "labels": torch.as_tensor(labels[rows_of])}
    notes = {
        "dataset": "agnews8", "classes": list(TOPICS), **notes,
        "documents": n, "documents_per_topic": {t: int((labels == k).sum()) for k, t in enumerate(TOPICS)},
        "splits": {name: len(rows_of) for name, rows_of in order.items()},
        "vocab_size": len(vocab), "max_length": max_length, "width": width, "truncated_documents": truncated,
        "empty_documents": len(empty), "empty_policy": settings["empty_documents"],
        "unk_rate": {name: _unk_rate(split["inputs"]) for name, split in splits.items()},
    }  # fmt: skip
    return Corpus(splits=splits, vocab=vocab, notes=notes)


def _unk_rate(inputs: torch.Tensor) -> float:
    """The share of a split's (non-padding) tokens that are UNK."""
    real = int((inputs != PAD_ID).sum())
    return round(int((inputs == UNK_ID).sum()) / real, 4) if real else 0.0


# ------------------------------------------------------------------------------------------------ the cache


def _load_cache(base: Path, key: str, lemmatiser: str) -> Corpus | None:
    """The cached corpus, or None: absent, built with another lemmatiser than this machine's, or unreadable
    (then with a warning: it is rebuilt and overwritten)."""
    meta_path, arrays_path = base.with_suffix(".json"), base.with_suffix(".npz")
    if not meta_path.is_file() or not arrays_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("key") != key or meta.get("bytes") != arrays_path.stat().st_size:
            raise ValueError("it belongs to other settings or to another build")
        vocab = meta["vocab"]
        now = text_preprocess.lemmatiser_name(lemmatiser)  # type: ignore[arg-type]
        used = meta["notes"].get("lemmatiser")
        if now is not None and used != now and str(used).startswith("spacy"):  # preprocessed here, not stored
            log.info("AGNews cache %s was built with %s, this machine uses %s: rebuilding", base, used, now)
            return None
        splits = {}
        with np.load(arrays_path, allow_pickle=False) as arrays:
            for name in ("train", "val", "test"):
                inputs, labels = arrays[f"{name}_inputs"], arrays[f"{name}_labels"]
                bad_ids = inputs.size and (inputs.min() < 0 or inputs.max() >= len(vocab))
                if inputs.ndim != 2 or labels.shape != (len(inputs),) or bad_ids:
                    raise ValueError(f"its {name} arrays do not fit together or with the vocabulary")
                splits[name] = {
                    "inputs": torch.from_numpy(inputs.astype(np.int64)),
                    "labels": torch.from_numpy(labels.astype(np.int64)),
                }
        notes = {**meta["notes"], "cache": str(arrays_path), "cache_hit": True}
        return Corpus(splits=splits, vocab=vocab, notes=notes)
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        log.warning("AGNews cache %s is unreadable (%s): building the corpus again", base, _first_line(err))
        return None


def _write_cache(base: Path, key: str, corpus: Corpus) -> None:
    """Write the corpus next to ``base`` (``.npz`` then ``.json``), each atomically (a temporary file renamed);
    the ``.json`` records the ``.npz``'s size, so a pair from two builds is never taken for one. A cache that
    cannot be written is a warning, not an error: the corpus was built."""
    meta_path, arrays_path = base.with_suffix(".json"), base.with_suffix(".npz")
    suffix = f".{os.getpid()}.partial"
    corpus.notes.update(cache=str(arrays_path), cache_hit=False)
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        id_type = np.int32 if len(corpus.vocab) < 2**31 else np.int64  # half the bytes to read back
        arrays = {}
        for name, split in corpus.splits.items():
            arrays[f"{name}_inputs"] = split["inputs"].numpy().astype(id_type)
            arrays[f"{name}_labels"] = split["labels"].numpy()
        partial = arrays_path.with_name(arrays_path.name + suffix)
        with open(partial, "wb") as f:
            np.savez(f, **arrays)
        os.replace(partial, arrays_path)
        meta = {"key": key, "bytes": arrays_path.stat().st_size, "vocab": corpus.vocab, "notes": corpus.notes}
        partial = meta_path.with_name(meta_path.name + suffix)
        partial.write_text(json.dumps(meta))
        os.replace(partial, meta_path)
    except OSError as err:
        for leftover in base.parent.glob(f"{base.name}.*{suffix}"):
            leftover.unlink(missing_ok=True)
        log.warning("AGNews cache %s cannot be written (%s): the next run builds the corpus again", base, err)


# ------------------------------------------------------------------------------------------------ helpers


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(enabled: bool, desc: str, unit: str) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(desc=desc, unit=unit, file=sys.stderr, mininterval=2.0, unit_scale=True)


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
