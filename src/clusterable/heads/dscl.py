"""Deep Spectral Clustering Learning's loss (Law, Urtasun, Zemel 2017, "Deep Spectral Clustering Learning", ICML).

The mini-batch embeddings F (n, d) are scored by how well the projector onto their column space, F F^+, matches
the ground-truth partition's C = Y Y^+ (Y (n, k) the one-hot assignment of the batch's k classes; Y^+ =
(Y^T Y)^-1 Y^T divides each class's indicator by its size):

    Loss(F) = k - tr(C F F^+)                                                (Eq. 10, >= 0)

computed without any n x n matrix: tr(C F F^+) = tr((Y^+ F)(F^+ Y)), the class means (k, d) against
F^+ Y = (F^T F)^-1 F^T Y (d, k), a Cholesky solve with the d x d Gram matrix. Its gradient (Eq. 8, under the
paper's constant-rank assumption) is -2 G with the paper's closed form

    G = (Y - F [F^+ Y]) [F^+ (Y^+)^T]^T                                       (Eq. 9)

(F^+ (Y^+)^T is F^+ Y with each column divided by its class size). The backward pass computes exactly that;
no autograd through a pseudo-inverse. Training minimises ``loss = Loss(F) / 2``, whose gradient is -G: the
paper's step (Algorithm 1 moves along the rescaled gradient G, "G = grad / 2").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from clusterable import checks
from clusterable.contracts import BatchError

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _pinv_times_y(f: Tensor, class_sums: Tensor, classes: Tensor) -> tuple[Tensor, bool]:
    """F^+ Y (d, k) for F (n, d), its class sums F^T Y (d, k) and the rows' classes (n,) in [0, k), and whether the
    SVD fallback was used.

    F^+ = (F^T F)^-1 F^T when F has full column rank: a Cholesky factorisation of F^T F and two triangular
    solves, O(n d^2). When the factorisation reports failure (rank(F) < d: fewer rows than dimensions, or
    collapsed embeddings), F^+ is the SVD pseudo-inverse (``torch.linalg.pinv``), so the result never turns
    into NaN."""
    factor, info = torch.linalg.cholesky_ex(f.T @ f)
    if int(info) == 0:
        solved = torch.cholesky_solve(class_sums, factor)
        if bool(torch.isfinite(solved).all()):
            return solved, False
    pinv = torch.linalg.pinv(f)  # (d, n)
    return torch.zeros_like(class_sums).index_add_(1, classes, pinv), True


class _SpectralTrace(torch.autograd.Function):
    """tr(C F F^+) forward; backward 2 G (Eq. 9), its exact gradient under constant rank."""

    @staticmethod
    def forward(ctx: Any, f: Tensor, classes: Tensor, counts: Tensor) -> tuple[Tensor, Tensor]:
        class_sums = f.new_zeros(f.shape[1], len(counts)).index_add_(1, classes, f.T)  # F^T Y (d, k)
        solved, fallback = _pinv_times_y(f, class_sums, classes)  # F^+ Y (d, k)
        means = class_sums / counts  # (Y^+ F)^T (d, k): the class means
        ctx.save_for_backward(f, classes, counts, solved)
        used_svd = torch.tensor(fallback)
        ctx.mark_non_differentiable(used_svd)
        return (means * solved).sum(), used_svd

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _: Tensor) -> tuple[Tensor, None, None]:
        f, classes, counts, solved = ctx.saved_tensors
        residual = -(f @ solved)  # -F [F^+ Y] (n, k)
        residual[torch.arange(len(f), device=f.device), classes] += 1  # Y - F [F^+ Y]
        g = (residual / counts) @ solved.T  # (Y - F F^+ Y) diag(1/n_c) (F^+ Y)^T = G (n, d), Eq. 9
        return 2 * grad * g, None, None


def spectral_trace(embeddings: Tensor, labels: Tensor) -> tuple[Tensor, int, bool]:
    """``(tr(C F F^+), k, fallback)`` for F = ``embeddings`` (n, d) and ``labels`` (n,) (any integers >= 0; k is
    the number of distinct ones). Differentiable in F with the closed-form gradient (module docstring).
    ``fallback`` says whether F^+ came from the SVD (F was rank-deficient)."""
    _, classes = torch.unique(labels, return_inverse=True)
    counts = torch.bincount(classes).to(embeddings.dtype)
    trace, fallback = _SpectralTrace.apply(embeddings, classes, counts)
    return trace, len(counts), bool(fallback)


class DSCL(nn.Module):
    """DSCL's loss on a mini-batch (Law et al. 2017, Eq. 10): ``dscl = k - tr(C F F^+)``, k the number of
    classes in the batch; ``loss = dscl / 2`` is minimised, so that each step moves F along the paper's rescaled
    gradient G (Eq. 9; the exact gradient of ``dscl`` is -2 G).

    The paper works with d <= k (its relaxation assumes rank(F) <= k; d = k for CUB and Cars, d = 512 with 512
    classes a batch for SOP). With ``require_d_le_k`` (the DSCL experiments set it) a batch with fewer classes
    than dimensions stops the run in one line; the loss itself is defined for any d (tr(C F F^+) <= k always).

    The paper's batches (n = 18 x 70 = 1,260 images) do not go through an Inception backward at once: with
    ``sub_batch_size`` set, the training batch is embedded without keeping activations, G is computed once for
    the whole batch, and each sub-batch of ``sub_batch_size`` rows is embedded again with gradients and
    back-propagates its rows of G (the paper's sum over sub-batches of <F_p, -G_p>). That is activation
    checkpointing of the encoder per sub-batch (``torch.utils.checkpoint``): the parameter gradient is the one
    of a single full backward. BatchNorm layers in training mode see each sub-batch's statistics and update
    their running statistics twice per sub-batch: keep them frozen (the backbones' ``frozen_batchnorm``).

    Args:
        num_classes: the training classes (from the framework): d <= k is checked against it at build time.
        embedding_dim: d (from the framework).
        require_d_le_k: refuse d > k (at build time against the training classes, and per batch).
        sub_batch_size: rows per sub-batch of the backward (the paper's o = 18); it must divide the batch size.
            None: one backward through the whole batch.
        compute_dtype: ``float64`` (the default) or ``float32`` for the d x d Gram matrix and its solves: the
            Cholesky factor of F^T F squares F's condition number, and at these sizes (n = 1,260, d <= 512)
            float64 costs little next to the encoder.

    Shapes: embeddings (n, d), labels (n,) (every row labelled, at least 2 classes).
    """

    loss_parts = ("loss", "dscl")

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        require_d_le_k: bool = False,
        sub_batch_size: int | None = None,
        compute_dtype: Literal["float32", "float64"] = "float64",
    ):
        super().__init__()
        self.embedding_dim = int(checks.at_least("embedding_dim", embedding_dim, 1))
        if not isinstance(require_d_le_k, bool):
            raise ValueError(f"require_d_le_k must be true or false, got {require_d_le_k!r}")
        self.require_d_le_k = require_d_le_k
        if sub_batch_size is not None:
            sub_batch_size = int(checks.at_least("sub_batch_size", sub_batch_size, 1))
        self.sub_batch_size = sub_batch_size
        self.compute_dtype = DTYPES[checks.one_of("compute_dtype", compute_dtype, tuple(DTYPES))]
        if self.require_d_le_k and self.embedding_dim > num_classes:
            raise ValueError(
                f"embedding_dim d = {self.embedding_dim} is larger than the k = {num_classes} training classes: "
                "DSCL's regime is d <= k: make the encoder's output at most k wide (the last width of model.hidden "
                "for ffnn / cnn, e.g. model.hidden=[500,10]; model.out_dim for the ImageNet backbones), or set "
                "loss.require_d_le_k=false"
            )
        self._warned = False

    # contracts.NeedsBatchOf: DSCL's trace needs at least 2 classes in a batch (forward refuses fewer), so 2 rows.
    min_batch_size = 2

    def encode(self, encoder: Callable[[Tensor], Tensor], inputs: Tensor) -> Tensor:
        """The training batch's embeddings (n, d): ``encoder(inputs)``, per sub-batch with activation
        checkpointing when ``sub_batch_size`` is set (class docstring)."""
        if self.sub_batch_size is None or not torch.is_grad_enabled():
            return encoder(inputs)
        n = len(inputs)
        if n % self.sub_batch_size:
            raise BatchError(
                f"loss.sub_batch_size = {self.sub_batch_size} does not divide the batch of {n} rows "
                "(set dataset.batch_size to a multiple of it, with dataset.drop_last=true)"
            )
        parts = inputs.split(self.sub_batch_size)
        return torch.cat([checkpoint(encoder, part, use_reentrant=False) for part in parts])

    def forward(self, embeddings: Tensor, labels: Tensor, **batch: Any) -> dict[str, Tensor]:
        """embeddings (n, d), labels (n,) -> {"loss": (k - tr(C F F^+)) / 2, "dscl": k - tr(C F F^+)}."""
        if bool((labels < 0).any()):
            raise BatchError("loss=dscl needs every row of the batch labelled; this batch has rows labelled -1")
        f = embeddings.to(torch.promote_types(embeddings.dtype, self.compute_dtype))
        trace, k, fallback = spectral_trace(f, labels)
        if k < 2:
            raise BatchError(
                f"loss=dscl: the batch of {len(labels)} rows holds a single class; it needs at least 2 "
                "(larger or class-balanced batches)"
            )
        d = embeddings.shape[1]
        if self.require_d_le_k and d > k:
            raise BatchError(
                f"loss=dscl: the embedding dimension d = {d} exceeds the k = {k} classes in this batch of "
                f"{len(labels)} rows; DSCL's regime is d <= k (larger or class-balanced batches, "
                "dataset.drop_last=true, or loss.require_d_le_k=false)"
            )
        if fallback and not self._warned:
            log.warning(
                "loss=dscl: F was rank-deficient (Cholesky of F^T F failed); using the SVD pseudo-inverse (logged once)"
            )
            self._warned = True
        dscl = (k - trace).to(embeddings.dtype)
        return {"loss": dscl / 2, "dscl": dscl.detach()}
