"""Every head in src/clusterable/conf/loss and every encoder in src/clusterable/conf/model: its contracts, its loss
parts, and a constructor that takes exactly the framework arguments it uses and refuses anything else."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

import hydra
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException
from omegaconf import OmegaConf

import clusterable  # noqa: F401  (registers the resolvers model configs use, e.g. ${inception_arch:})
from clusterable.config import CONFIG_DIR
from clusterable.contracts import (
    ClassifyingHead,
    ClusteringHead,
    ContractError,
    Encoder,
    HasConstantBuffers,
    HasEmbeddingLayer,
    Head,
    OwnLearningRate,
    ReconstructingHead,
    RepresentingHead,
    WatchesDivergence,
    require,
)
from clusterable.models.identity import Identity

CONF = Path(CONFIG_DIR)
HEADS = sorted(p.stem for p in (CONF / "loss").glob("*.yaml"))
ENCODERS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
CLASSIFYING = {
    "cce",
    "center",
    "cosine_corel",
    "gaussian_corel",
    "gaussian_corel_authors",
    "gaussian_corel_authors_fixed_gamma",
    "ce",
}
# pytorch-metric-learning's losses through the generic head: on embeddings, with their own parameter group.
PML = {
    "pml",
    "contrastive",
    "triplet",
    "multi_similarity",
    "supcon",
    "nca",
    "proxy_nca",
    "proxy_anchor",
    "arcface",
    "normsoftmax",
}
# Heads whose learning rate is not the optimizer's by default (ProxyAnchor's proxies: 100x, as its authors train).
HEAD_LR = {"proxy_anchor": 0.1}
CLUSTERING = {"tae1", "tae2", "ptae", "tvae", "tvae_cnn", "tcl", "trbm"}
# Safir 2022's heads: a latent on the encoder output (embedding_dim); the autoencoders also decode to the input.
SAFIR = {"dml", "dml_ae", "dml_prior", "mvae"}
REPRESENTING = {"ae1", "ae2", "ae3", *CLUSTERING, *SAFIR}
RECONSTRUCTING = {"ae1", "ae2", "ae3", "tae1", "tae2", "ptae", "trbm"}
# Heads that recognise their own loss running away (Gaussian-COREL below lambda = 0.5).
WATCHING = {"gaussian_corel", "gaussian_corel_authors", "gaussian_corel_authors_fixed_gamma", "dml_prior", "mvae"}
OWN_LR = CLASSIFYING | PML

# What train.py passes: C = 3 classes, flat 4x4 "images" (inputs in [0, 1] for the RBM) through the identity
# encoder, so D = d = 16. Encoders get MNIST-shaped inputs (TCLConv needs at least 12x12).
N, C, SIDE = 12, 3, 4
HEAD_ARGS = {"num_classes": C, "embedding_dim": SIDE * SIDE, "input_shape": [SIDE * SIDE]}
ENCODER_ARGS = {"input_shape": [1, 28, 28]}
# ImageNet backbones take RGB images; no weight file offline: random initialisation.
IMAGE_ENCODERS = {"resnet50", "googlenet", "bninception", "inception"}
IMAGE_ENCODER_ARGS = {"input_shape": [3, 64, 64]}
TEXT_ENCODERS = {"text_ffnn", "text_cnn"}
# Encoders that name the layer mapping their features to the embedding (``trainable: embedding_layer``).
EMBEDDING_LAYER = {"ffnn", *IMAGE_ENCODERS, *TEXT_ENCODERS}
FRAMEWORK = {"num_classes", "embedding_dim", "input_shape"}


def target(group: str, name: str) -> type:
    return hydra.utils.get_class(config(group, name)._target_)


def config(group: str, name: str):
    """The config file; one with a defaults list of its own (the Safir heads' `loss/metric`, an option extending
    another: gaussian_corel_authors) composed by Hydra."""
    cfg = OmegaConf.load(CONF / group / f"{name}.yaml")
    if "defaults" in cfg:
        with initialize_config_dir(config_dir=str(CONF), version_base=None):
            cfg = compose(overrides=[f"+{group}={name}"])[group]
    return cfg


def build(group: str, name: str, available: dict, **overrides) -> torch.nn.Module:
    """``instantiate`` the config as the framework does: only the arguments in ``available`` that the target's
    signature takes, plus ``overrides`` (as if set on the command line)."""
    cfg = config(group, name)
    params = inspect.signature(hydra.utils.get_class(cfg._target_)).parameters
    return hydra.utils.instantiate(cfg, **{k: v for k, v in available.items() if k in params}, **overrides)


def batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    inputs = torch.rand(N, SIDE * SIDE, generator=g)
    return {"inputs": inputs, "labels": torch.arange(N) % C, "index": torch.arange(N)}


def ready_head(name: str) -> tuple[torch.nn.Module, torch.Tensor, dict]:
    """A head built from its config, its embeddings (the identity encoder's output) and a training batch; a
    clustering head has run ``init_clusters`` on the batch as its training split."""
    torch.manual_seed(0)
    head, encoder, split = build("loss", name, HEAD_ARGS), Identity(HEAD_ARGS["input_shape"]), batch()
    embeddings = encoder(split["inputs"])
    if isinstance(head, ClusteringHead):
        head.init_clusters(embeddings, **split)
    return head, embeddings, {**split, "epoch": 0, "encoder": encoder}


# ---- constructors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("group, name", [("loss", n) for n in HEADS] + [("model", n) for n in ENCODERS])
def test_every_constructor_parameter_is_typed_and_nothing_is_swallowed(group, name):
    cls = target(group, name)
    params = inspect.signature(cls).parameters
    assert all(p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in params.values()), name
    hints = typing.get_type_hints(cls.__init__)
    assert set(params) <= set(hints), f"{name}: no type hint for {set(params) - set(hints)}"
    if group == "model":  # an encoder is built before the head: it knows only the input shape
        assert set(params) & FRAMEWORK == {"input_shape"}


@pytest.mark.parametrize("name", HEADS)
def test_heads_take_only_the_framework_arguments_they_use(name):
    taken = set(inspect.signature(target("loss", name)).parameters) & FRAMEWORK
    # The heads that own the network read d from the input shape; pce needs neither (its classifier is the
    # batch's class means).
    uses_input_shape = name not in CLASSIFYING | PML | {"tcl", "pce", "dscl", "dml", "dml_prior"}
    assert ("input_shape" in taken) == uses_input_shape
    assert ("embedding_dim" in taken) == ((not uses_input_shape or name in SAFIR) and name != "pce")
    assert "num_classes" in taken


@pytest.mark.parametrize(
    "group, name, available", [("loss", n, HEAD_ARGS) for n in HEADS] + [("model", n, ENCODER_ARGS) for n in ENCODERS]
)
def test_an_unknown_keyword_is_refused(group, name, available):
    with pytest.raises(InstantiationException) as error:
        build(group, name, available, lamda=0.5)
    assert isinstance(error.value.__cause__, TypeError) and "lamda" in str(error.value.__cause__)


@pytest.mark.parametrize("name", HEADS)
def test_own_learning_rate_is_positive_or_null(name):
    takes_lr = "lr" in inspect.signature(target("loss", name)).parameters
    assert takes_lr == (name in OWN_LR)
    if not takes_lr:
        assert not isinstance(build("loss", name, HEAD_ARGS), OwnLearningRate)
        return
    head = build("loss", name, HEAD_ARGS)
    require(head, OwnLearningRate, f"loss={name}")
    assert head.lr == HEAD_LR.get(name)
    assert build("loss", name, HEAD_ARGS, lr=0.01).lr == 0.01
    for bad in (-1, 0.0):
        with pytest.raises(InstantiationException) as error:
            build("loss", name, HEAD_ARGS, lr=bad)
        assert isinstance(error.value.__cause__, ValueError)
        assert str(error.value.__cause__) == f"lr must be > 0 or null, got {bad}"


@pytest.mark.parametrize(
    "group, name, overrides, message",
    [
        ("loss", "cce", {"num_classes": 1}, "num_classes must be >= 2, got 1"),
        ("loss", "gaussian_corel", {"gamma": -1.0}, "gamma must be > 0, got -1.0"),
        ("loss", "cosine_corel", {"eps": 0.0}, "eps must be > 0, got 0.0"),
        ("loss", "center", {"alpha": 0.0}, "alpha must be in (0, 1], got 0.0"),
        ("loss", "ae3", {"num_classes": 0}, "num_classes must be >= 1, got 0"),
        ("loss", "ae1", {"input_shape": [0]}, "input_shape must be a non-empty list of positive integers"),
        ("loss", "tae1", {"arch": "ae1"}, "arch must be one of tae1, tae2, ptae, got 'ae1'"),
        ("loss", "tvae", {"num_classes": 1}, "num_classes must be >= 2 (the number of clusters"),
        ("loss", "tvae", {"negative_slope": -0.1}, "negative_slope must be >= 0, got -0.1"),
        ("loss", "tvae", {"recon": "l1"}, "recon must be one of bce, mse, got 'l1'"),
        ("loss", "tvae", {"hidden": []}, "hidden must be a non-empty list of positive integers, got []"),
        ("loss", "tcl", {"num_classes": 1}, "num_classes must be >= 2 (the number of clusters"),
        ("loss", "tcl", {"dropout": 1.0}, "dropout must be in [0, 1), got 1.0"),
        ("loss", "tcl", {"sigma": -1.0}, "sigma must be >= 0, got -1.0"),
        ("loss", "trbm", {"seed": -1}, "seed must be >= 0, got -1"),
        ("loss", "trbm", {"hidden": 0}, "hidden must be >= 1, got 0"),
        ("model", "ffnn", {"dropout": -0.5}, "dropout must be in [0, 1), got -0.5"),
        ("model", "cnn", {"kernel_size": 4}, "kernel_size must be a positive odd integer, got 4"),
        ("model", "cnn", {"negative_slope": -1.0}, "negative_slope must be >= 0, got -1.0"),
        ("model", "cnn", {"input_shape": [1, 2, 3, 4]}, "input_shape must be [C, H, W], [H, W] or [d]"),
        ("model", "tcl_conv", {"out_dim": 0}, "out_dim must be >= 1 or null, got 0"),
        (
            "model",
            "identity",
            {"input_shape": []},
            "input_shape must be a non-empty list of positive integers",
        ),
    ],
)
def test_an_out_of_range_value_is_named_first(group, name, overrides, message):
    available = {**(HEAD_ARGS if group == "loss" else ENCODER_ARGS)}
    for key in set(overrides) & set(available):
        available[key] = overrides.pop(key)
    with pytest.raises(InstantiationException) as error:
        build(group, name, available, **overrides)
    assert isinstance(error.value.__cause__, ValueError)
    assert str(error.value.__cause__).startswith(message)


# ---- contracts ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ENCODERS)
def test_encoders_satisfy_the_encoder_contract(name):
    if name in TEXT_ENCODERS:  # token ids (N, L) over the word vectors of a text dataset
        encoder = build("model", name, {"input_shape": [12], "word_vectors": torch.randn(50, 16)}).eval()
        require(encoder, Encoder, f"model={name}")
        # The frozen word vectors: every DDP rank builds them, so none is broadcast.
        assert isinstance(encoder, HasConstantBuffers) and isinstance(encoder, HasEmbeddingLayer)
        assert set(encoder.ddp_constant_buffers) <= set(dict(encoder.named_buffers()))
        assert encoder(torch.randint(0, 50, (2, 12))).shape == (2, encoder.embedding_dim)
        return
    image = name in IMAGE_ENCODERS
    args, overrides = (IMAGE_ENCODER_ARGS, {"weights": None}) if image else (ENCODER_ARGS, {})
    encoder = build("model", name, args, **overrides).eval()
    require(encoder, Encoder, f"model={name}")
    assert isinstance(encoder, HasEmbeddingLayer) == (name in EMBEDDING_LAYER), name
    assert not isinstance(encoder, HasConstantBuffers), name
    shape = args["input_shape"]
    out = encoder(torch.rand(2, *shape))
    assert out.shape == (2, encoder.embedding_dim)
    flat = torch.rand(2, shape[0] * shape[1] * shape[2])
    assert encoder(flat).shape == out.shape  # flat inputs of the same shape are accepted too


@pytest.mark.parametrize("name", HEADS)
def test_heads_satisfy_their_contracts(name):
    head = build("loss", name, HEAD_ARGS)
    require(head, Head, f"loss={name}")
    for contract, expected in (
        (ClassifyingHead, CLASSIFYING),
        (ClusteringHead, CLUSTERING),
        (RepresentingHead, REPRESENTING),
        (ReconstructingHead, RECONSTRUCTING),
        (WatchesDivergence, WATCHING),
    ):
        if name in expected:
            require(head, contract, f"loss={name}")
        else:
            with pytest.raises(ContractError):
                require(head, contract, f"loss={name}")


@pytest.mark.parametrize("name", HEADS)
def test_forward_returns_exactly_the_declared_loss_parts(name):
    head, embeddings, batch_ = ready_head(name)
    assert isinstance(head.loss_parts, tuple) and head.loss_parts[0] == "loss"
    assert len(set(head.loss_parts)) == len(head.loss_parts)
    out = head(embeddings, batch_["labels"], **{k: v for k, v in batch_.items() if k != "labels"})
    assert set(out) == set(head.loss_parts)
    assert all(v.ndim == 0 and torch.isfinite(v) for v in out.values())


@pytest.mark.parametrize("name", sorted(CLASSIFYING | REPRESENTING))
def test_logits_and_embed_have_their_shapes(name):
    head, embeddings, batch_ = ready_head(name)
    if name in CLASSIFYING:
        assert head.logits(embeddings).shape == (N, C)
    else:
        out = head.embed(embeddings, **batch_)
        assert out.ndim == 2 and out.shape[0] == N


@pytest.mark.parametrize("name", sorted(CLUSTERING))
def test_clustering_hooks_keep_a_valid_assignment(name):
    head, embeddings, batch_ = ready_head(name)
    head.update_clusters(embeddings, **batch_)
    assignment = head.state.assignment
    assert assignment.shape == (N,) and 0 <= int(assignment.min()) and int(assignment.max()) < C
    assert torch.equal(head.assign(embeddings, **batch_), head.cluster_losses(embeddings, **batch_).argmin(1))
