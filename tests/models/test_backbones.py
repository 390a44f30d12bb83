"""The ImageNet backbones (``clusterable.models.backbones``) with random weights on small images: output shapes,
input normalisation, frozen BatchNorm, weight files read from a temporary TORCH_HOME, configs.

Networks are built a few times only (ResNet-50 costs about half a second a build): one module-scoped encoder per
network, 32 x 32 inputs (every network takes them; BN-Inception takes 31-38).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from torch import nn
from torchvision import models as tv

from clusterable.config import CONFIG_DIR, ConfigError, build
from clusterable.contracts import Encoder, require
from clusterable.models import backbones
from clusterable.models.backbones import PretrainedBackbone, WeightsNotFoundError
from clusterable.models.bninception import BNInception

ARCHS = backbones.ARCHS
FEATURES = {"resnet50": 2048, "googlenet": 1024, "bninception": 1024}
SHAPE = (3, 32, 32)


def images(n: int = 2, shape: tuple[int, ...] = SHAPE) -> torch.Tensor:
    return torch.rand(n, *shape, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Small images: thread hand-offs would cost more than the arithmetic, and far more on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def encoders() -> dict[str, PretrainedBackbone]:
    torch.manual_seed(0)
    return {arch: backbones.ENCODERS[arch](SHAPE, weights=None) for arch in ARCHS}


@pytest.fixture
def torch_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty TORCH_HOME; returns its checkpoint folder (not created)."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    return tmp_path / "hub" / "checkpoints"


def save(state: dict[str, torch.Tensor], folder: Path, arch: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / backbones.weight_file(arch).name
    torch.save(state, path)
    return path


@pytest.mark.parametrize("arch", ARCHS)
def test_features_and_each_pooling(encoders, arch, monkeypatch):
    encoder = encoders[arch]
    require(encoder, Encoder, arch)
    assert encoder.embedding_dim == FEATURES[arch]
    x = images()
    with torch.no_grad():
        out, maps = encoder(x), encoder.feature_map(x)
    assert out.shape == (2, encoder.embedding_dim) and maps.shape[:2] == (2, FEATURES[arch])
    torch.testing.assert_close(out, maps.mean((2, 3)))  # the default: average pooling, nothing after it
    expected = {"avg": maps.mean((2, 3)), "max": maps.amax((2, 3))}
    expected["avgmax"] = expected["avg"] + expected["max"]
    for pooling in backbones.POOLINGS:
        monkeypatch.setattr(encoder, "pooling", pooling)
        torch.testing.assert_close(encoder.pool(maps), expected[pooling])


@pytest.mark.parametrize("arch", ARCHS)
def test_inputs_are_normalised_as_the_weights_expect_and_stay_channels_last(encoders, arch):
    x = images().contiguous(memory_format=torch.channels_last)
    seen = encoders[arch].normalise(x)
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    imagenet = (x - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)
    if arch == "resnet50":
        expected = imagenet
    elif arch == "googlenet":  # torchvision's transform_input applied to ImageNet-normalised inputs
        expected = imagenet * (std / 0.5).view(1, 3, 1, 1) + ((mean - 0.5) / 0.5).view(1, 3, 1, 1)
    else:  # Cadene's convention: BGR, [0, 255], mean (104, 117, 128) in BGR order
        expected = x[:, [2, 1, 0]] * 255 - torch.tensor([104.0, 117.0, 128.0]).view(1, 3, 1, 1)
    torch.testing.assert_close(seen, expected)
    assert seen.is_contiguous(memory_format=torch.channels_last)


def test_channels_last_and_flat_inputs_give_the_same_output(encoders):
    encoder = encoders["bninception"].eval()
    try:
        x = images()
        with torch.no_grad():
            maps = encoder.feature_map(x.contiguous(memory_format=torch.channels_last))
            torch.testing.assert_close(maps, encoder.feature_map(x), atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(encoder(x.flatten(1)), encoder(x))  # flat rows read as the images
        assert maps.is_contiguous(memory_format=torch.channels_last)
    finally:
        encoder.train()


@pytest.mark.parametrize("arch", ["resnet50", "bninception"])
def test_frozen_batchnorm_survives_train_mode_and_an_optimizer_step(encoders, arch):
    encoder = encoders[arch]
    norms = encoder._batchnorms()
    assert norms and all(isinstance(m, nn.BatchNorm2d) for m in norms)
    encoder.eval()
    encoder.train()
    assert encoder.training and not any(m.training for m in norms)
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    trained = [p for p in encoder.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trained, lr=0.1)
    encoder(images()).square().mean().backward()
    optimizer.step()
    for m in norms:
        assert not m.weight.requires_grad and not m.bias.requires_grad and m.weight.grad is None
        name = next(n for n, mod in encoder.named_modules() if mod is m)
        for key in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
            assert torch.equal(before[f"{name}.{key}"], getattr(m, key)), (name, key)
    changed = [k for k, v in encoder.state_dict().items() if not torch.equal(before[k], v)]
    assert changed and not any("bn" in k for k in changed)  # the convolutions did train
    encoder.train()
    assert not any(m.training for m in norms)


def test_unfrozen_batchnorm_trains():
    encoder = backbones.BNInceptionEncoder(SHAPE, weights=None, frozen_batchnorm=False)
    norms = encoder._batchnorms()
    assert all(m.training and m.weight.requires_grad for m in norms)
    mean = norms[0].running_mean.clone()
    with torch.no_grad():
        encoder(images())
    assert not torch.equal(mean, norms[0].running_mean)


@pytest.mark.parametrize("arch", ARCHS)
def test_missing_weights_is_one_line_naming_file_folder_and_url(torch_home, arch):
    with pytest.raises(WeightsNotFoundError) as error:
        backbones.ENCODERS[arch](SHAPE)
    message = str(error.value)
    name = {"resnet50": "resnet50-0676ba61.pth", "googlenet": "googlenet-1378be20.pth"}
    name["bninception"] = "bn_inception-52deb4733.pth"
    assert "\n" not in message and message.startswith("weights=")
    assert name[arch] in message and str(torch_home) in message
    url = backbones.BN_INCEPTION_URL if arch == "bninception" else f"https://download.pytorch.org/models/{name[arch]}"
    assert url in message


def test_resnet50_reads_its_weight_file(torch_home):
    torch.manual_seed(1)
    state = tv.resnet50().state_dict()
    save(state, torch_home, "resnet50")
    encoder = backbones.ResNet50(SHAPE)
    own = encoder.trunk.state_dict()
    assert set(own) == {k for k in state if not k.startswith("fc.")}
    assert all(torch.equal(own[k], state[k]) for k in own)
    assert not any(m.training for m in encoder._batchnorms())


def test_googlenet_reads_its_weight_file_with_the_auxiliary_classifiers(torch_home):
    torch.manual_seed(1)
    state = tv.googlenet(aux_logits=True, init_weights=False).state_dict()
    save(state, torch_home, "googlenet")
    own = backbones.GoogLeNet(SHAPE).trunk.state_dict()
    assert set(own) == {k for k in state if not k.startswith(("fc.", "aux1.", "aux2."))}
    assert all(torch.equal(own[k], state[k]) for k in own)


@pytest.mark.parametrize("old_format", [False, True], ids=["ours", "old-format"])
def test_bninception_reads_its_weight_file(torch_home, old_format):
    torch.manual_seed(1)
    net = BNInception()
    for m in net.modules():  # statistics that differ from the defaults, so that the comparison means something
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2)
    state = net.state_dict()
    saved = state
    if old_format:  # the Caffe port as some copies store it: BatchNorm vectors (1, C), no num_batches_tracked
        saved = {k: v.unsqueeze(0) if "_bn." in k else v for k, v in state.items() if "num_batches_tracked" not in k}
    save(saved, torch_home, "bninception")
    encoder = backbones.BNInceptionEncoder(SHAPE)
    own = encoder.trunk.state_dict()
    assert set(own) == {k for k in state if not k.startswith("last_linear.")}
    assert all(torch.equal(own[k], state[k]) for k in own if "num_batches_tracked" not in k)


def test_bninception_layer_names_match_cadene():
    names = BNInception().state_dict()
    assert len(names) == 485 and sum(p.numel() for p in BNInception().parameters()) == 11_295_240
    for key in (
        "conv1_7x7_s2.weight",
        "conv1_7x7_s2_bn.running_var",
        "inception_3c_double_3x3_2_bn.bias",
        "inception_5b_pool_proj.weight",
        "last_linear.bias",
    ):
        assert key in names
    assert names["inception_4e_double_3x3_2.weight"].shape == (256, 256, 3, 3)


def test_a_file_that_does_not_fit_is_one_line(torch_home):
    save({"conv1.weight": torch.zeros(1)}, torch_home, "bninception")
    with pytest.raises(ValueError, match="does not fit bninception") as error:
        backbones.BNInceptionEncoder(SHAPE)
    assert "\n" not in str(error.value)
    (torch_home / backbones.weight_file("bninception").name).write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read") as error:
        backbones.BNInceptionEncoder(SHAPE)
    assert "\n" not in str(error.value)


class _RunsCode:
    """Unpickling this creates ``marker``: the proof that loading a file ran code from it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_corrupt_or_code_carrying_weight_file_is_one_line_naming_it(torch_home, tmp_path):
    """torch's own message advises ``weights_only=False`` (running code from the file): never shown."""
    path = save({"conv1.weight": torch.zeros(1)}, torch_home, "bninception")
    marker = tmp_path / "ran"
    for content in (b"\x80\x02garbage", b"", None):
        if content is None:
            torch.save({"conv1.weight": _RunsCode(marker)}, path, pickle_protocol=2)
        else:
            path.write_bytes(content)
        with pytest.raises(ValueError, match="cannot read") as error:
            backbones.BNInceptionEncoder(SHAPE)
        message = str(error.value)
        assert "\n" not in message and str(path) in message and "weights_only" not in message
    assert "without running code" in message and not marker.exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input_shape": (1, 32, 32)}, "input_shape must be [3, H, W]"),
        ({"input_shape": (3, 60, 64)}, "input_shape [3, 60, 64] does not fit bninception"),
        ({"pooling": "sum"}, "pooling must be one of avg, max, avgmax"),
        ({"out_dim": 0}, "out_dim must be >= 1 or null"),
        ({"weights": "imagenet21k"}, "weights must be 'imagenet' or null"),
    ],
)
def test_bad_options_are_one_line(kwargs, message):
    options = {"input_shape": SHAPE, "weights": None, **kwargs}
    with pytest.raises(ValueError) as error:
        backbones.BNInceptionEncoder(**options)
    assert str(error.value).startswith(message), str(error.value)


def test_googlenet_needs_15_pixels():
    with pytest.raises(ValueError, match=r"does not fit googlenet: it needs H and W >= 15"):
        backbones.GoogLeNet((3, 14, 32), weights=None)


def composed(*overrides: str):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("train", overrides=list(overrides))


@pytest.mark.parametrize("arch", ARCHS)
def test_configs_compose_and_build_with_an_embedding_layer_and_feature_norm(arch):
    cfg = composed(f"model={arch}")  # the defaults: Boudiaf et al.'s
    assert cfg.model.weights == "imagenet" and cfg.model.frozen_batchnorm and cfg.model.pooling == "avg"
    assert cfg.model.out_dim is None and cfg.model.feature_norm is False
    cfg = composed(f"model={arch}", "model.weights=null", "model.out_dim=8", "model.feature_norm=true")
    encoder = build(cfg.model, "model", input_shape=(3, 64, 64))
    require(encoder, Encoder, "model")
    assert isinstance(encoder, PretrainedBackbone) and encoder.arch == arch and encoder.embedding_dim == 8
    assert isinstance(encoder.feature_norm, nn.BatchNorm1d) and not encoder.feature_norm.affine
    assert encoder.embedding.bias.abs().sum() == 0  # zero bias, as Boudiaf et al.'s remap layer
    with torch.no_grad():
        out = encoder(images(shape=(3, 64, 64)))
    assert out.shape == (2, 8) and torch.isfinite(out).all()


def test_config_errors_are_one_line(torch_home):
    cfg = composed("model=resnet50")
    with pytest.raises(ConfigError, match=r"^model\.weights='imagenet' needs resnet50-0676ba61\.pth") as error:
        build(cfg.model, "model", input_shape=(3, 64, 64))
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match=r"^model\.input_shape must be \[3, H, W\]"):
        build(cfg.model, "model", input_shape=(1, 28, 28))
    cfg = composed("model=bninception", "model.pooling=sum")
    with pytest.raises(ConfigError, match=r"^model\.pooling must be one of 'avg', 'max', 'avgmax'"):
        build(cfg.model, "model", input_shape=(3, 64, 64))
