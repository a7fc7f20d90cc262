"""The approximation step (scorer.approximation): a decimal after ``\\approx`` is a claim.

The two rejected shapes are from public labelled solutions (RewardBench's math subset), written
out by hand; the controls are the commentary the docs promise to keep reading as exact.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scorer.approximation import stated_approximations
from scorer.equivalence import verify
from tests.test_grading_adversarial import examples


@pytest.mark.parametrize(
    ("norm", "stated"),
    [
        ("\\frac{1}{8} \\approx 0.124", ["0.124"]),
        ("\\sqrt{53} \\approx 7.5 - 0.076923 = 7.423077", ["7.423077"]),
        ("a \\approx 0.095(0.309 + 1) \\approx 0.124", ["0.124"]),  # only whole decimals
        ("\\frac{16}{27} \\approx 0.59", []),  # 2 significant figures: too coarse to claim
        ("x \\approx 11", []),  # an integer is not read as a claim
        ("\\frac{1}{8}", []),
    ],
)
def test_stated_approximations(norm: str, stated: list[str]) -> None:
    assert stated_approximations(norm) == stated


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("\\sin^2 18^\\circ (\\sin 18^\\circ + 1) \\approx 0.095(0.309 + 1) \\approx 0.124.",
         "\\frac{1}{8}"),
        ("\\sqrt{53} \\approx 7.5 - 0.076923 = 7.423077", "\\sqrt{53}"),
        ("\\frac{1}{3} \\approx 0.334", "\\frac{1}{3}"),
        ("x = \\frac{1}{8} \\approx 0.2500", "\\frac{1}{8}"),
    ],
)  # fmt: skip
def test_an_approximation_that_is_not_the_gold_is_refused(pred: str, gold: str) -> None:
    v = verify(pred, gold)
    assert not v.correct
    assert "approximation" in v.detail


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("\\frac{16}{27} \\approx 0.5926", "\\frac{16}{27}"),
        ("\\frac{2}{3} \\approx 0.666", "\\frac{2}{3}"),  # truncated
        ("\\frac{1}{3} \\approx 0.33", "\\frac{1}{3}"),  # coarse commentary
        ("\\sqrt{2} \\approx 1.414", "\\sqrt{2}"),
        ("40\\pi \\approx 125.66", "40\\pi"),
        ("x \\approx 11", "11"),
        ("The answer is $\\boxed{\\frac{1}{8}}$, about 0.124.", "\\frac{1}{8}"),  # outside
    ],
)
def test_commentary_that_agrees_is_still_read_as_the_exact_answer(pred: str, gold: str) -> None:
    assert verify(pred, gold).correct


@examples(60)
@given(st.integers(1, 500), st.sampled_from([7, 9, 11, 13, 17, 19, 23]), st.integers(3, 6))
def test_a_decimal_off_in_its_last_places_is_a_wrong_claim(p: int, q: int, sig: int) -> None:
    value = Fraction(p, q)
    assume(value.denominator == q)
    exp = min(Decimal(p / q).adjusted() - sig + 1, -1)
    quantum = Decimal(1).scaleb(exp)
    rounded = (Decimal(p) / Decimal(q)).quantize(quantum)
    exact = f"\\frac{{{p}}}{{{q}}}"
    assert verify(f"{exact} \\approx {rounded:f}", exact).correct
    assert not verify(f"{exact} \\approx {rounded + 3 * quantum:f}", exact).correct
