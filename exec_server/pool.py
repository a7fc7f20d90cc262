"""The warm pool: started sandboxes that already wait for code, for one backend.

A backend that reuses sandboxes gets them back after a run once they prove clean (``settle``);
otherwise each serves one snippet and is discarded. The pool refills in the background, making
as many sandboxes as it has idle slots plus requests waiting (less those coming back), a few at
a time, so a request almost never waits for one to start. Ready sandboxes are handed out
last-in first-out: a reused one is the warmest.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from . import metrics
from .backends.base import Sandbox, SandboxBackend, SandboxError
from .verdict import SnippetResult

log = logging.getLogger("boxed.pool")


class WarmPool:
    def __init__(
        self,
        backend: SandboxBackend,
        size: int,
        memory_mb: int,
        max_parallel_warmups: int = 2,
        label: str | None = None,
    ) -> None:
        """``label``: the pool's name in metrics and logs (default: its backend's; an operator
        image's pools add the image's name)."""
        self.backend = backend
        self.size = size
        self.memory_mb = memory_mb
        self.max_parallel_warmups = max_parallel_warmups
        self._ready: asyncio.LifoQueue[Sandbox] = asyncio.LifoQueue()
        self._wake = asyncio.Event()
        self._waiters = 0
        self._warming = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.last_error: str | None = None
        self._produced = False
        self._settling: dict[str, Sandbox] = {}
        self._lent = 0
        self.background: set[asyncio.Future[object]] = set()  # warm-ups, settles, removals
        self.label = label or backend.name
        self._ready_gauge = metrics.POOL_READY.labels(self.label)
        # Set while the backend says it cannot make sandboxes (engine down, image missing):
        # no warm-up is tried, so a missing image is not retried five times a second.
        self.paused = False

    # -- state ---------------------------------------------------------------------------
    @property
    def ready_count(self) -> int:
        return self._ready.qsize()

    def ready_ids(self) -> set[str]:
        """Sandboxes the pool holds: ready ones and used ones on their way back."""
        ready = {sandbox.id for sandbox in self._ready._queue}  # type: ignore[attr-defined]
        return ready | set(self._settling)

    def is_warm(self) -> bool:
        """Ready sandboxes now, or refilling without trouble (empty only under load)."""
        return self.size == 0 or self.ready_count > 0 or (self._produced and not self.last_error)

    def _count_ready(self) -> None:
        self._ready_gauge.set(self._ready.qsize())

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._refill_loop(), name=f"pool-{self.label}")

    async def stop(self) -> None:
        self._stopping = True
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        while not self._ready.empty():
            self.discard(self._ready.get_nowait())
        await self.drain_background()

    async def drain_background(self) -> None:
        """Wait for warm-ups, settles and removals, including those they start meanwhile."""
        while self.background:
            await asyncio.gather(*list(self.background), return_exceptions=True)

    def wake(self) -> None:
        """Look at the refill now (the backend came back)."""
        self._wake.set()

    def discard(self, sandbox: Sandbox) -> None:
        """Remove a used or broken sandbox in the background (the answer need not wait)."""
        self._background(self._remove(sandbox))

    def release(self, sandbox: Sandbox, result: SnippetResult | None) -> None:
        """Take back a sandbox after a run (``result`` None: the run failed): reuse it once it
        proves clean, if the backend allows reuse after such a run; else remove it."""
        self._lent -= 1
        if result is None or self._stopping or not sandbox.can_reuse(result):
            self.discard(sandbox)
            return
        self._settling[sandbox.id] = sandbox
        self._background(self._settle(sandbox))

    def _background(self, job: Awaitable[object]) -> None:
        task = asyncio.ensure_future(job)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def _settle(self, sandbox: Sandbox) -> None:
        try:
            clean = await sandbox.settle()
        except Exception:  # a sandbox that cannot prove itself clean is removed, whatever broke
            log.exception("settling %s failed", sandbox.id[:12])
            clean = False
        finally:
            self._settling.pop(sandbox.id, None)
            self._wake.set()
        if clean and not self._stopping:
            self._ready.put_nowait(sandbox)
            self._count_ready()
        else:
            await self._remove(sandbox)

    async def _remove(self, sandbox: Sandbox) -> bool:
        try:
            gone = await sandbox.discard()
        except Exception:  # the reaper retries what is left
            log.exception("removing %s failed", sandbox.id[:12])
            return False
        if gone:
            metrics.SANDBOXES_REMOVED.labels(self.backend.name).inc()
        return gone

    # -- taking --------------------------------------------------------------------------
    async def acquire(self, timeout: float) -> Sandbox:
        """A live warm sandbox, waiting up to ``timeout`` seconds for one to be made."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self._waiters += 1
        self._wake.set()
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError
                async with asyncio.timeout(remaining):  # no extra task: the hand-over is atomic
                    sandbox = await self._ready.get()
                self._count_ready()
                if sandbox.is_alive():
                    self._lent += 1
                    return sandbox
                log.warning("discarding dead pooled sandbox %s", sandbox.id[:12])
                self.discard(sandbox)
        finally:
            self._waiters -= 1
            self._wake.set()

    def purge_dead(self) -> int:
        """Drop pooled sandboxes that died (removed from outside, engine restarted)."""
        alive, dead = [], 0
        while not self._ready.empty():
            sandbox = self._ready.get_nowait()
            if sandbox.is_alive():
                alive.append(sandbox)
            else:
                dead += 1
                self.discard(sandbox)
        for sandbox in alive:
            self._ready.put_nowait(sandbox)
        if dead:
            self._count_ready()
            self._wake.set()
        return dead

    # -- refilling -----------------------------------------------------------------------
    def _wanted(self) -> int:
        have = self._ready.qsize() + self._warming + len(self._settling)
        if self.backend.reuses_sandboxes:  # lent ones come back: own enough for the demand
            return max(self.size, self._lent + self._waiters) - have - self._lent
        return self.size + self._waiters - have

    async def _refill_loop(self) -> None:
        failures = 0
        while not self._stopping:
            while (
                not self.paused and self._wanted() > 0 and self._warming < self.max_parallel_warmups
            ):
                self._warming += 1
                self._background(self._warm_one())
            self._wake.clear()
            try:
                async with asyncio.timeout(1.0):  # not wait_for: no task per wake-up
                    await self._wake.wait()
            except TimeoutError:
                pass
            if self.last_error:
                failures += 1
                await asyncio.sleep(min(0.2 * 2**failures, 5.0))  # engine trouble: back off
            else:
                failures = 0

    async def _warm_one(self) -> None:
        try:
            sandbox = await self.backend.create_warm(self.memory_mb)
        except SandboxError as exc:
            if str(exc) != self.last_error:  # logged once per distinct problem, not per retry
                log.warning("warm-up failed: %s", exc)
            self.last_error = str(exc)
            return
        finally:
            self._warming -= 1
            self._wake.set()
        metrics.SANDBOXES_CREATED.labels(self.backend.name).inc()
        if self.last_error:
            log.info("warm-ups succeed again")
        self.last_error = None
        self._produced = True
        if self._stopping:
            self.discard(sandbox)
            return
        self._ready.put_nowait(sandbox)
        self._count_ready()
