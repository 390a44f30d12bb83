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
``preprocess.preprocess``'d (punctuation, spaCy tokens and lemmas, stop words, MONEY / YEAR / NUMBER).

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

**The files** are Gulli's (``newsSpace`` or ``newsspace200.xml``, plain or compressed) or the authors' release
``selected_filtered_data.npz``, read as records by ``clusterable.data.text.agnews_files`` (formats and what is
verified about them there); the built corpus is cached in ``<root>/cache`` (``clusterable.data.text.agnews_cache``).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError
from clusterable.data.splits import split_off
from clusterable.data.text import preprocess
from clusterable.data.text.agnews_cache import CACHE_VERSION, load_cache, write_cache
from clusterable.data.text.agnews_files import (
    AUTHORS_REPO,
    GULLI_PAGE,
    NPZ_FILE,
    RAW_FILES,
    Article,
    read_articles,
    read_npz,
)
from clusterable.data.text.corpus import PAD, PAD_ID, SPECIAL_TOKENS, UNK, UNK_ID, Corpus

__all__ = [
    "ENTERTAINMENT_CATEGORIES",
    "ENTERTAINMENT_SOURCES",
    "EXPECTED_COUNTS",
    "TOPICS",
    "article_text",
    "build_vocab",
    "is_entertainment_source",
    "read_agnews8",
    "select_documents",
    "topic_of",
]

# The paper's order; a topic's label is its position here.
TOPICS = ("U.S.", "World", "Europe", "Sports", "Sci/Tech", "Health", "Business", "Entertainment")
ENTERTAINMENT_CATEGORIES = ("Entertainment", "Top News", "Top Stories")
ENTERTAINMENT_SOURCES = ("e! online", "thecelebritycafe.com")  # case-folded; or "entertainment" in the name
ENTERTAINMENT_WORD = "entertainment"
# Documents per topic after the recipe's sampling (supplement, Table 1: 94,721 in all). A module attribute, not a
# constant inside a function, so that tests can shrink it for tiny fixture files.
EXPECTED_COUNTS: dict[str, int] = {topic: 12_000 for topic in TOPICS} | {"Entertainment": 10_721}
NPZ_TOPIC_ALIASES = {"TrueEntertainment": "Entertainment"}  # the authors' stats.txt name for the rebuilt topic


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
        picked = np.sort(rng.choice(len(pool), size=count, replace=False)) if count < len(pool) else np.arange(count)
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
    allow_pickle: bool = False,
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
            ``trained`` or ``lookup`` (see ``clusterable.data.text.preprocess``).
        cache: read the built corpus from ``<root>/cache`` when it is there, and write it there after a build.
        progress: show tqdm bars (stderr) while the corpus is read and preprocessed.
        allow_pickle: read the authors' npz although its entries are pickled objects (unpickling a file can run
            code from it): only for a file you trust. False: such a file is refused in one line naming this option.

    Returns:
        A ``Corpus``: ``{"train", "val", "test"}`` with ``inputs`` (N, L) long token ids (PAD-padded to the
        longest document, L <= ``max_length``) and ``labels`` (N,) long in [0, 8) (``TOPICS``); the vocabulary;
        notes (source file, lemmatiser, counts per topic and split, documents truncated and empty, the cache).

    Raises:
        ValueError: a setting out of range (the message starts with the parameter's name).
        DatasetNotFoundError: no corpus file in ``root`` (one line naming the files, the folder, where to get them).
        CorruptFileError: a file that is not what its format promises, or a topic count that is not the recipe's.
        preprocess.TextDependencyError: spaCy is needed (no cache) and not installed.
    """
    _check_settings(source, per_topic, val_fraction, test_fraction, max_length, empty_documents)
    preprocess.resolve_lemmatiser(lemmatiser)  # a bad name fails here, before any file is read
    folder = Path(root).expanduser().resolve()
    kind, path = _find_source(folder, source, raw_file, npz_file)
    settings = {
        "source": kind,
        "per_topic": per_topic,
        "sample_seed": sample_seed,
        "val_fraction": val_fraction,
        "test_fraction": test_fraction,
        "split_seed": split_seed,
        "max_length": max_length,
        "empty_documents": empty_documents,
        "expected_counts": dict(EXPECTED_COUNTS),
        "topics": list(TOPICS),
        "preprocess_version": preprocess.PREPROCESS_VERSION,
        "cache_version": CACHE_VERSION,
    }
    stat = path.stat()
    identity = {**settings, "file": path.name, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    cache_base = folder / "cache" / f"agnews8-{key[:16]}"
    if cache:
        corpus = load_cache(cache_base, key, lemmatiser)
        if corpus is not None:
            return corpus
    start = time.perf_counter()
    if kind == "raw":
        documents, labels, notes = _raw_documents(path, per_topic, sample_seed, lemmatiser, progress)
    else:
        documents, labels, notes = _npz_documents(path, per_topic, sample_seed, lemmatiser, progress, allow_pickle)
    corpus = _assemble(documents, labels, settings, notes)
    corpus.notes.update(
        file=str(path), source=kind, settings=settings, build_seconds=round(time.perf_counter() - start, 1)
    )
    if cache:
        write_cache(cache_base, key, corpus)
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
    preprocessor = preprocess.load_preprocessor(lemmatiser)  # type: ignore[arg-type]
    texts: list[tuple[str | None, str | None]] = []
    topics: list[str | None] = []
    stats: dict[str, Any] = {"records": 0, "malformed_records": 0}
    for article in read_articles(path, stats, progress):
        topic = topic_of(article)
        if topic is not None:  # only candidates are kept: a third of the corpus, in memory for one build
            topics.append(topic)
            texts.append((article.title, article.description))
    if stats["records"] == 0:
        raise CorruptFileError(
            f"AG corpus file {path} holds no article record; replace it with the file from {GULLI_PAGE}"
        )
    chosen, labels, pools = select_documents(topics, per_topic, seed, str(path))
    documents = [article_text(*texts[i]) for i in chosen]
    del texts
    tokens = preprocessor.many(documents, progress=progress, total=len(documents))
    notes = {
        "format": stats.get("format"),
        "records": stats["records"],
        "malformed_records": stats["malformed_records"],
        "available_per_topic": pools,
        "lemmatiser": preprocessor.name,
    }
    return tokens, labels, notes


def _npz_documents(
    path: Path, per_topic: int, seed: int, lemmatiser: str, progress: bool, allow_pickle: bool
) -> tuple[list[list[str]], np.ndarray, dict[str, Any]]:
    """The authors' release (unverified layout, see ``agnews_files``): (token lists, labels, notes)."""
    data = read_npz(path, allow_pickle=allow_pickle)
    topics: list[str | None] = []
    contents: list[str | list[str]] = []
    for topic, content in data:
        topic = NPZ_TOPIC_ALIASES.get(topic, topic)
        topics.append(topic if topic in TOPICS else None)
        # An article's fields become its document as the raw file's do; stored tokens are used as they are.
        contents.append(article_text(content.title, content.description) if isinstance(content, Article) else content)
    chosen, labels, pools = select_documents(topics, per_topic, seed, str(path))
    texts = [(j, contents[i]) for j, i in enumerate(chosen) if isinstance(contents[i], str)]
    tokens: list[list[str]] = [list(contents[i]) if not isinstance(contents[i], str) else [] for i in chosen]
    name = "tokens as stored in the file (not preprocessed here)"
    if texts:
        preprocessor = preprocess.load_preprocessor(lemmatiser)  # type: ignore[arg-type]
        done = preprocessor.many([t for _, t in texts], progress=progress, total=len(texts))
        for (j, _), doc in zip(texts, done, strict=True):
            tokens[j] = doc
        name = preprocessor.name
    notes = {
        "format": "selected_filtered_data.npz (the authors' release; entry layout unverified)",
        "records": len(data),
        "available_per_topic": pools,
        "lemmatiser": name,
    }
    return tokens, labels, notes


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
        "dataset": "agnews8",
        "classes": list(TOPICS),
        **notes,
        "documents": n,
        "documents_per_topic": {t: int((labels == k).sum()) for k, t in enumerate(TOPICS)},
        "splits": {name: len(rows_of) for name, rows_of in order.items()},
        "vocab_size": len(vocab),
        "max_length": max_length,
        "width": width,
        "truncated_documents": truncated,
        "empty_documents": len(empty),
        "empty_policy": settings["empty_documents"],
        "unk_rate": {name: _unk_rate(split["inputs"]) for name, split in splits.items()},
    }
    return Corpus(splits=splits, vocab=vocab, notes=notes)


def _unk_rate(inputs: torch.Tensor) -> float:
    """The share of a split's (non-padding) tokens that are UNK."""
    real = int((inputs != PAD_ID).sum())
    return round(int((inputs == UNK_ID).sum()) / real, 4) if real else 0.0
