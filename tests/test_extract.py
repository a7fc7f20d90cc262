"""Answer extraction: one test per edge case of boxes, think blocks and tool blocks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scorer.extract import (
    Box,
    extract_answer,
    find_boxes,
    last_boxed_or_text,
    mask_tool_blocks,
    scan_boxes,
)
from scorer.normalize import extract_final_answer
from scorer.verdict import Reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is \\boxed{42}.", "42"),
        ("so \\boxed{\\tfrac{1}{3}} it is", "\\tfrac{1}{3}"),
        ("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{\\sqrt{2}}{2}"),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("\\boxed{a\\}b}", "a\\}b"),
        ("\\boxed{ 7 }", "7"),
        ("\\boxed {7}", "7"),
        ("\\boxed{x \\\\ y}", "x \\\\ y"),
        ("\\fbox{3}", "3"),
        ("\\boxed 5", "5"),
        ("so $\\boxed 5$ done", "5"),
        ("answer: \\boxed 12.", "12"),
        ("\\boxed{1,\n2}", "1,\n2"),
        ("\\boxed{\\boxed{5}}", "5"),
        ("\\boxed{\\boxed{5} + 1}", "\\boxed{5} + 1"),
    ],
)
def test_box_forms(text: str, expected: str) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "no box at all",
        "\\boxed{}",
        "\\boxed{   }",
        "\\boxed{12",
        "\\boxed{\\frac{1}{2}",
        "ends with \\boxed",
        "\\boxedx{3}",
    ],
)
def test_no_answer(text: str) -> None:
    assert extract_answer(text) is None


def test_unclosed_last_box_is_no_answer_but_first_box_still_reads() -> None:
    text = "first \\boxed{1} then \\boxed{2"
    assert extract_answer(text, which="last") is None
    assert extract_answer(text, which="first") == "1"


def test_empty_box_counts_as_the_chosen_box() -> None:
    text = "put it in \\boxed{} like \\boxed{5}"
    assert extract_answer(text, which="last") == "5"
    assert extract_answer(text, which="first") is None


def test_first_and_last() -> None:
    text = "\\boxed{3} or rather \\boxed{4}"
    assert extract_answer(text, which="first") == "3"
    assert extract_answer(text, which="last") == "4"


def test_find_boxes_lists_every_box_in_order() -> None:
    assert find_boxes("\\boxed{1} \\fbox{2} \\boxed{} \\boxed 4") == ["1", "2", None, "4"]


def test_only_after_think_skips_boxes_in_the_reasoning() -> None:
    text = "<think>draft \\boxed{1}</think> final \\boxed{2}"
    assert extract_answer(text, which="first") == "2"
    assert extract_answer(text, which="first", only_after_think=False) == "1"


def test_only_after_think_uses_the_last_think_close() -> None:
    text = "<think>a</think> \\boxed{1} <think>b</think> \\boxed{2}"
    assert extract_answer(text, which="first") == "2"


def test_only_after_think_without_think_searches_everything() -> None:
    assert extract_answer("plain \\boxed{9}") == "9"


def test_no_box_after_think_is_no_answer_even_with_boxes_inside() -> None:
    assert extract_answer("<think>\\boxed{5}</think> I am unsure.") is None


def test_tool_response_contents_are_not_answers() -> None:
    text = '<think>x</think><tool_response>{"result": "\\boxed{9}"}</tool_response> no answer'
    assert extract_answer(text) is None


def test_tool_call_contents_are_not_answers() -> None:
    text = '<tool_call>{"code": "print(\'\\\\boxed{9}\')"}</tool_call> and \\boxed{3}'
    assert extract_answer(text, which="first") == "3"


def test_think_close_printed_by_a_tool_does_not_count() -> None:
    text = "<think>\\boxed{1}<tool_response></think></tool_response> still thinking \\boxed{2}"
    # No real </think>: the whole (masked) text is searched.
    assert extract_answer(text, which="first") == "1"


def test_mask_tool_blocks_keeps_empty_tags() -> None:
    text = 'a <tool_call>{"x": 1}</tool_call> b <TOOL_RESPONSE>out</TOOL_RESPONSE> c'
    assert mask_tool_blocks(text) == "a <tool_call></tool_call> b <tool_response></tool_response> c"


def test_unclosed_tool_call_is_left_as_text() -> None:
    text = "<tool_call>{broken \\boxed{4}"
    assert mask_tool_blocks(text) == text
    assert extract_answer(text) == "4"


def test_mask_tools_off_reads_tool_output() -> None:
    text = "<tool_response>\\boxed{9}</tool_response>"
    assert extract_answer(text, mask_tools=False) == "9"


@pytest.mark.parametrize(
    ("solution", "expected"),
    [
        ("so the integral is $\\boxed{\\frac13}$.", "\\frac13"),
        ("first \\boxed{1}, finally \\boxed{2}", "2"),
        ("Natalia sold 24 clips in May.\n#### 72", "72"),
        ("  42  ", "42"),
    ],
)
def test_last_boxed_or_text(solution: str, expected: str) -> None:
    assert last_boxed_or_text(solution) == expected


@given(st.text())
def test_extraction_never_raises(text: str) -> None:
    answer = extract_answer(text)
    assert answer is None or (answer == answer.strip() and answer)


@given(st.text(alphabet=st.characters(blacklist_characters="{}\\<")))
def test_boxed_plain_text_round_trips(content: str) -> None:
    assert extract_answer("x \\boxed{" + content + "} y") == (content.strip() or None)


# The one box finder and its unclosed rule (docs/scorer.md, "Boxes"): a model's box that never
# closes is no answer in every caller, never its truncated text nor an earlier box; a gold's
# reads to the end, which is what the box closed there would hold.
UNCLOSED = [
    "\\boxed{12",
    "first \\boxed{1} then \\boxed{2",
    "\\boxed{1} and \\boxed{2",
    "Final answer: \\boxed{7",
    "$\\boxed{\\frac{1}{2}$",
]


def test_scan_boxes_marks_an_unclosed_box_and_it_is_last() -> None:
    assert scan_boxes("a \\boxed{1} b \\boxed{2 c} \\boxed{3") == [
        Box(2, 11, "1"),
        Box(14, 25, "2 c"),
        Box(26, 34, "3", unclosed=True),
    ]
    assert scan_boxes("\\boxed{x \\boxed{5}") == [Box(0, 18, "x \\boxed{5}", unclosed=True)]
    assert find_boxes("\\boxed{1} \\boxed{2") == ["1", None]


@pytest.mark.parametrize("text", UNCLOSED)
def test_unclosed_box_is_no_model_answer_in_any_caller(text: str) -> None:
    from scorer.equivalence import verify

    assert extract_answer(text) is None
    assert extract_final_answer(text) == ""
    closed_answer = extract_answer(text + "}")
    assert closed_answer is not None
    verdict = verify(text, closed_answer)
    assert not verdict.correct and verdict.reason == Reason.EMPTY, verdict


@pytest.mark.parametrize("text", UNCLOSED)
def test_unclosed_gold_box_reads_what_the_closed_box_would(text: str) -> None:
    assert extract_final_answer(text, gold=True) == extract_final_answer(text + "}", gold=True)


# --- the masks and the answer region of scorer.answer ---------------------------------------

from scorer.extract import answer_region, drop_invisible, mask_hidden, mask_tool_output  # noqa: E402


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("a <tool_response>out</tool_response> b", "a <tool_response></tool_response> b"),
        # a forged closing tag printed by the tool: the mask runs to the last closing tag
        ("<tool_response>x</tool_response> \\boxed{37}</tool_response> b", " b"),
        ("a <tool_response>\\boxed{37}", "a "),  # never closed: masked to the end
        # from the first tool tag to the last closing one: the text between calls is a draft
        ("a <tool_call>c</tool_call> b <tool_response>r</tool_response> c", "a  c"),
        ("output</tool_response> answer", " answer"),  # a close without an open
        ("no tools", "no tools"),
    ],
)
def test_mask_tool_output(text: str, visible: str) -> None:
    out = mask_tool_output(text)
    assert out.replace("<tool_response></tool_response>", "") == visible.replace(
        "<tool_response></tool_response>", ""
    )


@pytest.mark.parametrize(
    ("text", "region"),
    [
        ("<think>a</think> b", " b"),
        ("<think>a</think> b <think> c", " b "),  # reopened: cut there
        ("<think> all reasoning \\boxed{1}", ""),  # never closed: nothing is an answer
        ("no tags \\boxed{1}", "no tags \\boxed{1}"),
        ("<thinking>a</thinking> b", " b"),
        ("<think>a</Think > b", " b"),
        ("<think>a</ think> b", " b"),
        ("x</think> y</think> z", " z"),
    ],
)
def test_answer_region(text: str, region: str) -> None:
    assert answer_region(text) == region


def test_hiding_and_striking_out() -> None:
    for hidden in (
        "\\textcolor{#FFFFFF}{\\boxed{3}}",
        "{\\color{White}\\boxed{3}}",
        "\\sout{\\boxed{3}}",
        "\\cancel{\\boxed{3}}",
        "<!-- \\boxed{3} -->",
        "\\iffalse \\boxed{3} \\fi",
        "~~\\boxed{3}~~",
    ):
        assert "boxed" not in mask_hidden("ok " + hidden), hidden
    assert mask_hidden("\\textcolor{red}{\\boxed{3}}") == "\\textcolor{red}{\\boxed{3}}"
    assert mask_hidden("\\boxed{50%}") == "\\boxed{50%}"


def test_invisible_characters_are_dropped() -> None:
    assert drop_invisible("b\u200bu\u200dt\ufeff") == "but"
