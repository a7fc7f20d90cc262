"""The warm pool: started sandboxes whose interpreter already waits for code.

In container isolation each container serves exactly one snippet and is then removed; in
process isolation a used container comes back once its supervisor reports it clean. The pool
refills in the background, making as many containers as it has idle slots plus requests
waiting (less those coming back), a few at a time, so a request almost never waits for a
container to start. Ready containers are handed out last-in first-out: a reused container is
the warmest one.
"""

from __future__ import annotations

import asyncio
import logging
import select
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

from . import metrics
from .sandbox import DockerSandboxes, RunResult, SandboxError, WarmContainer

log = logging.getLogger("boxed.pool")
T = TypeVar("T")
RunInThread = Callable[..., Awaitable[T]]


def is_alive(warm: WarmContainer) -> bool:
    """A waiting interpreter sends nothing; a readable socket means the container went away."""
    try:
        readable, _, _ = select.select([warm.sock], [], [], 0)
        if not readable:
            return True
        return bool(warm.sock.recv(1, socket.MSG_PEEK))
    except (OSError, ValueError):
        return False


class WarmPool:
    def __init__(
        self,
        sandboxes: DockerSandboxes,
        size: int,
        run_in_thread: RunInThread,
        max_parallel_warmups: int = 2,
    ) -> None:
        self.sandboxes = sandboxes
        self.size = size
        self._thread = run_in_thread
        self.max_parallel_warmups = max_parallel_warmups
        self._ready: asyncio.LifoQueue[WarmContainer] = asyncio.LifoQueue()
        self._wake = asyncio.Event()
        self._waiters = 0
        self._warming = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.last_error: str | None = None
        self._produced = False
        self._settling: dict[str, WarmContainer] = {}
        self._lent = 0
        self.background: set[asyncio.Future[object]] = set()  # warm-ups, settles, removals

    # -- state ---------------------------------------------------------------------------
    @property
    def ready_count(self) -> int:
        return self._ready.qsize()

    def ready_ids(self) -> set[str]:
        """Containers the pool holds: ready ones and used ones on their way back."""
        ready = {warm.id for warm in self._ready._queue}  # type: ignore[attr-defined]
        return ready | set(self._settling)

    def is_warm(self) -> bool:
        """Ready containers now, or refilling without trouble (empty only under load)."""
        return self.size == 0 or self.ready_count > 0 or (self._produced and not self.last_error)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._refill_loop(), name="boxed-pool")

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

    def discard(self, warm: WarmContainer) -> None:
        """Remove a used or broken container in the background (the answer need not wait)."""
        self._background(self._remove(warm))

    def release(self, warm: WarmContainer, result: RunResult | None) -> None:
        """Take back a container after a run (``result`` None: the run failed): reuse it
        once it proves clean, if its sandboxes allow reuse after such a run; else remove it."""
        self._lent -= 1
        if result is None or self._stopping or not self.sandboxes.can_reuse(warm, result):
            self.discard(warm)
            return
        self._settling[warm.id] = warm
        self._background(self._settle(warm))

    def _background(self, job: Awaitable[object]) -> None:
        task = asyncio.ensure_future(job)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def _settle(self, warm: WarmContainer) -> None:
        try:
            clean = await self._thread(self.sandboxes.settle, warm)
        except Exception:  # a container that cannot prove itself clean is removed, whatever broke
            log.exception("settling %s failed", warm.id[:12])
            clean = False
        finally:
            self._settling.pop(warm.id, None)
            self._wake.set()
        if clean and not self._stopping:
            self._ready.put_nowait(warm)
            metrics.POOL_READY.set(self._ready.qsize())
        else:
            await self._remove(warm)

    async def _remove(self, warm: WarmContainer) -> bool:
        gone = await self._thread(self.sandboxes.discard, warm)
        if gone:
            metrics.CONTAINERS_REMOVED.inc()
        return gone

    # -- taking --------------------------------------------------------------------------
    async def acquire(self, timeout: float) -> WarmContainer:
        """A live warm container, waiting up to ``timeout`` seconds for one to be made."""
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
                    warm = await self._ready.get()
                metrics.POOL_READY.set(self._ready.qsize())
                if is_alive(warm):
                    self._lent += 1
                    return warm
                log.warning("discarding dead pooled container %s", warm.id[:12])
                self.discard(warm)
        finally:
            self._waiters -= 1
            self._wake.set()

    def purge_dead(self) -> int:
        """Drop pooled containers that died (removed from outside, daemon restarted)."""
        alive, dead = [], 0
        while not self._ready.empty():
            warm = self._ready.get_nowait()
            if is_alive(warm):
                alive.append(warm)
            else:
                dead += 1
                self.discard(warm)
        for warm in alive:
            self._ready.put_nowait(warm)
        if dead:
            metrics.POOL_READY.set(self._ready.qsize())
            self._wake.set()
        return dead

    # -- refilling -----------------------------------------------------------------------
    def _wanted(self) -> int:
        have = self._ready.qsize() + self._warming + len(self._settling)
        if self.sandboxes.reuses_containers:  # lent ones come back: own enough for the demand
            return max(self.size, self._lent + self._waiters) - have - self._lent
        return self.size + self._waiters - have

    async def _refill_loop(self) -> None:
        failures = 0
        while not self._stopping:
            while self._wanted() > 0 and self._warming < self.max_parallel_warmups:
                self._warming += 1
                self._background(self._warm_one())
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), 1.0)
            except TimeoutError:
                pass
            if self.last_error:
                failures += 1
                await asyncio.sleep(min(0.2 * 2**failures, 5.0))  # engine trouble: back off
            else:
                failures = 0

    async def _warm_one(self) -> None:
        try:
            warm = await self._thread(self.sandboxes.create_warm)
        except SandboxError as exc:
            self.last_error = str(exc)
            log.warning("warm-up failed: %s", exc)
            return
        finally:
            self._warming -= 1
            self._wake.set()
        metrics.CONTAINERS_CREATED.inc()
        self.last_error = None
        self._produced = True
        if self._stopping:
            self.discard(warm)
            return
        self._ready.put_nowait(warm)
        metrics.POOL_READY.set(self._ready.qsize())
