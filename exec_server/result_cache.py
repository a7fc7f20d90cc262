"""Answers kept in memory: the result cache (same request, same answer, not run again) and
retries made idempotent (same ``X-Request-ID``, same answer), in one bounded store.

* **The cache** (a request's ``"cache": true``, server switch ``BOXED_RESULT_CACHE``): the key
  is a hash of everything that decides the answer: the route, the whole request body (language,
  code, stdin or tests, limits, comparison) and the sandbox image's id. It is safe for
  deterministic code only (docs/judging.md): code that reads the clock, draws random numbers
  or races threads could have answered otherwise. Infrastructure errors (no answer at all) and
  answers with a timeout (a loaded machine may have caused it) are never stored.
* **Scopes**: every key holds the caller's scope (its credential and tenant,
  ``exec_server.tenancy``): an answer is given only to the caller that made it, and another
  caller's request ids neither answer nor block one's own.
* **Idempotency**: a request whose ``X-Request-ID`` was seen on the same route joins the run
  still in flight, or gets the stored answer, instead of running the code again (a client
  retries after a timeout of its own). The same id with another body is refused (422).
  Timeouts are stored here: the answer to *that* request was a timeout.

Entries expire after a TTL and the least recently used go first once the store holds more
than its entry or byte budget. Joined runs run as tasks of their own: a caller that goes
away does not stop a run another caller waits for.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from . import metrics
from .request_errors import RequestError

M = TypeVar("M", bound=BaseModel)


def fingerprint(route: str, body: BaseModel, image: str | None) -> str:
    """The key of everything that decides an answer (``cache`` itself excluded)."""
    data = body.model_dump(mode="json", exclude={"cache"})
    text = json.dumps([route, data, image], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class _Entry(Generic[M]):
    answer: M
    expires: float
    fingerprint: str
    size: int


@dataclass
class _Flight:
    task: asyncio.Future[Any]
    fingerprint: str


class ResultCache:
    """The bounded store (LRU with a TTL) and the runs in flight."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        ttl_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl = ttl_seconds
        self.clock = clock
        self.bytes = 0
        self._entries: OrderedDict[str, _Entry[Any]] = OrderedDict()
        self._flights: dict[str, _Flight] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> _Entry[Any] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= self.clock():
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry

    def put(self, key: str, answer: BaseModel, fingerprint: str) -> None:
        size = len(answer.model_dump_json())
        if size > self.max_bytes:
            return
        if key in self._entries:
            self._drop(key)
        self._entries[key] = _Entry(answer, self.clock() + self.ttl, fingerprint, size)
        self.bytes += size
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))
        metrics.RESULT_CACHE_ENTRIES.set(len(self._entries))

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key)
        self.bytes -= entry.size
        metrics.RESULT_CACHE_ENTRIES.set(len(self._entries))

    async def answer(
        self,
        route: str,
        work: Callable[[], Awaitable[M]],
        *,
        fingerprint: str,
        request_id: str | None,
        cache: bool,
        cacheable: Callable[[M], bool],
        scope: str,
    ) -> tuple[M, str]:
        """The answer and how it was had: ``ran``, ``joined`` (a run in flight), ``replayed``
        (stored under the request id) or ``hit`` (stored under the fingerprint).

        ``request_id``: the caller's own ``X-Request-ID`` (None: not idempotent);
        ``cache``: the fingerprint may answer; ``cacheable``: whether an answer may be kept
        under it; ``scope``: the caller's (``Caller.scope``), part of every key."""
        keys = []
        if request_id is not None:
            rid_key = f"rid|{scope}|{route}|{request_id}"
            keys.append(rid_key)
            found = self._lookup(rid_key, fingerprint, mismatch=True)
            if found is not None:
                return await self._take(route, found, stored="replayed")
        if cache:
            content_key = f"fp|{scope}|{fingerprint}"
            keys.append(content_key)
            found = self._lookup(content_key, fingerprint, mismatch=False)
            if found is not None:
                return await self._take(route, found, stored="hit")
        metrics.counter(metrics.RESULT_CACHE, route, "ran").inc()
        task: asyncio.Future[M] = asyncio.ensure_future(work())
        for key in keys:
            self._flights[key] = _Flight(task, fingerprint)

        def done(finished: asyncio.Future[M]) -> None:
            for key in keys:
                if self._flights.get(key, None) is not None and self._flights[key].task is task:
                    del self._flights[key]
            if finished.cancelled() or finished.exception() is not None:
                return  # no answer: nothing kept, the next request runs again
            answer = finished.result()
            for key in keys:
                if key.startswith("rid|") or cacheable(answer):
                    self.put(key, answer, fingerprint)

        task.add_done_callback(done)
        return await asyncio.shield(task), "ran"

    def _lookup(
        self, key: str, fingerprint: str, *, mismatch: bool
    ) -> asyncio.Future[Any] | BaseModel | None:
        """The run in flight or the stored answer under ``key`` for ``fingerprint``; another
        request under the same id is a 422 (``mismatch``) or simply no answer."""
        flight = self._flights.get(key)
        entry = self.get(key) if flight is None else None
        seen = flight.fingerprint if flight else entry.fingerprint if entry else None
        if seen is None:
            return None
        if seen != fingerprint:
            if mismatch:
                raise RequestError(
                    422, "X-Request-ID was already used for another request; send a new one"
                )
            return None
        if flight is not None:
            return flight.task
        assert entry is not None
        return entry.answer

    async def _take(
        self, route: str, found: asyncio.Future[Any] | BaseModel, *, stored: str
    ) -> tuple[Any, str]:
        if isinstance(found, BaseModel):
            metrics.counter(metrics.RESULT_CACHE, route, stored).inc()
            return found.model_copy(update={"cached": True}), stored
        metrics.counter(metrics.RESULT_CACHE, route, "joined").inc()
        answer = await asyncio.shield(found)  # the run's own caller gets it uncopied
        return answer.model_copy(update={"cached": True}), "joined"
