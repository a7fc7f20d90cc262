"""How a program's output is compared with a test's expected output (on the host: the
submission never sees the expected output, so it cannot shape the comparison).

Each mode answers whether the two agree and, when they do not, where they first differ:

* ``exact``: byte for byte (after decoding);
* ``whitespace``: the same whitespace-separated tokens (spacing, blank lines and a missing final
  newline do not matter), what most programming judges compare;
* ``float``: tokens too, and two tokens that both read as numbers agree within ``tolerance``,
  absolute or relative (``|a - b| <= tol * max(1, |b|)``);
* ``lines``: the same lines in any order (each without trailing whitespace, blank lines at the
  end ignored), for problems whose answer is an unordered set of lines.
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

EXCERPT = 80  # characters of each side quoted where they differ


class Comparison(enum.StrEnum):
    EXACT = "exact"
    WHITESPACE = "whitespace"
    FLOAT = "float"
    LINES = "lines"
    CHECKER = "checker"  # a checker program decides (exec_server.judge), not this module


@dataclass(frozen=True)
class Difference:
    """Where the actual output first departs from the expected one (1-based line/column)."""

    line: int
    column: int
    expected: str
    actual: str
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "column": self.column,
            "expected": self.expected,
            "actual": self.actual,
            "note": self.note,
        }


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _exact(expected: str, actual: str) -> Difference | None:
    if expected == actual:
        return None
    at = next(
        (i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b),
        min(len(expected), len(actual)),
    )
    line, column = _position(actual, at)
    note = None
    if expected.startswith(actual):
        note = "the output ends early"
    elif actual.startswith(expected):
        note = "the output goes on after the expected end"
    return Difference(line, column, expected[at : at + EXCERPT], actual[at : at + EXCERPT], note)


def _tokens(text: str) -> list[tuple[str, int]]:
    """Whitespace-separated tokens with their offsets."""
    found, i, n = [], 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        start = i
        while i < n and not text[i].isspace():
            i += 1
        if i > start:
            found.append((text[start:i], start))
    return found


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def numbers_agree(expected: float, actual: float, tolerance: float) -> bool:
    """Within ``tolerance``, absolute or relative to the expected value."""
    if math.isinf(expected) or math.isinf(actual):
        return expected == actual
    return abs(actual - expected) <= tolerance * max(1.0, abs(expected))


def _token_difference(expected: str, actual: str, tolerance: float | None) -> Difference | None:
    want, got = _tokens(expected), _tokens(actual)
    for index, ((w, _), (g, offset)) in enumerate(zip(want, got, strict=False)):
        if w == g:
            continue
        if tolerance is not None:
            a, b = _number(w), _number(g)
            if a is not None and b is not None and numbers_agree(a, b, tolerance):
                continue
        line, column = _position(actual, offset)
        return Difference(line, column, w[:EXCERPT], g[:EXCERPT], f"token {index + 1} differs")
    if len(want) == len(got):
        return None
    index = min(len(want), len(got))
    offset = got[index][1] if index < len(got) else len(actual)
    line, column = _position(actual, offset)
    extra = got[index][0] if index < len(got) else ""
    missing = want[index][0] if index < len(want) else ""
    note = f"{len(got)} tokens, {len(want)} expected"
    return Difference(line, column, missing[:EXCERPT], extra[:EXCERPT], note)


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _lines_difference(expected: str, actual: str) -> Difference | None:
    want, got = Counter(_lines(expected)), Counter(_lines(actual))
    if want == got:
        return None
    extra = got - want
    missing = want - got
    order = _lines(actual)
    if extra:
        first = next(line for line in order if line in extra)
        index = order.index(first)
        note = "a line that is not expected (lines compared in any order)"
        return Difference(index + 1, 1, next(iter(missing), "")[:EXCERPT], first[:EXCERPT], note)
    line = next(iter(missing))
    note = "an expected line is missing (lines compared in any order)"
    return Difference(len(order) + 1, 1, line[:EXCERPT], "", note)


def compare(
    mode: Comparison, expected: str, actual: str, tolerance: float = 1e-6
) -> Difference | None:
    """None when ``actual`` agrees with ``expected`` under ``mode``, else the first difference."""
    if mode is Comparison.EXACT:
        return _exact(expected, actual)
    if mode is Comparison.WHITESPACE:
        return _token_difference(expected, actual, None)
    if mode is Comparison.FLOAT:
        return _token_difference(expected, actual, tolerance)
    if mode is Comparison.LINES:
        return _lines_difference(expected, actual)
    raise ValueError(f"{mode} is decided by a checker program")


def values_agree(expected: Any, actual: Any, tolerance: float | None) -> bool:
    """Two JSON values (a call-based test's return value): equal, numbers within ``tolerance``
    when one is given; ``True`` and ``1`` differ (as JSON has them apart).

    Iterative (an explicit stack): a submission's value nested thousands deep is compared, not
    a ``RecursionError`` that would turn the code's verdict into the service's 500.
    """
    pending = [(expected, actual)]
    while pending:
        e, a = pending.pop()
        if isinstance(e, list) and isinstance(a, list):
            if len(e) != len(a):
                return False
            pending.extend(zip(e, a, strict=True))
        elif isinstance(e, dict) and isinstance(a, dict):
            if e.keys() != a.keys():
                return False
            pending.extend((e[k], a[k]) for k in e)
        elif not _leaves_agree(e, a, tolerance):
            return False
    return True


def _leaves_agree(expected: Any, actual: Any, tolerance: float | None) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        if tolerance is None:
            return expected == actual
        return numbers_agree(float(expected), float(actual), tolerance)
    if isinstance(expected, list | dict) or isinstance(actual, list | dict):
        return False  # a container against anything else
    return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        if tolerance is None:
            return expected == actual
        return numbers_agree(float(expected), float(actual), tolerance)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            values_agree(e, a, tolerance) for e, a in zip(expected, actual, strict=True)
        )
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            values_agree(expected[k], actual[k], tolerance) for k in expected
        )
    return type(expected) is type(actual) and expected == actual
