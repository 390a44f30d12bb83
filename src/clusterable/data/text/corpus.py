"""A tokenised text corpus: what a text reader returns and a text datamodule holds.

Documents are rows of token ids over ``vocab``, padded with ``PAD`` (id 0) to a common length; id 1 is ``UNK``
(a word the reader kept but that has no word vector is still its own id: the vectors decide what is unknown).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
# Number tokens of Kenyon-Dean et al. 2019's AGNews preprocessing (supplement): each gets its own random vector.
SPECIAL_TOKENS = ("MONEY", "YEAR", "NUMBER")


@dataclass
class Corpus:
    """``splits``: ``{"train", "val", "test"}`` -> ``{"inputs": (N, L) long token ids (PAD_ID-padded), "labels":
    (N,) long}``; ``vocab``: id -> token, ``vocab[PAD_ID] == PAD`` and ``vocab[UNK_ID] == UNK``; ``notes``: what the
    reader records about the build (lemmatiser used, documents truncated or emptied), copied into the run."""

    splits: dict[str, dict[str, torch.Tensor]]
    vocab: list[str]
    notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.vocab[:2] != [PAD, UNK]:
            raise ValueError(f"vocab must start with {PAD!r}, {UNK!r}, got {self.vocab[:2]}")
