"""Where a table's rows rest on our reading of a paper, not on what it prints: one note per reading the table's
runs were made under, naming the reading and the switch that changes it. ``tables.cli.build`` adds the note to
every table, so no row made under a reading is shown without it.

A reading is recognised from what a run recorded (``Run.get``: its group choices and resolved config), never from
its folder's name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from clusterable.tables.report import Run


@dataclass(frozen=True)
class Reading:
    """One reading of ours: which runs it made (``made``) and what the note says (``note``)."""

    name: str
    made: Callable[[Run], bool]
    note: str


READINGS = (
    Reading(
        "pce_lambda",
        lambda r: r.get("loss") == "pce" and r.get("loss.lam") is None,
        "Reading: PCE's λ (Boudiaf et al. 2020, eq. 13 and §4.1) is the largest eigenvalue of the batch's second "
        "moment ZᵀZ/n, our reading of the paper's remark that λ needs the eigenvalues of a d x d matrix; with it "
        "f₂ of eq. 13 is concave in θ, where the paper's sketch asks λ to keep it convex. loss.lam=<number> fixes "
        "λ instead.",
    ),
    Reading(
        "safir_kl_scale",
        lambda r: r.get("loss.kl_scale") == "per_value",
        "Reading: the VAE's KL term (Safir 2022, §4.3 and Algorithm 5) is divided by the number of reconstructed "
        "values (784 pixels: β/784 per sample), our reading of the ELBO's balance on the mean squared error's "
        "scale; loss.kl_scale=per_row takes the KL as it is (with loss.recon_reduction=sum).",
    ),
    Reading(
        "safir_alg4_sign",
        lambda r: r.get("loss.kl_formula") == "thesis_alg4",
        "Reading: the KL term is Safir 2022's Algorithm 4 as printed, Q − P (the prior's log-density minus the "
        "posterior's quadratic term): minus a KL estimate, kept to test which reading the thesis's tables fit; "
        "loss.kl_formula=exact is the KL.",
    ),
    Reading(
        "corel_authors_loss",
        lambda r: r.get("loss") in ("gaussian_corel_authors", "gaussian_corel_authors_fixed_gamma"),
        'Reading: the rows of the authors\' Gaussian-COREL ("authors\' loss", "authors\' code") compute it as their '
        "code does "
        "(kiankd/corel2019, corel/loss_functions.py GaussianARLoss: weights λ² and (1 − λ)², bounded below), "
        "not eq. 6 as the paper prints it; our reading of the loss behind the supplement's curves. "
        "loss=gaussian_corel is eq. 6.",
    ),
)


def readings_note(runs: Sequence[Run]) -> list[str]:
    """The notes of the readings any of ``runs`` was made under, in ``READINGS`` order ([] if none)."""
    return [reading.note for reading in READINGS if any(reading.made(run) for run in runs)]
