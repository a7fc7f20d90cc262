"""Rules added for the misclassified rows of the public bench (issue #29, docs/scorer.md,
*Against Math-Verify*), each with hand-written cases of the same class: the answer finder's
final-answer phrases, a value computed after the final answer, choice letters against
variables, and a choice in a box followed by its working."""

from __future__ import annotations

import pytest

from scorer.answer import exact_number, find_answer
from scorer.equivalence import verify


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Its height is $h$.\n\nThe correct option is (B) Sphere.", "(B) Sphere"),
        ("So the correct answer is $14$.", "14"),
        ("Hence the right choice is (A).", "(A)"),
        ("Thus the correct answer choice is (E).", "(E)"),
        ("The best option is to expand. So $x = 4$.", "x = 4"),  # not a final-answer phrase
    ],
)
def test_correct_answer_and_option_phrases_are_final_answer_phrases(text: str, answer: str) -> None:
    assert find_answer(text).answer == answer


@pytest.mark.parametrize(
    ("text", "gold", "correct", "reason"),
    [
        # the final answer unevaluated, then evaluated to another number: two answers
        (
            "The final answer is $\\frac{9!}{7!\\,2!}$. Cancelling, $9 \\cdot 8 = 72$.",
            "36",
            False,
            "hedged",
        ),
        ("The answer is 40. Adding the last one, 40 + 2 = 42.", "40", False, "hedged"),
        # a check that arrives at the same value, or a later number without '=', is no hedge
        ("The final answer is $\\frac{9!}{7!\\,2!}$. That is $72 / 2 = 36$.", "36", True, None),
        ("The answer is 40. Check: $8 \\cdot 5 = 40$.", "40", True, None),
        ("The answer is 40. The 3 rows are left over.", "40", True, None),
        ("The answer is $x = 40$. Then $y = 2x = 80$.", "40", False, "hedged"),
    ],
)
def test_a_value_computed_after_the_final_answer(
    text: str, gold: str, correct: bool, reason: str | None
) -> None:
    v = verify(text, gold)
    assert v.correct is correct, v
    if reason is not None:
        assert v.reason == reason


@pytest.mark.parametrize(
    ("text", "value"),
    [("(9! / (7! 2!))", 36), ("\\frac{3}{4} + 0.25", 1), ("x + 1", None), ("1, 2", None)],
)
def test_exact_number(text: str, value: int | None) -> None:
    assert exact_number(text) == value


@pytest.mark.parametrize(
    ("pred", "gold", "correct"),
    [
        ("d", "\\text{(D)}", False),  # a lower-case bare letter is a variable
        ("d.", "(D)", False),
        ("(d)", "\\text{(D)}", True),  # written as an option: any case
        ("\\textbf{(d)}", "(D)", True),
        ("option d", "(D)", True),
        ("D", "\\text{(D)}", True),
        ("(D)", "d", False),
        ("E", "\\text{(D)}", False),
    ],
)
def test_choice_letters_and_variables(pred: str, gold: str, correct: bool) -> None:
    assert verify(pred, gold).correct is correct


@pytest.mark.parametrize(
    ("text", "gold", "correct"),
    [
        ("Thus the answer is $\\boxed{\\text{(A)}} 2(1 + s)^k = 5$.", "\\text{(A)}", True),
        ("Thus the answer is $\\boxed{\\text{(A)}} 2(1 + s)^k = 5$.", "\\text{(B)}", False),
        ("\\boxed{4} 2", "4", False),  # a number box followed by a digit is still a factor
        ("3\\boxed{\\text{(A)}}", "\\text{(A)}", False),  # a number before a box: a factor
    ],
)
def test_a_choice_in_a_box_is_no_factor(text: str, gold: str, correct: bool) -> None:
    assert verify(text, gold).correct is correct


@pytest.mark.parametrize(
    ("text", "gold"),
    [
        # a phrase or a box whose prose states two values is no answer, never its last number
        ("The answer is 40, for the 3 rows.", "3"),
        ("The final answer is 12 apples in 3 baskets.", "3"),
        ("Final answer: 40, since there are 3 rows.", "3"),
        ("\\boxed{\\text{40 for the 3 rows}}", "3"),
        ("The answer is 40 for all 3 rows.", "40"),  # ambiguous either way: no answer
    ],
)
def test_prose_stating_several_values_states_no_answer(text: str, gold: str) -> None:
    assert not verify(text, gold).correct


@pytest.mark.parametrize(
    ("text", "gold"),
    [
        ("The answer is 40 apples.", "40"),
        ("The answer is $x = 5$.", "5"),
        ("The answer is 18 (she makes $18 a day).", "18"),  # the same value twice
        ("The answer is 5 + 7 = 12 apples.", "12"),  # one formula
        ("The answer is 2 and 3.", "2, 3"),  # one list
        ("\\boxed{\\text{The total is } 37}", "37"),
    ],
)
def test_prose_stating_one_value_is_still_read(text: str, gold: str) -> None:
    assert verify(text, gold).correct
