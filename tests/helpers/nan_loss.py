"""A loss head that turns NaN from a given epoch on: forces the non-finite-loss path through the real pipeline."""

import torch

from clusterable.heads import CCELoss


class NaNAfter(CCELoss):
    def __init__(self, epoch: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.nan_epoch = epoch

    def forward(self, embeddings, labels, epoch: int = 0, **batch):
        out = super().forward(embeddings, labels, **batch)
        if epoch >= self.nan_epoch:
            out["loss"] = out["loss"] * torch.tensor(float("nan"))
        return out
