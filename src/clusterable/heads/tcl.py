"""Tensorized contrastive learning TCL (Sabanayagam et al. 2024, §V).

A shared encoder g_Omega (``clusterable.models.tcl_conv.TCLConv``) feeds C cluster-specific heads g_Psi_j
(1024 -> 512 -> 128, ReLU and dropout between), stored as stacked tensors and applied to all clusters with one
batched matmul each (``heads.stacked``). The paper shares the convolutions and tensorises the FC part, as here;
the authors' code (repository ``mahalakshmi-sabanayagam/cluster_specific_representation``,
``exp_tensor_contrastive.ipynb``) trains one full network (convolutions included) per cluster.

With ``num_clusters=1`` the same code is the standard contrastive model (the paper's left column of Fig. 4): the
shared encoder and one head, i.e. the notebook's ``Network`` (2 conv blocks, 1024 -> 512 -> 128), and, as the
paper's standard CL (§V.B), each anchor's negative an independent sample (another point of the batch) since
there is no other cluster.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torchvision.transforms.v2.functional as TF
from torch import nn

from clusterable import checks
from clusterable.heads.cluster_state import CHUNK, ClusterSpecificHead
from clusterable.heads.stacked import apply_all, pick, stacked_linear
from clusterable.models.images import as_images


def elastic_displacement(
    n: int, height: int, width: int, alpha: float, sigma: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Random smooth displacement fields (n, H, W, 2), one per image, as ``v2.ElasticTransform`` draws them.

    Uniform [-1, 1] noise per pixel and axis, Gaussian-blurred (kernel ``8 sigma + 1``, odd, at most
    ``2 min(H, W) - 1``), scaled by
    ``alpha / size`` (grid units: ``alpha / 2`` pixels for unit noise). torchvision draws one field per call
    (shared by the whole batch); here each image gets its own. Drawn on the CPU from ``generator``.
    """
    d = torch.rand(n, 2, height, width, generator=generator) * 2 - 1
    if sigma > 0:
        k = int(8 * sigma + 1)
        k += 1 - k % 2
        k = min(k, 2 * min(height, width) - 1)  # reflect padding needs pad < size; torchvision would fail here
        d = TF.gaussian_blur(d, [k, k], [sigma, sigma])
    d = d * alpha / torch.tensor([width, height], dtype=d.dtype).view(1, 2, 1, 1)
    return d.permute(0, 2, 3, 1)


def apply_displacement(images: torch.Tensor, displacement: torch.Tensor) -> torch.Tensor:
    """Warp ``images`` (N, C, H, W) by ``displacement`` (N or 1, H, W, 2): bilinear, zero fill (F.elastic)."""
    n, _, h, w = images.shape
    # Pixel centres in grid_sample's [-1, 1] coordinates (align_corners=False), (H, W, 2) as (x, y).
    xs = torch.linspace((1 - w) / w, (w - 1) / w, w, dtype=images.dtype, device=images.device)
    ys = torch.linspace((1 - h) / h, (h - 1) / h, h, dtype=images.dtype, device=images.device)
    identity = torch.stack([xs.expand(h, w), ys.unsqueeze(1).expand(h, w)], dim=-1)
    grid = identity + displacement.to(images)
    grid = grid.expand(n, h, w, 2)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def elastic(images: torch.Tensor, alpha: float, sigma: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """torchvision's elastic transformation with an independent field per image; ``images`` (N, C, H, W)."""
    n, _, h, w = images.shape
    return apply_displacement(images, elastic_displacement(n, h, w, alpha, sigma, generator))


def random_partner(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each row of ``mask`` (N, M) bool, a uniformly random column where it is True.

    Returns the columns (N,) and whether the row has one (N,) bool (a row without one gets any column).
    """
    scores = torch.rand(mask.shape, device=mask.device).masked_fill(~mask, -1.0)
    return scores.argmax(dim=1), mask.any(dim=1)


class TensorizedContrastive(ClusterSpecificHead):
    """Cluster-specific contrastive heads with a hard assignment S of the training set (a clustering head).

    Loss of anchor i (the TCL objective; j = S_i): ``<z, z-> - <z, z+>`` with ``z = g_Psi_j(g_Omega(x_i))``
    L2-normalised, and z+, z- the same head's outputs for the positive and the negative. The paper writes
    plain inner products; we normalise because the unnormalised objective is unbounded below (scaling z lowers
    it without limit), and the authors' notebook compares anchors, positives and negatives by cosine
    similarity.
        unsupervised: x+ = an elastic transformation of x_i (``elastic``, alpha, sigma); x- = a random
            sample of the batch from another cluster (S).
        supervised (§V.B 2): x+ = another sample of the batch with the same label; x- = one with another
            label. Anchors without a same-label partner in the batch (or unlabelled: label -1) fall back to
            the elastic positive; unlabelled anchors take their negative from another cluster.
    Anchors without any valid negative in the batch keep only the positive term.

    One cluster (``num_clusters=1``) is the standard contrastive model: "another cluster" becomes any other
    sample of the batch (the paper's standard CL draws the negative independently from the data set). The
    authors' notebook trains its standard model apart (a ``Network`` with 64 outputs, the unnormalised loss, lr
    1e-5, 20 / 25 epochs, negatives from another initial k-means++ cluster); here it differs from TCL only in
    the number of heads, so that the two columns of Fig. 4 compare like with like.

    The positive needs the shared encoder, which the head does not own: ``forward`` expects it in the batch
    under the key ``encoder`` (the training module passes it) together with the batch ``inputs``.

    Assignment rule (Lloyd step and eq. 2, ``s = argmin_j L(g_Psi_j(g_Omega(x)))``): head j's loss with the
    pair drawn as in the authors' notebook when it does not augment, a positive from cluster j and a negative
    from outside it, taken in expectation (exact, since the loss is linear in z+ and z-):
        ``l_j(x) = <z_j(x), m-_j> - <z_j(x), m+_j>``, ``m+_j`` / ``m-_j`` = mean of z_j over the points of
        the training split inside / outside cluster j.
    It is deterministic and needs no encoder; ``directions = m- - m+`` (C, out_dim) is refreshed at every
    Lloyd step and kept for new points. An empty cluster has ``m+ = 0``. (Scoring with the point's own
    un-augmented view as its positive instead, the Lloyd steps collapsed the clusters in our check on 5
    scikit-learn digit classes: ARI 0.60 at init -> 0.21 after 10 epochs; with this rule 0.67.)

    Args:
        embedding_dim: D, the width of the shared encoder's output (TCLConv on 28x28: 1024).
        num_classes: the dataset's number of classes: C unless ``num_clusters`` is set.
        out_dim: width of z (paper: 128).
        hidden: width of the heads' hidden layer (authors: 512).
        supervised: use labels for positives and negatives (the paper's "with class information").
        alpha, sigma: the elastic transformation's strength and smoothness (torchvision's units).
        dropout: dropout between the heads' two layers (authors: 0.3).
        seed: ``random_state`` of the k-means++ seeding (authors: 20).
        num_clusters: C when it is not ``num_classes``; 1 is the standard contrastive model.
    """

    loss_parts = ("loss", "pos", "neg")

    def __init__(
        self,
        embedding_dim: int,
        num_classes: int,
        out_dim: int = 128,
        hidden: int = 512,
        supervised: bool = False,
        alpha: float = 34.0,
        sigma: float = 4.0,
        dropout: float = 0.3,
        seed: int = 20,
        num_clusters: int | None = None,
    ):
        super().__init__(num_classes, seed, num_clusters)
        embedding_dim, out_dim, hidden = (
            int(checks.at_least(name, value, 1))
            for name, value in (("embedding_dim", embedding_dim), ("out_dim", out_dim), ("hidden", hidden))
        )
        self.supervised = bool(supervised)
        self.alpha = float(checks.at_least("alpha", alpha, 0))
        self.sigma = float(checks.at_least("sigma", sigma, 0))
        self.dropout = checks.dropout(dropout)
        c = self.num_clusters
        self.weight1, self.bias1 = stacked_linear(c, embedding_dim, hidden)
        self.weight2, self.bias2 = stacked_linear(c, hidden, out_dim)
        self.register_buffer("directions", torch.zeros(c, out_dim))

    @property
    def standard(self) -> bool:
        """One cluster: the standard contrastive model."""
        return self.state.standard

    def project(self, h: torch.Tensor, dropout: bool = True) -> torch.Tensor:
        """All heads at once: ``z_j(h_i)`` (C, N, out_dim), L2-normalised; ``h`` (N, D) shared features.

        Dropout acts in training mode unless ``dropout`` is False (the assignment step is deterministic).
        """
        # (N, D) @ (C, D, H) broadcasts to (C, N, H): one batched matmul for all the clusters' heads.
        a = torch.relu(apply_all(h, self.weight1, self.bias1))
        a = F.dropout(a, self.dropout, training=self.training and dropout)
        return F.normalize(apply_all(a, self.weight2, self.bias2), dim=-1)

    def pair_loss(
        self,
        h: torch.Tensor,
        h_pos: torch.Tensor,
        cluster: torch.Tensor,
        negative: torch.Tensor,
        has_negative: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """Mean of ``<z, z-> - <z, z+>`` over anchors, all under the anchor's head ``cluster`` (N,).

        ``h``, ``h_pos`` (N, D) features of anchors and positives; ``negative`` (N,) the row of ``h`` that is
        each anchor's negative; ``has_negative`` (N,) bool. Returns ``loss`` and the mean similarities
        ``pos`` and ``neg`` (the latter over anchors that have a negative).
        """
        z_all = self.project(h)
        z = pick(z_all, cluster)
        z_pos = pick(self.project(h_pos), cluster)
        z_neg = z_all[cluster, negative]  # the anchor's head applied to its negative
        pos = (z * z_pos).sum(1)
        neg = (z * z_neg).sum(1) * has_negative
        return {
            "loss": (neg - pos).mean(),
            "pos": pos.mean(),
            "neg": neg.sum() / has_negative.sum().clamp(min=1),
        }

    def _augment(self, inputs: torch.Tensor) -> torch.Tensor:
        return elastic(as_images(inputs), self.alpha, self.sigma).view_as(inputs)

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        index: torch.Tensor | None = None,
        inputs: torch.Tensor | None = None,
        encoder: nn.Module | None = None,
        **batch,
    ) -> dict[str, torch.Tensor]:
        """TCL loss of the batch under the stored assignment.

        ``embeddings`` (N, D) the encoder's features of ``inputs`` (N, 1, H, W) or (N, H*W); ``labels`` (N,);
        ``index`` (N,) rows in the training split selecting the clusters in S (without it: eq. 2);
        ``encoder`` the shared encoder, needed to embed the elastic positives.
        """
        if encoder is None:
            raise ValueError(
                "TensorizedContrastive needs the shared encoder in the batch under the key 'encoder' "
                "(the training module passes it) to embed the elastic positives; got none"
            )
        if inputs is None:
            raise ValueError("TensorizedContrastive needs the batch 'inputs' to draw the elastic positives; got none")
        cluster = self.batch_clusters(embeddings, index)
        # Where an anchor's unsupervised negative may come from: another cluster; for the standard model (one
        # cluster) any other sample of the batch.
        other_cluster = cluster.unsqueeze(1) != cluster.unsqueeze(0)
        if self.standard:
            other_cluster = ~torch.eye(len(cluster), dtype=torch.bool, device=cluster.device)
        if not self.supervised:
            h_pos = encoder(self._augment(inputs))
            negative, has_negative = random_partner(other_cluster)
        else:
            labelled = labels >= 0
            same = (labels.unsqueeze(1) == labels.unsqueeze(0)) & labelled.unsqueeze(1)
            same.fill_diagonal_(False)
            partner, has_partner = random_partner(same)
            h_pos = embeddings[partner]
            if not has_partner.all():
                h_pos = torch.where(has_partner.unsqueeze(1), h_pos, encoder(self._augment(inputs)))
            other_class = (labels.unsqueeze(1) != labels.unsqueeze(0)) & labelled.unsqueeze(0)
            negative, has_negative = random_partner(torch.where(labelled.unsqueeze(1), other_class, other_cluster))
        return self.pair_loss(embeddings, h_pos, cluster, negative, has_negative)

    # ---- clustering-head contract (ClusterSpecificHead), with the assignment rule's directions --------------

    @torch.no_grad()
    def _project_all(self, embeddings: torch.Tensor) -> torch.Tensor:
        """``project`` in row blocks, always without dropout: (C, N, out_dim)."""
        return torch.cat([self.project(block, dropout=False) for block in embeddings.split(CHUNK)], dim=1)

    def _set_directions(self, z: torch.Tensor) -> None:
        clusters = torch.arange(self.num_clusters, device=z.device).unsqueeze(1)
        inside = (self._assignment().unsqueeze(0) == clusters).to(z.dtype)  # (C, N): 1 where i is in j
        outside = 1.0 - inside

        def means(mask: torch.Tensor) -> torch.Tensor:  # (C, out_dim): mean of z_j over the masked points
            return torch.einsum("cn,cno->co", mask, z) / mask.sum(1, keepdim=True).clamp(min=1)

        self.directions = means(outside) - means(inside)

    def _loss_from(self, z: torch.Tensor) -> torch.Tensor:
        return torch.einsum("cno,co->nc", z, self.directions)

    @torch.no_grad()
    def per_cluster_loss(self, embeddings: torch.Tensor) -> torch.Tensor:
        """The assignment loss ``l_j(x_i) = <z_j(x_i), m-_j - m+_j>`` (N, C) for encoder features (N, D)."""
        return self._loss_from(self._project_all(embeddings))

    def cluster_points(self, embeddings: torch.Tensor, inputs: torch.Tensor | None = None, **split) -> torch.Tensor:
        """The flattened ``inputs`` (the authors seed k-means++ on the pixels), or ``embeddings`` when the split
        has no inputs."""
        return embeddings if inputs is None else inputs.flatten(1).to(embeddings.dtype)

    @torch.no_grad()
    def cluster_losses(self, embeddings: torch.Tensor, **split) -> torch.Tensor:
        """The assignment rule's loss (N, C); the ``directions`` are only defined once S is."""
        self._assignment()
        return self.per_cluster_loss(embeddings)

    @torch.no_grad()
    def init_clusters(self, embeddings: torch.Tensor, **split) -> None:
        """S by k-means++ seeds and nearest seed, centres = members' means, then the initial ``directions``."""
        super().init_clusters(embeddings, **split)
        self._set_directions(self._project_all(embeddings))

    @torch.no_grad()
    def update_clusters(self, embeddings: torch.Tensor, **split) -> None:
        """Lloyd step on the whole training split.

        ``directions`` from the current S, ``S_i = argmin_j l_j(x_i)``, centres = members' means (of the
        points k-means++ ran on), then ``directions`` again for the new S (kept for eq. 2 on new points).
        """
        z = self._project_all(embeddings)
        self._set_directions(z)
        self.state.lloyd_step(self._loss_from(z), self.cluster_points(embeddings, **split))
        self._set_directions(z)

    @torch.no_grad()
    def embed(self, embeddings: torch.Tensor, **batch) -> torch.Tensor:
        """``z`` (N, out_dim) of each point under its eq.-2 cluster's head (the paper's t-SNE, Fig. 4)."""
        self._assignment()
        z = self._project_all(embeddings)
        return pick(z, self._loss_from(z).argmin(dim=1))
