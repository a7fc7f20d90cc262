"""The bare-list order step (scorer.list_order): when ``a, b, c`` is compared in order.

Without a question a gold list of values is compared in order: a permuted answer to a
question that asked for an order would otherwise be paid (MATH's own grader tests assert
``4, 10, -2`` != ``10, 4, -2``). The question, when given, can ask for a set of values
("find all the solutions") and then any order is paid. The cases are hand-written, one per
kind of list and question.
"""

from __future__ import annotations

import pytest

from scorer.equivalence import verify
from scorer.list_order import as_sequence, compare_in_order, gold_list_of_values
from scorer.parse import parse_answer
from scorer.question import demands


@pytest.mark.parametrize(
    ("gold", "of_values"),
    [
        ("0.1, 4, 2", True),
        ("1, 2, 3", True),  # increasing or not: the order may still be asked for
        ("224, -176", True),
        ("1, \\sqrt{2}, 0", True),
        ("x = 2, y = 1", False),  # labelled items match by label, not by place
        ("A, C", False),  # choice letters name options: a set
        ("(4, -1, 7)", False),  # a tuple is ordered anyway: not a bare list
        ("\\{4, -1\\}", False),  # a set is a set
        ("5", False),
    ],
)
def test_which_gold_lists_are_lists_of_values(gold: str, of_values: bool) -> None:
    assert gold_list_of_values(parse_answer(gold)) is of_values


@pytest.mark.parametrize(
    ("pred", "gold", "correct"),
    [
        ("4, .1, 2", "0.1, 4, 2", False),
        ("6, 9, -1", "9, 6, -1", False),  # a decreasing gold keeps its order too
        ("3, 8, 5", "3, 5, 8", False),  # so does an increasing one
        ("-9 \\text{ and } 12", "12, -9", False),
        ("\\boxed{8} and \\boxed{5}", "5, 8", False),  # a run of boxes is a list
        ("\\{8, 5\\}", "5, 8", False),  # writing a set is no way around the order
        ("\\left\\{8, 5\\right\\}", "5, 8", False),
        ("x \\in \\{8, 5\\}", "5, 8", False),
        ("\\{5, 8\\}", "5, 8", True),  # a set in the gold's order is that order
        ("x \\in \\{5, 8\\}", "5, 8", True),
        ("\\boxed{5} and \\boxed{8}", "5, 8", True),
        ("0.1, 4, 2", "0.1, 4, 2", True),
        ("(0.1, 4, 2)", "0.1, 4, 2", True),
        ("0.1, 4", "0.1, 4, 2", False),
        ("y = 3, x = 6", "x = 6, y = 3", True),  # labelled: matched by label
        ("D, B", "B, D", True),  # choice letters: a set
        ("8, 5", "\\{5, 8\\}", True),  # the gold is a set: any order
        ("\\pm 4", "-4, 4", True),  # an answer written with \\pm: two values in no order
        ("x = \\pm 4", "4, -4", True),
        ("4, -4", "\\pm 4", True),
    ],
)
def test_bare_lists_without_a_question(pred: str, gold: str, correct: bool) -> None:
    assert verify(pred, gold).correct is correct


@pytest.mark.parametrize(
    ("question", "pred", "gold", "correct"),
    [
        # the question asks for a set of values: any order, whatever order the gold has
        ("Find all real solutions, separated by commas.", "4, .1, 2", "0.1, 4, 2", True),
        ("Enter all the roots of $p(x)$.", "2, 0.1, 4", "0.1, 4, 2", True),
        ("What are the possible values of $k$?", "8, 5", "5, 8", True),
        ("Find the real roots of $x^2 - 13x + 40$.", "8, 5", "5, 8", True),
        ("Find all $x$ with $x^2 = 4x + 12$.", "\\{6, -2\\}", "-2, 6", True),
        ("Find all real $t$ such that $t^2 = 9$.", "t = 3, t = -3", "-3, 3", True),
        # the question asks for an order: in order
        ("List the roots in increasing order.", "3, 1, 2", "1, 2, 3", False),
        ("List the roots in increasing order.", "1, 2, 3", "1, 2, 3", True),
        ("Find all the roots, in increasing order.", "3, 1, 2", "1, 2, 3", False),
        # a question that asks for neither: in order
        ("Compute $a$, $b$ and $c$.", "4, .1, 2", "0.1, 4, 2", False),
        ("Compute $a$, $b$ and $c$.", "3, 2, 1", "1, 2, 3", False),
        ("Compute $a$, $b$ and $c$.", "1, 2, 3", "1, 2, 3", True),
    ],
)
def test_bare_lists_with_a_question(question: str, pred: str, gold: str, correct: bool) -> None:
    assert verify(pred, gold, question=question).correct is correct


@pytest.mark.parametrize(
    ("question", "all_values"),
    [
        ("Find all values of $x$ such that ...", True),
        ("Enter all the solutions, separated by commas.", True),
        ("What are all possible values of $k$?", True),
        ("What are the possible values of $k$?", True),
        ("List all real roots.", True),
        ("Find the complex roots of $z^3 = 1$.", True),
        ("What are the solutions of $x^2 = 9$?", True),
        ("What is the value of $x$?", False),
        ("Find $a$ and $b$. All answers are integers.", False),
        ("Find the sum of the roots and their product.", False),
    ],
)
def test_the_question_asks_for_all_the_values(question: str, all_values: bool) -> None:
    assert demands(question).all_values is all_values


def test_the_rule_without_a_question_orders_every_list_of_values() -> None:
    gold = parse_answer("7, 2")
    assert compare_in_order(gold, None) is True
    assert compare_in_order(gold, demands("Compute $p$ and $q$.")) is True
    assert compare_in_order(gold, demands("Find all solutions.")) is False
    assert compare_in_order(parse_answer("2, 7"), demands("Give the ordered pair.")) is True
    assert compare_in_order(parse_answer("p = 7, q = 2"), None) is False


@pytest.mark.parametrize(
    ("norm", "sequence"),
    [
        ("7, 2", "(7, 2)"),
        ("\\{7, 2\\}", "(7, 2)"),
        ("x \\in \\{7, 2\\}", "(7, 2)"),
        ("(7, 2)", "(7, 2)"),  # already a tuple
        ("7", "7"),
    ],
)
def test_an_answer_is_written_as_a_sequence(norm: str, sequence: str) -> None:
    assert as_sequence(norm, parse_answer(norm)) == sequence
