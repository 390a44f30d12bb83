"""Test accuracy of a trained head: its own prediction, or the nearest class mean when it has none.

COREL (Kenyon-Dean et al. 2019) predicts ``argmax_k sim(h_i, w_k)``, which is what a
``ClassifyingHead``'s ``logits`` gives. Heads without class vectors (the CSRL autoencoders, TVAE, TRBM, TCL) are
scored by the nearest mean of each class's training embeddings, the closed-form attraction-only solution of
COREL's eq. 7.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from clusterable.arrays import to_tensor
from clusterable.contracts import ClassifyingHead, EvalContext, declares

# Rows per chunk times classes per row: bounds the (chunk, K) score matrix to ~64 MiB of float32.
_CHUNK_ELEMENTS = 1 << 24


def _chunk_rows(width: int) -> int:
    return max(1, _CHUNK_ELEMENTS // max(1, width))


def _head_device(head: nn.Module, fallback: torch.device) -> torch.device:
    for tensor in (*head.parameters(), *head.buffers()):
        return tensor.device
    return fallback


@torch.no_grad()
def predict_logits(head: ClassifyingHead, embeddings: Tensor) -> Tensor:
    """(N,) argmax of ``head.logits`` over (N, D) embeddings, computed in row chunks."""
    if len(embeddings) == 0:
        return torch.zeros(0, dtype=torch.long)
    device = _head_device(head, embeddings.device) if isinstance(head, nn.Module) else embeddings.device
    # One row's logits tell how many classes a row scores, and so how many rows fit in a chunk.
    step = _chunk_rows(head.logits(embeddings[:1].to(device)).shape[1])
    preds = []
    for start in range(0, len(embeddings), step):
        chunk = embeddings[start : start + step].to(device)
        preds.append(head.logits(chunk).argmax(dim=1).cpu())
    return torch.cat(preds)


@torch.no_grad()
def predict_nearest_mean(embeddings: Tensor, train_embeddings: Tensor, train_labels: Tensor) -> Tensor:
    """(N,) label of the nearest class mean (Euclidean) of the labelled training embeddings.

    ``embeddings`` (N, D), ``train_embeddings`` (M, D), ``train_labels`` (M,) with -1 for unlabelled rows.
    ``argmin_k ||x - mu_k||^2 = argmin_k (||mu_k||^2 - 2 x.mu_k)``, evaluated on (chunk, K) blocks so that
    memory stays bounded for many classes (SOP has 11k) and no (N, M) matrix is formed.
    """
    train_embeddings = train_embeddings.to(embeddings.device, torch.float32)
    train_labels = train_labels.to(embeddings.device)
    keep = train_labels >= 0
    if not bool(keep.any()):
        raise ValueError(
            "train_labels must contain at least one label >= 0 for the nearest-class-mean prediction "
            "(the head has no logits)"
        )
    classes, inverse = torch.unique(train_labels[keep], return_inverse=True)
    sums = torch.zeros(len(classes), train_embeddings.shape[1], device=embeddings.device)
    sums.index_add_(0, inverse, train_embeddings[keep])
    means = sums / torch.bincount(inverse, minlength=len(classes)).unsqueeze(1).float()
    sq_norms = (means**2).sum(dim=1)
    step = _chunk_rows(len(classes))
    preds = []
    for start in range(0, len(embeddings), step):
        chunk = embeddings[start : start + step].float()
        preds.append(classes[(sq_norms - 2.0 * chunk @ means.T).argmin(dim=1)].cpu())
    return torch.cat(preds) if preds else torch.zeros(0, dtype=torch.long)


@declares("acc")
def accuracy(embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
    """Fraction of labelled samples whose predicted class equals the label.

    A ``ClassifyingHead`` predicts ``argmax head.logits(context.encoder_output)``: the logits take the head's
    own input, which differs from ``embeddings`` when the head is also a ``RepresentingHead``. Any other head
    is scored by the nearest class mean of ``context.train_embeddings`` (M, D') under ``context.train_labels``
    (M,).

    Args:
        embeddings: (N, D') the split's representation.
        labels: (N,) class labels; ``-1`` (unlabelled) samples are left out.
        context: the run's head, encoder output and training representation.
    Returns:
        ``{"acc": float}``, NaN when no sample is labelled.
    """
    embeddings, labels = to_tensor(embeddings), to_tensor(labels).long().cpu()
    if embeddings.ndim != 2 or len(embeddings) != len(labels):
        shapes = f"{tuple(embeddings.shape)} and {tuple(labels.shape)}"
        raise ValueError(f"embeddings must be (N, D) and labels (N,), got {shapes}")
    if isinstance(context.head, ClassifyingHead):
        preds = predict_logits(context.head, to_tensor(context.encoder_output))
    else:
        train_embeddings, train_labels = context.training_split()
        preds = predict_nearest_mean(embeddings, to_tensor(train_embeddings), to_tensor(train_labels).long())
    labelled = labels >= 0
    if not bool(labelled.any()):
        return {"acc": float("nan")}
    return {"acc": float((preds[labelled] == labels[labelled]).float().mean())}
