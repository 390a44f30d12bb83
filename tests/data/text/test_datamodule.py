"""TextDataModule: a corpus callable and GloVe vectors read through the real code path, the fake source, and every
corpus or vector table that does not fit ending in one line."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch

from clusterable.contracts import DataModule, HasWordVectors
from clusterable.data.memory import InMemoryDataModule
from clusterable.data.text import TextDataModule, fake_corpus
from clusterable.data.text.corpus import PAD, PAD_ID, SPECIAL_TOKENS, UNK, Corpus
from clusterable.data.text.glove import read_glove

VOCAB = [PAD, UNK, *SPECIAL_TOKENS, "goal", "match", "stock", "market", "zebra"]
DIM = 3


def tiny_corpus(length: int = 6) -> Corpus:
    """Two topics (sport: 0, business: 1), two documents of each per split, PAD-padded to ``length``."""
    sport = [[5, 6, 0, 0, 0, 0], [6, 5, 5, 2, 0, 0]]  # goal match / match goal goal MONEY
    business = [[7, 8, 4, 9, 0, 0], [8, 1, 7, 3, 7, 8]]  # stock market NUMBER zebra / market UNK stock ...
    rows = torch.tensor(sport + business)[:, :length]
    split = {"inputs": rows, "labels": torch.tensor([0, 0, 1, 1])}
    splits = {s: dict(split) for s in ("train", "val", "test")}
    return Corpus(splits=splits, vocab=VOCAB, notes={"truncated": 0})


def write_glove(path: Path) -> Path:
    rows = {"goal": "1 0 0", "match": "0.9 0.1 0", "stock": "0 1 0", "market": "0 0.9 0.1", "the": "0 0 1"}
    path.write_text("".join(f"{w} {v}\n" for w, v in rows.items()))
    return path


def text_dm(tmp_path: Path, corpus=tiny_corpus, **kwargs) -> TextDataModule:
    vectors = functools.partial(read_glove, str(write_glove(tmp_path / "glove.3d.txt")), dim=DIM)
    return TextDataModule("tiny", corpus, vectors, num_classes=2, **kwargs)


def test_a_corpus_and_its_glove_vectors(tmp_path):
    dm = text_dm(tmp_path, batch_size=3)
    splits = dm.load()
    assert dm.input_shape == (6,) and splits["train"]["inputs"].dtype == torch.long
    assert isinstance(dm, HasWordVectors) and isinstance(dm, DataModule)
    vectors = dm.word_vectors
    assert vectors.shape == (len(VOCAB), DIM) and vectors.dtype == torch.float32
    assert vectors[VOCAB.index("goal")].tolist() == [1.0, 0.0, 0.0] and not vectors[PAD_ID].any()
    assert torch.equal(vectors[VOCAB.index("zebra")], vectors[1])  # OOV: the UNK vector
    assert dm.notes["corpus"] == {"truncated": 0}
    assert dm.notes["word_vectors"]["found"] == 4 and dm.notes["word_vectors"]["oov"] == 1
    batch = next(iter(dm.train_dataloader()))
    assert batch["inputs"].shape == (3, 6) and batch["inputs"].dtype == torch.long
    assert next(iter(dm.eval_batches("test", "cpu")))["inputs"].shape == (4, 6)


def test_word_vectors_load_the_dataset_on_first_use(tmp_path):
    dm = text_dm(tmp_path)
    assert dm.word_vectors.shape == (len(VOCAB), DIM) and dm.splits  # read with the corpus


def test_labelled_percent_and_shuffle_rows_work_on_token_ids(tmp_path):
    dm = text_dm(tmp_path, labelled_percent=50, shuffle_rows=True)
    splits = dm.load()
    assert int((splits["train"]["labels"] == -1).sum()) == 2
    assert sorted(dm.all_labels("train").tolist()) == [0, 0, 1, 1]
    # The rows moved with their labels: each document's first word is its topic's.
    first = splits["val"]["inputs"][:, 0]
    assert torch.equal(first >= 7, splits["val"]["labels"] == 1)


def test_not_a_text_dataset_has_no_word_vectors():
    assert not isinstance(InMemoryDataModule("x", None, [4], 2, source="fake"), HasWordVectors)


def test_the_fake_source_is_class_dependent_padded_text(tmp_path):
    dm = TextDataModule(
        "agnews8",
        None,
        None,
        num_classes=8,
        source="fake",
        fake_size=400,
        fake_length=20,
        fake_vocab_size=100,
        fake_dim=16,
    )
    splits = dm.load()
    train = splits["train"]
    assert dm.input_shape == (20,) and train["inputs"].shape == (400, 20)
    assert train["inputs"].dtype == torch.long
    assert dm.word_vectors.shape == (100, 16) and int(train["inputs"].max()) < 100
    assert sorted(train["labels"].unique().tolist()) == list(range(8))
    lengths = (train["inputs"] != PAD_ID).sum(1)
    assert int(lengths.min()) >= 10 and int(lengths.max()) == 20 and int(lengths.min()) < 20  # padded, varied
    # Each class's most frequent word lies in its own topic block (95 // 8 = 11 words each, from id 5 on).
    for c in range(8):
        words = train["inputs"][train["labels"] == c]
        top = int(torch.bincount(words[words > 4], minlength=100).argmax())
        assert (top - 5) // 11 == c, (c, top)
    again = TextDataModule(
        "agnews8",
        None,
        None,
        num_classes=8,
        source="fake",
        fake_size=400,
        fake_length=20,
        fake_vocab_size=100,
        fake_dim=16,
    )
    assert torch.equal(again.load()["test"]["inputs"], splits["test"]["inputs"])  # seeded
    assert torch.equal(again.word_vectors, dm.word_vectors)
    assert dm.notes["corpus"]["source"] == "fake" and dm.notes["word_vectors"]["oov"] == 0


def test_fake_corpus_directly():
    corpus = fake_corpus(num_docs_per_class=3, length=4, vocab_size=13, seed=0, num_classes=4)
    assert corpus.vocab[:5] == [PAD, UNK, *SPECIAL_TOKENS] and len(corpus.vocab) == 13
    assert all(d["inputs"].shape == (12, 4) for d in corpus.splits.values())
    with pytest.raises(ValueError, match="vocab_size must be an integer >= 9, got 8"):
        fake_corpus(3, 4, 8, 0, num_classes=4)


def _corpus_with(**changes) -> functools.partial:
    def make() -> Corpus:
        corpus = tiny_corpus()
        for split, (key, value) in changes.items():
            corpus.splits[split][key] = value
        return corpus

    return make


@pytest.mark.parametrize(
    ("corpus", "vectors", "message"),
    [
        (
            _corpus_with(train=("inputs", torch.tensor([[0, 99]] * 4))),
            None,
            "corpus returned token ids from 0 to 99 in split 'train', outside its vocabulary of 10 words",
        ),
        (
            _corpus_with(val=("inputs", torch.rand(4, 6))),
            None,
            "corpus must return token ids (N, L) of an integer type, but split 'val' has torch.float32 inputs",
        ),
        (
            _corpus_with(test=("inputs", torch.zeros(4, 5, dtype=torch.long))),
            None,
            "corpus must pad every split to one length, got documents of length train 6, val 6, test 5",
        ),
        (
            _corpus_with(train=("labels", torch.tensor([0, 0, 1, 2]))),
            None,
            "num_classes is 2 but the labels of split 'train' go up to 2",
        ),
        (
            tiny_corpus,
            lambda vocab: (torch.zeros(3, DIM), {}),
            "vectors must return a float tensor of one row per vocabulary word (10), got torch.float32 of shape [3, 3]",
        ),
        (
            tiny_corpus,
            lambda vocab: torch.zeros(10, DIM),
            "vectors must return (a (V, D) tensor, a dict of stats), got Tensor",
        ),
        (lambda: {"train": {}}, None, "corpus must return a Corpus (clusterable.data.text.corpus), got dict"),
    ],
)
def test_a_corpus_or_vectors_that_do_not_fit_are_one_line(tmp_path, corpus, vectors, message):
    dm = text_dm(tmp_path, corpus=corpus)
    if vectors is not None:
        dm.vectors = vectors
    with pytest.raises(ValueError) as info:
        dm.load()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_errors_of_the_callables_name_their_config_key(tmp_path):
    def bad_reader() -> Corpus:
        raise ValueError("max_length must be >= 1, got 0")

    with pytest.raises(ValueError, match=r"^corpus\.max_length must be >= 1, got 0$"):
        text_dm(tmp_path, corpus=bad_reader).load()
    dm = TextDataModule("tiny", tiny_corpus, functools.partial(read_glove, "unused", dim=0), num_classes=2)
    with pytest.raises(ValueError, match=r"^vectors\.dim must be a positive integer, got 0$"):
        dm.load()
    with pytest.raises(ValueError, match=r"^vectors is missing: dataset 'tiny' has none for source='real'$"):
        TextDataModule("tiny", tiny_corpus, None, num_classes=2).load()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fake_length": 0}, "fake_length must be a positive integer, got 0"),
        ({"fake_dim": 2.5}, "fake_dim must be a positive integer, got 2.5"),
        ({"fake_vocab_size": 6}, "fake_vocab_size must be an integer >= 7"),
        ({"source": "web"}, "source must be 'real' or 'fake', got 'web'"),
    ],
)
def test_bad_settings_are_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TextDataModule("tiny", tiny_corpus, None, num_classes=2, **kwargs)
