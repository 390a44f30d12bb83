"""Tensorized restricted Boltzmann machine TRBM (Sabanayagam et al. 2024, §VI).

One Bernoulli RBM per cluster j, with energy ``E_j(v, h) = -v.b_j - h.c_j - v^T W_j h``, stored as stacked
tensors ``W`` (C, d, h), visible biases ``b`` (C, d) and hidden biases ``c`` (C, h). Every computation runs
all clusters with one batched matmul and picks each point's cluster afterwards (``heads.stacked``): no loop over
clusters. Pair this head with the identity encoder (``src/clusterable/conf/model/identity.yaml``) and inputs in
[0, 1].

With ``num_clusters=1`` the same code is the authors' standard RBM (the paper's Fig. 13): one RBM, its centre at
the origin, nothing to assign, trained on binary draws of the raw inputs as ``train_RBM`` feeds it (repository
``mahalakshmi-sabanayagam/cluster_specific_representation``, ``src/train.py``: ``data.bernoulli()``; their
tensorised ``tensorised_rbm_loss`` in ``src/loss.py`` feeds the grey values instead).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from clusterable import checks
from clusterable.heads.cluster_state import CHUNK, ClusterSpecificHead
from clusterable.heads.stacked import apply_all, pick


def _bernoulli(p: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    # Explicit uniforms (not torch.bernoulli) so that a reference can replay the same draws row by row.
    return (torch.rand(p.shape, generator=generator, dtype=p.dtype, device=p.device) < p).to(p.dtype)


class TensorizedRBM(ClusterSpecificHead):
    """Cluster-specific Bernoulli RBMs with a hard assignment S of the training set (a clustering head).

    Free energy (the negative unnormalised log-likelihood, ``p_j(v) = exp(-F_j(v)) / A_j``):
        ``F_j(v) = -v.b_j - sum_k log(1 + exp(c_jk + (v W_j)_k))``
    Training (TRBM objective: maximise ``sum_i S_ij log p_j(x_i)``) by contrastive divergence CD-k: from each
    data point ``v`` run k block-Gibbs steps ``h ~ p_j(h|v), v ~ p_j(v|h)`` under its cluster's RBM to get
    ``v_model``; the surrogate ``mean_i F_j(v_i) - F_j(v_model_i)`` with ``v_model`` detached has exactly the
    CD-k gradient ``-(<v p(h|v)>_data - <v p(h|v)>_model)`` (likewise for the biases), so Adam on it performs
    CD-k.

    By default (``binarize`` off) the tensorized model uses the inputs as Bernoulli probabilities, not
    binarised: the data term is the free energy of the grey values (deterministic), while the Gibbs chain
    samples binary states. The authors' tensorised code
    (repository ``mahalakshmi-sabanayagam/cluster_specific_representation``, ``src/loss.py``,
    ``tensorised_rbm_loss``) also skips the binarisation (it feeds ``x - c_j``; we do not centre, as the
    visible biases play that role and a Bernoulli RBM needs v in [0, 1]). The paper gives each cluster its own
    visible bias (``a_j`` in the energy); the authors' code shares one.

    Assignment (Lloyd step and eq. 2): ``argmin_j F_j(x)``, the cluster whose RBM gives the point the lowest
    free energy. The log partition functions ``log A_j`` are left out (intractable: a sum over 2^h states; the
    authors leave them out too), so this compares unnormalised likelihoods.

    One cluster (``num_clusters=1``) is the standard RBM: every point in it, nothing to assign. With
    ``binarize`` (by default on for the standard RBM only, as in the authors' code) the data term's visible
    units are a fresh Bernoulli draw of the inputs at every step, ``v_data ~ Bernoulli(x)``, and the chain
    starts from that draw: the authors' ``train_RBM``. Evaluation (``reconstruct``, ``embed``, the free energies
    of the assignment) always reads the grey values, for both models.

    Args:
        input_shape: shape of one input; d = prod(input_shape) visible units.
        num_classes: the dataset's number of classes: C unless ``num_clusters`` is set.
        hidden: h, hidden units per RBM (paper: 500).
        k: Gibbs steps of CD-k (paper: 1).
        seed: ``random_state`` of the k-means++ seeding (authors: 20).
        num_clusters: C when it is not ``num_classes``; 1 is the standard RBM.
        binarize: train on Bernoulli draws of the inputs (True) or on the grey values (False); None: as the
            authors' code, True for the standard RBM and False for the tensorized one.
    """

    loss_parts = ("loss", "fe_data", "fe_model", "recon")

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        hidden: int = 500,
        k: int = 1,
        seed: int = 20,
        num_clusters: int | None = None,
        binarize: bool | None = None,
    ):
        super().__init__(num_classes, seed, num_clusters)
        d, c = checks.input_dim(input_shape), self.num_clusters
        self.hidden = int(checks.at_least("hidden", hidden, 1))
        self.k = int(checks.at_least("k", k, 1))
        self.binarize = self.standard if binarize is None else bool(binarize)
        self.input_dim = d
        # N(0, 0.01^2) weights and zero biases, as the authors' code (and Hinton's practical guide).
        self.weight = nn.Parameter(0.01 * torch.randn(c, d, self.hidden))
        self.visible_bias = nn.Parameter(torch.zeros(c, d))
        self.hidden_bias = nn.Parameter(torch.zeros(c, self.hidden))

    @property
    def standard(self) -> bool:
        """One cluster: the standard RBM."""
        return self.state.standard

    def _visible(self, x: torch.Tensor) -> torch.Tensor:
        v = x.flatten(1)
        if v.shape[1] != self.input_dim:
            raise ValueError(f"inputs must have {self.input_dim} features once flattened, got {v.shape[1]}")
        lo, hi = float(v.min()), float(v.max())
        if lo < 0 or hi > 1:
            raise ValueError(
                "TensorizedRBM needs inputs in [0, 1] (Bernoulli visible units), got values in "
                f"[{lo:g}, {hi:g}]; scale the data (e.g. pixels / 255)"
            )
        return v

    # ---- the C RBMs ----------------------------------------------------------------------------------------

    def _free_energy(self, v: torch.Tensor) -> torch.Tensor:
        visible = v @ self.visible_bias.T  # (N, C)
        # (N, d) @ (C, d, h) broadcasts to (C, N, h): every cluster's hidden pre-activations at once.
        hidden = F.softplus(apply_all(v, self.weight, self.hidden_bias)).sum(-1)
        return -visible - hidden.T

    def free_energy(self, x: torch.Tensor) -> torch.Tensor:
        """``F_j(x_i)`` (N, C) for inputs ``x`` (N, d) in [0, 1]."""
        return self._free_energy(self._visible(x))

    per_cluster_loss = free_energy

    def hidden_probs(self, v: torch.Tensor, cluster: torch.Tensor) -> torch.Tensor:
        """``p_j(h = 1 | v) = sigmoid(c_j + v W_j)`` (N, h) under each point's cluster ``cluster`` (N,)."""
        return torch.sigmoid(pick(apply_all(v, self.weight, self.hidden_bias), cluster))

    def visible_probs(self, h: torch.Tensor, cluster: torch.Tensor) -> torch.Tensor:
        """``p_j(v = 1 | h) = sigmoid(b_j + W_j h)`` (N, d) under each point's cluster ``cluster`` (N,)."""
        return torch.sigmoid(pick(apply_all(h, self.weight.transpose(1, 2), self.visible_bias), cluster))

    @torch.no_grad()
    def gibbs(
        self,
        v: torch.Tensor,
        cluster: torch.Tensor,
        k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """k block-Gibbs steps from ``v`` (N, d) under each point's RBM; returns the binary ``v_k`` (N, d).

        Each step draws ``h`` (N, h) then ``v`` (N, d) from uniforms of ``generator`` (on ``v``'s device).
        """
        for _ in range(self.k if k is None else k):  # a loop over Gibbs steps: each needs the previous one
            h = _bernoulli(self.hidden_probs(v, cluster), generator)
            v = _bernoulli(self.visible_probs(h, cluster), generator)
        return v

    def forward(
        self, embeddings: torch.Tensor, labels: torch.Tensor, index: torch.Tensor | None = None, **batch
    ) -> dict[str, torch.Tensor]:
        """CD-k surrogate of the batch under the stored assignment.

        ``embeddings`` (N, d) flattened inputs in [0, 1]; ``index`` (N,) their rows in the training split,
        which select their clusters in S (without ``index``: the lowest free energy). ``v_data`` is the inputs,
        or with ``binarize`` a Bernoulli draw of them (uniforms of the global generator, drawn before the
        chain's). Returns ``loss`` = ``mean F(v_data) - F(v_model)``, the two mean free energies ``fe_data``,
        ``fe_model`` and ``recon``, the squared error of the one-step mean-field reconstruction of the inputs,
        summed over pixels and averaged over the batch (the usual RBM progress monitor).
        """
        v = self._visible(embeddings)
        cluster = self.batch_clusters(v, index)
        v_data = _bernoulli(v, None) if self.binarize else v
        v_model = self.gibbs(v_data, cluster)
        energies = self._free_energy(torch.cat([v_data, v_model])).gather(1, cluster.repeat(2).unsqueeze(1)).squeeze(1)
        fe_data, fe_model = energies.chunk(2)
        with torch.no_grad():
            recon = (self.visible_probs(self.hidden_probs(v, cluster), cluster) - v).pow(2).sum(1).mean()
        return {
            "loss": (fe_data - fe_model).mean(),
            "fe_data": fe_data.mean(),
            "fe_model": fe_model.mean(),
            "recon": recon,
        }

    # ---- clustering-head contract (ClusterSpecificHead): k-means++ and centres on the inputs ----------------

    def cluster_points(self, embeddings: torch.Tensor, **split) -> torch.Tensor:
        """The visible units (N, d) in [0, 1], as the authors' code seeds and centres on the inputs."""
        return self._visible(embeddings)

    @torch.no_grad()
    def cluster_losses(self, embeddings: torch.Tensor, **split) -> torch.Tensor:
        """``F_j(x_i)`` (N, C) in row blocks of ``CHUNK``: the RBM with the lowest free energy takes the point."""
        return torch.cat([self._free_energy(block) for block in self._visible(embeddings).split(CHUNK)])

    @torch.no_grad()
    def embed(self, embeddings: torch.Tensor, **batch) -> torch.Tensor:
        """Hidden probabilities ``p(h = 1 | x)`` (N, h) under each point's eq.-2 cluster."""
        return self.hidden_probs(self._visible(embeddings), self.assign(embeddings))

    @torch.no_grad()
    def reconstruct(self, x: torch.Tensor, cluster: int | torch.Tensor | None = None) -> torch.Tensor:
        """One mean-field Gibbs step ``p(v | p(h | x))`` (N, d) (the paper's Fig. 5).

        ``cluster``: None = each point's eq.-2 cluster; an int = that cluster's RBM for every point (Fig. 5
        shows each cluster's reconstructions of all inputs); or a tensor (N,) of clusters.
        """
        v = self._visible(x)
        if cluster is None:
            cluster = self.assign(v)
        elif isinstance(cluster, int):
            if not 0 <= cluster < self.num_clusters:
                raise ValueError(f"cluster must be in [0, {self.num_clusters - 1}], got {cluster}")
            cluster = torch.full((v.shape[0],), cluster, dtype=torch.long, device=v.device)
        return self.visible_probs(self.hidden_probs(v, cluster), cluster)
