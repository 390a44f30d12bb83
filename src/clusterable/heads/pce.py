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

    ``lam`` (the paper's lambda > 0) makes both halves of eq. 13 well posed; the paper says it "depends on the
    encoder phi_W" (§4.1, Proposition 1) and needs the eigenvalues of a d x d matrix at every step (§4.1, on
    SPCE). With ``lam=None`` it is the largest eigenvalue of the batch's second moment
    ``M = 1/n sum_i z_i z_i^T`` (D x D), computed per batch: with it ``f_2`` of eq. 13 is concave in theta, since
    the Hessian of its log-sum-exp term, ``1/n sum_i (diag(p_i) - p_i p_i^T) (x) z_i z_i^T``, is at most
    ``I_K (x) M`` (our derivation; the paper's supplement, which gives its choice, was not available to us).

    That lambda is a function of the embeddings, so PCE as Proposition 1 states it, ``L_PCE(W)``, is differentiated
    through it (``lam_gradient=True``, the default). It then has a property the detached reading lacks: every term
    is a dot product of embeddings divided by lambda, which scales with them, so ``L_PCE(s z) = L_PCE(z)`` for any
    s > 0 and the gradient has no component that grows the embeddings. With lambda detached (``lam_gradient=False``,
    our first reading) the tightness part ``-||S||^2 / (2 lam n^2)`` keeps falling as the embeddings grow; on
    Fashion-MNIST that reading inflated them along one direction (norms near 1e8) and scored below the untrained
    network, while the differentiated lambda (and a fixed one) learned.

    The gradient of lambda_max(M) is ``v v^T`` for its unit eigenvector v. We compute lambda as the Rayleigh
    quotient ``v^T M v = ||Z v||^2 / n`` of the top eigenvector v of the detached M (``torch.linalg.eigh``): the
    same value as the eigenvalue and the same gradient where the top eigenvalue is simple; where it is repeated,
    lambda_max is not differentiable and ``v v^T`` for the v the solver returns is one of its subgradients (it is
    convex in M), finite, whereas a path through eigh's eigenvectors would divide by the zero eigengap.

    Unlabelled samples (label -1) are left out of every sum (n counts the labelled ones); a batch without any
    gives 0 with a gradient path.

    Args:
        num_classes: K, at least 2.
        lam: lambda > 0, or None for the per-batch largest eigenvalue above.
        lam_gradient: with ``lam=None``, differentiate the loss through lambda (True) or treat the per-batch value
            as a constant (False, our first reading, kept for comparison). A fixed ``lam`` has no gradient either
            way.
    """

    loss_parts = ("loss", "tightness", "contrastive")

    def __init__(self, num_classes: int, lam: float | None = None, lam_gradient: bool = True):
        super().__init__()
        self.num_classes = int(checks.at_least("num_classes", num_classes, 2))
        self.lam = None if lam is None else checks.positive("lam", lam)
        self.lam_gradient = bool(lam_gradient)

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
        lam = self.lam if self.lam is not None else self._lambda(z, n, self.lam_gradient)
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
    def _lambda(z: torch.Tensor, n: torch.Tensor, gradient: bool) -> torch.Tensor:
        """Largest eigenvalue of ``M = 1/n sum_i z_i z_i^T`` from masked embeddings z (N, D), as the Rayleigh
        quotient ``||Z v||^2 / n`` of the top eigenvector v of the detached M (the class docstring says why);
        differentiable in z if ``gradient``, else detached. A tiny positive value if z = 0 (no labelled row)."""
        second_moment = z.T @ z / n  # (D, D)
        top_vector = torch.linalg.eigh(second_moment.detach())[1][:, -1]  # (D,): eigenvalues ascend
        top = (z @ top_vector).pow(2).sum() / n
        if not gradient:
            top = top.detach()
        return top.clamp(min=torch.finfo(z.dtype).tiny ** 0.5)
