"""COREL (Kenyon-Dean et al. 2019): Tables 1-4 and Figures 1-2 from run directories, with the paper's claims.

Every table function takes the runs of its experiment and an output folder and returns a ``Table``;
scripts/make_tables.py picks the function by the table's name (``corel/table2`` -> ``table2``) and the runs by
``SOURCES``. Two modules:

- ``paper``: the paper's own grids (``table1``, ``table2``, ``table3_4``, ``fig1``, ``fig2``) and the same protocol on
  scikit-learn's digits (``digits_*``), with the builders every COREL table shares;
- ``fashion``: the grid on real Fashion-MNIST at three budgets (``fashion_*``: 10 epochs on a CPU; ``fashion150_*``:
  the paper's 150 epochs; ``fashion_paper_*``: the paper's full protocol), the clustering along training
  (``*_curves``) and the budgets side by side (``fashion_budgets``);
- ``published``: the supplement's λ curves (digitised) beside ours (``fashion150_published``: the recipe the paper's
  text gives; ``fashion150_recovered_published``: the recipe recovered from the curves).
"""

from __future__ import annotations

from clusterable.tables.corel import fashion, paper, published
from clusterable.tables.corel.fashion import (
    fashion150_curves,
    fashion150_fig2,
    fashion150_table1,
    fashion150_table2,
    fashion150_table4,
    fashion_budgets,
    fashion_curves,
    fashion_fig2,
    fashion_paper_curves,
    fashion_paper_fig2,
    fashion_paper_table1,
    fashion_paper_table2,
    fashion_paper_table4,
    fashion_table1,
    fashion_table2,
    fashion_table4,
)
from clusterable.tables.corel.paper import (
    DATASETS,
    LABELS,
    LOSSES,
    MODELS,
    TUNED,
    digits_table1,
    digits_table2,
    digits_table3_4,
    encoder,
    experiment_grid,
    fig1,
    fig2,
    lambda_cells,
    lambda_notes,
    table1,
    table2,
    table3_4,
    tune_lambda,
    with_lambda,
)
from clusterable.tables.corel.published import (
    fashion150_published,
    fashion150_recovered_cnn_published,
    fashion150_recovered_published,
    fashion150_recovered_width_published,
    fashion_recipe_search,
)

SOURCES: dict[str, str | tuple[str, ...]] = {**paper.SOURCES, **fashion.SOURCES, **published.SOURCES}

__all__ = [
    "DATASETS",
    "LABELS",
    "LOSSES",
    "MODELS",
    "SOURCES",
    "TUNED",
    "digits_table1",
    "digits_table2",
    "digits_table3_4",
    "encoder",
    "experiment_grid",
    "fashion150_curves",
    "fashion150_published",
    "fashion150_recovered_published",
    "fashion150_recovered_cnn_published",
    "fashion150_recovered_width_published",
    "fashion150_fig2",
    "fashion150_table1",
    "fashion150_table2",
    "fashion150_table4",
    "fashion_budgets",
    "fashion_curves",
    "fashion_fig2",
    "fashion_paper_curves",
    "fashion_paper_fig2",
    "fashion_paper_table1",
    "fashion_recipe_search",
    "fashion_paper_table2",
    "fashion_paper_table4",
    "fashion_table1",
    "fashion_table2",
    "fashion_table4",
    "fig1",
    "fig2",
    "lambda_cells",
    "lambda_notes",
    "table1",
    "table2",
    "table3_4",
    "tune_lambda",
    "with_lambda",
]
