"""The one answer finder: which part of a model's text is its final answer.

Every path that grades a text (``verify`` on a whole solution, the ``binary`` and
``interleaved`` reward presets, the CLI and ``/score``) calls :func:`find_answer`, so one text
has one answer everywhere. The rules (docs/scorer.md, "Which answer counts"):

1. Only text the model wrote and a reader sees: tool output (:func:`mask_tool_output`),
   hidden and struck-out content (:func:`mask_hidden`) and invisible characters are removed.
2. Only the answer region (:func:`answer_region`): after the last ``</think>``, never inside a
   reopened or unclosed ``<think>``.
3. Boxes: consecutive boxes joined by *and* or commas are one ordered answer (a ``seq``);
   joined by *or*, or glued with nothing between, they are a hedge, unless they state one
   value (:func:`one_value`: the same text, or one exact number in several forms). ``binary``
   and the library take the last run, ``interleaved`` the first. Every distinct box of the
   region is a candidate: more different candidates than the gold has parts is a hedge
   (:func:`scorer.equivalence.hedged`).
4. No box: with ``fallback``, the last final-answer phrase ("the answer is X", "Final answer:
   X"), else the last standalone math expression or number of the text; never one whose
   sentence negates or hedges it ("the answer is not 37", "maybe $37$").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Literal

from scorer.exact import NotRational, TooBig, exact_value
from scorer.extract import (
    Box,
    answer_region,
    drop_invisible,
    mask_hidden,
    mask_tool_output,
)
from scorer.nodes import Expr
from scorer.normalize import (
    DOUBT,
    answer_from_segment,
    answer_span,
    comparison_key,
    fix_double_escapes,
    literal_newlines,
    looks_like_sentence,
    name_sets_in_words,
    normalize_answer,
    restore_lost_escapes,
    stated_boxes,
    stated_values,
    takes_back,
)
from scorer.parse import SEQ_SEP, ParseError, parse_answer

Source = Literal["box", "phrase", "expression", "none"]

CACHE_MAX_CHARS = 2_000  # longer texts are not cached (bounded cache memory)


@dataclass(frozen=True)
class Found:
    """What :func:`find_answer` found.

    ``answer`` is the text to compare (``None``: no answer); ``hedge`` says why the text
    offers several answers (then ``answer`` is ``None``); ``candidates`` are the distinct boxes
    of the answer region (normalized), for :func:`scorer.equivalence.hedged`.
    """

    answer: str | None
    source: Source
    hedge: str | None = None
    candidates: tuple[str, ...] = ()

    def shown(self) -> str | None:
        """The answer as a row shows it (``2, 3`` for the run ``\\boxed{2} and \\boxed{3}``)."""
        return None if self.answer is None else self.answer.replace(f" {SEQ_SEP} ", ", ")

    def as_pred(self) -> str | None:
        """The answer in the form ``verify`` reads back to the same answer: a run of boxes
        is written as boxes joined by *and* (one ordered answer again), a box holding prose
        stays boxed (a box's words are never reduced to one of its numbers); any other box's
        content is passed as it is."""
        if self.answer is None:
            return None
        parts = self.answer.split(f" {SEQ_SEP} ")
        if self.source != "box" or (len(parts) == 1 and not looks_like_sentence(self.answer)):
            return self.answer
        return " and ".join(f"\\boxed{{{part}}}" for part in parts)


def prepare_text(text: str) -> str:
    """What the model wrote and a reader sees: tool output, hidden and struck-out content
    and invisible characters removed, double escapes and literal ``\\n`` repaired."""
    text = restore_lost_escapes(drop_invisible(text))
    return literal_newlines(fix_double_escapes(mask_hidden(mask_tool_output(text))))


def find_answer(
    text: str, *, first: bool = False, fallback: bool = True, gold: bool = False
) -> Found:
    """The final answer of ``text`` under the rules of the module docstring.

    ``first`` takes the first run of boxes (the ``interleaved`` preset) instead of the last;
    ``fallback`` allows an answer without a box; ``gold`` reads a reference answer (its
    unclosed box reads to the end, several boxes are a plain list, nothing is a hedge).
    """
    if len(text) <= CACHE_MAX_CHARS:
        return _find_cached(text, first, fallback, gold)
    return _find(text, first, fallback, gold)


def _find(text: str, first: bool, fallback: bool, gold: bool) -> Found:
    region = answer_region(prepare_text(text))
    boxes = stated_boxes(region)
    if boxes:
        return _from_boxes(region, boxes, first=first, gold=gold)
    if gold:
        return _gold_without_box(region)
    if not fallback:
        return Found(None, "none")
    return _without_box(region)


def _gold_without_box(region: str) -> Found:
    """A reference answer without a box: after its last final-answer phrase, else its last
    math segment or number when it is prose, else the text itself. A gold is trusted: no
    doubt or length rule applies (those guard against what a model writes)."""
    phrases = list(_ANSWER_PHRASE.finditer(region))
    if phrases:
        seg = region[phrases[-1].end() :]
        end = _PHRASE_END.search(seg)
        seg = seg[: end.start()] if end is not None and end.start() > 0 else seg
        seg = seg.strip().strip('"').replace('\\"', "")
        if seg:
            return Found(answer_from_segment(seg), "phrase")
    answer = answer_from_segment(region)
    return Found(answer, "expression") if answer.strip() else Found(None, "none")


_find_cached = lru_cache(maxsize=8192)(_find)


# --- boxes -----------------------------------------------------------------------------------

_JOIN_STRIP = re.compile(
    r"\\(?:text|textbf|mathrm|mbox|textnormal)\s*\{([^{}]*)\}|\\q?quad|\\[,;:! ]|\\\(|\\\)|"
    r"\\\[|\\\]|\$|\*\*|[\s,;.]"
)
_OR = re.compile(r"(?i)(?<![a-z])or(?![a-z])")
_AND_WORD = re.compile(r"(?i)(?<![a-z])and(?![a-z])")

Join = Literal["and", "or", "glued", "apart"]


def box_join(between: str) -> Join:
    """How two boxes separated by ``between`` relate: one answer in two parts (*and*, a
    comma: ``\\boxed{1} \\text{ for (a) and } \\boxed{2}``), a hedge (*or* anywhere between
    them; nothing but spacing or symbols), or two separate statements (other prose)."""
    if len(between) > 40:
        return "apart"
    if _OR.search(between):
        return "or"
    if _AND_WORD.search(between):
        return "and"
    rest = _JOIN_STRIP.sub(lambda m: m.group(1) or "", between)
    if re.search(r"[A-Za-z]", rest):
        return "apart"
    return "and" if re.search(r"[,;]", between) else "glued"


def _from_boxes(region: str, boxes: list[Box], *, first: bool, gold: bool) -> Found:
    if boxes[-1].unclosed and not gold:
        # A cut-off box is no answer, and it makes no earlier box the answer either.
        return Found(None, "none")
    if len(boxes) > MAX_BOXES and not gold:
        return Found(None, "box", hedge=f"{len(boxes)} boxes")
    runs: list[list[Box]] = [[boxes[0]]]
    joins: list[list[Join]] = [[]]
    for prev, box in zip(boxes, boxes[1:], strict=False):
        join = box_join(region[prev.end : box.start])
        if join == "apart":
            runs.append([box])
            joins.append([])
        else:
            runs[-1].append(box)
            joins[-1].append(join)
    k = 0 if first else -1
    run, run_joins = runs[k], joins[k]
    contents = [b.content or "" for b in run]
    if gold:
        return Found(", ".join(contents), "box")
    keys = {comparison_key(normalize_answer(b.content or "")) for b in boxes}
    bad = next((join for join in run_joins if join != "and"), None)
    if bad is not None and one_value(contents):
        contents = contents[:1]  # one value written twice (``\\boxed{7}\\quad\\boxed{7}``)
    elif bad is not None:
        return Found(None, "box", hedge=f"boxes joined by {bad}")
    if any(_BOX_INSIDE.search(c) for c in contents):
        return Found(None, "box", hedge="a box inside a box")
    contents = [_stated_in_box(c) for c in contents]
    if any(c is None for c in contents):
        return Found(None, "none")
    candidates = tuple(sorted(k for k in keys if k))
    stated = [c for c in contents if c is not None]
    if not any(c.strip() for c in stated):
        return Found(None, "none", candidates=candidates)
    return Found(f" {SEQ_SEP} ".join(stated), "box", candidates=candidates)


def one_value(contents: list[str]) -> bool:
    """Boxes that state one value: the same text, or the same exact number in several forms
    (``\\boxed{15\\frac{39}{40}}, or \\boxed{\\frac{639}{40}}``). Offering one value twice is
    no hedge; any other difference between boxes joined by *or* is."""
    norms = [normalize_answer(c) for c in contents]
    if len({comparison_key(n) for n in norms}) == 1:
        return True
    values = {exact_number(c) for c in contents}
    return None not in values and len(values) == 1


def exact_number(text: str) -> Fraction | None:
    """The exact value of ``text`` when it is one number written with integers, fractions,
    decimals, powers, factorials... (``(7!/(3!4!))\\cdot 2`` is 70); ``None`` otherwise."""
    try:
        ans = parse_answer(normalize_answer(text))
        if not isinstance(ans, Expr):
            return None
        return exact_value(ans.node)
    except (ParseError, NotRational, TooBig, ZeroDivisionError, OverflowError, ValueError):
        return None
    except RecursionError:
        return None


def _stated_in_box(content: str) -> str | None:
    """What a box states: its content, or for prose in a box the value the prose states by
    the rules of a text without a box (``\\text{The total is } 37`` states 37; ``\\text{the
    answer is not } 37`` states nothing)."""
    if not looks_like_sentence(content):
        return content
    if several_values(content):
        return None  # ``\\text{40 for the 3 rows}`` states no one value
    return _without_box(content).answer


MAX_BOXES = 64  # more boxes in the answer region is no answer but a spray (a hedge)
_BOX_INSIDE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


# --- no box: final-answer phrases, then the last math expression -----------------------------

_ANSWER_PHRASE = re.compile(
    r"(?i)(?:final\s+answer(?:[\s*]*(?:is|:))?|(?<![a-z])(?:the|my|our)\s+"
    r"(?:answer|(?:correct|right)\s+(?:answer(?:\s+choice)?|option|choice))\s+(?:is|=)"
    r"|(?<![a-z])answer\s*:|(?m:^[ \t]*\#{1,3}[ \t]*answer[ \t]*$)|\#\#\#\#)[\s*:]*"
    r"|(?m-i:^[ \t]*A:[ \t]*)"  # GSM8K samples: "A: 18"; PRM800K: "# Answer"; "#### 72"
)
_PHRASE_END = re.compile(r"(?i)I hope|\n\s*\n|<\|im_|\.(?=\s|$)")
_BARE_WORDS = frozenset({"yes", "no", "true", "false", "none", "never"})
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")


def _without_box(region: str) -> Found:
    phrases = list(_ANSWER_PHRASE.finditer(region))
    phrase = phrases[-1] if phrases else None
    if phrase is not None:
        seg = region[phrase.end() :]
        end = _PHRASE_END.search(seg)
        if end is not None and end.start() > 0:
            seg = seg[: end.start()]
        after = phrase.end() + len(seg)
        seg = seg.strip().strip('"').replace('\\"', "")
        bare_word = seg.lower().strip(" .!") in _BARE_WORDS
        doubt = DOUBT.search(seg) or DOUBT.search(_sentence_before(region, phrase.start()))
        if not seg or (doubt and not bare_word) or seg.rstrip().endswith("?"):
            return Found(None, "none")
        answer = answer_from_segment(seg)
        if not answer.strip():
            return Found(None, "none")
        if several_values(seg):
            return Found(None, "phrase", hedge="several values after the final-answer phrase")
        if _computes_another_value(answer, region[after:]):
            return Found(None, "phrase", hedge="a different value computed after the answer")
        return Found(answer, "phrase")
    answer, start, end = answer_span(region)
    if not answer.strip() or region.rstrip().endswith("?"):
        return Found(None, "none")
    if (start, end) == (0, len(region)) and not _text_answer(answer):
        return Found(None, "none")
    if (start, end) == (0, len(region)) and not _YES_NO.match(answer) and takes_back(answer):
        if name_sets_in_words(answer) == answer:
            return Found(None, "none")  # ``37 \\text{ is wrong}``: the text takes it back
    if _doubted(region, start, end):
        return Found(None, "none")
    return Found(answer, "expression")


_NAME = re.compile(r"[A-Za-z]+(?:_\{?\w+\}?)?(?:\([A-Za-z, ]*\))?|\\(?:overline|angle)\{?[A-Z]+\}?")


def several_values(prose: str) -> bool:
    """Whether ``prose`` states more than one different value (``12 apples in 3 baskets``;
    ``x = 5`` and ``5`` are one value, and so are ``18`` and ``18.00``): then it states no
    answer, rather than its last number."""
    keys = set()
    for body in stated_values(prose):
        if _NAME.fullmatch(normalize_answer(body)):
            continue  # ``The largest $n$ is 34``: a name, not a value
        last = body.rsplit("=", 1)[-1]
        value = exact_number(last)
        keys.add(value if value is not None else comparison_key(normalize_answer(last)))
    return len(keys) > 1


def _computes_another_value(answer: str, rest: str) -> bool:
    """Whether the text after a final-answer phrase goes on to compute a different number:
    ``the final answer is (7!/(3!4!))(4!/(2!2!))`` (210), then ``... = 70``. Two values are
    offered, a hedge; a check that arrives at the same value (``5 \\cdot 3 = 15``) is none."""
    if "=" not in rest:
        return False
    later, _start, _end = answer_span(rest.strip())
    if "=" not in later:
        return False
    stated = exact_number(answer.rsplit("=", 1)[-1])
    computed = exact_number(later.rsplit("=", 1)[-1])
    return stated is not None and computed is not None and stated != computed


MAX_TEXT_ANSWER_WORDS = 4
_MATHY = re.compile(r"[\d=+^\\<>]")
_YES_NO = re.compile(r"(?i)\s*(?:\\text\s*\{\s*)?(?:yes|no)(?![a-z])")


def _text_answer(text: str) -> bool:
    """Whether a text with no math in it can be an answer as a whole: a formula, a short
    phrase (``East``, ``\\text{even}``), or *yes* / *no* with its reason. A longer sentence
    without a number (``Two plus eight makes ten.``) states no answer."""
    if not looks_like_sentence(text) or _YES_NO.match(text) or _MATHY.search(text):
        return True
    if name_sets_in_words(text) != text:  # "there are no real solutions"
        return True
    return len(text.split()) <= MAX_TEXT_ANSWER_WORDS


# Where the clause that states a value starts: the value follows one of these.
_CLAUSE_START = re.compile(
    r"(?i)[,;:=]|(?<![a-z])(?:is|are|was|be|it's|equals?|gives?|get|obtain|which|that|so|thus|"
    r"hence|therefore)(?![a-z])"
)


def _sentence_before(text: str, pos: int) -> str:
    """The part of the sentence holding ``pos`` that comes before it (``Maybe`` of ``Maybe
    the answer is 37``)."""
    left = 0
    for m in _SENTENCE_END.finditer(text, max(0, pos - 300), pos):
        left = m.end()
    return text[max(left, pos - 300) : pos]


def _doubted(text: str, start: int, end: int) -> bool:
    """Whether the value at ``text[start:end]`` is negated or hedged: a doubt word between it
    and the start of its clause (``is not $37$``, ``5, not 37``, ``maybe 37``), or anywhere
    after it in its sentence (``$37$ is wrong``, ``37, or maybe 36``)."""
    left = 0
    for m in _SENTENCE_END.finditer(text, 0, start):
        left = m.end()
    for m in _CLAUSE_START.finditer(text, left, start):
        left = m.end()
    m = _SENTENCE_END.search(text, end)
    right = len(text) if m is None else m.start()
    return bool(DOUBT.search(text[left:start]) or DOUBT.search(text[end:right]))
