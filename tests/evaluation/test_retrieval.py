"""The retrieval evaluator against a brute-force computation in plain Python loops: Recall@K, MAP@R and
R-Precision, both distances, all-vs-all and query/gallery, duplicates, ties, chunking and the errors."""

from __future__ import annotations

import math
from pathlib import Path

import hydra
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from clusterable.config import CONFIG_DIR, build
from clusterable.contracts import EVALUATOR_ARGS, DeclaresMetrics, EvalContext, declared_metrics
from clusterable.evaluation.retrieval import RetrievalMetrics

CONF = Path(CONFIG_DIR) / "evaluator" / "retrieval.yaml"


pytestmark = pytest.mark.usefixtures("one_thread")


def context(x: torch.Tensor, y: torch.Tensor, **split: torch.Tensor) -> EvalContext:
    return EvalContext("test", {"inputs": x, "labels": y, **split}, nn.Identity(), x, x, y)


def brute_force(x, y, ks, distance, is_query=None, is_gallery=None) -> dict[str, float]:
    """The metrics by their definitions, one query at a time: neighbours sorted by (distance, index), the query
    itself left out by index, queries with R = 0 left out, float64 throughout."""
    x, y = np.asarray(x, dtype=np.float64), [int(v) for v in y]
    n = len(x)
    if distance == "cos":
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    queries = [i for i in range(n) if is_query is None or is_query[i]]
    gallery = [j for j in range(n) if is_gallery is None or is_gallery[j]]
    recall = {k: [] for k in ks}
    average_precisions, r_precisions = [], []
    for q in queries:
        candidates = [g for g in gallery if g != q]
        if distance == "l2":
            dist = dict(zip(candidates, np.sum((x[candidates] - x[q]) ** 2, axis=1).tolist(), strict=True))
        else:
            dist = dict(zip(candidates, (-(x[candidates] @ x[q])).tolist(), strict=True))
        ranked = sorted(candidates, key=lambda g: (dist[g], g))
        r = sum(1 for g in candidates if y[g] == y[q])
        if r == 0:
            continue
        hit = [y[g] == y[q] for g in ranked]
        for k in ks:
            recall[k].append(float(any(hit[:k])))
        r_precisions.append(sum(hit[:r]) / r)
        correct, total = 0, 0.0
        for i in range(r):
            if hit[i]:
                correct += 1
                total += correct / (i + 1)
        average_precisions.append(total / r)

    def mean(values):
        return sum(values) / len(values) if values else float("nan")

    out = {f"recall@{k}/{distance}": mean(recall[k]) for k in ks}
    out[f"map@r/{distance}"] = mean(average_precisions)
    out[f"r_precision/{distance}"] = mean(r_precisions)
    return out


def assert_same(out: dict[str, float], expected: dict[str, float]) -> None:
    assert list(out) == list(expected)
    for key, value in expected.items():
        assert (math.isnan(value) and math.isnan(out[key])) or out[key] == pytest.approx(value, abs=1e-12), key


def exact_points(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Points whose scores are exact in float32 under both distances, so that ties are real ties: entries +-1
    (norm 2) times a power of two, and 4 classes (many equal distances and similarities)."""
    g = torch.Generator().manual_seed(seed)
    signs = torch.randint(0, 2, (n, 4), generator=g).float() * 2 - 1
    x = signs * 2.0 ** torch.randint(0, 3, (n, 1), generator=g)
    return x, torch.randint(0, 4, (n,), generator=g)


KS = [1, 2, 4, 8]


@pytest.mark.parametrize(
    "seed, chunk_size", [(0, 2), *((seed, chunk) for seed in (0, 1, 2) for chunk in (7, 16, 1000))]
)
def test_all_vs_all_matches_brute_force_with_ties(seed, chunk_size):
    # One block (1000), blocks wider than K + 1 (16: topk, filter, merges), narrower than K (7, 2: every entry).
    x, y = exact_points(30, seed)
    out = RetrievalMetrics(ks=KS, distances=["l2", "cos"], chunk_size=chunk_size)(x, y, context(x, y))
    expected = {**brute_force(x, y, KS, "l2"), **brute_force(x, y, KS, "cos")}
    assert_same(out, {key: expected[key] for key in RetrievalMetrics(ks=KS, distances=["l2", "cos"]).metric_names()})


@pytest.mark.parametrize("chunk_size", [3, 1000])
def test_integer_grid_l2_matches_brute_force(chunk_size):
    # Small integer coordinates: many exactly equal Euclidean distances, in rows larger than a block.
    g = torch.Generator().manual_seed(3)
    x, y = torch.randint(-2, 3, (28, 3), generator=g).float(), torch.randint(0, 3, (28,), generator=g)
    out = RetrievalMetrics(ks=[1, 3, 5], distances=["l2"], chunk_size=chunk_size)(x, y, context(x, y))
    assert_same(out, brute_force(x, y, [1, 3, 5], "l2"))


@pytest.mark.parametrize("mode", ["all", "query/gallery"])
def test_blocks_filtered_by_group_maxima_match_brute_force(mode):
    # 301 rows (padded to 304) in blocks of 104 (chunks of 128): wide enough (13 groups of 8 a row) for a
    # query's first block to be bounded by its groups' maxima rather than a topk, and every later block found
    # through the groups whose maximum reaches the bound, by rows and, on the symmetric blocks, by columns; with
    # many exact ties at the bounds. K = 10 (R is at most 6).
    x, y = exact_points(301, 13)
    y = torch.arange(301) % 60
    split = {}
    if mode == "query/gallery":
        split = {"is_query": torch.arange(301) % 3 != 0, "is_gallery": torch.arange(301) % 5 != 1}
    ks = [1, 3, 10]
    out = RetrievalMetrics(ks=ks, distances=["l2", "cos"], chunk_size=128)(x, y, context(x, y, **split))
    masks = (split.get("is_query"), split.get("is_gallery"))
    expected = {**brute_force(x, y, ks, "l2", *masks), **brute_force(x, y, ks, "cos", *masks)}
    assert_same(out, {key: expected[key] for key in RetrievalMetrics(ks=ks, distances=["l2", "cos"]).metric_names()})


def test_random_features_match_brute_force_and_do_not_depend_on_the_chunk_size():
    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(40, 6, generator=g), torch.arange(40) % 5
    expected = {**brute_force(x, y, KS, "l2"), **brute_force(x, y, KS, "cos")}
    results = [RetrievalMetrics(ks=KS, distances=["l2", "cos"], chunk_size=c)(x, y, context(x, y)) for c in (5, 13, 64)]
    for out in results:
        assert out == results[0]
        for key, value in expected.items():
            assert out[key] == pytest.approx(value, abs=1e-12), key


def test_several_threads_give_the_same_result_and_are_restored():
    # The matmuls (NumPy's BLAS) and the candidate bookkeeping on 2 threads: the same answers, and the
    # thread settings are left as they were.
    x, y = exact_points(150, 14)
    options = {"ks": [1, 5], "distances": ["l2", "cos"], "chunk_size": 60}
    one = RetrievalMetrics(**options)(x, y, context(x, y))
    torch.set_num_threads(2)
    assert RetrievalMetrics(**options)(x, y, context(x, y)) == one
    assert torch.get_num_threads() == 2


def test_duplicates_are_each_others_nearest_neighbour():
    # Three classes of two identical points: excluding the query by rank instead of by index (dropping the
    # first neighbour) would drop the copy instead of the query itself whenever the copy comes first.
    base = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    x, y = base.repeat(2, 1), torch.tensor([0, 1, 2, 0, 1, 2])
    out = RetrievalMetrics(ks=[1], distances=["l2", "cos"])(x, y, context(x, y))
    assert out == {f"{name}/{d}": 1.0 for d in ("l2", "cos") for name in ("recall@1", "map@r", "r_precision")}


def test_ties_go_to_the_lower_gallery_index():
    # Query 0 at the origin; rows 1-4 all at distance 1 (cosine does not apply to the origin: l2 only).
    x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [5.0, 5.0]])
    y = torch.tensor([0, 1, 0, 0, 2, 2])
    queries = torch.tensor([True, False, False, False, False, False])
    gallery = ~queries
    out = RetrievalMetrics(ks=[1, 2, 3], distances=["l2"])(x, y, context(x, y, is_query=queries, is_gallery=gallery))
    # Ranked by (distance, index): 1 (class 1), 2 (class 0), 3 (class 0), 4, 5. R = 2.
    assert out["recall@1/l2"] == 0.0 and out["recall@2/l2"] == 1.0 and out["recall@3/l2"] == 1.0
    assert out["r_precision/l2"] == 0.5
    assert out["map@r/l2"] == pytest.approx((1 / 2) / 2)


@pytest.mark.parametrize("chunk_size", [2, 5, 1000])
def test_query_gallery_mode_matches_brute_force(chunk_size):
    x, y = exact_points(26, 5)
    g = torch.Generator().manual_seed(6)
    is_query = torch.rand(26, generator=g) < 0.5
    is_gallery = torch.rand(26, generator=g) < 0.7
    is_query[:3] = is_gallery[:3] = True  # rows in both: still not their own neighbours
    y[25], is_query[25], is_gallery[25] = 9, True, False  # a query whose class is not in the gallery
    split = {"is_query": is_query, "is_gallery": is_gallery}
    ks = [1, 2, int(is_gallery.sum())]  # K may be the whole gallery
    out = RetrievalMetrics(ks=ks, distances=["l2", "cos"], chunk_size=chunk_size)(x, y, context(x, y, **split))
    expected = {
        **brute_force(x, y, ks, "l2", is_query, is_gallery),
        **brute_force(x, y, ks, "cos", is_query, is_gallery),
    }
    assert_same(out, {key: expected[key] for key in RetrievalMetrics(ks=ks, distances=["l2", "cos"]).metric_names()})


def test_lone_queries_and_unlabelled_rows_are_left_out():
    x, y = exact_points(20, 7)
    y[0] = 17  # the only row of its class: a lone query
    y[1] = -1  # unlabelled: neither query nor gallery
    out = RetrievalMetrics(ks=[1, 3], distances=["l2"])(x, y, context(x, y))
    keep = torch.arange(20) != 1
    assert_same(out, brute_force(x[keep], y[keep], [1, 3], "l2"))
    # Every query lone: nothing to average (pytorch-metric-learning reports 0; we report NaN).
    x, y = torch.randn(4, 3), torch.arange(4)
    assert all(math.isnan(v) for v in RetrievalMetrics(ks=[1])(x, y, context(x, y)).values())


def test_keys_are_metric_names_and_the_evaluator_declares_them():
    x, y = exact_points(12, 8)
    evaluator = RetrievalMetrics(ks=[1, 4], distances=["cos"], map_at_r=False, r_precision=True)
    assert isinstance(evaluator, DeclaresMetrics) and declared_metrics(evaluator) == evaluator.metric_names()
    assert list(evaluator(x, y, context(x, y))) == evaluator.metric_names()
    assert evaluator.metric_names() == ["recall@1/cos", "recall@4/cos", "r_precision/cos"]
    assert RetrievalMetrics().metric_names() == [
        *(f"recall@{k}/{d}" for d in ["cos"] for k in (1, 2, 4, 8, 16, 32)),
        "map@r/cos",
        "r_precision/cos",
        *(f"recall@{k}/l2" for k in (1, 2, 4, 8, 16, 32)),
        "map@r/l2",
        "r_precision/l2",
    ]


def test_runs_on_the_embeddings_device_in_float32():
    x, y = exact_points(12, 9)
    out64 = RetrievalMetrics(ks=[1])(x.double(), y, context(x, y))
    assert out64 == RetrievalMetrics(ks=[1])(x, y, context(x, y))
    assert out64 == RetrievalMetrics(ks=[1], device="cpu")(x, y, context(x, y))


@pytest.mark.parametrize(
    "options, split, message",
    [
        (
            {"ks": [1, 12]},
            {},
            "ks must be <= 11, the gallery size minus one (every row queries the others); got K = 12",
        ),
        ({"ks": [5]}, "qg", "ks must be <= 4, the gallery size (query/gallery mode); got K = 5"),
        ({"ks": []}, {}, "ks must be a non-empty list"),
        ({"ks": [0, 1]}, {}, "ks must be distinct positive integers"),
        ({"ks": [2, 2]}, {}, "ks must be distinct positive integers"),
        ({"distances": ["l1"]}, {}, "distances must be a non-empty subset of ['l2', 'cos', 'sc']"),
        ({"distances": []}, {}, "distances must be a non-empty subset"),
        ({"chunk_size": 0}, {}, "chunk_size must be >= 1, got 0"),
        ({}, {"is_query": torch.ones(12, dtype=torch.bool)}, "split is_gallery is missing"),
        (
            {},
            {"is_query": torch.ones(12), "is_gallery": torch.ones(12, dtype=torch.bool)},
            "split is_query must be a boolean tensor of shape (12,)",
        ),
    ],
)
def test_errors_name_the_option_in_one_line(options, split, message):
    x, y = exact_points(12, 10)
    if split == "qg":
        split = {"is_query": torch.arange(12) < 8, "is_gallery": torch.arange(12) >= 8}
    with pytest.raises(ValueError) as error:
        RetrievalMetrics(**options)(x, y, context(x, y, **split))
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "options",
    [
        {"ks": []},
        {"ks": [0, 1]},
        {"ks": "1"},
        {"distances": ["l1"]},
        {"distances": ["cos", "cos"]},
        {"chunk_size": 0},
        {"map_at_r": "yes"},
    ],
)
def test_options_out_of_range_are_refused_when_built(options):
    # Before any embedding: the framework builds the evaluator with the run's other parts.
    with pytest.raises(ValueError, match=f"^{next(iter(options))} must"):
        RetrievalMetrics(**options)


def test_errors_on_shapes_and_values():
    x, y = exact_points(12, 11)
    with pytest.raises(ValueError, match=r"^embeddings must be \(N, D\) and labels \(N,\) of the same N"):
        RetrievalMetrics()(x, y[:-1], context(x, y))
    with pytest.raises(ValueError, match="^embeddings must be finite"):
        RetrievalMetrics(ks=[1])(x.masked_fill(x > 1, float("nan")), y, context(x, y))


def test_config_is_checked_and_runs():
    node = OmegaConf.load(CONF)
    assert CONF.read_text().splitlines()[0] == "# @package evaluator.retrieval"
    fn = build(node, "evaluator.retrieval", call_args=EVALUATOR_ARGS)
    assert fn == RetrievalMetrics(ks=[1, 2, 4, 8, 16, 32], distances=["cos", "l2"], chunk_size=8192)
    x, y = exact_points(40, 12)
    out = fn(x, y, context(x, y))
    assert list(out) == fn.metric_names()
    assert hydra.utils.get_object(node._target_) is RetrievalMetrics


# ---- Boudiaf et al.'s rules (self_match=drop_first, lone_queries=miss) against a transcription of their code ----


def boudiaf_recall_at_ks(query_features, query_labels, ks, gallery_features=None, gallery_labels=None, cosine=False):
    """Recall@K as Boudiaf et al. compute it, transcribed as plain numpy from repository
    ``jeromerony/dml_cross_entropy``, ``utils/metrics.py`` (``recall_at_ks``): without a gallery the queries
    search themselves, one neighbour more, and the first is dropped (``offset = 1``); cosine l2-normalises both
    sides; a query is a hit when any of its K kept neighbours shares its label; the mean over every query,
    reported as ``round(100 * recall, 2)``. Their exact faiss search (``GpuIndexFlatL2``/``GpuIndexFlatIP``) is
    replaced by a stable sort: ties to the lower index, an order faiss leaves open."""
    q_f, q_l = np.asarray(query_features, dtype=np.float64), np.asarray(query_labels)
    offset = 0
    if gallery_features is None and gallery_labels is None:
        offset, g_f, g_l = 1, q_f, q_l
    else:
        g_f, g_l = np.asarray(gallery_features, dtype=np.float64), np.asarray(gallery_labels)
    if cosine:
        q_f = q_f / np.linalg.norm(q_f, axis=1, keepdims=True)
        g_f = g_f / np.linalg.norm(g_f, axis=1, keepdims=True)
        scores = q_f @ g_f.T
    else:
        scores = -((q_f[:, None, :] - g_f[None, :, :]) ** 2).sum(axis=2)
    closest_indices = np.argsort(-scores, axis=1, kind="stable")[:, : max(ks) + offset]
    recalls = {}
    for k in ks:
        indices = closest_indices[:, offset : k + offset]
        recalls[k] = (q_l[:, None] == g_l[indices]).any(1).mean()
    return {k: round(v * 100, 2) for k, v in recalls.items()}


BOUDIAF = {"self_match": "drop_first", "lone_queries": "miss", "map_at_r": False, "r_precision": False}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("chunk_size", [7, 1000])
def test_boudiaf_rules_match_their_recall_at_ks(seed, chunk_size):
    # exact_points: many exact duplicates across classes (48 distinct points at most) and exact ties in both
    # distances; rows 0 and 1 alone in their class.
    x, y = exact_points(40, seed)
    y[0], y[1] = 17, 18
    out = RetrievalMetrics(ks=KS, distances=["l2", "cos"], chunk_size=chunk_size, **BOUDIAF)(x, y, context(x, y))
    for distance, cosine in (("l2", False), ("cos", True)):
        theirs = boudiaf_recall_at_ks(x, y, KS, cosine=cosine)
        assert {k: round(100 * out[f"recall@{k}/{distance}"], 2) for k in KS} == theirs


def test_boudiaf_rules_change_the_numbers_only_through_duplicates_and_lone_queries():
    x, y = exact_points(40, 0)
    y[0] = 17
    ours = RetrievalMetrics(ks=KS, distances=["l2"], map_at_r=False, r_precision=False)(x, y, context(x, y))
    theirs = RetrievalMetrics(ks=KS, distances=["l2"], **BOUDIAF)(x, y, context(x, y))
    assert ours != theirs
    # Distinct points (no tie with a query's own score) and no lone query: the same numbers.
    x, y = torch.randn(40, 5, generator=torch.Generator().manual_seed(3)), torch.arange(40) % 4
    for distance in ("l2", "cos"):
        options = {"ks": KS, "distances": [distance]}
        assert RetrievalMetrics(**options)(x, y, context(x, y)) == RetrievalMetrics(
            **options, self_match="drop_first", lone_queries="miss"
        )(x, y, context(x, y))


def test_drop_first_counts_a_duplicate_of_another_class_as_a_hit():
    # Row 1 duplicates row 0 in another class. Ties go to the lower index, so row 0 comes before row 1 in row 1's
    # own list: row 0 is dropped as if it were row 1 itself, and row 1 then finds itself, a hit (by index: row 0
    # of another class, a miss). Row 3's nearest is row 0, its class: a hit under both rules; rows 0 and 2 miss.
    x = torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, 4.0], [4.0, 0.0]])
    y = torch.tensor([0, 1, 1, 0])
    by_index = RetrievalMetrics(ks=[1], distances=["l2"], map_at_r=False, r_precision=False)
    dropped = RetrievalMetrics(ks=[1], distances=["l2"], self_match="drop_first", map_at_r=False, r_precision=False)
    assert by_index(x, y, context(x, y))["recall@1/l2"] == 0.25
    assert dropped(x, y, context(x, y))["recall@1/l2"] == 0.5 == boudiaf_recall_at_ks(x, y, [1])[1] / 100
    # In query/gallery mode they drop nothing: row 0, also in the gallery, finds itself first (its duplicate,
    # row 1, comes after it); by index its nearest is row 1, of another class.
    row0 = {
        "is_query": torch.tensor([True, False, False, False]),
        "is_gallery": torch.ones(4, dtype=torch.bool),
    }
    assert dropped(x, y, context(x, y, **row0))["recall@1/l2"] == 1.0
    assert by_index(x, y, context(x, y, **row0))["recall@1/l2"] == 0.0


def test_lone_queries_counted_as_misses_score_zero():
    x, y = exact_points(20, 7)
    y[0], y[1] = 17, 18  # two lone queries out of 20
    left_out = RetrievalMetrics(ks=[1, 3], distances=["l2", "cos"])(x, y, context(x, y))
    miss = RetrievalMetrics(ks=[1, 3], distances=["l2", "cos"], lone_queries="miss")(x, y, context(x, y))
    assert list(miss) == list(left_out)
    for key, value in left_out.items():  # by index a lone query has no hit: it only adds to the denominator
        assert miss[key] == pytest.approx(value * 18 / 20, abs=1e-12), key
    x, y = torch.randn(4, 3), torch.arange(4)  # every query lone: 0, not NaN
    assert all(v == 0.0 for v in RetrievalMetrics(ks=[1], lone_queries="miss")(x, y, context(x, y)).values())


@pytest.mark.parametrize(
    "options, message",
    [
        ({"self_match": "first"}, "self_match must be one of by_index, drop_first, got 'first'"),
        ({"lone_queries": "skip"}, "lone_queries must be one of left_out, miss, got 'skip'"),
    ],
)
def test_fidelity_options_are_refused_when_built(options, message):
    with pytest.raises(ValueError) as error:
        RetrievalMetrics(**options)
    assert str(error.value) == message
