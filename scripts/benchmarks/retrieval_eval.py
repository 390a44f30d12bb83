"""The retrieval evaluator (Recall@{1,10,100}, MAP@R, cosine) on SOP-sized random data (60,000 x 512, ~11,000
classes) against faiss-cpu's IndexFlatIP and scikit-learn's brute force, 2 threads each: same recalls as faiss.
Goal: <= 20 s, faster than faiss, < 2 GB extra."""

from __future__ import annotations

import os
import textwrap
import time

import numpy as np
import torch

from .common import MEMORY_PEAK, MEMORY_PROBE, indented, loadavg_before_after, run_child


def measure() -> dict:
    """Every row of 60,000 x 512 random features (Stanford Online Products' test size; ~11,000 classes of 2-9 rows)
    queries all the others: our evaluator (exact, torch) against faiss-cpu's exact IndexFlatIP and scikit-learn's
    brute-force NearestNeighbors, all with 2 threads. Ours runs in a fresh subprocess that reports its seconds and
    its peak extra resident memory (the rise of VmHWM over the resident size before the call, after resetting the
    peak through /proc/self/clear_refs): that counts torch's allocations, which tracemalloc does not see."""
    n, ks, sample = 60_000, (1, 10, 100), 3000
    make_data = textwrap.dedent(f"""
        import torch
        g = torch.Generator().manual_seed(0)
        x = torch.randn({n}, 512, generator=g)
        sizes = torch.randint(2, 10, ({n} // 5,), generator=g)  # 2..9 rows a class, 5.5 on average
        labels = torch.repeat_interleave(torch.arange(len(sizes)), sizes)[:{n}]
        labels = labels[torch.randperm({n}, generator=g)]
    """)
    child = make_data + textwrap.dedent(f"""
        import json, time
        torch.set_num_threads(2)
        from clusterable.contracts import EvalContext
        from clusterable.evaluation.retrieval import RetrievalMetrics
        retrieval_metrics = RetrievalMetrics(ks={list(ks)}, distances=["cos"], map_at_r=True, r_precision=True)
        def context(rows):
            return EvalContext("test", {{"labels": labels[:rows]}}, torch.nn.Identity(), x[:rows], x[:rows],
                               labels[:rows])
        retrieval_metrics(x[:3000], labels[:3000], context(3000))  # warm-up: kernels, allocator
        {indented(MEMORY_PROBE, " " * 8)}
        start = time.perf_counter()
        out = retrieval_metrics(x, labels, context(len(x)))
        seconds = time.perf_counter() - start
        {indented(MEMORY_PEAK, " " * 8)}
        print(json.dumps({{"seconds": seconds, "extra_mb": (peak - before) / 1024, "how": how, "metrics": out}}))
    """)
    load_before = os.getloadavg()[0]
    ours = run_child(child)

    data: dict = {}
    exec(make_data, data)  # the same features and labels as the subprocess's
    x, labels = data["x"], data["labels"].numpy()
    xn = torch.nn.functional.normalize(x, dim=1).numpy()
    counts = np.bincount(labels)
    relevant = counts[labels] - 1  # R: the other rows of the query's class

    def scores(neighbours: np.ndarray, queries: np.ndarray) -> dict:
        """Recall@K and MAP@R from (q, >= max K) neighbour rows, the query itself already removed."""
        r, hits = relevant[queries], labels[neighbours] == labels[queries][:, None]
        keep = r > 0  # lone queries left out, as the evaluator does
        hits, r = hits[keep], r[keep]
        out = {f"recall@{k}/cos": float(hits[:, :k].any(axis=1).mean()) for k in ks}
        first_r = np.arange(1, hits.shape[1] + 1)[None, :] <= r[:, None]
        precision = np.cumsum(hits & first_r, axis=1) / np.arange(1, hits.shape[1] + 1)
        out["map@r/cos"] = float(((precision * (hits & first_r)).sum(axis=1) / r).mean())
        return out

    def without_self(found: np.ndarray, queries: np.ndarray) -> np.ndarray:
        """Drop each query's own row from its (q, K + 1) neighbours by index (not the first column)."""
        is_self = found == queries[:, None]
        order = np.argsort(is_self, axis=1, kind="stable")[:, : found.shape[1] - 1]
        return np.take_along_axis(found, order, axis=1)

    try:
        import faiss
    except ImportError:  # faiss-cpu is a dev dependency
        faiss = None
    out: dict = {
        "retrieval_eval_s": ours["seconds"],
        "retrieval_eval_extra_mb": ours["extra_mb"],
        "retrieval_eval_memory_measure": ours["how"],
    }
    everyone = np.arange(n)
    if faiss is not None:
        faiss.omp_set_num_threads(2)
        start = time.perf_counter()
        index = faiss.IndexFlatIP(xn.shape[1])
        index.add(xn)
        _, found = index.search(xn, max(ks) + 1)
        out["retrieval_eval_faiss_s"] = time.perf_counter() - start
        out["retrieval_eval_faiss_over_ours"] = out["retrieval_eval_faiss_s"] / ours["seconds"]
        faiss_scores = scores(without_self(found, everyone), everyone)
        diffs = [abs(faiss_scores[key] - ours["metrics"][key]) for key in faiss_scores]
        out["retrieval_eval_max_diff_vs_faiss"] = max(diffs)
        out["retrieval_eval_same_as_faiss"] = bool(max(diffs) <= 1e-6)

    # scikit-learn's brute force on a seeded sample of queries (all of them would take several minutes here),
    # its time scaled to all n.
    from sklearn.neighbors import NearestNeighbors
    from threadpoolctl import threadpool_limits

    queries = np.sort(np.random.default_rng(0).choice(n, sample, replace=False))
    with threadpool_limits(2):
        start = time.perf_counter()
        knn = NearestNeighbors(n_neighbors=max(ks) + 1, metric="cosine", algorithm="brute").fit(xn)
        _, found_sk = knn.kneighbors(xn[queries])
        seconds = time.perf_counter() - start
    out[f"retrieval_eval_sklearn_s_scaled_from_{sample}_queries"] = seconds * n / sample
    if faiss is not None:
        pairs = zip(without_self(found_sk, queries), without_self(found[queries], queries), strict=True)
        out["retrieval_eval_sklearn_same_neighbours_as_faiss"] = float(np.mean([set(a) == set(b) for a, b in pairs]))
    for key, value in ours["metrics"].items():
        out[f"retrieval_eval_{key}"] = value
    out["retrieval_eval_loadavg_1min_before_after"] = loadavg_before_after(load_before)
    return out
