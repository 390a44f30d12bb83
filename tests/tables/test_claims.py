"""A paper's claim checked on our numbers (``report.check``): Welch's t over two rows' seeds, one-sided in the
claimed direction, reads "holds", "reversed" or "not shown (p = ...)"; a cell of one seed is compared by its mean
and says so; a cell against a published number gets the one-sample t. Each expected p is computed here with
scipy, on the same values."""

from __future__ import annotations

import math
import warnings
from operator import ge, gt, le, lt

import pytest
from scipy import stats

from clusterable.tables.report import Cell, Claim, check, p_text

HIGH = [0.90, 0.91, 0.93]
LOW = [0.80, 0.81, 0.82]


def welch(a: list[float], b: list[float], alternative: str) -> float:
    return float(stats.ttest_ind(a, b, equal_var=False, alternative=alternative).pvalue)


def test_a_clear_win_holds_and_names_the_test_the_difference_and_p() -> None:
    claim = check("ours beat theirs", [("fashion", Cell(HIGH), Cell(LOW))], gt, scale=100)
    p = welch(HIGH, LOW, "greater")
    assert p < 0.05
    assert claim.holds is True and claim.verdict == "holds"
    assert claim.pairs[0].p == pytest.approx(p) and claim.pairs[0].test == "welch"
    assert claim.detail == f"Welch's t over seeds, one-sided, α = 0.05; difference (p): fashion +10.33 ({p_text(p)})"
    assert claim.line() == f"- [holds] ours beat theirs ({claim.detail})"


def test_a_reversal_reads_reversed_with_the_opposite_directions_p() -> None:
    claim = check("ours beat theirs", [("fashion", Cell(LOW), Cell(HIGH))], gt, scale=100)
    p_reverse = welch(LOW, HIGH, "less")
    assert p_reverse < 0.05 and welch(LOW, HIGH, "greater") > 0.05
    assert claim.holds is False and claim.verdict == "reversed"
    assert claim.pairs[0].p_reverse == pytest.approx(p_reverse)
    assert claim.detail.endswith(f"fashion -10.33 (reversed, {p_text(p_reverse)})")
    assert claim.line().startswith("- [reversed] ours beat theirs (")


def test_a_tie_reads_not_shown_with_its_p() -> None:
    a, b = [0.80, 0.85, 0.82], [0.81, 0.83, 0.84]
    claim = check("ours beat theirs", [("fashion", Cell(a), Cell(b))], gt, scale=100)
    p = welch(a, b, "greater")
    assert 0.05 < p and 0.05 < welch(a, b, "less")  # neither direction shown
    assert claim.holds is False and claim.verdict == f"not shown (p = {p:.2g})"
    assert claim.line().startswith(f"- [not shown (p = {p:.2g})] ours beat theirs (")
    assert claim.detail.endswith(f"fashion -0.33 (p = {p:.2g})")


def test_lower_is_better_claims_test_the_other_direction_and_ge_le_test_like_gt_lt() -> None:
    p = welch(LOW, HIGH, "less")
    for relation in (lt, le):
        claim = check("ours lose less", [("x", Cell(LOW), Cell(HIGH))], relation)
        assert claim.verdict == "holds" and claim.pairs[0].p == pytest.approx(p)
    # "At least matches" is tested as "above": a tie is not shown, a loss is reversed.
    assert check("matches", [("x", Cell(HIGH), Cell(LOW))], ge).verdict == "holds"
    assert check("matches", [("x", Cell(LOW), Cell(HIGH))], ge).verdict == "reversed"
    assert check("matches", [("x", Cell([0.80, 0.85, 0.82]), Cell([0.81, 0.83, 0.84]))], ge).verdict.startswith(
        "not shown (p = "
    )


def test_one_seed_is_no_test_its_means_verdict_says_so() -> None:
    held = check("ours beat theirs", [("x", Cell([0.9]), Cell(LOW))], gt, scale=100)
    assert held.holds is False and held.verdict == "holds on one seed"
    assert held.detail == "one seed: means compared, no test; difference: x +9.00 (one seed)"
    assert held.line().startswith("- [holds on one seed] ours beat theirs (")
    failed = check("ours beat theirs", [("x", Cell(LOW), Cell([0.9]))], gt, scale=100)
    assert failed.holds is False and failed.verdict == "does not hold on one seed"
    assert failed.detail.endswith("x -9.00 (one seed, fails)")


def test_identical_values_with_no_spread_do_not_crash_and_show_nothing() -> None:
    with warnings.catch_warnings():  # scipy warns of precision loss on identical values
        warnings.simplefilter("ignore", RuntimeWarning)
        assert math.isnan(stats.ttest_ind([0.8, 0.8], [0.8, 0.8], equal_var=False).pvalue)  # what scipy gives
    claim = check("ours beat theirs", [("x", Cell([0.8, 0.8]), Cell([0.8, 0.8]))], gt)
    assert claim.holds is False and claim.verdict == "not shown (p undefined, no spread)"
    assert claim.detail.endswith("x +0.00 (p undefined, no spread)")
    # Values that do not vary but differ: every seed agrees, the difference is certain either way.
    assert check("x", [("x", Cell([0.9, 0.9]), Cell([0.8, 0.8]))], gt).verdict == "holds"
    assert check("x", [("x", Cell([0.8, 0.8]), Cell([0.9, 0.9]))], gt).verdict == "reversed"


def test_a_cell_against_a_published_number_gets_the_one_sample_t() -> None:
    claim = check("ours reach the paper's", [("cub", Cell(HIGH), 0.85)], ge, scale=100, digits=1)
    p = float(stats.ttest_1samp(HIGH, 0.85, alternative="greater").pvalue)
    assert p < 0.05 and claim.verdict == "holds" and claim.pairs[0].p == pytest.approx(p)
    assert claim.detail == (
        f"one-sample t over seeds against the number, one-sided, α = 0.05; difference (p): cub +6.3 ({p_text(p)})"
    )
    # The number on the left: the cell's direction is the claim's turned round.
    below = check("the threshold is above ours", [("x", 0.95, Cell(HIGH))], gt)
    p_below = float(stats.ttest_1samp(HIGH, 0.95, alternative="less").pvalue)
    assert p_below < 0.05 and below.pairs[0].p == pytest.approx(p_below) and below.verdict == "holds"


def test_plain_numbers_say_why_no_test_applies() -> None:
    claim = check(
        "spread < 1 point",
        [("a", 0.4, 1.0), ("b", 1.5, 1.0)],
        lt,
        basis="a spread over the grid, no seed test",
    )
    assert claim.holds is False and claim.verdict == "does not hold"
    assert claim.detail == "a spread over the grid, no seed test; difference: a -0.60; b +0.50 (fails)"


def test_a_claim_of_every_pair_reads_its_weakest_pair() -> None:
    tie_a, tie_b = [0.80, 0.85, 0.82], [0.81, 0.83, 0.84]
    win, tie, loss = (
        ("win", Cell(HIGH), Cell(LOW)),
        ("tie", Cell(tie_a), Cell(tie_b)),
        ("loss", Cell(LOW), Cell(HIGH)),
    )
    assert check("x", [win, tie], gt).verdict == f"not shown (p = {welch(tie_a, tie_b, 'greater'):.2g})"
    assert check("x", [win, tie, loss], gt).verdict == "reversed"
    assert check("x", [win, ("one", Cell([0.9]), Cell(LOW))], gt).verdict == "holds on one seed"
    assert check("x", [win, win], gt).holds is True


def test_missing_numbers_are_named_and_none_at_all_cannot_be_checked() -> None:
    claim = check("x", [("win", Cell(HIGH), Cell(LOW)), ("gone", Cell(), Cell(LOW))], gt)
    assert claim.verdict == "holds" and claim.detail.endswith("; checked on 1 of 2, no numbers for gone")
    none = check("x", [("gone", Cell(), float("nan"))], gt)
    assert none.holds is None and none.line() == "- [cannot check] x (numbers missing)"


def test_a_claims_verdict_and_holds_agree() -> None:
    assert Claim("x", True).line() == "- [holds] x" and Claim("x", False, "why").line() == "- [does not hold] x (why)"
    assert Claim("x", False, "", "not shown (p = 0.33)").line() == "- [not shown (p = 0.33)] x"
    with pytest.raises(ValueError, match="reversed"):
        Claim("x", True, "", "reversed")
    with pytest.raises(ValueError, match="holds on one seed"):
        Claim("x", True, "", "holds on one seed")
