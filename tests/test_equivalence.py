"""verify(pred, gold): equal / not-equal pairs per answer type.

Every expectation below comes from the mathematics (or from the documented policy in
docs/scorer.md, marked "policy"), not from running the implementation.
"""

from __future__ import annotations

import pytest

from scorer.equivalence import verify
from scorer.verdict import Reason, Verdict


def _check(pred: str, gold: str | int | float, equal: bool) -> Verdict:
    v = verify(pred, gold)
    assert v.correct is equal, f"{pred!r} vs {gold!r}: {v}"
    if equal:
        assert v.reason in Reason.CORRECT
    else:
        assert v.reason not in Reason.CORRECT
    return v


# --------------------------------------------------------------------------------- numbers
INTEGERS_EQUAL = [
    ("42", "42"),
    ("-5", "-5"),
    ("+7", "7"),
    ("007", "7"),  # leading zeros do not change the value
    ("1,000", "1000"),
    ("1{,}000", "1000"),
    ("1,\\!000", "1000"),
    ("1\\,000", "1000"),
    ("1 000", "1000"),
    ("12,000,023", "12000023"),
    ("123456789012345678901234567890", "123456789012345678901234567890"),
    ("2^{10}", "1024"),
    ("5!", "120"),
    ("\\binom{6}{3}", "20"),
    ("\\dbinom{6}{3}", "20"),
    ("(9+1)", "10"),
    ("2 \\cdot 3", "6"),
    ("2 \\times 3", "6"),
    ("2^6 \\cdot 3^5", "15552"),
]
INTEGERS_UNEQUAL = [
    ("41", "42"),
    ("-5", "5"),
    ("123456789012345678901234567890", "123456789012345678901234567891"),
    ("10^{100}", "10^{100}+1"),
    ("32, 349", "32349"),  # comma + space separates two items
    ("4\\sqrt{2}", "4"),
    ("1", "1\\sqrt{19}"),
]


@pytest.mark.parametrize(("pred", "gold"), INTEGERS_EQUAL)
def test_integers_equal(pred: str, gold: str) -> None:
    _check(pred, gold, True)


@pytest.mark.parametrize(("pred", "gold"), INTEGERS_UNEQUAL)
def test_integers_unequal(pred: str, gold: str) -> None:
    _check(pred, gold, False)


def test_tiny_rationals_are_exact() -> None:
    # 1/2004! and 1/2006! differ by a factor 2005*2006; float rounding would call them equal.
    _check("\\frac{1}{2006!}", "\\frac{1}{2004!}", False)
    _check("\\frac{1}{2^{98}}", "\\frac{1}{2^{99}}", False)
    _check("\\frac{1}{3 \\cdot 2^{2006}}", "\\frac{2^{2005}+1}{3 \\cdot 2^{2006}}", False)
    _check("\\frac{1}{2005 \\cdot 2004!}", "\\frac{1}{2005!}", True)
    _check("2^{-98}", "\\frac{1}{2^{98}}", True)
    _check("1e-300", "2e-300", False)
    v = _check("\\frac{1}{2004!}", "\\frac{1}{2004 \\cdot 2003!}", True)
    assert v.reason == Reason.NUMERIC_EQUAL


FRACTIONS_EQUAL = [
    ("\\frac{1}{2}", "0.5"),
    ("\\dfrac{1}{2}", "1/2"),
    ("\\tfrac12", "\\frac{1}{2}"),
    ("\\frac12", "0.5"),
    ("\\frac3{3}", "1"),
    ("-\\frac{10}{9}", "-10/9"),
    ("\\frac{-1}{2}", "-\\frac{1}{2}"),
    ("\\frac{1}{-2}", "-0.5"),
    ("2/(-3)", "-2/3"),
    ("\\frac{5}{2}", "2.5"),
    ("\\left( \\frac{1}{3} \\right)", "1/3"),
    ("3245/5", "649"),
]
MIXED_AND_DECIMALS_EQUAL = [
    ("2\\frac12", "2.5"),
    ("2\\frac{1}{2}", "\\frac{5}{2}"),
    ("-2\\frac{1}{2}", "-2.5"),
    ("1 1/2", "1.5"),
    ("918\\frac{1}{2}", "918.5"),
    ("2\\frac58", "2.625"),
    (".4", "0.4"),
    ("5.0", "5"),
    ("1000.0", "1000"),
    ("0.50", "\\frac12"),
    ("1.5e3", "1500"),
    ("1.5\\times10^{3}", "1500"),
    ("2.5 \\cdot 10^{-3}", "0.0025"),
    ("1e-10", "0.0000000001"),
]


@pytest.mark.parametrize(("pred", "gold"), FRACTIONS_EQUAL + MIXED_AND_DECIMALS_EQUAL)
def test_fractions_decimals_mixed_equal(pred: str, gold: str) -> None:
    _check(pred, gold, True)


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("\\frac{1}{3}", "\\frac{1}{4}"),
        ("2\\frac{1}{2}", "1"),  # a mixed number, not 2 * 1/2
        ("5.001", "5"),
        ("4.99", "5"),
        ("1.000000001", "1"),
        ("1e-10", "1e-11"),
        ("2\\frac{x}{2}", "2.5"),
    ],
)
def test_fractions_decimals_unequal(pred: str, gold: str) -> None:
    _check(pred, gold, False)


# ----------------------------------------------------------- decimal approximation policy
# policy: a decimal stands for an exact value when it equals that value rounded (either tie
# rule) or truncated at the decimal's last digit, and has >= 3 significant figures.
APPROX_ACCEPTED = [
    ("0.333", "\\frac{1}{3}"),
    ("0.3333", "1/3"),
    ("0.667", "2/3"),  # rounded
    ("0.666", "2/3"),  # truncated
    ("1.414", "\\sqrt{2}"),
    ("1.41", "\\sqrt2"),
    ("3.14", "\\pi"),
    ("3.1416", "\\pi"),
    ("125.663", "40\\pi"),  # 125.6637..., truncated
    ("0.577", "\\frac{\\sqrt{3}}{3}"),
    ("0.8660254037844386", "\\frac{\\sqrt{3}}{2}"),
    ("\\sqrt{17}", "4.123105625617661"),  # the gold is the decimal here
    ("\\frac{1}{432}", "2.314814814815 \\times 10^{-3}"),
    ("2.718", "e"),
    ("16386.169", "16386.17"),  # two decimals: the coarser is the finer one rounded
    ("0.333", 0.3333333333333333),  # a float gold's 16 digits are a rendering, not a claim
]
APPROX_REJECTED = [
    ("0.356", ".35625"),  # coarser than a gold written out to its last digit
    ("16386.17", "16386.169"),
    ("0.33", "\\frac{1}{3}"),  # 2 significant figures
    ("0.3", "\\frac{1}{3}"),
    ("0.334", "\\frac{1}{3}"),  # neither rounding nor truncation
    ("0.67", "2/3"),
    ("1.42", "\\sqrt{2}"),
    ("3.15", "\\pi"),
    ("3", "\\pi"),  # an integer is exact, never an approximation
    ("2.54", "2.5"),  # the coarser decimal has 2 figures
    ("0.000", "0.0001"),
]


@pytest.mark.parametrize(("pred", "gold"), APPROX_ACCEPTED)
def test_decimal_approximations_accepted(pred: str, gold: str) -> None:
    v = _check(pred, gold, True)
    assert v.reason == Reason.APPROX_EQUAL


@pytest.mark.parametrize(("pred", "gold"), APPROX_REJECTED)
def test_decimal_approximations_rejected(pred: str, gold: str) -> None:
    _check(pred, gold, False)


# ------------------------------------------------------- percent, currency, units, degrees
@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("28\\%", "28", True),  # policy: the percent sign may be dropped
        ("28 percent", "28\\%", True),
        ("28 pct", "28\\%", True),
        ("50\\%", "0.5", True),  # policy: or the percentage converted
        ("12.5\\%", "\\frac18", True),
        ("50\\%", "5", False),
        ("0.5", "5\\%", False),
        ("\\$5", "5", True),
        ("5 dollars", "5", True),
        ("5", "\\$5.00", True),
        ("1,000.99$", "1000.99", True),
        ("10 \\text{ cm}", "10", True),
        ("10\\text{ cm}^2", "10", True),
        ("64 square feet", "64", True),
        ("10weeks", "10", True),
        ("0.06 \\text{ yuan}", "0.06", True),
        ("10", "10m", False),  # policy: 10m may be 10 * m, so "m" is not stripped
        ("10", "10cm", False),
        ("30^\\circ", "30", True),
        ("30^{\\circ}", "30", True),
        ("30\u00b0", "30", True),
        ("30 degrees", "30", True),
        ("30^\\circ", "\\frac{\\pi}{6}", True),  # degrees may be converted to radians
        ("30^\\circ", "31", False),
        ("\\cos(x)", "\\sin(90^{\\circ}-x)", True),
    ],
)
def test_percent_currency_units_degrees(pred: str, gold: str, equal: bool) -> None:
    _check(pred, gold, equal)


# -------------------------------------------------------------------------- expressions
EXPRESSIONS_EQUAL = [
    ("x^2+2x+1", "(x+1)^2"),
    ("x^2 + 2*x + 1", "x^2+2x+1"),
    ("x**2 - 1", "(x-1)(x+1)"),
    ("\\frac{x^2-1}{x-1}", "x+1"),
    ("3+2x", "2x+3"),
    ("xy", "yx"),
    ("(r+5)^2", "(r+5)(r+5)"),
    ("\\frac{x}{7}+\\frac{2}{7}", "\\frac{x+2}{7}"),
    ("4/3-7x/6", "\\frac{8-7x}{6}"),
    ("\\sqrt{8}", "2\\sqrt{2}"),
    ("\\sqrt3", "\\sqrt{3}"),
    ("\\sqrt[3]{27}", "3"),
    ("\\sqrt[3]{x}", "x^{1/3}"),
    ("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}"),
    ("\\sqrt{2}+\\sqrt{3}", "\\sqrt{5+2\\sqrt{6}}"),
    ("\\frac94\\pi", "\\frac{9}{4}\\pi"),
    ("\\sin^2 x + \\cos^2 x", "1"),
    ("\\sin(2x)", "2\\sin x\\cos x"),
    ("\\sec^2(y)", "\\tan^2(y)+1"),
    ("\\frac1{\\cos x}", "\\sec x"),
    ("\\log_2 8", "3"),
    ("\\ln(e^3)", "3"),
    ("e^2", "\\exp(2)"),
    ("e^{i\\pi}", "-1"),
    ("\\sqrt{x^2}", "x"),  # policy: radicals are compared for positive variables
    ("\\left(x-2\\right)\\left(x+2\\right)", "(x-2)(x+2)"),
    ("11z^7(11z^7+5)", "11z^{7}(5+11z^{7})"),
    ("2^6 3^5 5^4", "2^6 * 3^5 * 5^4"),
]
EXPRESSIONS_UNEQUAL = [
    ("x^3+2x+1", "x^2+2x+1"),
    ("y^2+2y+1", "x^2+2x+1"),  # different variable
    ("x+1", "x+2n+1"),
    ("\\sin(2x)", "2\\sin x"),
    ("|x|", "x"),  # differs for negative x
    ("x + 10^{-30}", "x"),  # relative tolerance must not hide a tiny difference
    ("\\sqrt{2}+\\sqrt{3}", "\\sqrt{5+2\\sqrt{7}}"),
    ("\\frac{1+\\sqrt{5}}{2}", "2"),
    ("f(y)", "f(x)"),
    ("(+5)(b+2)", "(a+5)(b+2)"),
    ("1 + \\frac{1}{e}", "1 - \\frac{1}{e}"),
]


@pytest.mark.parametrize(("pred", "gold"), EXPRESSIONS_EQUAL)
def test_expressions_equal(pred: str, gold: str) -> None:
    _check(pred, gold, True)


@pytest.mark.parametrize(("pred", "gold"), EXPRESSIONS_UNEQUAL)
def test_expressions_unequal(pred: str, gold: str) -> None:
    _check(pred, gold, False)


def test_decimal_literal_inside_an_expression() -> None:
    # policy: decimals with >= 3 significant figures inside an expression stand for the exact
    # constant when only one side has decimals
    _check("x + 1.414i", "x + \\sqrt{2}i", True)
    _check("x + 1.5i", "x + \\sqrt{2}i", False)
    _check("x + 1.414", "x + 1.415", False)  # both approximate: exact comparison


# ----------------------------------------------------------------- equations, relations
@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("y=2x+3", "y=3+2x", True),
        ("y=2x+3", "y=2x+4", False),
        ("x=5", "5", True),
        ("5", "x=5", True),
        ("k = \\frac{1}{3}", "1/3", True),
        ("2y = 4x + 6", "y = 2x + 3", True),  # same line, scaled
        ("x + y = 1", "2x + 2y = 2", True),
        ("-34x-45y+20z-100=0", "34x+45y-20z+100=0", True),
        ("y=-\\frac{1}{2}x+\\frac{3}{4}", "2x+4y-3=0", True),
        ("x + y = 1", "x - y = 1", False),
        ("x + y - z + 2 = 0", "5x - 7y + 11z + 4 = 0", False),
        ("\\cos(x)=\\frac{42}{59}", "\\sin(x)=\\frac{42}{59}", False),
        ("0", "a +3z = 0", False),  # a genuine equation is not its right-hand side
        ("11a+c", "7 = 11a+c", False),
        ("x = 5+5+1 = 11", "x = 11", True),  # a computation chain: the last value counts
        ("\\frac{\\sqrt{3}}{3} \\approx 0.577", "\\frac{\\sqrt{3}}{3}", True),
        ("x \\approx 11", "11", True),
        ("(p,q)=(3,2)", "(3,2)", True),
        ("f(x) = 2x + 3", "2x + 3", True),
    ],
)
def test_equations(pred: str, gold: str, equal: bool) -> None:
    _check(pred, gold, equal)


@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("x > 5", "5 < x", True),
        ("-x > -1", "x < 1", True),
        ("x > -1", "x < 1", False),
        ("x \\geq 5", "x >= 5", True),
        ("x \\neq 3", "x != 3", True),
        ("x < 5", "x > 5", False),
        ("x>2", "(2,\\infty)", True),  # policy: a univariate inequality is its solution set
        ("x \\geq 2", "(2,\\infty)", False),
        ("(-\\infty, 3)", "x < 3", True),
        ("1 < x < 2", "(1,2)", True),
        ("1 < x < 2", "[1,2]", False),
        ("x \\in [1,2]", "1 \\le x \\le 2", True),
        ("x \\neq 3", "(-\\infty,3)\\cup(3,\\infty)", True),
        ("x^2 > 4", "(-\\infty,-2)\\cup(2,\\infty)", True),
        ("1\\leq|z|\\leq \\frac{3}{2}", "[-\\frac{3}{2}, -1] \\cup [1, \\frac{3}{2}]", True),
        ("x < 1", "y < 1", False),
    ],
)
def test_inequalities(pred: str, gold: str, equal: bool) -> None:
    _check(pred, gold, equal)


# ------------------------------------------------------------- sets, tuples, lists
@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("\\{1,2\\}", "\\{2,1\\}", True),
        ("\\{1,2\\}", "\\{1,3\\}", False),
        ("\\{1,1,2\\}", "\\{1,2\\}", True),  # a set has no multiplicity
        ("(1,2)", "(1,2)", True),
        ("(1,2)", "(2,1)", False),  # tuples are ordered
        ("(1, 4.5)", "(1,\\frac{9}{2})", True),
        ("\\{1,2\\}", "(1,2)", False),  # a set is not a tuple
        ("1, 2, 3", "3, 2, 1", False),  # policy: without a question a bare list is in order
        ("1, 2", "1, 2, 3", False),
        ("1,2", "1", False),  # a hedged answer is not the answer
        ("2021", "\\pm 2021", False),
        ("\\{-2021, 2021\\}", "\\pm 2021", True),
        ("1 \\pm \\sqrt{19}", "\\{1+\\sqrt{19}, 1-\\sqrt{19}\\}", True),
        ("6 \\text{ and } 8", "8, 6", False),
        ("8 \\text{ and } 6", "8, 6", True),
        ("[x, 1 + x]", "[x, x + 1]", True),
        ("[x + 1, x]", "[x, x + 1]", False),
        ("(1, 3, 2)", "[1, 2, 3]", False),
        ("(3,2),(5,7)", "(5,7),(3,2)", True),
        ("a_3 = 2, a_{37} = 19", "a_{37} = 19, a_3 = 2", True),
        ("1, 2, 3", "x = 1, y = 2, z = 3", True),
        ("\\emptyset", "\\{\\}", True),
    ],
)
def test_sets_tuples_lists(pred: str, gold: str, equal: bool) -> None:
    _check(pred, gold, equal)


@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("[1,2)", "[1,2)", True),
        ("[1,2)", "[1,2]", False),  # bracket types matter
        ("(0,9)", "[0,9)", False),
        ("(0.6,2.6667]", "(\\frac{3}{5},\\frac{8}{3}]", True),
        ("(1, +\\infty)", "(1,\\infty)", True),
        ("-\\infty", "\\infty", False),
        ("(-\\infty,1)\\cup(2,\\infty)", "(2,\\infty)\\cup(-\\infty,1)", True),
        ("[1,2]\\cup[2,3]", "[1,3]", True),
        ("[1,2]\\cup[3,4]", "[1,4]", False),
        ("\\{-1\\} \\cup [0,7)", "\\{-1\\} \\cup [0,7)", True),
        ("\\mathbb{R}", "(-\\infty,\\infty)", True),
        ("[x, y)", "[1, 2)", False),
    ],
)
def test_intervals(pred: str, gold: str, equal: bool) -> None:
    _check(pred, gold, equal)


# ----------------------------------------------------------------------------- matrices
def _mat(rows: str, env: str = "pmatrix") -> str:
    """``"1 2; 3 4"`` -> ``\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}``."""
    body = "\\\\".join("&".join(r.split()) for r in rows.split(";"))
    return f"\\begin{{{env}}}{body}\\end{{{env}}}"


@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        (_mat("1 2; 3 4"), _mat("1 2; 3 4", "bmatrix"), True),
        (_mat("1 2; 3 4"), _mat("1 2; 4 3"), False),
        (_mat("1 2; 3 4"), _mat("1 2 3; 4 5 6"), False),
        (_mat("1 0.5; 1/3 4"), _mat("1 \\frac12; \\frac13 4"), True),
        (_mat("1; 2"), "(1,2)", True),
        ("[0.5, 1]", _mat("\\frac12; 1", "matrix"), True),
        (_mat("1 2; 3 4") + " + " + _mat("5 6; 7 8"), _mat("6 8; 10 12"), True),
        (_mat("1 1; 0 1") + "^2", _mat("1 2; 0 1"), True),
        (_mat("1 1; 0 1") + "^2", _mat("1 1; 0 1"), False),
        (_mat("1 2; 3 4"), "5", False),
        (_mat("1 1; 0 1") + _mat("1 0; 1 1"), _mat("1 0; 1 1") + _mat("1 1; 0 1"), False),
        (_mat("1 1; 0 1") + _mat("1 0; 1 1"), _mat("2 1; 1 1"), True),  # AB != BA above
    ],
)
def test_matrices(pred: str, gold: str, equal: bool) -> None:
    _check(pred, gold, equal)


# ------------------------------------------------------------------------ complex numbers
@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("3+4i", "4i+3", True),
        ("3+4i", "3-4i", False),
        ("i^2", "-1", True),
        ("\\frac{1}{i}", "-i", True),
        ("i(2-i)", "1+2i", True),
        ("(1+i)^2", "2i", True),
        ("|3+4i|", "5", True),
    ],
)
def test_complex_numbers(pred: str, gold: str, equal: bool) -> None:
    _check(pred, gold, equal)


# --------------------------------------------------------------- choices, text, times
@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("A", "A", True),
        ("(A)", "A", True),
        ("\\text{(B)}", "B", True),
        ("\\textbf{A}", "A", True),
        ("\\mathrm{E}", "E", True),
        ("(b)", "B", True),  # an explicit choice marker makes the letter case-insensitive
        ("B", "A", False),
        ("\\text{E}", "d", False),
        ("\\mathrm{E}*2", "E", False),
        ("\\text{Yes}", "yes", True),
        ("\\text{Evelyn}", "Evelyn", True),
        ("\\text{oddd}", "odd", False),
        ("\\text{no}", "yes", False),
        ("12:00", "12:00", True),
        ("1:00", "12:00", False),
        ("20:34:00", "20:34", True),
        ("08:34 \\text{P.M.}", "20:34", True),
        ("1:2", "2:4", True),  # ratios are compared as ratios
        ("1:2", "0.5", True),
        ("204_5", "204_{5}", True),
        ("1112122_3", "1112112_3", False),
    ],
)
def test_choices_text_time_ratio(pred: str, gold: str, equal: bool) -> None:
    _check(pred, gold, equal)


# ------------------------------------------------------------------- inputs and reasons
def test_gold_as_int_and_float() -> None:
    assert verify("42", 42).correct
    assert not verify("43", 42).correct
    assert verify("123456789012345678901234567890", 123456789012345678901234567890).correct
    assert verify("0.5", 0.5).correct
    assert verify("\\frac{1}{2}", 0.5).correct
    assert verify("1500", 1.5e3).correct
    assert verify("\\frac13", 0.3333333333333333).correct  # a float gold is a 16-digit decimal
    assert not verify("0.1", 0.2).correct


def test_gold_wrappers_and_sentences() -> None:
    assert verify("9", "$9$").correct
    assert verify("\\boxed{\\frac{1}{3}}", "$1/3$").correct
    assert verify("The answer is $\\boxed{7}$.", "7").correct
    assert verify("Final Answer: The final answer is $12$. I hope it is correct.", "12").correct
    assert not verify("The answer is $\\boxed{8}$.", "7").correct


def test_reason_codes() -> None:
    assert verify("  1/2 ", "1/2").reason == Reason.STRING_MATCH
    assert verify("0.5", "\\frac12").reason == Reason.NUMERIC_EQUAL
    assert verify("0.333", "\\frac13").reason == Reason.APPROX_EQUAL
    assert verify("(A)", "A").reason == Reason.CHOICE_MATCH
    assert verify("\\text{Yes}", "yes").reason == Reason.TEXT_MATCH
    assert verify("x+1", "1+x").reason == Reason.SYMBOLIC_EQUAL
    assert verify("2", "3").reason == Reason.NOT_EQUAL
    assert verify("(1,2)", "5").reason == Reason.STRUCTURE_MISMATCH
    assert verify("", "5").reason == Reason.EMPTY
    assert verify("$$", "5").reason == Reason.EMPTY
    v = verify("1" * 30_000, "1")
    assert v.reason == Reason.TOO_LONG and not v.correct
    assert verify("1", "1" * 30_000).reason == Reason.TOO_LONG
    v = verify("(" * 200 + "1" + ")" * 200, "1")
    assert v.reason == Reason.TOO_DEEP and not v.correct
    assert not verify("2", "3").timed_out


def test_bad_argument_types_do_not_raise() -> None:
    assert verify(None, "1").reason == Reason.EMPTY  # type: ignore[arg-type]
    assert not verify("1", None).correct  # type: ignore[arg-type]
    assert not verify("1", [1]).correct  # type: ignore[arg-type]
