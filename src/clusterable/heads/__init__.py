"""Loss heads (config group ``loss``, ``src/clusterable/conf/loss``): ``nn.Module``s
``head(embeddings, labels, **batch) -> {part: scalar}``.

One file per head, and the contracts they satisfy (``clusterable.contracts``):
- classifying heads of COREL (Kenyon-Dean et al. 2019) and its baseline: ``cce``, ``center``, ``cosine_corel``,
  ``gaussian_corel``;
- the autoencoders and cluster-specific models of Sabanayagam et al. 2024: ``linear_ae`` (AE1-AE3),
  ``tensorized_ae`` (TAE1, TAE2, PTAE), ``tvae``, ``tcl``, ``trbm``; the last four are clustering heads built on
  ``cluster_state.ClusterSpecificHead`` with per-cluster layers from ``stacked``;
- the metric-learning heads: ``ce``, ``pce`` (Boudiaf et al. 2020), ``pml`` (any pytorch-metric-learning loss),
  ``dscl`` (Law et al. 2017);
- the semi-supervised heads of Safir 2022 on ``semi_supervised.SemiSupervisedHead``: ``dml``, ``dml_ae``,
  ``dml_prior`` and ``mvae``, with their priors in ``priors``.
"""

from clusterable.heads.cce import CCELoss
from clusterable.heads.center import CenterLoss
from clusterable.heads.cosine_corel import CosineCOREL
from clusterable.heads.gaussian_corel import GaussianCOREL

__all__ = ["CCELoss", "CenterLoss", "CosineCOREL", "GaussianCOREL"]
