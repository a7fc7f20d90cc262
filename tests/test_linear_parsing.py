"""Trajectory parsing takes time linear in the text (issue #28, class 6).

Each crafted shape was quadratic: a `/score` of a few hundred kB took seconds. A test times two
sizes four times apart and wants a ratio a linear algorithm gives (about 4), far from the 16 a
quadratic one gives. The rewritten helpers are also checked against the regex-based versions
they replace, on generated texts, so linear does not mean different.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorer.api import score
from scorer.extract import (
    _HIDING,
    _LookAhead,
    _unhidden,
    mask_hidden,
    mask_tool_blocks,
    matching_brace,
    splice,
    unwrap_box,
)

SMALL = 20_000  # repetitions of the crafted unit at the smaller size
GROWTH = 4  # the larger size is this many times the smaller
MAX_RATIO = 9.0  # linear: ~4 (up to ~7 as caches fill); quadratic: ~16


def _best_of(runs: int, fn: Callable[[], object]) -> float:
    """The least CPU time ``fn`` took (CPU, not wall: a shared machine preempts the test)."""
    best = float("inf")
    for _ in range(runs):
        started = time.thread_time()
        fn()
        best = min(best, time.thread_time() - started)
    return best


SHAPES: dict[str, Callable[[int], dict[str, str]]] = {
    # every <tool_call> is unclosed: a lazy regex scanned to the end of the text for each
    "unclosed tool calls": lambda n: {"response": "<tool_call>" * n + "\\boxed{1}", "answer": "1"},
    "tool tags never paired": lambda n: {
        "response": "<tool_response>x</tool_call>" * n + "\\boxed{1}",
        "answer": "1",
    },
    # every percent sign looked for a box to the end of its (long) line
    "percent signs on a line without a box": lambda n: {
        "response": "a% " * n + "\n\\boxed{1}",
        "answer": "1",
    },
    # every box copied the rest of the text to look at what follows it
    "many boxes": lambda n: {"response": "\\boxed{1} " * n, "answer": "1"},
    # each level of the nest was rescanned and copied
    "boxed nest": lambda n: {
        "response": "\\boxed{" * (n // 4) + "1" + "}" * (n // 4),
        "answer": "1",
    },
}


@pytest.mark.parametrize("shape", SHAPES)
def test_score_time_grows_linearly(shape: str) -> None:
    make = SHAPES[shape]
    small, large = make(SMALL), make(SMALL * GROWTH)
    score(small)  # imports and caches out of the timing
    t_small = _best_of(3, lambda: score(small))
    t_large = _best_of(3, lambda: score(large))
    ratio = t_large / max(t_small, 1e-4)
    assert ratio < MAX_RATIO, f"{shape}: {t_small:.4f}s -> {t_large:.4f}s (x{ratio:.1f})"
    assert t_large < 2.0, f"{shape}: {t_large:.2f}s for {len(large['response'])} characters"


# --- Same results as the quadratic versions ------------------------------------------------------

_OLD_TOOL_BLOCK = re.compile(
    r"<(?P<tag>tool_call|tool_response)\b[^>]*>.*?</(?P=tag)\s*>", re.DOTALL | re.IGNORECASE
)


def _old_mask_tool_blocks(text: str) -> str:
    return _OLD_TOOL_BLOCK.sub(lambda m: f"<{m['tag'].lower()}></{m['tag'].lower()}>", text)


def _old_unwrap_box(content: str) -> str:
    content = content.strip()
    while True:
        m = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])").match(content)
        if m is None:
            return content
        i = m.end()
        while i < len(content) and content[i].isspace():
            i += 1
        if i >= len(content) or content[i] != "{":
            return content
        close = matching_brace(content, i)
        if close != len(content) - 1:
            return content
        content = content[i + 1 : close].strip()


_TAG_PIECES = st.sampled_from(
    ["<tool_call>", "</tool_call>", "<TOOL_CALL a=1>", "</tool_call >", "<tool_response>",
     "</tool_response>", "<tool_calls>", "<tool_call", ">", "x", " ", "\n", "\\boxed{2}"]
)  # fmt: skip
_BOX_PIECES = st.sampled_from(
    ["\\boxed{", "\\fbox{", "\\boxed {", "{", "}", "\\{", "\\}", "\\\\", " ", "5", "\\boxedx{"]
)
_HIDDEN_PIECES = st.sampled_from(
    ["%", "5%", "\\%", "a", " ", "\n", "\\boxed{1}", "\\phantom{", "}", "<!--", "-->", "~~"]
)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.lists(_TAG_PIECES, max_size=30).map("".join))
def test_mask_tool_blocks_matches_the_regex(text: str) -> None:
    assert mask_tool_blocks(text) == _old_mask_tool_blocks(text)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.lists(_BOX_PIECES, max_size=30).map("".join))
def test_unwrap_box_matches_the_rescanning_version(text: str) -> None:
    assert unwrap_box(text) == _old_unwrap_box(text)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.lists(_HIDDEN_PIECES, max_size=30).map("".join))
def test_mask_hidden_matches_a_fresh_search_per_sign(text: str) -> None:
    # a look-ahead made anew for every construct searches from scratch, as the old code did
    fresh = splice(text, _HIDING, lambda m: _unhidden(text, m, _LookAhead(text)))
    assert mask_hidden(text) == fresh
