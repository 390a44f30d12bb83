"""Retrieval of unseen classes: Recall@K, MAP@R and R-Precision of exact nearest neighbours.

Deep-metric-learning papers (Boudiaf et al. 2020, "A unifying mutual information view of metric learning:
cross-entropy vs. pairwise losses", ECCV; Law et al. 2017, DSCL; Musgrave et al. 2020, "A Metric Learning
Reality Check", MLRC) score the embeddings of test images of classes never seen in training by retrieval: every
test image queries the rest of the test set (CUB-200, Cars196, Stanford Online Products), or a query set is
searched in a gallery (In-Shop).

The search is exact and memory-bounded: the (queries x gallery) scores are computed in blocks of at most
``chunk_size x chunk_size``, one matmul each, and every query keeps only its best ``T = max(max(ks), R_max)``
so far; the extra memory is one score block plus the (queries, T) result, whatever the gallery size. No block
goes through a ``topk``: each query's entries are read in groups of 8, and only the groups whose maximum
reaches the query's current T-th best score (on its first block, a bound from the groups' maxima) are read
again, a few per cent of them. When every row queries all the others the score matrix is symmetric, and each
block above the diagonal serves both its rows and its columns: half the matmuls of a search that treats
queries and gallery apart (faiss's). Measured at 60,000 x 512 (Stanford Online Products' test size, T = 101) on
2 idle AMD EPYC cores: 17.1 s, of which 12.4 s matmuls; faiss-cpu's exact ``IndexFlatIP`` took 24.3 s for the
same neighbours (``scripts/bench.py --only retrieval_eval``).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor

from clusterable.arrays import to_tensor
from clusterable.contracts import EvalContext
from clusterable.evaluation.matmul import Matmul, score_blocks
from clusterable.evaluation.spectral import spectral_rows

DISTANCES = ("l2", "cos", "sc")
# ``self_match``: the query removed from its neighbours by index (ours), or the first neighbour dropped (Boudiaf's).
SelfMatch = Literal["by_index", "drop_first"]
SELF_MATCHES: tuple[str, ...] = get_args(SelfMatch)
# ``lone_queries`` (no other item of their class in the gallery): left out of the means, or counted as misses.
LoneQueries = Literal["left_out", "miss"]
LONE_QUERIES: tuple[str, ...] = get_args(LoneQueries)
DEFAULT_KS = (1, 2, 4, 8, 16, 32)  # CUB-200 and Cars196 in Boudiaf et al. 2020, Table 4

_NEG_INF = float("-inf")


def _query_gallery(split: dict[str, Tensor], n: int) -> tuple[Tensor, Tensor] | None:
    """``(is_query, is_gallery)`` boolean (N,) masks from the split, or None when it has neither."""
    masks = [split.get(name) for name in ("is_query", "is_gallery")]
    if masks[0] is None and masks[1] is None:
        return None
    for name, mask in zip(("is_query", "is_gallery"), masks, strict=True):
        if mask is None:
            other = "is_gallery" if name == "is_query" else "is_query"
            raise ValueError(
                f"split {name} is missing: query/gallery mode needs both is_query and is_gallery, "
                f"the split has only {other}"
            )
        mask = to_tensor(mask)
        if mask.dtype != torch.bool or tuple(mask.shape) != (n,):
            raise ValueError(
                f"split {name} must be a boolean tensor of shape ({n},), got {mask.dtype} {tuple(mask.shape)}"
            )
    return to_tensor(masks[0]), to_tensor(masks[1])  # type: ignore[arg-type]


def _lexsort(values: Tensor, index: Tensor) -> tuple[Tensor, Tensor]:
    """Each row of ``values``/``index`` (r, c) ordered by value, largest first, then by index, lowest first."""
    order = index.argsort(dim=1)
    values, index = values.gather(1, order), index.gather(1, order)
    order = values.argsort(dim=1, descending=True, stable=True)
    return values.gather(1, order), index.gather(1, order)


def _best(scores: Tensor, k: int, index: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The exact set of the ``k`` best entries of each row of ``scores`` (r, c) under the order (score, largest
    first; then index, lowest first), as (values (r, k'), positions (r, k')) with k' = min(k, c), in no
    particular order between equal scores.

    ``index`` (r, c) gives the entries' gallery indices for the tie order; None means the column positions. The
    set is found by ``topk`` of k + 1: when the (k+1)-th score equals the k-th, topk may have picked any of the
    equal entries, and those rows (rare: duplicates, collapsed embeddings) are redone by choosing, among the
    entries equal to the k-th score, those of lowest index.
    """
    rows, cols = scores.shape
    if k >= cols:
        positions = torch.arange(cols, device=scores.device).expand(rows, cols)
        return scores, positions
    values, positions = scores.topk(k + 1, dim=1, sorted=True)
    tied = (values[:, k] == values[:, k - 1]) & (values[:, k - 1] > _NEG_INF)
    values, positions = values[:, :k], positions[:, :k]
    if bool(tied.any()):
        rows_tied = tied.nonzero().squeeze(1)
        sub = scores[rows_tied]
        bound = values[rows_tied, k - 1 : k]  # (t, 1) the k-th best score
        above = values[rows_tied] > bound
        need = k - above.sum(dim=1)  # how many entries equal to the bound complete the set
        if index is None:
            order_key = -torch.arange(cols, device=scores.device, dtype=torch.float64).expand_as(sub)
        else:
            order_key = -index[rows_tied].to(torch.float64)
        key = torch.where(sub == bound, order_key, _NEG_INF)
        _, equal_pos = key.topk(int(need.max()), dim=1)  # lowest indices first among the equal entries
        take = torch.arange(equal_pos.shape[1], device=scores.device) < need[:, None]
        cand_pos = torch.cat([positions[rows_tied], equal_pos], dim=1)
        cand_val = torch.cat(
            [torch.where(above, values[rows_tied], _NEG_INF), torch.where(take, bound, _NEG_INF)], dim=1
        )
        # Above-bound entries first, then the chosen equal ones: keep the first k by score (stable).
        order = cand_val.argsort(dim=1, descending=True, stable=True)[:, :k]
        values[rows_tied] = cand_val.gather(1, order)
        positions[rows_tied] = cand_pos.gather(1, order)
    return values, positions


# Entries per group of the filters in `_row_candidates` and `_column_candidates`; blocks are cut to multiples of it.
_GROUP = 8


def _row_candidates(scores: Tensor, bound: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The entries of a score block (r, c), queries on its rows, that can enter their query's best k: at least
    the query's current k-th best score ``bound`` (r,) (``>=``: an equal score of a lower index still can).

    Group t of a row holds its entries t, t + w, ..., t + 7w (w = c / 8; c is a multiple of ``_GROUP``): the
    groups' maxima are one pass over the block (a max of 8 contiguous rows of w), and only the groups whose
    maximum reaches the bound are read again, by index: once a query has seen a block, a few per cent of them.

    Returns:
        (query (E,), column in the block (E,), score (E,)), ordered by query.
    """
    r, c = scores.shape
    w = c // _GROUP
    view = scores.view(r, _GROUP, w)
    query, group = (view.amax(dim=1) >= bound[:, None]).nonzero(as_tuple=True)
    values = view[query, :, group]  # (groups, _GROUP)
    entry, member = (values >= bound[query][:, None]).nonzero(as_tuple=True)
    return query[entry], member * w + group[entry], values[entry, member]


def _column_candidates(scores: Tensor, bound: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``_row_candidates`` for queries on the columns of a score block (r, c), ``bound`` (c,): the symmetric
    blocks serve their columns too, without a transposed copy.

    Group g of a column holds its entries on rows 8g, ..., 8g + 7 (r is a multiple of ``_GROUP``): maxima of 8
    contiguous rows again. The groups are listed group-major, so that the columns read from the same 8 rows
    follow each other (measured 1.5x faster than listing them query by query), and then ordered by query.

    Returns:
        (query = column (E,), row in the block (E,), score (E,)), ordered by query.
    """
    r, c = scores.shape
    view = scores.view(r // _GROUP, _GROUP, c)
    group, query = (view.amax(dim=1) >= bound[None, :]).nonzero(as_tuple=True)
    values = view[group, :, query]  # (groups, _GROUP)
    entry, member = (values >= bound[query][:, None]).nonzero(as_tuple=True)
    query = query[entry]
    order = query.argsort(stable=True)
    return query[order], (group[entry] * _GROUP + member)[order], values[entry, member][order]


def _group_bound(scores: Tensor, k: int) -> Tensor:
    """A lower bound on the k-th best score of each row of a score block (r, c) that is cheaper than a ``topk``
    of the block: the k-th largest maximum of the row's ``_row_candidates`` groups (k groups hold an entry that
    reaches it). Needs c / 8 >= k. A query's first block is filtered with it (measured 0.05 s instead of 0.17 s
    for a ``topk`` at 7,500 x 7,500, k = 101)."""
    r, c = scores.shape
    maxima = scores.view(r, _GROUP, c // _GROUP).amax(dim=1)
    return maxima.topk(k, dim=1, sorted=False).values.amin(dim=1)


class _Top:
    """The best ``k`` gallery entries seen so far for each of ``n`` queries, merged block by block: values
    (n, k) and gallery indices (n, k); -inf and index -1 fill the entries not yet found.

    Every block goes through ``_row_candidates``/``_column_candidates`` with the query's current k-th best as
    the bound, raised on a query's first block by ``_group_bound``; a block too narrow for that (fewer than k
    groups) goes through ``_best``.
    """

    def __init__(self, n: int, k: int, device: torch.device) -> None:
        self.k = k
        self.values = torch.full((n, k), _NEG_INF, device=device)
        self.index = torch.full((n, k), -1, dtype=torch.long, device=device)

    def offer(self, row0: int, scores: Tensor, col0: int, transposed: bool = False) -> None:
        """Merge a block of scores (r, c): rows ``row0 + i`` against gallery entries ``col0 + j``; or, with
        ``transposed``, the block's transpose: rows ``col0 + j`` against gallery entries ``row0 + i``."""
        if transposed:
            row0, col0 = col0, row0
        # Padding rows at the end of the last block are no query.
        n_rows = min(scores.shape[1] if transposed else scores.shape[0], len(self.values) - row0)
        scores = scores[:, :n_rows] if transposed else scores[:n_rows]
        rows = slice(row0, row0 + n_rows)
        bound = self.values[rows, self.k - 1]
        unknown = bool((bound == _NEG_INF).any())
        if unknown and not transposed and scores.shape[1] // _GROUP >= self.k:
            bound = torch.maximum(bound, _group_bound(scores, self.k))
            unknown = bool((bound == _NEG_INF).any())
        if unknown:  # a query with fewer than k candidates so far, and a block too small to bound it
            values, positions = _best(scores.T.contiguous() if transposed else scores, self.k)
            self._merge(rows, values, positions + col0)
            return
        find = _column_candidates if transposed else _row_candidates
        query, position, value = find(scores, bound)
        if len(query) == 0:
            return
        # The candidates of each query side by side in a (n_rows, most candidates) block, -inf padded.
        counts = torch.bincount(query, minlength=n_rows)
        slot = torch.arange(len(query), device=query.device) - (counts.cumsum(0) - counts)[query]
        width = int(counts.max())
        values = torch.full((n_rows, width), _NEG_INF, device=scores.device)
        index = torch.full((n_rows, width), -1, dtype=torch.long, device=scores.device)
        values[query, slot] = value
        index[query, slot] = position + col0
        self._merge(rows, values, index)

    def _merge(self, rows: slice, values: Tensor, index: Tensor) -> None:
        values = torch.cat([self.values[rows], values], dim=1)
        index = torch.cat([self.index[rows], index], dim=1)
        values, positions = _best(values, self.k, index)
        self.values[rows], self.index[rows] = values, index.gather(1, positions)

    def ordered(self) -> tuple[Tensor, Tensor]:
        values, index = _lexsort(self.values, self.index)
        return values, index.masked_fill(values == _NEG_INF, -1)


def _operands(x: Tensor, squared: bool) -> tuple[Tensor, Tensor]:
    """(left, right) such that ``left[i] . right[j]`` is the score of row j for query i: ``x`` twice for inner
    products; for minus squared Euclidean distances ``[2x, -|x|^2, -1]`` and ``[x, 1, |x|^2]``, whose product
    ``2 x_i.x_j - |x_i|^2 - |x_j|^2`` then comes out of the matmul itself, with no pass over the block."""
    if not squared:
        return x, x
    sq = (x * x).sum(dim=1, keepdim=True)
    ones = torch.ones_like(sq)
    return torch.cat([2 * x, -sq, -ones], dim=1), torch.cat([x, ones, sq], dim=1)


def _edge(n: int, chunk: int) -> int:
    """The block edge that splits ``n`` rows into as few blocks of at most ``chunk`` (rounded up to a multiple
    of ``_GROUP``) as possible, evenly: 60,000 rows in chunks of 8192 are 8 blocks of 7,504, not 7 of 8,192 and
    one of 2,656 (a ``topk`` over rows of fewer than 64 k entries takes a slower path)."""
    blocks = max(1, -(-n // chunk))
    rows = -(-n // blocks)
    return -(-rows // _GROUP) * _GROUP


def _padded(x: Tensor) -> Tensor:
    """``x`` (N, D) with zero rows appended up to a multiple of ``_GROUP`` rows (masked to -inf in the blocks)."""
    rest = -len(x) % _GROUP
    return x if rest == 0 else torch.cat([x, x.new_zeros(rest, x.shape[1])])


@torch.no_grad()
def _search(
    x: Tensor,
    queries: Tensor | None,
    gallery: Tensor | None,
    k: int,
    chunk: int,
    squared: bool,
    keep_self: bool = False,
) -> tuple[Tensor, Tensor]:
    """Exact best ``k`` gallery rows of each query row of ``x`` (N, D), excluding itself by index (``keep_self``:
    itself included, at the rank its own score gives it, as Boudiaf et al.'s faiss search).

    ``queries``/``gallery`` are row indices into ``x``; None, None = every row against every other, on the
    blocks on and above the diagonal of the symmetric score matrix (each block above it serves its rows and its
    columns: half the matmuls of a search that treats queries and gallery apart, as faiss's does). Returns
    (values, gallery positions) (Nq, k) ordered by (score desc, position asc); -inf and position -1 mark an
    entry that does not exist (a query with fewer than k candidates). Blocks have at most ``chunk`` rows and
    columns, evened out (``_edge``).
    """
    with score_blocks(x.device) as matmul:
        if queries is None or gallery is None:
            return _search_all(x, k, chunk, squared, matmul, keep_self)
        return _search_gallery(x, queries, gallery, k, chunk, squared, matmul, keep_self)


def _search_all(
    x: Tensor, k: int, chunk: int, squared: bool, matmul: Matmul, keep_self: bool = False
) -> tuple[Tensor, Tensor]:
    n = len(x)
    left, right = (_padded(t) for t in _operands(x, squared))
    n_pad = len(left)
    edge = _edge(n_pad, chunk)
    buf = torch.empty(edge * edge, device=x.device, dtype=x.dtype)
    top = _Top(n, k, x.device)
    starts = range(0, n_pad, edge)

    def block(i0: int, j0: int) -> Tensor:
        scores = matmul(left[i0 : i0 + edge], right[j0 : j0 + edge], buf)
        scores[:, max(0, n - j0) :] = _NEG_INF  # the padding rows are nobody's neighbours
        scores[max(0, n - i0) :] = _NEG_INF
        return scores

    # The diagonal blocks first: every query then has a k-th best score to filter the other blocks with.
    for i0 in starts:
        scores = block(i0, i0)
        if not keep_self:
            scores.fill_diagonal_(_NEG_INF)  # a query is not its own neighbour: by index, not by rank
        top.offer(i0, scores, i0)
    for i0 in starts:
        for j0 in range(i0 + edge, n_pad, edge):
            scores = block(i0, j0)
            top.offer(i0, scores, j0)
            top.offer(i0, scores, j0, transposed=True)  # the same scores serve the rows j0..
    return top.ordered()


def _search_gallery(
    x: Tensor,
    queries: Tensor,
    gallery: Tensor,
    k: int,
    chunk: int,
    squared: bool,
    matmul: Matmul,
    keep_self: bool = False,
) -> tuple[Tensor, Tensor]:
    n_gallery = len(gallery)
    left, right = _operands(x, squared)
    q, g = left[queries], _padded(right[gallery])
    position = torch.full((len(x),), -1, dtype=torch.long, device=x.device)
    position[gallery] = torch.arange(n_gallery, device=x.device)
    self_pos = position[queries]  # the query's own position in the gallery, -1 if it is not there
    if keep_self:
        self_pos = torch.full_like(self_pos, -1)
    q_edge, g_edge = _edge(len(q), chunk), _edge(len(g), chunk)
    buf = torch.empty(q_edge * g_edge, device=x.device, dtype=x.dtype)
    top = _Top(len(q), k, x.device)
    for i0 in range(0, len(q), q_edge):
        own = self_pos[i0 : i0 + q_edge]
        for j0 in range(0, len(g), g_edge):
            scores = matmul(q[i0 : i0 + q_edge], g[j0 : j0 + g_edge], buf)
            scores[:, max(0, n_gallery - j0) :] = _NEG_INF  # padding
            inside = ((own >= j0) & (own < j0 + scores.shape[1])).nonzero().squeeze(1)
            scores[inside, own[inside] - j0] = _NEG_INF  # a query is not its own neighbour, by index
            top.offer(i0, scores, j0)
    return top.ordered()


def _spectral(x: Tensor, used: Tensor) -> Tensor:
    """(N, r) the spectral rows (``spectral_rows``) of the rows of ``x`` (N, D) that take part, ``used`` (N,)
    boolean; zero rows elsewhere (they are nobody's query nor gallery item)."""
    if bool(used.all()):
        return spectral_rows(x)
    rows = spectral_rows(x[used])
    out = rows.new_zeros(len(x), rows.shape[1])
    out[used] = rows
    return out


def _scores_of(
    hits: Tensor, relevant: Tensor, ks: Sequence[int], map_at_r: bool, r_precision: bool
) -> dict[str, float]:
    """Mean metrics over queries from ``hits`` (q, T): whether the i-th neighbour shares the query's label, and
    ``relevant`` (q,) R, the number of other gallery items of the query's class. A row with R = 0 (a lone query,
    kept by ``lone_queries: miss``) scores 0 in MAP@R and R-Precision (nothing to find among its first 0)."""
    out: dict[str, float] = {}
    n = len(hits)
    for k in ks:
        out[f"recall@{k}"] = float(hits[:, :k].any(dim=1).sum()) / n if n else float("nan")
    rank = torch.arange(1, hits.shape[1] + 1, device=hits.device)
    first_r = rank[None, :] <= relevant[:, None]  # the first R positions of each query
    hits_r = hits & first_r
    r = relevant.clamp(min=1).double()  # R = 0: hits_r is empty, the score 0
    if r_precision:
        out["r_precision"] = float((hits_r.sum(dim=1) / r).mean()) if n else float("nan")
    if map_at_r:
        precision_at_i = hits_r.cumsum(dim=1).double() / rank
        out["map@r"] = float(((precision_at_i * hits_r).sum(dim=1) / r).mean()) if n else float("nan")
    return out


@dataclass(frozen=True)
class RetrievalMetrics:
    """Recall@K, MAP@R and R-Precision of the exact nearest neighbours of every query among the gallery.

    Who queries whom: when ``context.split`` holds boolean (N,) tensors ``is_query`` and ``is_gallery``
    (In-Shop), the rows with ``is_query`` search the rows with ``is_gallery``; otherwise every row searches all
    the others (CUB-200, Cars196, SOP). Either way a query is excluded from its own neighbours *by index* (its own
    entry of the score matrix is masked), never by dropping the first neighbour: an identical copy of a query is
    its nearest neighbour and counts (``self_match: by_index``; ``drop_first`` is Boudiaf et al.'s rule, below).
    Rows labelled ``-1`` (unlabelled) are neither queries nor gallery.

    Distances: ``l2`` is the Euclidean distance of the raw features; ``cos`` the inner product of the
    l2-normalised features (cosine similarity; a zero vector stays zero and is at similarity 0 to everything);
    ``sc`` the inner product of the rows of T = ``spectral_rows`` of the embeddings of the rows that take part
    (the queries and the gallery): DSCL's Recall@K "with SC" (Law et al. 2017, Algorithm 2: the l2-normalised
    rows of the leading left singular vectors of the centred embeddings; unit rows, so this is their cosine).

    Definitions, per query q with label y, its neighbours sorted nearest first, and R = the number of gallery
    items of class y other than q itself:
    - Recall@K (Boudiaf et al. 2020, Sec. 5; the hit rate of the DML literature): 1 if any of the K nearest has
      label y, else 0.
    - R-Precision (Musgrave et al. 2020, Sec. 3): the fraction of the R nearest that have label y.
    - MAP@R (Musgrave et al. 2020, Sec. 3): (1/R) sum_{i <= R} P(i) [neighbour i has label y], P(i) the
      precision of the i nearest.
    Each is averaged over the queries (a fraction in [0, 1]; the papers' tables multiply by 100). A query whose
    class has no other item in the gallery (R = 0) is left out of all three, as pytorch-metric-learning's
    ``AccuracyCalculator`` leaves such "lone" queries out of its precision_at_1, r_precision and
    mean_average_precision_at_r; a metric is NaN when every query is lone (pytorch-metric-learning gives 0).
    Unlike its k-NN helpers, which drop the first returned neighbour of each query, the self match is removed
    by index.

    Fidelity to Boudiaf et al.'s code (repository ``jeromerony/dml_cross_entropy``, ``utils/metrics.py``,
    ``recall_at_ks``, called from ``utils/training.py``, ``evaluate``), which scores Recall@K only, with faiss:
    - ``self_match: drop_first``: when every row queries the others they search all rows, the query included,
      and drop the first neighbour as the query itself. When another item ties with or beats the query's own
      score (an exact duplicate, or rounding) and comes first (here: ties go to the lower index; faiss leaves
      their order open), that item is dropped instead and the query counts as its own neighbour: a duplicate of
      another class turns a miss into a hit. In query/gallery mode they drop nothing, and a query that is also
      in the gallery is its own neighbour (In-Shop's query and gallery are disjoint).
    - ``lone_queries: miss``: they average over every query, so a query alone in its class (R = 0) counts as a
      miss (a hit only through the duplicate case above); here its MAP@R and R-Precision are 0.
    - They report ``round(100 * recall, 2)``: the evaluator returns unrounded fractions; the rounding enters
      their model selection, which ``callbacks.BoudiafCheckpoint`` reproduces.
    With no duplicates and no lone query both rules give our numbers.

    Exact: every query is compared with every gallery item in float32 (no approximate index, no reduced
    precision); ties are broken deterministically, the lower gallery index first (on the scores as computed:
    ``2 q.g - |q|^2 - |g|^2`` for l2, ``q.g`` for cos), which is also the order of a stable sort.

    Args:
        ks: the K of Recall@K, distinct and >= 1; each at most the number of candidates of a query: the
            gallery size minus one (every row queries the others) or the gallery size (query/gallery).
        distances: a non-empty subset of ``("l2", "cos", "sc")``; each gives its own set of metrics.
        map_at_r, r_precision: whether to report MAP@R and R-Precision (they need the R_max nearest,
            R_max the largest class, instead of max(ks)).
        chunk_size: the edge of the score blocks (rows and gallery columns per matmul, rounded up to a
            multiple of 8): the extra memory is one (chunk_size, chunk_size) float32 block, a normalised copy
            of the embeddings (cos), two (N, D + 2) copies (l2: the squared norms ride in the matmul) or the
            (N, rank) float32 spectral rows (sc), and the (queries, max(max(ks), R_max)) results with their
            indices.
        device: where to compute (``"cpu"``, ``"cuda"``...); None = the device of ``embeddings``.
        self_match: ``by_index`` (the query's own entry removed) or ``drop_first`` (Boudiaf et al.'s, above).
        lone_queries: ``left_out`` (pytorch-metric-learning's) or ``miss`` (Boudiaf et al.'s, above).
    Raises:
        ValueError: an option out of range, when built (the message starts with its name).
    """

    ks: Sequence[int] = DEFAULT_KS
    distances: Sequence[Literal["l2", "cos", "sc"]] = ("cos", "l2")
    map_at_r: bool = True
    r_precision: bool = True
    chunk_size: int = 8192
    device: str | None = None
    self_match: SelfMatch = "by_index"
    lone_queries: LoneQueries = "left_out"

    def __post_init__(self) -> None:
        ks, distances = self.ks, self.distances
        if isinstance(ks, str) or len(ks) == 0:
            raise ValueError(f"ks must be a non-empty list of positive integers, got {ks!r}")
        positive = all(isinstance(k, numbers.Integral) and not isinstance(k, bool) and k >= 1 for k in ks)
        if not positive or len(set(ks)) != len(ks):
            raise ValueError(f"ks must be distinct positive integers, got {list(ks)}")
        if isinstance(distances, str) or len(distances) == 0 or any(d not in DISTANCES for d in distances):
            raise ValueError(f"distances must be a non-empty subset of {list(DISTANCES)}, got {distances!r}")
        if len(set(distances)) != len(distances):
            raise ValueError(f"distances must not repeat a distance, got {list(distances)}")
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")
        for name, value in (("map_at_r", self.map_at_r), ("r_precision", self.r_precision)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value!r}")
        for name, value, choices in (
            ("self_match", self.self_match, SELF_MATCHES),
            ("lone_queries", self.lone_queries, LONE_QUERIES),
        ):
            if value not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        # Tuples: the config's lists arrive as OmegaConf ListConfigs, and a frozen evaluator holds no mutable list.
        object.__setattr__(self, "ks", tuple(int(k) for k in ks))
        object.__setattr__(self, "distances", tuple(str(d) for d in distances))

    def metric_names(self) -> list[str]:
        """The keys ``__call__`` returns, in its order (without the stage prefix): ``recall@{k}/{distance}`` for
        every k, then ``map@r/{distance}`` and ``r_precision/{distance}``, for every distance."""
        names = []
        for distance in self.distances:
            names += [f"recall@{k}/{distance}" for k in self.ks]
            names += [f"map@r/{distance}"] if self.map_at_r else []
            names += [f"r_precision/{distance}"] if self.r_precision else []
        return names

    def check_split(self, stage: str, split: Mapping[str, Tensor]) -> None:
        """``contracts.ChecksSplits``: refuse, before training, ``ks`` that split ``stage`` (its ``labels`` (N,),
        ``is_query``/``is_gallery`` (N,) if any) cannot serve: a K above a query's candidates, counted as
        ``__call__`` counts them (the labelled gallery rows, minus the query itself when every row queries the
        others). Raises ValueError, the message starting with ``ks``."""
        labelled = to_tensor(split["labels"]) >= 0
        masks = _query_gallery(dict(split), len(labelled))
        if masks is None:
            candidates = int(labelled.sum()) - 1
            what = "the gallery size minus one (every row queries the others)"
        else:
            candidates = int((masks[1].to(labelled.device) & labelled).sum())
            what = "the gallery size (query/gallery)"
        if max(self.ks) > candidates:
            k, most = max(self.ks), max(candidates, 0)
            raise ValueError(f"ks must be <= {most} on split {stage!r}, {what}; got K = {k}")

    @torch.no_grad()
    def __call__(self, embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
        """``metric_names()``: ``{"recall@{k}/{distance}", "map@r/{distance}", "r_precision/{distance}": float}``.

        Args:
            embeddings: (N, D) the representation. labels: (N,) class labels, ``-1`` = unlabelled.
            context: ``context.split`` may hold ``is_query``/``is_gallery`` (N,) booleans.
        Raises:
            ValueError: a K larger than a query's candidates, mismatched shapes, non-finite embeddings,
                is_query/is_gallery of the wrong type, or (sc) embeddings of rank 0 once centred (every row the
                same).
        """
        ks, distances, chunk_size, map_at_r = self.ks, self.distances, self.chunk_size, self.map_at_r
        x, y = to_tensor(embeddings), to_tensor(labels)
        if x.ndim != 2 or y.ndim != 1 or len(x) != len(y):
            shapes = f"{tuple(x.shape)} and {tuple(y.shape)}"
            raise ValueError(f"embeddings must be (N, D) and labels (N,) of the same N, got {shapes}")
        where = torch.device(self.device) if self.device is not None else x.device
        x, y = x.to(where, torch.float32), y.to(where, torch.long)
        split_masks = _query_gallery(context.split, len(y))
        labelled = y >= 0
        if split_masks is None:
            queries = gallery = labelled.nonzero().squeeze(1)
            candidates, what = len(gallery) - 1, "the gallery size minus one (every row queries the others)"
            if len(gallery) < 2:
                raise ValueError(f"labels must mark at least two rows as labelled (>= 0), got {len(gallery)}")
        else:
            is_query, is_gallery = (m.to(where) & labelled for m in split_masks)
            queries, gallery = is_query.nonzero().squeeze(1), is_gallery.nonzero().squeeze(1)
            candidates, what = len(gallery), "the gallery size (query/gallery mode)"
            if len(queries) == 0 or len(gallery) == 0:
                empty = "is_query" if len(queries) == 0 else "is_gallery"
                raise ValueError(f"split {empty} must mark at least one labelled row, it marks none")
        if max(ks) > candidates:
            raise ValueError(f"ks must be <= {candidates}, {what}; got K = {max(ks)}")
        used = labelled if split_masks is None else (is_query | is_gallery)
        x_used = x if bool(used.all()) else x[used]  # no copy in the usual case, every row labelled and used
        if not bool(torch.isfinite(x_used).all()):
            raise ValueError("embeddings must be finite; they contain NaN or inf (did training diverge?)")
        if "l2" in distances and not bool(torch.isfinite((x_used * x_used).sum(dim=1)).all()):
            raise ValueError("embeddings are too large for float32 squared distances (a squared norm overflows)")
        del x_used

        # R of every query: the gallery items of its class, minus itself when it is in the gallery.
        _, inverse = torch.unique(y, return_inverse=True)
        in_gallery = torch.zeros(len(y), dtype=torch.bool, device=where)
        in_gallery[gallery] = True
        class_size = torch.bincount(inverse[gallery], minlength=int(inverse.max()) + 1)
        relevant = class_size[inverse[queries]] - in_gallery[queries].long()
        scored = relevant > 0  # the queries averaged over: all of them when lone ones count as misses
        if self.lone_queries == "miss":
            scored = torch.ones_like(scored)
        r_max = int(relevant.max()) if (map_at_r or self.r_precision) and len(relevant) else 0
        k = max(max(ks), min(r_max, candidates))

        out: dict[str, float] = {}
        all_vs_all = split_masks is None
        keep_self = self.self_match == "drop_first"
        for distance in distances:
            feats = F.normalize(x, dim=1) if distance == "cos" else _spectral(x, used) if distance == "sc" else x
            # The search runs on the gallery rows (and the query rows in query/gallery mode) only.
            if all_vs_all:
                rows = feats if len(gallery) == len(feats) else feats[gallery]
                # drop_first: one more neighbour, the query itself included, and the first one dropped
                searched = k + int(keep_self)
                values, positions = _search(
                    rows, None, None, searched, chunk_size, squared=distance == "l2", keep_self=keep_self
                )
                values, positions = values[:, int(keep_self) :], positions[:, int(keep_self) :]
            else:
                values, positions = _search(
                    feats, queries, gallery, k, chunk_size, squared=distance == "l2", keep_self=keep_self
                )
            neighbour_labels = y[gallery][positions.clamp(min=0)]
            hits = (neighbour_labels == y[queries][:, None]) & (values > _NEG_INF)
            scores = _scores_of(hits[scored], relevant[scored], ks, map_at_r, self.r_precision)
            out.update({f"{name}/{distance}": value for name, value in scores.items()})
        return {name: out[name] for name in self.metric_names()}
