"""Failures that are not the code's, as the environment meets them and as its callers see them.

The environment reaches boxed through ``boxed_client``; every error of that client is
turned here into a :class:`~scorer.outcome.Failure` (``failure_of``), and a grader's verdict
that decides nothing into one too (``grader_failure``). When the environment cannot act at
all (boxed unreachable or overloaded) it raises :class:`EnvUnavailable`: the server answers it
503 with ``Retry-After`` over HTTP and a typed error message over the WebSocket, and
``BoxedEnvClient`` raises it again on the caller's side.
"""

from __future__ import annotations

from boxed_client import BoxedError, BoxedHTTPError
from scorer.outcome import Failure, FailureCode, OutcomeKind
from scorer.verdict import Reason, Verdict

DEFAULT_RETRY_AFTER = 1.0  # seconds, when boxed gave no Retry-After of its own

# A status without a failure of its own in the body (an older server, a proxy): what it means.
_BY_STATUS = {
    429: FailureCode.OVERLOADED,
    502: FailureCode.SERVICE_UNREACHABLE,
    503: FailureCode.SANDBOX_UNAVAILABLE,
    504: FailureCode.SERVICE_UNREACHABLE,
}


class EnvUnavailable(RuntimeError):
    """The environment could not act: boxed was unreachable or overloaded, or a session
    call's answer was lost. Not the code's doing, so no reward: mask the sample and, when
    ``failure.retryable``, try again (a new episode) after ``retry_after`` seconds.

    A ``RuntimeError`` so that code written against openenv-core's client (which raises a bare
    ``RuntimeError`` for every server error) still catches it."""

    def __init__(
        self, detail: str, failure: Failure, retry_after: float = DEFAULT_RETRY_AFTER
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.failure = failure
        self.retry_after = retry_after

    @property
    def outcome(self) -> OutcomeKind:
        return self.failure.outcome


def failure_of(exc: BoxedError) -> Failure | None:
    """The failure a boxed client error stands for; None when the code's own act caused it
    (a 410 for a session its code ended).

    A client that carries the answer's ``failure`` (``exc.failure``) is believed; else the
    status says it: 410 is a lost (or expired) session, 429 overload, 503 no sandbox, any
    other status boxed refusing what the environment asked (its configuration: never the
    code's), and no answer at all an unreachable service."""
    known = getattr(exc, "failure", None)
    if isinstance(known, Failure):
        return known
    if getattr(exc, "outcome", None) == OutcomeKind.CODE:
        return None
    if not isinstance(exc, BoxedHTTPError):
        return Failure.of(FailureCode.SERVICE_UNREACHABLE)
    if exc.status_code == 410:
        expired = " expired: " in exc.message  # sessions.py: "session <id> expired: <why>"
        return Failure.of(FailureCode.SESSION_EXPIRED if expired else FailureCode.SESSION_LOST)
    return Failure.of(_BY_STATUS.get(exc.status_code, FailureCode.INTERNAL_ERROR))


def retry_after_of(exc: BoxedError) -> float:
    """Seconds boxed asked callers to wait (its ``Retry-After``), else the default."""
    retry_after = exc.retry_after if isinstance(exc, BoxedHTTPError) else None
    return retry_after if retry_after is not None else DEFAULT_RETRY_AFTER


def grader_failure(verdict: Verdict) -> Failure | None:
    """The failure of a check that decided nothing (the grader timed out or crashed): such
    a verdict says ``correct=False`` but is no grade of the answer."""
    if verdict.reason == Reason.TIMEOUT:
        return Failure.of(FailureCode.GRADER_TIMEOUT)
    if verdict.reason == Reason.ERROR:
        return Failure.of(FailureCode.GRADER_ERROR)
    return None
