"""The client's errors, each saying whose failure it is (``failure``, ``outcome``).

A trainer reads ``outcome`` to tell an infrastructure failure (no reward: mask the sample) from
the code's own verdict; :func:`boxed_client.reward_or_none` does it for one answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from boxed_client.outcome import Failure, FailureCode, OutcomeKind

if TYPE_CHECKING:
    from boxed_client.results import ExecuteResult


class BoxedError(Exception):
    """Base class of every error raised by this client.

    ``failure`` and ``outcome`` say whose failure it is, so that a trainer never turns an
    infrastructure failure into a reward: ``outcome`` is ``"infrastructure"`` or ``"grader"``
    with a :class:`~boxed_client.outcome.Failure` (no reward), ``"code"`` when the code's own act
    caused it (a session its code ended), ``None`` when it is nobody's verdict (the caller's
    own mistake, a 4xx; a misused client).
    """

    def __init__(
        self,
        *args: object,
        failure: Failure | None = None,
        outcome: OutcomeKind | str | None = None,
    ) -> None:
        super().__init__(*args)
        self.failure = failure
        if outcome is None and failure is not None:
            outcome = failure.outcome
        self.outcome = OutcomeKind(outcome) if outcome is not None else None


class BoxedHTTPError(BoxedError):
    """The server answered with an error status that is not retried, or retries ran out.

    ``detail`` is the server's ``detail`` field, one line saying what went wrong; ``errors`` is
    its list of problems of the body (``{"loc", "msg", "type"}`` each; empty for other errors);
    ``request_id`` is the ``X-Request-ID`` the client sent, to find the call in server logs;
    ``failure`` and ``outcome`` are the body's (a 5xx or 429 without them, from a proxy say,
    gets the failure its status stands for).
    """

    def __init__(
        self,
        status_code: int,
        detail: Any,
        *,
        errors: Sequence[Mapping[str, Any]] = (),
        method: str = "",
        url: str = "",
        retry_after: float | None = None,
        request_id: str | None = None,
        failure: Failure | None = None,
        outcome: OutcomeKind | str | None = None,
    ) -> None:
        self.status_code = status_code
        self.request_id = request_id
        self.detail = detail
        self.errors = [dict(e) for e in errors]
        self.method = method
        self.url = url
        self.retry_after = retry_after
        super().__init__(
            f"{method} {url} -> {status_code}: {self.message}".strip(),
            failure=failure,
            outcome=outcome,
        )

    @property
    def message(self) -> str:
        """The server's detail on one line (an older server's list of errors flattened)."""
        return format_detail(self.detail)


class SessionLost(BoxedHTTPError):
    """410 for a session the infrastructure lost (``failure.code``: ``session_lost``, its
    sandbox failed; ``session_expired``, it outlived its TTL): no reward. A session its own
    code ended (``sys.exit``, a limit) answers a plain :class:`BoxedHTTPError` 410 with
    ``outcome == "code"`` instead."""


class BoxedUnavailable(BoxedError):
    """No answer: transport errors until the attempts (``failure.code ==
    "service_unreachable"``) or the deadline (``"deadline_exceeded"``) ran out, or
    :meth:`Client.wait_until_ready` timed out (``"service_unreachable"``)."""

    def __init__(self, *args: object, failure: Failure | None = None) -> None:
        super().__init__(*args, failure=failure or Failure.of(FailureCode.SERVICE_UNREACHABLE))


class SessionUnreachable(BoxedUnavailable):
    """The server holding a session did not answer within the client's ``session_timeout``
    (or dropped a call that may have run): ``failure.code == "service_unreachable"``. The
    session is never made again elsewhere; its state lives only on that server."""


class BoxedBatchError(BoxedError):
    """Some items of :meth:`Client.execute_many` failed. Nothing is lost: ``results`` holds every
    item in input order, an :class:`ExecuteResult` or the :class:`BoxedError` of that item."""

    def __init__(self, results: list[ExecuteResult | BoxedError]) -> None:
        self.results = results
        errors = self.errors
        super().__init__(f"{len(errors)} of {len(results)} items failed; first: {errors[0][1]}")

    @property
    def errors(self) -> list[tuple[int, BoxedError]]:
        """``(index, error)`` of each failed item."""
        return [(i, r) for i, r in enumerate(self.results) if isinstance(r, BoxedError)]


def format_detail(detail: Any) -> str:
    """The detail in one line; servers before the one error shape sent pydantic's list."""
    if isinstance(detail, list):
        parts = []
        for err in detail:
            if isinstance(err, Mapping) and "msg" in err:
                loc = ".".join(str(p) for p in err.get("loc", ()))
                parts.append(f"{loc}: {err['msg']}" if loc else str(err["msg"]))
            else:
                parts.append(str(err))
        return "; ".join(parts)
    return str(detail)
