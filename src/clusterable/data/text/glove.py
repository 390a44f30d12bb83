"""Pretrained word vectors in GloVe's text format, restricted to a corpus vocabulary and cached.

COREL's text models (Kenyon-Dean et al. 2019, "Experimental design" and supplement) embed AGNews with the 300-d
GloVe vectors trained on 840B tokens of Common Crawl (Pennington et al. 2014; ``glove.840B.300d.zip`` from
https://nlp.stanford.edu/projects/glove/), not fine-tuned. Out-of-vocabulary words share one random UNK vector and
the number tokens MONEY, YEAR and NUMBER get a random vector each. The supplement says these random vectors are
"normally distributed between -0.2 and 0.2", which is not a distribution; we read it as uniform in [-0.2, 0.2]
(a normal law has no bounds, and a uniform draw is the usual way to give an unknown word a vector of GloVe's
scale), drawn from a fixed seed. The authors' repository (kiankd/corel2019) holds only the preprocessed corpus,
not the embedding code.

The text file has one word per line followed by ``dim`` numbers, separated by single spaces; a "word" may itself
hold spaces (the 840B file has such tokens), so the last ``dim`` fields are the vector and the rest is the word.
The 840B file has 2.2 million lines (5.6 GB): ``read_glove`` streams it line by line in binary, compares the word
bytes with the vocabulary and parses only the vectors it keeps, so memory stays at the (V, dim) result, and
caches that matrix (``.npy`` with a ``.json`` record of the vocabulary hash) so that later runs skip the scan.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError
from clusterable.data.text.corpus import PAD, PAD_ID, SPECIAL_TOKENS, UNK

log = logging.getLogger(__name__)

WHERE = "https://nlp.stanford.edu/projects/glove/ (glove.840B.300d.zip, unzipped)"
# The random rows: uniform in [-RANDOM_SCALE, RANDOM_SCALE] (our reading of the supplement, see above).
RANDOM_SCALE = 0.2
CACHE_VERSION = 1  # part of the cache key: a change in how rows are built must not reuse an older cache


def base_vectors(vocab: Sequence[str], dim: int, seed: int) -> np.ndarray:
    """(V, dim) float32: the rows no pretrained vector fills: PAD zeros (it is padding, never a word), MONEY,
    YEAR and NUMBER each their own random vector, every other row (UNK and, until a reader fills them, the
    ordinary words) the one shared random UNK vector.

    The random vectors are uniform in [-0.2, 0.2], drawn from ``numpy.random.default_rng(seed)`` in the fixed
    order UNK, MONEY, YEAR, NUMBER, so that each is the same whatever the vocabulary.
    """
    rng = np.random.default_rng(seed)
    drawn = rng.uniform(-RANDOM_SCALE, RANDOM_SCALE, size=(1 + len(SPECIAL_TOKENS), dim)).astype(np.float32)
    matrix = np.empty((len(vocab), dim), dtype=np.float32)
    matrix[:] = drawn[0]
    matrix[PAD_ID] = 0.0
    for i, word in enumerate(vocab):
        if word in SPECIAL_TOKENS:
            matrix[i] = drawn[1 + SPECIAL_TOKENS.index(word)]
    return matrix


def read_glove(
    path: str,
    vocab: Sequence[str],
    dim: int = 300,
    seed: int = 0,
    cache: bool = True,
    cache_dir: str | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """The word vectors of ``vocab`` from the GloVe text file at ``path``.

    Args:
        path: the GloVe text file (``glove.840B.300d.txt``).
        vocab: id -> word, ``vocab[0] == "<pad>"`` and ``vocab[1] == "<unk>"`` (``clusterable.data.text.corpus``).
        dim: the vectors' dimension; every line must hold a word and ``dim`` numbers.
        seed: seed of the random UNK and number-token vectors (fixed: every run shares them and the cache).
        cache: keep the restricted matrix as ``<stem>.<vocabulary hash>.npy`` (+ ``.json``) in ``cache_dir`` and
            read it instead of the text file when the vocabulary, ``dim``, ``seed`` and the file's size match.
            The cache alone suffices: with it, the text file may be gone.
        cache_dir: the cache's folder (the dataset's, next to its corpus cache); None: the GloVe file's folder.

    Returns:
        ``vectors`` (V, dim) float32: row i is word ``vocab[i]``'s vector (PAD zeros; words found: GloVe's;
        MONEY/YEAR/NUMBER: their own random vectors; UNK and words not in the file: the shared UNK vector), and
        ``stats``: ``found``, ``oov`` (ordinary words without a vector), ``special``, ``vocab_size``, ``dim``,
        ``oov_examples`` (the first 10), ``file``, ``cached`` (read from the cache), ``lines`` (scanned; None
        when cached).

    Raises:
        ValueError: ``dim`` < 1, or ``vocab`` does not start with ``<pad>``, ``<unk>`` or repeats a word.
        DatasetNotFoundError: neither the file nor a matching cache exists (names the file, the folder and where
            to get it).
        CorruptFileError: a line of the wrong field count (names the file, the line number and the count: a file
            of another dimension fails on its first line) or a vector field that is not a number.
    """
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    vocab = list(vocab)
    if vocab[:2] != [PAD, UNK]:
        raise ValueError(f"vocab must start with {PAD!r}, {UNK!r}, got {vocab[:2]}")
    index = {w: i for i, w in enumerate(vocab)}
    if len(index) != len(vocab):
        repeated = next(w for i, w in enumerate(vocab) if index[w] != i)
        raise ValueError(f"vocab must not repeat a word, but {repeated!r} appears more than once")
    file = Path(path).expanduser().resolve()
    folder = Path(cache_dir).expanduser().resolve() if cache_dir is not None else file.parent
    key = _cache_key(vocab, dim, seed)
    npy, record = folder / f"{file.stem}.{key[:16]}.npy", folder / f"{file.stem}.{key[:16]}.json"
    size = file.stat().st_size if file.is_file() else None
    if cache:
        hit = _read_cache(npy, record, key, size, (len(vocab), dim))
        if hit is not None:
            return hit
    if size is None:
        zipped = file.with_suffix(".zip")
        unzip = f" ({zipped.name} is there: unzip it)" if zipped.is_file() else ""
        raise DatasetNotFoundError(
            f"GloVe word vectors {file.name} not found in {file.parent}{unzip}. Download them from {WHERE} into "
            "that folder, or set the dataset's vectors.path. dataset.source=fake runs offline on random vectors."
        )

    # Ordinary words only: PAD, UNK and the number tokens never take a pretrained vector (see base_vectors).
    wanted = {w.encode("utf-8"): i for w, i in index.items() if w not in (PAD, UNK, *SPECIAL_TOKENS)}
    matrix = base_vectors(vocab, dim, seed)
    found = np.zeros(len(vocab), dtype=bool)
    start = time.perf_counter()
    log.info("reading GloVe vectors of %d words from %s (%.1f GB; once, then cached)", len(wanted), file, size / 1e9)
    lines = 0
    with open(file, "rb") as f:
        for lines, line in enumerate(f, start=1):
            word, start = _split(line, dim, file, lines)
            i = wanted.get(word) if word is not None else None
            if i is None or found[i]:  # not ours (or blank), or a repeated word: the first line wins
                continue
            fields = line[start:].split()
            if len(fields) != dim:  # runs of spaces: the count of separators was right, not of numbers
                raise CorruptFileError(_wrong_count(file, lines, len(fields) + 1, dim))
            try:
                matrix[i] = np.array(fields, dtype=np.float32)
            except ValueError:
                raise CorruptFileError(
                    f"{file} line {lines:,}: the vector of {word.decode('utf-8', 'replace')!r} holds a field "
                    "that is not a number"
                ) from None
            found[i] = True
    ordinary = [i for w, i in index.items() if w not in (PAD, UNK, *SPECIAL_TOKENS)]
    oov = [vocab[i] for i in ordinary if not found[i]]
    stats: dict[str, Any] = {
        "found": int(found.sum()),
        "oov": len(oov),
        "special": sum(w in SPECIAL_TOKENS for w in vocab),
        "vocab_size": len(vocab),
        "dim": dim,
        "oov_examples": oov[:10],
        "file": str(file),
        "cached": False,
        "lines": lines,
    }
    log.info(
        "GloVe: %d of %d words found, %d OOV (%.0f s)",
        stats["found"],
        len(ordinary),
        len(oov),
        time.perf_counter() - start,
    )
    if cache:
        _write_cache(npy, record, matrix, {"key": key, "source_size": size, "stats": stats})
    return torch.from_numpy(matrix), stats


def _split(line: bytes, dim: int, file: Path, number: int) -> tuple[bytes | None, int]:
    """(word, where its vector starts in ``line``) of one raw line (its newline included), or (None, 0) for a
    blank line; the vector is ``line[start:].split()``.

    The common case, a word without spaces, costs one ``find``, one ``count`` (C loops over the line's bytes) and
    the word's bytes, no copy of the line: 2.2 million lines of which a few percent are wanted. Only a line with
    another number of spaces after its first field is stripped and split from the right.
    """
    first = line.find(b" ")
    if first >= 0 and line.count(b" ", first) == dim:
        return line[:first], first + 1
    line = line.rstrip()  # "\r\n", trailing spaces
    if not line:
        return None, 0
    fields = line.rsplit(b" ", dim)
    word = fields[0]
    if len(fields) != dim + 1 or not word:  # fewer than dim + 1 fields
        raise CorruptFileError(_wrong_count(file, number, len(line.split()), dim))
    if number == 1 and _numbers(word.split(b" ")[1:]):
        # A word followed by more than `dim` numbers: a file of a larger dimension, caught on its first line.
        raise CorruptFileError(_wrong_count(file, number, len(line.split()), dim))
    return word, len(word) + 1


def _numbers(fields: list[bytes]) -> bool:
    """Whether ``fields`` is not empty and every one of them reads as a number."""
    try:
        for field in fields:
            float(field)
    except ValueError:
        return False
    return bool(fields)


def _wrong_count(file: Path, number: int, fields: int, dim: int) -> str:
    return (
        f"{file} line {number:,} has {fields} fields, expected a word and {dim} numbers: a GloVe file of another "
        f"dimension (this run reads {dim}-d vectors; set the dataset's vectors.dim) or a damaged file"
    )


def _cache_key(vocab: list[str], dim: int, seed: int) -> str:
    """sha256 of everything the matrix depends on besides the file: the vocabulary in order, dim, seed."""
    h = hashlib.sha256(f"glove-cache v{CACHE_VERSION} dim={dim} seed={seed}\n".encode())
    for word in vocab:  # one word a line; a word never holds a newline (the file format could not store it)
        h.update(word.encode("utf-8") + b"\n")
    return h.hexdigest()


def _read_cache(
    npy: Path, record: Path, key: str, size: int | None, shape: tuple[int, int]
) -> tuple[torch.Tensor, dict[str, Any]] | None:
    """The cached matrix and stats, or None when there is none or it does not match (it is then rebuilt)."""
    if not (npy.is_file() and record.is_file()):
        return None
    try:
        meta = json.loads(record.read_text())
        if meta.get("key") != key or (size is not None and meta.get("source_size") != size):
            log.info("GloVe cache %s is of another vocabulary or file: reading the file again", npy)
            return None
        matrix = np.load(npy)
    except (OSError, ValueError) as e:  # a damaged cache is rebuilt, not an error
        log.warning("GloVe cache %s is unreadable (%s): reading the file again", npy, e)
        return None
    if matrix.shape != shape or matrix.dtype != np.float32:
        return None
    return torch.from_numpy(matrix), {**meta["stats"], "cached": True, "lines": None}


def _write_cache(npy: Path, record: Path, matrix: np.ndarray, meta: dict[str, Any]) -> None:
    """Write the cache under temporary names and rename (a reader never sees half a file; parallel runs that
    write the same cache each rename a complete one). A folder we cannot write to only costs the next scan."""
    try:
        npy.parent.mkdir(parents=True, exist_ok=True)
        suffix = f".tmp{os.getpid()}"
        with open(npy.with_name(npy.name + suffix), "wb") as f:
            np.save(f, matrix)
        record.with_name(record.name + suffix).write_text(json.dumps(meta))
        os.replace(npy.with_name(npy.name + suffix), npy)
        os.replace(record.with_name(record.name + suffix), record)  # last: it marks the pair complete
    except OSError as e:
        log.warning("cannot cache the GloVe vectors in %s (%s); the next run reads the file again", npy.parent, e)
