"""COREL's text encoders (Kenyon-Dean et al. 2019, "Experimental design"): over frozen pretrained word vectors,
a mean of the document's word vectors into an FFNN, and Kim (2014)'s one-dimensional CNN.

Inputs are token ids (N, L) long, padded with ``PAD_ID`` (0) (``clusterable.data.text.corpus``); row i of
``word_vectors`` (V, D) is word i's vector (``clusterable.data.text.glove.read_glove``). Padding never counts: it
enters no mean, and no convolution window made of padding alone can win a max-pool, so a document embeds the same
alone as in a padded batch.

The paper: "dropout [rate not published] following the input and between each fully connected layer", LeakyReLU
everywhere except the CNN's convolutions (ReLU), two fully connected layers of a width it does not publish. The
vectors are not fine-tuned: they are a buffer, not a parameter (no optimizer sees them). The buffer is not saved
in checkpoints (``persistent=False``): it is data, rebuilt identically from the dataset's cached vectors by every
run, and 50,000 words x 300 floats would add 60 MB to the checkpoint of every cell of a sweep; a small persistent
digest of it refuses a checkpoint trained on other vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clusterable import checks
from clusterable.data.text.corpus import PAD_ID
from clusterable.models.ffnn import FFNN, leaky_layers


class _WordVectors(nn.Module):
    """Holds the frozen ``word_vectors`` (V, D) float32 (PAD's row set to zeros) and checks token-id inputs."""

    # Buffers every process builds identically from the same files and seed: under DDP they are not broadcast from
    # rank 0 at every forward (AGNews' vectors are ~60 MB). RepresentationModule collects these names.
    ddp_constant_buffers = ("word_vectors", "word_vectors_digest")

    def __init__(self, word_vectors: Tensor, input_shape: Sequence[int]):
        super().__init__()
        is_matrix = isinstance(word_vectors, Tensor) and word_vectors.dim() == 2
        if not (is_matrix and word_vectors.is_floating_point()):
            kind = type(word_vectors).__name__
            got = list(word_vectors.shape) if isinstance(word_vectors, Tensor) else kind
            raise ValueError(f"word_vectors must be a (vocabulary, dimension) float tensor, got {got}")
        if len(word_vectors) <= PAD_ID + 1 or word_vectors.shape[1] < 1:
            raise ValueError(f"word_vectors must hold PAD, UNK and a dimension >= 1, got {list(word_vectors.shape)}")
        shape = checks.widths("input_shape", input_shape)
        if len(shape) != 1:
            raise ValueError(f"input_shape must be [L], the length of a text dataset's documents, got {shape}")
        # A copy: the datamodule's tensor stays as it is; padding is zeros whatever the reader gave it.
        vectors = word_vectors.detach().to(torch.float32).clone()
        vectors[PAD_ID] = 0.0
        self.register_buffer("word_vectors", vectors, persistent=False)
        self.register_buffer("word_vectors_digest", _digest(vectors))
        self.word_dim = int(vectors.shape[1])

    def _load_from_state_dict(
        self,
        state_dict: dict[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing: list[str],
        unexpected: list[str],
        errors: list[str],
    ) -> None:
        # The vectors are not in the checkpoint (persistent=False); their digest is, and must be this model's.
        saved = state_dict.get(prefix + "word_vectors_digest")
        if saved is not None and not torch.allclose(saved.to(self.word_vectors_digest), self.word_vectors_digest):
            errors.append(
                f"{type(self).__name__}: the checkpoint was trained on other word vectors (shape, sums) "
                f"{saved.tolist()} than this model's {self.word_vectors_digest.tolist()}"
            )
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

    def _check(self, x: Tensor) -> Tensor:
        """``x`` (N, L) integer token ids, as a long tensor; one ValueError line otherwise (no device sync)."""
        if x.dim() != 2 or x.dtype not in (torch.long, torch.int32, torch.int16, torch.uint8):
            raise ValueError(
                f"{type(self).__name__} reads token ids (N, L) of a text dataset, got a {x.dtype} tensor of shape "
                f"{list(x.shape)}"
            )
        return x.long()


def _digest(vectors: Tensor) -> Tensor:
    """(4,) float32: rows, columns, sum and sum of squares of ``vectors`` (summed in float64): tells two vector
    tables apart. float32, not float64, so that the module moves to every device (MPS has no float64)."""
    v = vectors.double()
    return torch.tensor([*vectors.shape, float(v.sum()), float((v * v).sum())], dtype=torch.float32)


class TextFFNN(_WordVectors):
    """x (N, L) token ids -> mean of the document's word vectors (N, D) -> dropout -> ``FFNN`` -> (N, hidden[-1]).

    The mean is over the non-PAD tokens (``embedding_bag`` with ``padding_idx``: a document of n words divides
    by n); a document of padding alone embeds as zeros. The FFNN is ``clusterable.models.FFNN`` on D inputs:
    [Linear -> LeakyReLU -> Dropout] per hidden width, so dropout follows the input and every fully connected
    layer (the last one before the head's classifier, as Kim 2014 drops out the layer before the softmax).

    Args:
        word_vectors: (V, D) the dataset's word vectors (``dataset.word_vectors``; the framework passes them).
        input_shape: ``[L]``, the documents' padded length (any L works; checked to be a text dataset's).
        hidden: widths of the fully connected layers, each >= 1; the last is ``embedding_dim``.
        dropout: rate of every dropout, in [0, 1).
        negative_slope: LeakyReLU slope, >= 0.
        linear_output: the last layer without its activation and dropout (a linear embedding layer).
    """

    def __init__(
        self,
        word_vectors: Tensor,
        input_shape: Sequence[int],
        hidden: Sequence[int] = (500, 500),
        dropout: float = 0.5,
        negative_slope: float = 0.01,
        linear_output: bool = False,
    ):
        super().__init__(word_vectors, input_shape)
        dropout = checks.dropout(dropout)
        self.input_dropout = nn.Dropout(dropout)
        self.ffnn = FFNN((self.word_dim,), hidden, negative_slope, dropout, linear_output)
        self.embedding_dim = self.ffnn.embedding_dim

    @property
    def embedding_layer(self) -> nn.Linear:
        """The last Linear layer (``trainable: embedding_layer``)."""
        return self.ffnn.embedding_layer

    def forward(self, x: Tensor) -> Tensor:
        """x (N, L) token ids -> (N, embedding_dim)."""
        mean = F.embedding_bag(self._check(x), self.word_vectors, mode="mean", padding_idx=PAD_ID)  # (N, D)
        return self.ffnn(self.input_dropout(mean))


class TextCNN(_WordVectors):
    """x (N, L) token ids -> word vectors (N, L, D) -> dropout -> per width w: Conv1d(D -> channels, w) -> ReLU ->
    max over time -> concatenated (N, channels * len(widths)) -> 2 x [Linear -> LeakyReLU -> Dropout] -> (N, D').

    Kim (2014)'s CNN for sentence classification, as COREL uses it: filter widths 3, 4 and 5 words side by side
    (each over the word vectors), ReLU, max-pooling over time. Convolutions are wide, as in Kim's code (each
    document padded with w - 1 zero vectors on both sides), and only windows that hold at least one word compete
    in the max-pool: a document shorter than the widest filter still has windows (its words among padding), and
    one of padding alone embeds its pooled features as zeros. Padding is zero vectors at every position, so a
    window's value does not depend on how far the batch was padded.

    Args:
        word_vectors: (V, D) the dataset's word vectors (``dataset.word_vectors``; the framework passes them).
        input_shape: ``[L]``, the documents' padded length (any L works; checked to be a text dataset's).
        widths: filter widths in words, each >= 1 (Kim and COREL: 3, 4, 5).
        channels: filters per width (feature maps; Kim: 100; COREL does not publish it).
        hidden: widths of the fully connected layers, each >= 1; the last is ``embedding_dim``.
        dropout: rate of every dropout (on the word vectors and after each fully connected layer), in [0, 1).
        negative_slope: LeakyReLU slope of the fully connected layers, >= 0.
        linear_output: the last layer without its activation and dropout (a linear embedding layer).
    """

    def __init__(
        self,
        word_vectors: Tensor,
        input_shape: Sequence[int],
        widths: Sequence[int] = (3, 4, 5),
        channels: int = 100,
        hidden: Sequence[int] = (500, 500),
        dropout: float = 0.5,
        negative_slope: float = 0.01,
        linear_output: bool = False,
    ):
        super().__init__(word_vectors, input_shape)
        self.widths = checks.widths("widths", widths)
        channels = int(checks.at_least("channels", channels, 1))
        hidden = checks.widths("hidden", hidden)
        dropout = checks.dropout(dropout)
        negative_slope = float(checks.at_least("negative_slope", negative_slope, 0))
        if not isinstance(linear_output, bool):
            raise ValueError(f"linear_output must be true or false, got {linear_output!r}")
        self.input_dropout = nn.Dropout(dropout)
        self.convs = nn.ModuleList(nn.Conv1d(self.word_dim, channels, w, padding=w - 1) for w in self.widths)
        layers = leaky_layers(channels * len(self.widths), hidden, negative_slope, dropout)
        if linear_output:  # drop what follows the last Linear: its activation (and dropout)
            last = max(i for i, m in enumerate(layers) if isinstance(m, nn.Linear))
            layers = layers[: last + 1]
        self.fc = nn.Sequential(*layers)
        self.embedding_dim = hidden[-1]

    @property
    def embedding_layer(self) -> nn.Linear:
        """The last Linear layer (``trainable: embedding_layer``)."""
        return [m for m in self.fc if isinstance(m, nn.Linear)][-1]

    def features(self, x: Tensor) -> Tensor:
        """x (N, L) token ids -> (N, channels * len(widths)): the max-pooled convolution features."""
        x = self._check(x)
        words = (x != PAD_ID).unsqueeze(1).to(self.word_vectors.dtype)  # (N, 1, L)
        # (N, D, L); PAD's row is zeros, so padding is the zero vector wherever it stands.
        embedded = self.input_dropout(F.embedding(x, self.word_vectors)).transpose(1, 2)
        pooled = []
        for conv, w in zip(self.convs, self.widths, strict=True):
            out = torch.relu(conv(embedded))  # (N, C, L + w - 1): window t covers positions t - w + 1 .. t
            # Window t holds a word iff one of its w positions does: a max over the padded word mask.
            has_word = F.max_pool1d(F.pad(words, (w - 1, w - 1)), w, stride=1)  # (N, 1, L + w - 1)
            # ReLU outputs are >= 0, so a window set to 0 never beats a real one: the max is over the windows that
            # hold a word, and 0 for a document of padding alone.
            pooled.append((out * has_word).amax(dim=2))
        return torch.cat(pooled, dim=1)

    def forward(self, x: Tensor) -> Tensor:
        """x (N, L) token ids -> (N, embedding_dim)."""
        return self.fc(self.features(x))
