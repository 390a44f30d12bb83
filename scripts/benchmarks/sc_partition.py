"""DSCL's SC partition (spectral rows + torch k-means, ~11,000 clusters) of SOP-sized class-structured data
(60,000 x 512), 2 threads; seconds, peak extra memory, NMI. Goal: <= 30 s."""

from __future__ import annotations

import os
import textwrap

from .common import MEMORY_PEAK, MEMORY_PROBE, indented, loadavg_before_after, run_child


def measure() -> dict:
    """DSCL's partition "with SC" (Law et al. 2017, Algorithm 2) at Stanford Online Products' test size:
    ``spectral_rows`` of 60,000 x 512 embeddings, then the torch k-means (``kmeans_backend=torch``; n_iter 20, the
    default the evaluator uses; one start, ``kmeans_n_init=1``) with k = the number of classes (~11,000 of 2-9
    rows). The data are class-structured, as trained embeddings are: each row is its class centre (N(0, I)) plus
    as much noise (N(0, I)), so that k-means has clusters to find and its iterations go as on trained
    embeddings. 2 torch threads, in a fresh subprocess that reports its seconds and peak extra resident memory
    as ``retrieval_eval`` does; then the NMI against the classes, the
    assignment passes of Lloyd's iterations and the share of the point-centre distances they computed (1 per
    pass without the k-means pruning). Goal: <= 30 s."""
    n = 60_000
    child = textwrap.dedent(f"""
        import json, time
        import torch
        torch.set_num_threads(2)
        g = torch.Generator().manual_seed(0)
        sizes = torch.randint(2, 10, ({n} // 5,), generator=g)  # 2..9 rows a class, 5.5 on average
        labels = torch.repeat_interleave(torch.arange(len(sizes)), sizes)[:{n}]
        labels = labels[torch.randperm({n}, generator=g)]
        k = int(labels.max()) + 1
        x = torch.randn(k, 512, generator=g)[labels] + torch.randn({n}, 512, generator=g)
        from sklearn.metrics import normalized_mutual_info_score
        from clusterable.evaluation import kmeans as kmeans_module
        from clusterable.evaluation.spectral import spectral_rows
        kmeans_module.kmeans(spectral_rows(x[:3000]), 500, 0)  # warm-up: kernels, allocator, thread pools
        work = []  # (distances computed / (N k)) of each assignment pass
        call = kmeans_module._Nearest.__call__
        def counted(self, centres):
            before = self.products
            out = call(self, centres)
            work.append((self.products - before) / (len(self.left) * len(centres)))
            return out
        kmeans_module._Nearest.__call__ = counted
        {indented(MEMORY_PROBE, " " * 8)}
        start = time.perf_counter()
        rows = spectral_rows(x)
        spectral_s = time.perf_counter() - start
        assignment, _ = kmeans_module.kmeans(rows, k, 0)
        seconds = time.perf_counter() - start
        {indented(MEMORY_PEAK, " " * 8)}
        nmi = normalized_mutual_info_score(labels.numpy(), assignment.numpy())
        print(json.dumps({{"seconds": seconds, "spectral_s": spectral_s, "extra_mb": (peak - before) / 1024,
                          "how": how, "nmi": nmi, "k": k, "rank": rows.shape[1], "work": work}}))
    """)
    load_before = os.getloadavg()[0]
    ours = run_child(child)
    return {
        "sc_partition_s": ours["seconds"],
        "sc_partition_spectral_rows_s": ours["spectral_s"],
        "sc_partition_extra_mb": ours["extra_mb"],
        "sc_partition_memory_measure": ours["how"],
        "sc_partition_nmi": ours["nmi"],
        "sc_partition_clusters": ours["k"],
        "sc_partition_rank": ours["rank"],
        "sc_partition_assignment_passes": len(ours["work"]),
        "sc_partition_distance_share_per_pass": " ".join(f"{w:.3f}" for w in ours["work"]),
        "sc_partition_full_pass_equivalents": sum(ours["work"]),
        "sc_partition_loadavg_1min_before_after": loadavg_before_after(load_before),
    }
