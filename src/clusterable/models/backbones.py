"""ImageNet-pretrained backbones for deep metric learning: ResNet-50, GoogLeNet and BN-Inception.

One encoder, ``PretrainedBackbone``, wraps the three networks' convolutional trunks with what the deep metric
learning papers put around them: the input normalisation the weights expect (inside the model, so the data
pipeline only scales images to [0, 1]), BatchNorm frozen, a global pooling, an optional feature BatchNorm and an
optional linear embedding layer. Its subclasses ``ResNet50``, ``GoogLeNet`` and ``BNInceptionEncoder`` fix the
network: they are the ``_target_`` of ``src/clusterable/conf/model/{resnet50,googlenet,bninception}.yaml`` (classes,
as every model target: the config checks and tests read a target's constructor signature).

Sources:
- Boudiaf et al. 2020, "A unifying mutual information view of metric learning" (authors' code
  ``jeromerony/dml_cross_entropy``, ``models/architectures/``, ``models/base_model.py``): torchvision's ResNet-50
  with its original ImageNet weights (IMAGENET1K_V1), ImageNet mean/std subtracted inside the model, every
  BatchNorm2d in eval mode during training (``set_bn_eval``), global average pooling, 2048 features without a
  projection; ``norm_layer='batch'`` (a BatchNorm1d without affine parameters on the pooled features, before
  the optional projection) for Cars, SOP and In-Shop.
- Law et al. 2017, "Deep spectral clustering learning" (DSCL), and the Multi-Similarity and MLRC codes:
  BN-Inception (``clusterable.models.bninception``) with a linear embedding layer after global pooling.

Weights are read from torch's checkpoint cache, ``torch.hub.get_dir()/checkpoints``
(``$TORCH_HOME/hub/checkpoints``, by default ``~/.cache/torch/hub/checkpoints``), under the file name of their
download address; nothing is downloaded: a missing file is a one-line error that names it, the folder and the
address.
"""

from __future__ import annotations

import pickle
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor, nn
from torchvision import models as tv

from clusterable import checks
from clusterable.models import bninception as bn_inception

ARCHS = ("resnet50", "googlenet", "bninception")
POOLINGS = ("avg", "max", "avgmax")
BN_INCEPTION_URL = "http://data.lip6.fr/cadene/pretrainedmodels/bn_inception-52deb4733.pth"

Arch = Literal["resnet50", "googlenet", "bninception"]
Pooling = Literal["avg", "max", "avgmax"]
Weights = Literal["imagenet"] | None


class WeightsNotFoundError(ValueError):
    """``weights='imagenet'`` and the weight file is not in torch's checkpoint cache (one line: file, folder, URL)."""


@dataclass(frozen=True)
class _Family:
    """What differs between the three networks: feature width, weight file, input convention, smallest input."""

    features: int
    url: str
    mean: tuple[float, float, float]  # in the channel order and range the weights expect
    std: tuple[float, float, float]
    value_range: float  # the weights' inputs: 1 for [0, 1], 255 for [0, 255]
    bgr: bool  # the weights expect BGR channels
    min_side: int  # smallest input height and width (BN-Inception: not every larger side fits)

    @property
    def file_name(self) -> str:
        return self.url.rsplit("/", 1)[-1]


_FAMILIES = {
    # Boudiaf et al.: IMAGENET1K_V1 (torchvision's original weights, the file they load), not DEFAULT (V2).
    "resnet50": _Family(
        2048, tv.ResNet50_Weights.IMAGENET1K_V1.url, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), 1, False, 1
    ),
    # torchvision builds its pretrained GoogLeNet with transform_input=True, which maps ImageNet-normalised
    # inputs to (x - 0.5) / 0.5: the weights expect [-1, 1]. We normalise to that directly.
    "googlenet": _Family(1024, tv.GoogLeNet_Weights.IMAGENET1K_V1.url, (0.5,) * 3, (0.5,) * 3, 1, False, 15),
    # Cadene's pretrainedmodels settings for these weights: BGR, [0, 255], mean (104, 117, 128) in BGR order, std 1.
    "bninception": _Family(1024, BN_INCEPTION_URL, (104.0, 117.0, 128.0), (1.0,) * 3, 255, True, 31),
}

# The trunk of each torchvision network, in forward order (their classifiers, dropout and pooling left out).
_TRUNKS = {
    "resnet50": ("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4"),
    "googlenet": tuple(
        "conv1 maxpool1 conv2 conv3 maxpool2 inception3a inception3b maxpool3 inception4a inception4b inception4c "
        "inception4d inception4e maxpool4 inception5a inception5b".split()
    ),
}


def checkpoint_dir() -> Path:
    """torch's checkpoint cache, ``torch.hub.get_dir()/checkpoints`` (follows ``TORCH_HOME``)."""
    return Path(torch.hub.get_dir()) / "checkpoints"


def weight_file(arch: str) -> Path:
    """Where the ImageNet weights of ``arch`` are read from (the file need not exist)."""
    return checkpoint_dir() / _FAMILIES[arch].file_name


def _read_weights(arch: str) -> dict[str, Tensor]:
    family, path = _FAMILIES[arch], weight_file(arch)
    if not path.is_file():
        raise WeightsNotFoundError(
            f"weights='imagenet' needs {family.file_name} in {path.parent}, which is not there: download "
            f"{family.url} into that folder (TORCH_HOME moves it), or set weights=null for a random initialisation"
        )
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except UnicodeDecodeError:  # pickled by Python 2 (Cadene ported BN-Inception with it)
            return torch.load(path, map_location="cpu", weights_only=True, encoding="latin1")
    except (RuntimeError, OSError, EOFError, pickle.UnpicklingError, UnicodeDecodeError) as e:
        raise ValueError(
            f"weights='imagenet': cannot read {path} ({_load_error(e)}); download {family.url} into {path.parent} again"
        ) from None


def _load_error(error: BaseException) -> str:
    """What ``torch.load(..., weights_only=True)`` found wrong, in a few words: its own message advises
    ``weights_only=False`` (which runs code from the file) for any file it cannot read, corrupt or not, and this
    module never loads weights that way."""
    if isinstance(error, EOFError):
        return "the file is empty or truncated"
    if isinstance(error, pickle.UnpicklingError) and "weights_only" in str(error):
        found = re.search(r"WeightsUnpickler error:\s*(.+)", str(error))
        # Its first sentence only: the rest advises allow-listing what the file asks to run.
        detail = f": {found.group(1).strip().split('. ')[0]}" if found else ""
        return f"not a file of tensors that can be read without running code from it{detail}"
    return f"{type(error).__name__}: {_first_line(error)}"


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = "; ".join(lines)
    return text if len(text) <= 300 else text[:297] + "..."


def _load(net: nn.Module, state: dict[str, Tensor], arch: str) -> None:
    """``net.load_state_dict(state, strict=True)``; a file that does not fit is one line naming it."""
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ValueError(f"weights='imagenet': {weight_file(arch)} does not fit {arch} ({_first_line(e)})") from None


def _bn_inception_state(state: dict[str, Tensor], net: nn.Module) -> dict[str, Tensor]:
    """The BN-Inception file with its BatchNorm vectors as (C,): some copies of the Caffe port store them as
    (1, C) (Multi-Similarity copies them with ``copy_``, which broadcasts; Proxy-Anchor squeezes them)."""
    own = net.state_dict()
    fixed = {}
    for key, value in state.items():
        if key in own and value.shape != own[key].shape and value.dim() > 1 and value.shape[0] == 1:
            value = value.squeeze(0)
        fixed[key] = value
    return fixed  # without the file's _metadata: BatchNorm then adds num_batches_tracked if the file lacks it


def _network(arch: str, weights: Weights) -> tuple[nn.Module, bool]:
    """The trunk of ``arch`` with ImageNet weights or random ones, and whether it is a ``BNInception``.

    Torchvision trunks are ``nn.Sequential`` of the network's own modules under their own names (``conv1``,
    ``layer1``...); BN-Inception is the whole network with ``last_linear`` removed (its encoder calls
    ``features``). Classifiers are dropped after loading, so that the file loads with ``strict=True`` and no
    unused parameter reaches the optimizer.
    """
    state = _read_weights(arch) if weights == "imagenet" else None
    if arch == "bninception":
        net = bn_inception.BNInception()
        if state is not None:
            _load(net, _bn_inception_state(state, net), arch)
        net.last_linear = nn.Identity()  # type: ignore[assignment]
        return net, True
    if arch == "resnet50":
        net = tv.resnet50(weights=None)
    else:
        # The weight file holds the auxiliary classifiers: build them to load it strictly, then drop them.
        net = tv.googlenet(
            weights=None, aux_logits=state is not None, transform_input=False, init_weights=state is None
        )
    if state is not None:
        _load(net, state, arch)
    return nn.Sequential(OrderedDict((name, getattr(net, name)) for name in _TRUNKS[arch])), False


class PretrainedBackbone(nn.Module):
    """x (N, 3, H, W) RGB in [0, 1] -> normalise -> trunk (N, F, h, w) -> global pooling (N, F)
    -> [BatchNorm1d without affine] -> [Linear F -> out_dim] -> (N, D).

    F is 2048 (ResNet-50) or 1024 (GoogLeNet, BN-Inception); D, the attribute ``embedding_dim``, is ``out_dim``
    when set, else F. The normalisation is the one the weights were trained with (``_FAMILIES``), as constant
    buffers: ImageNet mean/std for ResNet-50 (Boudiaf et al. normalise inside the model too), [-1, 1] for
    torchvision's GoogLeNet, BGR x 255 minus (104, 117, 128) for BN-Inception. Every operation keeps a
    channels-last input channels-last.

    Args:
        arch: ``resnet50``, ``googlenet`` or ``bninception``.
        input_shape: ``[3, H, W]``, from the framework; H and W at least the network's smallest input (ResNet-50:
            1, GoogLeNet: 15, BN-Inception: one of 31-38, 63-70, ..., 224, see ``bninception.feature_side``).
        weights: ``"imagenet"`` reads the ImageNet weights from torch's checkpoint cache
            (``WeightsNotFoundError`` if the file is not there); None keeps the random initialisation.
        frozen_batchnorm: every BatchNorm2d of the trunk stays in eval mode when the module is in train mode
            (running statistics fixed; Boudiaf et al.'s ``set_bn_eval``) and its scale and shift do not
            train (``requires_grad=False``).
        pooling: global pooling of the feature map: ``avg`` (Boudiaf et al.), ``max`` (Multi-Similarity's
            BN-Inception) or ``avgmax``, their sum (Proxy-Anchor's BN-Inception), which keeps the width F.
        out_dim: None: the pooled features are the embedding (Boudiaf et al.'s ResNet-50); an integer adds a
            linear layer to that width (DSCL's embedding layer; zero bias as Boudiaf et al.'s ``remap``). Named as
            ``TCLConv``'s: ``embedding_dim`` is the framework's name for what an encoder gives the heads, and no
            encoder takes a framework argument but ``input_shape``.
        feature_norm: a BatchNorm1d without affine parameters on the pooled features, before the embedding layer
            (Boudiaf et al.'s ``norm_layer='batch'``, for Cars, SOP and In-Shop).
    """

    def __init__(
        self,
        arch: Arch,
        input_shape: Sequence[int],
        weights: Weights = "imagenet",
        frozen_batchnorm: bool = True,
        pooling: Pooling = "avg",
        out_dim: int | None = None,
        feature_norm: bool = False,
    ):
        super().__init__()
        arch = checks.one_of("arch", arch, ARCHS)  # type: ignore[assignment]
        if weights is not None and weights != "imagenet":
            raise ValueError(f"weights must be 'imagenet' or null, got {weights!r}")
        self.pooling = checks.one_of("pooling", pooling, POOLINGS)
        if out_dim is not None and not out_dim >= 1:
            raise ValueError(f"out_dim must be >= 1 or null, got {out_dim}")
        family = _FAMILIES[arch]
        self.image_shape = _check_input_shape(arch, input_shape)
        self.arch, self.frozen_batchnorm = arch, bool(frozen_batchnorm)
        self.trunk, self._bn_inception = _network(arch, weights)

        # y = x[bgr] * scale + shift  ==  (x[bgr] * value_range - mean) / std, one fused multiply-add.
        mean = torch.tensor(family.mean, dtype=torch.float64)
        std = torch.tensor(family.std, dtype=torch.float64)
        self.bgr = family.bgr
        self.register_buffer("scale", (family.value_range / std).float().view(1, 3, 1, 1), persistent=False)
        self.register_buffer("shift", (-mean / std).float().view(1, 3, 1, 1), persistent=False)

        self.feature_norm = nn.BatchNorm1d(family.features, affine=False) if feature_norm else nn.Identity()
        if out_dim is None:
            self.embedding: nn.Module = nn.Identity()
            self.embedding_dim = family.features
        else:
            self.embedding = nn.Linear(family.features, int(out_dim))
            nn.init.zeros_(self.embedding.bias)
            self.embedding_dim = int(out_dim)

        if self.frozen_batchnorm:
            for module in self._batchnorms():
                module.requires_grad_(False)
        self.train()

    @property
    def embedding_layer(self) -> nn.Linear | None:
        """The linear embedding layer (``out_dim``), None without one: DSCL's "last layer"."""
        return self.embedding if isinstance(self.embedding, nn.Linear) else None

    def _batchnorms(self) -> list[nn.BatchNorm2d]:
        return [m for m in self.trunk.modules() if isinstance(m, nn.BatchNorm2d)]

    def train(self, mode: bool = True) -> PretrainedBackbone:
        """Set train or eval mode; with ``frozen_batchnorm`` the trunk's BatchNorm2d stay in eval mode."""
        super().train(mode)
        if self.frozen_batchnorm:
            for module in self._batchnorms():
                module.eval()
        return self

    def normalise(self, x: Tensor) -> Tensor:
        """x (N, 3, H, W) RGB in [0, 1] -> what the weights expect (N, 3, H, W), in the same memory format."""
        if self.bgr:
            x = x.flip(1)
        return torch.addcmul(self.shift, x, self.scale)

    def feature_map(self, x: Tensor) -> Tensor:
        """x (N, 3, H, W) RGB in [0, 1] -> the trunk's output (N, F, h, w); flat rows (N, 3 * H * W) are read
        as such images, as the other image encoders do."""
        if x.dim() != 4:
            x = x.reshape(x.shape[0], *self.image_shape)
        x = self.normalise(x)
        return self.trunk.features(x) if self._bn_inception else self.trunk(x)

    def pool(self, maps: Tensor) -> Tensor:
        """maps (N, F, h, w) -> (N, F) by ``pooling``."""
        if self.pooling == "avg":
            return maps.mean((2, 3))
        if self.pooling == "max":
            return maps.amax((2, 3))
        return maps.mean((2, 3)) + maps.amax((2, 3))

    def forward(self, x: Tensor) -> Tensor:
        """x (N, 3, H, W) RGB in [0, 1] -> (N, embedding_dim)."""
        return self.embedding(self.feature_norm(self.pool(self.feature_map(x))))


def _check_input_shape(arch: str, input_shape: Sequence[int]) -> tuple[int, int, int]:
    """(3, H, W) if the trunk of ``arch`` takes such images, else a one-line ``ValueError``."""
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3 or shape[0] != 3 or min(shape) < 1:
        raise ValueError(f"input_shape must be [3, H, W] (RGB images) for {arch}, got {list(shape)}")
    if arch == "bninception":
        fits = all(bn_inception.feature_side(side) for side in shape[1:])
        need = "H and W between 32k - 1 and 32k + 6 for some k >= 1 (31-38, 63-70, ..., 223-230)"
    else:
        fits = min(shape[1:]) >= _FAMILIES[arch].min_side
        need = f"H and W >= {_FAMILIES[arch].min_side}"
    if not fits:
        raise ValueError(f"input_shape {list(shape)} does not fit {arch}: it needs {need}")
    return shape  # type: ignore[return-value]


class ResNet50(PretrainedBackbone):
    """ResNet-50 (torchvision, IMAGENET1K_V1) as Boudiaf et al. 2020 use it: x (N, 3, H, W) -> (N, 2048).

    Defaults are Boudiaf et al.'s: frozen BatchNorm, average pooling, no embedding layer, no feature BatchNorm
    (their Cars, SOP and In-Shop runs set ``feature_norm``). Arguments: ``PretrainedBackbone``.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        weights: Weights = "imagenet",
        frozen_batchnorm: bool = True,
        pooling: Pooling = "avg",
        out_dim: int | None = None,
        feature_norm: bool = False,
    ):
        super().__init__("resnet50", input_shape, weights, frozen_batchnorm, pooling, out_dim, feature_norm)


class GoogLeNet(PretrainedBackbone):
    """GoogLeNet (torchvision, IMAGENET1K_V1, BatchNorm after every convolution, auxiliary classifiers dropped):
    x (N, 3, H, W) -> (N, 1024), or (N, out_dim) with an embedding layer. Arguments: ``PretrainedBackbone``.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        weights: Weights = "imagenet",
        frozen_batchnorm: bool = True,
        pooling: Pooling = "avg",
        out_dim: int | None = None,
        feature_norm: bool = False,
    ):
        super().__init__("googlenet", input_shape, weights, frozen_batchnorm, pooling, out_dim, feature_norm)


class BNInceptionEncoder(PretrainedBackbone):
    """BN-Inception (Cadene's port of the Caffe model, ``bn_inception-52deb4733.pth``) as DSCL, Multi-Similarity
    and MLRC use it: x (N, 3, H, W) -> (N, 1024), or (N, out_dim) with an embedding layer.
    Arguments: ``PretrainedBackbone``.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        weights: Weights = "imagenet",
        frozen_batchnorm: bool = True,
        pooling: Pooling = "avg",
        out_dim: int | None = None,
        feature_norm: bool = False,
    ):
        super().__init__("bninception", input_shape, weights, frozen_batchnorm, pooling, out_dim, feature_norm)


ENCODERS = {"resnet50": ResNet50, "googlenet": GoogLeNet, "bninception": BNInceptionEncoder}
