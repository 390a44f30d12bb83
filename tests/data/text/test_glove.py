"""The GloVe reader on tiny text files in GloVe's format: words with spaces, OOV words, the special tokens, the
seed, the cache, and every bad file ending in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError
from clusterable.data.text.corpus import PAD, SPECIAL_TOKENS, UNK
from clusterable.data.text.glove import base_vectors, read_glove

DIM = 4
VECTORS = {
    "the": [0.1, 0.2, 0.3, 0.4],
    "cat": [-1.5, 2.25, 0.0, 1e-3],
    # The 840B file holds tokens with spaces: the last DIM fields are the vector.
    ". . .": [0.5, -0.5, 0.25, -0.25],
    "MONEY": [9.0, 9.0, 9.0, 9.0],  # a number token is never looked up: it gets its own random vector
}
VOCAB = [PAD, UNK, "the", "cat", ". . .", *SPECIAL_TOKENS, "zebra", "unicorn"]


def write_glove(path: Path, rows: dict[str, list[float]], newline: str = "\n", extra: str = "") -> Path:
    """A GloVe text file: ``word v1 ... vd`` per line, single spaces, as the Stanford files are."""
    lines = [" ".join([word, *(repr(v) for v in vector)]) for word, vector in rows.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((newline.join(lines) + newline + extra).encode("utf-8"))
    return path


@pytest.fixture
def glove(tmp_path: Path) -> Path:
    # "the" twice: the first line wins; "dog" is not in the vocabulary.
    rows = {**VECTORS, "dog": [1.0, 1.0, 1.0, 1.0]}
    path = write_glove(tmp_path / "glove" / "glove.tiny.4d.txt", rows)
    with open(path, "a") as f:
        f.write("the 7 7 7 7\n")
    return path


def test_found_words_oov_and_special_tokens(glove):
    vectors, stats = read_glove(str(glove), VOCAB, dim=DIM)
    assert vectors.shape == (len(VOCAB), DIM) and vectors.dtype == torch.float32
    row = {w: vectors[i] for i, w in enumerate(VOCAB)}
    assert torch.equal(row[PAD], torch.zeros(DIM))
    for word in ("the", "cat", ". . ."):
        assert torch.equal(row[word], torch.tensor(VECTORS[word], dtype=torch.float32)), word
    # OOV words and UNK itself share one random vector; each number token has its own, not the file's MONEY.
    assert torch.equal(row["zebra"], row[UNK]) and torch.equal(row["unicorn"], row[UNK])
    randoms = [row[UNK], *(row[t] for t in SPECIAL_TOKENS)]
    assert all(v.abs().max() <= 0.2 and v.abs().max() > 0 for v in randoms)
    assert len({tuple(v.tolist()) for v in randoms}) == 4
    assert stats["found"] == 3 and stats["oov"] == 2 and stats["special"] == 3
    assert stats["oov_examples"] == ["zebra", "unicorn"] and stats["cached"] is False and stats["lines"] == 6


def test_the_seed_fixes_the_random_vectors_only(glove, tmp_path):
    a, _ = read_glove(str(glove), VOCAB, dim=DIM, seed=0, cache=False)
    b, _ = read_glove(str(glove), VOCAB, dim=DIM, seed=0, cache=False)
    c, _ = read_glove(str(glove), VOCAB, dim=DIM, seed=1, cache=False)
    assert torch.equal(a, b)
    random_rows = [1, *(VOCAB.index(t) for t in SPECIAL_TOKENS)]
    assert not torch.equal(a[random_rows], c[random_rows])
    assert torch.equal(a[2:5], c[2:5])
    # A number token's vector does not depend on the rest of the vocabulary.
    smaller, _ = read_glove(str(glove), [PAD, UNK, "YEAR"], dim=DIM, seed=0, cache=False)
    assert torch.equal(smaller[2], a[VOCAB.index("YEAR")])
    assert np.array_equal(base_vectors(VOCAB, DIM, 0), base_vectors(VOCAB, DIM, 0))


def test_windows_line_endings_and_a_trailing_blank_line(tmp_path):
    path = write_glove(tmp_path / "crlf.txt", VECTORS, newline="\r\n", extra="\r\n")
    vectors, stats = read_glove(str(path), VOCAB, dim=DIM, cache=False)
    assert stats["found"] == 3 and torch.equal(vectors[3], torch.tensor(VECTORS["cat"], dtype=torch.float32))


@pytest.mark.parametrize(("file_dim", "fields"), [(3, 4), (5, 6)])
def test_a_file_of_another_dimension_fails_on_its_first_line(tmp_path, file_dim, fields):
    rows = {w: [0.5] * file_dim for w in ("the", "cat")}
    path = write_glove(tmp_path / "other.txt", rows)
    with pytest.raises(CorruptFileError) as info:
        read_glove(str(path), VOCAB, dim=DIM)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert f"line 1 has {fields} fields, expected a word and {DIM} numbers" in message


def test_a_short_line_later_in_the_file_is_named_by_its_number(tmp_path):
    path = write_glove(tmp_path / "short.txt", {**VECTORS, "dog": [1.0, 2.0]})
    with pytest.raises(CorruptFileError, match=r"line 5 has 3 fields"):
        read_glove(str(path), VOCAB, dim=DIM)


def test_a_vector_that_is_not_numbers_is_one_line(tmp_path):
    path = tmp_path / "garbled.txt"
    path.write_text("the 0.1 0.2 x 0.4\n")
    message = r"line 1: the vector of 'the' holds a field that is not a number"
    with pytest.raises(CorruptFileError, match=message):
        read_glove(str(path), VOCAB, dim=DIM)


def test_a_missing_file_names_it_its_folder_and_where_to_get_it(tmp_path):
    path = tmp_path / "glove" / "glove.840B.300d.txt"
    with pytest.raises(DatasetNotFoundError) as info:
        read_glove(str(path), VOCAB)
    message = str(info.value)
    assert "\n" not in message and "glove.840B.300d.txt" in message and str(path.parent) in message
    assert "nlp.stanford.edu/projects/glove" in message and "glove.840B.300d.zip" in message
    path.parent.mkdir()
    path.with_suffix(".zip").write_bytes(b"PK")
    with pytest.raises(DatasetNotFoundError, match=r"glove.840B.300d.zip is there: unzip it"):
        read_glove(str(path), VOCAB)


def test_the_cache_is_reused_and_keyed_by_the_vocabulary(glove, tmp_path):
    cache = tmp_path / "corpus_cache"
    first, stats = read_glove(str(glove), VOCAB, dim=DIM, cache_dir=str(cache))
    (npy,) = cache.glob("*.npy")
    assert npy.name.startswith("glove.tiny.4d.") and stats["cached"] is False
    assert json.loads(npy.with_suffix(".json").read_text())["stats"]["found"] == 3
    glove.unlink()  # the cache alone suffices: the scan is skipped
    again, stats = read_glove(str(glove), VOCAB, dim=DIM, cache_dir=str(cache))
    assert torch.equal(first, again) and stats["cached"] is True and stats["found"] == 3
    assert stats["lines"] is None
    # Another vocabulary (or seed) is another cache: it needs the file.
    with pytest.raises(DatasetNotFoundError):
        read_glove(str(glove), [*VOCAB, "dog"], dim=DIM, cache_dir=str(cache))
    with pytest.raises(DatasetNotFoundError):
        read_glove(str(glove), VOCAB, dim=DIM, seed=1, cache_dir=str(cache))


def test_a_changed_or_damaged_cache_is_rebuilt(glove, tmp_path):
    read_glove(str(glove), VOCAB, dim=DIM)  # the cache lands next to the file by default
    (npy,) = glove.parent.glob("*.npy")
    write_glove(glove, {**VECTORS, "the": [2.0, 2.0, 2.0, 2.0], "dog": [1.0] * 4})  # another size
    vectors, stats = read_glove(str(glove), VOCAB, dim=DIM)
    assert stats["cached"] is False and vectors[2].tolist() == [2.0] * 4
    npy.write_bytes(b"not an array")
    vectors, stats = read_glove(str(glove), VOCAB, dim=DIM)
    assert stats["cached"] is False and vectors[2].tolist() == [2.0] * 4
    assert read_glove(str(glove), VOCAB, dim=DIM)[1]["cached"] is True


@pytest.mark.parametrize(
    ("vocab", "dim", "message"),
    [
        (["the", PAD, UNK], DIM, "vocab must start with '<pad>', '<unk>'"),
        ([PAD, UNK, "the", "the"], DIM, "vocab must not repeat a word, but 'the' appears more than once"),
        (VOCAB, 0, "dim must be a positive integer, got 0"),
    ],
)
def test_bad_arguments_are_one_line(glove, vocab, dim, message):
    with pytest.raises(ValueError, match=message):
        read_glove(str(glove), vocab, dim=dim)
