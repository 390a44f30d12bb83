"""The text encoders (COREL's text FFNN and Kim's CNN): padding never counts, the word vectors stay frozen, both
build from their configs and train with every COREL head, and `train.py` runs them end to end on a text dataset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from clusterable.config import CONFIG_DIR, build
from clusterable.contracts import Encoder, HasEmbeddingLayer, Head, require
from clusterable.models.text import TextCNN, TextFFNN

QUICK = ["trainer.max_epochs=2", "trainer.enable_progress_bar=false", "evaluator=[classification]"]
ENCODERS = {"text_ffnn": TextFFNN, "text_cnn": TextCNN}
COREL_HEADS = ("cce", "center", "cosine_corel", "gaussian_corel")
V, D = 20, 8


@pytest.fixture
def vectors() -> torch.Tensor:
    # PAD's row is not zero here: the encoders must not rely on the reader having zeroed it.
    return torch.randn(V, D, generator=torch.Generator().manual_seed(0))


def padded(docs: list[list[int]], length: int) -> torch.Tensor:
    """(len(docs), length) token ids, each document followed by PAD (0)."""
    return torch.tensor([doc + [0] * (length - len(doc)) for doc in docs])


# 1 to 7 words: three documents shorter than the widest filter.
DOCS = [[3], [4, 5], [6, 7, 8], [9, 10, 11, 12, 13, 14, 15]]


@pytest.mark.parametrize("name", ENCODERS)
def test_a_padded_batch_embeds_each_document_as_it_embeds_alone(vectors, name):
    torch.manual_seed(0)
    encoder = ENCODERS[name](vectors, [10]).eval()
    with torch.no_grad():
        alone = torch.cat([encoder(torch.tensor([doc])) for doc in DOCS])
        batch = encoder(padded(DOCS, 10))
        longer = encoder(padded(DOCS, 16))
    torch.testing.assert_close(batch, alone, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(longer, alone, rtol=1e-5, atol=1e-6)


def test_the_ffnn_averages_the_words_only(vectors):
    encoder = TextFFNN(vectors, [6]).eval()
    captured = {}
    encoder.ffnn.register_forward_pre_hook(lambda _, args: captured.update(x=args[0]))
    encoder(padded([[4, 5, 5]], 6))
    torch.testing.assert_close(captured["x"][0], (vectors[4] + 2 * vectors[5]) / 3)


@pytest.mark.parametrize("name", ENCODERS)
def test_a_document_of_padding_alone_gives_zeros_not_nan(vectors, name):
    encoder = ENCODERS[name](vectors, [6])
    x = padded([[], [4, 5]], 6)
    out = encoder(x)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in encoder.parameters() if p.grad is not None)
    with torch.no_grad():
        inner = (
            encoder.features(x)
            if name == "text_cnn"
            else torch.nn.functional.embedding_bag(x, encoder.word_vectors, mode="mean", padding_idx=0)
        )
    assert not inner[0].any() and inner[1].any()


@pytest.mark.parametrize("name", ENCODERS)
def test_the_word_vectors_are_a_frozen_buffer_left_out_of_checkpoints(vectors, name):
    encoder = ENCODERS[name](vectors, [6])
    require(encoder, Encoder, name)
    assert isinstance(encoder, HasEmbeddingLayer) and isinstance(encoder.embedding_layer, torch.nn.Linear)
    assert "word_vectors" in dict(encoder.named_buffers())
    assert all(p.data_ptr() != encoder.word_vectors.data_ptr() for p in encoder.parameters())
    assert "word_vectors" not in encoder.state_dict() and "word_vectors_digest" in encoder.state_dict()
    assert not encoder.word_vectors[0].any() and vectors[0].any()  # PAD zeroed in the encoder's copy only
    before = encoder.word_vectors.clone()
    opt = torch.optim.Adam(encoder.parameters(), lr=0.1)
    encoder(padded(DOCS, 8)).pow(2).sum().backward()
    opt.step()
    assert torch.equal(encoder.word_vectors, before)
    # The same vectors load the checkpoint; others are refused.
    ENCODERS[name](vectors, [6]).load_state_dict(encoder.state_dict())
    with pytest.raises(RuntimeError, match="the checkpoint was trained on other word vectors"):
        ENCODERS[name](vectors + 1, [6]).load_state_dict(encoder.state_dict())


@pytest.mark.parametrize("name", ENCODERS)
def test_ddp_leaves_the_word_vectors_alone_and_syncs_the_other_buffers(vectors, name, tmp_path):
    # A one-process gloo group on the CPU: DDP as Lightning builds it (the LightningModule wrapped whole).
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from clusterable.heads.cce import CCELoss
    from clusterable.module import RepresentationModule

    encoder = ENCODERS[name](vectors, [6])
    module = RepresentationModule(encoder, CCELoss(3, encoder.embedding_dim), torch.optim.Adam)
    module.extra = torch.nn.BatchNorm1d(2)  # buffers that must still be synchronised
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        ddp = DistributedDataParallel(module)
        synced = set(ddp.named_module_buffers)
    finally:
        dist.destroy_process_group()
    assert {"encoder.word_vectors", "encoder.word_vectors_digest"}.isdisjoint(synced), synced
    assert {"extra.running_mean", "extra.running_var"} <= synced
    assert set(module._ddp_params_and_buffers_to_ignore) <= set(dict(module.named_buffers()))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda v: TextCNN(v, [1, 28, 28]), "input_shape must be [L], the length of a text dataset's documents"),
        (lambda v: TextFFNN(v[0], [6]), "word_vectors must be a (vocabulary, dimension) float tensor, got [8]"),
        (lambda v: TextFFNN(v.long(), [6]), "word_vectors must be a (vocabulary, dimension) float tensor"),
        (lambda v: TextCNN(v, [6], widths=[3, 0]), "widths must be a non-empty list of positive integers"),
        (lambda v: TextCNN(v, [6], channels=0), "channels must be >= 1, got 0"),
        (lambda v: TextFFNN(v, [6], dropout=1.0), "dropout must be in [0, 1), got 1.0"),
        (
            lambda v: TextCNN(v, [6])(torch.rand(2, 6)),
            "TextCNN reads token ids (N, L) of a text dataset, got a torch.float32 tensor of shape [2, 6]",
        ),
    ],
)
def test_bad_arguments_are_one_line(vectors, make, message):
    with pytest.raises(ValueError) as info:
        make(vectors)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("loss", COREL_HEADS)
@pytest.mark.parametrize("model", ENCODERS)
def test_built_from_its_config_with_every_corel_head_one_training_step(vectors, model, loss):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=[f"model={model}", f"loss={loss}"])
    encoder = build(cfg.model, "model", input_shape=(8,), word_vectors=vectors)
    assert isinstance(encoder, ENCODERS[model]) and encoder.embedding_dim == cfg.model.hidden[-1]
    head = build(cfg.loss, "loss", num_classes=3, embedding_dim=encoder.embedding_dim, input_shape=(8,))
    require(head, Head, loss)
    opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=1e-3)
    x, labels = padded(DOCS * 3, 8), torch.arange(12) % 3
    out = head(encoder(x), labels, inputs=x, index=torch.arange(12), epoch=0, encoder=encoder)
    assert torch.isfinite(out["loss"])
    opt.zero_grad()
    out["loss"].backward()
    opt.step()
    assert all(torch.isfinite(p).all() for p in encoder.parameters())


# End to end: train.py on a text dataset. There is a corpus reader in this repository besides AGNews's (which
# needs its files): a dataset config written here reads the fake corpus generator as its corpus and a tiny GloVe
# file through read_glove, the real code path of dataset=agnews8 with source=real.
def text_dataset(tmp_path: Path) -> str:
    glove = tmp_path / "glove" / "glove.tiny.8d.txt"
    glove.parent.mkdir()
    rows = torch.randn(30, D, generator=torch.Generator().manual_seed(1))
    lines = [f"w{i} " + " ".join(f"{v:.4f}" for v in row) + "\n" for i, row in enumerate(rows)]
    glove.write_text("".join(lines))
    conf = tmp_path / "conf" / "dataset"
    conf.mkdir(parents=True)
    (conf / "tiny_text.yaml").write_text(f"""
_target_: clusterable.data.text.TextDataModule
name: tiny_text
num_classes: 4
batch_size: 16
root: {tmp_path / "tiny_text"}
source: real
fake_size: 64
fake_length: 9
fake_vocab_size: 40
fake_dim: {D}
corpus:
  _target_: clusterable.data.text.fake_corpus
  _partial_: true
  num_docs_per_class: 16
  length: 12
  vocab_size: 45  # w0 .. w39: w30 and above are not in the GloVe file (OOV)
  seed: 0
  num_classes: 4
vectors:
  _target_: clusterable.data.text.glove.read_glove
  _partial_: true
  path: {glove}
  dim: {D}
  cache_dir: ${{..root}}
""")
    return f"hydra.searchpath=[file://{tmp_path / 'conf'}]"


@pytest.mark.parametrize(("model", "source"), [("text_cnn", "real"), ("text_ffnn", "fake")])
def test_train_runs_a_text_model_on_a_text_dataset(train, tmp_path, model, source):
    searchpath = text_dataset(tmp_path)
    result = train(searchpath, "dataset=tiny_text", f"dataset.source={source}", f"model={model}", *QUICK)
    assert result.code == 0, result.err
    (path,) = train.outputs.rglob("metrics.json")
    m = json.loads(path.read_text())
    assert m["status"] == "ok" and 0 <= m["metrics"]["test/acc"] <= 1
    assert m["provenance"]["data_source"] == source
    if source == "real":
        assert list((tmp_path / "tiny_text").glob("glove.tiny.8d.*.npy"))  # the restricted vectors, cached
    state = torch.load(path.parent / "checkpoints" / "best.ckpt", weights_only=False)["state_dict"]
    assert "encoder.word_vectors_digest" in state and "encoder.word_vectors" not in state


def assert_one_error_line(result, message: str) -> None:
    """Non-zero exit, exactly one line on stderr, naming ``message``, no traceback anywhere."""
    assert result.code != 0, result
    assert result.error_lines() == [result.error_lines()[0]] and message in result.err, result.err
    assert "Traceback" not in result.out + result.err


def test_a_text_model_on_another_dataset_is_one_line(train):
    result = train("model=text_cnn", *QUICK)
    message = "model text_cnn needs word_vectors from its dataset, which dataset digits does not give"
    assert_one_error_line(result, message)


def test_another_model_on_a_text_dataset_is_one_line(train, tmp_path):
    result = train(text_dataset(tmp_path), "dataset=tiny_text", "model=ffnn", *QUICK)
    message = (
        "model ffnn does not take the word_vectors that dataset tiny_text feeds its encoder (it could not read its "
        "inputs): choose a model that takes word_vectors"
    )
    assert_one_error_line(result, message)


def test_agnews8_runs_offline_on_its_fake_source_and_records_what_the_data_did(train):
    result = train(
        "dataset=agnews8",
        "dataset.source=fake",
        "dataset.fake_size=64",
        "dataset.fake_dim=16",
        "model=text_cnn",
        *QUICK,
    )
    assert result.code == 0, result.err
    (path,) = train.outputs.rglob("metrics.json")
    notes = json.loads(path.read_text())["data_notes"]  # the corpus's and the vectors' records, in the run
    assert set(notes) == {"corpus", "word_vectors"}
