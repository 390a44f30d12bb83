"""Convolutional tensorized VAE (Sabanayagam et al. 2024, appendix C, Fig. 10: "CNN encoder and decoder").

The TVAE of ``heads.tvae`` with a convolutional shared trunk, the authors' ``VAE_CNN`` (repository
``mahalakshmi-sabanayagam/cluster_specific_representation``, ``src/models.py``; trained by ``train_tensorVAE`` /
``train_VAE`` with ``cnn_vae=True`` on Fashion-MNIST padded to 32 x 32, ``exp_tensor_vae.ipynb``):
- shared encoder g_Omega: three 3x3 convolutions, stride 2, padding 1, channels 1 -> 32 -> 64 -> 128, ReLU
  after each, flattened (32 x 32 -> 128 x 4 x 4 = 2048 features);
- per-cluster heads g^mu_j, g^sigma_j (2048 -> latent) and f_Phi_j (latent -> 2048), stacked tensors applied in
  batched matmuls (``heads.stacked``), as in the MLP TVAE;
- shared decoder f_Theta: the 2048 features as 128 x 4 x 4, three 3x3 transposed convolutions, stride 2,
  padding 1, channels 128 -> 64 -> 32 -> 1, ReLU between them, linear output (a sigmoid for BCE, in the loss).

Cluster j's VAE reads ``x - c_j`` (through a sigmoid for BCE) as an image; one cluster is the authors' standard
CNN VAE (``VAE_CNN`` without tensorization), which reads ``x`` itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from clusterable import checks
from clusterable.heads.tvae import ClusterSpecificVAE, Recon
from clusterable.models.images import image_shape


def _halved(size: int) -> int:
    """Output side of a 3x3 convolution with stride 2 and padding 1: ceil(size / 2)."""
    return (size - 1) // 2 + 1


class TensorizedConvVAE(ClusterSpecificVAE):
    """Cluster-specific VAEs with a shared convolutional encoder and decoder (a clustering head).

    Losses, sampling, eq. 2 and the Lloyd step: ``heads.tvae.ClusterSpecificVAE``. Inputs arrive flattened
    (N, d) (the identity encoder) and are read as images of ``input_shape`` (``[C, H, W]``, ``[H, W]`` or a
    flat ``[s*s]``). Any image size works: each transposed convolution's ``output_padding`` (1 for an even side,
    0 for an odd one) gives back the size its convolution halved, so 32 x 32 inputs get the authors' layers
    exactly (``output_padding=1`` everywhere) and 28 x 28 ones come back 28 x 28 (28 -> 14 -> 7 -> 4 -> 7 -> 14
    -> 28).

    Args:
        input_shape: shape of one input image (paper: 32 x 32 Fashion-MNIST, ``[1024]`` flat or ``[1, 32, 32]``).
        num_classes: the dataset's number of classes: the number of clusters C unless ``num_clusters`` is set.
        channels: output channels of the shared convolutions (the decoder mirrors them; authors: 32, 64, 128).
        latent_dim: h, the latent dimension (paper: 2).
        kl_weight: weight of the KL term, >= 0 (our ``kl_weight = 2 reg`` of the authors' code).
        recon: ``"bce"`` (sigmoid output, Fig. 10) or ``"mse"`` (linear output).
        seed: ``random_state`` of the k-means++ seeding (authors: 20).
        num_clusters: C when it is not ``num_classes`` (null: the classes); 1 is the authors' standard CNN VAE.
    """

    score_rows = 512  # a whole split under all C clusters runs C x rows images through the convolutions

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        channels: Sequence[int] = (32, 64, 128),
        latent_dim: int = 2,
        kl_weight: float = 0.1,
        recon: Recon = "bce",
        seed: int = 20,
        num_clusters: int | None = None,
    ):
        super().__init__(input_shape, num_classes, latent_dim, kl_weight, recon, seed, num_clusters)
        channels = checks.widths("channels", channels)
        self.image_shape = image_shape(input_shape)
        in_channels, height, width = self.image_shape
        sizes = [(height, width)]
        for _ in channels:
            sizes.append((_halved(sizes[-1][0]), _halved(sizes[-1][1])))
        self.feature_shape = (channels[-1], *sizes[-1])  # (128, 4, 4) for 32 x 32 inputs
        widths = [in_channels, *channels]
        encoder: list[nn.Module] = []
        for a, b in zip(widths[:-1], widths[1:], strict=True):
            encoder += [nn.Conv2d(a, b, 3, stride=2, padding=1), nn.ReLU()]
        self.encoder = nn.Sequential(*encoder, nn.Flatten())  # g_Omega
        self._build_heads(math.prod(self.feature_shape))
        decoder: list[nn.Module] = []
        # Layer k undoes convolution k (from the last): sizes[k + 1] -> sizes[k].
        for k in reversed(range(len(channels))):
            (h_out, w_out), (h_in, w_in) = sizes[k], sizes[k + 1]
            padding = (h_out - 2 * h_in + 1, w_out - 2 * w_in + 1)  # 1 for an even side, 0 for an odd one
            decoder.append(nn.ConvTranspose2d(widths[k + 1], widths[k], 3, stride=2, padding=1, output_padding=padding))
            if k > 0:
                decoder.append(nn.ReLU())
        self.decoder = nn.Sequential(*decoder)  # f_Theta

    def encode_shared(self, x: torch.Tensor) -> torch.Tensor:
        """Model-space inputs (..., d) -> flattened convolutional features (..., 2048)."""
        lead = x.shape[:-1]
        return self.encoder(x.reshape(-1, *self.image_shape)).reshape(*lead, -1)

    def decode_shared(self, h: torch.Tensor) -> torch.Tensor:
        """Features (..., 2048) -> the decoder's linear output, flattened (..., d)."""
        lead = h.shape[:-1]
        return self.decoder(h.reshape(-1, *self.feature_shape)).reshape(*lead, self.input_dim)
