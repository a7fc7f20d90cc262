"""Whose result an answer is: the code's, the infrastructure's, or the grader's.

A reward is only ever the code's own verdict. Every answer that can feed a reward carries
``outcome`` (:class:`OutcomeKind`) and ``failure`` (``{"code": ..., "retryable": ...}``, null
when the outcome is the code's). A trainer pays a reward only when ``outcome == "code"``;
any other outcome is "no reward" (``None``, a mask), never 0.

This module is the one list of failure codes (docs/failures.md is its table: who emits each
and what a trainer does with it). It is part of the wire a client reads, so it lives in the
client's package; it is stdlib only, so the service, the scorer (``scorer.outcome`` re-exports
it) and the OpenEnv environment share it without importing httpx.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class OutcomeKind(enum.StrEnum):
    """Whose result an answer is (the wire field ``outcome``)."""

    CODE = "code"  # the code's own verdict: a reward may be paid from it
    INFRASTRUCTURE = "infrastructure"  # the service or the path to it failed: no reward
    GRADER = "grader"  # the grader could not decide: no reward


class FailureCode(enum.StrEnum):
    """Why an answer is not the code's verdict (closed: switch on it exhaustively)."""

    # The service, with the code's run (or the session) in its hands.
    SANDBOX_LOST = "sandbox_lost"  # the sandbox died under a run (container killed, crash)
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"  # no sandbox could be had in time
    ENGINE_UNAVAILABLE = "engine_unavailable"  # the container engine does not answer
    OVERLOADED = "overloaded"  # no slot now (429)
    SESSION_LOST = "session_lost"  # the session's sandbox is gone through no act of its code
    SESSION_EXPIRED = "session_expired"  # the session outlived its TTL or idle time
    INTERNAL_ERROR = "internal_error"  # a bug in the service (500)
    # Between the caller and the service.
    SERVICE_UNREACHABLE = "service_unreachable"  # no answer: refused, reset, timed out
    DEADLINE_EXCEEDED = "deadline_exceeded"  # the caller's deadline ran out while retrying
    # The grader.
    GRADER_TIMEOUT = "grader_timeout"  # the equivalence check ran past its deadline
    GRADER_ERROR = "grader_error"  # the grader itself failed (a crashed worker)
    GRADER_BAD_INPUT = "grader_bad_input"  # no gradable record: not JSON, no format, no gold


KIND: dict[FailureCode, OutcomeKind] = {
    code: OutcomeKind.GRADER if code.startswith("grader_") else OutcomeKind.INFRASTRUCTURE
    for code in FailureCode
}
"""The outcome each failure code belongs to."""

RETRYABLE: frozenset[FailureCode] = frozenset(
    {
        FailureCode.SANDBOX_LOST,
        FailureCode.SANDBOX_UNAVAILABLE,
        FailureCode.ENGINE_UNAVAILABLE,
        FailureCode.OVERLOADED,
        FailureCode.SERVICE_UNREACHABLE,
        FailureCode.GRADER_ERROR,
    }
)
"""Codes for which the same request sent again may succeed. The others will not: a lost or
expired session is gone, a deadline is spent, a bug or a slow grading input stays what it is."""


@dataclass(frozen=True)
class Failure:
    """Why an answer carries no verdict of the code's."""

    code: FailureCode
    retryable: bool

    @classmethod
    def of(cls, code: FailureCode | str) -> Failure:
        """The failure for ``code``, retryable as :data:`RETRYABLE` says."""
        code = FailureCode(code)
        return cls(code, code in RETRYABLE)

    @property
    def outcome(self) -> OutcomeKind:
        return KIND[self.code]

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code.value, "retryable": self.retryable}


def outcome_fields(failure: Failure | None) -> dict[str, Any]:
    """The wire fields ``outcome`` and ``failure`` for an answer (``None``: the code's)."""
    if failure is None:
        return {"outcome": OutcomeKind.CODE.value, "failure": None}
    return {"outcome": failure.outcome.value, "failure": failure.as_dict()}
