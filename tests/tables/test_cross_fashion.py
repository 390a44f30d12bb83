"""The cross-paper table (experiment=cross/fashion): every loss builds on the one shared recipe, the grid runs end to
end on fake data, and the table ranks its columns (bold best, † beyond the seed spread) and draws its figure."""

from __future__ import annotations

import torch
from helpers.configs import composed, sweep_cells
from omegaconf import OmegaConf, open_dict
from scipy import stats

from clusterable.config import build
from clusterable.contracts import ClassifyingHead, RepresentingHead
from clusterable.tables import cross
from clusterable.tables.common import ranked_column
from clusterable.tables.report import Cell, p_text

# What every cell must share: the recipe. The loss (and, for Safir's heads, where the linear embedding layer lives)
# is what differs.
SHARED = ("optimizer", "trainer", "dataset", "evaluator", "checkpoint", "eval_stages", "protocol", "seed")


def test_every_loss_of_the_table_builds_on_the_shared_recipe(tmp_path) -> None:
    cfg = composed(tmp_path, "experiment=cross/fashion", "debug=smoke")
    cells = sweep_cells(cfg)
    losses = [dict(o.split("=", 1) for o in cell)["loss"] for cell in cells]
    assert sorted(losses) == sorted(cross.LOSSES), "the table's rows are the experiment's losses"
    shared = None
    for cell in cells:
        run = composed(tmp_path, "experiment=cross/fashion", "debug=smoke", *cell)
        recipe = {key: OmegaConf.to_container(run, resolve=True).get(key) for key in SHARED}
        assert shared is None or recipe == shared, cell
        shared = recipe
        with open_dict(run):
            run.dataset.fake_size = 40
        dm = build(run.dataset, "dataset", seed=0)
        dm.load()
        encoder = build(run.model, "model", input_shape=dm.input_shape)
        head = build(
            run.loss,
            "loss",
            num_classes=dm.num_classes,
            embedding_dim=encoder.embedding_dim,
            input_shape=dm.input_shape,
        )
        batch = next(iter(dm.train_dataloader()))
        with torch.no_grad():
            features = encoder(batch["inputs"])
            embedding = head.embed(features) if isinstance(head, RepresentingHead) else features
        # the same function shape from pixels to embedding: 784-500-500 with LeakyReLU, then a linear layer of 10
        assert embedding.shape == (len(batch["inputs"]), run.protocol.embedding_dim), cell
        assert (features.shape[1] == 500) == isinstance(head, RepresentingHead), cell
        loss = losses[cells.index(cell)]
        assert isinstance(head, ClassifyingHead) == (loss in cross.CLASSIFYING), f"{loss}: test acc column"
        assert isinstance(head, RepresentingHead) == (loss in cross.LATENT_HEADS), f"{loss}: its own latent layer"


def test_a_column_bolds_its_best_and_marks_gaps_beyond_the_seed_spread() -> None:
    column = [Cell([0.90, 0.92]), Cell([0.50, 0.52]), Cell([0.89, 0.91]), Cell(failed=2), None]
    best, far, near, failed, none = ranked_column(column, scale=100, digits=1)
    assert best == "**91.0 ± 1.4**"
    assert far == "51.0 ± 1.4 †"  # 40 points below, spreads 1.4 + 1.4
    assert near == "90.0 ± 1.4"  # 1 point below: within the spread
    assert (failed, none) == ("failed", "—")


def test_the_cross_table_runs_end_to_end_on_fake_data(train, make_tables) -> None:
    result = train("-m", "experiment=cross/fashion", "debug=smoke", "seed=0,1")
    assert result.code == 0, result.err
    # the COREL and Boudiaf heads stack their seeds; the others say why not and run one by one
    assert "stacked: 2 cells as one model (seed vary)" in result.out
    assert "does not run stacked" in result.out
    code, out, err = make_tables("cross/fashion", "--outputs", str(train.outputs))
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("| ") and "Paper" not in line]
    assert [row.split(" | ")[0][2:].split(" (λ")[0] for row in rows] == [label for label, _ in cross.LOSSES.values()]
    assert all(row.endswith("| 2 |") for row in rows), "two seeds in every row"
    assert "**" in out and "Claims of the papers" in out
    assert "| DSCL | Law et al. |" in out and "| — | 2 |" in out  # no test accuracy without a classifier
    tables = train.outputs / "tables" / "smoke"
    assert (tables / "cross_fashion_tsne.png").stat().st_size > 10_000
    assert "\\textbf{" in (tables / "cross_fashion.tex").read_text()
    assert "**" not in (tables / "cross_fashion.csv").read_text()


def test_the_papers_claims_are_tested_over_the_seeds() -> None:
    close, low, high = [0.84, 0.85, 0.86], [0.70, 0.71, 0.72], [0.85, 0.86, 0.87]
    r1, acc, nmi = "test/recall@1/cos", "test/kmeans/acc", "test/kmeans/nmi"
    table = {
        r1: {
            ("ce",): Cell(close),
            ("triplet",): Cell(high),
            ("multi_similarity",): Cell(low),
        },  # proxy-anchor: none
        acc: {("cosine_corel",): Cell(high), ("gaussian_corel",): Cell(close), ("cce",): Cell(low)},
        nmi: {("dscl",): Cell(low), ("cce",): Cell(high)},
    }
    boudiaf, corel, dscl = cross._claims(table)

    def p(a: list[float], b: list[float], alternative: str = "greater") -> str:
        return p_text(stats.ttest_ind(a, b, equal_var=False, alternative=alternative).pvalue)

    # 1 point below, within the seed spread: neither shown; the claim reads the largest p, the gap in points.
    assert boudiaf.verdict == f"not shown ({p(close, high)})" and boudiaf.holds is False
    assert boudiaf.detail == (
        f"Welch's t over seeds, one-sided, α = 0.05; difference (p): vs Triplet (semi-hard) -1.0 ({p(close, high)}); "
        f"vs Multi-similarity +14.0 ({p(close, low)}); checked on 2 of 3, no numbers for vs Proxy-anchor"
    )
    assert corel.verdict == "holds"
    assert dscl.verdict == "reversed" and dscl.detail.endswith(f"vs CCE -15.0 (reversed, {p(low, high, 'less')})")
    assert cross._claims({r1: {}, acc: {}, nmi: {}})[0].holds is None  # no numbers: cannot check
