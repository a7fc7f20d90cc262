"""Unit tests of the building blocks: final-answer extraction, the named normalization steps,
the parser, exact arithmetic and the decimal policy, and the worker pool's fallback path."""

from __future__ import annotations

import os
import signal
import time
from fractions import Fraction
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorer import normalize as N
from scorer.equivalence import verify, warm_up
from scorer.exact import TooBig, exact_value, log2_range, rounds_to
from scorer.nodes import Add, Ast, Coll, Dec, Div, Expr, In, Int, Interval, Letter, Text, Time
from scorer.parse import TooDeep, is_label, parse_answer
from scorer.sympy_pool import DeadlineExceeded, WorkerPool, get_pool


# ------------------------------------------------------------------------- extraction
@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("so $x = \\boxed{\\tfrac{1}{3}}$.", "\\tfrac{1}{3}"),  # nested braces
        ("\\boxed{1} and \\boxed{2}", "1, 2"),
        ("\\boxed{(3, 3)} \\text{ for part (a) and } \\boxed{(1, 1)}", "(3, 3), (1, 1)"),
        ("\\boxed{1} no no no no no \\boxed{2}", "2"),  # prose between: not one answer
        ("$\\boxed{1}\\boxed{2}$", ""),  # glued boxes: a hedge, no answer
        ("\\boxed{W(n) = 1", ""),  # an unclosed box is no answer (precision first)
        ("answer \\\\boxed{004}.", "004"),  # escaped twice
        # a box comes first; a later phrase is no second answer (verify calls it a hedge)
        ("\\boxed{255} ... Final Answer: The final answer is $10,455$. I hope", "255"),
        ("Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is correct.", "120"),
        ("Answer \\[ 9 \\]", " 9 "),
        ("Therefore $x \\geq 5$ is the solution.", "x \\geq 5"),
        ("$21,16$ or $11$", "21,16, 11"),
        ("$28$ percent", "28\\%"),
        ("the number is not 10 which is 1,000.99\u20ac", "1,000.99"),
        ("so the probability is 2/3. <|im_start|>user", "2/3"),
        ("AZYUK2A", "AZYUK2A"),  # a digit inside a word is not a number
        ("x^2 + 2*x + 1", "x^2 + 2*x + 1"),  # a bare answer is left alone
    ],
)
def test_extract_final_answer(text: str, answer: str) -> None:
    assert N.extract_final_answer(text) == answer


# ------------------------------------------------------------------ normalization steps
@pytest.mark.parametrize(
    ("step", "before", "after"),
    [
        (N.fix_double_escapes, "\\\\frac{1}{2}", "\\frac{1}{2}"),
        (N.fix_double_escapes, "a \\\\ b", "a \\\\ b"),  # a real row break stays
        (N.strip_outer_delimiters, "$$ x $$", "x"),
        (N.strip_outer_delimiters, "\\(x\\)", "x"),
        (N.unwrap_boxed, "\\boxed{\\boxed{7}}", "7"),
        (N.replace_unicode, "3\u00d74 \u2264 \u03c0", "3\\times 4 \\leq  \\pi "),
        (N.drop_display_commands, "\\left( x \\right.", "( x "),
        (N.canonical_commands, "\\dfrac12 \\le x \\ne 3", "\\frac12 \\leq x \\neq 3"),
        (N.canonical_commands, "x >= 1", "x \\geq  1"),
        (N.unwrap_text_commands, "10\\text{ cm}", "10  cm "),
        (N.unwrap_text_commands, "\\mathrm{E}", "E"),
        (N.join_thousands, "1{,}000", "1000"),
        (N.join_thousands, "12,\\!000", "12000"),
        (N.join_thousands, "7,425,000", "7425000"),
        (N.join_thousands, "32, 349", "32, 349"),
        (N.join_thousands, "(12,102)", "(12,102)"),  # an interval, not 12102
        (N.join_thousands, "1 000", "1000"),
        (N.drop_spacing_commands, "a\\quad b\\,c", "a  b c"),
        (N.drop_currency, "\\$5", " 5"),
        (N.mark_percent, "28 percent", "28\\%"),
        (N.mark_degrees, "30^{\\circ}", "30^\\circ "),
        # comma + space: the items are never re-read as 6.8 or as one thousands-grouped number
        (N.split_connectors, "6 and 8", "6, 8"),
        (N.split_connectors, "(11,7)or(7,11)", "(11,7), (7,11)"),
        (N.split_connectors, "x < -1 or x > 1", "x < -1 \\lor x > 1"),
        (N.strip_trailing_units, "64 square feet", "64"),
        (N.strip_trailing_units, "10m", "10m"),
        (N.strip_trailing_units, "2 x", "2 x"),
        (N.strip_trailing_punct, "185\\", "185"),
        (N.strip_trailing_punct, "5!", "5!"),
        (N.mixed_fraction_plain, "1 1/2", "1\\frac{1}{2}"),
    ],
)
def test_normalization_step(step, before: str, after: str) -> None:
    assert step(before) == after


def test_normalization_steps_are_listed_in_order() -> None:
    names = [f.__name__ for f in N.STEPS]
    assert names.index("unwrap_text_commands") < names.index("strip_trailing_units")
    assert names.index("mark_percent") < names.index("strip_trailing_units")
    assert N.normalize_answer("$\\boxed{28 pct}$") == "28\\%"


# ------------------------------------------------------------------------------ parser
def test_parse_shapes() -> None:
    assert parse_answer("\\frac{1}{2}") == Expr(Div(Int(1), Int(2)))
    assert isinstance(cast(Expr, parse_answer("2\\frac12")).node, Add)  # mixed number
    assert isinstance(parse_answer("(1,2]"), Interval)
    assert parse_answer("(1,2)") == Coll("tuple", (Expr(Int(1)), Expr(Int(2))))
    assert cast(Coll, parse_answer("\\{1,2\\}")).kind == "set"
    assert cast(Coll, parse_answer("1, 2")).kind == "list"
    assert isinstance(parse_answer("x \\in [0,1]"), In)
    assert cast(Coll, parse_answer("1 \\pm 2")).kind == "list"  # ± expands into two answers
    assert parse_answer("(C)") == Letter("C", True)
    assert isinstance(parse_answer("Evelyn"), Text)
    assert isinstance(parse_answer("12:30"), Time)
    assert parse_answer("1.50") == Expr(Dec(150, -2, 3))  # keeps 3 significant figures
    assert parse_answer("2.5\\times 10^{-3}") == Expr(Dec(25, -4, 2))


def test_parse_failure_becomes_text_and_depth_is_capped() -> None:
    assert isinstance(parse_answer("\\int_0^1 x dx"), Text)
    with pytest.raises(TooDeep):
        parse_answer("(" * 100 + "1" + ")" * 100)


@pytest.mark.parametrize(
    ("text", "label"),
    [("x", True), ("a_{37}", True), ("f(x)", True), ("AB", True), ("|AB|", True),
     ("(p,q)", True), ("2x", False), ("x+1", False), ("7", False)],
)  # fmt: skip
def test_labels(text: str, label: bool) -> None:
    assert is_label(parse_answer(text)) is label


# ------------------------------------------------------------------- exact arithmetic
def _ast(text: str) -> Ast:
    return cast(Expr, parse_answer(text)).node


def test_exact_values() -> None:
    assert exact_value(_ast("\\frac{1}{2004!}")) == Fraction(1, _fact(2004))
    assert exact_value(_ast("\\sqrt{\\frac{9}{4}}")) == Fraction(3, 2)
    assert exact_value(_ast("8^{2/3}")) == 4
    with pytest.raises(TooBig):
        exact_value(_ast("2^{2^{2^{2^{2^{2}}}}}"))
    with pytest.raises(TooBig):
        exact_value(_ast("2^{\\frac{1}{2^{1000}}}") and _ast("10^{10^{10}}"))


def _fact(n: int) -> int:
    out = 1
    for k in range(2, n + 1):
        out *= k
    return out


def test_log_magnitudes_prove_towers_differ() -> None:
    lo, hi = log2_range(_ast("3^{3^{3^3}}"))  # type: ignore[misc]
    assert 1.2e13 < lo <= hi < 1.21e13  # 3^27 * log2(3)
    assert log2_range(_ast("x^{2}")) is None


@pytest.mark.parametrize(
    ("dec", "value", "ok"),
    [
        ((333, -3, 3), Fraction(1, 3), True),
        ((334, -3, 3), Fraction(1, 3), False),
        ((667, -3, 3), Fraction(2, 3), True),
        ((666, -3, 3), Fraction(2, 3), True),  # truncation
        ((33, -2, 2), Fraction(1, 3), False),  # too few figures
        ((125, -3, 3), Fraction(1, 8), True),  # 0.125 exactly
        ((5001, -3, 4), Fraction(5), False),
        ((25, -1, 2), Fraction(5, 2), False),  # 2 figures: only exact equality counts
    ],
)
def test_rounds_to(dec: tuple[int, int, int], value: Fraction, ok: bool) -> None:
    assert rounds_to(dec, value) is ok


# ------------------------------------------------------------- properties (fast path)
@settings(max_examples=200, deadline=None)
@given(st.integers(-(10**40), 10**40), st.integers(-(10**40), 10**40))
def test_integers_compare_exactly(a: int, b: int) -> None:
    assert verify(str(a), str(b)).correct is (a == b)
    assert verify(f"{a:,}", b).correct is (a == b)


@settings(max_examples=200, deadline=None)
@given(st.integers(-999, 999), st.integers(1, 999), st.integers(-999, 999), st.integers(1, 999))
def test_fractions_compare_exactly(p: int, q: int, r: int, s: int) -> None:
    equal = Fraction(p, q) == Fraction(r, s)
    assert verify(f"\\frac{{{p}}}{{{q}}}", f"{r}/{s}").correct is equal
    assert verify(f"{r}/{s}", f"\\frac{{{p}}}{{{q}}}").correct is equal


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=1, max_size=6), st.randoms())
def test_sets_are_order_free_and_tuples_are_not(items: list[int], rnd) -> None:
    shuffled = items[:]
    rnd.shuffle(shuffled)
    s1 = "\\{" + ", ".join(map(str, items)) + "\\}"
    s2 = "\\{" + ", ".join(map(str, shuffled)) + "\\}"
    assert verify(s1, s2).correct
    if len(items) >= 2:
        t1, t2 = f"({', '.join(map(str, items))})", f"({', '.join(map(str, shuffled))})"
        assert verify(t1, t2).correct is (items == shuffled)


# ------------------------------------------------------------------------ worker pool
def test_direct_spawn_fallback_kills_on_deadline() -> None:
    pool = WorkerPool(size=1)
    pool._zygote_failed = True  # force the stand-alone worker path
    try:
        reply = pool.call({"pred": "x^2-1", "gold": "(x-1)(x+1)"}, timeout=60)
        assert reply["correct"] is True
        first = pool.pids()
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            pool.call({"pred": "2^{2^{2^{2^{2^{2}}}}}", "gold": "2^{2^{2^{2^{2^{2}}}}}+1"}, 0.5)
        assert time.monotonic() - t0 < 1.5
        assert pool.pids() != first
        assert pool.call({"pred": "1/2", "gold": "0.5"}, timeout=60)["correct"] is True
    finally:
        pool.close()


def test_a_worker_killed_from_outside_is_replaced_transparently() -> None:
    warm_up()
    for pid in get_pool().pids():
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    v = verify("\\sin^2 y + \\cos^2 y", "1", timeout=30)
    assert v.correct, v
