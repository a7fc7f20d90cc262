"""What the sync and async clients share: configuration, URL choice and time budgets.

The HTTP calls themselves live in each client (one blocks, one awaits); the retry decisions in
:mod:`boxed_client.attempts`.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import httpx

from boxed_client import __version__
from boxed_client.defaults import COMPILE_TIMEOUT, RETRY_MARGIN, RUN_TIMEOUT, SCORE_TIMEOUT
from boxed_client.errors import BoxedUnavailable

DEFAULT_URL = "http://localhost:5002"
Routing: TypeAlias = Literal["spread", "ordered"]
ROUTINGS: tuple[Routing, ...] = ("spread", "ordered")
# The server's defaults (boxed_client.defaults), for a call that states none: the scorer's time
# limit per answer check, a snippet's or a test's wall limit, and a compile step's. The server
# retries a run whose sandbox was lost once, on a fresh sandbox: one answer may take twice the
# run's wall limit plus SERVER_RETRY_MARGIN.
SERVER_SCORE_TIMEOUT = SCORE_TIMEOUT
SERVER_RUN_TIMEOUT = RUN_TIMEOUT
SERVER_COMPILE_TIMEOUT = COMPILE_TIMEOUT
SERVER_RETRY_MARGIN = RETRY_MARGIN
# Seconds a run takes beyond its own limit at most to start and report (a judge: once, plus a
# little per test).
RUN_START, PER_TEST_START = 1.0, 0.2
# Backoff doubles per attempt up to backoff_max; the exponent is capped so that a call with no
# attempt bound never overflows a float.
MAX_DOUBLINGS = 30


def parse_urls(urls: str | Sequence[str] | None) -> list[str]:
    """The server URLs: as given (a list, or comma-separated), else ``$BOXED_URL``, else the
    default; ``http://`` added where no scheme is written."""
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


CONNECTIONS_PER_POOL = 16  # connections of one httpx client (see the package's docstring)


class ClientBase:
    """Configuration, URL choice and the retry policy, shared by the sync and async clients.

    The retry loop itself lives in each client (one blocks, one awaits); every decision it makes
    comes from :class:`Attempts`.
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
        self.urls = parse_urls(urls)
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
        cap = min(self.backoff_max, self.backoff_base * 2 ** min(attempt - 1, MAX_DOUBLINGS))
        return random.uniform(cap / 2, cap)


def probe_timeout(client: ClientBase, end: float) -> float:
    """One readiness probe's timeout: the connect timeout, cut to the time left."""
    return max(0.05, min(client.connect_timeout, end - time.monotonic()))


def not_ready(timeout: float, reasons: dict[str, str | None]) -> BoxedUnavailable:
    """The error of a wait for readiness that timed out, with each URL's last reason."""
    lines = "; ".join(f"{url}: {reason or 'ready'}" for url, reason in reasons.items())
    return BoxedUnavailable(f"boxed not ready after {timeout:g} s ({lines})")
