"""Loss heads: one file per loss; each is an ``nn.Module`` ``head(embeddings, labels, **batch) -> dict``."""

from clusterable.losses.cce import CCELoss
from clusterable.losses.center import CenterLoss
from clusterable.losses.cosine_corel import CosineCOREL
from clusterable.losses.gaussian_corel import GaussianCOREL

__all__ = ["CCELoss", "CenterLoss", "CosineCOREL", "GaussianCOREL"]
