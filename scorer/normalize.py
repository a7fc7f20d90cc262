"""String-level normalization of answers, as explicit named steps.

Two entry points:

* :func:`extract_final_answer` — a *light* final-answer extraction for inputs that are whole
  sentences or solutions (graders' test suites pass those): last run of ``\\boxed{}``, else the
  text after "final answer", else the last math segment / number. Real rollouts go through
  ``scorer.extract`` first; this only makes ``verify`` robust to un-extracted text.
* :func:`normalize_answer` — the pipeline in :data:`STEPS`; every step is a small pure function
  so the documentation can list them and tests can target them one by one.

Everything here is linear-time regex / scanning work: it runs in the calling process, before
any size-capped parsing, and must never hang.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from scorer.extract import Box, matching_brace, scan_boxes, unwrap_box

# --------------------------------------------------------------------------------------------
# helpers


def match_brace(s: str, open_pos: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``open_pos`` (``len(s)`` when unclosed)."""
    close = matching_brace(s, open_pos)
    return len(s) if close is None else close


def replace_command(s: str, names: tuple[str, ...], fn: Callable[[str], str]) -> str:
    """Replace every ``\\name{arg}`` (brace-matched, nested ok) by ``fn(arg)``."""
    pattern = re.compile(r"\\(" + "|".join(names) + r")(?![A-Za-z])\s*\{")
    out: list[str] = []
    pos = 0
    while True:
        m = pattern.search(s, pos)
        if m is None:
            out.append(s[pos:])
            return "".join(out)
        open_pos = m.end() - 1
        close = match_brace(s, open_pos)
        out.append(s[pos : m.start()])
        out.append(fn(s[open_pos + 1 : close]))
        pos = close + 1


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


_GLUE_STRIP = re.compile(
    r"\\(?:text|textbf|mathrm|mbox|textnormal)\s*\{([^{}]*)\}|\\q?quad|\\[,;:! ]|\\\(|\\\)|"
    r"\\\[|\\\]|\$|[\s,;.]"
)
_CONNECTOR = re.compile(r"(?i)(?<![a-z])(?:and|or)(?![a-z])|[,;]")


def _boxes_join(between: str) -> bool:
    """Whether two boxes separated by ``between`` belong to one multi-part answer.

    ``\\boxed{1} and \\boxed{2}``, ``\\boxed{1}, \\boxed{2}``, ``\\boxed{1}\\boxed{2}`` join;
    ``\\boxed{1} no no no no \\boxed{2}`` (a retraction / unrelated prose) does not.
    """
    if len(between) > 40:
        return False
    if _CONNECTOR.search(between):
        return True
    rest = _GLUE_STRIP.sub(lambda m: m.group(1) or "", between)
    return not re.search(r"[A-Za-z]", rest)


def last_boxed_run(s: str, *, gold: bool = False) -> tuple[int, str] | None:
    """(start, joined content) of the last run of connected boxes, or None.

    A last box that never closes (``scorer.extract.scan_boxes``) makes the run ``""``, no
    answer, unless ``gold``: a gold's unclosed box reads to the end of the text.
    """
    boxes = answer_boxes(s)
    if not boxes:
        return None
    if boxes[-1].unclosed and not gold:
        return boxes[-1].start, ""
    run = [boxes[-1]]
    for prev in reversed(boxes[:-1]):
        if _boxes_join(s[prev.end : run[0].start]):
            run.insert(0, prev)
        else:
            break
    return run[0].start, ", ".join(b.content or "" for b in run)


_FINAL_ANSWER = re.compile(r"(?i)final\s+answer(?:[\s*]*(?:is|:))?[\s*:]*")
_FA_END = re.compile(r"(?i)I hope|\n\s*\n|<\|im_|\.(?=\s|$)")

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
    if not cands or _looks_like_sentence(s):
        text = "".join(masked)
        for m in _NUMBER_IN_TEXT.finditer(text):
            cands.append((m.start(), m.end(), m.group(0)))
    cands.sort()
    return cands


_NOT_PROSE = frozenset(
    """percent percentage dollars dollar cents units unit square cubic meters metres feet inches
    miles hours minutes seconds degrees weeks years months days yuan euros grams pounds liters
    litres text textbf mathrm frac sqrt infty quad boxed""".split()
)


_LATEX_NAMES = re.compile(r"\\(?:begin|end)\s*\{[^{}]*\}|\\[A-Za-z]+")
_LOWER_WORD = re.compile(r"(?<![\\A-Za-z])[a-z][a-z']+(?![A-Za-z])")


def _looks_like_sentence(s: str) -> bool:
    """Prose around the answer: a real word of 4+ letters, or two lowercase words, not units."""
    s = _LATEX_NAMES.sub(" ", s)
    if any(w.lower() not in _NOT_PROSE for w in _WORD.findall(s)):
        return True
    words = [w for w in _LOWER_WORD.findall(s) if w not in _NOT_PROSE and w not in UNIT_WORDS]
    return len(words) >= 2


def extract_final_answer(text: str, *, gold: bool = False) -> str:
    """Reduce a sentence/solution to its final answer; a bare answer is returned unchanged.

    Priority: the later of (last run of boxes, last "final answer ..." phrase); else the last
    math segment or number when the text is prose; else the whole text. A last box that never
    closes is no answer (``""``) unless the text is a ``gold`` (see :func:`last_boxed_run`).
    """
    s = literal_newlines(fix_double_escapes(text))
    box = last_boxed_run(s, gold=gold)
    fa = None
    for m in _FINAL_ANSWER.finditer(s):
        fa = m
    if box is not None and (fa is None or box[0] >= fa.start()):
        return box[1]
    if fa is not None:
        seg = s[fa.end() :]
        end = _FA_END.search(seg)
        if end is not None and end.start() > 0:
            seg = seg[: end.start()]
        seg = seg.strip().strip('"').replace('\\"', "")
        if answer_boxes(seg):
            return extract_final_answer(seg, gold=gold)
        return _answer_from_segment(seg)
    return _answer_from_segment(s)


def _answer_from_segment(s: str) -> str:
    if not (math_segments(s) or _looks_like_sentence(s)):
        return s
    cands = _math_and_number_candidates(s)
    if not cands:
        return s
    return cands[-1][2]


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


def replace_unicode(s: str) -> str:
    """Unicode math symbols -> LaTeX (``×``, ``≤``, ``π``, ``√``, ``°``, ``²``...)."""
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


_TEXT_MODE = ("text", "textnormal", "textrm", "textsf", "textup", "mbox", "hbox", "textit")
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
    "overline",
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


_THOUSANDS_BRACES = re.compile(
    r"(?<=\d)\s*\{,\s*\}\s*(?=\d)|(?<=\d),\\!\s*(?=\d{3})|(?<=\d)\\,(?=\d{3})"
)
_THOUSANDS_COMMA = re.compile(r"(?<![\d.,])(-?[1-9]\d{0,2})((?:,\d{3})+)(?![\d,])")
_THOUSANDS_SPACE = re.compile(r"-?[1-9]\d{0,2}(?: \d{3})+(?:\.\d+)?")


def _join_group(s: str, m: re.Match[str]) -> str:
    """Join ``12,345`` unless it is the whole content of a bracket pair: ``(12,102)``."""
    before = s[: m.start()].rstrip()
    after = s[m.end() :].lstrip()
    if before[-1:] in ("(", "[") and after[:1] in (")", "]") and m.group(2).count(",") == 1:
        return m.group(0)
    return m.group(1) + m.group(2).replace(",", "")


def join_thousands(s: str) -> str:
    """Digit-group separators -> nothing: ``1{,}000``, ``1,\\!000``, ``1\\,000``, ``1,000``.

    ``1 000`` is joined only when it is the whole answer (otherwise a space separates items).
    ``32, 349`` (comma + space) stays a list.
    """
    s = _THOUSANDS_BRACES.sub("", s)
    s = _THOUSANDS_COMMA.sub(lambda m: _join_group(s, m), s)
    if _THOUSANDS_SPACE.fullmatch(s.strip()):
        s = s.replace(" ", "")
    return s


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


def split_connectors(s: str) -> str:
    """``6 and 8``, ``(1,2) or (2,1)``, ``1orW(x)`` -> comma-separated items."""
    s = _CONNECTORS.sub(",", s)
    return s.strip(",")


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
_HEAD_END = re.compile(r"[\d})]\s*(?:\\%|\^\\circ)?\s*$")


def _unit_tail_ok(tail: str, glued: bool) -> bool:
    words = re.findall(r"[A-Za-z]+", tail)
    if not words or any(w.lower() in _MATH_WORDS for w in words):
        return False
    if glued:
        return len(words[0]) >= 3 and words[0].lower() in UNIT_WORDS
    return all(w.lower() in UNIT_WORDS or len(w) >= 3 for w in words)


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
    fix_double_escapes,
    strip_outer_delimiters,
    unwrap_boxed,
    replace_unicode,
    collapse_whitespace,
    strip_outer_delimiters,
    drop_display_commands,
    canonical_commands,
    unwrap_text_commands,
    join_thousands,
    drop_spacing_commands,
    drop_currency,
    mark_percent,
    mark_degrees,
    split_connectors,
    strip_trailing_units,
    strip_trailing_punct,
    mixed_fraction_plain,
    join_thousands,
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
