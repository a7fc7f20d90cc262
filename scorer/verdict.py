"""The contract of one answer check: what is compared (a :data:`Gold`), how long it may take by
default, and the result (:class:`Verdict` with a :class:`Reason` code).

It sits below every other scorer module, so the comparer, ``verify``, the reward rules and the
grader share these names instead of each spelling them.
"""

from __future__ import annotations

from dataclasses import dataclass

from boxed_client.defaults import SCORE_TIMEOUT

Gold = str | int | float
"""A gold answer as datasets give it: JSON numbers are golds too (see ``gold_to_str``)."""

DEFAULT_TIMEOUT = SCORE_TIMEOUT
"""Seconds one answer check may spend in sympy unless told otherwise (CLI, API, rewards); the
client plans its waits on the same number (:mod:`boxed_client.defaults`)."""


class Reason:
    """Stable machine-readable reason codes carried by :class:`Verdict`.

    Rewards are audited from these codes, so they never change meaning. ``correct`` codes say
    *how* equality was established, from strongest to weakest evidence; the others say why the
    pair was rejected.
    """

    # correct == True
    STRING_MATCH = "string_match"  # identical after normalization
    CHOICE_MATCH = "choice_match"  # same multiple-choice letter
    TEXT_MATCH = "text_match"  # same words, case-insensitive
    NUMERIC_EQUAL = "numeric_equal"  # exact rational equality, or high-precision agreement
    SYMBOLIC_EQUAL = "symbolic_equal"  # sympy proved the difference is zero / same structure
    APPROX_EQUAL = "approx_equal"  # a decimal is the rounding/truncation of the exact value

    # correct == False
    NOT_EQUAL = "not_equal"  # both sides understood, values differ
    STRUCTURE_MISMATCH = "structure_mismatch"  # e.g. a set against a number, lengths differ
    PARSE_ERROR = "parse_error"  # one side could not be understood and strings differ
    EMPTY = "empty"  # no answer at all
    HEDGED = "hedged"  # several answers offered (``\\boxed{8} or \\boxed{9}``, too many boxes)
    TOO_LONG = "too_long"  # input above the size cap, refused unread
    TOO_DEEP = "too_deep"  # nesting above the depth cap
    TIMEOUT = "timeout"  # the sympy worker ran past the deadline and was killed
    ERROR = "error"  # internal failure (worker crashed); never silently "correct"

    # Not verdicts: codes the reward rules (scorer.rewards) add to a graded row's ``reasons``.
    NO_BOX = "no_box"  # the text has no (readable) chosen box
    MISSING_THINK_CLOSE = "missing_think_close"  # interleaved: no ``</think>``
    TOOL_TAG_AFTER_THINK = "tool_tag_after_think"  # interleaved: a tool tag after ``</think>``
    TOOL_BONUS = "tool_bonus"  # the tool bonus was added to a right answer

    CORRECT = frozenset(
        {STRING_MATCH, CHOICE_MATCH, TEXT_MATCH, NUMERIC_EQUAL, SYMBOLIC_EQUAL, APPROX_EQUAL}
    )


@dataclass(frozen=True)
class Verdict:
    """Whether ``pred`` matches ``gold``, and why.

    ``reason`` is a short machine-readable code (``"string_match"``, ``"numeric_equal"``,
    ``"symbolic_equal"``, ``"not_equal"``, ``"timeout"``, ``"parse_error"``...): rewards are
    audited from these codes, so they are stable strings, not prose. See :class:`Reason`.
    """

    correct: bool
    reason: str
    detail: str = ""

    @property
    def timed_out(self) -> bool:
        return self.reason == Reason.TIMEOUT
