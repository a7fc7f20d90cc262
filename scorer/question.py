"""What a question demands of the form of its answer (issue #29, item 4).

A grader that sees only the answer and the gold cannot enforce "express your answer as a
common fraction", "in terms of pi", "list them in increasing order", "to the nearest integer",
"in centimeters", nor tell a value from the question's own expression copied back
(``\\binom{10}{3}`` asked to be evaluated). With the question given (``verify(...,
question=...)``, a ``question`` field of a ``/score`` row or trajectory record), these are
checked; without it nothing here runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import gcd

from scorer.nodes import Div, Expr, Int, Neg
from scorer.normalize import comparison_key, math_segments, normalize_answer
from scorer.parse import ParseError, parse_answer
from scorer.units import unit_of

_FRACTION = re.compile(r"(?i)common\s+fraction|simplest\s+form|lowest\s+terms|reduced\s+fraction")
_RADICAL = re.compile(r"(?i)radical\s+form|in\s+terms\s+of\s+(?:\$?\s*\\pi|pi\b|π)")
_IN_TERMS_OF_PI = re.compile(r"(?i)in\s+terms\s+of\s+(?:\$?\s*\\pi|pi\b|π)")
_ORDER = re.compile(
    r"(?i)\b(?:in\s+(?:increasing|decreasing|ascending|descending)\s+order|in\s+order(?!\s+to\b)"
    r"|from\s+(?:least|smallest|greatest|largest)\s+to\s+(?:greatest|largest|least|smallest)"
    r"|ordered\s+(?:pair|triple|list|tuple)|in\s+the\s+order)\b"
)
_ALL_VALUES = re.compile(
    r"(?i)\b(?:find|enter|list|determine|compute|give)\s+all\b"
    r"|\ball\s+(?:the\s+)?(?:possible\s+|real\s+|distinct\s+)*"
    r"(?:values?|solutions?|roots?|zeros?|integers?|numbers?)\b"
    r"|\bpossible\s+values\b"
    r"|\b(?:find|enter|list|give|determine|what\s+are)\s+(?:the\s+)?(?:[a-z]+\s+)?"
    r"(?:solutions|roots|zeros|zeroes)\b"
)
_INTEGER = re.compile(r"(?i)nearest\s+(?:integer|whole\s+number)|as\s+an\s+integer")
_UNIT_ASKED = re.compile(r"(?i)\bin\s+(?:units\s+of\s+)?(?P<unit>[a-z]+(?:\s*/\s*[a-z]+)?)\b")

_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Demands:
    """The form a question asks for."""

    fraction: bool = False
    radical: bool = False  # "simplest radical form": a fraction may hold radicals
    pi: bool = False
    ordered: bool = False
    all_values: bool = False
    integer: bool = False
    unit: str | None = None
    expressions: frozenset[str] = frozenset()


def demands(question: str | None) -> Demands:
    """Read what ``question`` asks of its answer's form (nothing for ``None``)."""
    if not question:
        return Demands()
    unit = None
    for m in _UNIT_ASKED.finditer(question):
        unit = unit_of("1 " + m["unit"]) or unit
    return Demands(
        fraction=bool(_FRACTION.search(question)),
        radical=bool(_RADICAL.search(question)),
        pi=bool(_IN_TERMS_OF_PI.search(question)),
        ordered=bool(_ORDER.search(question)),
        all_values=bool(_ALL_VALUES.search(question)),
        integer=bool(_INTEGER.search(question)),
        unit=unit,
        expressions=_expressions(question),
    )


def _expressions(question: str) -> frozenset[str]:
    """The comparison keys of the question's math segments that are not plain numbers: what
    an answer must not copy back as its value."""
    keys = set()
    for _start, _end, body in math_segments(question[:20_000]):
        norm = normalize_answer(body)
        if norm and not _PLAIN_NUMBER.fullmatch(norm) and len(norm) <= 200:
            keys.add(comparison_key(norm))
    return frozenset(keys)


def form_problem(want: Demands, answer: str, norm: str, gold_norm: str) -> str | None:
    """Why the answer (raw ``answer``, normalized ``norm``) does not have the form the
    question asks for; ``None`` when it does (or nothing is asked). An expression of the
    question is a copy only when the gold is not that same expression."""
    key = comparison_key(norm)
    if key in want.expressions and comparison_key(gold_norm) not in want.expressions:
        return "the question's own expression, not its value"
    if want.fraction and not _reduced_fraction(norm, radicals=want.radical):
        return "not a fraction in lowest terms"
    if want.pi and "\\pi" not in norm:
        return "not in terms of pi"
    if want.integer and not re.fullmatch(r"-?\d+", key):
        return "not an integer"
    if want.unit is not None:
        stated = unit_of(answer)
        if stated is not None and stated != want.unit:
            return f"in {stated}, the question asks for {want.unit}"
    return None


def _reduced_fraction(norm: str, *, radicals: bool = False) -> bool:
    """An integer, or a fraction of integers in lowest terms (``\\frac{3}{4}``, ``\\frac 34``,
    ``-3/4``); with ``radicals`` (the question asks for simplest radical form or for π) any
    exact form without a decimal point (``\\frac{3\\sqrt{3}}{4}``)."""
    if radicals:
        return not _DECIMAL.search(norm)
    try:
        answer = parse_answer(norm)
    except (ParseError, RecursionError):
        return False
    node = answer.node if isinstance(answer, Expr) else None
    node = node.arg if isinstance(node, Neg) else node
    if isinstance(node, Int):
        return True
    if not isinstance(node, Div):
        return False
    num = node.num.arg if isinstance(node.num, Neg) else node.num
    if not (isinstance(num, Int) and isinstance(node.den, Int)):
        return False
    return node.den.value > 1 and gcd(num.value, node.den.value) == 1


_DECIMAL = re.compile(r"\d\.\d|(?<!\d)\.\d")
