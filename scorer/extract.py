"""Find the model's final answer in the text it wrote.

Two rules matter for rewards: a ``\\boxed{...}`` is read with brace matching (the seed's
``\\boxed\\{([^}]*)\\}`` regex cut ``\\boxed{\\tfrac{1}{3}}`` short), and only text the
assistant wrote counts. Environments splice ``<tool_response>`` blocks (tool output) into the
assistant turn, and ``<tool_call>`` blocks hold code, so both blocks' contents are masked before
any answer or ``</think>`` is looked for: a program that prints ``\\boxed{5}`` is no answer.

The building blocks live here (the box finder, the masks of tool output, hidden text and
invisible characters, the answer region after ``</think>``); which answer counts is decided in
one place, :func:`scorer.answer.find_answer`. :func:`extract_answer` reads a single box, for
callers that want only that.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import Literal, NamedTuple

Which = Literal["first", "last"]

THINK_CLOSE = "</think>"

# Tool tags for the block mask below: an opening tag's name, and a closing tag.
_BLOCK_OPEN = re.compile(r"<(?P<tag>tool_call|tool_response)\b", re.IGNORECASE)
_BLOCK_CLOSE = re.compile(r"</(?P<tag>tool_call|tool_response)\s*>", re.IGNORECASE)
# Opening tool tags (a tool call, a tool's answer), counted by the format and bonus rules.
TOOL_CALL_OPEN = re.compile(r"<tool_call\b", re.IGNORECASE)
TOOL_RESPONSE_OPEN = re.compile(r"<tool_response\b", re.IGNORECASE)
# \boxed or \fbox not followed by another letter (``\boxedx`` is a different command).
_BOX_CMD = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_TRAILING_PUNCT = ".,;:"


def mask_tool_blocks(text: str) -> str:
    """Return ``text`` with the contents of every closed ``<tool_call>``/``<tool_response>``
    block removed, keeping empty ``<tool_call></tool_call>`` tags in their place.

    An unclosed opening tag is left as it is: it is no block, but rules that look for the tag
    (tool calls after ``</think>``) still see it. A block is an opening tag (through its ``>``)
    and the first closing tag of the same name after it; blocks do not nest.

    Linear in the text: every tag is found once, and each opening tag looks its ``>`` and its
    closing tag up instead of scanning the rest of the text (a lazy ``<tool_call>.*?</tool_call>``
    regex rescans it for every unclosed opening tag: quadratic, seconds for 100 kB).
    """
    closes: dict[str, list[int]] = {"tool_call": [], "tool_response": []}
    close_ends: dict[int, int] = {}
    for m in _BLOCK_CLOSE.finditer(text):
        closes[m["tag"].lower()].append(m.start())
        close_ends[m.start()] = m.end()
    if not close_ends:
        return text
    out: list[str] = []
    pos = 0  # text before pos is already in out
    gt = -1  # the first '>' at or after the tag being looked at (found once, moves forward)
    for m in _BLOCK_OPEN.finditer(text):
        if m.start() < pos:
            continue  # inside the block just masked
        if gt < m.end():
            gt = text.find(">", m.end())
            if gt < 0:
                break  # no opening tag from here on is complete
        tag = m["tag"].lower()
        starts = closes[tag]
        k = bisect.bisect_left(starts, gt + 1)
        if k == len(starts):
            continue
        out.append(text[pos : m.start()])
        out.append(f"<{tag}></{tag}>")
        pos = close_ends[starts[k]]
    out.append(text[pos:])
    return "".join(out)


# Any tool tag, opening or closing, for the answer mask below.
_TOOL_OPEN = re.compile(r"<\s*(?:tool_call|tool_response)\b", re.IGNORECASE)
_TOOL_CLOSE = re.compile(r"<\s*/\s*(?:tool_call|tool_response)\s*>", re.IGNORECASE)


def mask_tool_output(text: str) -> str:
    """``text`` with everything from the first tool tag to the last closing tool tag removed,
    and from any tool tag opened after that to the end: the mask answers are looked for in.

    Tool output is not the model's: a program can print ``</tool_response> \\boxed{37}``, and a
    block that never closes holds output to the end. Pairing tags one by one
    (:func:`mask_tool_blocks`, kept for the format rules) lets such a forged closing tag end
    the block early; this mask only ever grows with an extra tag, so text a tool wrote never
    reads as an answer. What it costs is only reasoning written between two tool calls.
    """
    first = _TOOL_OPEN.search(text)
    if first is None:
        close = _TOOL_CLOSE.search(text)
        return text if close is None else text[close.end() :]
    closes = list(_TOOL_CLOSE.finditer(text, first.start()))
    last_close = closes[-1] if closes else None
    end = first.start() if last_close is None else last_close.end()
    head, tail = text[: first.start()], text[end:]
    if _TOOL_OPEN.search(tail) or last_close is None:
        return head
    return head + "<tool_response></tool_response>" + tail


# Characters that draw nothing (zero-width spaces and joiners, soft hyphen, bidi marks, BOM):
# dropped before any rule reads a word, so ``b\u200but`` is ``but`` to the hedge filter.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")


def drop_invisible(text: str) -> str:
    """``text`` without zero-width and other invisible format characters."""
    return _INVISIBLE.sub("", text)


# ``<think>`` as models spell it, and misspell it: any case, spaces, ``<thinking>``,
# ``<\\think>``, ``<thnik>``, ``<thoughts>``, ``<reasoning>``.
_THINK_TAG = re.compile(
    r"<\s*(?:(?P<close>[/\\])\s*)?(?:think\w*|thnik\w*|thnk\w*|thougth?s?|thoughts?|reasoning)"
    r"\s*(?:/\s*)?>",
    re.IGNORECASE,
)


def answer_region(text: str) -> str:
    """The part of ``text`` an answer may come from: after the last ``</think>`` (or a
    misspelling of it), up to a ``<think>`` reopened after it; the whole text when it has no
    think tag at all; nothing when a ``<think>`` is opened and never closed (all of it is
    reasoning, and a box there is a draft, not an answer).
    """
    last_close = None
    first_open = None
    for m in _THINK_TAG.finditer(text):
        if m["close"]:
            last_close = m
        elif first_open is None:
            first_open = m
    if last_close is None:
        return "" if first_open is not None else text
    tail = text[last_close.end() :]
    reopened = _THINK_TAG.search(tail)
    return tail if reopened is None else tail[: reopened.start()]


def count_tool_calls(text: str) -> int:
    """Number of tool calls the assistant made (opening ``<tool_call`` tags outside tool
    blocks; structured calls are rendered as such tags when a trace is read)."""
    return len(TOOL_CALL_OPEN.findall(mask_tool_blocks(text)))


# Content a reader never sees or that the writer struck out: ``\phantom{..}``,
# ``\textcolor{white}{..}`` (any case, ``#fff``, ``#ffffff``), ``\color{white}`` (to the end of
# its group), ``\cancel{..}`` and the other strike-outs, and a ``%`` comment (to the end of the
# line) that holds a box. A ``%`` right after a digit is the percent sign models write
# (``5% of``, ``\boxed{50%}``). HTML comments and ``\iffalse..\fi`` are dropped whole.
_WHITE = r"\{\s*(?i:white|transparent|\#?f{3}|\#?f{6}|rgb\s*\(\s*255\s*,\s*255\s*,\s*255\s*\))\s*\}"
_STRUCK = r"(?:cancel|bcancel|xcancel|sout|st|xout|strike|cancelto\s*\{[^{}]{0,40}\})"
_HIDING = re.compile(
    r"\\(?:[hv]?phantom|smash|" + _STRUCK + r")(?![A-Za-z])\s*\{"
    r"|\\(?:textcolor|mathcolor|colorbox)\s*(?:\[[^\]]{0,40}\]\s*)?" + _WHITE + r"\s*\{"
    r"|\\color\s*" + _WHITE + r"|(?<![\\\d])%|<!--|\\iffalse(?![A-Za-z])|~~(?=\S)"
)


def mask_hidden(text: str) -> str:
    """Return ``text`` without the parts a rendered answer hides, so a box written in white, in
    a ``\\phantom`` or after a ``%`` comment sign is no answer."""
    if "\\" not in text and "%" not in text and "<!--" not in text and "~~" not in text:
        return text
    ahead = _LookAhead(text)
    return splice(text, _HIDING, lambda m: _unhidden(text, m, ahead))


class _LookAhead:
    """The next line end and the next box at or after a position, each found once and reused
    while the positions asked about move forward: a line of ``%`` signs without a box would
    otherwise be rescanned to its end for every sign (quadratic)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._newline = -1
        self._box = -1

    def line_end(self, pos: int) -> int:
        """Index of the first newline at or after ``pos`` (the text's length if none)."""
        if self._newline < pos:
            found = self.text.find("\n", pos)
            self._newline = len(self.text) if found < 0 else found
        return self._newline

    def box_start(self, pos: int) -> int:
        """Index of the first box command at or after ``pos`` (the text's length if none)."""
        if self._box < pos:
            m = _BOX_CMD.search(self.text, pos)
            self._box = len(self.text) if m is None else m.start()
        return self._box


def _unhidden(text: str, m: re.Match[str], ahead: _LookAhead) -> tuple[str, int]:
    """What stays of the hiding construct ``m`` starts, and where the visible text resumes."""
    token = m.group(0)
    if token == "<!--":
        end = text.find("-->", m.end())
        return "", len(text) if end < 0 else end + 3
    if token == "\\iffalse":
        end = text.find("\\fi", m.end())
        return "", len(text) if end < 0 else end + 3
    if token == "~~":  # markdown strike-out: ``~~\boxed{5}~~``
        end = text.find("~~", m.end())
        return ("~~", m.end()) if end < 0 else ("", end + 2)
    if token == "%":
        end = ahead.line_end(m.end())
        if ahead.box_start(m.end()) >= end:  # ``\boxed{50%}``: a percent sign
            return token, m.end()
        return "", end
    if token.endswith("{"):
        close = matching_brace(text, m.end() - 1)
        return "", len(text) if close is None else close + 1
    close = _closing_brace(text, m.end(), 1)  # \color{white}: the rest of the enclosing group
    return "", len(text) if close is None else close


def splice(
    text: str, pattern: re.Pattern[str], edit: Callable[[re.Match[str]], tuple[str, int]]
) -> str:
    """``text`` with each match of ``pattern`` rewritten by ``edit``, which returns the
    replacement and the index where the text resumes (past the match: a rewrite may take a
    whole brace group, or the rest of a line, not just what the pattern matched)."""
    out: list[str] = []
    pos = 0
    while True:
        m = pattern.search(text, pos)
        if m is None:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos : m.start()])
        replacement, pos = edit(m)
        out.append(replacement)


def matching_brace(text: str, open_pos: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``open_pos``; ``None`` when it never closes.

    A backslash escapes the next character, so ``\\{`` and ``\\}`` do not count and ``\\\\``
    is one unit.
    """
    return _closing_brace(text, open_pos, 0)


def _closing_brace(text: str, i: int, depth: int) -> int | None:
    """Index of the ``}`` that closes the ``depth`` groups open at ``i``; ``None`` if none."""
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def unwrap_box(content: str) -> str:
    """``\\boxed{\\boxed{5}}`` -> ``5``: strip boxes that wrap the whole of ``content``.

    A box that never closes is left as it is: it wraps nothing (see :func:`scan_boxes`).
    Linear in the text: the braces are paired in one pass and the boxes peeled by moving two
    indices, not by rescanning and copying the rest at every level of a deep nest.
    """
    lo, hi = 0, len(content)
    closes: dict[int, int] | None = None
    while True:
        while lo < hi and content[lo].isspace():
            lo += 1
        while hi > lo and content[hi - 1].isspace():
            hi -= 1
        m = _BOX_CMD.match(content, lo, hi)
        if m is None:
            break
        i = m.end()
        while i < hi and content[i].isspace():
            i += 1
        if i >= hi or content[i] != "{":
            break
        if closes is None:
            closes = _brace_pairs(content)
        if closes.get(i) != hi - 1:
            break
        lo, hi = i + 1, hi - 1
    return content[lo:hi]


def _brace_pairs(text: str) -> dict[int, int]:
    """Index of each ``{`` that closes -> index of its ``}``, with the escapes of
    :func:`matching_brace` (``\\{``, ``\\}`` and ``\\\\`` are no braces), in one pass."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            opened.append(i)
        elif ch == "}" and opened:
            pairs[opened.pop()] = i
        i += 1
    return pairs


class Box(NamedTuple):
    """One box found in a text: where it stands and what it holds."""

    start: int  # index of the backslash of ``\\boxed``
    end: int  # index just past the box (past the rest of the text for an unclosed one)
    content: str | None  # stripped and unwrapped; None without an argument (bare ``\\boxed``)
    unclosed: bool = False  # its ``{`` never closes: ``content`` is the rest of the text


def scan_boxes(text: str) -> list[Box]:
    """Every box in ``text`` in order; the one box finder of the scorer.

    Forms: ``\\boxed{...}``, ``\\fbox{...}``, ``\\boxed {...}`` and the space form
    ``\\boxed 5`` (one token up to whitespace or ``$``, trailing ``.,;:`` dropped).
    A bare ``\\boxed`` (at the end, or glued to a non-brace) has ``content`` None.

    A box whose ``{`` never closes swallows the rest of the text, so it is always the last box
    found; it is marked ``unclosed`` and holds that rest. What it means is the caller's rule,
    one for the whole scorer (docs/scorer.md, "Boxes"): a model's unclosed box is no answer,
    never the truncated text (``\\boxed{12`` of a cut-off ``\\boxed{125}``) nor an earlier
    box; only a gold's reads to the end, which is exactly what the box closed there would hold.
    """
    boxes: list[Box] = []
    pos = 0
    n = len(text)
    while True:
        m = _BOX_CMD.search(text, pos)
        if m is None:
            return boxes
        i = m.end()
        while i < n and text[i].isspace():
            i += 1
        if i < n and text[i] == "{":
            close = matching_brace(text, i)
            if close is None:
                boxes.append(Box(m.start(), n, unwrap_box(text[i + 1 :]), unclosed=True))
                return boxes
            boxes.append(Box(m.start(), close + 1, unwrap_box(text[i + 1 : close])))
            pos = close + 1
        elif i > m.end() and i < n:
            j = i
            while j < n and not text[j].isspace() and text[j] != "$":
                j += 1
            boxes.append(Box(m.start(), j, text[i:j].rstrip(_TRAILING_PUNCT)))
            pos = j
        else:
            # ``\boxed`` at the end of the text, or glued to a non-brace (``\boxed\frac..``).
            boxes.append(Box(m.start(), m.end(), None))
            pos = m.end()


def find_boxes(text: str) -> list[str | None]:
    """Every box's answer in order (see :func:`scan_boxes`): its contents, or ``None`` for an
    empty, unclosed or bare box."""
    return [None if box.unclosed else box.content or None for box in scan_boxes(text)]


def after_think(text: str, *, which: Which = "last") -> str | None:
    """The text after the first or last ``</think>``; ``None`` when there is none."""
    idx = text.find(THINK_CLOSE) if which == "first" else text.rfind(THINK_CLOSE)
    if idx < 0:
        return None
    return text[idx + len(THINK_CLOSE) :]


def extract_answer(
    text: str,
    *,
    which: Which = "last",
    only_after_think: bool = True,
    mask_tools: bool = True,
) -> str | None:
    """The model's boxed answer, or ``None`` when it gave none.

    ``which`` picks the first or last box. With ``only_after_think`` the search starts after
    the last ``</think>`` when the text has one (boxes inside the reasoning are drafts); text
    without ``</think>`` is searched whole. ``mask_tools`` ignores tool call and tool response
    contents (see :func:`mask_tool_blocks`); hidden content never counts
    (:func:`mask_hidden`). An empty or unclosed chosen box is ``None``.
    """
    if mask_tools:
        text = mask_tool_blocks(text)
    text = mask_hidden(text)
    if only_after_think:
        tail = after_think(text, which="last")
        if tail is not None:
            text = tail
    boxes = find_boxes(text)
    if not boxes:
        return None
    return boxes[0] if which == "first" else boxes[-1]


def last_boxed_or_text(value: str) -> str:
    """The gold answer inside a reference solution: its last box when it has one, else the
    part after a GSM8K-style ``####`` marker, else the text itself (stripped)."""
    boxes = [b for b in find_boxes(value) if b is not None]
    if boxes:
        return boxes[-1]
    if "####" in value:
        return value.rsplit("####", 1)[1].strip()
    return value.strip()
