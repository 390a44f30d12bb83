"""Loss heads: one file per loss; each is an ``nn.Module`` ``head(embeddings, labels, **batch) -> dict``."""

from clusterable.heads.cce import CCELoss
from clusterable.heads.center import CenterLoss
from clusterable.heads.cosine_corel import CosineCOREL
from clusterable.heads.gaussian_corel import GaussianCOREL

__all__ = ["CCELoss", "CenterLoss", "CosineCOREL", "GaussianCOREL"]
