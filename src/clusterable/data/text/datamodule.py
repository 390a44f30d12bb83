"""Text datasets in memory: a tokenised corpus as (N, L) token ids plus the word vectors text encoders embed them
with (``contracts.HasWordVectors``).

``TextDataModule`` is an ``InMemoryDataModule`` whose reader is a ``corpus`` callable returning a ``Corpus``
(``clusterable.data.text.corpus``: token ids over a vocabulary, PAD-padded) and whose ``vectors`` callable turns
that vocabulary into a (V, D) matrix (``clusterable.data.text.glove.read_glove`` for GloVe). ``source=fake``
replaces both with ``fake_corpus`` and ``random_vectors``: documents whose words depend on their class, over a
small vocabulary, so every text command runs offline.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from clusterable.data.checks import is_int
from clusterable.data.memory import InMemoryDataModule
from clusterable.data.sampling import RANDOM_BATCHES, Sampler
from clusterable.data.splits import SPLITS, Split
from clusterable.data.text.corpus import PAD, PAD_ID, SPECIAL_TOKENS, UNK, UNK_ID, Corpus
from clusterable.data.text.glove import base_vectors

# Fake vocabulary: PAD, UNK, the number tokens, then ordinary words w0, w1, ...
_FIRST_WORD = 2 + len(SPECIAL_TOKENS)


def fake_corpus(num_docs_per_class: int, length: int, vocab_size: int, seed: int, num_classes: int = 8) -> Corpus:
    """A synthetic corpus of ``num_docs_per_class`` documents per class in each of train, val and test.

    The ordinary words are dealt into ``num_classes`` topic blocks; each token of a class-c document is one of
    block c's words with probability 0.5, any ordinary word with 0.4, and UNK or a number token with 0.1, so the
    classes are separable but not by any single word. Documents hold between ``length // 2`` (at least 1) and
    ``length`` tokens, PAD-padded to ``length``, so padding masks matter as on real text.

    Returns:
        a ``Corpus``: splits with ``inputs`` (N, length) long and ``labels`` (N,) long, N = num_docs_per_class x
        num_classes (labels in random order); vocab ``[PAD, UNK, MONEY, YEAR, NUMBER, w0, ...]`` of
        ``vocab_size`` words.

    Raises:
        ValueError: a count below its minimum (``vocab_size`` must leave at least one word per class).
    """
    for name, value, least in (
        ("num_docs_per_class", num_docs_per_class, 1),
        ("length", length, 1),
        ("num_classes", num_classes, 1),
        ("vocab_size", vocab_size, _FIRST_WORD + num_classes),
    ):
        if not is_int(value) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    vocab = [PAD, UNK, *SPECIAL_TOKENS, *(f"w{i}" for i in range(vocab_size - _FIRST_WORD))]
    words = vocab_size - _FIRST_WORD
    block = words // num_classes
    g = torch.Generator().manual_seed(seed)
    splits = {}
    for s in SPLITS:  # one generator for all three: the splits differ, the topics (blocks) are shared
        n = num_docs_per_class * num_classes
        labels = (torch.arange(n) % num_classes)[torch.randperm(n, generator=g)]
        topic = _FIRST_WORD + labels[:, None] * block + torch.randint(0, block, (n, length), generator=g)
        anyword = torch.randint(_FIRST_WORD, vocab_size, (n, length), generator=g)
        rare = torch.randint(UNK_ID, _FIRST_WORD, (n, length), generator=g)  # UNK, MONEY, YEAR, NUMBER
        u = torch.rand(n, length, generator=g)
        tokens = torch.where(u < 0.5, topic, torch.where(u < 0.9, anyword, rare))
        sizes = torch.randint(max(1, length // 2), length + 1, (n,), generator=g)
        tokens[torch.arange(length)[None, :] >= sizes[:, None]] = PAD_ID
        splits[s] = {"inputs": tokens, "labels": labels}
    notes = {
        "source": "fake",
        "documents_per_class": num_docs_per_class,
        "length": length,
        "vocab_size": vocab_size,
    }
    return Corpus(splits=splits, vocab=vocab, notes=notes)


def random_vectors(vocab: list[str], dim: int, seed: int) -> tuple[Tensor, dict[str, Any]]:
    """(V, dim) float32 stand-in word vectors: every ordinary word its own N(0, 0.4^2) vector (about GloVe's
    scale), PAD, UNK and the number tokens as ``read_glove`` makes them (``glove.base_vectors``); and stats in
    ``read_glove``'s form (no word out of vocabulary)."""
    matrix = base_vectors(vocab, dim, seed)
    ordinary = [i for i, w in enumerate(vocab) if w not in (PAD, UNK, *SPECIAL_TOKENS)]
    rng = np.random.default_rng(seed + 1)  # another stream than base_vectors' UNK and number-token vectors
    matrix[ordinary] = rng.normal(0.0, 0.4, size=(len(ordinary), dim)).astype(np.float32)
    stats = {
        "found": len(ordinary),
        "oov": 0,
        "special": sum(w in SPECIAL_TOKENS for w in vocab),
        "vocab_size": len(vocab),
        "dim": dim,
        "oov_examples": [],
        "file": None,
        "cached": False,
        "lines": None,
    }
    return torch.from_numpy(matrix), stats


class TextDataModule(InMemoryDataModule):
    """A tokenised text corpus in memory: splits' ``inputs`` are (N, L) long token ids (PAD = 0), ``input_shape``
    is ``(L,)`` (the corpus's padded length, known after ``load()``), and ``word_vectors`` (V, D) float32 holds a
    vector per vocabulary id for the text encoders (``models.text``), which ``train.py`` passes them.

    Args:
        name: dataset name, recorded in the run (and the seed of the fake corpus).
        corpus: a callable (a ``_partial_`` config node) returning a ``Corpus``; used when ``source == "real"``.
        vectors: a callable (a ``_partial_`` node), called as ``vectors(vocab=corpus.vocab)`` and returning
            ``(vectors (V, D), stats)`` (``glove.read_glove``); used when ``source == "real"``.
        num_classes: number of classes; every label must be below it.
        source: ``"real"`` reads the corpus and vectors; ``"fake"`` makes ``fake_corpus`` documents (``fake_size``
            per split, ``fake_length`` tokens, ``fake_vocab_size`` words) and ``random_vectors`` of ``fake_dim``.
        fake_size, fake_length, fake_vocab_size, fake_dim: the fake corpus's rows per split, document length,
            vocabulary size (at least 5 + num_classes) and vector dimension.
        batch_size, seed, shuffle_rows, shuffle_batches, eval_batch_size, root, sampler (a class-balanced batch
            takes ``sampler.images_per_class`` rows of a class), drop_last, labelled_percent: as
            ``InMemoryDataModule``'s.

    Attributes (after ``load()``; reading one loads):
        word_vectors: (V, D) float32, row i the vector of vocabulary id i.
        notes: ``{"corpus": corpus.notes, "word_vectors": the vectors' stats}`` (found/OOV counts, cache), for the
            run's record.
    """

    def __init__(
        self,
        name: str,
        corpus: Callable[[], Corpus] | None,
        vectors: Callable[..., tuple[Tensor, dict[str, Any]]] | None,
        num_classes: int,
        batch_size: int = 128,
        source: str = "real",
        fake_size: int = 300,
        fake_length: int = 25,
        fake_vocab_size: int = 200,
        fake_dim: int = 300,
        seed: int = 0,
        shuffle_rows: bool = False,
        shuffle_batches: bool = True,
        eval_batch_size: int = 4096,
        root: str | None = None,
        sampler: Sampler = RANDOM_BATCHES,
        drop_last: bool = False,
        labelled_percent: float = 100.0,
    ):
        for key, value in (("fake_length", fake_length), ("fake_dim", fake_dim)):
            if not is_int(value) or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        if is_int(num_classes) and (not is_int(fake_vocab_size) or fake_vocab_size < _FIRST_WORD + num_classes):
            raise ValueError(
                f"fake_vocab_size must be an integer >= {_FIRST_WORD + num_classes} (PAD, UNK, the 3 number "
                f"tokens and a word per class), got {fake_vocab_size!r}"
            )
        # input_shape is the corpus's (L,), known once it is read: the fake length until then.
        super().__init__(
            name,
            self._read_splits,
            [fake_length],
            num_classes,
            batch_size=batch_size,
            source=source,
            fake_size=fake_size,
            seed=seed,
            shuffle_rows=shuffle_rows,
            shuffle_batches=shuffle_batches,
            eval_batch_size=eval_batch_size,
            root=root,
            sampler=sampler,
            drop_last=drop_last,
            labelled_percent=labelled_percent,
        )
        self.corpus, self.vectors = corpus, vectors
        self.fake_length, self.fake_vocab_size, self.fake_dim = (
            int(fake_length),
            int(fake_vocab_size),
            int(fake_dim),
        )
        self._word_vectors: Tensor | None = None
        self._notes: dict[str, Any] = {}
        self._read: dict[str, Split] | None = None  # the corpus's splits, between reading and the base's checks

    @property
    def word_vectors(self) -> Tensor:
        """(V, D) float32: row i is the vector of vocabulary id i (PAD's, UNK's, the number tokens' as the
        ``vectors`` callable made them). Loads the dataset on first use."""
        if self._word_vectors is None:
            self.load()
        assert self._word_vectors is not None
        return self._word_vectors

    def encoder_arguments(self) -> dict[str, Any]:
        """What the encoder needs besides the token ids (``contracts.FeedsEncoder``): ``word_vectors`` (V, D)."""
        return {"word_vectors": self.word_vectors}

    @property
    def notes(self) -> dict[str, Any]:
        """What the corpus reader and the vectors recorded (``corpus``, ``word_vectors``); loads on first use."""
        if self._word_vectors is None:
            self.load()
        return self._notes

    def load(self) -> dict[str, Split]:
        """Read (or synthesise) the corpus and its vectors once, then ``InMemoryDataModule.load``'s checks and
        label handling; safe to call repeatedly.

        Raises:
            ValueError: as ``InMemoryDataModule.load``; ``corpus.``/``vectors.`` + the callable's own message;
                a corpus that is not token ids of one length over its vocabulary, or vectors that do not match it.
            clusterable.data.errors.DatasetError: the corpus's or the vectors' files are missing or corrupt.
        """
        if not self.splits:
            corpus, vectors, stats = self._fake() if self.source == "fake" else self._real()
            self._read = self._checked(corpus, vectors)
            self.input_shape = tuple(self._read["train"]["inputs"].shape[1:])
            self._word_vectors = vectors.detach().to(torch.float32)
            self._notes = {"corpus": dict(corpus.notes), "word_vectors": dict(stats)}
            try:
                super().load()
            finally:
                self._read = None  # the base keeps the splits it checked; no second reference
        return self.splits

    def _read_splits(self) -> dict[str, Split]:
        """The base class's reader: the splits ``load`` has just read."""
        assert self._read is not None
        return self._read

    def _fake_splits(self) -> dict[str, Split]:
        return self._read_splits()

    def _real(self) -> tuple[Corpus, Tensor, dict[str, Any]]:
        if self.corpus is None or self.vectors is None:
            missing = "corpus" if self.corpus is None else "vectors"
            raise ValueError(f"{missing} is missing: dataset {self.name!r} has none for source='real'")
        try:
            corpus = self.corpus()
        except ValueError as e:  # the reader's own argument, named as the config has it
            raise ValueError(f"corpus.{e}") from None
        if not isinstance(corpus, Corpus):
            raise ValueError(f"corpus must return a Corpus (clusterable.data.text.corpus), got {type(corpus).__name__}")
        try:
            out = self.vectors(vocab=corpus.vocab)
        except ValueError as e:
            raise ValueError(f"vectors.{e}") from None
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], Tensor) and isinstance(out[1], dict)):
            raise ValueError(f"vectors must return (a (V, D) tensor, a dict of stats), got {type(out).__name__}")
        return corpus, out[0], out[1]

    def _fake(self) -> tuple[Corpus, Tensor, dict[str, Any]]:
        # Seeded by the dataset's name, as the base class's fake blobs are: the same stand-in for every run.
        base = zlib.crc32(self.name.encode())
        per_class = math.ceil(self.fake_size / self.num_classes)
        corpus = fake_corpus(per_class, self.fake_length, self.fake_vocab_size, base, self.num_classes)
        corpus.splits = {s: {k: v[: self.fake_size] for k, v in d.items()} for s, d in corpus.splits.items()}
        vectors, stats = random_vectors(corpus.vocab, self.fake_dim, base)
        return corpus, vectors, stats

    def _checked(self, corpus: Corpus, vectors: Tensor) -> dict[str, Split]:
        """The corpus's splits after checking them against its vocabulary and vectors: one line naming what is
        wrong (the base class checks the split names, lengths and labels after this)."""
        size = len(corpus.vocab)
        if vectors.dim() != 2 or not vectors.is_floating_point() or len(vectors) != size:
            raise ValueError(
                f"vectors must return a float tensor of one row per vocabulary word ({size:,}), got "
                f"{vectors.dtype} of shape {list(vectors.shape)}"
            )
        splits = corpus.splits
        if not isinstance(splits, dict) or not set(SPLITS) <= set(splits):
            found = sorted(splits) if isinstance(splits, dict) else type(splits).__name__
            raise ValueError(f"corpus must return the splits 'train', 'val' and 'test', got {found}")
        lengths = {}
        for s in SPLITS:
            if not {"inputs", "labels"} <= set(splits[s]):
                raise ValueError(
                    f"corpus must return splits with 'inputs' and 'labels', split '{s}' has {sorted(splits[s])}"
                )
            inputs = splits[s]["inputs"]
            if inputs.dim() != 2 or inputs.dtype not in (torch.long, torch.int32, torch.int16, torch.uint8):
                raise ValueError(
                    f"corpus must return token ids (N, L) of an integer type, but split '{s}' has {inputs.dtype} "
                    f"inputs of shape {list(inputs.shape)}"
                )
            if inputs.numel() and (int(inputs.min()) < 0 or int(inputs.max()) >= size):
                raise ValueError(
                    f"corpus returned token ids from {int(inputs.min())} to {int(inputs.max())} in split '{s}', "
                    f"outside its vocabulary of {size:,} words"
                )
            lengths[s] = inputs.shape[1]
        if len(set(lengths.values())) > 1:
            listed = ", ".join(f"{s} {n}" for s, n in lengths.items())
            raise ValueError(f"corpus must pad every split to one length, got documents of length {listed}")
        return {s: {**d, "inputs": d["inputs"].long()} if s in SPLITS else d for s, d in splits.items()}
