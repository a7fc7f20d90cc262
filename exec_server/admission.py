"""Admission control: a bound on running snippets and a bounded, deadline-limited queue that is
fair between tenants.

A tenant is whatever the ``X-Boxed-Tenant`` header names (a training job, a team; requests
without it share the tenant ""). Each tenant waits in its own first-in first-out queue, and a
freed slot goes to the tenants in turn (round robin over those waiting), so a job that floods
the service with thousands of snippets delays another job's next snippet by at most one
snippet of each other waiting tenant, not by its whole backlog. The bound on waiting requests
is shared; no tenant gets a slot while another's turn is due. Beside it, a tenant may have at
most ``max_per_tenant`` snippets running or waiting (``BOXED_MAX_WORK_PER_TENANT``), so one
tenant filling the queue still leaves room for the others' requests.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

from scorer.outcome import FailureCode

from . import metrics

TENANT_HEADER = "x-boxed-tenant"
TENANT_MAX_CHARS = 64
# The tenant of the request being served: set once per request by ``TenantFromHeader``, read
# by ``Admission.slot`` (every route that takes a slot gets fairness without passing it on).
current_tenant: ContextVar[str] = ContextVar("boxed_tenant", default="")


class Overloaded(Exception):
    """No slot now: the caller should retry after a pause (HTTP 429 with Retry-After)."""

    code = FailureCode.OVERLOADED


class Admission:
    def __init__(
        self,
        max_running: int,
        max_queue: int,
        queue_timeout: float,
        max_per_tenant: int | None = None,
    ) -> None:
        """``max_per_tenant``: snippets one tenant may have running or waiting (None: only
        the shared bounds)."""
        self.max_running = max_running
        self.max_queue = max_queue
        self.queue_timeout = queue_timeout
        self.max_per_tenant = max_per_tenant
        self.running = 0
        self.waiting = 0
        self._held: dict[str, int] = {}  # per tenant: snippets running or waiting
        self._queues: dict[str, deque[asyncio.Future[None]]] = {}
        self._turns: deque[str] = deque()  # tenants with waiters, the next one first

    def waiting_by_tenant(self) -> dict[str, int]:
        return {tenant: len(queue) for tenant, queue in self._queues.items() if queue}

    @asynccontextmanager
    async def slot(self, tenant: str | None = None) -> AsyncIterator[float]:
        """Hold one running slot; yields how long the wait for it took (seconds)."""
        tenant = current_tenant.get() if tenant is None else tenant
        loop = asyncio.get_running_loop()
        started = loop.time()
        # Count, don't look at the queues: in a burst the next request arrives before any
        # waiter ran. Check and increment happen with no await in between.
        if self.running + self.waiting >= self.max_running + self.max_queue:
            raise Overloaded(f"queue full ({self.max_queue} waiting)")
        held = self._held.get(tenant, 0)
        if self.max_per_tenant is not None and held >= self.max_per_tenant:
            raise Overloaded(f"this tenant has {held} snippets running or waiting: its quota")
        self._held[tenant] = held + 1
        try:
            if self.running < self.max_running and not self.waiting:
                self._take()
            else:
                await self._wait_turn(tenant)
            try:
                yield loop.time() - started
            finally:
                self._release()
        finally:
            self._held[tenant] -= 1
            if not self._held[tenant]:
                del self._held[tenant]

    async def _wait_turn(self, tenant: str) -> None:
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if tenant not in self._queues:
            self._queues[tenant] = deque()
            self._turns.append(tenant)
        self._queues[tenant].append(granted)
        self.waiting += 1
        metrics.QUEUED.inc()
        self._grant()  # a slot may be free already (its holder left while others queued)
        try:
            await asyncio.wait_for(asyncio.shield(granted), self.queue_timeout)
        except BaseException as exc:
            if granted.done() and not granted.cancelled():
                self._release()  # granted just as it gave up: the slot goes on to the next
            else:
                granted.cancel()
                self._forget(tenant, granted)
            if isinstance(exc, TimeoutError):
                raise Overloaded(f"no slot within {self.queue_timeout:g} s") from None
            raise

    def _forget(self, tenant: str, granted: asyncio.Future[None]) -> None:
        """Take a waiter that gave up off its queue (the grant never reached it)."""
        queue = self._queues.get(tenant)
        if queue is not None and granted in queue:
            queue.remove(granted)
            self._left_queue()
            if not queue:
                del self._queues[tenant]
                self._turns.remove(tenant)

    def _left_queue(self) -> None:
        self.waiting -= 1
        metrics.QUEUED.dec()

    def _take(self) -> None:
        self.running += 1
        metrics.IN_FLIGHT.inc()

    def _release(self) -> None:
        self.running -= 1
        metrics.IN_FLIGHT.dec()
        self._grant()

    def _grant(self) -> None:
        """Hand free slots to the waiting tenants in turn, each its oldest request."""
        while self.running < self.max_running and self._turns:
            tenant = self._turns.popleft()
            queue = self._queues[tenant]
            granted = queue.popleft()
            if queue:
                self._turns.append(tenant)  # its next request waits for its next turn
            else:
                del self._queues[tenant]
            self._left_queue()
            self._take()
            granted.set_result(None)


class TenantFromHeader:
    """ASGI middleware: the request's tenant (``X-Boxed-Tenant``) for admission."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = dict(scope["headers"]).get(TENANT_HEADER.encode(), b"")
            current_tenant.set(raw.decode("latin-1").strip()[:TENANT_MAX_CHARS])
        await self.app(scope, receive, send)
