"""Step functions and parity are compared where they differ (issue #29, precision).

Random-point equality used to sample only small positive rationals, where two different floor
expressions can coincide (``\\lfloor n/10 \\rfloor`` and ``\\lfloor n/12 \\rfloor`` are both 0
below 10). Floor, ceiling and powers of -1 are now sampled at integers (small, negative,
large), just either side of integer boundaries and at large rationals.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorer.equivalence import verify

DIFFERENT = [
    ("\\lfloor \\frac{n}{10} \\rfloor", "\\lfloor \\frac{n}{12} \\rfloor"),  # equal below 10
    ("\\lfloor \\frac{n}{1000} \\rfloor", "0"),  # equal below 1000
    ("\\lfloor \\frac{n}{10^7} \\rfloor", "0"),  # a large argument
    ("\\lfloor x \\rfloor", "\\lfloor x + \\frac{1}{1000} \\rfloor"),  # a boundary, real x
    ("\\lceil x \\rceil", "\\lfloor x \\rfloor + 1"),  # differ at every integer
    ("\\lfloor \\frac{x}{2} \\rfloor", "\\lceil \\frac{x-1}{2} \\rceil"),  # real x: x = 1.5
    ("(-1)^n", "(-1)^{n+1}"),  # parity
    ("(-1)^n", "1"),
    ("\\lfloor \\frac{n^2}{4} \\rfloor", "\\frac{n^2}{4}"),
    ("\\lfloor \\sqrt{n} \\rfloor", "\\lfloor \\frac{n}{3} \\rfloor"),
]
EQUAL = [
    ("\\lfloor \\frac{n}{2} \\rfloor + 1", "\\lfloor \\frac{n+2}{2} \\rfloor"),
    # equal at every integer, and n names an integer
    ("\\lfloor \\frac{n}{2} \\rfloor", "\\lceil \\frac{n-1}{2} \\rceil"),
    ("\\lceil \\frac{n}{3} \\rceil", "\\lfloor \\frac{n+2}{3} \\rfloor"),
    ("(-1)^n", "(-1)^{n+2}"),
    ("(-1)^{n}", "(-1)^{3n}"),
    ("\\lfloor x \\rfloor + 3", "\\lfloor x + 3 \\rfloor"),
]


@pytest.mark.parametrize(("pred", "gold"), DIFFERENT)
def test_step_forms_that_differ_somewhere_are_unequal(pred: str, gold: str) -> None:
    for a, b in ((pred, gold), (gold, pred)):
        v = verify(a, b)
        assert not v.correct, (a, b, v)
        assert v.reason != "timeout"


@pytest.mark.parametrize(("pred", "gold"), EQUAL)
def test_equal_step_forms_are_equal(pred: str, gold: str) -> None:
    assert verify(pred, gold).correct
    assert verify(gold, pred).correct


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.integers(2, 60), st.integers(2, 60), st.integers(-5, 5))
def test_floors_of_different_quotients_differ(a: int, b: int, shift: int) -> None:
    """``\\lfloor (n+s)/a \\rfloor`` vs ``\\lfloor (n+s)/b \\rfloor`` for ``a != b`` differ at a
    large enough n; shifting the argument by a multiple of ``a`` moves the floor by a whole
    number, which stays equal."""
    left = f"\\lfloor \\frac{{n + {shift}}}{{{a}}} \\rfloor"
    if a != b:
        assert not verify(left, f"\\lfloor \\frac{{n + {shift}}}{{{b}}} \\rfloor").correct
    assert verify(left, f"\\lfloor \\frac{{n + {shift + 3 * a}}}{{{a}}} \\rfloor - 3").correct
