"""Boxes joined by *or* that state one value are one answer (scorer.answer.one_value).

The solution shape is from a public labelled set (RewardBench's math subset, a labelled-right
reference solution), written out by hand; every other *or* between boxes stays a hedge.
"""

from __future__ import annotations

import pytest

from scorer.answer import find_answer, one_value
from scorer.equivalence import verify
from scorer.rewards import reward_config, score_text

SOLUTION = (
    "Expressed as a fraction, $d = 15\\frac{975}{1000} = \\boxed{15\\frac{39}{40}},$ or "
    "$\\boxed{\\frac{639}{40}}$ inches."
)


@pytest.mark.parametrize(
    ("contents", "one"),
    [
        (["15\\frac{39}{40}", "\\frac{639}{40}"], True),
        (["0.5", "\\frac{1}{2}"], True),
        (["7", "7"], True),
        (["8", "9"], False),
        (["x", "2x/2"], False),  # not exact numbers: no algebra in the answer finder
        (["(1, 2)", "(1, 2.0)"], False),  # not a single number
    ],
)
def test_one_value(contents: list[str], one: bool) -> None:
    assert one_value(contents) is one


def test_two_forms_of_one_value_joined_by_or_are_the_answer() -> None:
    assert find_answer(SOLUTION).hedge is None
    assert verify(SOLUTION, "\\frac{639}{40}").correct
    assert score_text(SOLUTION, "\\frac{639}{40}", reward_config("binary")).status == "correct"


@pytest.mark.parametrize(
    "text", ["$\\boxed{8}$ or $\\boxed{9}$", "\\boxed{8}\\boxed{9}", "\\boxed{x} or \\boxed{2x/2}"]
)
def test_different_boxes_joined_by_or_stay_a_hedge(text: str) -> None:
    assert find_answer(text).hedge is not None
    assert verify(text, "8").reason == "hedged"
