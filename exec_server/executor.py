"""Runs snippets: admission, a warm sandbox, the run, the verdict, the clean-up.

The HTTP layer only translates: ``RequestError`` -> 4xx, ``Overloaded`` -> 429,
``ServiceUnavailable`` -> 503. Anything the code itself did is a normal ``ExecuteResponse``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio

from . import metrics
from .admission import Admission, Overloaded
from .models import ExecuteRequest, ExecuteResponse, Truncated
from .pool import WarmPool
from .process_sandbox import ProcessSandboxes
from .sandbox import DockerSandboxes, RunResult, SandboxError
from .settings import Settings

log = logging.getLogger("boxed.executor")
SUPPORTED_LANGUAGES = ("python",)
MIN_MEMORY_MB = 64

__all__ = ["Executor", "Overloaded", "RequestError", "ServiceUnavailable", "resolve_limits"]


class RequestError(Exception):
    """The caller asked for something invalid (HTTP 4xx)."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.detail = detail


class ServiceUnavailable(Exception):
    """The service cannot run code right now (HTTP 503 with Retry-After)."""


def resolve_limits(req: ExecuteRequest, settings: Settings) -> tuple[float, int]:
    """The request's timeout and memory, with defaults applied and maxima enforced."""
    if req.language.lower() not in SUPPORTED_LANGUAGES:
        raise RequestError(
            422, f"language {req.language!r} is not supported; supported: {SUPPORTED_LANGUAGES}"
        )
    code_bytes = len(req.code.encode("utf-8", "surrogatepass"))
    if code_bytes > settings.max_code_bytes:
        raise RequestError(
            413, f"code is {code_bytes} bytes; the maximum is {settings.max_code_bytes}"
        )
    input_bytes = len(req.input.encode("utf-8", "surrogatepass"))
    if input_bytes > settings.max_input_bytes:
        raise RequestError(
            413, f"input is {input_bytes} bytes; the maximum is {settings.max_input_bytes}"
        )
    timeout = req.timeout if req.timeout is not None else settings.timeout_default
    if timeout > settings.timeout_max:
        raise RequestError(
            422, f"timeout {timeout:g} s exceeds the maximum {settings.timeout_max:g} s"
        )
    memory = req.memory_mb if req.memory_mb is not None else settings.memory_mb_default
    if memory > settings.memory_mb_max:
        raise RequestError(422, f"memory_mb {memory} exceeds the maximum {settings.memory_mb_max}")
    if memory < MIN_MEMORY_MB:
        # a warm interpreter with the preloaded modules already uses ~55 MiB
        raise RequestError(422, f"memory_mb must be at least {MIN_MEMORY_MB}")
    return timeout, memory


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def to_response(result: RunResult, request_id: str) -> ExecuteResponse:
    stdout, stderr = _text(result.stdout), _text(result.stderr)
    return ExecuteResponse(
        status=result.status,  # type: ignore[arg-type]
        exit_code=result.exit_code,
        stdout=stdout,
        stderr=stderr,
        output=stdout,
        error=stderr,
        truncated=Truncated(stdout=result.truncated_stdout, stderr=result.truncated_stderr),
        duration_ms=result.duration_ms,
        request_id=request_id,
    )


def make_sandboxes(settings: Settings, isolation: str) -> DockerSandboxes:
    """The sandboxes of one isolation mode."""
    return ProcessSandboxes(settings) if isolation == "process" else DockerSandboxes(settings)


class Executor:
    """Owns the sandboxes, the pools, admission and the background upkeep tasks.

    ``pool`` serves the server's isolation mode. A process-mode server also keeps a small
    container-mode pool for requests that ask for ``isolation: "container"``; a container-mode
    server answers every request in container mode, the stricter one.
    """

    def __init__(self, settings: Settings, sandboxes: DockerSandboxes | None = None) -> None:
        self.settings = settings
        self.sandboxes = sandboxes or make_sandboxes(settings, settings.isolation)
        # Docker calls block: give them their own thread budget, apart from FastAPI's.
        self._limiter = anyio.CapacityLimiter(settings.max_concurrency * 2 + 16)
        self.admission = Admission(
            settings.max_concurrency, settings.max_queue, settings.queue_timeout
        )
        self.pool = self._make_pool(self.sandboxes, settings.pool_size)
        self.pools = {settings.isolation: self.pool}
        if settings.isolation == "process":
            strict = make_sandboxes(settings, "container")
            self.pools["container"] = self._make_pool(strict, settings.strict_pool_size)
        self.docker_ok = False
        self.image_ok = False
        self.running_ids: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._orphan_candidates: set[str] = set()

    def _make_pool(self, sandboxes: DockerSandboxes, size: int) -> WarmPool:
        return WarmPool(
            sandboxes,
            size,
            self.run_in_thread,
            max_parallel_warmups=self.settings.warmup_parallelism,
        )

    async def run_in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(partial(fn, *args), limiter=self._limiter)

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        await self.check_docker()
        if self.docker_ok:
            await self.reap(everything=True)
        for pool in self.pools.values():
            pool.start()
        self._tasks = [
            asyncio.create_task(
                self._every(self.settings.docker_check_interval, self.check_docker)
            ),
            asyncio.create_task(self._every(self.settings.reap_interval, self.reap)),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for pool in self.pools.values():
            await pool.stop()
        if self.docker_ok:
            await self.reap(everything=True)

    async def _every(self, seconds: float, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await job()
            except Exception:  # upkeep must survive anything; the next round tries again
                log.exception("background job %s failed", getattr(job, "__name__", job))

    async def check_docker(self) -> None:
        was_ok = self.docker_ok
        self.docker_ok = await self.run_in_thread(self.sandboxes.ping)
        if self.docker_ok:
            try:
                self.image_ok = await self.run_in_thread(self.sandboxes.image_present)
            except SandboxError:
                self.image_ok = False
            if not was_ok:
                log.info("Docker engine reachable")
        elif was_ok:
            log.error("Docker engine unreachable")
        if self.docker_ok:
            for pool in self.pools.values():
                pool.purge_dead()
        metrics.DOCKER_UP.set(1 if self.docker_ok else 0)

    async def reap(self, everything: bool = False) -> int:
        """Remove this instance's containers that nobody owns (seen twice, or at start/stop)."""
        ids = set(await self.run_in_thread(self.sandboxes.list_ids))
        owned = set(self.running_ids)
        for pool in self.pools.values():
            owned |= pool.ready_ids()
        unowned = ids - owned
        if everything:
            doomed = unowned
        else:
            doomed = unowned & self._orphan_candidates  # unowned on two scans in a row
            self._orphan_candidates = unowned - doomed
        for container_id in doomed:
            if await self.run_in_thread(self.sandboxes.remove, container_id):
                metrics.ORPHANS_REMOVED.inc()
        return len(doomed)

    def readiness(self) -> dict[str, Any]:
        return {
            "docker": self.docker_ok,
            "image": self.image_ok,
            "pool_ready": self.pool.ready_count,
            "pool_size": self.settings.pool_size,
            "pool_warm": self.pool.is_warm(),
            "isolation": self.settings.isolation,
            "running": self.admission.running,
            "queued": self.admission.waiting,
            "last_error": self.pool.last_error,
        }

    @property
    def ready(self) -> bool:
        return self.docker_ok and self.image_ok and self.pool.is_warm()

    # -- running -------------------------------------------------------------------------
    async def execute(self, req: ExecuteRequest, request_id: str) -> ExecuteResponse:
        timeout, memory_mb = resolve_limits(req, self.settings)
        if not self.docker_ok:
            raise ServiceUnavailable("Docker engine unreachable")
        started = time.monotonic()
        async with self.admission.slot():
            result = await self._run_once(req, timeout, memory_mb, self.settings.sandbox_wait)
            metrics.QUEUE_SECONDS.observe(time.monotonic() - started - result.duration_ms / 1000)
        metrics.RUN_SECONDS.observe(result.duration_ms / 1000)
        metrics.TOTAL_SECONDS.observe(time.monotonic() - started)
        if result.status == "timeout":
            metrics.TIMEOUTS.inc()
        elif result.status == "memory_limit":
            metrics.OOM_KILLS.inc()
        return to_response(result, request_id)

    async def _run_once(
        self, req: ExecuteRequest, timeout: float, memory_mb: int, wait: float
    ) -> RunResult:
        pool = self.pools.get(req.isolation or self.settings.isolation, self.pool)
        sandboxes = pool.sandboxes
        try:
            warm = await pool.acquire(wait)
        except TimeoutError:
            reason = pool.last_error or "no sandbox became ready in time"
            raise ServiceUnavailable(f"no sandbox available: {reason}") from None
        self.running_ids.add(warm.id)
        result: RunResult | None = None
        try:
            if warm.memory_mb != memory_mb:
                await self.run_in_thread(sandboxes.resize, warm, memory_mb)
            result = await self.run_in_thread(sandboxes.run, warm, req.code, req.input, timeout)
            return result
        except SandboxError as exc:
            metrics.SANDBOX_ERRORS.inc()
            raise ServiceUnavailable(str(exc)) from exc
        except Exception as exc:  # anything else from the engine layer is still not a verdict
            log.exception("unexpected sandbox failure")
            metrics.SANDBOX_ERRORS.inc()
            raise ServiceUnavailable(f"sandbox failure: {exc!r}") from exc
        finally:
            self.running_ids.discard(warm.id)
            pool.release(warm, result)
