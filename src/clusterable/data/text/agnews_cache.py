"""The cache of a built AGNews-8 corpus (``clusterable.data.text.agnews.read_agnews8``).

The built corpus is kept in ``<root>/cache/agnews8-<key>.npz`` (token ids and labels of each split) and
``.json`` (vocabulary, notes, key), written atomically; the key hashes every setting of the recipe, the source
file's name, size and modification time, ``EXPECTED_COUNTS`` and ``PREPROCESS_VERSION``, so that any change builds a
new cache. The lemmatiser used is recorded in the ``.json``: a cache built with another lemmatiser than the one this
machine would use now is rebuilt; where spaCy is not installed, the cache is used as it is. A cache that cannot be
read is rebuilt (with a warning).
"""

from __future__ import annotations

import json
import logging
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np
import torch

from clusterable.data.errors import first_line
from clusterable.data.text import preprocess
from clusterable.data.text.corpus import Corpus

__all__ = ["CACHE_VERSION", "load_cache", "write_cache"]

log = logging.getLogger(__name__)

CACHE_VERSION = 1  # part of the cache key: a change in what the cache holds must not reuse an older one


def load_cache(base: Path, key: str, lemmatiser: str) -> Corpus | None:
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
        now = preprocess.lemmatiser_name(lemmatiser)  # type: ignore[arg-type]
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
        log.warning("AGNews cache %s is unreadable (%s): building the corpus again", base, first_line(err))
        return None


def write_cache(base: Path, key: str, corpus: Corpus) -> None:
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
