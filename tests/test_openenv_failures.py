"""What the OpenEnv environment makes of boxed's errors and of a grade that decides nothing,
and what its client makes of an error message: the mapping alone (the faults themselves are
played against a real boxed in tests/test_openenv.py)."""

from __future__ import annotations

import os

import pytest

from exec_server.client import BoxedError, BoxedHTTPError, BoxedUnavailable
from scorer.outcome import Failure, FailureCode, OutcomeKind
from scorer.verdict import Reason, Verdict

if not os.environ.get("CI"):  # CI installs the extra: there a missing one fails loudly
    pytest.importorskip("openenv.core", reason="pip install boxed[openenv]")
from boxed_openenv.client import EnvServerError, error_of  # noqa: E402
from boxed_openenv.failures import (  # noqa: E402
    EnvUnavailable,
    failure_of,
    grader_failure,
    retry_after_of,
)
from boxed_openenv.server import attempts_within  # noqa: E402


def http_error(status: int, detail: str = "x", retry_after: float | None = None) -> BoxedHTTPError:
    return BoxedHTTPError(status, detail, method="POST", url="/sessions", retry_after=retry_after)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (http_error(410, "session abc is lost: its sandbox failed: gone"), "session_lost"),
        (http_error(410, "session abc expired: idle for 300 s"), "session_expired"),
        (http_error(429), "overloaded"),
        (http_error(503), "sandbox_unavailable"),
        (http_error(502), "service_unreachable"),
        (http_error(500), "internal_error"),
        (http_error(422, "memory_mb: above the maximum"), "internal_error"),
        (BoxedUnavailable("POST /sessions: ConnectError"), "service_unreachable"),
    ],
)
def test_every_boxed_error_is_a_failure_that_is_not_the_codes(error: BoxedError, code: str) -> None:
    failure = failure_of(error)
    assert failure is not None and failure.code == code
    assert failure.outcome == OutcomeKind.INFRASTRUCTURE


def test_a_failure_the_client_carries_is_believed() -> None:
    error = http_error(503)
    error.failure = Failure.of(FailureCode.ENGINE_UNAVAILABLE)  # type: ignore[attr-defined]
    assert failure_of(error) == Failure.of(FailureCode.ENGINE_UNAVAILABLE)
    ended = http_error(410, "session abc is lost: the interpreter exited with code 1")
    ended.outcome = OutcomeKind.CODE  # type: ignore[attr-defined]  # its own code ended it
    assert failure_of(ended) is None


def test_retry_after_is_boxeds_else_one_second() -> None:
    assert retry_after_of(http_error(429, retry_after=3.0)) == 3.0
    assert retry_after_of(http_error(429)) == 1.0
    assert retry_after_of(BoxedUnavailable("down")) == 1.0


def test_only_a_grade_that_decided_nothing_is_a_grader_failure() -> None:
    assert grader_failure(Verdict(False, Reason.TIMEOUT)) == Failure.of(FailureCode.GRADER_TIMEOUT)
    assert grader_failure(Verdict(False, Reason.ERROR)) == Failure.of(FailureCode.GRADER_ERROR)
    assert grader_failure(Verdict(False, Reason.NOT_EQUAL)) is None
    assert grader_failure(Verdict(True, Reason.STRING_MATCH)) is None


def test_an_error_message_with_a_failure_raises_env_unavailable() -> None:
    data = {
        "message": "boxed gave no session",
        "code": "EXECUTION_ERROR",
        "outcome": "infrastructure",
        "failure": {"code": "overloaded", "retryable": True},
        "retry_after": 2.0,
    }
    error = error_of(data)
    assert isinstance(error, EnvUnavailable) and isinstance(error, RuntimeError)
    assert (error.failure.code, error.retry_after, str(error)) == (
        "overloaded",
        2.0,
        "boxed gave no session",
    )
    other = error_of({"message": "Invalid message", "code": "VALIDATION_ERROR"})
    assert isinstance(other, EnvServerError) and other.code == "VALIDATION_ERROR"


@pytest.mark.parametrize("deadline", [2.0, 10.0, 60.0])
def test_the_attempts_fit_in_the_deadline_at_worst(deadline: float) -> None:
    connect = min(1.0, deadline / 10)
    n = attempts_within(deadline, connect)
    worst = n * connect + sum(min(5.0, 0.1 * 2**k) for k in range(n - 1))
    assert n >= 2 and worst <= deadline
    assert worst + connect + min(5.0, 0.1 * 2 ** (n - 1)) > deadline  # one more would not fit
