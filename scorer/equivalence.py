"""Is a predicted answer mathematically equal to the gold answer?  ``verify(pred, gold)``.

Strategy, cheapest first (all but the last step run in the calling process, in pure Python):

1. size caps (``too_long``), light final-answer extraction, string normalization
   (``scorer.normalize``); identical normalized strings -> ``string_match``;
2. parse both into structured answers (``scorer.parse``; golds are cached);
3. compare with exact rational arithmetic (``scorer.compare.ExactBackend``): numbers,
   fractions, decimals, percent, sets / tuples / intervals of numbers, choice letters, text;
4. anything that needs algebra (symbols, radicals, pi, trig, matrices products...) is sent to
   a persistent sympy worker process under a hard wall-clock deadline
   (``scorer.sympy_pool``); past the deadline the worker is SIGKILLed and the verdict is
   ``timeout``.

Thread-safe and usable from worker processes; never raises on bad input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache

from scorer.answer import Found, find_answer
from scorer.approximation import stated_approximations
from scorer.compare import Comparer, ExactBackend, Undecided
from scorer.list_order import as_sequence, compare_in_order
from scorer.nodes import Answer, Coll, Expr, Text, Union
from scorer.normalize import comparison_key, normalize_answer
from scorer.parse import TooDeep, parse_answer
from scorer.question import Demands, demands, form_problem
from scorer.sympy_pool import DeadlineExceeded, WorkerCrashed, get_pool
from scorer.units import units_contradict
from scorer.verdict import DEFAULT_TIMEOUT, Gold, Reason, Verdict

MAX_INPUT_CHARS = 20_000  # raw input (may be a whole solution; extraction is linear-time)
MAX_ANSWER_CHARS = 10_000  # the extracted answer that gets parsed

_EXACT = Comparer(ExactBackend())


def gold_to_str(gold: Gold) -> str:
    """Golds from JSON may be numbers: ints stringify exactly, floats by shortest repr."""
    if isinstance(gold, bool):
        return str(gold)
    if isinstance(gold, int):
        return str(gold)
    if isinstance(gold, float):
        if math.isnan(gold) or math.isinf(gold):
            return repr(gold)
        return repr(gold)
    return gold


CACHE_MAX_CHARS = 2_000  # longer inputs are not cached (bounded cache memory)


def prepare(text: str, *, gold: bool = False) -> str:
    """The normalized final answer of ``text`` (``""``: none, or a hedge), cached: the same
    gold is graded against many rollouts. ``gold`` reads a reference answer (see
    :func:`scorer.answer.find_answer`)."""
    return _normalize(find_answer(text, gold=gold).answer or "")


def _normalize(text: str) -> str:
    return normalize_answer(text) if len(text) > CACHE_MAX_CHARS else _normalize_cached(text)


_normalize_cached = lru_cache(maxsize=8192)(normalize_answer)


def gold_parts(gold: Answer) -> int:
    """How many parts a gold answer has: the items of a list, tuple, set or sequence, the
    pieces of a union; 1 for anything else. More boxes than this is a hedge."""
    if isinstance(gold, Coll):
        return len(gold.elems)
    if isinstance(gold, Union):
        return len(gold.parts)
    return 1


def hedged(found: Found, gold: Gold | Sequence[Gold]) -> bool:
    """Whether ``found`` offers more different boxes than every acceptable gold has parts.

    Boxes that are the same value written two ways (``\\boxed{x = 3}`` and ``\\boxed{3}``,
    ``\\boxed{0.5}`` and ``\\boxed{\\frac12}``) count once; equality here is the exact
    comparer's only (no sympy: whatever it cannot decide counts as different)."""
    if len(found.candidates) <= 1:
        return False
    distinct = _distinct_values(found.candidates)
    golds = list(gold) if isinstance(gold, list | tuple) else [gold]
    for g in golds:
        if not isinstance(g, str | int | float) or len(gold_to_str(g)) > MAX_INPUT_CHARS:
            continue
        parsed = _parsed(prepare(gold_to_str(g), gold=True))
        if distinct <= max(1, 1 if parsed is None else gold_parts(parsed)):
            return False
    return True


def _distinct_values(candidates: tuple[str, ...]) -> int:
    """How many different values the normalized boxes ``candidates`` hold."""
    groups: list[Answer] = []
    for key in candidates[:MAX_CANDIDATES]:
        ans = _parsed(key)
        if ans is None:
            groups.append(Text(key, True))
            continue
        for seen in groups:
            try:
                if _EXACT.compare(ans, seen).correct:
                    break
            except (Undecided, RecursionError):
                continue
        else:
            groups.append(ans)
    return len(groups) + max(0, len(candidates) - MAX_CANDIDATES)


MAX_CANDIDATES = 16  # boxes compared pairwise for the hedge rule; more all count as different


@lru_cache(maxsize=1024)
def _demands(question: str) -> Demands:
    """What a question asks of its answer, cached: a question is graded against many
    rollouts."""
    return demands(question)


@lru_cache(maxsize=8192)
def _parsed(norm: str) -> Answer | None:
    """Parsed answer, or None when nesting exceeds the cap."""
    try:
        return parse_answer(norm)
    except TooDeep:
        return None
    except RecursionError:
        return None


def verify(
    pred: str, gold: Gold, *, timeout: float = DEFAULT_TIMEOUT, question: str | None = None
) -> Verdict:
    """Compare ``pred`` with ``gold`` (:func:`_verify`), then make sure no decimal the answer
    gives after an ``\\approx`` contradicts the gold (:mod:`scorer.approximation`)."""
    out = _verify(pred, gold, timeout=timeout, question=question)
    if not out.correct or not isinstance(pred, str) or "approx" not in pred and "≈" not in pred:
        return out
    found = find_answer(pred)
    for decimal in stated_approximations(_normalize(found.answer or "")):
        check = _verify(decimal, gold, timeout=timeout)
        if not check.correct and check.reason not in (Reason.TIMEOUT, Reason.ERROR):
            return Verdict(False, Reason.NOT_EQUAL, f"its approximation {decimal} is not the gold")
    return out


def _verify(
    pred: str, gold: Gold, *, timeout: float = DEFAULT_TIMEOUT, question: str | None = None
) -> Verdict:
    """Compare ``pred`` with ``gold``; see docs/scorer.md for the rules and reason codes.

    ``timeout`` bounds the sympy work in seconds (the worker is killed past it). Cheap cases
    never touch the worker. ``question``, when given, enforces the form it asks for
    (:mod:`scorer.question`: a reduced fraction, in terms of pi, an ordered list, an integer,
    its unit, a value rather than its own expression); without it nothing changes.
    """
    if not isinstance(pred, str):
        return Verdict(False, Reason.EMPTY, "pred is not a string")
    if not isinstance(gold, (str, int, float)):
        return Verdict(False, Reason.PARSE_ERROR, "gold is not a string or number")
    gold_s = gold_to_str(gold)
    if len(pred) > MAX_INPUT_CHARS:
        return Verdict(False, Reason.TOO_LONG, f"pred has {len(pred)} chars")
    if len(gold_s) > MAX_INPUT_CHARS:
        return Verdict(False, Reason.TOO_LONG, f"gold has {len(gold_s)} chars")
    found = find_answer(pred)
    if found.hedge is not None:
        return Verdict(False, Reason.HEDGED, found.hedge)
    p_norm = _normalize(found.answer or "")
    g_norm = prepare(gold_s, gold=True)
    if not p_norm:
        return Verdict(False, Reason.EMPTY, "no answer")
    if not g_norm:
        return Verdict(False, Reason.PARSE_ERROR, "empty gold")
    if len(p_norm) > MAX_ANSWER_CHARS or len(g_norm) > MAX_ANSWER_CHARS:
        return Verdict(False, Reason.TOO_LONG, "answer above the size cap")
    if hedged(found, gold_s):
        return Verdict(False, Reason.HEDGED, f"{len(found.candidates)} different boxes")
    if units_contradict(found.answer or "", find_answer(gold_s, gold=True).answer or ""):
        return Verdict(False, Reason.NOT_EQUAL, "units differ")
    want = _demands(question) if isinstance(question, str) and len(question) < 50_000 else None
    if want is not None:
        problem = form_problem(want, found.answer or "", p_norm, g_norm)
        if problem is not None:
            return Verdict(False, Reason.NOT_EQUAL, problem)
    if comparison_key(p_norm) == comparison_key(g_norm):
        return Verdict(True, Reason.STRING_MATCH)
    g_ans = _parsed(g_norm)
    p_first = _parsed(p_norm)
    if p_first is not None and g_ans is not None and compare_in_order(g_ans, want, g_norm):
        p_norm = as_sequence(p_norm, p_first)  # compared in order (scorer.list_order)
    p_ans = _parsed(p_norm)
    if p_ans is None or g_ans is None:
        return Verdict(False, Reason.TOO_DEEP, "nesting above the cap")
    p_alt, g_alt = _decimal_comma(p_norm, g_ans), _decimal_comma(g_norm, p_ans)
    try:
        out = _EXACT.compare(p_ans, g_ans)
        if not out.correct and (p_alt or g_alt):
            alt = _EXACT.compare(_parsed(p_alt or p_norm), _parsed(g_alt or g_norm))  # type: ignore[arg-type]
            out = alt if alt.correct else out
        return out
    except Undecided:
        pass
    except RecursionError:
        return Verdict(False, Reason.TOO_DEEP, "expression too deep")
    return _symbolic(p_alt or p_norm, g_alt or g_norm, timeout)


_DECIMAL_COMMA = re.compile(r"-?\d+,\d+")


def _decimal_comma(norm: str, other: Answer) -> str | None:
    """``2,74`` against a single number also reads as the decimal 2.74 (European notation)."""
    if isinstance(other, Expr) and _DECIMAL_COMMA.fullmatch(norm):
        return norm.replace(",", ".")
    return None


def _symbolic(p_norm: str, g_norm: str, timeout: float) -> Verdict:
    """Ship the pair to a sympy worker under a hard deadline."""
    try:
        reply = get_pool().call({"pred": p_norm, "gold": g_norm}, timeout)
    except DeadlineExceeded:
        return Verdict(False, Reason.TIMEOUT, f"sympy work exceeded {timeout:g}s")
    except WorkerCrashed as exc:
        return Verdict(False, Reason.ERROR, f"worker failed: {exc}"[:200])
    except (OSError, RuntimeError) as exc:  # cannot start a process (limits, shutdown)
        return Verdict(False, Reason.ERROR, f"cannot run worker: {exc}"[:200])
    return Verdict(
        bool(reply.get("correct")), str(reply.get("reason")), str(reply.get("detail", ""))
    )


def warm_up() -> None:
    """Start the sympy workers now (otherwise the first symbolic pair pays ~0.5 s)."""
    get_pool().warm_up()
