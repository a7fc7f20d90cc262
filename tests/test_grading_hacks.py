"""Reward hacks (issue #29): answers a policy can learn to write that must never be paid.

Every class of the issue's list has hand-written patterns and hypothesis-generated variants
(other golds, other wrong values, wrappers, invisible characters, tag spellings). Each hack
goes through both reward presets (``score_text``) and ``verify``: ZERO accepts. The harmless
controls at the end must all still be paid, so a rule that rejects everything cannot pass.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scorer.equivalence import verify
from scorer.rewards import reward_config, score_text
from tests.test_grading_adversarial import examples  # one home for the suites' settings

BINARY = reward_config("binary")
INTERLEAVED = reward_config("interleaved")
ZW = "\u200b"


def never_paid(text: str, gold: str) -> None:
    """No path pays ``text``: binary, interleaved (after a think block) and ``verify``."""
    binary = score_text(text, gold, BINARY, timeout=5.0)
    assert not binary.correct, f"binary paid {text!r} for {gold!r}: {binary}"
    assert binary.status != "timeout"
    think = text if "</think>" in text or "<think" in text else "<think>x</think>" + text
    inter = score_text(think, gold, INTERLEAVED, timeout=5.0)
    assert not inter.correct, f"interleaved paid {think!r} for {gold!r}: {inter}"
    v = verify(text, gold)
    assert not v.correct, f"verify paid {text!r} for {gold!r}: {v}"


def paid(text: str, gold: str, *, interleaved: bool = True) -> None:
    """A harmless control: binary and ``verify`` pay it (and interleaved, after a think)."""
    out = score_text(text, gold, BINARY, timeout=5.0)
    assert out.correct, f"binary refused {text!r} for {gold!r}: {out}"
    v = verify(text, gold)
    assert v.correct, f"verify refused {text!r} for {gold!r}: {v}"
    if interleaved:
        think = text if "</think>" in text else "<think>x</think>" + text
        out = score_text(think, gold, INTERLEAVED, timeout=5.0)
        assert out.correct, f"interleaved refused {think!r} for {gold!r}: {out}"


# Every pattern of the issue's list; gold 37 unless given.
HACKS: dict[str, list[tuple[str, str]]] = {
    "prose-in-a-box": [
        ("\\boxed{\\text{the answer is not } 37}", "37"),
        ("\\boxed{\\text{not } 37}", "37"),
        ("\\boxed{37 \\text{ is wrong}}", "37"),
        ("\\boxed{37 \\text{ (incorrect)}}", "37"),
        ("\\boxed{\\text{It is not 37}}", "37"),
        ("\\boxed{\\text{I am not sure, maybe } 37}", "37"),
        ("\\boxed{\\text{either 36 or } 37}", "37"),
        ("\\boxed{\\text{probably } 37}", "37"),
        ("\\boxed{37 \\text{, probably}}", "37"),
        ("\\boxed{\\text{anything but } 37}", "37"),
        ("\\boxed{\\text{more than } 37}", "37"),
        ("\\boxed{\\text{the answer isn't } 37}", "37"),
        ("\\boxed{x \\neq 37}", "37"),
        ("\\boxed{37 \\text{ nope}}", "37"),
    ],
    "hidden-or-struck-out-box": [
        ("\\boxed{5} \\phantom{\\boxed{37}}", "37"),
        ("\\boxed{5} {\\color{white}\\boxed{37}}", "37"),
        ("\\boxed{5} {\\color{White} \\boxed{37}}", "37"),
        ("\\boxed{5} \\textcolor{#FFFFFF}{\\boxed{37}}", "37"),
        ("\\boxed{5} \\textcolor{#fff}{\\boxed{37}}", "37"),
        ("\\boxed{5} <!-- \\boxed{37} -->", "37"),
        ("\\boxed{5} \\iffalse \\boxed{37} \\fi", "37"),
        ("\\boxed{5} % \\boxed{37}", "37"),
        ("\\boxed{5} \\sout{\\boxed{37}}", "37"),
        ("\\boxed{5} \\cancel{\\boxed{37}}", "37"),
        ("\\boxed{5} \\xcancel{\\boxed{37}}", "37"),
        ("\\boxed{5} ~~\\boxed{37}~~", "37"),
        ("\\boxed{\\cancel{37}}", "37"),
        ("\\boxed{\\sout{37}}", "37"),
    ],
    "box-in-a-think": [
        ("<think>x</think> \\boxed{5} <think> \\boxed{37}", "37"),
        ("<think> \\boxed{37}", "37"),
        ("<think>\\boxed{37} and I stop here", "37"),
        ("<Think>\\boxed{37}", "37"),
        ("<thinking>\\boxed{37}</thinking> no idea", "37"),
        ("<think>\\boxed{37}</Think > I do not know.", "37"),
        ("<think>a</think> <think >\\boxed{37}", "37"),
        ("<think>\\boxed{37}</ think> unsure", "37"),
    ],
    "box-in-a-box": [
        ("\\boxed{5\\boxed{37}}", "37"),
        ("\\boxed{\\boxed{37} \\text{ or } 5}", "37"),
        ("\\boxed{\\fbox{37} 5}", "37"),
        ("\\boxed{\\text{\\boxed{37}} 5}", "37"),
    ],
    "hedge-across-boxes": [
        ("\\boxed{36} or \\boxed{37}", "37"),
        ("\\boxed{37} or \\boxed{36}", "37"),
        ("\\boxed{36}\\boxed{37}", "37"),
        ("\\boxed{36} \\boxed{37}", "37"),
        ("$\\boxed{36}$ $\\boxed{37}$", "37"),
        ("\\boxed{36}. Actually, \\boxed{37}.", "37"),
        ("\\boxed{37}. Hmm, or maybe \\boxed{36}.", "37"),
        ("\\boxed{37} \\text{ or } \\boxed{36}", "37"),
        ("\\boxed{36}, \\boxed{37}", "37"),
        ("\\boxed{2} and \\boxed{3} and \\boxed{4}", "2, 3"),
        ("\\boxed{3} and \\boxed{2}", "(2, 3)"),
        (" ".join(f"\\boxed{{{i}}}" for i in range(100)), "37"),  # a spray of boxes
        (" and ".join(["\\boxed{37}"] * 65), "37"),  # more boxes than any answer has
    ],
    "tool-output": [
        ("<tool_response>x</tool_response> \\boxed{37}</tool_response>", "37"),
        ("<tool_response>\\boxed{37}", "37"),
        ("<tool_response>out</tool_response> ok <tool_response>\\boxed{37}", "37"),
        ("<tool_call>print('</tool_call> \\\\boxed{37}')</tool_call>", "37"),
        ("<think>x</think><tool_response>\\boxed{37}</tool_response >", "37"),
    ],
    "hedge-filter": [
        (f"Yes{ZW}, but only if n is even", "Yes"),
        ("Yes, provided n is even", "Yes"),
        ("Yes, although not for n = 2", "Yes"),
        ("Yes, assuming n > 2", "Yes"),
        ("Yes, probably", "Yes"),
        (f"Y{ZW}es, b{ZW}ut n{ZW}ot always", "Yes"),
        ("No, yes", "No"),
        ("Yes, it isn't", "Yes"),
        ("Yes, it wasn't possible", "Yes"),
        ("\\boxed{37 \\text{ n" + ZW + "ot}}", "37"),
    ],
    "meaning-dropped": [
        ("\\boxed{\\overline{37}}", "37"),
        ("\\boxed{0.37\\%}", "37\\%"),
        ("\\boxed{37\\%}", "0.37\\%"),
        ("\\boxed{0.37\\%}", "0.37"),
        ("\\boxed{0.\\overline{3}}", "0.3"),
    ],
    "units-and-multipliers": [
        ("\\boxed{37 \\text{ million}}", "37"),
        ("\\boxed{37 \\text{ thousand}}", "37"),
        ("\\boxed{37 million}", "37"),
        ("\\boxed{37 \\text{ cm}}", "37 \\text{ m}"),
        ("\\boxed{37 \\text{ km}}", "37 \\text{ m}"),
        ("\\boxed{37 \\mathrm{~kg}}", "37 \\text{ g}"),
        ("\\boxed{37 \\text{ seconds}}", "37 \\text{ minutes}"),
        ("\\boxed{37 \\text{ square feet}}", "37 \\text{ feet}"),
    ],
    "or-between-intervals": [
        ("\\boxed{(-\\infty,1) \\text{ or } (3,\\infty)}", "(-\\infty,1)\\cup(3,\\infty)"),
        ("\\boxed{[0,1] \\text{ or } [2,3]}", "[0,1]\\cup[2,3]"),
    ],
    "no-box-fallback": [
        ("The answer is not 37.", "37"),
        ("The answer is 5, not $37$.", "37"),
        ("I think it is $36$ or $37$.", "37"),
        ("Maybe the answer is $37$.", "37"),
        ("It could be 37, but I am not sure.", "37"),
        ("$37$ is wrong.", "37"),
        ("What is 30 + 7?", "37"),
        ("Final answer: probably 37", "37"),
        # the gold written unevaluated as the final answer, then a different value computed
        ("The final answer is $\\binom{7}{3}$. Working it out, $7 \\cdot 6 / 2 = 21$.", "35"),
        ("My answer is 30 + 7. So it comes to 30 + 7 = 38.", "37"),
        # prose after the phrase or in a box stating two values, the gold last
        ("The answer is 40, for the 37 rows.", "37"),
        ("\\boxed{\\text{40 for the 37 rows}}", "37"),
        # a variable read as a choice letter
        ("So every point has the same height $c$.", "\\text{(C)}"),
        ("The correct option is (E), since the height is $c$.", "\\text{(C)}"),
    ],
}
CASES = [
    pytest.param(text, gold, id=f"{cls}-{i}")
    for cls, rows in HACKS.items()
    for i, (text, gold) in enumerate(rows)
]


@pytest.mark.parametrize(("text", "gold"), CASES)
def test_every_hack_of_the_issue_is_never_paid(text: str, gold: str) -> None:
    never_paid(text, gold)


# --- generated variants ---------------------------------------------------------------------

WRAPPERS = [
    "{}",
    "So the answer is {}.",
    "<think>work</think>\n{}",
    "Let me finish.\n\n{}\n",
    "$${}$$",
]
PROSE_HACKS = [
    "\\boxed{{\\text{{not }} {g}}}",
    "\\boxed{{{g} \\text{{ is wrong}}}}",
    "\\boxed{{\\text{{maybe }} {g}}}",
    "\\boxed{{\\text{{either {w} or }} {g}}}",
    "\\boxed{{\\text{{the answer is not }} {g}}}",
    "\\boxed{{{g} \\text{{ (incorrect)}}}}",
]
CHOICE_HACKS = [
    "\\boxed{{{w}}} \\phantom{{\\boxed{{{g}}}}}",
    "\\boxed{{{w}}} \\sout{{\\boxed{{{g}}}}}",
    "\\boxed{{{w}}} <!-- \\boxed{{{g}}} -->",
    "\\boxed{{{w}}} or \\boxed{{{g}}}",
    "\\boxed{{{g}}} or \\boxed{{{w}}}",
    "\\boxed{{{w}}}\\boxed{{{g}}}",
    "\\boxed{{{w}}}. Wait, \\boxed{{{g}}}",
    "\\boxed{{{w}\\boxed{{{g}}}}}",
    "<tool_response>x</tool_response> \\boxed{{{g}}}</tool_response>",
    "<tool_response>\\boxed{{{g}}}",
    "<think>\\boxed{{{g}}}",
    "<think>x</think>\\boxed{{{w}}}<think>\\boxed{{{g}}}",
]


def _insert_zero_width(text: str, at: int) -> str:
    at = at % (len(text) + 1)
    return text[:at] + ZW + text[at:]


@given(
    template=st.sampled_from(PROSE_HACKS + CHOICE_HACKS),
    wrapper=st.sampled_from(WRAPPERS),
    gold=st.integers(1, 10**6),
    delta=st.integers(1, 999),
    zero_width=st.none() | st.integers(0, 200),
)
@examples(60)
def test_generated_hack_variants_are_never_paid(
    template: str, wrapper: str, gold: int, delta: int, zero_width: int | None
) -> None:
    text = wrapper.format(template.format(g=gold, w=gold + delta))
    if zero_width is not None:
        text = _insert_zero_width(text, zero_width)
    never_paid(text, str(gold))


@given(
    gold=st.integers(1, 10**4),
    scale=st.sampled_from(["thousand", "million", "billion"]),
    unit=st.sampled_from([("cm", "m"), ("km", "m"), ("kg", "g"), ("seconds", "minutes")]),
)
@examples(30)
def test_generated_scale_and_unit_contradictions(
    gold: int, scale: str, unit: tuple[str, str]
) -> None:
    never_paid(f"\\boxed{{{gold} \\text{{ {scale}}}}}", str(gold))
    never_paid(f"\\boxed{{{gold} \\text{{ {unit[0]}}}}}", f"{gold} \\text{{ {unit[1]}}}")


@given(k=st.integers(1, 9999), places=st.integers(1, 3))
@examples(30)
def test_generated_percents_a_hundred_times_apart(k: int, places: int) -> None:
    small = f"{k / 10**places:.{places}f}".rstrip("0").rstrip(".")
    assume(small != str(k))
    never_paid(f"\\boxed{{{small}\\%}}", f"{k}\\%")
    if k / 10**places < 1:
        never_paid(f"\\boxed{{{small}\\%}}", small)


@given(
    a=st.integers(2, 60),
    b=st.integers(2, 60),
    delta=st.integers(1, 99),
    wrapper=st.sampled_from(["{}", "Let me finish.\n\n{}\n"]),
)
@examples(30)
def test_generated_unevaluated_golds_and_values_in_prose(
    a: int, b: int, delta: int, wrapper: str
) -> None:
    gold, wrong = a * b, a * b + delta
    computed = f"The final answer is ${a} \\times {b}$. Multiplying, ${a} \\times {b} = {wrong}$."
    never_paid(wrapper.format(computed), str(gold))
    never_paid(wrapper.format(f"The answer is {wrong}, for the {gold} rows."), str(gold))
    never_paid(wrapper.format(f"\\boxed{{\\text{{{wrong} for the {gold} rows}}}}"), str(gold))
    checked = f"The final answer is ${a} \\times {b}$. Multiplying, ${a} \\times {b} = {gold}$."
    paid(wrapper.format(checked), str(gold), interleaved=False)  # a check is no hedge


# --- harmless controls: must be paid ---------------------------------------------------------

CONTROLS: list[tuple[str, str]] = [
    ("\\boxed{37}", "37"),
    ("So the answer is $\\boxed{37}$.", "37"),
    ("\\boxed{37 \\text{ apples}}", "37"),
    ("\\boxed{x = 37}", "37"),
    ("\\boxed{x = 30 + 7 = 37}", "37"),  # a chain of forms states its last value
    ("\\boxed{\\text{The total is } 37}", "37"),
    ("\\boxed{37}. Indeed, \\boxed{37}.", "37"),
    ("\\boxed{37}\\quad\\boxed{37}", "37"),  # the same box twice is one answer
    ("\\boxed{x = 37}. So the answer is \\boxed{37}.", "37"),  # one value, two forms
    ("\\boxed{0.5}, i.e. \\boxed{\\frac12}.", "1/2"),
    ("\\cancel{\\boxed{36}} so \\boxed{37}", "37"),
    ("<think><tool_response>36</tool_response></think> So \\boxed{37}", "37"),
    ("\\boxed{2} and \\boxed{3}", "2, 3"),
    ("\\boxed{2}, \\boxed{3}", "(2, 3)"),
    ("\\boxed{37\\%}", "37"),
    ("\\boxed{37\\%}", "0.37"),
    ("\\boxed{0.\\overline{3}}", "\\frac13"),
    ("\\boxed{3.7 \\text{ million}}", "3700000"),
    ("\\boxed{37 \\text{ m}}", "37"),
    ("\\boxed{37 \\text{ meters}}", "37 \\text{ m}"),
    ("\\boxed{x<1 \\text{ or } x>3}", "(-\\infty,1)\\cup(3,\\infty)"),
    ("\\boxed{\\text{Yes, it is possible}}", "Yes"),
    ("\\boxed{\\text{No, there is no such } n}", "No"),
    ("\\boxed{\\text{East}}", "East"),
    ("So the answer is $\\boxed{\\text{(D)}} 2x + 1 = 9$.", "\\text{(D)}"),
]
FALLBACK_CONTROLS: list[tuple[str, str]] = [
    ("The final answer is 37.", "37"),
    ("So 3 + 4 = 7 eggs are used.\nA: 37", "37"),
    ("Therefore the volume is 37 cubic inches.\n\n# Answer\n\n37", "37"),
    ("So she sold 48 + 24 = 72 clips. #### 72", "72"),
    ("Hence the total is $37$.", "37"),
    ("The answer is: 37.", "37"),
    ("The correct answer is (D).", "\\text{(D)}"),
    ("The correct option is $(d)$.", "D"),
    ("The answer is 37. Check: $30 + 7 = 37$.", "37"),
]


@pytest.mark.parametrize(("text", "gold"), CONTROLS)
def test_harmless_controls_are_paid(text: str, gold: str) -> None:
    paid(text, gold)


@pytest.mark.parametrize(("text", "gold"), FALLBACK_CONTROLS)
def test_answers_without_a_box_are_paid_by_binary_and_verify(text: str, gold: str) -> None:
    paid(text, gold, interleaved=False)
    off = reward_config("binary", answer_fallback=False)
    assert score_text(text, gold, off).status == "no_answer"
    assert score_text("<think>x</think>" + text, gold, INTERLEAVED).status == "no_answer"
    on = reward_config("interleaved", answer_fallback=True)
    assert score_text("<think>x</think>" + text, gold, on).correct


# --- hostile inputs: the answer finder stays linear ------------------------------------------

HOSTILE = {
    "spaces-after-a-bracket": "<" + " " * 200_000 + "x",
    "spaces-after-a-closing-bracket": "</" + " " * 200_000,
    "unclosed-think-tags": "<think " * 40_000,
    "spaces-after-textcolor": "\\textcolor" + " " * 100_000 + "x",
    "unclosed-textcolor-options": "\\textcolor[" * 30_000,
    "unclosed-cancelto": "\\cancelto{" * 30_000,
    "many-sentences": "So it is 5. " * 20_000,
    "many-negations": "not " * 50_000 + "$37$",
    "many-tool-blocks": "<tool_response>a</tool_response>" * 10_000 + "\\boxed{1}",
    "many-boxes": "\\boxed{1}" * 12_000,
}


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_texts_are_read_in_linear_time(text: str) -> None:
    start = time.perf_counter()
    out = score_text(text, "37", BINARY, timeout=5.0)
    assert not out.correct
    assert time.perf_counter() - start < 3.0


@pytest.mark.parametrize(
    ("pred", "question"),
    [
        ("5" * 9000 + ".5\\overline{3}", None),  # a repeating decimal too long to convert
        ("0." + "1" * 40 + "\\overline{3}", None),
        ("1" * 4500 + "/" + "3" * 4500, "Express your answer as a common fraction."),
        ("\\frac{" + "1" * 5000 + "}{3}", "Express your answer as a common fraction."),
        ("1" * 9000 + "'", None),  # minutes of arc after a long number
    ],
)
def test_huge_numbers_in_new_rules_never_raise(pred: str, question: str | None) -> None:
    start = time.perf_counter()
    v = verify(pred, "1/6", question=question)
    assert not v.correct and v.reason != "timeout"
    assert time.perf_counter() - start < 3.0
