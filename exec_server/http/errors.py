"""Every error answer: one table from exception to HTTP status, one body shape.

Routes raise; nothing here is route-specific. ``problem(exc)`` is the answer to any exception:
the exception handlers of the app send it, and ``/execute/batch`` puts it in the failing item,
so a single request and a batch item always agree. An exception in no table is a bug: a 500
that is logged with its traceback, never a 4xx that passes for the caller's mistake.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from scorer.api import ScoreInputError
from scorer.outcome import Failure, FailureCode, outcome_fields

from .. import metrics
from ..admission import Overloaded
from ..models import FieldError, ItemError
from ..request_errors import RequestError, ServiceUnavailable
from ..sessions import SessionBusy, SessionGone, SessionNotFound

log = logging.getLogger("boxed.http")


class InvalidInput(Exception):
    """A request body (or a batch item) failed validation: 422 listing each problem."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        self.detail = "; ".join(_where(e.loc) + e.msg for e in errors) or "invalid request"
        super().__init__(self.detail)


class RetryAtGateway(Exception):
    """``/run_code``'s answer to a retryable infrastructure failure: 504 with Retry-After, the
    one status verl's SandboxFusion client retries (it scores any other as a failed test)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


@dataclass(frozen=True)
class Problem:
    """An error answer: the status and the body of :class:`~exec_server.models.ErrorResponse`."""

    status: int
    detail: str
    errors: list[FieldError] = field(default_factory=list)
    headers: Mapping[str, str] = field(default_factory=dict)
    failure: Failure | None = None  # not the caller's mistake: whose failure it is
    attributed: bool = False  # outcome and failure are set (else: the caller's mistake)

    def attribution(self) -> dict[str, Any]:
        """``outcome`` and ``failure`` (both null for a caller's mistake, which is no result)."""
        if not self.attributed:
            return {"outcome": None, "failure": None}
        return outcome_fields(self.failure)

    def body(self) -> dict[str, Any]:
        errors = [e.model_dump() for e in self.errors]
        return {"detail": self.detail, "errors": errors, **self.attribution()}

    def as_item(self) -> ItemError:
        return ItemError(
            status_code=self.status, detail=self.detail, errors=self.errors, **self.attribution()
        )


STATUS: dict[type[Exception], int | None] = {
    InvalidInput: 422,  # a body or batch item that does not fit its model
    ScoreInputError: 422,  # a trajectory or grading option the scorer cannot use
    RequestError: None,  # a limit the engine refuses: its own 413 or 422
    HTTPException: None,  # the framework's and ours (401, 404, 415...): its own status
    SessionNotFound: 404,  # no such session (never made, or deleted)
    SessionBusy: 409,  # a call of the session is still running
    SessionGone: 410,  # the session is lost or expired: the detail says why
    Overloaded: 429,  # no slot now: retry after Retry-After
    ServiceUnavailable: 503,  # the engine cannot run code now: retry after Retry-After
    RetryAtGateway: 504,  # /run_code's 429 and 503, as verl's client retries them
}
"""The one table: what each exception answers (``None``: the exception's ``status_code``).
Any exception not in it is a bug, answered 500."""
RETRY_LATER = frozenset({429, 503, 504})
_PREFIX = {Overloaded: "overloaded: ", ServiceUnavailable: "service unavailable: "}


def status_of(exc: Exception) -> int:
    for cls, status in STATUS.items():
        if isinstance(exc, cls):
            return exc.status_code if status is None else status  # type: ignore[attr-defined]
    return 500


def failure_of(exc: Exception) -> tuple[bool, Failure | None]:
    """Whether ``exc`` is a result at all (not the caller's mistake), and whose failure it is
    (``None``: the code's own doing, as a session its code ended)."""
    if isinstance(exc, SessionGone):
        return True, exc.failure
    code = getattr(exc, "code", None)
    if isinstance(exc, ServiceUnavailable | Overloaded) and isinstance(code, FailureCode):
        return True, Failure.of(code)
    if status_of(exc) == 500:
        return True, Failure.of(FailureCode.INTERNAL_ERROR)
    return False, None


def problem(exc: Exception) -> Problem:
    """The answer to ``exc``, whichever route raised it."""
    if isinstance(exc, RetryAtGateway):
        return replace(problem(exc.cause), status=504)
    status = status_of(exc)
    attributed, failure = failure_of(exc)
    if status == 500:
        detail = "internal error: the service log has the details"
        return Problem(500, detail, failure=failure, attributed=True)
    if isinstance(exc, InvalidInput):
        return Problem(status, exc.detail, exc.errors)
    if isinstance(exc, RequestError) and exc.field is not None:
        about = FieldError(loc=["body", exc.field], msg=clean(exc.detail), type="limit")
        return Problem(status, clean(exc.detail), [about])
    if isinstance(exc, HTTPException):
        return Problem(status, clean(str(exc.detail)), headers=exc.headers or {})
    prefix = next((p for cls, p in _PREFIX.items() if isinstance(exc, cls)), "")
    return Problem(status, clean(prefix + str(exc)), failure=failure, attributed=attributed)


def validated(model: type[BaseModel], data: Any) -> Any:
    """``model`` from caller data; :class:`InvalidInput` when it does not fit (locations
    relative to ``data``)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(field_errors(exc.errors(), model)) from None


def field_errors(
    errors: Iterable[Mapping[str, Any]],
    model: type[BaseModel] | None = None,
    content_type: str | None = None,
) -> list[FieldError]:
    """pydantic's errors made fit to send: each with where and why, never the offending value
    (it may not even be encodable: NaN, a lone surrogate), messages that say what to do."""
    out = []
    for e in errors:
        loc = [p if isinstance(p, int) else clean(str(p)) for p in e.get("loc", ())]
        kind = str(e.get("type", "value_error"))
        msg = clean(str(e.get("msg", "")))
        if kind == "extra_forbidden" and model is not None and loc:
            msg = _unknown_field(str(loc[-1]), model)
        elif kind == "json_invalid":
            reason = (e.get("ctx") or {}).get("error", "")
            at = f" at character {loc[1]}" if len(loc) > 1 else ""
            msg = f"the body is not valid JSON ({clean(str(reason))}{at})"
            loc = ["body"]
            if content_type and "json" not in content_type:
                msg += f"; it was sent with Content-Type: {clean(content_type)}"
        elif kind == "input_and_stdin":
            loc = [*loc, "stdin"]
        elif loc == ["body"]:
            msg = "the body is empty" if kind == "missing" else "the body must be a JSON object"
            msg += ', e.g. {"code": "print(1)"}' if model and "code" in model.model_fields else ""
        elif kind == "missing":
            msg = "field required"
        elif kind == "string_unicode":
            msg = "not valid Unicode text (it holds a lone surrogate such as \\ud800)"
        out.append(FieldError(loc=loc, msg=msg, type=kind))
    return out


def accepted_fields(model: type[BaseModel]) -> list[str]:
    """The body keys ``model`` reads (an alias after its field's name)."""
    names = []
    for name, info in model.model_fields.items():
        names.append(name if info.alias in (None, name) else f"{name} (or {info.alias})")
    return names


def _unknown_field(name: str, model: type[BaseModel]) -> str:
    known = [*model.model_fields, *(i.alias for i in model.model_fields.values() if i.alias)]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    # a short name the unknown one spells out (``expression`` for ``expr``) is close too
    close = close or [k for k in known if len(k) >= 3 and name.lower().startswith(k)][:1]
    hint = f"; did you mean {close[0]!r}?" if close else "."
    return f"unknown field{hint} Accepted fields: {', '.join(accepted_fields(model))}"


def _where(loc: Sequence[str | int]) -> str:
    """``timeout: `` for a message about ``body.timeout`` (``body`` alone: its message says)."""
    path = list(loc[1:] if loc and loc[0] == "body" else loc)
    return ".".join(str(p) for p in path) + ": " if path else ""


def clean(text: str) -> str:
    """``text`` as valid UTF-8 (lone surrogates spelled out), so an answer always renders."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _route_label(request: Request) -> str:
    """The route's path, or ``unmatched``: a label per unknown path would let any caller grow
    the metrics without bound."""
    route = request.scope.get("route")
    return getattr(route, "path", None) or "unmatched"


def install(app: FastAPI) -> None:
    """Answer every exception with :func:`problem`: the same body shape on every route."""

    async def answer(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, RequestValidationError):
            exc = InvalidInput(
                field_errors(exc.errors(), content_type=request.headers.get("content-type"))
            )
        p = problem(exc)
        if p.status == 500:
            # the server logs the traceback (Starlette re-raises after this answer is sent)
            log.error(
                "answered 500 to %s %s (X-Request-ID %s): %s: %s",
                request.method,
                request.url.path,
                request.headers.get("x-request-id", "-"),
                type(exc).__name__,
                exc,
            )
        elif isinstance(exc, ServiceUnavailable | RetryAtGateway):  # sessions log their own
            log.warning(
                "answered %d to %s %s (X-Request-ID %s): %s",
                p.status,
                request.method,
                request.url.path,
                request.headers.get("x-request-id", "-"),
                p.detail,
            )
        headers = dict(p.headers)
        if p.status in RETRY_LATER:
            headers["Retry-After"] = str(request.app.state.settings.retry_after)
        metrics.count_request(_route_label(request), str(p.status))
        return JSONResponse(p.body(), status_code=p.status, headers=headers)

    for cls in (RequestValidationError, *STATUS, Exception):
        app.add_exception_handler(cls, answer)
