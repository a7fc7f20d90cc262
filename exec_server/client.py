"""Python client for the boxed service, sync (:class:`Client`) and async (:class:`AsyncClient`).

Built for RL environments that call the service thousands of times a minute:

* pooled ``httpx`` clients per :class:`Client` for its whole life (no connection per call),
  at most 16 connections each, taken in turn: httpcore does work in proportion to a pool's
  busy connections on every request, so one pool of 64 cost the client 11-19 ms of CPU per
  request here against about 2 ms for four pools of 16 (``bench/bench_client.py``);
* a client-side concurrency cap, so a burst of rollouts queues here instead of flooding the server;
* retries with jittered exponential backoff on transport errors, on 429/502/503/504 and on any
  answer whose ``failure.retryable`` is true, honouring ``Retry-After``, until the call's
  deadline and never past it (but for a run's own time limit) -- never on the code's own
  failures (a 200 with ``status="error"`` is a result) and never on other 4xx (a caller
  mistake: :class:`BoxedHTTPError` with the detail);
* every error carries ``failure`` and ``outcome`` (``scorer.outcome``), so a trainer can tell an
  infrastructure failure (no reward) from the code's own verdict: :func:`reward_or_none`;
* several server URLs, used round-robin (``routing="spread"``) or first healthy first
  (``routing="ordered"``: a node's own service, then the others); a URL that fails with a
  transport error is set aside for a cool-off period and the request moves to another URL at
  once. A session stays on the server that made it: when that server does not answer, its
  calls fail within ``session_timeout`` (:class:`SessionUnreachable`), never moved elsewhere.

Only ``httpx`` and ``pydantic`` are needed; importing this module does not pull in FastAPI or
Docker.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeAlias, overload

import httpx
from pydantic import BaseModel, ConfigDict, Field

from exec_server import __version__
from exec_server.models import (
    Attributed,
    CalculateResponse,
    ExecuteRequest,
    ExecuteResponse,
    JudgeResponse,
    SessionExecuteResponse,
    SessionInfo,
)
from scorer.outcome import Failure, FailureCode, OutcomeKind
from scorer.row import RowFailure
from scorer.verdict import DEFAULT_TIMEOUT

__all__ = [
    "AsyncClient",
    "AsyncSession",
    "BoxedBatchError",
    "BoxedError",
    "BoxedHTTPError",
    "BoxedUnavailable",
    "CalculateResult",
    "Client",
    "ExecuteItem",
    "ExecuteResult",
    "JudgeResult",
    "ScoreBatch",
    "ScoreResult",
    "Session",
    "SessionInfo",
    "SessionLost",
    "SessionResult",
    "SessionUnreachable",
    "reward_or_none",
]

DEFAULT_URL = "http://localhost:5002"
# The scorer's default time limit per answer check.
SERVER_SCORE_TIMEOUT = DEFAULT_TIMEOUT
RETRY_STATUSES = frozenset({429, 502, 503, 504})
Routing: TypeAlias = Literal["spread", "ordered"]
ROUTINGS: tuple[Routing, ...] = ("spread", "ordered")
# Timeouts of the wait for an answer are not signs of a dead server (the snippet or the queue may
# simply be slow), so they are retried but do not set the URL aside.
_SLOW_ERRORS = (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)
# Errors before the request left: always safe to send again.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# The server retries a run whose sandbox was lost once, on a fresh sandbox: one answer may take
# twice the run's wall limit plus this (exec_server/runs.py, RETRY_MARGIN).
SERVER_RETRY_MARGIN = 5.0
# The server's default limits (settings.py), for a call that states none: a snippet's or a
# test's wall limit, and a compile step's.
SERVER_RUN_TIMEOUT = 5.0
SERVER_COMPILE_TIMEOUT = 15.0
# Seconds a run takes beyond its own limit at most to start and report (a judge: once, plus a
# little per test).
RUN_START, PER_TEST_START = 1.0, 0.2
# Times a 200 whose failure is retryable (a crashed grader worker, say) is sent again: the
# service already retried it once, and an input that crashes it every time must not have the
# client hammer it until the deadline.
ANSWER_RETRIES = 2
# The least time left that is worth one more attempt: a sleep is cut to leave it, and a call
# with less left gives up rather than send a request that cannot be answered in time.
LAST_TRY = 0.05
# Backoff doubles per attempt up to backoff_max; the exponent is capped so that a call with no
# attempt bound never overflows a float.
_MAX_DOUBLINGS = 30


# --------------------------------------------------------------------------------------- errors


class BoxedError(Exception):
    """Base class of every error raised by this client.

    ``failure`` and ``outcome`` say whose failure it is, so that a trainer never turns an
    infrastructure failure into a reward: ``outcome`` is ``"infrastructure"`` or ``"grader"``
    with a :class:`~scorer.outcome.Failure` (no reward), ``"code"`` when the code's own act
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
        return _format_detail(self.detail)


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


def _format_detail(detail: Any) -> str:
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


# -------------------------------------------------------------------------------------- results


class ExecuteResult(ExecuteResponse):
    """What one snippet did (the server's ``ExecuteResponse``). A non-``ok`` status is the
    code's own outcome, not a client error."""

    @property
    def ok(self) -> bool:
        """The snippet ran to completion without an error, timeout or limit."""
        return self.status == "ok"


class SessionResult(SessionExecuteResponse):
    """What one call of a session did, and the session's time left (``session_lost`` says
    why the session ended, when this call ended it)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class JudgeResult(JudgeResponse):
    """``POST /judge``'s answer, with the share of tests passed (the usual code-RL reward)."""

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    @property
    def pass_rate(self) -> float:
        """``passed / total`` (a compile error passes none)."""
        return self.passed / self.total if self.total else 0.0


def _judge_body(
    code: str, tests: Sequence[Mapping[str, Any]] | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "tests": [dict(t) for t in tests or []]}
    body.update((k, v) for k, v in options.items() if v is not None)
    return body


class CalculateResult(CalculateResponse):
    """Value of an arithmetic expression, or why it has none."""

    @property
    def ok(self) -> bool:
        return self.error is None


class ScoreResult(BaseModel):
    """Grade of one trajectory: the fields of the scorer's one row schema
    (``scorer.row.GradedRow``) a client reads, each with a default so an older server's row
    still parses; the row's other fields are kept as extras (``model_extra``). ``reward`` is
    ``None`` only on an ``error`` row; ``reasons`` are stable codes."""

    model_config = ConfigDict(extra="allow")

    reward: float | None
    correct: bool = False
    pred: str | None = None
    gold: Any = None
    status: str = ""
    reasons: list[str] = Field(default_factory=list)
    tool_calls: int = 0
    error: str | None = None
    # "grader" (with its failure) when the grader could not decide: no reward.
    outcome: OutcomeKind = OutcomeKind.CODE
    failure: RowFailure | None = None


class ScoreBatch(BaseModel):
    """Answer of ``score_many``: one row per trajectory (an Atropos group gives one per
    rollout), in item order, and the batch summary."""

    results: list[ScoreResult]
    summary: dict[str, Any]


def reward_or_none(
    answer: Attributed | ScoreResult | BoxedError, reward: Callable[[Any], float | None]
) -> float | None:
    """``reward(answer)`` when ``answer`` is the code's own verdict; ``None`` (no reward: mask
    the sample, never a 0) when the infrastructure or the grader failed, whether that came
    back as an answer or was raised. An error that is nobody's verdict (a caller mistake, a
    4xx; a session its own code ended) is raised again: masking it would hide a bug.

    ``reward_or_none(result_or_exc, lambda judged: judged.pass_rate)``;
    ``reward_or_none(row_or_exc, lambda row: row.reward)`` for a :class:`ScoreResult`.
    """
    if isinstance(answer, BoxedError):
        if answer.outcome in (OutcomeKind.INFRASTRUCTURE, OutcomeKind.GRADER):
            return None
        raise answer
    return reward(answer) if answer.outcome == OutcomeKind.CODE else None


ExecuteItem: TypeAlias = str | ExecuteRequest | Mapping[str, Any]
"""One item of ``execute_many``: code alone, an :class:`ExecuteRequest`, or its JSON as a dict."""


# ------------------------------------------------------------------------------- shared machinery


def _parse_urls(urls: str | Sequence[str] | None) -> list[str]:
    if urls is None:
        urls = os.environ.get("BOXED_URL") or DEFAULT_URL
    if isinstance(urls, str):
        urls = urls.split(",")
    out = []
    for url in urls:
        url = url.strip().rstrip("/")
        if url:
            out.append(url if "://" in url else f"http://{url}")
    if not out:
        raise ValueError("no boxed server URL given")
    return out


def _parse_retry_after(value: str | None) -> float | None:
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


def _execute_body(item: ExecuteItem) -> dict[str, Any]:
    """JSON body of one item. Validation is left to the server so that every caller mistake comes
    back the same way: a 422 with the server's detail."""
    if isinstance(item, str):
        return {"code": item, "input": ""}
    if isinstance(item, ExecuteRequest):
        return item.model_dump(exclude_none=True)
    if isinstance(item, Mapping):
        return {k: v for k, v in item.items() if v is not None}
    raise TypeError(f"execute_many items are str, dict or ExecuteRequest, not {type(item)!r}")


def _score_options(
    body: dict[str, Any],
    preset: str | None,
    rewards: Mapping[str, float] | None,
    timeout: float | None,
) -> dict[str, Any]:
    for name, value in (("preset", preset), ("rewards", rewards), ("timeout", timeout)):
        if value is not None:
            body[name] = dict(value) if isinstance(value, Mapping) else value
    return body


def _score_body(
    record: Mapping[str, Any] | None, response: str | None, answer: Any
) -> dict[str, Any]:
    if record is not None:
        return dict(record)
    if response is not None:
        return {"response": response, "answer": answer}
    raise TypeError("score() needs a record, or response= and answer=")


CONNECTIONS_PER_POOL = 16  # connections of one httpx client (see the module docstring)


class _Base:
    """Configuration, URL choice and the retry policy, shared by the sync and async clients.

    The retry loop itself lives in each client (one blocks, one awaits); every decision it makes
    comes from :class:`_Attempts`.
    """

    def __init__(
        self,
        urls: str | Sequence[str] | None = None,
        *,
        api_key: str | None = None,
        tenant: str | None = None,
        max_concurrency: int = 64,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        read_margin: float = 15.0,
        max_attempts: int | None = None,
        deadline: float | None = 120.0,
        backoff_base: float = 0.1,
        backoff_max: float = 5.0,
        cooloff: float = 5.0,
        session_timeout: float = 10.0,
        routing: Routing | None = None,
    ) -> None:
        """
        Args:
            urls: one URL, several (list or comma-separated); default ``$BOXED_URL``, else
                ``http://localhost:5002``.
            api_key: sent as ``Authorization: Bearer``; default ``$BOXED_API_KEY``.
            tenant: sent as ``X-Boxed-Tenant``, the queue this client's requests wait in
                (the server queues tenants fairly); default ``$BOXED_TENANT``.
            max_concurrency: requests in flight at once from this client (also the connections
                it keeps, in pools of at most 16).
            connect_timeout: seconds to open a connection; short, so dead URLs fail fast.
            read_timeout: seconds to wait for an answer; for ``execute`` with a ``timeout`` it is
                raised to ``2 * timeout + 5 + read_margin`` so the wait outlasts the snippet
                run twice (the server runs it again once if its sandbox is lost; the margin
                covers the server's queue wait, 10 s by default, and start-up).
            max_attempts: HTTP attempts per call, failovers included (``None``: as many as
                the deadline allows).
            deadline: seconds one call may take with all its retries: each connect and each
                wait is cut to what is left, and so is the wait for an answer, but never below
                the time the call gave its code (a run cut short would be no reward, not the
                code's verdict). ``None``: no limit, then ``max_attempts`` is required.
            backoff_base, backoff_max: jittered exponential backoff between attempts.
            cooloff: seconds a URL that failed with a transport error is avoided while others work.
            session_timeout: seconds a session call keeps trying to reach the server holding
                the session before it raises :class:`SessionUnreachable`.
            routing: ``"spread"``: calls go round-robin over the URLs; ``"ordered"``: each call
                goes to the first URL that is neither cooling off nor held by a 429's
                Retry-After (a node's own service first: ``exec_server.ray``); default
                ``$BOXED_ROUTING``, else ``"spread"``.
        """
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if max_attempts is not None and max_attempts < 1:
            raise ValueError("max_attempts must be at least 1 (or None: bounded by the deadline)")
        if deadline is None and max_attempts is None:
            raise ValueError(
                "deadline=None and max_attempts=None would retry a dead service forever: "
                "give a deadline in seconds, or a number of attempts"
            )
        if deadline is not None and deadline <= 0:
            raise ValueError("deadline must be positive seconds (or None)")
        self.urls = _parse_urls(urls)
        self.max_concurrency = max_concurrency
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.read_margin = read_margin
        self.max_attempts = max_attempts
        self.deadline = deadline
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.cooloff = cooloff
        self.session_timeout = session_timeout
        routing = routing or os.environ.get("BOXED_ROUTING") or "spread"
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, not {routing!r}")
        self.routing: Routing = routing
        api_key = api_key if api_key is not None else os.environ.get("BOXED_API_KEY")
        self._headers = {"User-Agent": f"boxed-client/{__version__}"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        tenant = tenant if tenant is not None else os.environ.get("BOXED_TENANT")
        if tenant:
            self._headers["X-Boxed-Tenant"] = tenant
        per_pool = min(max_concurrency, CONNECTIONS_PER_POOL)
        self._pools = -(-max_concurrency // per_pool)  # httpx clients, used in turn
        self._limits = httpx.Limits(
            max_connections=per_pool,
            max_keepalive_connections=per_pool,
            keepalive_expiry=30.0,
        )
        self._lock = threading.Lock()
        self._next = 0
        # Per URL: avoided until (a transport error; a preference only) and held until (the
        # server's Retry-After; honoured).
        self._down_until = [0.0] * len(self.urls)
        self._hold_until = [0.0] * len(self.urls)
        self._open()

    def _open(self) -> None:
        """Create the HTTP client and the concurrency cap (sync or async flavour)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.urls!r})"

    def _exec_read_timeout(self, body: Mapping[str, Any], *, rerun: bool = True) -> float:
        """The wait for an ``/execute`` answer must outlast the snippet's own timeout, twice
        when the server may run it again on a fresh sandbox (``rerun``; never in a session).
        Without a timeout the server's default (5 s) applies, which ``read_timeout``'s
        default (30 s) covers."""
        timeout = body.get("timeout")
        if not isinstance(timeout, int | float):
            return self.read_timeout
        run = 2 * timeout + SERVER_RETRY_MARGIN if rerun else timeout
        return max(self.read_timeout, run + self.read_margin)

    def _judge_read_timeout(self, body: Mapping[str, Any]) -> float:
        """Long enough for every test (and its checker) to use its whole time limit, after
        the longest compile step."""
        default = body.get("timeout")
        default = default if isinstance(default, int | float) else 5.0
        tests = body.get("tests") or [{}]
        per_test = [t.get("timeout") or default for t in tests]
        factor = 2 if body.get("comparison") == "checker" else 1
        # Each test may run twice (once more on a fresh sandbox if its sandbox is lost).
        runs = sum(2 * t * factor + SERVER_RETRY_MARGIN + 1 for t in per_test)
        work = runs + (body.get("compile_timeout") or 60)
        return max(self.read_timeout, work + self.read_margin)

    def _exec_code_time(self, body: Mapping[str, Any]) -> float:
        """Seconds the snippet itself may take: its time limit (the server's default when it
        states none) and its start. A run is never cut shorter by the deadline (below)."""
        timeout = body.get("timeout")
        return (timeout if isinstance(timeout, int | float) else SERVER_RUN_TIMEOUT) + RUN_START

    def _judge_code_time(self, body: Mapping[str, Any]) -> float:
        """Seconds the submission itself may take: its compile step, then every test (and
        its checker) using its whole limit."""
        default = body.get("timeout")
        default = default if isinstance(default, int | float) else SERVER_RUN_TIMEOUT
        tests = body.get("tests") or [{}]
        factor = 2 if body.get("comparison") == "checker" else 1
        runs = sum((t.get("timeout") or default) * factor + PER_TEST_START for t in tests)
        compile_ = body.get("compile_timeout")
        if not isinstance(compile_, int | float):
            interpreted = body.get("language") in (None, "python", "bash")
            compile_ = 0.0 if interpreted else SERVER_COMPILE_TIMEOUT
        return compile_ + runs + RUN_START

    def _score_read_timeout(self, body: Mapping[str, Any], n: int) -> float:
        """Long enough for every answer check of the request to use its whole time limit."""
        per_answer = body.get("timeout")
        if not isinstance(per_answer, int | float):
            per_answer = SERVER_SCORE_TIMEOUT
        return max(self.read_timeout, n * per_answer + self.read_margin)

    def _pick(self, exclude: int | None = None) -> int | None:
        """Next URL (round-robin, or the first in order with ``routing="ordered"``) among those
        neither held nor cooling off; else among those not held; else the one whose hold ends
        first. With ``exclude``, only a fully available URL other than it, or ``None``."""
        now = time.monotonic()
        n = len(self.urls)
        with self._lock:
            first = 0 if self.routing == "ordered" else self._next
            order = [(first + k) % n for k in range(n)]
            free = [
                i
                for i in order
                if self._down_until[i] <= now and self._hold_until[i] <= now and i != exclude
            ]
            if exclude is not None and not free:
                return None
            if not free:
                free = [i for i in order if self._hold_until[i] <= now]
            i = free[0] if free else min(order, key=self._hold_until.__getitem__)
            self._next = (i + 1) % n
            return i

    def _mark_down(self, i: int) -> None:
        with self._lock:
            self._down_until[i] = time.monotonic() + self.cooloff

    def _hold(self, i: int, seconds: float) -> None:
        with self._lock:
            self._hold_until[i] = max(self._hold_until[i], time.monotonic() + seconds)

    def _hold_remaining(self, pin: int | None = None) -> float:
        """Seconds until the first URL's Retry-After hold ends (0 when some URL is not held);
        with ``pin``, until that URL's ends."""
        with self._lock:
            until = min(self._hold_until) if pin is None else self._hold_until[pin]
            return max(0.0, until - time.monotonic())

    def _note_ready(self, reasons: dict[str, str | None]) -> list[str]:
        """URLs whose probe found them ready; they stop cooling off."""
        ready = [url for url, reason in reasons.items() if reason is None]
        with self._lock:
            for url in ready:
                self._down_until[self.urls.index(url)] = 0.0
        return ready

    def _backoff(self, attempt: int) -> float:
        """Jittered exponential wait after ``attempt`` failed: ``uniform(d/2, d)``."""
        cap = min(self.backoff_max, self.backoff_base * 2 ** min(attempt - 1, _MAX_DOUBLINGS))
        return random.uniform(cap / 2, cap)


class _Attempts:
    """The retry policy of one call: which URL next, how long to wait, when to give up.

    Every attempt's timeouts and every wait are cut to the time left before the deadline, so a
    call never runs past it; a call pinned to one server (a session) also gives up reaching it
    after the client's ``session_timeout``.
    """

    def __init__(
        self,
        client: _Base,
        method: str,
        path: str,
        read_timeout: float,
        *,
        pin: int | None = None,
        replay: bool = True,
        session: _SessionBase | None = None,
        code_time: float = 0.0,
    ) -> None:
        self.client = client
        self.method = method
        self.path = path
        # pin: the URL every attempt goes to (a session lives on one server). replay=False: a
        # request that may have reached the server is not sent again (a session call that
        # ran twice would change the session's state twice); refused connections still are.
        self.pin = pin
        self.replay = replay
        self.session = session
        # One id for every attempt of the call, so the server's logs tie retries together.
        self.headers = {"X-Request-ID": uuid.uuid4().hex}
        self.read_timeout = read_timeout
        # The time the code itself may take: the deadline never cuts the wait for an answer
        # shorter, since a run cut short would be no reward instead of the code's verdict, and
        # slow code could learn to escape its verdict that way.
        self.code_time = code_time
        self.start = time.monotonic()
        self.deadline = None if client.deadline is None else self.start + client.deadline
        # A pinned call gives up on its server once it has not answered for session_timeout
        # (never later than the deadline); every answer, a 429 say, starts that wait again.
        self.reach_by: float | None = None
        self._heard_from_server()
        self.attempt = 0
        self.answer_retries = 0
        self.index: int | None = None
        self.answer: Any = None  # the JSON of the answer, once there is one

    def _heard_from_server(self) -> None:
        if self.pin is not None:
            heard = time.monotonic() + self.client.session_timeout
            self.reach_by = _earliest(self.deadline, heard)

    def left(self) -> float | None:
        """Seconds before the deadline (``None``: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def next(self) -> tuple[str, httpx.Timeout]:
        """URL and timeouts of the next attempt, cut to the time left (the wait for an
        answer never below the code's own time)."""
        self.attempt += 1
        if self.index is None:
            self.index = self.client._pick() if self.pin is None else self.pin
        now = time.monotonic()
        read = self.read_timeout
        connect = self.client.connect_timeout
        if self.deadline is not None:
            left = max(0.001, self.deadline - now)
            connect = min(connect, left)
            read = min(read, max(left, self.code_time))
        if self.reach_by is not None:
            connect = max(0.001, min(connect, self.reach_by - now))
        timeout = httpx.Timeout(connect=connect, read=read, write=read, pool=read)
        return self.client.urls[self.index] + self.path, timeout

    def out_of_time(self, waiting_for: str) -> BoxedUnavailable:
        """The error of a call whose deadline ran out while it was ``waiting_for`` something."""
        assert self.client.deadline is not None
        return BoxedUnavailable(
            f"{self.method} {self.path}: the deadline of {self.client.deadline:g} s ran out "
            f"{waiting_for} (attempt {self.attempt})",
            failure=Failure.of(FailureCode.DEADLINE_EXCEEDED),
        )

    def failed(self, exc: httpx.TransportError) -> float:
        """Delay before the next attempt after a transport error; raises
        :class:`BoxedUnavailable` (:class:`SessionUnreachable` for a pinned call) when the
        call must give up."""
        i = self._take_index()
        if not isinstance(exc, _SLOW_ERRORS):
            self.client._mark_down(i)
        url = self.client.urls[i] + self.path
        what = f"{self.method} {url}: {type(exc).__name__}: {exc or 'no detail'}"
        if self.pin is not None:
            delay = None
            if self.replay or isinstance(exc, _NOT_SENT):
                delay = self._schedule(i, until=self.reach_by)
            if delay is None:
                if self.session is not None:
                    self.session._unreachable = True
                waited = time.monotonic() - self.start
                raise SessionUnreachable(
                    f"{what} (the session's server did not answer; gave up after {waited:.1f} s,"
                    f" attempt {self.attempt}; the session is not moved to another server)"
                ) from exc
            return delay
        if not self.replay and not isinstance(exc, _NOT_SENT):
            raise BoxedUnavailable(f"{what} (may have reached the server: not sent again)") from exc
        delay = self._schedule(i)
        if delay is not None:
            return delay
        if self._out_of_attempts():
            raise BoxedUnavailable(f"{what} (attempt {self.attempt} of {self.attempt})") from exc
        raise self.out_of_time(f"retrying; last: {what}") from exc

    def answered(self, response: httpx.Response) -> float | None:
        """``None`` when ``response`` is the call's answer (then in :attr:`answer`); else the
        delay before a retry. Raises :class:`BoxedHTTPError` for an error status that is not
        retried, or when the retries ran out."""
        status = response.status_code
        if status < 400:
            self.answer = None if status == 204 else _json(response)
            if self.session is not None:
                self.session._unreachable = False
            failure, _ = _attribution(self.answer, status)
            if failure is None or not failure.retryable or not self.replay:
                return None
            if self.answer_retries >= ANSWER_RETRIES:
                return None
            self.answer_retries += 1
            # The service says the same request may succeed: try again while there is time,
            # else this answer (its outcome says it is no verdict) is the call's.
            i = self._take_index()
            delay = self._schedule(i)
            if delay is None:
                self.index = i
            return delay
        i = self._take_index()
        self._heard_from_server()
        error = _http_error(self.method, response, self.headers["X-Request-ID"])
        retryable = status in RETRY_STATUSES or (
            error.failure is not None and error.failure.retryable
        )
        if not retryable:
            raise error
        if not self.replay and status not in (429, 503):
            raise error  # a proxy's 502/504, a lost sandbox: the request may have run
        if error.retry_after is not None:
            self.client._hold(i, error.retry_after)
        delay = self._schedule(i)
        if delay is None:
            raise error
        return delay

    def _take_index(self) -> int:
        i, self.index = self.index, None
        assert i is not None
        return i

    @property
    def url_index(self) -> int:
        """The URL that answered (after a successful call)."""
        assert self.index is not None
        return self.index

    def _out_of_attempts(self) -> bool:
        return self.client.max_attempts is not None and self.attempt >= self.client.max_attempts

    def _schedule(self, i: int, until: float | None = None) -> float | None:
        """Seconds to wait before the next attempt after URL ``i`` failed, or ``None`` when
        the call must give up: out of attempts, or no time left before the deadline (and
        ``until``) for one more attempt after the wait -- a ``Retry-After`` hold that ends
        past it gives up at once."""
        if self._out_of_attempts():
            return None
        # Another URL that is up and not asking us to wait: fail over to it at once.
        self.index = self.client._pick(exclude=i) if self.pin is None else None
        end = _earliest(self.deadline, until)
        now = time.monotonic()
        delay = 0.0
        if self.index is None:
            delay = self.client._backoff(self.attempt)
            held = self.client._hold_remaining(self.pin)
            if held > 0:
                if end is not None and now + held > end - LAST_TRY:
                    return None  # the server will not take it before the deadline
                # Every URL asked us to wait: wait as told, plus jitter so that callers told
                # the same do not all come back at the same instant.
                delay = max(delay, held + random.uniform(0, min(1.0, 0.1 * held)))
        if end is not None:
            room = end - now - LAST_TRY
            if room <= 0:
                return None
            delay = min(delay, room)
        return delay


def _earliest(*times: float | None) -> float | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _problem(response: httpx.Response) -> tuple[Any, list[Mapping[str, Any]], Any]:
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
_STATUS_FAILURE = {429: FailureCode.OVERLOADED, 500: FailureCode.INTERNAL_ERROR}


def _attribution(body: Any, status: int) -> tuple[Failure | None, OutcomeKind | None]:
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
        failure = Failure.of(_STATUS_FAILURE.get(status, FailureCode.SERVICE_UNREACHABLE))
        outcome = failure.outcome
    if failure is not None and outcome is None:
        outcome = failure.outcome
    return failure, outcome


def _http_error(method: str, response: httpx.Response, request_id: str) -> BoxedHTTPError:
    """The error an error answer stands for: :class:`SessionLost` for a 410 whose failure is
    the infrastructure's, else :class:`BoxedHTTPError`."""
    detail, errors, body = _problem(response)
    failure, outcome = _attribution(body, response.status_code)
    lost = response.status_code == 410 and outcome == OutcomeKind.INFRASTRUCTURE
    return (SessionLost if lost else BoxedHTTPError)(
        response.status_code,
        detail,
        errors=errors,
        method=method,
        url=str(response.request.url),
        retry_after=_parse_retry_after(response.headers.get("Retry-After")),
        request_id=request_id,
        failure=failure,
        outcome=outcome,
    )


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise BoxedError(
            f"{response.request.method} {response.request.url} -> {response.status_code}: "
            f"answer is not JSON: {response.text[:200]!r}"
        ) from exc


def _collect(
    outcomes: Sequence[ExecuteResult | BoxedError], return_exceptions: bool
) -> list[ExecuteResult | BoxedError]:
    results = list(outcomes)
    if not return_exceptions and any(isinstance(r, BoxedError) for r in results):
        raise BoxedBatchError(results)
    return results


# ------------------------------------------------------------------------------------ sync client


class Client(_Base):
    """Blocking client; safe to share between threads. Use as a context manager or ``close()``.

    Arguments: see :meth:`_Base.__init__` (URLs, API key, concurrency cap, timeouts, retries).
    """

    def _open(self) -> None:
        self._slot = threading.BoundedSemaphore(self.max_concurrency)
        self._clients = [
            httpx.Client(headers=self._headers, limits=self._limits) for _ in range(self._pools)
        ]
        self._turns = itertools.cycle(self._clients)  # next() holds the GIL: thread-safe

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        for http in self._clients:
            http.close()

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        read_timeout: float | None = None,
        code_time: float = 0.0,
    ) -> Any:
        read = read_timeout or self.read_timeout
        return self._send(_Attempts(self, method, path, read, code_time=code_time), body)

    def _send(self, attempts: _Attempts, body: Any = None) -> Any:
        """The answer to ``attempts``' request, retried as its policy says."""
        while True:
            url, timeout = attempts.next()
            try:
                response = self._attempt(attempts, url, timeout, body)
            except httpx.TransportError as exc:
                delay = attempts.failed(exc)
            else:
                delay = attempts.answered(response)
                if delay is None:
                    return attempts.answer
            if delay:
                time.sleep(delay)

    def _attempt(
        self, attempts: _Attempts, url: str, timeout: httpx.Timeout, body: Any
    ) -> httpx.Response:
        """One HTTP request, once this client has a free slot (waited for until the
        deadline: a queue of this client's own is no excuse to run past it)."""
        left = attempts.left()
        if not self._slot.acquire(timeout=None if left is None else max(0.0, left)):
            raise attempts.out_of_time("waiting for a free slot of this client")
        try:
            return next(self._turns).request(
                attempts.method, url, json=body, timeout=timeout, headers=attempts.headers
            )
        finally:
            self._slot.release()

    def execute(
        self,
        code: str,
        input: str = "",
        timeout: float | None = None,
        memory_mb: int | None = None,
        *,
        language: str | None = None,
        cache: bool | None = None,
    ) -> ExecuteResult:
        """Run one snippet (``language``: python, c, cpp, bash). Limits left as ``None`` take
        the server's defaults."""
        body = _execute_body(
            {
                "code": code,
                "input": input,
                "timeout": timeout,
                "memory_mb": memory_mb,
                "language": language,
                "cache": cache,
            }
        )
        return self._execute_body(body)

    def _execute_body(self, body: dict[str, Any]) -> ExecuteResult:
        read, code_time = self._exec_read_timeout(body), self._exec_code_time(body)
        data = self._request("POST", "/execute", body, read, code_time)
        return ExecuteResult.model_validate(data)

    def judge(
        self,
        code: str,
        tests: Sequence[Mapping[str, Any]] | None = None,
        *,
        language: str = "python",
        **options: Any,
    ) -> JudgeResult:
        """Judge a submission against its tests (``POST /judge``; docs/judging.md): ``tests``
        as ``[{"input", "expected_output"}]``, or ``[{"args", "expected"}]`` with
        ``fn_name=``, or none with ``test_script=``. ``options`` are the request's other
        fields (``comparison``, ``checker``, ``timeout``, ``stop_on_first_failure``,
        ``cache``...); ``None`` ones are left out. Retries (same ``X-Request-ID``) join the
        run in flight or get its stored answer instead of judging again."""
        body = _judge_body(code, tests, {"language": language, **options})
        read, code_time = self._judge_read_timeout(body), self._judge_code_time(body)
        data = self._request("POST", "/judge", body, read, code_time)
        return JudgeResult.model_validate(data)

    @overload
    def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: Literal[False] = False
    ) -> list[ExecuteResult]: ...

    @overload
    def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: bool
    ) -> list[ExecuteResult | BoxedError]: ...

    def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: bool = False
    ) -> list[ExecuteResult] | list[ExecuteResult | BoxedError]:
        """Run many snippets concurrently (up to ``max_concurrency``), results in input order.

        Every item is attempted. If any failed, :class:`BoxedBatchError` is raised after all
        are done, carrying every result; with ``return_exceptions=True`` the errors are returned
        in place instead, like ``asyncio.gather``.
        """
        bodies = [_execute_body(item) for item in items]
        if not bodies:
            return []

        def one(body: dict[str, Any]) -> ExecuteResult | BoxedError:
            try:
                return self._execute_body(body)
            except BoxedError as exc:
                return exc

        with ThreadPoolExecutor(min(self.max_concurrency, len(bodies))) as pool:
            return _collect(list(pool.map(one, bodies)), return_exceptions)

    def calculate(self, expr: str) -> CalculateResult:
        """Evaluate an arithmetic expression in the server's safe evaluator."""
        return CalculateResult.model_validate(self._request("POST", "/calculate", {"expr": expr}))

    def score(
        self,
        record: Mapping[str, Any] | None = None,
        *,
        response: str | None = None,
        answer: Any = None,
        preset: str | None = None,
        rewards: Mapping[str, float] | None = None,
        timeout: float | None = None,
    ) -> ScoreResult:
        """Grade a trajectory ``record`` (any format the server reads, gold inside), or
        ``response`` against ``answer``. ``preset`` (``"binary"``, ``"interleaved"``),
        ``rewards`` (overrides such as ``wrong_reward``) and ``timeout`` (seconds per answer
        check) take the server defaults when ``None``."""
        body = _score_options(_score_body(record, response, answer), preset, rewards, timeout)
        data = self._request("POST", "/score", body, self._score_read_timeout(body, 1))
        return ScoreResult.model_validate(data)

    def score_many(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        preset: str | None = None,
        rewards: Mapping[str, float] | None = None,
        timeout: float | None = None,
    ) -> ScoreBatch:
        """Grade many records in one request (a group of rollouts, say). A bad item does
        not fail the others: it comes back as a row with status ``error`` and ``error`` set."""
        records = [dict(item) for item in items]
        body = _score_options({"items": records}, preset, rewards, timeout)
        read_timeout = self._score_read_timeout(body, len(records))
        data = self._request("POST", "/score/batch", body, read_timeout)
        return ScoreBatch.model_validate(data)

    def health(self) -> dict[str, Any]:
        """``GET /healthz`` of one server (with failover): is the service process alive."""
        return self._request("GET", "/healthz")

    def wait_until_ready(
        self, timeout: float = 60.0, *, interval: float = 0.25, all_urls: bool = False
    ) -> list[str]:
        """Poll ``GET /readyz`` until one URL (every URL with ``all_urls``) answers 200; returns
        the ready URLs. Raises :class:`BoxedUnavailable` after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        while True:
            reasons = {url: self._probe(url, end) for url in self.urls}
            ready = self._note_ready(reasons)
            if ready and (not all_urls or len(ready) == len(self.urls)):
                return ready
            if time.monotonic() + interval > end:
                raise _not_ready(timeout, reasons)
            time.sleep(interval)

    def _probe(self, url: str, end: float) -> str | None:
        try:
            response = next(self._turns).get(url + "/readyz", timeout=_probe_timeout(self, end))
        except httpx.TransportError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None if response.status_code == 200 else f"{response.status_code}: {response.text}"

    def session(
        self,
        *,
        memory_mb: int | None = None,
        timeout: float | None = None,
        cpu_timeout: float | None = None,
        idle_timeout: float | None = None,
        max_lifetime: float | None = None,
    ) -> Session:
        """A session (one persistent interpreter on one server), opened by ``with`` (or
        ``open()``) and deleted at the end of the block. Limits left ``None`` take the
        server's defaults."""
        limits = {
            "memory_mb": memory_mb,
            "timeout": timeout,
            "cpu_timeout": cpu_timeout,
            "idle_timeout": idle_timeout,
            "max_lifetime": max_lifetime,
        }
        return Session(self, {k: v for k, v in limits.items() if v is not None})


class _SessionBase:
    """What the sync and async sessions share: the id, the server it lives on, the bodies."""

    def __init__(self, client: _Base, limits: dict[str, Any]) -> None:
        self.client = client
        self.limits = limits
        self.id: str | None = None
        self.info: SessionInfo | None = None  # as of the last answer about it
        self._pin: int | None = None
        # Its server did not answer the last call: close() forgets the session without waiting
        # for that server again (the server expires it, if it comes back).
        self._unreachable = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id or 'not open'})"

    def _path(self, tail: str = "") -> str:
        if self.id is None:
            raise BoxedError("the session is not open: use it in a with block, or open() it")
        return f"/sessions/{self.id}{tail}"

    def _opened(self, attempts: _Attempts, data: Any) -> None:
        self.info = SessionInfo.model_validate(data)
        self.id = self.info.session_id
        self._pin = attempts.url_index

    def _call(self, code: str, input: str, timeout: float | None) -> tuple[_Attempts, dict]:
        body = _execute_body({"code": code, "input": input, "timeout": timeout})
        # The call's limit: its own, else the session's (as asked, else as the server set it).
        limit = timeout or self.limits.get("timeout") or (self.info and self.info.timeout)
        read = self.client._exec_read_timeout({"timeout": limit}, rerun=False)
        code_time = self.client._exec_code_time({"timeout": limit})
        attempts = self._attempts("POST", self._path("/execute"), read, replay=False)
        attempts.code_time = code_time
        return attempts, body

    def _attempts(
        self, method: str, path: str, read: float | None = None, *, replay: bool = True
    ) -> _Attempts:
        """The attempts of a call of this session: on its server only, never elsewhere."""
        read = read if read is not None else self.client.read_timeout
        return _Attempts(
            self.client, method, path, read, pin=self._pin, replay=replay, session=self
        )

    def _forget_unreachable(self) -> bool:
        """Forget the session if its server did not answer its last call (see close())."""
        if self._unreachable:
            self.id = None
        return self.id is None


class Session(_SessionBase):
    """One session of a :class:`Client`. Every call goes to the server that holds it and is
    never sent twice (it would change the session's state twice): a call whose answer was
    lost, or whose server did not answer within ``session_timeout``, raises
    :class:`SessionUnreachable`. A session the infrastructure lost answers 410
    (:class:`SessionLost`, with the failure); one its own code ended, 410
    (:class:`BoxedHTTPError` with ``outcome == "code"``)."""

    client: Client

    def open(self) -> Session:
        if self.id is None:
            attempts = _Attempts(self.client, "POST", "/sessions", self.client.read_timeout)
            attempts.replay = False  # a retried creation could leave a session behind
            self._opened(attempts, self.client._send(attempts, self.limits))
        return self

    def execute(self, code: str, input: str = "", timeout: float | None = None) -> SessionResult:
        """Run one call in the session (its globals, imports and files are kept)."""
        attempts, body = self._call(code, input, timeout)
        return SessionResult.model_validate(self.client._send(attempts, body))

    def refresh(self) -> SessionInfo:
        """``GET /sessions/{id}``: its limits and time left."""
        attempts = self._attempts("GET", self._path())
        self.info = SessionInfo.model_validate(self.client._send(attempts))
        return self.info

    def close(self) -> None:
        """Delete the session (a session already gone is fine; one whose server did not
        answer its last call is forgotten without asking that server again)."""
        if self._forget_unreachable():
            return
        attempts = self._attempts("DELETE", self._path())
        try:
            self.client._send(attempts)
        except BoxedHTTPError as exc:
            if exc.status_code != 404:
                raise
        self.id = None

    def __enter__(self) -> Session:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _probe_timeout(client: _Base, end: float) -> float:
    return max(0.05, min(client.connect_timeout, end - time.monotonic()))


def _not_ready(timeout: float, reasons: dict[str, str | None]) -> BoxedUnavailable:
    lines = "; ".join(f"{url}: {reason or 'ready'}" for url, reason in reasons.items())
    return BoxedUnavailable(f"boxed not ready after {timeout:g} s ({lines})")


# ----------------------------------------------------------------------------------- async client


class AsyncClient(_Base):
    """Asyncio client with the same methods as :class:`Client`, as coroutines.

    It belongs to the event loop it is first used in (its connections do); make one per loop.
    """

    def _open(self) -> None:
        self._slot = asyncio.Semaphore(self.max_concurrency)
        self._clients = [
            httpx.AsyncClient(headers=self._headers, limits=self._limits)
            for _ in range(self._pools)
        ]
        self._turns = itertools.cycle(self._clients)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await asyncio.gather(*(http.aclose() for http in self._clients))

    def _check_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise BoxedError(
                "this AsyncClient was first used in another event loop; create one per loop"
            )

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        read_timeout: float | None = None,
        code_time: float = 0.0,
    ) -> Any:
        read = read_timeout or self.read_timeout
        return await self._send(_Attempts(self, method, path, read, code_time=code_time), body)

    async def _send(self, attempts: _Attempts, body: Any = None) -> Any:
        """The answer to ``attempts``' request, retried as its policy says."""
        self._check_loop()
        while True:
            url, timeout = attempts.next()
            try:
                response = await self._attempt(attempts, url, timeout, body)
            except httpx.TransportError as exc:
                delay = attempts.failed(exc)
            else:
                delay = attempts.answered(response)
                if delay is None:
                    return attempts.answer
            if delay:
                await asyncio.sleep(delay)

    async def _attempt(
        self, attempts: _Attempts, url: str, timeout: httpx.Timeout, body: Any
    ) -> httpx.Response:
        """One HTTP request, once this client has a free slot (waited for until the
        deadline)."""
        left = attempts.left()
        try:
            await asyncio.wait_for(self._slot.acquire(), None if left is None else max(0.0, left))
        except TimeoutError:
            raise attempts.out_of_time("waiting for a free slot of this client") from None
        try:
            return await next(self._turns).request(
                attempts.method, url, json=body, timeout=timeout, headers=attempts.headers
            )
        finally:
            self._slot.release()

    async def execute(
        self,
        code: str,
        input: str = "",
        timeout: float | None = None,
        memory_mb: int | None = None,
        *,
        language: str | None = None,
        cache: bool | None = None,
    ) -> ExecuteResult:
        """Run one snippet; see :meth:`Client.execute`."""
        body = _execute_body(
            {
                "code": code,
                "input": input,
                "timeout": timeout,
                "memory_mb": memory_mb,
                "language": language,
                "cache": cache,
            }
        )
        return await self._execute_body(body)

    async def _execute_body(self, body: dict[str, Any]) -> ExecuteResult:
        read, code_time = self._exec_read_timeout(body), self._exec_code_time(body)
        data = await self._request("POST", "/execute", body, read, code_time)
        return ExecuteResult.model_validate(data)

    async def judge(
        self,
        code: str,
        tests: Sequence[Mapping[str, Any]] | None = None,
        *,
        language: str = "python",
        **options: Any,
    ) -> JudgeResult:
        """Judge a submission against its tests; see :meth:`Client.judge`."""
        body = _judge_body(code, tests, {"language": language, **options})
        read, code_time = self._judge_read_timeout(body), self._judge_code_time(body)
        data = await self._request("POST", "/judge", body, read, code_time)
        return JudgeResult.model_validate(data)

    @overload
    async def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: Literal[False] = False
    ) -> list[ExecuteResult]: ...

    @overload
    async def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: bool
    ) -> list[ExecuteResult | BoxedError]: ...

    async def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: bool = False
    ) -> list[ExecuteResult] | list[ExecuteResult | BoxedError]:
        """Run many snippets concurrently (up to ``max_concurrency``), results in input order.
        Failures as in :meth:`Client.execute_many`."""
        bodies = [_execute_body(item) for item in items]

        async def one(body: dict[str, Any]) -> ExecuteResult | BoxedError:
            try:
                return await self._execute_body(body)
            except BoxedError as exc:
                return exc

        return _collect(await asyncio.gather(*(one(b) for b in bodies)), return_exceptions)

    async def calculate(self, expr: str) -> CalculateResult:
        """Evaluate an arithmetic expression in the server's safe evaluator."""
        data = await self._request("POST", "/calculate", {"expr": expr})
        return CalculateResult.model_validate(data)

    async def score(
        self,
        record: Mapping[str, Any] | None = None,
        *,
        response: str | None = None,
        answer: Any = None,
        preset: str | None = None,
        rewards: Mapping[str, float] | None = None,
        timeout: float | None = None,
    ) -> ScoreResult:
        """Grade one trajectory; see :meth:`Client.score`."""
        body = _score_options(_score_body(record, response, answer), preset, rewards, timeout)
        data = await self._request("POST", "/score", body, self._score_read_timeout(body, 1))
        return ScoreResult.model_validate(data)

    async def score_many(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        preset: str | None = None,
        rewards: Mapping[str, float] | None = None,
        timeout: float | None = None,
    ) -> ScoreBatch:
        """Grade many records in one request; see :meth:`Client.score_many`."""
        records = [dict(item) for item in items]
        body = _score_options({"items": records}, preset, rewards, timeout)
        read_timeout = self._score_read_timeout(body, len(records))
        data = await self._request("POST", "/score/batch", body, read_timeout)
        return ScoreBatch.model_validate(data)

    async def health(self) -> dict[str, Any]:
        """``GET /healthz`` of one server (with failover): is the service process alive."""
        return await self._request("GET", "/healthz")

    async def wait_until_ready(
        self, timeout: float = 60.0, *, interval: float = 0.25, all_urls: bool = False
    ) -> list[str]:
        """Poll ``GET /readyz`` until one URL (every URL with ``all_urls``) answers 200; returns
        the ready URLs. Raises :class:`BoxedUnavailable` after ``timeout`` seconds."""
        self._check_loop()
        end = time.monotonic() + timeout
        while True:
            probes = await asyncio.gather(*(self._probe(url, end) for url in self.urls))
            reasons = dict(zip(self.urls, probes, strict=True))
            ready = self._note_ready(reasons)
            if ready and (not all_urls or len(ready) == len(self.urls)):
                return ready
            if time.monotonic() + interval > end:
                raise _not_ready(timeout, reasons)
            await asyncio.sleep(interval)

    async def _probe(self, url: str, end: float) -> str | None:
        try:
            http = next(self._turns)
            response = await http.get(url + "/readyz", timeout=_probe_timeout(self, end))
        except httpx.TransportError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None if response.status_code == 200 else f"{response.status_code}: {response.text}"

    def session(
        self,
        *,
        memory_mb: int | None = None,
        timeout: float | None = None,
        cpu_timeout: float | None = None,
        idle_timeout: float | None = None,
        max_lifetime: float | None = None,
    ) -> AsyncSession:
        """A session, opened by ``async with`` (or ``await open()``); see
        :meth:`Client.session`."""
        limits = {
            "memory_mb": memory_mb,
            "timeout": timeout,
            "cpu_timeout": cpu_timeout,
            "idle_timeout": idle_timeout,
            "max_lifetime": max_lifetime,
        }
        return AsyncSession(self, {k: v for k, v in limits.items() if v is not None})


class AsyncSession(_SessionBase):
    """One session of an :class:`AsyncClient`; the methods of :class:`Session`, awaited."""

    client: AsyncClient

    async def open(self) -> AsyncSession:
        if self.id is None:
            attempts = _Attempts(self.client, "POST", "/sessions", self.client.read_timeout)
            attempts.replay = False
            self._opened(attempts, await self.client._send(attempts, self.limits))
        return self

    async def execute(
        self, code: str, input: str = "", timeout: float | None = None
    ) -> SessionResult:
        """Run one call in the session (its globals, imports and files are kept)."""
        attempts, body = self._call(code, input, timeout)
        return SessionResult.model_validate(await self.client._send(attempts, body))

    async def refresh(self) -> SessionInfo:
        attempts = self._attempts("GET", self._path())
        self.info = SessionInfo.model_validate(await self.client._send(attempts))
        return self.info

    async def close(self) -> None:
        if self._forget_unreachable():
            return
        attempts = self._attempts("DELETE", self._path())
        try:
            await self.client._send(attempts)
        except BoxedHTTPError as exc:
            if exc.status_code != 404:
                raise
        self.id = None

    async def __aenter__(self) -> AsyncSession:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
