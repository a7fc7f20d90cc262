"""The comparison modes of /judge: what each accepts, and where it says outputs first differ."""

from __future__ import annotations

import pytest

from exec_server.output_compare import Comparison, compare, values_agree

EXPECTED = "3\n1 2\n"


@pytest.mark.parametrize(
    ("mode", "actual", "agrees"),
    [
        (Comparison.EXACT, "3\n1 2\n", True),
        (Comparison.EXACT, "3\n1 2", False),  # a missing final newline matters
        (Comparison.EXACT, "3 \n1 2\n", False),
        (Comparison.WHITESPACE, "3   1\t2", True),  # only the tokens matter
        (Comparison.WHITESPACE, "3\n\n1 2\n\n\n", True),
        (Comparison.WHITESPACE, "3\n12\n", False),
        (Comparison.WHITESPACE, "3\n1 2 4\n", False),
        (Comparison.LINES, "1 2\n3\n", True),  # any order
        (Comparison.LINES, "1 2   \n3\n\n", True),  # trailing spaces, final blank lines
        (Comparison.LINES, "1  2\n3\n", False),  # inside a line spacing matters
        (Comparison.LINES, "3\n3\n1 2\n", False),  # a multiset: counts matter
    ],
)
def test_modes(mode: Comparison, actual: str, agrees: bool) -> None:
    assert (compare(mode, EXPECTED, actual) is None) is agrees


def test_float_tolerance_absolute_and_relative() -> None:
    assert compare(Comparison.FLOAT, "0.333333", "0.3333331", 1e-6) is None
    assert compare(Comparison.FLOAT, "1000000", "1000000.5", 1e-6) is None  # relative
    assert compare(Comparison.FLOAT, "0.5", "0.5001", 1e-6) is not None
    assert compare(Comparison.FLOAT, "yes 1.0", "yes 1", 1e-9) is None
    assert compare(Comparison.FLOAT, "yes", "YES", 1e-6) is not None  # words stay exact
    assert compare(Comparison.FLOAT, "1", "nan", 1e-6) is not None  # nan is near nothing
    assert compare(Comparison.FLOAT, "inf", "inf", 1e-6) is None


def test_difference_says_where() -> None:
    diff = compare(Comparison.WHITESPACE, "1 2 3\n4 5\n", "1 2 3\n4 6\n")
    assert diff is not None
    assert (diff.line, diff.column, diff.expected, diff.actual) == (2, 3, "5", "6")
    short = compare(Comparison.WHITESPACE, "1 2 3", "1 2")
    assert short is not None and short.note == "2 tokens, 3 expected"
    assert short.expected == "3" and short.actual == ""
    exact = compare(Comparison.EXACT, "abc\ndef", "abc\ndxf")
    assert exact is not None and (exact.line, exact.column) == (2, 2)
    assert exact.expected == "ef" and exact.actual == "xf"
    cut = compare(Comparison.EXACT, "abc\n", "abc")
    assert cut is not None and cut.note == "the output ends early"


def test_lines_difference_names_the_unexpected_line() -> None:
    diff = compare(Comparison.LINES, "a\nb\nc\n", "c\nx\na\n")
    assert diff is not None and (diff.line, diff.actual, diff.expected) == (2, "x", "b")


def test_values_agree_for_call_based_results() -> None:
    assert values_agree([1, [2, 3]], [1, [2, 3]], None)
    assert not values_agree([1, 2], [2, 1], None)
    assert not values_agree(True, 1, None) and not values_agree(1, True, None)
    assert values_agree(0.1 + 0.2, 0.3, 1e-9) and not values_agree(0.1 + 0.2, 0.3, None)
    assert values_agree({"a": [1.0]}, {"a": [1.0000000001]}, 1e-6)
    assert not values_agree("1", 1, None)
