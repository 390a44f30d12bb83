"""COREL's Fashion-MNIST grid at three budgets (cpu, cpu150, paper): the sizes are one grid, a table never pools two
budgets, the budgets side by side, the clustering along training, and the authors' Gaussian-COREL as a row."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from helpers.configs import composed, sweep_cells
from omegaconf import OmegaConf

from clusterable.tables.corel.fashion import BUDGETS
from tables.rundirs import write_run

SIZES = [(b.name, b.table1, b.table2) for b in BUDGETS.values()]
# What a size may change: its length, its λ grid, its seeds, its encoders; and what names it.
SIZE_KEYS = {
    "name",
    "tuned_lambda_from",
    "protocol.budget",
    "trainer.max_epochs",
    "hydra.sweeper.params.loss.lam",
    "hydra.sweeper.params.seed",
    "hydra.sweeper.params.model",
}
# The paper's size also runs the recipe recovered from the supplement's λ curves, with its own Gaussian-COREL.
RECIPE_KEYS = {"protocol.recipe", "loss.train_class_vectors", "hydra.sweeper.params.loss"}


def leaves(cfg) -> dict[str, str]:
    """The composed config's leaves as text (interpolations unresolved), with the sweeper's params, Hydra's other
    nodes left out (they name the run's folder and time)."""
    tree = OmegaConf.to_container(cfg, resolve=False)
    hydra = tree.pop("hydra")
    tree["hydra"] = {"sweeper": hydra["sweeper"], "launcher": hydra["launcher"]["_target_"]}
    out: dict[str, str] = {}

    def walk(node, prefix: str) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        else:
            out[prefix[:-1]] = repr(node)

    walk(tree, "")
    return out


@pytest.mark.parametrize("table", [1, 2])
def test_the_three_sizes_differ_in_epochs_lambda_seeds_and_models_alone(tmp_path: Path, table: int) -> None:
    configs = {name: leaves(composed(tmp_path, f"experiment={t1 if table == 1 else t2}")) for name, t1, t2 in SIZES}
    base = configs["cpu"]
    for name, other in configs.items():
        differ = {k for k in base.keys() | other.keys() if base.get(k) != other.get(k)}
        allowed = SIZE_KEYS | (RECIPE_KEYS if name == "paper" else set())
        assert differ <= allowed, (name, sorted(differ - allowed))
        assert other["protocol.budget"] == repr(name)
    assert configs["paper"]["protocol.recipe"] == "'recovered'" and "protocol.recipe" not in base
    assert configs["paper"]["loss.train_class_vectors"] == "False"
    assert configs["cpu"]["trainer.max_epochs"] == "10"
    assert configs["cpu150"]["trainer.max_epochs"] == configs["paper"]["trainer.max_epochs"] == "150"
    # the Table 2 of each size reads the winners of its own Table 1
    if table == 2:
        for name, t1, _ in SIZES:
            assert configs[name]["tuned_lambda_from"] == repr(t1)


def test_each_size_expands_to_its_grid_and_every_kind_of_cell_composes(tmp_path: Path) -> None:
    losses = ["center", "cosine_corel", "gaussian_corel", "gaussian_corel_authors"]
    coarse = ["0.2", "0.4", "0.5", "0.6", "0.8", "1.0"]
    fine = "0.05,0.1,0.15,0.2,0.25,0.3,0.35,0.4,0.45,0.5,0.55,0.6,0.65,0.7,0.75,0.8,0.85,0.9,0.95,1.0".split(",")
    recovered = ["center", "cosine_corel", "gaussian_corel_authors_fixed_gamma"]
    expected = {
        "cpu": (["ffnn"], coarse, losses),
        "cpu150": (["ffnn"], coarse, losses),
        "paper": (["ffnn", "cnn"], fine, recovered),
    }
    for name, t1, t2 in SIZES:
        models, lams, tuned = expected[name]
        cells = sweep_cells(composed(tmp_path, f"experiment={t1}"))
        got = {tuple(sorted(c)) for c in cells}
        want = {
            tuple(sorted(["dataset=fashion_mnist", f"model={m}", f"loss={loss}", f"loss.lam={lam}"]))
            for m, loss, lam in itertools.product(models, tuned, lams)
        }
        assert got == want, name
        cfg2 = composed(tmp_path, f"experiment={t2}")
        # CCE and the λ losses (the text's recipe: eq. 6's and the authors' code's Gaussian-COREL both)
        assert len(sweep_cells(cfg2)) == len(models) * (1 + len(tuned)), name
    # one cell of the paper's size per encoder composes with the rest of the experiment
    for model in ("ffnn", "cnn"):
        cfg = composed(
            tmp_path,
            "experiment=corel/fashion_paper_table1",
            f"model={model}",
            "loss=gaussian_corel_authors_fixed_gamma",
            "loss.lam=0.65",
            "dataset=fashion_mnist",
        )
        assert cfg.trainer.max_epochs == 150 and cfg.loss.lam == 0.65
        assert cfg.loss.learn_gamma is False and cfg.loss.train_class_vectors is False


def test_the_authors_variant_is_the_authors_code(tmp_path: Path) -> None:
    cfg = composed(tmp_path, "loss=gaussian_corel_authors", "loss.lam=0.6")
    assert cfg.loss.formula == "authors_code" and cfg.loss.learn_gamma is True
    assert cfg.loss.gamma_parametrization == "raw" and cfg.loss.gamma == 0.5
    assert cfg.loss._target_ == composed(tmp_path, "loss=gaussian_corel")["loss"]["_target_"]


def budget_run(
    outputs: Path, budget: str, epochs: int, loss: str, seed: int, acc: float, experiment: str | None = None
) -> Path:
    """A Table 2 run of ``budget`` (recorded under ``experiment``, its budget's own by default)."""
    experiment = experiment or BUDGETS[budget].table2
    config = {"protocol": {"budget": budget}, "trainer": {"max_epochs": epochs}}
    return write_run(
        outputs,
        experiment,
        {"dataset": "fashion_mnist", "model": "ffnn", "loss": loss, "seed": seed},
        {"test/acc": acc, "test/kmeans/acc": acc - 0.1, "test/kmeans/silhouette": 0.3},
        config=config,
    )


def test_a_table_over_runs_of_two_budgets_refuses_them_in_one_line(tmp_path: Path, make_tables) -> None:
    for seed in (0, 1):
        budget_run(tmp_path, "cpu", 10, "cce", seed, 0.88)
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 0 and "budget cpu (FFNN, 10 epochs" in out, err
    # 150-epoch runs recorded under the 10-epoch experiment (protocol.budget and the epochs overridden by hand)
    for seed in (2, 3):
        budget_run(tmp_path, "cpu150", 150, "center", seed, 0.9, experiment="corel/fashion_table2")
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 2 and out == "", out
    assert len(err.strip().splitlines()) == 1 and "the runs mix budgets (cpu: 2, cpu150: 2)" in err, err


def test_the_budgets_side_by_side_keep_each_budget_apart(tmp_path: Path, make_tables) -> None:
    for seed in (0, 1, 2):
        budget_run(tmp_path, "cpu", 10, "cce", seed, 0.88)
        budget_run(tmp_path, "cpu150", 150, "cce", seed, 0.90)
    code, out, err = make_tables("corel/fashion_budgets", "--outputs", str(tmp_path))
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("| Model"))
    assert "cpu: test acc" in header and "cpu150: test acc" in header and "paper:" not in header
    row = next(line for line in out.splitlines() if line.startswith("| FFNN | CCE |"))
    assert "88.00 ± 0.00" in row and "90.00 ± 0.00" in row  # never one pooled 89.00
    assert "89.00" not in out


def test_the_paper_budget_checks_the_claims_on_the_recovered_recipes_gaussian_corel(
    tmp_path: Path, make_tables
) -> None:
    accs = {"cce": (0.900, 0.902, 0.904), "gaussian_corel_authors_fixed_gamma": (0.910, 0.912, 0.914)}
    for loss, values in accs.items():
        for seed, acc in enumerate(values):
            write_run(
                tmp_path,
                "corel/fashion_paper_table2",
                {"dataset": "fashion_mnist", "model": "ffnn", "loss": loss, "seed": seed},
                {"test/acc": acc, "test/kmeans/acc": acc - 0.1, "test/kmeans/silhouette": 0.3},
                config={"protocol": {"budget": "paper", "recipe": "recovered"}, "trainer": {"max_epochs": 150}},
            )
    code, out, err = make_tables("corel/fashion_paper_table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "| FFNN | Gaussian-COREL (authors' loss, γ fixed) | 91.20 ± 0.20" in out
    assert "COREL recipe recovered (corel_recipe)" in out
    claim = next(line for line in out.splitlines() if "[authors' loss, γ fixed] Gaussian-COREL beats CCE" in line)
    assert "holds" in claim and "Welch" in claim, claim
    assert "[authors' code]" not in out  # no run of the authors' code's variant: no claim on it
