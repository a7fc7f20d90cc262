"""The retry policy of one call: which URL next, how long to wait, when to give up.

No I/O here: each client's loop asks :class:`Attempts` what to do after every attempt, so the
sync and async clients retry alike.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx

from boxed_client.answers import attribution, http_error, json_of
from boxed_client.errors import BoxedUnavailable, SessionUnreachable
from boxed_client.outcome import Failure, FailureCode

if TYPE_CHECKING:
    from boxed_client.base import ClientBase
    from boxed_client.sessions import SessionBase

RETRY_STATUSES = frozenset({429, 502, 503, 504})
# Timeouts of the wait for an answer are not signs of a dead server (the snippet or the queue may
# simply be slow), so they are retried but do not set the URL aside.
SLOW_ERRORS = (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)
# Errors before the request left: always safe to send again.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Times a 200 whose failure is retryable (a crashed grader worker, say) is sent again: the
# service already retried it once, and an input that crashes it every time must not have the
# client hammer it until the deadline.
ANSWER_RETRIES = 2
# The least time left that is worth one more attempt: a sleep is cut to leave it, and a call
# with less left gives up rather than send a request that cannot be answered in time.
LAST_TRY = 0.05


class Attempts:
    """The retry policy of one call: which URL next, how long to wait, when to give up.

    Every attempt's timeouts and every wait are cut to the time left before the deadline, so a
    call never runs past it; a call pinned to one server (a session) also gives up reaching it
    after the client's ``session_timeout``.
    """

    def __init__(
        self,
        client: ClientBase,
        method: str,
        path: str,
        read_timeout: float,
        *,
        pin: int | None = None,
        replay: bool = True,
        session: SessionBase | None = None,
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
        self.raw = False  # the answer is the body's bytes, not JSON (a session's file)

    def _heard_from_server(self) -> None:
        if self.pin is not None:
            heard = time.monotonic() + self.client.session_timeout
            self.reach_by = earliest(self.deadline, heard)

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
        if not isinstance(exc, SLOW_ERRORS):
            self.client._mark_down(i)
        url = self.client.urls[i] + self.path
        what = f"{self.method} {url}: {type(exc).__name__}: {exc or 'no detail'}"
        if self.pin is not None:
            delay = None
            if self.replay or isinstance(exc, NOT_SENT):
                delay = self._schedule(i, until=self.reach_by)
            if delay is None:
                if self.session is not None:
                    self.session.unreachable = True
                waited = time.monotonic() - self.start
                raise SessionUnreachable(
                    f"{what} (the session's server did not answer; gave up after {waited:.1f} s,"
                    f" attempt {self.attempt}; the session is not moved to another server)"
                ) from exc
            return delay
        if not self.replay and not isinstance(exc, NOT_SENT):
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
            self.answer = (
                None if status == 204 else response.content if self.raw else json_of(response)
            )
            if self.session is not None:
                self.session.unreachable = False
            failure, _ = attribution(self.answer, status)
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
        error = http_error(self.method, response, self.headers["X-Request-ID"])
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
        end = earliest(self.deadline, until)
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


def earliest(*times: float | None) -> float | None:
    """The earliest of the times given (``None``: no time at all)."""
    known = [t for t in times if t is not None]
    return min(known) if known else None
