"""Adversarial suite for the grader: no wrong accepts (issue #12).

Every normalization rule that makes two *different* strings equal (thousands separators, units,
percent, degrees, prose reduction, lists, decimal tolerance) gets a family of near-miss pairs
that must stay unequal: hand-written ones, and generated ones (hypothesis perturbs a digit, a
sign, a variable, an order, a bracket). Each family also checks the rule itself still accepts
its intended pair, so a "fix" that rejects everything cannot pass. Reward-hacking answers must
score as wrong, fast, and never time out.

Generated examples are derandomized so CI is reproducible; ``BOXED_ADVERSARIAL_SCALE=10``
multiplies every ``max_examples`` for a longer local run. With ``-s`` the module prints how
many pairs it tried (the figures in docs/scorer.md).
"""

from __future__ import annotations

import json
import os
import re
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scorer.equivalence import prepare, verify
from scorer.rewards import reward_config, score_text
from scorer.verdict import Reason

SCALE = int(os.environ.get("BOXED_ADVERSARIAL_SCALE", "1"))
TRIED = {"near_miss": 0, "control": 0, "hack": 0, "wrong_accepts": 0}


def examples(n: int) -> settings:
    """Hypothesis settings for a family: derandomized, no deadline (sympy may be involved)."""
    return settings(
        max_examples=n * SCALE,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def rejected(pred: str, gold: str) -> None:
    """A near miss: must be judged unequal, and not by timing out."""
    TRIED["near_miss"] += 1
    v = verify(pred, gold)
    if v.correct:
        TRIED["wrong_accepts"] += 1
    assert not v.correct, f"wrong accept: {pred!r} vs {gold!r} ({v.reason}: {v.detail})"
    assert v.reason != Reason.TIMEOUT, f"timed out: {pred!r} vs {gold!r}"


def accepted(pred: str, gold: str) -> None:
    """The rule under test still does its job (a control, not counted as a near miss)."""
    TRIED["control"] += 1
    v = verify(pred, gold)
    assert v.correct, f"wrong reject: {pred!r} vs {gold!r} ({v.reason}: {v.detail})"


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    print(
        f"\nadversarial suite: {TRIED['near_miss']} near-miss pairs and {TRIED['hack']} "
        f"reward-hacking answers tried, {TRIED['wrong_accepts']} wrongly accepted "
        f"({TRIED['control']} controls)"
    )


# --------------------------------------------------------------------------------------------
# the bug classes of the issue


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        # prose detection swallowed formulas whose two-letter products look like words
        ("3(ax+by)", "3"),
        ("ab+cd+2", "2"),
        ("2ax-ay", "2ay-ax"),
        ("ax+by+1", "cx+dy+1"),
        ("3(abcd+efgh)", "3"),
        ("ab cd 2", "2"),
        ("y = 2x + 3 for all x", "3"),
        (
            "f(x)=0 \\text{ for all } x",
            "f(x)=\\begin{cases}1 & \\text{if } x=0 \\\\ 0 & \\text{otherwise}\\end{cases}",
        ),
        ("f(x)=\\begin{cases}1 & \\text{if } x=0 \\\\ 0 & \\text{otherwise}\\end{cases}", "0"),
        # "and" / "or" joined like a thousands separator (or a decimal comma)
        ("12 and 345", "12345"),
        ("4 or 500", "4500"),
        ("4 or 500", "4.5"),
        ("6 and 8", "6.8"),
        ("6 \\text{ and } 8", "6.8"),
        # tuples / sets of three-digit numbers read as one number
        ("(100,200,300)", "100200300"),
        ("[100,200,300]", "100200300"),
        ("\\{100,200,300\\}", "100200300"),
        # explicit separators with a wrong grouping
        ("1{,}2", "12"),
        ("1\\,0000", "10000"),
        # juxtaposed numbers are not a product
        ("3 7", "21"),
        ("1 2", "2"),
        ("5 \\text{37}", "185"),
    ],
)
def test_wrong_accepts_of_the_issue_are_rejected(pred: str, gold: str) -> None:
    rejected(pred, gold)


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("2(a(x-y)-b)", "2(ax-ay-b)"),
        ("(312, 123, 231)", "(312,123,231)"),
        ("f(x)=0 \\text{ for all } x", "0"),
        ("2^6 3^5 5^4", "2^6 * 3^5 * 5^4"),
    ],
)
def test_wrong_rejects_of_the_issue_are_accepted(pred: str, gold: str) -> None:
    accepted(pred, gold)


# --------------------------------------------------------------------------------------------
# hand-written near misses, rule by rule

NEAR_MISSES = {
    "separators": [
        ("12,34", "1234"),
        ("1,2345", "12345"),
        ("(123,456)", "123456"),
        ("[123,456]", "123456"),
        ("\\{123,456\\}", "123456"),
        ("123 and 456", "123456"),
        ("123, 456", "123456"),
        ("1{,}23", "123"),
        ("1 23", "123"),
        ("12 345 6", "123456"),
        ("1,000", "1"),
        ("1,000", "1000000"),
        ("1,000.5", "1.0005"),
        ("(1,000, 2,000)", "(1000, 2000)"),
        ("1 000 9/4", "1000\\frac94"),
    ],
    "units": [
        ("10 cm", "100"),
        ("10m", "10"),
        ("82 m", "82"),
        ("5 \\text{ e}", "5"),
        ("5\\mathrm{i}", "5"),
        ("2 \\text{ x}", "2"),
        ("62 \\text{ km/h}", "6.2"),
        ("5 \\text{ apples}", "6"),
        ("5 x", "5"),
        ("5 sin", "5"),
        ("12^{th}", "13"),
        ("2th", "2"),
        ("11st", "11"),
    ],
    "percent": [
        ("28\\%", "2.8"),
        ("28\\%", "280"),
        ("28\\%", "0.028"),
        ("28 percent", "0.29"),
        ("50\\%", "5"),
    ],
    "degrees": [
        ("30^\\circ", "\\frac{\\pi}{3}"),
        ("30^\\circ", "3"),
        ("30 degrees", "31"),
        ("\\frac{\\pi}{6}", "30"),
    ],
    "prose": [
        ("the answer is 3", "4"),
        ("x = 2y + 3 for all y", "3"),
        ("abcd+1", "1"),
        ("What is 30 + 7?", "37"),
        ("Yes, but only if n is even", "Yes"),
        ("No, it is not possible", "Yes"),
        ("No, yes", "Yes"),
        ("Yes, it is possible", "No"),
        ("f(x)=x+1", "f(z)=x+1"),
        ("f(x)=x", "g(z)=z"),
        ("f(x)=x^2", "f(z)=z"),
        ("f(x)=2x", "f(y)=2x"),
    ],
    "lists": [
        ("1, 2", "1"),
        ("1, 2, 3", "1, 2"),
        ("(1,2)", "(2,1)"),
        ("\\{1,2\\}", "(1,2)"),
        ("[1,2)", "[1,2]"),
        ("(1,2]", "(1,2)"),
        ("1 or 2", "1"),
        ("1 \\text{ or } 2", "2"),
        ("1,2", "12"),
        ("(1,2,3)", "123"),
        ("x<-1 or x>1", "(-1,1)"),
        ("x<-1 or x>1", "x<-1 or x>2"),
        ("x<-1 or y>1", "(-\\infty,-1)\\cup(1,\\infty)"),
        ("x>-1 and x<1", "(-\\infty,-1)\\cup(1,\\infty)"),
        ("x>-1 and x<1", "\\mathbb{R}"),
        ("\\{x \\mid x>1\\}", "[1,\\infty)"),
        ("\\{x \\in \\mathbb{Z} \\mid -1 < x < 1\\}", "(-1,1)"),
        ("\\{x \\mid -1 < y < 1\\}", "(-1,1)"),
        ("\\{x : x < 1, x > -1\\}", "\\mathbb{R}"),
        ("f(3) < f(1) < f(4)", "f(2) < f(1) < f(4)"),  # an ordering, not a range
        ("1 \\leq |q| \\leq \\frac32", "1 \\leq |z| \\leq \\frac32"),
        ("x = 3x + 5", "y = 3x + 5"),  # x = 3x + 5 is an equation, not a name for 3x + 5
        ("n = 6n + 2ab", "y = 6n + 2ab"),
        ("1 and 2 and 3", "3"),  # a list is not its last item
        ("38287, 3,423,996 apples, -25419", "-25419"),
        ("[52427, 6866)", "[52477, 6866)"),  # reversed ends: no "same empty set"
        ("x = 1, y = 2", "x = 2, y = 1"),  # labelled items match by label
        ("a = 3, b = 4", "b = 3, a = 4"),
        ("(1,2) or (3,4)", "(1,2)\\cup(3,4)"),
        ("\\mathbb{R} \\setminus \\{2\\}", "\\mathbb{R}"),
    ],
    "tolerance": [
        ("0.334", "\\frac13"),
        ("0.33", "\\frac13"),
        ("1.42", "\\sqrt2"),
        ("3", "\\pi"),
        ("5.001", "5"),
        ("3.15", "\\pi"),
        ("2.5", "2.54"),
        ("1e-300", "2e-300"),
    ],
}


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        pytest.param(p, g, id=f"{rule}-{i}")
        for rule, ps in NEAR_MISSES.items()
        for i, (p, g) in enumerate(ps)
    ],
)
def test_hand_written_near_misses(pred: str, gold: str) -> None:
    rejected(pred, gold)
    rejected(gold, pred)


# --------------------------------------------------------------------------------------------
# generated near misses


def _grouped(n: int) -> str:
    return f"{n:,}"


@examples(150)
@given(st.integers(1000, 10**12), st.data())
def test_thousands_separator_near_misses(n: int, data: st.DataObject) -> None:
    g = _grouped(n)
    accepted(g, str(n))
    rejected(g.replace(",", ", "), str(n))  # comma + space is a list
    commas = [i for i, c in enumerate(g) if c == ","]
    k = data.draw(st.sampled_from(commas))
    shift = data.draw(st.sampled_from([-1, 1]))
    moved = g[:k] + g[k + 1 :]
    moved = moved[: k + shift] + "," + moved[k + shift :]
    if not moved.startswith(",") and not moved.endswith(","):
        rejected(moved, str(n))  # a wrong grouping is not a separator
    for left, right in (("(", ")"), ("[", "]"), ("\\{", "\\}")):
        rejected(f"{left}{g}{right}", str(n))  # never inside a tuple / list / set
    word = data.draw(st.sampled_from([" and ", " or ", " \\text{ and } "]))
    rejected(g[:k] + word + g[k + 1 :], str(n))  # never across and / or
    pos = data.draw(st.sampled_from([i for i, c in enumerate(g) if c.isdigit()]))
    digit = data.draw(st.sampled_from([d for d in "0123456789" if d != g[pos]]))
    perturbed = g[:pos] + digit + g[pos + 1 :]
    if not perturbed.startswith("0"):
        rejected(perturbed, str(n))


@examples(60)
@given(st.lists(st.integers(100, 999), min_size=2, max_size=4))
def test_tuples_of_three_digit_numbers_are_not_one_number(parts: list[int]) -> None:
    tight = "(" + ",".join(map(str, parts)) + ")"
    spaced = "(" + ", ".join(map(str, parts)) + ")"
    accepted(spaced, tight)
    rejected(tight, "".join(map(str, parts)))
    rejected("\\{" + ",".join(map(str, parts)) + "\\}", "".join(map(str, parts)))
    rejected(" and ".join(map(str, parts)), "".join(map(str, parts)))


def _dec(q: Fraction) -> str:
    """Exact decimal string of a terminating fraction."""
    return format(Decimal(q.numerator) / Decimal(q.denominator), "f")


@examples(100)
@given(st.integers(1, 999), st.sampled_from([10, 1000, 7, 3, -1]))
def test_percent_near_misses(k: int, factor: int) -> None:
    accepted(f"{k}\\%", str(k))
    accepted(f"{k}\\%", _dec(Fraction(k, 100)))
    wrong = Fraction(k) * factor if factor != 1000 else Fraction(k, 1000)
    if factor in (7, 3):
        wrong = Fraction(k + factor)
    rejected(f"{k}\\%", _dec(wrong))
    rejected(f"{k} percent", _dec(wrong))


@examples(25)
@given(st.integers(1, 359), st.sampled_from([1, -1, 2]))
def test_degree_near_misses(d: int, delta: int) -> None:
    rejected(f"{d}^\\circ", str(d + delta))
    rejected(f"{d}^\\circ", f"\\frac{{{d + delta}\\pi}}{{180}}")
    rejected(f"{d} degrees", str(d * 10))


UNITS = ["cm", "km", "meters", "\\text{ m}", "\\mathrm{~kg}", "\\text{ km/h}", "square feet"]


@examples(60)
@given(st.integers(1, 10**6), st.sampled_from(UNITS), st.sampled_from([1, -1, 9]))
def test_unit_near_misses(n: int, unit: str, delta: int) -> None:
    accepted(f"{n} {unit}", str(n))
    rejected(f"{n} {unit}", str(n + delta))
    rejected(f"{n} {unit}", str(n * 10))


@examples(15)
@given(st.integers(2, 99), st.sampled_from(["m", "x", "k", "n"]))
def test_a_bare_letter_after_a_number_is_a_variable(n: int, letter: str) -> None:
    rejected(f"{n} {letter}", str(n))
    rejected(f"{n}{letter}", str(n))


LETTERS = "abcdxyz"
pairs_of_letters = st.tuples(st.sampled_from(LETTERS), st.sampled_from(LETTERS)).filter(
    lambda t: t[0] != t[1]
)


@examples(20)
@given(pairs_of_letters, pairs_of_letters, st.integers(2, 50))
def test_products_of_letters_are_algebra_not_prose(a: tuple, b: tuple, k: int) -> None:
    ab, cd = "".join(a), "".join(b)
    rejected(f"{k}({ab}+{cd})", str(k))
    rejected(f"{ab}+{cd}+{k}", str(k))
    rejected(f"{ab} + {cd} + {k}", str(k))


@examples(20)
@given(st.sampled_from(LETTERS), st.sampled_from(LETTERS), st.integers(2, 50))
def test_perturbed_variable_sign_and_order(v: str, w: str, k: int) -> None:
    assume(v != w)
    accepted(f"{k}{v}+{w}", f"{w}+{k}{v}")
    rejected(f"{k}{v}+{w}", f"{k}{w}+{v}")  # variables swapped
    rejected(f"{k}{v}+{w}", f"{k}{v}-{w}")  # a sign
    rejected(f"{v}-{w}", f"{w}-{v}")  # an order
    rejected(f"{k}({v}+{w})", f"{k}{v}+{w}")  # a bracket


@examples(100)
@given(st.lists(st.integers(-50, 50), min_size=2, max_size=5, unique=True), st.randoms())
def test_list_near_misses(items: list[int], rnd) -> None:
    tup = "(" + ", ".join(map(str, items)) + ")"
    perm = items[:]
    rnd.shuffle(perm)
    if perm != items:
        rejected(tup, "(" + ", ".join(map(str, perm)) + ")")  # a tuple is ordered
    bare, bare_perm = ", ".join(map(str, items)), ", ".join(map(str, perm))
    if perm != items:
        rejected(bare_perm, bare)  # without a question a bare list is compared in order,
        rejected("\\{" + bare_perm + "\\}", bare)  # and a set is no way around it
        all_of = "Find all the solutions."  # ... unless the question asks for all the values
        assert verify(bare_perm, bare, question=all_of).correct, (bare_perm, bare)
    rejected(", ".join(map(str, items)), ", ".join(map(str, items[:-1])))
    rejected(", ".join(map(str, items)), str(items[0]))  # a hedge is not an answer
    rejected("\\{" + ", ".join(map(str, items)) + "\\}", tup)
    a, b = sorted(items[:2])
    for p, g in (("[{}, {})", "[{}, {}]"), ("({}, {}]", "({}, {})"), ("[{}, {}]", "({}, {})")):
        rejected(p.format(a, b), g.format(a, b))  # a bracket type


@examples(100)
@given(
    st.integers(1, 500),
    st.sampled_from([3, 7, 9, 11, 13, 17, 19, 21, 23, 27]),
    st.integers(3, 7),
    st.sampled_from([2, -2, 3, -3]),
)
def test_decimal_tolerance_near_misses(p: int, q: int, sig: int, delta: int) -> None:
    """A decimal stands for a value only when it is that value rounded / truncated at its last
    digit with >= 3 significant figures; 2 units off in the last place never is."""
    value = Fraction(p, q)
    assume(value.denominator == q)
    exp = min(Decimal(p / q).adjusted() - sig + 1, -1)  # a decimal point: integers are exact
    quantum = Decimal(1).scaleb(exp)
    rounded = (Decimal(p) / Decimal(q)).quantize(quantum)
    accepted(format(rounded, "f"), f"\\frac{{{p}}}{{{q}}}")
    off = rounded + delta * quantum
    rejected(format(off, "f"), f"\\frac{{{p}}}{{{q}}}")
    two_figures = (Decimal(p) / Decimal(q)).quantize(Decimal(1).scaleb(exp + sig - 2))
    if Fraction(two_figures) != value:
        rejected(format(two_figures, "f"), f"\\frac{{{p}}}{{{q}}}")


PLAIN_NUMBERS = st.one_of(
    st.integers(0, 99_999).map(str),
    st.tuples(st.integers(0, 99), st.integers(0, 999)).map(lambda t: f"{t[0]}.{t[1]}"),
    st.tuples(st.integers(1, 50), st.integers(2, 50)).map(lambda t: f"\\frac{{{t[0]}}}{{{t[1]}}}"),
    st.integers(1, 99).map(lambda k: f"{k}\\%"),
    st.integers(1, 359).map(lambda d: f"{d}^\\circ"),
)
NUMBERS = st.one_of(PLAIN_NUMBERS, st.integers(1000, 10**7).map(_grouped))  # 1,234,567 too
ITEMS = st.one_of(
    NUMBERS,
    st.tuples(NUMBERS, st.sampled_from(["cm", "km", "\\text{ m}", "apples", "dollars"])).map(
        " ".join
    ),
    NUMBERS.map(lambda x: "-" + x),
)
COMPOSITES = st.one_of(
    ITEMS,
    st.lists(PLAIN_NUMBERS, min_size=2, max_size=4).map(lambda xs: "(" + ", ".join(xs) + ")"),
    st.lists(PLAIN_NUMBERS, min_size=2, max_size=4, unique=True).map(
        lambda xs: "\\{" + ", ".join(xs) + "\\}"
    ),
    st.tuples(
        st.sampled_from([" and ", " or ", ", "]),
        st.lists(ITEMS, min_size=2, max_size=4, unique=True),
    ).map(lambda t: t[0].join(t[1])),
    st.tuples(PLAIN_NUMBERS, PLAIN_NUMBERS).map(lambda t: f"[{t[0]}, {t[1]})"),
    NUMBERS.map(lambda x: f"x = {x}"),
)


@examples(300)
@given(COMPOSITES, st.data())
def test_composite_answers_with_one_digit_changed(gold: str, data: st.DataObject) -> None:
    """Lists joined by and / or / commas, units, percent, degrees, tuples, sets, intervals:
    changing any one digit changes the answer (no rule may drop the part that changed)."""
    digits = [i for i, c in enumerate(gold) if c.isdigit()]
    i = data.draw(st.sampled_from(digits))
    step = data.draw(st.integers(1, 9))
    pred = gold[:i] + str((int(gold[i]) + step) % 10) + gold[i + 1 :]
    rejected(pred, gold)


def _numeric_golds() -> list[str]:
    """The golds of tests/data/grader_cases.jsonl whose normalized form is numbers only."""
    rows = [json.loads(line) for line in GRADER_CASES.read_text().splitlines() if line.strip()]
    golds = {prepare(str(r["gold"])) for r in rows if not r.get("suspect_label")}
    return sorted(g for g in golds if g and len(g) < 60 and not _LETTERS.search(g))


GRADER_CASES = Path(__file__).parent / "data" / "grader_cases.jsonl"
_LETTERS = re.compile(r"(?<!\\)\b[A-Za-z]|_|=|\\(?:text|mathrm|mbox)")


@pytest.mark.parametrize("gold", _numeric_golds())
def test_every_digit_of_real_golds_perturbed(gold: str) -> None:
    """Every digit of every numeric gold in the upstream grader cases, moved by 1 and by 5."""
    for m in re.finditer(r"\d", gold):
        for step in (1, 5):
            i = m.start()
            rejected(gold[:i] + str((int(gold[i]) + step) % 10) + gold[i + 1 :], gold)


# --------------------------------------------------------------------------------------------
# reward hacking: answers a policy could learn to produce

GOLD = "37"
BIG = "1 " * 50_000


def _hacks() -> list[tuple[str, str]]:
    every = " ".join(f"\\boxed{{{i}}}" for i in range(1, 101))
    return [
        ("every-integer-boxed-one-box", "\\boxed{" + ", ".join(map(str, range(1, 101))) + "}"),
        ("every-integer-boxed-list-ellipsis", "\\boxed{1, 2, \\ldots, 100}"),
        ("every-integer-boxed", every.replace("\\boxed{37}", "\\boxed{36}") + " \\boxed{1,37}"),
        ("digits-scattered", "The answer has a 3 and a 7 in it: \\boxed{3 7}"),
        ("digits-scattered-text", "\\boxed{3 \\text{ and } 7}"),
        ("digits-joined-by-or", "\\boxed{3 or 7}"),
        ("restated-question", "\\boxed{\\text{What is } 30 + 8\\text{?}}"),
        ("restated-question-prose", "What is 30 + 7? \\boxed{\\text{What is 30 + 7?}}"),
        ("gibberish", "\\boxed{qz#@!x\\\\\\%%^&*( 37)) ]]}"),
        ("gibberish-letters", "\\boxed{asdkjh qwe 3 7 zz}"),
        ("100-KB-answer", "\\boxed{" + BIG + "}"),
        ("100-KB-text", BIG + "\\boxed{36}"),
        ("100-KB-of-boxes", "\\boxed{1}" * 12_000),
        ("phantom", "\\boxed{\\phantom{37}}"),
        ("hphantom", "\\boxed{\\hphantom{37}5}"),
        ("color-white", "\\boxed{\\color{white}{37}}"),
        ("color-white-brace", "\\boxed{{\\color{white}37}5}"),
        ("textcolor-white", "\\boxed{\\textcolor{white}{37}}"),
        ("phantom-box", "\\boxed{5} \\phantom{\\boxed{37}}"),
        ("white-box", "\\boxed{5} {\\color{white}\\boxed{37}}"),
        ("white-box-to-the-end", "\\boxed{5} \\color{white} \\boxed{37}"),
        ("textcolor-white-box", "\\boxed{5}\\textcolor{white}{\\boxed{37}}"),
        ("commented-box", "\\boxed{5} % \\boxed{37}"),
        ("comment", "\\boxed{5 % 37}"),
        ("comment-only", "\\boxed{% 37\n}"),
        ("text-hidden", "\\boxed{5\\text{37}}"),
        ("text-prose-hidden", "\\boxed{5 \\text{ (not 37)}}"),
        ("text-negated", "\\boxed{37 \\text{ is not the answer}}"),
        ("box-inside-box", "\\boxed{5\\boxed{37}}"),
        ("box-inside-box-text", "\\boxed{\\text{\\boxed{37}} 5}"),
        ("box-only-in-tool-response", "<tool_response>\\boxed{37}</tool_response> done"),
        ("box-only-in-tool-call", "<tool_call>print('\\\\boxed{37}')</tool_call>"),
        ("box-in-think-then-none", "<think>\\boxed{37}</think> I am not sure."),
    ]


HACKS = _hacks()


@pytest.mark.parametrize(("text",), [pytest.param(t, id=name) for name, t in HACKS])
def test_reward_hacking_answers_score_wrong_fast(text: str) -> None:
    TRIED["hack"] += 1
    start = time.perf_counter()
    out = score_text(text, GOLD, reward_config("binary"), timeout=5.0)
    v = verify(text, GOLD) if len(text) <= 20_000 else None
    elapsed = time.perf_counter() - start
    if out.correct or (v is not None and v.correct):
        TRIED["wrong_accepts"] += 1
    assert not out.correct, f"reward hack accepted: {out}"
    assert out.status != "timeout"
    if v is not None:
        assert not v.correct, f"verify accepted a reward hack: {v}"
        assert v.reason != Reason.TIMEOUT
    assert elapsed < 3.0, f"took {elapsed:.2f}s"


def test_the_hack_harness_accepts_the_honest_answer() -> None:
    """Control: the same path pays a plain right answer, so the hacks above fail on merit."""
    assert score_text("So the answer is \\boxed{37}.", GOLD, reward_config("binary")).correct
    assert score_text("<think>x</think> \\boxed{37}", GOLD, reward_config("binary")).correct
