"""Admission control: a bound on running snippets and a bounded, deadline-limited queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from . import metrics


class Overloaded(Exception):
    """No slot now: the caller should retry after a pause (HTTP 429 with Retry-After)."""


class Admission:
    def __init__(self, max_running: int, max_queue: int, queue_timeout: float) -> None:
        self.max_running = max_running
        self.max_queue = max_queue
        self.queue_timeout = queue_timeout
        self._slots = asyncio.Semaphore(max_running)
        self.running = 0
        self.waiting = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """Hold one running slot; yields how long the wait for it took (seconds)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        # Count, don't ask the semaphore: in a burst no acquire has run yet when the next
        # request arrives. Check and increment happen with no await in between.
        if self.running + self.waiting >= self.max_running + self.max_queue:
            raise Overloaded(f"queue full ({self.max_queue} waiting)")
        self.waiting += 1
        metrics.QUEUED.inc()
        try:
            await asyncio.wait_for(self._slots.acquire(), self.queue_timeout)
        except TimeoutError:
            raise Overloaded(f"no slot within {self.queue_timeout:g} s") from None
        finally:
            self.waiting -= 1
            metrics.QUEUED.dec()
        self.running += 1
        metrics.IN_FLIGHT.inc()
        try:
            yield loop.time() - started
        finally:
            self.running -= 1
            metrics.IN_FLIGHT.dec()
            self._slots.release()
