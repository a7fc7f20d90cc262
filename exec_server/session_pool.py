"""Warm session sandboxes: sessions whose sandbox and interpreter are already up, per image.

Starting a session's container costs about 150 ms; a create that finds a warm one answers in
a few. Each warm sandbox is made for one session only: it is made with the session's id (its
container label), handed out at most once, never taken back (a deleted, lost or expired
session's sandbox is removed, as before), and has run no call when handed out. Warm sandboxes
belong to no tenant: they count against no quota and not against ``max_sessions`` until handed
out.

A warm sandbox is made with the server's defaults (``template``): the interpreter's memory
limit, its container's memory limit and its CPU budget are fixed at its start, so a create
asking for other values of those gets a sandbox started for it (cold), never a warm one whose
limits are not the session's. Limits the host applies per call (``timeout``, ``cpu_timeout``,
``idle_timeout``) do not matter.

One pool per image name (``exec_server.images``); the pool refills in the background, a few
at a time, while the backend can make sandboxes, and removes what it holds at stop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from . import metrics
from .backends.base import SandboxBackend, SandboxError, SessionSandbox, SessionSpec

log = logging.getLogger("boxed.session_pool")
IDLE_LOOK = 1.0  # seconds between looks at the pool when nothing wakes it (dead ones, health)
MAX_BACKOFF = 5.0  # longest pause between warm-ups while they fail


@dataclasses.dataclass(frozen=True)
class Warm:
    """A warm session sandbox and the id of the session it was made for."""

    session_id: str
    sandbox: SessionSandbox


def same_limits(a: SessionSpec, b: SessionSpec) -> bool:
    """Whether two specs start the same sandbox but for the session's id (the label)."""
    return dataclasses.replace(a, session_id="") == dataclasses.replace(b, session_id="")


class SessionPool:
    """Warm session sandboxes of one image (``image``: its name), all made from ``template``
    with a fresh id each.

    ``new_id`` makes a session id; ``can_make`` says whether the backend can make sandboxes
    now (no warm-up is tried while it cannot)."""

    def __init__(
        self,
        backend: SandboxBackend,
        template: SessionSpec,
        size: int,
        *,
        image: str,
        new_id: Callable[[], str],
        can_make: Callable[[], bool] = lambda: True,
        parallel: int = 2,
    ) -> None:
        self.backend = backend
        self.template = template
        self.size = size
        self.image = image
        self.parallel = max(parallel, 1)
        self._new_id = new_id
        self._can_make = can_make
        self._ready: deque[Warm] = deque()
        self._warming = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self._background: set[asyncio.Future[object]] = set()
        self._gauge = metrics.SESSION_POOL_READY.labels(image)
        self.last_error: str | None = None

    # -- state ---------------------------------------------------------------------------
    @property
    def ready_count(self) -> int:
        return len(self._ready)

    def sandbox_ids(self) -> set[str]:
        """The warm sandboxes it holds: not orphans."""
        return {warm.sandbox.id for warm in self._ready}

    def _count(self) -> None:
        self._gauge.set(len(self._ready))

    # -- taking --------------------------------------------------------------------------
    def take(self, wanted: SessionSpec) -> Warm | None:
        """A live warm sandbox made with ``wanted``'s limits, now (no wait), or None: then
        the caller starts one. It leaves the pool for good, and a new one is started."""
        if self._stopping or not same_limits(wanted, self.template):
            return None
        while self._ready:
            warm = self._ready.popleft()  # the oldest: each waits about as long
            if warm.sandbox.is_alive():
                self._count()
                self._wake.set()
                return warm
            log.warning("discarding dead warm session sandbox %s", warm.sandbox.id[:12])
            self._discard(warm.sandbox)
        self._count()
        self._wake.set()
        return None

    # -- lifecycle -----------------------------------------------------------------------
    async def run(self) -> None:
        """Keep ``size`` warm sandboxes, until cancelled."""
        failures = 0
        while not self._stopping:
            try:
                self._purge_dead()
                while self._can_make() and self._wanted() > 0 and self._warming < self.parallel:
                    self._warming += 1
                    self._spawn(self._warm_one())
            except Exception:  # upkeep must survive anything; the next look tries again
                log.exception("refilling the warm session pool failed")
            self._wake.clear()
            try:
                async with asyncio.timeout(IDLE_LOOK):
                    await self._wake.wait()
            except TimeoutError:
                pass
            if self.last_error:  # engine trouble: back off
                failures += 1
                await asyncio.sleep(min(0.2 * 2**failures, MAX_BACKOFF))
            else:
                failures = 0

    async def stop(self) -> None:
        """Remove every warm sandbox, and those still starting once they have."""
        self._stopping = True
        self._wake.set()
        while self._ready:
            self._discard(self._ready.popleft().sandbox)
        self._count()
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    # -- refilling -----------------------------------------------------------------------
    def _wanted(self) -> int:
        return self.size - len(self._ready) - self._warming

    async def _warm_one(self) -> None:
        spec = dataclasses.replace(self.template, session_id=self._new_id())
        try:
            sandbox = await self.backend.create_session(spec)
        except SandboxError as exc:
            if str(exc) != self.last_error:  # once per distinct problem, not per retry
                log.warning("warm session sandbox failed to start: %s", exc)
            self.last_error = str(exc)
            return
        finally:
            self._warming -= 1
            self._wake.set()
        if self.last_error:
            log.info("warm session sandboxes start again")
        self.last_error = None
        if self._stopping:
            self._discard(sandbox)
            return
        self._ready.append(Warm(spec.session_id, sandbox))
        self._count()

    def _purge_dead(self) -> None:
        """Drop warm sandboxes that died (removed from outside, the engine restarted)."""
        dead = [warm for warm in self._ready if not warm.sandbox.is_alive()]
        for warm in dead:
            self._ready.remove(warm)
            log.warning("discarding dead warm session sandbox %s", warm.sandbox.id[:12])
            self._discard(warm.sandbox)
        if dead:
            self._count()

    def _discard(self, sandbox: SessionSandbox) -> None:
        self._spawn(self._remove(sandbox))

    async def _remove(self, sandbox: SessionSandbox) -> None:
        try:
            await sandbox.discard()
        except Exception:  # the reaper removes what is left
            log.exception("removing warm session sandbox %s failed", sandbox.id[:12])

    def _spawn(self, job: Awaitable[object]) -> None:
        task = asyncio.ensure_future(job)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
