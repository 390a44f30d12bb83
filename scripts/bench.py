"""Benchmarks: ratios and timings measured in one process; the last line printed is one JSON object.

    python scripts/bench.py                  # every case
    python scripts/bench.py --only startup   # one case

Cases (goals from the issues):
  train_overhead         one epoch through the framework (LightningModule + Trainer + in-memory batches) against a
                         plain PyTorch loop; 2x500 LeakyReLU FFNN + CCE, 55,000 x 784 random data, batch 128. <= 1.2
  train_overhead_digits  the same on the default run (digits, Gaussian-COREL, its epochs); reported
  vae_epoch             one epoch of Safir 2022's MVAE (FFNN 2x500, latent 10, triplet, VampPrior of 50; the
                        alternate schedule's first epoch: both terms) through the framework against a plain loop;
                        55,000 x 784, 10% labelled, batch 128. <= 1.2
  startup               `python train.py --help` minus `python -c pass`, seconds. <= 1.5
  clustering_eval       the clustering evaluator (k-means + GMM + silhouettes) on 10,000 x 64. <= 0.5 s
  probes                the classifier probes (kNN, random forest, MLP; their defaults) fit on 10,000 x 10 training
                        embeddings (10 overlapping blobs) and scored on 10,000 test rows; seconds and accuracy of
                        each, and of the three in one call. <= 5 s
  cluster_heads         one epoch (79 Adam steps on 20,000 x 64, then the Lloyd step) of ptae against ae3 at
                        k = 3, 10, 50 clusters (<= 1.5 at k = 3, sublinear in k); and a stacked per-cluster layer
                        (forward + backward) against a Python loop over clusters, at PTAE's and TVAE's shapes
  pairwise_losses       forward + backward of each named metric-learning loss head at batch 256 x 128 (32 classes
                        x 8) against the ce head; seconds a step and ratio to ce; reported
  image_pipeline        training images/s of the decoded cache + batched augmentation against an ImageFolder-style
                        DataLoader decoding JPEGs per sample (2 workers, same transforms). >= 3
  resnet50_training     ResNet-50 training images/s through the framework on a CUDA GPU (bf16-mixed,
                        channels-last, batch 256; skipped without CUDA). >= 2,500 on one H100
  dscl                  DSCL's loss, forward + backward: closed form (Cholesky; SVD fallback) vs autograd through
                        pinv at n = 1,260, d = 100, k = 63 and d = k = 512: same gradients; goal >= 10x at the first
  retrieval_eval        the retrieval evaluator (Recall@{1,10,100}, MAP@R, cosine) on SOP-sized random data
                        (60,000 x 512, ~11,000 classes) against faiss-cpu's IndexFlatIP and scikit-learn's brute
                        force, 2 threads each: same recalls as faiss; <= 20 s, faster than faiss, < 2 GB extra
  sc_partition          DSCL's SC partition (spectral rows + torch k-means, ~11,000 clusters) of SOP-sized
                        class-structured data (60,000 x 512), 2 threads; seconds, peak extra memory, NMI. <= 30 s
  text                  one epoch of text_cnn (conf/model/text_cnn.yaml) + CCE on 94,721 fake documents of 25 tokens
                        (50,000-word vocabulary, 300-d vectors) through the framework against a plain loop, <= 1.2;
                        GloVe's reader restricted to 50,000 words from a generated 2.2-million-line 300-d file:
                        seconds and peak extra memory of the scan, seconds from its cache; the one-time AGNews-8
                        corpus build (read_agnews8: read, sample, spaCy preprocessing, cache) from a generated
                        newsSpace dump of 20,000 documents: seconds per 10,000 documents, seconds from its cache
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from clusterable.contracts import ClusteringHead

ROOT = Path(__file__).resolve().parents[1]
CASES: dict[str, Callable[[], dict]] = {}


# The child scripts' peak-memory probe: VmHWM after resetting it through /proc/self/clear_refs, minus VmRSS before.
MEMORY_PROBE = """def status(key):
    return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith(key)))  # kB
try:
    open("/proc/self/clear_refs", "w").write("5")  # reset the peak resident size (Linux >= 4.0)
    how = "VmHWM - VmRSS before"
except OSError:
    how = "ru_maxrss - VmRSS before (the peak may predate the call)"
before = status("VmRSS:")"""


def _probe(indent: str) -> str:
    """``MEMORY_PROBE`` indented to sit inside a dedented child script at ``indent``."""
    return textwrap.indent(MEMORY_PROBE, indent).lstrip()


def case(fn: Callable[[], dict]) -> Callable[[], dict]:
    CASES[fn.__name__] = fn
    return fn


def best_of(fn: Callable[[], object], repeats: int = 3) -> float:
    """Minimum wall time of ``repeats`` calls (the least disturbed by the rest of the machine)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _plain_loop(encoder, head, split: dict, batch_size: int, epochs: int, lr: float = 1e-3) -> None:
    """The baseline: index-sliced batches from in-memory tensors, forward, backward, Adam step."""
    opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=lr)
    x, y = split["inputs"], split["labels"]
    for _ in range(epochs):
        order = torch.randperm(len(y))
        for i in range(0, len(y), batch_size):
            idx = order[i : i + batch_size]
            loss = head(encoder(x[idx]), y[idx])["loss"]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def _framework(encoder, head, splits: dict, batch_size: int, epochs: int, lr: float = 1e-3) -> None:
    """The framework's training path, as train.py runs it, without checkpoints, loggers or validation."""
    import functools

    import lightning as L

    from clusterable.data import InMemoryDataModule
    from clusterable.module import RepresentationModule

    dm = InMemoryDataModule("bench", lambda: splits, splits["train"]["inputs"].shape[1:], 10, batch_size)
    module = RepresentationModule(encoder, head, functools.partial(torch.optim.Adam, lr=lr))
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_epochs=epochs, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0, num_sanity_val_steps=0,
    )  # fmt: skip
    trainer.fit(module, datamodule=dm)


def _overhead(splits: dict, make: Callable[[], tuple], batch_size: int, epochs: int) -> tuple[float, float]:
    torch.manual_seed(0)
    _plain_loop(*make(), splits["train"], batch_size, 1)  # warm-up: allocator, kernels, imports
    _framework(*make(), splits, batch_size, 1)
    # Alternate the two so that a busy moment of the machine does not land on one side only.
    plain, framework = [], []
    for _ in range(3):
        plain.append(best_of(lambda: _plain_loop(*make(), splits["train"], batch_size, epochs), 1))
        framework.append(best_of(lambda: _framework(*make(), splits, batch_size, epochs), 1))
    return min(plain), min(framework)


@case
def train_overhead() -> dict:
    from clusterable.heads import CCELoss
    from clusterable.models import FFNN

    g = torch.Generator().manual_seed(0)
    split = {
        "inputs": torch.rand(55_000, 784, generator=g),
        "labels": torch.randint(0, 10, (55_000,), generator=g),
    }
    splits = {"train": split, "val": split, "test": split}

    def make():
        enc = FFNN((784,), hidden=(500, 500))
        return enc, CCELoss(num_classes=10, embedding_dim=enc.embedding_dim)

    plain, framework = _overhead(splits, make, 128, 1)
    return {"train_overhead_ratio": framework / plain, "train_overhead_plain_s": plain,
            "train_overhead_framework_s": framework}  # fmt: skip


@case
def train_overhead_digits() -> dict:
    from omegaconf import OmegaConf

    from clusterable.data.digits import read_digits
    from clusterable.heads import GaussianCOREL
    from clusterable.models import FFNN

    cfg = OmegaConf.load(ROOT / "conf" / "trainer" / "default.yaml")
    splits = read_digits()

    def make():
        enc = FFNN((64,), hidden=(500, 500))
        return enc, GaussianCOREL(num_classes=10, embedding_dim=enc.embedding_dim)

    plain, framework = _overhead(splits, make, 128, int(cfg.max_epochs))
    return {
        "train_overhead_digits_ratio": framework / plain,
        "train_overhead_digits_plain_s": plain,
        "train_overhead_digits_framework_s": framework,
        "train_overhead_digits_epochs": int(cfg.max_epochs),
    }


def _plain_head_loop(encoder, head, split: dict, batch_size: int, lr: float = 1e-3) -> None:
    """``_plain_loop`` for a head that reads the batch as the module passes it (``inputs``, ``epoch``, ``encoder``,
    ``index``): one epoch, the first (``epoch=0``)."""
    opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=lr)
    x, y = split["inputs"], split["labels"]
    order = torch.randperm(len(y))
    for i in range(0, len(y), batch_size):
        idx = order[i : i + batch_size]
        inputs = x[idx]
        loss = head(encoder(inputs), y[idx], inputs=inputs, epoch=0, encoder=encoder, index=idx)["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


@case
def vae_epoch() -> dict:
    """One epoch of Safir 2022's MetricVAE (``loss=mvae`` as configured: triplet with semi-hard mining on a 10-d
    latent, VampPrior of 50 pseudo-inputs embedded through the encoder every step, decoder 2x500; epoch 0 of the
    alternate schedule, so L_S and L_U both run) on a 2x500 FFNN (conf/model/ffnn.yaml), 55,000 x 784 random pixels
    with 10 classes and 10% of the labels kept (the rest -1), batches of 128, Adam lr 1e-3: the framework
    (``_framework``) against ``_plain_head_loop`` with the same encoder and head; the best of 3 alternated runs
    each, after a warm-up on 5,000 rows. Goal: ratio <= 1.2."""
    from hydra import compose, initialize_config_dir

    from clusterable.config import build
    from clusterable.models import FFNN

    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 10, (55_000,), generator=g)
    labels[torch.rand(55_000, generator=g) >= 0.1] = -1
    split = {"inputs": torch.rand(55_000, 784, generator=g), "labels": labels}
    splits = {"train": split, "val": split, "test": split}
    small = {k: v[:5000] for k, v in split.items()}
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        node = compose(overrides=["+loss=mvae"]).loss

    def make() -> tuple:
        encoder = FFNN((784,), hidden=(500, 500))
        head = build(node, "loss", num_classes=10, embedding_dim=encoder.embedding_dim, input_shape=[784])
        return encoder, head

    torch.manual_seed(0)
    _plain_head_loop(*make(), small, 128)  # warm-up: allocator, kernels, imports
    _framework(*make(), {"train": small, "val": small, "test": small}, 128, 1)
    plain, framework = [], []
    for _ in range(3):  # alternated, so that a busy moment of the machine does not land on one side only
        plain.append(best_of(lambda: _plain_head_loop(*make(), split, 128), 1))
        framework.append(best_of(lambda: _framework(*make(), splits, 128, 1), 1))
    return {
        "vae_epoch_ratio": min(framework) / min(plain),
        "vae_epoch_plain_s": min(plain),
        "vae_epoch_framework_s": min(framework),
    }


@case
def startup() -> dict:
    def run(*args: str) -> None:
        subprocess.run([sys.executable, *args], cwd=ROOT, check=True, capture_output=True)

    base = best_of(lambda: run("-c", "pass"))
    help_s = best_of(lambda: run("train.py", "--help"))
    return {"startup_extra_s": help_s - base, "startup_help_s": help_s, "startup_python_s": base}


@case
def clustering_eval() -> dict:
    from sklearn.datasets import make_blobs

    from clusterable.contracts import EvalContext
    from clusterable.evaluation.clustering import cluster_metrics

    x, y = make_blobs(10_000, 64, centers=10, cluster_std=4.0, random_state=0)
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y)

    def score(n: int) -> dict:
        split = {"inputs": x[:n], "labels": y[:n]}
        context = EvalContext("test", split, torch.nn.Identity(), x[:n], train_embeddings=x, train_labels=y)
        return cluster_metrics(x[:n], y[:n], context)

    score(2000)  # warm-up
    seconds = best_of(lambda: score(len(x)))
    return {"clustering_eval_s": seconds}


@case
def probes() -> dict:
    from sklearn.datasets import make_blobs

    from clusterable.contracts import EvalContext
    from clusterable.evaluation.probes import DEFAULT_CLASSIFIERS
    from clusterable.evaluation.probes import probes as fit_probes

    # 10 blobs in 10-D whose spread makes them overlap (the probes score ~0.96, not 1): training and test rows.
    x, y = make_blobs(20_000, 10, centers=10, cluster_std=4.0, random_state=0)
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    train_x, train_y, test_x, test_y = x[:10_000], y[:10_000], x[10_000:], y[10_000:]
    context = EvalContext("test", {}, torch.nn.Identity(), test_x, train_embeddings=train_x,
                          train_labels=train_y, train_all_labels=train_y)  # fmt: skip

    def score(classifiers: tuple[str, ...], n: int = len(test_y)) -> dict:
        return fit_probes(test_x[:n], test_y[:n], context, classifiers=classifiers)

    score(DEFAULT_CLASSIFIERS, 100)  # warm-up (imports, thread pools)
    out = {}
    for name in DEFAULT_CLASSIFIERS:
        out[f"probes_{name}_s"] = best_of(lambda name=name: score((name,)))
        out[f"probes_{name}_acc"] = score((name,))[f"{name}/acc"]
    out["probes_total_s"] = best_of(lambda: score(DEFAULT_CLASSIFIERS))
    return out


@case
def per_sample_ae() -> dict:
    """The CSRL standard AE's protocol: one Adam(weight_decay=0.1) step per sample (AE3, parallel lines, 150 x 5),
    the framework (optimizer_steps=per_sample, the whole split as one Lightning batch) against the authors' plain
    loop, seconds per epoch over 20 epochs."""
    import lightning as L

    from clusterable.data import InMemoryDataModule
    from clusterable.data.synthetic import read_synthetic
    from clusterable.heads.linear_ae import LinearAE
    from clusterable.models.identity import Identity
    from clusterable.module import RepresentationModule

    splits, epochs = read_synthetic("parallel_lines"), 20
    x = splits["train"]["inputs"]

    def adam(params):
        return torch.optim.Adam(params, lr=0.01, weight_decay=0.1)

    def plain() -> None:
        head = LinearAE("ae3", (5,), num_classes=2)
        opt = adam(head.parameters())
        for _ in range(epochs):
            for row in x:
                opt.zero_grad()
                torch.nn.functional.mse_loss(head.decoder(head.encoder(row[None])), row[None]).backward()
                opt.step()

    def framework() -> None:
        dm = InMemoryDataModule("bench", lambda: splits, [5], 2, batch_size=-1, shuffle_batches=False)
        module = RepresentationModule(Identity((5,)), LinearAE("ae3", (5,), num_classes=2), adam,
                                      optimizer_steps="per_sample")  # fmt: skip
        trainer = L.Trainer(
            accelerator="cpu", devices=1, max_epochs=epochs, logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0, num_sanity_val_steps=0,
        )  # fmt: skip
        trainer.fit(module, datamodule=dm)

    plain(), framework()  # warm-up
    plain_s, framework_s = best_of(plain) / epochs, best_of(framework) / epochs
    return {
        "per_sample_ae_ratio": framework_s / plain_s,
        "per_sample_ae_plain_epoch_s": plain_s,
        "per_sample_ae_framework_epoch_s": framework_s,
        "per_sample_ae_plain_step_ms": 1e3 * plain_s / len(x),
    }


def _head_epoch(
    head, x: torch.Tensor, labels: torch.Tensor, batch_size: int, opt: torch.optim.Optimizer
) -> None:
    """One epoch of a CSRL head on in-memory data: Adam steps over index-sliced batches, then (for clustering
    heads) the Lloyd step on the whole set, as RepresentationModule runs it."""
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
    return best_of(lambda: [loop() for _ in range(20)], 5) / best_of(
        lambda: [stacked() for _ in range(20)], 5
    )


@case
def cluster_heads() -> dict:
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
        out[f"cluster_heads_k{k}_loop_over_stacked_ptae"] = _stacked_vs_loop(
            k, rows=batch_size, fan_in=2, fan_out=1
        )
        out[f"cluster_heads_k{k}_loop_over_stacked_tvae"] = _stacked_vs_loop(
            k, rows=512, fan_in=200, fan_out=2
        )
    return out


@case
def retrieval_eval() -> dict:
    """Every row of 60,000 x 512 random features (Stanford Online Products' test size; ~11,000 classes of 2-9 rows)
    queries all the others: our evaluator (exact, torch) against faiss-cpu's exact IndexFlatIP and scikit-learn's
    brute-force NearestNeighbors, all with 2 threads. Ours runs in a fresh subprocess that reports its seconds and
    its peak extra resident memory (the rise of VmHWM over the resident size before the call, after resetting the
    peak through /proc/self/clear_refs): that counts torch's allocations, which tracemalloc does not see."""
    import os

    import numpy as np

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
        import json, resource, time
        torch.set_num_threads(2)
        from clusterable.contracts import EvalContext
        from clusterable.evaluation.retrieval import retrieval_metrics
        options = dict(ks={list(ks)}, distances=["cos"], map_at_r=True, r_precision=True)
        def context(rows):
            return EvalContext("test", {{"labels": labels[:rows]}}, torch.nn.Identity(), x[:rows], x[:rows],
                               labels[:rows])
        retrieval_metrics(x[:3000], labels[:3000], context(3000), **options)  # warm-up: kernels, allocator
        {_probe(" " * 8)}
        start = time.perf_counter()
        out = retrieval_metrics(x, labels, context(len(x)), **options)
        seconds = time.perf_counter() - start
        peak = status("VmHWM:") if how.startswith("VmHWM") else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({{"seconds": seconds, "extra_mb": (peak - before) / 1024, "how": how, "metrics": out}}))
    """)
    load_before = os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-c", child], cwd=ROOT, check=True, capture_output=True, text=True)
    ours = json.loads(done.stdout.strip().splitlines()[-1])

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
    out: dict = {"retrieval_eval_s": ours["seconds"], "retrieval_eval_extra_mb": ours["extra_mb"],
                 "retrieval_eval_memory_measure": ours["how"]}  # fmt: skip
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
        out["retrieval_eval_sklearn_same_neighbours_as_faiss"] = float(
            np.mean([set(a) == set(b) for a, b in pairs])
        )
    for key, value in ours["metrics"].items():
        out[f"retrieval_eval_{key}"] = value
    out["retrieval_eval_loadavg_1min_before_after"] = f"{load_before:.2f} / {os.getloadavg()[0]:.2f}"
    return out


@case
def sc_partition() -> dict:
    """DSCL's partition "with SC" (Law et al. 2017, Algorithm 2) at Stanford Online Products' test size:
    ``spectral_rows`` of 60,000 x 512 embeddings, then the torch k-means (``kmeans_backend=torch``; n_iter 20, the
    default the evaluator uses; one start, ``kmeans_n_init=1``) with k = the number of classes (~11,000 of 2-9
    rows). The data are class-structured, as trained embeddings are: each row is its class centre (N(0, I)) plus
    as much noise (N(0, I)), so that k-means has clusters to find and its iterations go as on trained
    embeddings. 2 torch threads, in a fresh subprocess that reports its seconds and peak extra resident memory
    as ``retrieval_eval`` does; then the NMI against the classes, the
    assignment passes of Lloyd's iterations and the share of the point-centre distances they computed (1 per
    pass without the k-means pruning). Goal: <= 30 s."""
    import os

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
        {_probe(" " * 8)}
        start = time.perf_counter()
        rows = spectral_rows(x)
        spectral_s = time.perf_counter() - start
        assignment, _ = kmeans_module.kmeans(rows, k, 0)
        seconds = time.perf_counter() - start
        if how.startswith("VmHWM"):
            peak = status("VmHWM:")
        else:
            import resource
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        nmi = normalized_mutual_info_score(labels.numpy(), assignment.numpy())
        print(json.dumps({{"seconds": seconds, "spectral_s": spectral_s, "extra_mb": (peak - before) / 1024,
                          "how": how, "nmi": nmi, "k": k, "rank": rows.shape[1], "work": work}}))
    """)
    load_before = os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-c", child], cwd=ROOT, check=True, capture_output=True, text=True)
    ours = json.loads(done.stdout.strip().splitlines()[-1])
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
        "sc_partition_loadavg_1min_before_after": f"{load_before:.2f} / {os.getloadavg()[0]:.2f}",
    }


PAIRWISE_LOSSES = [
    "ce", "pce", "contrastive", "triplet", "multi_similarity", "supcon", "nca", "proxy_nca", "proxy_anchor",
    "arcface", "normsoftmax",
]  # fmt: skip


@case
def pairwise_losses(
    batch: int = 256, dim: int = 128, classes: int = 32, steps: int = 10, names: list[str] | None = None
) -> dict:
    """Seconds of one forward + backward step of each named loss head built from conf/loss, best of 3 runs of
    ``steps`` steps on the same random embeddings (batch x dim, ``classes`` classes of batch / classes each), and
    the ratio to the ``ce`` head (Boudiaf et al.'s cross-entropy: a linear classifier, the unary baseline)."""
    from hydra import compose, initialize_config_dir

    from clusterable.config import build

    names = names or PAIRWISE_LOSSES
    g = torch.Generator().manual_seed(0)
    embeddings = torch.randn(batch, dim, generator=g).requires_grad_(True)
    labels = torch.arange(batch) % classes
    seconds = {}
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        for name in ["ce", *(n for n in names if n != "ce")]:
            node = compose(overrides=[f"+loss={name}"]).loss
            head = build(node, "loss", num_classes=classes, embedding_dim=dim)

            def run(head=head) -> None:
                for _ in range(steps):
                    embeddings.grad = None
                    head.zero_grad(set_to_none=True)
                    head(embeddings, labels)["loss"].backward()

            run()  # warm-up (lazy initialisations, allocator)
            seconds[name] = best_of(run) / steps
    result = {}
    for name, s in seconds.items():
        result[f"pairwise_losses_{name}_s"] = s
        if name != "ce":
            result[f"pairwise_losses_{name}_vs_ce"] = s / seconds["ce"]
    return result


@case
def image_pipeline() -> dict:
    """Training images per second of ``ImageDataModule`` (the decoded cache, batches read by a prefetching thread,
    the CUB recipe's crop + flip + colour jitter batched on the training device) against a torchvision
    ImageFolder-style ``DataLoader`` that decodes every JPEG and applies torchvision's per-sample transforms
    (the same recipe, Boudiaf et al.'s ``get_transforms``), ``num_workers=2``, batch 128, ``drop_last``.

    512 synthetic JPEGs of about 500 x 375 (CUB's usual size, portrait and landscape) in CUB-200-2011's real
    layout. Both pipelines hand the batch to the device and wait for it; the one-off cache build is excluded
    from the timing and reported (``image_pipeline_cache_build_s``). Goal: ratio >= 3.
    """
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset
    from torchvision import transforms as T

    from clusterable.data.images import ImageDataModule
    from clusterable.data.retrieval_sets import read_cub200

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n, batch_size, classes = 512, 128, 16
    root = Path(tempfile.mkdtemp(prefix="bench_image_pipeline_"))
    base = root / "CUB_200_2011"
    rng = np.random.default_rng(0)
    shapes = [(375, 500), (500, 375), (333, 500), (375, 500), (400, 500), (500, 332)]
    images, labels = [], []
    for i in range(n + 2):  # the last two: one test class, so that the reader has its two parts
        c = 1 + i % classes if i < n else 101
        relative = f"{c:03d}.Class_{c}/img_{i:04d}.jpg"
        h, w = shapes[i % len(shapes)]
        coarse = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize(
            (w, h), Image.BICUBIC
        )
        texture = rng.normal(0, 12, (h, w, 3))
        pixels = np.clip(np.asarray(coarse, dtype=np.float64) + texture, 0, 255).astype(np.uint8)
        (base / "images" / relative).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(base / "images" / relative, quality=90)
        images.append(f"{i + 1} {relative}")
        labels.append(f"{i + 1} {c}")
    (base / "images.txt").write_text("\n".join(images) + "\n")
    (base / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    recipe = {
        "scale": (0.16, 1.0),
        "ratio": (3 / 4, 4 / 3),
        "jitter": (0.25, 0.25, 0.25, 0.0),
    }  # Boudiaf, CUB

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    # --- ours: decode once, then batches from the memmap, views on the device
    dm = ImageDataModule(
        "bench", lambda: read_cub200(root, expected_sizes=None), [3, 224, 224], classes, batch_size=batch_size,
        resize="shorter:256", crop_scale=list(recipe["scale"]), crop_ratio=list(recipe["ratio"]),
        jitter=list(recipe["jitter"]), validation="none", decode_workers=2, cache_dir=str(root / "cache"),
        progress=False,
    )  # fmt: skip
    start = time.perf_counter()
    dm.load()
    build_s = time.perf_counter() - start
    dm.trainer = SimpleNamespace(training=True, global_rank=0, world_size=1)

    def ours() -> int:
        seen = 0
        for batch in dm.train_dataloader():
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            seen += len(dm.on_after_batch_transfer(batch, 0)["inputs"])
        sync()
        return seen

    # --- the baseline: decode + resize + per-sample transforms in 2 DataLoader workers
    paths = [base / "images" / line.split()[1] for line in images[:n]]
    transform = T.Compose([
        T.Resize(256), T.ColorJitter(*recipe["jitter"]),
        T.RandomResizedCrop(224, scale=recipe["scale"], ratio=recipe["ratio"]), T.RandomHorizontalFlip(), T.ToTensor(),
    ])  # fmt: skip

    class Folder(Dataset):
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
            return transform(Image.open(paths[i]).convert("RGB")), i % classes

    loader = DataLoader(Folder(), batch_size=batch_size, shuffle=True, num_workers=2, drop_last=True,
                        persistent_workers=True, pin_memory=device.type == "cuda")  # fmt: skip

    def baseline() -> int:
        seen = 0
        for x, _ in loader:
            seen += len(x.to(device, non_blocking=True))
        sync()
        return seen

    rates = {}
    for name, run in (("ours", ours), ("baseline", baseline)):
        run()  # warm-up: worker start, page cache, CUDA kernels
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            seen = run()
            best = min(best, time.perf_counter() - start)
        rates[name] = seen / best
    return {
        "image_pipeline_ratio": rates["ours"] / rates["baseline"],
        "image_pipeline_ours_img_s": rates["ours"],
        "image_pipeline_baseline_img_s": rates["baseline"],
        "image_pipeline_cache_build_s": build_s,
        "image_pipeline_device": str(device),
        "image_pipeline_torch_threads": torch.get_num_threads(),
    }


@case
def resnet50_training(batch: int = 256, steps: int = 40, side: int = 224, accelerator: str = "gpu") -> dict:
    """ResNet-50 training images per second through the framework on a CUDA GPU: ImageDataModule (fake source,
    in memory, 256 x 256 canvases), per-image augmentation on the GPU, the Boudiaf CE head, SGD, warmcos,
    bf16-mixed and channels-last, batch 256; images per second over the steps after a warm-up epoch. Reported
    with fp32 / no channels-last for comparison. Goal (issue): >= 2,500 img/s on one H100-class GPU.
    Skipped (reported as such) without CUDA."""
    if accelerator == "gpu" and not torch.cuda.is_available():
        return {"resnet50_training": "skipped: no CUDA device"}
    import functools

    import lightning as L

    from clusterable.data.images import ImageDataModule
    from clusterable.heads.ce import CrossEntropy
    from clusterable.models.backbones import ResNet50
    from clusterable.module import RepresentationModule
    from clusterable.schedules import warmcos

    torch.backends.cudnn.benchmark = True
    out: dict = {"resnet50_device": torch.cuda.get_device_name() if accelerator == "gpu" else "cpu"}
    for precision, channels_last in (("bf16-mixed", True), ("bf16-mixed", False), ("32-true", False)):
        dm = ImageDataModule(
            "bench",
            None,
            [3, side, side],
            num_classes=100,
            batch_size=batch,
            source="fake",
            fake_size=batch * steps,
            seed=0,
            validation="none",
            jitter=[0.25, 0.25, 0.25, 0.0],
        )
        encoder = ResNet50(input_shape=(3, side, side), weights=None)
        head = CrossEntropy(num_classes=100, embedding_dim=encoder.embedding_dim)
        opt = functools.partial(torch.optim.SGD, lr=0.02, momentum=0.9, weight_decay=5e-4)
        module = RepresentationModule(
            encoder,
            head,
            opt,
            scheduler=functools.partial(warmcos, warmup_steps=100),
            weight_decay_on="matrices",
            channels_last=channels_last,
            class_disjoint=True,
        )
        timer = _StepTimer(skip=5)
        trainer = L.Trainer(
            max_epochs=1,
            accelerator=accelerator,
            devices=1,
            precision=precision,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            callbacks=[timer],
        )
        trainer.fit(module, datamodule=dm)
        key = f"resnet50_img_per_s/{precision}{'/channels_last' if channels_last else ''}"
        out[key] = round(batch * timer.steps / timer.seconds, 1)
    return out


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class _StepTimer:
    """Seconds of the training steps after the first ``skip`` (cudnn autotuning, allocator warm-up)."""

    def __new__(cls, skip: int):
        import lightning as L

        class Timer(L.Callback):
            def __init__(self) -> None:
                self.count, self.steps, self.seconds, self.start = 0, 0, 0.0, None

            def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
                if self.count == skip:
                    _sync()
                    self.start = time.perf_counter()

            def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
                self.count += 1
                if self.start is not None:
                    self.steps += 1

            def on_train_epoch_end(self, trainer, module) -> None:
                _sync()
                self.seconds = time.perf_counter() - self.start

        return Timer()


@case
def dscl() -> dict:
    """DSCL's loss (Law et al. 2017, Eq. 10), forward + backward, float32 on the CPU: our closed form (Cholesky of F^T
    F; Eq. 9's gradient) and its SVD fallback (forced) against autograd through ``torch.linalg.pinv`` of the same
    trace, at the paper's batch n = 1,260 with d = 100, k = 63 and with d = k = 512 (SOP). Same gradients (relative
    difference reported); goal >= 10x at the first shape."""
    from unittest import mock

    from clusterable.heads.dscl import spectral_trace

    def closed(f: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = f.clone().requires_grad_()
        spectral_trace(x, labels)[0].backward()
        return x.grad

    def svd(f: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        failed = lambda a: (a, torch.ones((), dtype=torch.int32))  # noqa: E731 - Cholesky "fails": the SVD path
        with mock.patch("torch.linalg.cholesky_ex", failed):
            return closed(f, labels)

    def through_pinv(f: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = f.clone().requires_grad_()
        y = torch.nn.functional.one_hot(labels).to(f.dtype)  # (n, k)
        means = (y / y.sum(0)).T @ x  # Y^+ F (k, d)
        (means * (torch.linalg.pinv(x) @ y).T).sum().backward()  # tr(Y^+ F F^+ Y), autograd through pinv
        return x.grad

    out = {}
    for n, d, k in ((1260, 100, 63), (1260, 512, 512)):
        g = torch.Generator().manual_seed(0)
        f, labels = torch.randn(n, d, generator=g), torch.arange(n) % k
        reference = through_pinv(f, labels)
        times = {name: best_of(lambda fn=fn, f=f, labels=labels: fn(f, labels), 5) for name, fn in
                 (("closed", closed), ("svd", svd), ("pinv", through_pinv))}  # fmt: skip
        tag = f"n{n}_d{d}_k{k}"
        out[f"dscl_{tag}_closed_ms"] = 1000 * times["closed"]
        out[f"dscl_{tag}_pinv_autograd_over_closed"] = times["pinv"] / times["closed"]
        out[f"dscl_{tag}_pinv_autograd_over_svd"] = times["pinv"] / times["svd"]
        for name, fn in (("closed", closed), ("svd", svd)):
            diff = (fn(f, labels) - reference).norm() / reference.norm()
            out[f"dscl_{tag}_{name}_grad_rel_diff"] = float(diff)
    return out


# Frequent words of news text, most frequent first (stop words among them: they are most of its tokens); the rest of
# ``_news_articles``' vocabulary is made-up words, so that the distinct tokens, which the preprocessing's memory of
# tokens caches, keep growing with the corpus as a news corpus's do.
NEWS_WORDS = tuple(
    "the to of a in and on for said its with has that is at by as from was will after new an it have be more are "
    "over two first year says company officials government president people but up not than week last Monday "
    "Tuesday Wednesday Thursday Friday million billion percent shares market report quarter profit Iraq Bush "
    "election team game season win won players coach league software Microsoft Internet computer users study "
    "researchers health drug patients oil prices stocks investors deal chief executive minister talks troops police "
    "killed European Union film star music show album singer".split()
)
NEWS_SOURCES = ("Reuters", "AP", "AFP", "Yahoo Business", "BBC News", "CNN", "USATODAY.com", "Forbes")
NEWS_ENTERTAINMENT_SOURCES = ("E! Online", "TheCelebrityCafe.com", "Reuters Entertainment")
# Categories of the AG corpus that are none of AGNews-8's topics (Entertainment / Top News / Top Stories from
# sources that are not entertainment ones are none either).
OTHER_CATEGORIES = ("Italia", "Software and Developement", "Music Feeds", "Toons", "Top News", "Top Stories")


def _news_articles(n: int, rng: random.Random, made_up: int = 40_000) -> list[tuple[str, str]]:
    """``n`` made-up news articles, (title, description): a title of 5-9 words and a description of 18-28 (the
    supplement's documents average 20-24 words after preprocessing), words drawn by Zipf's law from ``NEWS_WORDS``
    then ``made_up`` made-up words (a fifth of them names, capitalised), with what the preprocessing has to handle:
    amounts ("$2.5 billion", "$40 million"), years, percentages, numbers with separators, possessives (some as
    "&#39;s", AG's escaped form), an HTML tag, a source prefix ("AP - "), commas, quotes and line breaks."""
    onsets = ("b c d f g h j k l m n p r s t v w z br cr dr st tr ch sh th pl gr").split()
    nuclei, codas = ("a e i o u ai ea ou io").split(), ("", "n", "r", "s", "t", "l", "m", "nd", "st", "ck")
    words, seen = list(NEWS_WORDS), set(NEWS_WORDS)
    while len(words) < len(NEWS_WORDS) + made_up:
        syllables = rng.choice((1, 1, 2, 2, 2, 3))  # words of 2-15 letters, most of 4-8
        word = "".join(rng.choice(onsets) + rng.choice(nuclei) + rng.choice(codas) for _ in range(syllables))
        if word not in seen:
            seen.add(word)
            words.append(word.capitalize() if rng.random() < 0.2 else word)
    cum = list(itertools.accumulate(1.0 / (rank + 2.7) for rank in range(len(words))))

    def number() -> str:
        kind = rng.randrange(6)
        if kind == 0:
            return f"${rng.uniform(1, 99):.1f} billion"
        if kind == 1:
            return f"${rng.randrange(2, 900)} million"
        if kind == 2:
            return str(rng.randrange(1990, 2006))
        if kind == 3:
            return f"{rng.uniform(0.1, 30):.1f}%"
        return f"{rng.randrange(1000, 500_000):,}" if kind == 4 else str(rng.randrange(2, 100))

    def sentence(length: int) -> str:
        out = []
        for word in rng.choices(words, cum_weights=cum, k=length):
            r = rng.random()
            if r < 0.07:
                word = number()
            elif r < 0.09:
                word += rng.choice(("'s", "&#39;s"))
            elif r < 0.15:
                word += ","
            out.append(word)
        out[0] = out[0][0].upper() + out[0][1:]
        if rng.random() < 0.1:
            out[-1] = f'"{out[-1]}"'
        return " ".join(out)

    articles = []
    for _ in range(n):
        prefix = f"{rng.choice(('AP', 'AFP', 'Reuters'))} - " if rng.random() < 0.3 else ""
        description = prefix + sentence(rng.randint(18, 28)) + "."
        if rng.random() < 0.02:
            description += " <b>" + sentence(3) + "</b>"
        # A line break inside the text, now and then: the dump escapes it, the reader joins the lines again.
        if rng.random() < 0.01:
            description = description.replace(", ", ",\n", 1)
        articles.append((sentence(rng.randint(5, 9)), description))
    return articles


def _dump_line(fields: tuple[str | None, ...]) -> bytes:
    """One record of the ``newsSpace`` dump as MySQL's ``INTO OUTFILE`` writes it: tab-separated, NULL as \\N,
    backslash, tab and newline escaped with a backslash."""

    def escape(field: str) -> bytes:
        return field.encode().replace(b"\\", b"\\\\").replace(b"\t", b"\\\t").replace(b"\n", b"\\\n")

    return b"\t".join(b"\\N" if f is None else escape(f) for f in fields) + b"\n"


def _write_newsspace(path: Path, per_topic: int, seed: int = 0) -> int:
    """A made-up AG corpus for AGNews-8 at ``per_topic`` documents a topic, written at ``path`` as the ``newsSpace``
    dump; returns its number of records. Each of the seven plain topics has 2 x ``per_topic`` articles (so that
    the recipe samples), Entertainment ``per_topic`` from its sources in its three categories; then articles of no
    topic, so that there are as many records per document as the AG corpus (more than a million articles) has for
    AGNews-8's 94,721. The candidates' texts are all different (their preprocessing is what is timed); the others,
    only read, repeat 1,000 texts."""
    from clusterable.data.agnews import ENTERTAINMENT_CATEGORIES, TOPICS

    rng = random.Random(seed)
    seven = [topic for topic in TOPICS if topic != "Entertainment"]
    texts = _news_articles(15 * per_topic + 1000, rng)
    rows = [(rng.choice(NEWS_SOURCES), topic) for topic in seven for _ in range(2 * per_topic)]
    entertainment = NEWS_ENTERTAINMENT_SOURCES
    rows += [(rng.choice(entertainment), rng.choice(ENTERTAINMENT_CATEGORIES)) for _ in range(per_topic)]
    records = round(8 * per_topic * 1_000_000 / 94_721)
    lines = [
        _dump_line((source, f"http://example.com/{i}", texts[i][0], None, category, texts[i][1], "5",
                    "2004-08-16 00:00:00", None))
        for i, (source, category) in enumerate(rows)
    ]  # fmt: skip
    pool = [
        _dump_line((rng.choice(NEWS_SOURCES), f"http://example.com/x{j}", title, None, rng.choice(OTHER_CATEGORIES),
                    description, "5", "2004-08-16 00:00:00", None))
        for j, (title, description) in enumerate(texts[len(rows):])
    ]  # fmt: skip
    lines += [pool[j % len(pool)] for j in range(records - len(lines))]
    rng.shuffle(lines)  # the dump's order is the articles' arrival, topics mixed
    with open(path, "wb") as f:
        f.writelines(lines)
    return len(lines)


def _agnews_build(per_topic: int = 2_500) -> dict:
    """The one-time AGNews-8 build (``agnews.read_agnews8``, ``lemmatiser="auto"`` as a run uses it) from a made-up
    AG corpus in the ``newsSpace`` dump format (``_write_newsspace``: 8 x ``per_topic`` documents, records in the AG
    corpus's proportion), in a fresh folder, so the build reads, samples, preprocesses, assembles and writes its
    cache; then a second call, served by that cache. spaCy's loading is timed apart (once per process, whatever
    the corpus's size), so that the seconds per 10,000 documents are the build's own."""
    from clusterable.data import text_preprocess
    from clusterable.data.agnews import read_agnews8

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "newsSpace"
        start = time.perf_counter()
        records = _write_newsspace(path, per_topic)
        out["text_corpus_fixture_write_s"] = time.perf_counter() - start
        out["text_corpus_fixture_mb"] = path.stat().st_size / 1e6
        start = time.perf_counter()
        text_preprocess.load_preprocessor("auto")  # cached per process: the build below finds it loaded
        out["text_corpus_spacy_load_s"] = time.perf_counter() - start

        def build():
            return read_agnews8(tmp, source="raw", per_topic=per_topic, progress=False)

        start = time.perf_counter()
        corpus = build()
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        again = build()
        out["text_corpus_from_cache_s"] = time.perf_counter() - start
    notes = corpus.notes
    assert not notes["cache_hit"] and again.notes["cache_hit"], (notes["cache_hit"], again.notes["cache_hit"])
    assert notes["records"] == records and not notes["malformed_records"], notes
    assert notes["documents"] == 8 * per_topic, notes
    assert all(torch.equal(corpus.splits[k]["inputs"], again.splits[k]["inputs"]) for k in corpus.splits)
    out.update({
        "text_corpus_build_s": seconds, "text_corpus_docs": notes["documents"], "text_corpus_records": records,
        "text_corpus_build_per_10k_docs_s": seconds * 10_000 / notes["documents"],
        "text_corpus_vocab": notes["vocab_size"], "text_corpus_lemmatiser": notes["lemmatiser"],
    })  # fmt: skip
    return out


@case
def text() -> dict:
    """COREL's text CNN on AGNews-8's size (94,721 documents; our fake corpus, ``data.text.fake_corpus``, padded to
    25 tokens, 50,000 words with random 300-d vectors): one epoch through the framework (``_framework``) against
    ``_plain_loop`` with the same model (``conf/model/text_cnn.yaml``), CCE head and batches of 128; after a warm-up
    on 5,000 rows, the best of 2 alternated runs each (an epoch is about a minute on 2 CPU threads). Goal <= 1.2.

    Then ``glove.read_glove`` restricted to a 50,000-word vocabulary (45,000 words in the file, 4,995 not, PAD, UNK
    and the number tokens) from a generated GloVe-format file of 2.2 million lines (``glove.840B.300d.txt``'s
    count; 300 random numbers of 4 or 5 decimals a line, a word with spaces every 50,000 lines), in a fresh
    subprocess that reports the scan's seconds and its peak extra resident memory (as ``retrieval_eval`` does),
    then the seconds of a second call served by the cache. The file's lines reuse 1,000 formatted vectors (the
    reader parses only the wanted words' vectors, so its cost does not depend on their values) so that writing
    5.7 GB takes seconds; it is read back warm from the page cache, not from a cold disk.

    Last, the one-time AGNews-8 corpus build (``_agnews_build``): ``agnews.read_agnews8`` on a generated
    ``newsSpace`` dump of made-up news articles (``_write_newsspace``; 8 topics of 2,500 documents, 20,000 in all,
    among some 211,000 records, the AG corpus's proportion), reading, sampling, spaCy preprocessing, assembling and
    caching: seconds in all and per 10,000 documents (spaCy's loading, once per process, apart), then seconds of a
    second call served by the cache (about 15 seconds in all, generating the file included)."""
    import math

    from hydra import compose, initialize_config_dir

    from clusterable.config import build
    from clusterable.data.text import fake_corpus, random_vectors
    from clusterable.heads import CCELoss

    n, length, words, classes = 94_721, 25, 50_000, 8
    corpus = fake_corpus(math.ceil(n / classes), length, words, seed=0, num_classes=classes)
    split = {k: v[:n] for k, v in corpus.splits["train"].items()}
    splits = {"train": split, "val": split, "test": split}
    vectors, _ = random_vectors(corpus.vocab, 300, 0)
    small = {k: v[:5000] for k, v in split.items()}
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        node = compose(overrides=["+model=text_cnn"]).model

    def make() -> tuple:
        encoder = build(node, "model", input_shape=[length], word_vectors=vectors)
        return encoder, CCELoss(num_classes=classes, embedding_dim=encoder.embedding_dim)

    torch.manual_seed(0)
    _plain_loop(*make(), small, 128, 1)  # warm-up: allocator, kernels, imports
    _framework(*make(), {"train": small, "val": small, "test": small}, 128, 1)
    plain, framework = [], []
    for _ in range(2):  # alternated, so that a busy moment of the machine does not land on one side only
        plain.append(best_of(lambda: _plain_loop(*make(), split, 128, 1), 1))
        framework.append(best_of(lambda: _framework(*make(), splits, 128, 1), 1))
    out: dict = {"text_cnn_epoch_ratio": min(framework) / min(plain), "text_cnn_epoch_plain_s": min(plain),
                 "text_cnn_epoch_framework_s": min(framework)}  # fmt: skip

    lines, found, oov, every = 2_200_000, 45_000, 4_995, 48
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "glove.840B.300d.txt"
        start = time.perf_counter()
        rng = np.random.default_rng(0)
        pool = [" ".join(f"{v:.{4 + i % 2}f}" for v in row).encode() for i, row in
                enumerate(rng.normal(0.0, 0.4, (1000, 300)))]  # fmt: skip
        with open(path, "wb") as f:
            for first in range(0, lines, 10_000):
                f.writelines(
                    (b"a b%d " % i if i % 50_000 == 1 else b"w%d " % i) + pool[i % 1000] + b"\n"
                    for i in range(first, min(first + 10_000, lines))
                )
        out["text_glove_fixture_write_s"] = time.perf_counter() - start
        out["text_glove_fixture_gb"] = path.stat().st_size / 1e9
        child = textwrap.dedent(f"""
            import json, resource, time
            from clusterable.data.corpus import PAD, SPECIAL_TOKENS, UNK
            from clusterable.data.glove import read_glove
            vocab = [PAD, UNK, *SPECIAL_TOKENS, *(f"w{{k * {every}}}" for k in range({found})),
                     *(f"oov{{k}}" for k in range({oov}))]
            {_probe(" " * 12)}
            start = time.perf_counter()
            _, stats = read_glove({str(path)!r}, vocab, cache_dir={tmp!r})
            seconds = time.perf_counter() - start
            peak = status("VmHWM:") if how.startswith("VmHWM") else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            start = time.perf_counter()
            _, again = read_glove({str(path)!r}, vocab, cache_dir={tmp!r})
            print(json.dumps({{"seconds": seconds, "extra_mb": (peak - before) / 1024, "how": how, "stats": stats,
                              "cached_s": time.perf_counter() - start, "cached": again["cached"]}}))
        """)
        done = subprocess.run([sys.executable, "-c", child], cwd=ROOT, check=True, capture_output=True,
                              text=True)  # fmt: skip
    ours = json.loads(done.stdout.strip().splitlines()[-1])
    assert ours["stats"]["found"] == found and ours["stats"]["oov"] == oov and ours["cached"], ours
    out.update({
        "text_glove_scan_s": ours["seconds"], "text_glove_scan_extra_mb": ours["extra_mb"],
        "text_glove_memory_measure": ours["how"], "text_glove_lines": ours["stats"]["lines"],
        "text_glove_vocab": found + oov + 5, "text_glove_from_cache_s": ours["cached_s"],
    })  # fmt: skip
    out.update(_agnews_build())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=sorted(CASES), help="run one case")
    args = parser.parse_args()
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    results: dict = {"torch_threads": torch.get_num_threads()}
    for name, fn in CASES.items():
        if args.only and name != args.only:
            continue
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        out = fn()
        for k, v in out.items():
            print(
                f"[bench]   {k}: {v:.4g}" if isinstance(v, float) else f"[bench]   {k}: {v}", file=sys.stderr
            )
        results.update(out)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
