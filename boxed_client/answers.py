"""Reading an HTTP answer: its JSON, its ``Retry-After``, and the error it stands for.

Every error status becomes a :class:`~boxed_client.errors.BoxedHTTPError` carrying the body's
``failure`` and ``outcome``; a 429 or 5xx whose body names none (a proxy's page, an older
server) gets the failure its status stands for: never the code's.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

import httpx

from boxed_client.errors import BoxedError, BoxedHTTPError, SessionLost
from boxed_client.outcome import Failure, FailureCode, OutcomeKind


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds (a number, or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def read_problem(response: httpx.Response) -> tuple[Any, list[Mapping[str, Any]], Any]:
    """``detail``, ``errors`` and the JSON body of an error answer (``{"detail": str,
    "errors": [...], ...}``); a body of another shape (a proxy's page, say) is the detail."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:1000], [], None
    if not isinstance(body, dict):
        return body, [], body
    errors = body.get("errors")
    errors = [e for e in errors if isinstance(e, Mapping)] if isinstance(errors, list) else []
    return body.get("detail", body), errors, body


# The failure an error status stands for when its body names none (a proxy's answer, an older
# server): every 5xx and 429 is the infrastructure's, never the code's.
STATUS_FAILURE = {429: FailureCode.OVERLOADED, 500: FailureCode.INTERNAL_ERROR}


def attribution(body: Any, status: int) -> tuple[Failure | None, OutcomeKind | None]:
    """``failure`` and ``outcome`` of an answer's JSON; for a 429 or 5xx that names no known
    failure, the one its status stands for."""
    failure: Failure | None = None
    outcome: OutcomeKind | None = None
    if isinstance(body, Mapping):
        raw = body.get("failure")
        if isinstance(raw, Mapping) and raw.get("code") in FailureCode._value2member_map_:
            code = FailureCode(raw["code"])
            retryable = raw.get("retryable")
            failure = Failure(code, retryable) if isinstance(retryable, bool) else Failure.of(code)
        if body.get("outcome") in OutcomeKind._value2member_map_:
            outcome = OutcomeKind(body["outcome"])
    if failure is None and (status == 429 or status >= 500):
        failure = Failure.of(STATUS_FAILURE.get(status, FailureCode.SERVICE_UNREACHABLE))
        outcome = failure.outcome
    if failure is not None and outcome is None:
        outcome = failure.outcome
    return failure, outcome


def http_error(method: str, response: httpx.Response, request_id: str) -> BoxedHTTPError:
    """The error an error answer stands for: :class:`SessionLost` for a 410 whose failure is
    the infrastructure's, else :class:`BoxedHTTPError`."""
    detail, errors, body = read_problem(response)
    failure, outcome = attribution(body, response.status_code)
    lost = response.status_code == 410 and outcome == OutcomeKind.INFRASTRUCTURE
    return (SessionLost if lost else BoxedHTTPError)(
        response.status_code,
        detail,
        errors=errors,
        method=method,
        url=str(response.request.url),
        retry_after=parse_retry_after(response.headers.get("Retry-After")),
        request_id=request_id,
        failure=failure,
        outcome=outcome,
    )


def json_of(response: httpx.Response) -> Any:
    """The answer's JSON; an answer that is not JSON is a :class:`BoxedError` (no verdict)."""
    try:
        return response.json()
    except ValueError as exc:
        raise BoxedError(
            f"{response.request.method} {response.request.url} -> {response.status_code}: "
            f"answer is not JSON: {response.text[:200]!r}"
        ) from exc
