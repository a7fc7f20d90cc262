"""String-level normalization of answers, as explicit named steps.

Two entry points:

* :func:`extract_final_answer` — the library's answer of a sentence or solution, as
  :func:`scorer.answer.find_answer` finds it (the one answer finder of every path); the prose
  helpers it relies on (:func:`answer_span`, :func:`looks_like_sentence`, :func:`takes_back`,
  :func:`stated_boxes`) live here.
* :func:`normalize_answer` — the pipeline in :data:`STEPS`; every step is a small pure function
  so the documentation can list them and tests can target them one by one.

Everything here is linear-time regex / scanning work: it runs in the calling process, before
any size-capped parsing, and must never hang.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

from scorer.extract import (
    Box,
    matching_brace,
    scan_boxes,
    splice,
    unwrap_box,
)

# --------------------------------------------------------------------------------------------
# helpers


def match_brace(s: str, open_pos: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``open_pos`` (``len(s)`` when unclosed)."""
    close = matching_brace(s, open_pos)
    return len(s) if close is None else close


def replace_command(s: str, names: tuple[str, ...], fn: Callable[[str], str]) -> str:
    """Replace every ``\\name{arg}`` (brace-matched, nested ok) by ``fn(arg)``."""
    pattern = re.compile(r"\\(" + "|".join(names) + r")(?![A-Za-z])\s*\{")

    def edit(m: re.Match[str]) -> tuple[str, int]:
        open_pos = m.end() - 1
        close = match_brace(s, open_pos)
        return fn(s[open_pos + 1 : close]), close + 1

    return splice(s, pattern, edit)


# --------------------------------------------------------------------------------------------
# light final-answer extraction

_KNOWN_COMMANDS = (
    "frac|dfrac|tfrac|cfrac|boxed|fbox|sqrt|left|right|text|textbf|mathrm|mathbf|begin|end|pi|"
    "cdot|times|infty|leq?|geq?|neq?|pm|mp|circ|in|cup|cap|quad|qquad|sin|cos|tan|log|ln|exp|"
    "approx|lt|gt|alpha|beta|theta|sec|csc|cot|binom|dbinom|ldots|cdots|dots|overline|angle|"
    "textnormal|mbox|operatorname|mathit|emptyset|varnothing|displaystyle|%|\\$"
)
_DOUBLE_ESCAPED = re.compile(r"(?<!\\)\\\\(?=(?:" + _KNOWN_COMMANDS + r")(?![A-Za-z]))")


def fix_double_escapes(s: str) -> str:
    """``\\\\frac`` -> ``\\frac`` when the text was escaped twice (JSON-in-JSON, repr dumps).

    Only commands we know are rewritten, so a genuine matrix row break ``\\\\`` followed by a
    letter survives; once a string is recognised as double-escaped, ``\\\\\\\\`` becomes ``\\\\``.
    """
    if not _DOUBLE_ESCAPED.search(s):
        return s
    s = _DOUBLE_ESCAPED.sub(r"\\", s)
    s = s.replace("\\\\\\\\", "\\\\")
    s = s.replace("\\\\{", "\\{").replace("\\\\}", "\\}")
    return s


def literal_newlines(s: str) -> str:
    """A literal backslash-n that is not a command (``\\n\\boxed``) -> a newline."""
    return re.sub(r"\\n(?![A-Za-z])", "\n", s)


def answer_boxes(s: str) -> list[Box]:
    """The boxes of ``s`` with an argument (a bare ``\\boxed`` is no box here)."""
    return [b for b in scan_boxes(s) if b.content is not None]


_BRACE_EVENT = re.compile(r"\\.|[{}]", re.DOTALL)
_SPACES_AND_CLOSES = re.compile(r"[ }]*")
_BOLD_GROUP = re.compile(r"\\(?:textbf|mathbf|bm|boldsymbol|mathrm|displaystyle)\s*$")


def stated_boxes(s: str) -> list[Box]:
    """The boxes that state an answer: not nested in a group (``\\text{\\boxed{37}} 5``, a
    box inside a box's content) other than bold / upright formatting, and not an operand of
    the text around it (``5\\boxed{37}``, ``\\boxed{37} 5``)."""
    boxes = answer_boxes(s)
    if not boxes:
        return boxes
    top: set[int] = set()
    hiding = 0  # open groups that are not bold / upright formatting
    stack: list[bool] = []
    pending = [b.start for b in reversed(boxes)]
    for m in _BRACE_EVENT.finditer(s):
        while pending and pending[-1] <= m.start():
            if hiding == 0:
                top.add(pending[-1])
            pending.pop()
        c = m.group(0)
        if c == "{":
            hides = _BOLD_GROUP.search(s, max(0, m.start() - 20), m.start()) is None
            stack.append(hides)
            hiding += hides
        elif c == "}" and stack:
            hiding -= stack.pop()
    if hiding == 0:
        top.update(pending)
    out = []
    for b in boxes:
        if b.start not in top:
            continue
        before = s[b.start - 1 : b.start]
        resume = _SPACES_AND_CLOSES.match(s, b.end).end()  # no copy of the rest per box
        after = s[resume : resume + 1]
        if before.isdigit() or before in (")", "]"):
            continue
        if after.isdigit() and not _TEXT_CHOICE.fullmatch(b.content or ""):
            continue  # a choice in text (``\\boxed{\\text{(B)}} 3x = 7``) is no factor
        out.append(b)
    return out


_TEXT_CHOICE = re.compile(r"\s*\\(?:text|textbf|textrm|mathrm)\s*\{\s*\(\s*[A-Z]\s*\)\s*\}\s*")


_OPENERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))


def math_segments(s: str) -> list[tuple[int, int, str]]:
    """``$$..$$``, ``\\[..\\]``, ``\\(..\\)``, ``$..$`` as (start, end, body); linear time.

    An escaped ``\\$`` never opens or closes a segment. Once a closer is missing after some
    position it is missing after every later one, which keeps the scan linear.
    """
    out: list[tuple[int, int, str]] = []
    missing: dict[str, int] = {}
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c not in "$\\":
            i += 1
            continue
        for opener, closer in _OPENERS:
            if not s.startswith(opener, i):
                continue
            if opener == "$" and i > 0 and s[i - 1] == "\\":
                break
            if missing.get(closer, n + 1) <= i:
                continue
            j = _find_closer(s, closer, i + len(opener))
            if j < 0:
                missing[closer] = i
                continue
            body = s[i + len(opener) : j]
            if body.strip():
                out.append((i, j + len(closer), body))
            i = j + len(closer) - 1
            break
        i += 1
    return out


def _find_closer(s: str, closer: str, start: int) -> int:
    j = s.find(closer, start)
    while j > 0 and closer[0] == "$" and s[j - 1] == "\\":
        j = s.find(closer, j + 1)
    return j


_SEG_PERCENT = re.compile(r"\s*(?:\\?%|percent(?:age)?|pct)(?![A-Za-z])", re.IGNORECASE)
_NUMBER_IN_TEXT = re.compile(
    r"(?<![A-Za-z\d.,])-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?|\.\d+)"
    r"(?:\s*/\s*\d+)?(?:\s*(?:\\?%|percent|pct))?"
)
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{4,}")


def _math_and_number_candidates(s: str) -> list[tuple[int, int, str]]:
    """Math segments (joined when linked by and/or/commas) and bare numbers outside math."""
    cands: list[tuple[int, int, str]] = []
    masked = list(s)
    for seg_start, seg_end, body in math_segments(s):
        end = seg_end
        pm = _SEG_PERCENT.match(s, end)
        if pm:
            body += "\\%"
            end = pm.end()
        gap = s[cands[-1][1] : seg_start] if cands else None
        if gap is not None and len(gap) < 12 and re.fullmatch(r" *,? *(?:and|or)? *,? *", gap):
            cands[-1] = (cands[-1][0], end, cands[-1][2] + ", " + body)
        else:
            cands.append((seg_start, end, body))
        for i in range(seg_start, seg_end):
            masked[i] = " "
    if not cands or looks_like_sentence(s):
        text = "".join(masked)
        chunks = _formula_chunks(text)
        starts = [c[0] for c in chunks]
        for m in _NUMBER_IN_TEXT.finditer(text):
            if not _in_formula(text, m.start(), m.end()):
                cands.append((m.start(), m.end(), m.group(0)))
                continue
            k = bisect.bisect_right(starts, m.start()) - 1
            start, end = chunks[k] if k >= 0 and chunks[k][1] >= m.end() else m.span()
            start, end = min(start, m.start()), max(end, m.end())
            body = text[start:end].rstrip(".,;:!?")
            if body.startswith("(") and body.count("(") > body.count(")"):
                body = body[1:]
            if body.endswith(")") and body.count(")") > body.count("("):
                body = body[:-1]
            cands.append((start, end, body if m.group(0) in body else m.group(0)))
    cands.sort()
    return _join_listed(s, cands)


_LIST_GAP = re.compile(r" *,? *(?:and|or)? *,? *")


def _join_listed(s: str, cands: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Candidates linked only by *and* / *or* / commas are one list answer (``1 and 2 and 3``
    is not 3); linked by spaces only, one answer (``2 1/2``)."""
    out: list[tuple[int, int, str]] = []
    for c in cands:
        if out and c[0] < out[-1][1]:
            continue  # a second number of the same formula
        gap = s[out[-1][1] : c[0]] if out else None
        if gap is not None and len(gap) < 12 and _LIST_GAP.fullmatch(gap):
            sep = " " if not gap.strip() and gap else ", "
            out[-1] = (out[-1][0], c[1], out[-1][2] + sep + c[2])
        else:
            out.append(c)
    return out


def _in_formula(text: str, start: int, end: int) -> bool:
    """Whether the number at ``text[start:end]`` is an operand: an operator next to it (across
    spaces), as in ``f(x)=0`` or ``2x + 3``."""
    i = start - 1
    while i >= 0 and i > start - 20 and text[i] == " ":
        i -= 1
    j = end
    while j < len(text) and j < end + 20 and text[j] == " ":
        j += 1
    return (i >= 0 and text[i] in _JOIN_OPS) or (j < len(text) and text[j] in _JOIN_OPS)


_PIECE = re.compile(r"\S+")
_PROSE_PIECE = re.compile(r"[A-Za-z'][A-Za-z']+[.,;:!?]*")
_JOIN_OPS = "=+-*/^<>"


def _formula_chunks(text: str) -> list[tuple[int, int]]:
    """Spans of the formulas in a prose text: whitespace-separated pieces glued by an operator
    at their boundary (``x = 2y + 3``), never through a prose word. A number found in prose is
    read as the formula it belongs to, so ``y = 2x + 3 for all x`` is not reduced to ``3``."""
    chunks: list[tuple[int, int]] = []
    prev = ""
    for m in _PIECE.finditer(text):
        piece = m.group(0)
        prose = _PROSE_PIECE.fullmatch(piece) is not None
        glued = (
            chunks
            and not prose
            and prev
            and (prev[-1] in _JOIN_OPS or piece[0] in _JOIN_OPS.replace("-", ""))
        )
        if glued:
            chunks[-1] = (chunks[-1][0], m.end())
        else:
            chunks.append(m.span())
        prev = "" if prose else piece
    return chunks


_NOT_PROSE = frozenset(
    """percent percentage dollars dollar cents units unit square cubic meters metres feet inches
    miles hours minutes seconds degrees weeks years months days yuan euros grams pounds liters
    litres text textbf mathrm frac sqrt infty quad boxed hundred thousand million billion
    trillion""".split()
)


_TEXT_MODE_NAMES = ("text", "textnormal", "textrm", "textsf", "textup", "mbox", "hbox", "textit")
_LATEX_NAMES = re.compile(r"\\(?:begin|end)\s*\{[^{}]*\}|\\[A-Za-z]+")
_LETTER_RUN = re.compile(r"(?<![\\A-Za-z])[A-Za-z][A-Za-z']*")
_GLUE = frozenset("0123456789+-*/^_=<>()[]{}|!\\")  # a letter run touching one is algebra
_OPS_LEFT = frozenset("+-*/^=<>")
_OPS_RIGHT = frozenset("+*/^=<>")  # not "-": "is -5" is prose


def _prose_words(s: str) -> list[str]:
    """Letter runs that read as words, not as products of variables: a run glued to a digit,
    operator or bracket (``3(ax+by)``, ``2ax``) or next to an operator across spaces
    (``ax + by``) is algebra."""
    words = []
    n = len(s)
    for m in _LETTER_RUN.finditer(s):
        i, j = m.start(), m.end()
        if (i > 0 and s[i - 1] in _GLUE) or (j < n and s[j] in _GLUE):
            continue
        if _neighbour(s, i - 1, -1) in _OPS_LEFT or _neighbour(s, j, 1) in _OPS_RIGHT:
            continue
        words.append(m.group(0))
    return words


def _neighbour(s: str, i: int, step: int) -> str:
    """The first non-space character from ``i`` in direction ``step`` (a bounded look)."""
    for _ in range(20):
        if not 0 <= i < len(s):
            return ""
        if not s[i].isspace():
            return s[i]
        i += step
    return ""


def takes_back(s: str) -> bool:
    """Whether the words of an answer (in ``\\text{}`` or plain prose, not algebra) negate or
    hedge its value: ``37 \\text{ is wrong}``, ``37, probably``. *or* between items is a list,
    not a doubt (``x < -1 or x > 1``)."""
    t = replace_command(s, _TEXT_MODE, lambda a: " " + a + " ")
    t = _LATEX_NAMES.sub(" ", t).replace("'", "")
    words = {w.lower() for w in _prose_words(t)} - {"or"}
    return (
        bool(words & DOUBT_WORDS)
        or "nt" in words
        or any(w.endswith("nt") and w[:-2] in _NT_STEMS for w in words)
    )


_NT_STEMS = frozenset("is was were do does did can could would should has have had are ai".split())


def looks_like_sentence(s: str) -> bool:
    """Prose around the answer: a real word of 4+ letters, or two lowercase words, not units.

    Words inside ``\\text{}`` count (``\\text{The answer is } 5``), but a product of
    single-letter variables never does (``ab+cd+2`` is algebra, not a sentence ending in 2).
    """
    s = replace_command(s, _TEXT_MODE, lambda a: " " + a + " ")
    s = _LATEX_NAMES.sub(" ", s)
    words = [w for w in _prose_words(s) if w.lower() not in _NOT_PROSE | UNIT_WORDS]
    if any(len(w) >= 4 for w in words):
        return True
    lower = [w for w in words if w in _SHORT_WORDS]
    return len(lower) >= 2


# Words of 2-3 letters that count as prose; any other short run (``ab cd``) may be a product.
_SHORT_WORDS = frozenset(
    """is it the of so we to be an as at in on if no not for all any are was has had get
    got can its one two six ten our you but yes let use see say may out how why who now per via
    than then thus she he his her they them do does did set put sum add try end way new old
    also both each from into only over such that this when with what which will have been were
    give gives find show here there true false""".split()
)


_STARTS_WITH_TEXT = re.compile(r"\s*\\(?:" + "|".join(_TEXT_MODE_NAMES) + r")\s*\{")


def _math_mode(s: str) -> bool:
    """LaTeX written without delimiters whose only words are inside ``\\text{}`` and come after
    the math: a formula with annotations (``f(x)=0 \\text{ for all } x``, a ``cases``
    environment with ``\\text{otherwise}``), never reduced to one of its numbers.
    ``\\text{The answer is } 5`` starts with its words: that is a sentence."""
    if "\\" not in s or math_segments(s):
        return False
    if _STARTS_WITH_TEXT.match(s) and "\\begin" not in s:
        return False
    return not looks_like_sentence(replace_command(s, _TEXT_MODE, lambda a: " "))


def extract_final_answer(text: str, *, gold: bool = False) -> str:
    """Reduce a sentence/solution to its final answer; a bare answer is returned unchanged.

    The library's policy of the one answer finder (:func:`scorer.answer.find_answer`: last run
    of boxes, else a final-answer phrase, else the last math expression): ``""`` when it finds
    no answer or a hedge; the parts of a run of boxes joined by ``, ``.
    """
    from scorer.answer import find_answer

    return find_answer(text, gold=gold).shown() or ""


def stated_values(s: str) -> list[str]:
    """Every value a prose text states: its math segments and numbers, each read as the
    formula it belongs to (linked by *and* / commas: one list); ``[s]`` when it is not prose.
    Several different ones in a final-answer phrase or a box's prose are no single answer."""
    if not (math_segments(s) or looks_like_sentence(s)) or _math_mode(s):
        return [s]
    return [body for _start, _end, body in _math_and_number_candidates(s)] or [s]


def answer_from_segment(s: str) -> str:
    """The answer a text without a box states (see :func:`answer_span`)."""
    return answer_span(s)[0]


def answer_span(s: str) -> tuple[str, int, int]:
    """The answer a text without a box states, with its start and end in ``s``: the text
    itself when it is not prose, else its last math segment or number (read as the formula
    it belongs to)."""
    whole = (s, 0, len(s))
    if not (math_segments(s) or looks_like_sentence(s)) or _math_mode(s):
        return whole
    if s.rstrip().endswith("?"):
        return whole  # a question (a restated problem) is not an answer
    cands = _math_and_number_candidates(s)
    if not cands:
        return whole
    start, end, body = cands[-1]
    return body, start, end


# --------------------------------------------------------------------------------------------
# normalization steps


def strip_outer_delimiters(s: str) -> str:
    """Remove ``$..$``, ``$$..$$``, ``\\(..\\)``, ``\\[..\\]`` and markdown bold around it."""
    prev = None
    while prev != s:
        prev = s
        s = s.strip()
        for a, b in (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"), ("**", "**")):
            if len(s) >= len(a) + len(b) and s.startswith(a) and s.endswith(b):
                inner = s[len(a) : len(s) - len(b)]
                if a == "$" and inner.endswith("\\"):
                    continue
                s = inner
    return s


def unwrap_boxed(s: str) -> str:
    """``\\boxed{X}`` covering the whole answer -> ``X`` (nested boxes too)."""
    return unwrap_box(s)


_UNICODE = {
    "\u2212": "-",
    "\u2013": "-",
    "\u00d7": "\\times ",
    "\u22c5": "\\cdot ",
    "\u00b7": "\\cdot ",
    "\u00f7": "\\div ",
    "\u2264": "\\leq ",
    "\u2265": "\\geq ",
    "\u2260": "\\neq ",
    "\u00b1": "\\pm ",
    "\u221e": "\\infty ",
    "\u03c0": "\\pi ",
    "\u221a": "\\sqrt ",
    "\u00b0": "^\\circ ",
    "\u00b2": "^2",
    "\u00b3": "^3",
    "\u2208": "\\in ",
    "\u222a": "\\cup ",
    "\u2229": "\\cap ",
    "\u2205": "\\emptyset ",
    "\u00a0": " ",
    "\u2009": " ",
    "\u202f": " ",
    "\u2248": "\\approx ",
    "\u20ac": "",
    "\u00a3": "",
    "\u00a5": "",
    "\u2026": "\\ldots ",
    "\t": " ",
    "\n": " ",
    "\r": " ",
    "\u2705": " ",
}
_UNICODE_RE = re.compile("|".join(re.escape(k) for k in _UNICODE))


# Full-width forms (U+FF01..U+FF5E: ``；`` ``，`` ``（`` ``１``) are ASCII shifted by 0xFEE0.
_FULL_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)} | {
    0x3000: " ",
    0x3001: ",",
    0x3002: ".",
}


def replace_unicode(s: str) -> str:
    """Unicode math symbols -> LaTeX (``×``, ``≤``, ``π``, ``√``, ``°``, ``²``...); full-width
    punctuation and digits (``；``, ``，``, ``（``, ``１``) -> ASCII."""
    s = s.translate(_FULL_WIDTH)
    return _UNICODE_RE.sub(lambda m: _UNICODE[m.group(0)], s)


_DISPLAY = re.compile(
    r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|Biggl|Biggr|big|Big|bigg|Bigg)"
    r"(?![A-Za-z])\s*\.?|\\displaystyle|\\limits|\\nolimits|\\mathstrut|\\,\\!|\\!\\,"
)


def drop_display_commands(s: str) -> str:
    """``\\left(`` -> ``(``, ``\\right.`` -> nothing, ``\\displaystyle`` -> nothing."""
    # keep "\left\{": drop the sizing word only
    return _DISPLAY.sub("", s)


_CANON = [
    (re.compile(r"\\[dtc]frac(?![A-Za-z])"), r"\\frac"),
    (re.compile(r"\\[dt]binom(?![A-Za-z])"), r"\\binom"),
    (re.compile(r"\\(?:leqslant|leqq|le)(?![A-Za-z])"), r"\\leq"),
    (re.compile(r"\\(?:geqslant|geqq|ge)(?![A-Za-z])"), r"\\geq"),
    (re.compile(r"\\(?:ne|not=|not\s*=)(?![A-Za-z])"), r"\\neq"),
    (re.compile(r"\\lt(?![A-Za-z])"), "<"),
    (re.compile(r"\\gt(?![A-Za-z])"), ">"),
    (re.compile(r"<=|=<"), r"\\leq "),
    (re.compile(r">=|=>"), r"\\geq "),
    (re.compile(r"!="), r"\\neq "),
    (re.compile(r"==+"), "="),
    (re.compile(r"\\(?:lbrace)(?![A-Za-z])"), r"\\{"),
    (re.compile(r"\\(?:rbrace)(?![A-Za-z])"), r"\\}"),
    (re.compile(r"\\(?:lvert|rvert|vert|mid)(?![A-Za-z])"), "|"),
    (re.compile(r"\\(?:langle)(?![A-Za-z])"), "("),
    (re.compile(r"\\(?:rangle)(?![A-Za-z])"), ")"),
    (
        re.compile(r"\\(?:dots|cdots|ldots|dotsc|dotsb|dotsm|hdots)(?![A-Za-z])|\.\.\.+"),
        r"\\ldots ",
    ),
    (re.compile(r"\\(?:varnothing)(?![A-Za-z])"), r"\\emptyset"),
    (re.compile(r"\\(?:infin|infinity)(?![A-Za-z])"), r"\\infty"),
    (re.compile(r"\\(?:colon)(?![A-Za-z])"), ":"),
    (re.compile(r"\\(?:ast|star)(?![A-Za-z])"), "*"),
    (re.compile(r"\\(?:angle|measuredangle|triangle)(?![A-Za-z])"), " "),
    (re.compile(r"\\(?:varepsilon)(?![A-Za-z])"), r"\\epsilon"),
    (re.compile(r"\\(?:vartheta)(?![A-Za-z])"), r"\\theta"),
    (re.compile(r"\\(?:varphi)(?![A-Za-z])"), r"\\phi"),
    (re.compile(r"\\(?:tfrac|dfrac)(?![A-Za-z])"), r"\\frac"),
]


def canonical_commands(s: str) -> str:
    """One spelling per operator: ``\\dfrac`` -> ``\\frac``, ``\\le`` / ``<=`` -> ``\\leq``..."""
    for pat, rep in _CANON:
        s = pat.sub(rep, s)
    return s


_REPEATING = re.compile(
    r"(?<![\d.])(?P<int>\d{0,30})\.(?P<fixed>\d{0,30})\\(?:overline|dot|bar)\s*\{(?P<rep>\d{1,12})\}"
    r"|(?<![\d.])(?P<int2>\d{0,30})\.(?P<fixed2>\d{0,30})\((?P<rep2>\d{1,12})\)(?![\d(])"
)


_MULTIPLIERS = {"hundred": 2, "thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_MULTIPLIER_WORD = re.compile(
    r"(?<=\d)(?P<pre>\s*(?:\\[,;!: ]|~)?\s*)(?:\\(?:text|mathrm|mbox|textrm)\s*\{\s*"
    r"(?P<w1>hundred|thousand|million|billion|trillion)s?\s*\}"
    r"|(?P<w2>hundred|thousand|million|billion|trillion)s?(?![A-Za-z]))",
    re.IGNORECASE,
)


def expand_multiplier_words(s: str) -> str:
    """``37 \\text{ million}`` / ``3.7 billion`` -> ``37 \\times 10^{6}``: a multiplier word
    is part of the value, never a unit to drop (``37 million`` is not 37)."""
    if not re.search(r"(?i)hundred|thousand|illion", s):
        return s

    def repl(m: re.Match[str]) -> str:
        word = (m["w1"] or m["w2"]).lower()
        return f" \\times 10^{{{_MULTIPLIERS[word]}}}"

    return _MULTIPLIER_WORD.sub(repl, s)


def repeating_decimals(s: str) -> str:
    """``0.\\overline{3}`` / ``0.1\\overline{6}`` / ``0.(3)`` -> the exact fraction.

    ``\\overline`` is otherwise kept (a segment ``\\overline{AB}``, a conjugate): it is never
    dropped, so ``\\overline{37}`` is not 37.
    """
    if "." not in s:
        return s

    def repl(m: re.Match[str]) -> str:
        whole = m["int"] if m["rep"] is not None else m["int2"]
        fixed = (m["fixed"] if m["rep"] is not None else m["fixed2"]) or ""
        rep = m["rep"] or m["rep2"]
        num = int((whole or "0") + fixed + rep) - int((whole or "0") + fixed)
        den = (10 ** len(rep) - 1) * 10 ** len(fixed)
        return f"\\frac{{{num}}}{{{den}}}"

    return _REPEATING.sub(repl, s)


# --- recall steps (issue #29): each accepts one class of answers graders miss ----------------

# A backslash lost to a string escape: ``\\frac`` read as form feed + ``rac``, ``\\boxed`` as
# backspace + ``oxed``, ``\\times`` as tab + ``imes``...
_LOST_ESCAPES = re.compile(
    "\x0c(?=rac|orall)|\x08(?=oxed|inom|eta|ar|egin|ig)|\t(?=imes|ext|heta|an|au|frac|o)"
    "|\r(?=ight|ho|angle)|\x07(?=lpha|pprox|ngle)|\x0b(?=ec|arepsilon|arphi|dots)"
)
_ESCAPE_LETTER = {"\x0c": "f", "\x08": "b", "\t": "t", "\r": "r", "\x07": "a", "\x0b": "v"}


def restore_lost_escapes(s: str) -> str:
    """``\\x0crac{1}{2}`` -> ``\\frac{1}{2}``: a control character where a JSON or Python
    escape ate the backslash of a command (``\\f`` ``\\b`` ``\\t`` ``\\r`` ``\\a``
    ``\\v``), when the letters after it continue that command."""
    if not any(c in s for c in _ESCAPE_LETTER):
        return s
    return _LOST_ESCAPES.sub(lambda m: "\\" + _ESCAPE_LETTER[m.group(0)], s)


_ENUMERATORS = re.compile("[\u2460-\u249b\u2776-\u2793]")


def drop_unicode_enumerators(s: str) -> str:
    """``①3 ②5`` -> ``3, 5``: circled / parenthesized / dotted unicode numbers enumerate list
    items; each becomes a separator."""
    if not _ENUMERATORS.search(s):
        return s
    return _ENUMERATORS.sub(", ", s).strip(" ,")


_LABEL_ITEM = r"[A-Za-z](?:_\{?\w+\}?)?\s*:\s*[^,:;]*[\d\\][^,:;]*"
_LABEL_LIST = re.compile(rf"\s*{_LABEL_ITEM}(?:\s*[,;]\s*{_LABEL_ITEM})*\s*")


def colon_labels(s: str) -> str:
    """``a: 1, b: 2`` -> ``a = 1, b = 2``: a list of ``name: value`` items names each value,
    and is then matched label by label. Ratios (``1:2``, ``a:b``) and times are left alone:
    a label is a letter and its value holds a digit or a command."""
    if ":" not in s or len(s) > 1000 or not _LABEL_LIST.fullmatch(s):
        return s
    return re.sub(r"(?<![\w\\])([A-Za-z](?:_\{?\w+\}?)?)\s*:\s*", r"\1 = ", s)


_DMS = re.compile(
    r"(?<![\d.])(?P<d>\d+(?:\.\d+)?)\s*\^\\circ\s*(?P<m>\d+(?:\.\d+)?)\s*(?:'|\^\s*\{?\s*\\prime\s*\}?)"
    r"(?:\s*(?P<s>\d+(?:\.\d+)?)\s*(?:''|\"|\^\s*\{?\s*\\prime\s*\\prime\s*\}?))?"
)


def degrees_minutes_seconds(s: str) -> str:
    """``30^\\circ 15'`` / ``30^\\circ 15' 30''`` -> ``(30 + 15/60 + 30/3600)^\\circ``:
    minutes and seconds of arc are parts of the angle, never a separate number."""
    if "'" not in s and "prime" not in s and '"' not in s:
        return s

    def repl(m: re.Match[str]) -> str:
        sec = f" + \\frac{{{m['s']}}}{{3600}}" if m["s"] else ""
        return f"({m['d']} + \\frac{{{m['m']}}}{{60}}{sec})^\\circ "

    return _DMS.sub(repl, s)


_QUALIFIER = re.compile(
    r"\s*(?:[,;]\s*)?(?:\\text\s*\{\s*(?:for|where|when|if|with)\s*\}|\b(?:for|where|when|if)\b|"
    r"\\quad)\s*\(?\s*[A-Za-z](?:\s*,\s*[A-Za-z])*\s*(?:[<>]|\\(?:leq|geq|neq|in|notin)(?![A-Za-z]))"
    r"[^,;]*?\)?\s*\.?\s*$"
)
_INTEGER_PARAMETER = re.compile(
    r"\s*[,;]?\s*(?:\\text\s*\{\s*(?:where|for\s+(?:any|all|every|some))?\s*\}\s*)?"
    r"(?:\b(?:where|for\s+(?:any|all|every|some))\s+)?"
    r"(?:(?P<a>[kmnt])\s*\\in\s*\\mathbb\s*\{?\s*Z\s*\}?"
    r"|(?:\\text\s*\{\s*)?(?:integer\s+)?(?P<b>[kmnt])?\s*(?:\\text\s*\{\s*)?"
    r"(?:is\s+an?\s+)?(?:integer|any\s+integer)s?\s*(?P<c>[kmnt])?\s*\}?)\s*\.?\s*$"
)


def drop_domain_qualifier(s: str) -> str:
    """``2x \\text{ for } x > 0`` / ``x = k\\pi, k \\in \\mathbb{Z}`` / ``..., \\text{where }
    k \\text{ is an integer}`` -> the answer without the condition on its variable: a domain
    (or the integer range of a family's parameter) restates where the answer holds."""
    if len(s) > 1000:
        return s
    for pattern in (_INTEGER_PARAMETER, _QUALIFIER):
        m = pattern.search(s)
        if m is not None and m.start() > 0 and s[: m.start()].strip(" ,;"):
            s = s[: m.start()].rstrip(" ,;")
    return s


_FAMILY_PARAMETER = re.compile(r"(?<![A-Za-z\\])[kmn](?![A-Za-z])")


def rename_family_parameter(s: str) -> str:
    """``\\frac{\\pi}{2} + 2n\\pi`` -> ``\\frac{\\pi}{2} + 2k\\pi``: in an answer with
    ``\\pi`` whose only integer-like letter is one of k, m, n, that letter is the family's
    parameter; it is spelt ``k`` on both sides, so a renamed parameter still matches."""
    if "\\pi" not in s:
        return s
    letters = set(_FAMILY_PARAMETER.findall(s))
    if len(letters) != 1 or letters == {"k"}:
        return s
    return _FAMILY_PARAMETER.sub("k", s)


_INFINITELY_MANY = re.compile(
    r"(?i)\s*(?:there\s+are\s+)?(?:infinitely\s+many|an?\s+infinite\s+(?:number|amount))"
    r"(?:\s+(?:of\s+)?[a-z]+)?\s*\.?\s*"
)


def infinitely_many(s: str) -> str:
    """A whole answer "infinitely many (solutions)" -> ``\\infty``, so it matches a gold
    written ``\\infty`` (and the other way round)."""
    return "\\infty" if _INFINITELY_MANY.fullmatch(s) else s


_TEXT_MODE = _TEXT_MODE_NAMES
_MATH_MODE = (
    "textbf",
    "mathrm",
    "mathbf",
    "mathit",
    "mathsf",
    "mathtt",
    "mathnormal",
    "boldsymbol",
    "bm",
    "operatorname",
    "underline",
    "overrightarrow",
    "vec",
    "hat",
    "bar",
    "widehat",
    "widetilde",
    "tilde",
    "mathcal",
    "emph",
)


def unwrap_text_commands(s: str) -> str:
    """``\\text{ cm}`` -> `` cm ``, ``\\mathrm{E}`` -> ``E`` (content kept, command dropped).

    Text-mode content is padded with spaces so ``6\\text{and}8`` stays three words.
    """
    s = replace_command(s, _TEXT_MODE, lambda a: " " + a + " ")
    s = replace_command(s, _MATH_MODE, lambda a: a)
    return s


# Explicit digit-group separators: ``1{,}000``, ``1,\\!000``, ``1\\,000``; correct groups only.
_THOUSANDS_EXPLICIT = re.compile(
    r"(?<![\d.])([1-9]\d{0,2})((?:(?:\s*\{,\s*\}\s*|,\\!\s*|\\,)\d{3})+)(?!\d)"
)
_EXPLICIT_SEP = re.compile(r"\s*\{,\s*\}\s*|,\\!\s*|\\,")
_THOUSANDS_COMMA = re.compile(r"(?<![\d.,])(-?[1-9]\d{0,2})((?:,\d{3})+)(?![\d,])")
_THOUSANDS_SPACE = re.compile(
    r"(?P<int>-?[1-9]\d{0,2}(?: \d{3})+)(?P<dec>\.\d+)?"
    r"(?P<frac> (?P<num>\d+)/(?P<den>\d+)| ?\\frac\{(?P<fnum>\d+)\}\{(?P<fden>\d+)\})?"
)
_ARG_BRACE = re.compile(r"(?:\\[A-Za-z]+|[}^_])\s*$")


def _bracketed(s: str) -> list[bool]:
    """For each position: whether it is inside ``( )``, ``[ ]``, ``\\{ \\}`` or a ``{ }``
    list, where commas separate items. A ``{`` opening a command's argument
    (``\\frac{1,000}{3}``, ``^{..}``) does not count."""
    inside = [False] * (len(s) + 1)
    stack: list[bool] = []  # True for a bracket whose commas separate items
    depth = 0
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and s[i + 1 : i + 2] in ("{", "}"):
            if s[i + 1] == "{":
                stack.append(True)
                depth += 1
            elif stack:
                depth -= stack.pop()
            inside[i] = inside[i + 1] = depth > 0
            i += 2
            continue
        if c in "([":
            stack.append(True)
            depth += 1
        elif c == "{":
            is_list = _ARG_BRACE.search(s, max(0, i - 30), i) is None
            stack.append(is_list)
            depth += is_list
        elif c in ")]}" and stack:
            depth -= stack.pop()
        inside[i] = depth > 0
        i += 1
    return inside


def join_thousands(s: str) -> str:
    """Digit-group separators -> nothing: ``1{,}000``, ``1,\\!000``, ``1\\,000``, ``1,000``.

    Only correct groupings of one number are joined (``1{,}00`` and ``1,0000`` stay). A plain
    comma is a list separator inside brackets (``(100,200,300)``, ``\\{1,000\\}``) and after a
    space (``32, 349``). ``1 000`` (and the mixed number ``1 000 4/9``) is joined only when it
    is the whole answer (otherwise a space separates items).
    """
    s = _THOUSANDS_EXPLICIT.sub(lambda m: m.group(1) + _EXPLICIT_SEP.sub("", m.group(2)), s)
    if "," in s:
        inside = _bracketed(s)
        s = _THOUSANDS_COMMA.sub(
            lambda m: m.group(0) if inside[m.start()] else m.group(1) + m.group(2).replace(",", ""),
            s,
        )
    return join_spaced_thousands(s)


def join_spaced_thousands(s: str) -> str:
    """``1 000`` / ``1 000.5`` / ``1 000 4/9`` as the whole answer -> ``1000`` ...; the mixed
    number needs a proper fraction (``1 000 4/9`` is 1000 + 4/9)."""
    m = _THOUSANDS_SPACE.fullmatch(s.strip())
    if m is None:
        return s
    if m.group("frac"):
        num, den = (m.group("num"), m.group("den")) if m.group("num") else m.groups()[-2:]
        if int(num) >= int(den):
            return s
    return m.group("int").replace(" ", "") + (m.group("dec") or "") + (m.group("frac") or "")


_SPACING = re.compile(
    r"\\q?quad|\\(?:enspace|thinspace|medspace|thickspace|negthinspace|hfill|space)(?![A-Za-z])|"
    r"\\hspace\*?\{[^{}]*\}|(?<!\\)\\[!,;:> ]|~"
)


def drop_spacing_commands(s: str) -> str:
    """``\\!``, ``\\,``, ``\\;``, ``\\quad``, ``~``... -> one space."""
    return _SPACING.sub(" ", s)


_CURRENCY = re.compile(r"\\\$|\$|\\(?:euro|pounds|yen)(?![A-Za-z])|(?<![A-Za-z])(?:USD|US\$)")


def drop_currency(s: str) -> str:
    """``\\$5``, ``5$``, ``USD 5`` -> ``5`` (currency words go with the units step)."""
    return _CURRENCY.sub(" ", s)


_PERCENT = re.compile(r"\\?%|\s*(?<![A-Za-z])(?:percent(?:age)?s?|pct)(?![A-Za-z])", re.IGNORECASE)


def mark_percent(s: str) -> str:
    """``%``, ``\\%``, ``percent``, ``pct``, ``percentage`` -> ``\\%``."""
    return _PERCENT.sub(r"\\%", s)


_DEGREES = re.compile(
    r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\degree(?![A-Za-z])|"
    r"(?<=[\d}])\s*(?:degrees?|deg)(?![A-Za-z])",
    re.IGNORECASE,
)


def mark_degrees(s: str) -> str:
    """``^{\\circ}``, ``\\degree``, ``30 degrees`` -> ``^\\circ``."""
    return _DEGREES.sub(r"^\\circ ", s)


_CONNECTORS = re.compile(
    r" ?,? ?(?<![A-Za-z\\])(?:and|or)(?![A-Za-z]) ?,? ?|(?<=[\d)])or(?=[A-Z(\\])"
)


_INEQUALITY = re.compile(r"[<>]|\\(?:leq|geq|neq)(?![A-Za-z])")


def split_connectors(s: str) -> str:
    """``6 and 8``, ``(1,2) or (2,1)``, ``1orW(x)`` -> comma-separated items (``6, 8``).

    The comma is followed by a space so the items are never re-read as one number with a
    thousands separator or a decimal comma (``12 and 345`` is not 12345, ``6 and 8`` not 6.8).
    ``or`` between two inequalities (``x < -1 or x > 1``) becomes ``\\lor``: the parser reads
    it as the union of their solution sets, where a comma would mean a list. Between two
    intervals it stays a list: ``(-\\infty,1) \\text{ or } (3,\\infty)`` names two candidate
    intervals (a hedge), not their union ``\\cup``.
    """
    out: list[str] = []
    pos = 0
    matches = list(_CONNECTORS.finditer(s))
    for k, m in enumerate(matches):
        before = s[pos : m.start()]
        after = s[m.end() : matches[k + 1].start() if k + 1 < len(matches) else len(s)]
        is_or = m.group(0).strip(" ,").lower() == "or"
        both_ineq = _INEQUALITY.search(before) and _INEQUALITY.search(after)
        out.append(before)
        out.append(" \\lor " if is_or and both_ineq else ", ")
        pos = m.end()
    out.append(s[pos:])
    return "".join(out).strip(", ")


_ORDINAL = re.compile(
    r"(?<![\w.])(?<!_\{)(\d+)(?:\s*\^\s*(?:\{\s*(st|nd|rd|th)\s*\}|(st|nd|rd|th))|(st|nd|rd|th))"
    r"(?![A-Za-z])"
)


def _ordinal_suffix(n: int) -> str:
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def drop_ordinal_suffix(s: str) -> str:
    """``12^{th}``, ``15th``, ``21st`` -> the integer. Only the suffix English uses for that
    number is dropped (``2th`` stays: it may be ``2 t h``)."""

    def repl(m: re.Match[str]) -> str:
        suffix = m.group(2) or m.group(3) or m.group(4)
        return m.group(1) if suffix == _ordinal_suffix(int(m.group(1))) else m.group(0)

    return _ORDINAL.sub(repl, s)


# Units a text command may hold after a number: single letters are units only when written as
# text (``82 \\mathrm{~m}``); a bare ``82 m`` may be 82·m.
SI_LETTERS = frozenset("m g s h L l K N J W V A T".split())
SI_WORDS = frozenset(
    """km cm mm nm um dm kg mg ms ns min h hr kWh kW MW Hz kHz MHz GHz Pa kPa MPa mol cal kcal
    eV keV MeV mL dL kL kN mA mV kV kJ MJ""".split()
)
_TEXT_UNIT = re.compile(
    r"(?<=[\d}])(?P<pre>(?:\s|~|\\[,;:! ])*)\\(?:text|mathrm|mbox|textrm|rm|textnormal)\s*\{"
    r"(?:\s|~|\\[,;:! ])*(?P<unit>[A-Za-z]{1,12}(?:\s*\^\s*\{?[23]\}?)?"
    r"(?:\s*/\s*[A-Za-z]{1,12}(?:\s*\^\s*\{?[23]\}?)?)?)\s*\}(?:\s*\^\s*\{?[23]\}?)?"
    r"(?=\s*(?:$|,|;|\)|\]|\\\}))"
)


def _is_unit_word(w: str) -> bool:
    return w in SI_LETTERS or w in SI_WORDS or w.lower() in UNIT_WORDS


def drop_text_units(s: str) -> str:
    """``82 \\mathrm{~m}``, ``62 \\text{ km/h}``, ``9.8 \\text{ m/s}^2`` -> the number.

    A unit written as text after a number, at the end of the answer or of a list item, is a
    unit even when it is a single letter or a ratio of units (``\\mathrm{e}``, ``\\text{i}``
    are not units). Runs before the text commands are unwrapped, while the origin is known.
    """
    if "\\" not in s or len(s) > 1000:
        return s

    def repl(m: re.Match[str]) -> str:
        words = re.findall(r"[A-Za-z]+", m.group("unit"))
        return "" if all(_is_unit_word(w) for w in words) else m.group(0)

    return _TEXT_UNIT.sub(repl, s)


_FOR_ALL = re.compile(
    r"\s*,?\s*(?:\bfor\s+(?:all|every|any)|\\forall)\s*(?:real\s+(?:numbers?\s+)?)?"
    r"[A-Za-z](?:\s*\\in\s*\\mathbb\s*\{?R\}?)?\s*\.?\s*$"
)


def drop_universal_qualifier(s: str) -> str:
    """``f(x) = 0 for all x`` / ``\\forall x \\in \\mathbb{R}`` -> ``f(x) = 0``: a trailing
    "for all x" restates that the answer is an identity in ``x``; it changes nothing."""
    if len(s) > 1000:
        return s
    out = _FOR_ALL.sub("", s)
    return out if out.strip() else s


UNIT_WORDS = frozenset(
    """cm mm km m2 cm2 kg mg ml mL ft yd mi lb lbs oz hr hrs min mins sec secs kmh mph km/h
    meter meters metre metres centimeter centimeters centimetre centimetres millimeter
    millimeters kilometer kilometers kilometre kilometres inch inches foot feet yard yards mile
    miles gram grams kilogram kilograms pound pounds ounce ounces ton tons tonnes liter liters
    litre litres gallon gallons cup cups second seconds minute minutes hour hours day days week
    weeks month months year years decade decades century centuries unit units square cubic
    sq cu dollar dollars cent cents euro euros yuan rmb rupee rupees yen won people persons
    person students student ways times points point apples marbles coins cookies books pages
    radian radians rad rads mph kph km/hr m/s cm^2 sides side steps handshakes games players
    boys girls men women children kids balls cards tickets hours. trees days. bags boxes
    feet. miles. inches. items numbers integers digits values terms""".split()
)
_MATH_WORDS = frozenset(
    "sin cos tan sec csc cot log ln exp sqrt pi infty inf oo and or mod lcm gcd arcsin arccos "
    "arctan sinh cosh tanh max min det".split()
)
_UNIT_TAIL = re.compile(
    r"(?P<sep>[ ]+|(?<=[\d}]))(?P<tail>[A-Za-z][A-Za-z.' ]*?(?:\s*\^\s*\{?[23]\}?)?"
    r"(?:\s*(?:/|per)\s*[A-Za-z]+(?:\s*\^\s*\{?[23]\}?)?)?)[ .]*"
    r"(?=$|\s*(?:,|;|\)|\]|\\\}|\}$))"
)
_COMPOUND_UNITS = frozenset("km/h km/hr m/s cm/s ft/s mi/h m/s^2 m/s^{2}".split())
_HEAD_END = re.compile(r"[\d})]\s*(?:\\%|\^\\circ)?\s*$")


def _unit_tail_ok(tail: str, glued: bool) -> bool:
    if not glued and re.sub(r"\s+", "", tail.rstrip(". ")).lower() in _COMPOUND_UNITS:
        return True
    words = re.findall(r"[A-Za-z]+", tail)
    if not words or any(w.lower() in _MATH_WORDS for w in words):
        return False
    if glued:
        return len(words[0]) >= 3 and words[0].lower() in UNIT_WORDS
    return all(w.lower() in UNIT_WORDS or (len(w) >= 3 and not DOUBT.search(w)) for w in words)


# Words that negate or hedge the value next to them: never dropped as a unit or a
# description (``37 \\text{ wrong}`` is not 37), and a sentence holding one states no answer.
DOUBT_WORDS = frozenset(
    """not no never cannot wrong incorrect false untrue invalid nope nah or maybe perhaps
    possibly probably might either guess unsure unless except instead rather approximately
    about around nearly almost between mistaken unlikely excluded but than unlike besides
    excluding""".split()
)
DOUBT = re.compile(
    r"(?i)(?<![a-z])(?:" + "|".join(sorted(DOUBT_WORDS)) + r"|isn't|wasn't)(?![a-z])|n't(?![a-z])"
)


def strip_trailing_units(s: str) -> str:
    """``10 cm^2``, ``64 square feet``, ``17 any text``, ``10weeks`` -> the number.

    Works at the end of the answer and at the end of each list item (``{35 cm, 4}``). A unit
    glued to a number is dropped only if it is a known unit word of 3+ letters (so ``2x`` and
    ``10m`` — possibly ``10 * m`` — stay); spaced words are dropped when each is a known unit
    or a 3+ letter word that is not a math function name (single letters always stay).
    """

    if len(s) > 1000:  # a unit tail belongs to a short answer; keeps the regex linear
        return s

    def repl(m: re.Match[str]) -> str:
        head = m.string[: m.start()]
        if not _HEAD_END.search(head):
            return m.group(0)
        if not _unit_tail_ok(m.group("tail"), glued=m.group("sep") == ""):
            return m.group(0)
        return ""

    return _UNIT_TAIL.sub(repl, s)


_ALL_REALS = re.compile(
    r"(?i)(?:the\s+set\s+of\s+)?all\s+real\s+(?:numbers?|values?|x)|every\s+real\s+number"
)
_NO_SOLUTION = re.compile(
    r"(?i)(?:there\s+(?:is|are)\s+)?no\s+(?:real\s+)?solutions?|the\s+empty\s+set"
)


def name_sets_in_words(s: str) -> str:
    """A whole answer "all real numbers" -> ``\\mathbb{R}``; "no solution" / "the empty set"
    -> ``\\emptyset``. Only the whole answer: "all real numbers except 2" stays text."""
    t = s.strip().rstrip(".")
    if _ALL_REALS.fullmatch(t):
        return "\\mathbb{R}"
    if _NO_SOLUTION.fullmatch(t):
        return "\\emptyset"
    return s


def strip_trailing_punct(s: str) -> str:
    """Trailing ``.``, ``,``, ``;``, a dangling ``\\\\`` or ``\\`` and wrapping quotes."""
    prev = None
    while prev != s:
        prev = s
        s = s.strip().strip('"').strip("'") if s[:1] in "\"'" else s.strip()
        s = re.sub(r"(?:[.,;:]|\\\\|\\(?![A-Za-z{}%$|,;!: ]))+$", "", s)
        s = re.sub(r"^(?:[,;:]|\\\\)+", "", s)
        s = re.sub(r"^\*\*|\*\*$", "", s)
    return s


_MIXED_PLAIN = re.compile(r"(?<![\d.^_/\w}])(\d+)\s+(\d+)\s*/\s*(\d+)(?![\d.])")


def mixed_fraction_plain(s: str) -> str:
    """Plain mixed number ``1 1/2`` -> ``1\\frac{1}{2}`` (the parser reads it as 1 + 1/2)."""
    return _MIXED_PLAIN.sub(r"\1\\frac{\2}{\3}", s)


def collapse_whitespace(s: str) -> str:
    """Runs of whitespace -> one space; trimmed."""
    return re.sub(r"\s+", " ", s).strip()


STEPS: tuple[Callable[[str], str], ...] = (
    restore_lost_escapes,
    fix_double_escapes,
    strip_outer_delimiters,
    unwrap_boxed,
    replace_unicode,
    collapse_whitespace,
    strip_outer_delimiters,
    drop_display_commands,
    canonical_commands,
    repeating_decimals,
    expand_multiplier_words,
    drop_text_units,
    unwrap_text_commands,
    drop_unicode_enumerators,
    colon_labels,
    drop_ordinal_suffix,
    join_thousands,
    drop_spacing_commands,
    drop_currency,
    mark_percent,
    mark_degrees,
    degrees_minutes_seconds,
    split_connectors,
    drop_universal_qualifier,
    drop_domain_qualifier,
    rename_family_parameter,
    strip_trailing_units,
    strip_trailing_punct,
    name_sets_in_words,
    infinitely_many,
    mixed_fraction_plain,
    join_spaced_thousands,
    collapse_whitespace,
)


_SPACES = re.compile(r"\s{2,}")


def normalize_answer(s: str) -> str:
    """Run every step of :data:`STEPS` in order.

    Whitespace runs are squeezed after every step so no regex ever sees a long run of blanks
    (which would make patterns like ``\\s*,?\\s*`` backtrack quadratically).
    """
    for step in STEPS:
        s = _SPACES.sub(" ", step(s))
    return s


def comparison_key(s: str) -> str:
    """Key for the cheapest check: whitespace dropped except between two digits (``2 3``)."""
    return re.sub(r"(?<!\d)\s+|\s+(?!\d)", "", s)
