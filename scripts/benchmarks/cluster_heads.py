"""One epoch (79 Adam steps on 20,000 x 64, then the Lloyd step) of ptae against ae3 at k = 3, 10, 50 clusters
(goal: <= 1.5 at k = 3, sublinear in k); and a stacked per-cluster layer (forward + backward) against a Python
loop over clusters, at PTAE's and TVAE's shapes."""

from __future__ import annotations

import torch

from clusterable.contracts import ClusteringHead

from .common import best_of


def _head_epoch(head, x: torch.Tensor, labels: torch.Tensor, batch_size: int, opt: torch.optim.Optimizer) -> None:
    """One epoch of a CSRL head on in-memory data: Adam steps over index-sliced batches, then (for clustering
    heads) the Lloyd step on the whole set, as the framework runs it after every training epoch."""
    for i in range(0, len(x), batch_size):
        index = torch.arange(i, min(i + batch_size, len(x)))
        loss = head(x[index], labels[index], index=index)["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if isinstance(head, ClusteringHead):
        head.update_clusters(x)


def _time_head_epoch(head, x: torch.Tensor, labels: torch.Tensor, batch_size: int) -> float:
    """Best-of-5 seconds of ``_head_epoch`` after one warm-up epoch (clusters initialised by k-means++ first)."""
    if isinstance(head, ClusteringHead):
        head.init_clusters(x)
    opt = torch.optim.Adam(head.parameters(), lr=1e-3)
    _head_epoch(head, x, labels, batch_size, opt)
    return best_of(lambda: _head_epoch(head, x, labels, batch_size, opt), repeats=5)


def _stacked_vs_loop(k: int, rows: int = 512, fan_in: int = 200, fan_out: int = 2) -> float:
    """Forward + backward of a per-cluster layer (k, rows, in) @ (k, in, out): Python loop time / stacked time."""
    g = torch.Generator().manual_seed(0)
    h = torch.randn(k, rows, fan_in, generator=g)
    w = torch.randn(k, fan_in, fan_out, generator=g, requires_grad=True)
    b = torch.randn(k, 1, fan_out, generator=g, requires_grad=True)

    def stacked() -> None:
        torch.baddbmm(b, h, w).square().sum().backward()

    def loop() -> None:
        sum(torch.addmm(b[j], h[j], w[j]).square().sum() for j in range(k)).backward()

    stacked(), loop()  # warm-up
    return best_of(lambda: [loop() for _ in range(20)], 5) / best_of(lambda: [stacked() for _ in range(20)], 5)


def measure() -> dict:
    """At k = 3, 10, 50 clusters of 20,000 x 64 points (batch 256): seconds of an ae3 and a ptae epoch
    (``_time_head_epoch``) and their ratio; loop / stacked time of PTAE's (batch x 2 -> 1) and TVAE's
    (512 x 200 -> 2) per-cluster layers (``_stacked_vs_loop``)."""
    from clusterable.heads.linear_ae import LinearAE
    from clusterable.heads.tensorized_ae import TensorizedAE

    n, d, batch_size = 20_000, 64, 256  # MNIST-subset-like width, a mini-batch epoch of 79 steps
    out: dict = {}
    for k in (3, 10, 50):
        g = torch.Generator().manual_seed(0)
        labels = torch.randint(0, k, (n,), generator=g)
        x = 3.0 * torch.randn(k, d, generator=g)[labels] + torch.randn(n, d, generator=g)
        torch.manual_seed(0)
        heads = {
            "ae3": LinearAE("ae3", (d,), num_classes=k),
            "ptae": TensorizedAE("ptae", (d,), num_classes=k),
        }
        times = {name: _time_head_epoch(head, x, labels, batch_size) for name, head in heads.items()}
        out[f"cluster_heads_k{k}_ae3_s"] = times["ae3"]
        out[f"cluster_heads_k{k}_ptae_s"] = times["ptae"]
        out[f"cluster_heads_k{k}_ptae_over_ae3"] = times["ptae"] / times["ae3"]
        # Per-cluster layers of PTAE (2 -> 1 on a batch) and of TVAE's heads (200 -> 2): loop / stacked.
        out[f"cluster_heads_k{k}_loop_over_stacked_ptae"] = _stacked_vs_loop(k, rows=batch_size, fan_in=2, fan_out=1)
        out[f"cluster_heads_k{k}_loop_over_stacked_tvae"] = _stacked_vs_loop(k, rows=512, fan_in=200, fan_out=2)
    return out
