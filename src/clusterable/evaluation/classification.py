"""Test accuracy of a trained head: its own prediction, or the nearest class mean when it has none.

COREL (REFERENCE §1.2) predicts ``argmax_k sim(h_i, w_k)``, which is what a head's ``logits`` gives. Heads
without class vectors (pairwise, spectral, VAE) are scored by the nearest mean of each class's training
embeddings, the closed-form attraction-only solution of REFERENCE §1.2 eq. 7.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

# Rows per chunk times classes per row: bounds the (chunk, K) score matrix to ~64 MiB of float32.
_CHUNK_ELEMENTS = 1 << 24


def _as_tensor(x: torch.Tensor | np.ndarray) -> torch.Tensor:
    return x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))


def _chunk_rows(width: int) -> int:
    return max(1, _CHUNK_ELEMENTS // max(1, width))


def _head_device(head: nn.Module, fallback: torch.device) -> torch.device:
    for tensor in (*head.parameters(), *head.buffers()):
        return tensor.device
    return fallback


@torch.no_grad()
def predict_logits(head: nn.Module, embeddings: torch.Tensor) -> torch.Tensor:
    """(N,) argmax of ``head.logits`` over (N, D) embeddings, computed in row chunks."""
    device = _head_device(head, embeddings.device)
    # Heads built on class vectors say how many logits a row has; others are assumed to have at most ~1k.
    step = _chunk_rows(getattr(getattr(head, "weight", None), "shape", (1024,))[0])
    preds = []
    for start in range(0, len(embeddings), step):
        chunk = embeddings[start : start + step].to(device)
        preds.append(head.logits(chunk).argmax(dim=1).cpu())
    return torch.cat(preds) if preds else torch.zeros(0, dtype=torch.long)


@torch.no_grad()
def predict_nearest_mean(
    embeddings: torch.Tensor, train_embeddings: torch.Tensor, train_labels: torch.Tensor
) -> torch.Tensor:
    """(N,) label of the nearest class mean (Euclidean) of the labelled training embeddings.

    ``argmin_k ||x - mu_k||^2 = argmin_k (||mu_k||^2 - 2 x.mu_k)``, evaluated on (chunk, K) blocks so that
    memory stays bounded for many classes (SOP has 11k) and no (N, N) matrix is formed.
    """
    train_embeddings = train_embeddings.to(embeddings.device, torch.float32)
    train_labels = train_labels.to(embeddings.device)
    keep = train_labels >= 0
    if not bool(keep.any()):
        raise ValueError(
            "train_labels must contain at least one label >= 0 for the nearest-class-mean prediction"
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


def accuracy(
    embeddings: torch.Tensor | np.ndarray,
    labels: torch.Tensor | np.ndarray,
    *,
    head: nn.Module | None = None,
    train_embeddings: torch.Tensor | np.ndarray | None = None,
    train_labels: torch.Tensor | np.ndarray | None = None,
    encoder_output: torch.Tensor | np.ndarray | None = None,
    **context: Any,
) -> dict[str, float]:
    """Fraction of labelled samples whose predicted class equals the label.

    Args:
        embeddings: (N, D) test (or validation) embeddings.
        labels: (N,) class labels; ``-1`` (unlabelled) samples are left out.
        head: the loss head; if it has ``logits(embeddings) -> (N, K)`` its argmax is the prediction.
        train_embeddings, train_labels: (M, D), (M,): for the nearest class mean when the head has no logits.
        encoder_output: (N, D_enc) the head's input when ``embeddings`` is ``head.embed`` of it (the runner
            passes it); ``head.logits`` is computed on it. Default: ``embeddings``.
        context: the runner's other context values (ignored).
    Returns:
        ``{"acc": float}``, NaN when no sample is labelled.
    """
    embeddings, labels = _as_tensor(embeddings), _as_tensor(labels).long().cpu()
    if embeddings.ndim != 2 or len(embeddings) != len(labels):
        shapes = f"{tuple(embeddings.shape)} and {tuple(labels.shape)}"
        raise ValueError(f"embeddings must be (N, D) and labels (N,), got {shapes}")
    if head is not None and callable(getattr(head, "logits", None)):
        preds = predict_logits(head, embeddings if encoder_output is None else _as_tensor(encoder_output))
    elif train_embeddings is not None and train_labels is not None:
        preds = predict_nearest_mean(
            embeddings, _as_tensor(train_embeddings), _as_tensor(train_labels).long()
        )
    else:
        raise ValueError("accuracy needs a head with `logits` or both train_embeddings and train_labels")
    labelled = labels >= 0
    if not bool(labelled.any()):
        return {"acc": float("nan")}
    return {"acc": float((preds[labelled] == labels[labelled]).float().mean())}
