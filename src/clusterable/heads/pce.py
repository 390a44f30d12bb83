"""The pairwise cross-entropy (PCE) of Boudiaf et al. (2020, "A unifying mutual information view of metric learning:
cross-entropy vs. pairwise losses", ECCV, Proposition 1): the pairwise loss that minimising the cross-entropy
approximately bound-optimises, computed over the pairs of a batch."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from clusterable import checks


class PairwiseCrossEntropy(nn.Module):
    """PCE, Boudiaf et al. 2020, eq. 12 (Proposition 1), over the n labelled samples of a batch:

    ``L = T + C`` with the tightness part ``T = -1 / (2 lam n^2) sum_i sum_{j: y_j = y_i} z_i . z_j`` and the
    contrastive part ``C = 1/n sum_i log sum_k exp(1 / (lam n) sum_j p_jk z_i . z_j) - 1 / (2 lam) sum_k ||c^s_k||^2``,
    where ``c^s_k = 1/n sum_i p_ik z_i`` is the soft mean of class k. (The paper's prose counts both terms of ``C``
    as its contrastive part, as does its Table 2; Table 2 prints the soft-mean term's coefficient as
    ``1 / (2 K^2 lam^2)``, but eq. 12 and its derivation from eq. 13 give ``1 / (2 lam)``, which we follow.)

    The proof replaces the classifier's weights by the optimum of each half of eq. 13; the probabilities ``p_ik``
    are "the softmax probability of point z_i belonging to class k". A PCE head has no classifier of its own, so
    ``p`` comes from the classifier whose weights are replaced by the class means as eq. 13's ``f_1`` has them,
    ``theta_k = argmin f_1 = 1 / (lam n) sum_{j: y_j = k} z_j``:
    ``p_ik = softmax_k(1 / (lam n) sum_{j: y_j = k} z_i . z_j)`` (our reading; the paper leaves the classifier
    behind ``p`` open). Everything is then a function of the batch's pairwise dot products, differentiated
    through ``p`` too.

    ``lam`` (the paper's lambda > 0) makes both halves of eq. 13 well posed; the paper says it depends on the
    encoder and needs the eigenvalues of a d x d matrix at every step. With ``lam=None`` it is the largest
    eigenvalue of the batch's second moment ``1/n sum_i z_i z_i^T`` (D x D), computed per batch and detached (a
    constant of the bound): with it ``f_2`` of eq. 13 is concave in theta, since the Hessian of its log-sum-exp
    term, ``1/n sum_i (diag(p_i) - p_i p_i^T) (x) z_i z_i^T``, is at most ``I_K (x) 1/n sum_i z_i z_i^T`` (our
    derivation; the paper's supplement, which gives its choice, was not available to us).

    Unlabelled samples (label -1) are left out of every sum (n counts the labelled ones); a batch without any
    gives 0 with a gradient path.

    Args:
        num_classes: K, at least 2.
        lam: lambda > 0, or None for the per-batch largest eigenvalue above.
    """

    loss_parts = ("loss", "tightness", "contrastive")

    def __init__(self, num_classes: int, lam: float | None = None):
        super().__init__()
        self.num_classes = int(checks.at_least("num_classes", num_classes, 2))
        self.lam = None if lam is None else checks.positive("lam", lam)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor, **batch) -> dict[str, torch.Tensor]:
        """``loss = tightness + contrastive`` of eq. 12; embeddings (N, D), labels (N,) long (-1: unlabelled).

        Computed in float32 at least, autocast off: the parts are differences of sums over all pairs, which bfloat16
        matrix products would blur, and the eigenvalue solver has no half-precision kernel.
        """
        with torch.autocast(embeddings.device.type, enabled=False):
            return self._parts(embeddings.to(torch.promote_types(embeddings.dtype, torch.float32)), labels)

    def _parts(self, embeddings: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """The parts of eq. 12 from embeddings (N, D) in float32 or float64 and labels (N,)."""
        labelled = (labels >= 0).to(embeddings.dtype)  # (N,)
        # one-hot labels with unlabelled rows zeroed: masks keep shapes static (no host sync)
        onehot = F.one_hot(labels.clamp(min=0), self.num_classes).to(embeddings.dtype) * labelled[:, None]
        n = labelled.sum().clamp(min=1)
        z = embeddings * labelled[:, None]  # (N, D): unlabelled rows contribute to no sum
        lam = self._lambda(z, n) if self.lam is None else self.lam
        # sums over pairs through class sums: sum_i sum_{j: y_j = y_i} z_i . z_j = sum_k ||S_k||^2, S = Y^T Z (K, D)
        class_sums = onehot.T @ z
        tightness = -class_sums.pow(2).sum() / (2 * lam * n**2)
        # p_ik = softmax_k(1/(lam n) sum_{j: y_j = k} z_i . z_j) = softmax_k(z_i . S_k / (lam n)); masked rows below
        p = torch.softmax(z @ class_sums.T / (lam * n), dim=1) * labelled[:, None]  # (N, K)
        soft_means = p.T @ z / n  # (K, D): c^s_k = 1/n sum_j p_jk z_j
        # 1/(lam n) sum_j p_jk z_i . z_j = z_i . c^s_k / lam
        lse = torch.logsumexp(z @ soft_means.T / lam, dim=1)  # (N,)
        contrastive = (lse * labelled).sum() / n - soft_means.pow(2).sum() / (2 * lam)
        return {"loss": tightness + contrastive, "tightness": tightness, "contrastive": contrastive}

    @staticmethod
    @torch.no_grad()
    def _lambda(z: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        """Largest eigenvalue of ``1/n sum_i z_i z_i^T`` from masked embeddings z (N, D); tiny positive if z = 0."""
        top = torch.linalg.eigvalsh(z.T @ z / n)[-1]
        return top.clamp(min=torch.finfo(z.dtype).tiny ** 0.5)
