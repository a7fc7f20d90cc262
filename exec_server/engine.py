"""The engine every use case runs on: the sandbox backends, their warm pools, admission and the
backend's health, with the start, the stop and the background upkeep (health checks, the reaper).

The use cases (``execute``, ``judge``, ``sessions``) run on it and know backends only through
their interface (``backends.base``). One that holds sandboxes beyond a request (sessions) is
attached as a ``Keeper``: the reaper spares its sandboxes, its upkeep runs while the engine is
started, it is closed at stop before the pools, and ``/readyz`` reports its state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from scorer.outcome import FailureCode

from . import languages, metrics
from .admission import Admission
from .backends import SandboxBackend, SandboxError, create_backend
from .backends.base import BackendHealth
from .compile_cache import CompileCache
from .files import fetch_names, input_files
from .image_scan import ScanCache
from .images import DEFAULT, ImageSet, OperatorImage
from .limits import resolve_compile_limits
from .pool import WarmPool
from .request_errors import ServiceUnavailable
from .runs import Runs
from .settings import Isolation, Settings

log = logging.getLogger("boxed.executor")  # its name from before the split: log filters select it
STOP_REMOVAL_SECONDS = 20.0  # at stop, the longest wait for the engine to remove sandboxes


class Keeper(Protocol):
    """A use case that keeps sandboxes of its own beyond one request (the session manager)."""

    def sandbox_ids(self) -> set[str]:
        """The sandboxes it holds: never orphans to reap."""
        ...

    async def run_upkeep(self) -> None:
        """Its background upkeep, run from start until stop cancels it."""
        ...

    async def close_all(self) -> None:
        """At stop: give back every sandbox it holds, before the pools stop."""
        ...

    def readiness(self) -> dict[str, Any]:
        """Its part of ``/readyz``."""
        ...


def image_key(image: OperatorImage) -> str:
    """The id of the image a request's sandboxes run, as its last check found it (else its
    reference): part of a cached program's key."""
    report = image.report
    return report.image_id if report is not None and report.image_id else image.spec.image


class Engine:
    """Owns the backends, their pools, admission and the background upkeep tasks.

    ``pool`` serves the server's isolation mode. A process-mode server also keeps a small
    container-mode pool for requests that ask for ``isolation: "container"``; a container-mode
    server answers every request in container mode, the stricter one.

    Each operator image (``images``) has backends and pools of its own, made the same way from
    its settings (``image_pools``; the default image's are ``pools``), sized by its
    ``pool_size`` (0: cold, a sandbox made per request; the strict pool: always cold).
    """

    def __init__(
        self, settings: Settings, backends: Mapping[Isolation, SandboxBackend] | None = None
    ) -> None:
        self.settings = settings
        wanted: dict[Isolation, int] = {settings.isolation: settings.pool_size}
        if settings.isolation == "process":
            wanted["container"] = settings.strict_pool_size
        if backends is None:
            names = {"process": settings.process_backend, "container": settings.container_backend}
            backends = {mode: create_backend(names[mode], settings) for mode in wanted}
        self.admission = Admission(
            settings.max_concurrency,
            settings.max_queue,
            settings.queue_timeout,
            max_per_tenant=settings.work_per_tenant,
        )
        self.pools = {
            mode: WarmPool(
                backends[mode],
                size,
                settings.memory_mb_default,
                max_parallel_warmups=settings.warmup_parallelism,
            )
            for mode, size in wanted.items()
        }
        self.pool = self.pools[settings.isolation]
        self.images = ImageSet(settings)
        self.scans = ScanCache(settings.image_scan_dir)
        self.image_pools: dict[str, dict[Isolation, WarmPool]] = {DEFAULT: self.pools}
        for image in self.images:
            if image.name != DEFAULT:
                self.image_pools[image.name] = self._pools_of(image, wanted)
        self.health: BackendHealth = BackendHealth(up=False, problem="not checked yet")
        self.keepers: list[Keeper] = []
        self.running_ids: set[str] = set()
        self.compile_cache = CompileCache(settings.compile_cache_mb * 1024 * 1024)
        self._tasks: list[asyncio.Task[None]] = []
        self._orphan_candidates: set[str] = set()

    def _pools_of(
        self, image: OperatorImage, modes: Mapping[Isolation, int]
    ) -> dict[Isolation, WarmPool]:
        """An operator image's pools: one per isolation mode, on backends made as the default
        image's are (the same code, the same hardening), from the image's settings."""
        s = image.settings
        names = {"process": s.process_backend, "container": s.container_backend}
        sizes = {mode: image.spec.pool_size if mode == s.isolation else 0 for mode in modes}
        return {
            mode: WarmPool(
                create_backend(names[mode], s),
                size,
                s.memory_mb_default,
                max_parallel_warmups=s.warmup_parallelism,
                label=f"{names[mode]}:{image.name}",
            )
            for mode, size in sizes.items()
        }

    def all_pools(self) -> list[WarmPool]:
        """Every pool of every image."""
        return [pool for pools in self.image_pools.values() for pool in pools.values()]

    def image(self, name: str | None) -> OperatorImage:
        """The allow-listed image ``name`` (None: the default); 422 for another name."""
        return self.images.named(name)

    def backend_for(self, image: OperatorImage) -> SandboxBackend:
        """The backend of ``image`` in the server's isolation mode (sessions are made there)."""
        return self.image_pools[image.name][self.settings.isolation].backend

    @property
    def backend(self) -> SandboxBackend:
        return self.pool.backend

    def attach(self, keeper: Keeper) -> None:
        """Run ``keeper`` with the engine (before ``start``): see ``Keeper``."""
        self.keepers.append(keeper)

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        s = self.settings
        log.info(
            "boxed: isolation=%s backend=%s runtime=%s image=%s pool=%d concurrency=%d "
            "queue=%d instance=%s auth=%s",
            s.isolation,
            self.backend.name,
            s.runtime or "default",
            s.sandbox_image,
            s.pool_size,
            s.max_concurrency,
            s.max_queue,
            s.instance_label,
            "on" if s.api_key else "off",
        )
        await self.check_backend()
        refused = [i.problem for i in self.images if i.refused and i.problem]
        if refused:  # the operator's mistake: stop here, not answer 503 for ever
            raise RuntimeError("; ".join(refused))
        if self.health.up:  # what a killed process of this instance left is removed first
            await self.remove_everything(count_as_orphans=True)
        for pool in self.all_pools():
            pool.start()
        self._tasks = [
            asyncio.create_task(
                self._every(self.settings.backend_check_interval, self.check_backend)
            ),
            asyncio.create_task(self._every(self.settings.reap_interval, self.reap)),
            *(asyncio.create_task(keeper.run_upkeep()) for keeper in self.keepers),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for keeper in self.keepers:
            await keeper.close_all()
        for pool in self.all_pools():
            await pool.stop()
        if self.health.up or (await self.backend.health()).up:
            await self.remove_everything()
        for pool in self.all_pools():
            await pool.backend.close()

    async def remove_everything(
        self, seconds: float | None = None, count_as_orphans: bool = False
    ) -> list[str]:
        """At start and stop: remove every sandbox of this instance and wait until its backends
        list none (a removal already under way, a discard's, answers at once that it is, and
        the sandbox is listed until it ends); what is still listed after ``seconds`` is logged
        and returned. At start, each one removed counts as an orphan reaped."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (STOP_REMOVAL_SECONDS if seconds is None else seconds)
        backends = {id(pool.backend): pool.backend for pool in self.all_pools()}.values()
        seen: set[str] = set()
        while True:
            left = []
            for backend in backends:  # the backends of two images list each other's sandboxes
                listed = [i for i in await backend.list_owned() if i not in left]
                await asyncio.gather(*(backend.remove(sandbox_id) for sandbox_id in listed))
                left += listed
            seen.update(left)
            if not left or loop.time() > deadline:
                break
            await asyncio.sleep(0.25)
        if count_as_orphans:
            reaped = sorted(seen - set(left))
            metrics.ORPHANS_REMOVED.inc(len(reaped))
            if reaped:
                log.warning(
                    "reaped %d sandboxes an earlier run of this instance left: %s",
                    len(reaped),
                    ", ".join(s[:12] for s in reaped),
                )
        if left:
            log.error("sandboxes of this instance still listed after removal: %s", left)
        return left

    async def _every(self, seconds: float, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await job()
            except Exception:  # upkeep must survive anything; the next round tries again
                log.exception("background job %s failed", getattr(job, "__name__", job))

    async def check_backend(self) -> None:
        """Ask the primary backend whether it can make sandboxes; log changes once."""
        before = self.health
        self.health = await self.backend.health()
        if self.health.problem != before.problem:
            if self.health.problem:
                log.error("sandboxes unavailable: %s", self.health.problem)
            else:
                log.info("backend %s ready", self.backend.name)
        if self.health.up:
            await self.check_images()
        for name, pools in self.image_pools.items():
            serving = self.images.by_name[name].serving
            for pool in pools.values():
                if self.health.up:
                    pool.purge_dead()
                pool.paused = not (self.health.ok and serving)
                if not pool.paused:
                    pool.wake()
                metrics.BACKEND_UP.labels(pool.backend.name).set(1 if self.health.up else 0)

    async def check_images(self) -> None:
        """Check each image whose tag names another id than the one checked (at the start:
        every image): scanned (``image_scan``, cached by id), refused or taken; a taken one's
        backends make their containers from that id. A backend that cannot examine images
        (pods: their images are the cluster's) serves only the default image, unexamined."""
        for image in self.images:
            backends = [pool.backend for pool in self.image_pools[image.name].values()]
            examine = getattr(backends[0], "examine_image", None)
            if examine is None:
                if image.name == DEFAULT:
                    image.problem = None
                else:  # a configuration this backend cannot honour: the start stops
                    image.problem = f"backend {backends[0].name} cannot serve operator images"
                    image.refused["backend"] = image.problem
                continue
            known = image.report.image_id if image.report else None
            if image.name == DEFAULT and known and known == self.health.details.get("image_id"):
                continue  # its tag still names the checked id (the health check read it)
            try:
                report = await examine(self.scans)
            except SandboxError as exc:
                if image.report is None:
                    image.problem = str(exc)
                continue
            if self.images.accept(image, report):
                for backend in backends:
                    backend.pinned_image = report.image_id  # type: ignore[attr-defined]

    async def reap(self) -> int:
        """Remove this instance's sandboxes that nobody owns on two scans in a row."""
        unowned: set[str] = set()
        removers: dict[str, SandboxBackend] = {}
        listed = {pool.backend: set(await pool.backend.list_owned()) for pool in self.all_pools()}
        kept = set().union(*(keeper.sandbox_ids() for keeper in self.keepers))
        # the backends of two images list each other's sandboxes: owned by any pool counts
        owned = self.running_ids | kept | set().union(*(p.ready_ids() for p in self.all_pools()))
        for backend, ids in listed.items():
            for sandbox_id in ids - owned:
                unowned.add(sandbox_id)
                removers[sandbox_id] = backend
        doomed = unowned & self._orphan_candidates
        self._orphan_candidates = unowned - doomed
        for sandbox_id in doomed:
            if await removers[sandbox_id].remove(sandbox_id):
                metrics.ORPHANS_REMOVED.inc()
                log.warning("reaped sandbox %s: nobody owned it on two scans", sandbox_id[:12])
        return len(doomed)

    def readiness(self) -> dict[str, Any]:
        return {
            "backend": self.backend.name,
            "backend_up": self.health.up,
            "problem": self.health.problem,
            **self.health.details,
            "pool_ready": self.pool.ready_count,
            "pool_size": self.pool.size,
            "pool_warm": self.pool.is_warm(),
            "isolation": self.settings.isolation,
            "running": self.admission.running,
            "queued": self.admission.waiting,
            **{key: value for keeper in self.keepers for key, value in keeper.readiness().items()},
            "last_error": self.pool.last_error,
            # operator images that serve no sandbox now, and why (GET /images has the rest)
            "images_unavailable": {i.name: i.problem for i in self.images if i.problem},
        }

    @property
    def ready(self) -> bool:
        return self.health.ok and self.images.by_name[DEFAULT].serving and self.pool.is_warm()

    # -- running -------------------------------------------------------------------------
    def runs(
        self,
        isolation: Isolation | None,
        language: str,
        code: str,
        compile_timeout: float | None,
        files: dict[str, str] | None = None,
        fetch_files: list[str] | None = None,
        fetch_bytes: int | None = None,
        image: OperatorImage | None = None,
    ) -> Runs:
        """The runs of one request (``async with``), on the pool of its image (None: the
        default) and isolation mode; the request's files checked (4xx) before anything runs;
        ``fetch_bytes``: what each run may fetch (default: BOXED_MAX_FETCH_BYTES)."""
        lang = languages.get(language)
        image = image or self.images.by_name[DEFAULT]
        pools = self.image_pools[image.name]
        return Runs(
            pools.get(isolation or self.settings.isolation, pools[self.settings.isolation]),
            self.running_ids,
            language=lang,
            code=code,
            compile_limits=resolve_compile_limits(compile_timeout, image.settings)
            if lang.compiled
            else None,
            sandbox_wait=self.settings.sandbox_wait,
            files=input_files(files or {}, self.settings),
            fetch=fetch_names(fetch_files or [], self.settings),
            fetch_bytes=self.settings.max_fetch_bytes if fetch_bytes is None else fetch_bytes,
            pch=self.settings.cpp_pch,
            compile_cache=self.compile_cache,
            image=image_key(image),
        )

    def check_available(self, image: OperatorImage | None = None) -> None:
        if not self.health.ok:
            raise ServiceUnavailable(
                self.health.problem or "sandbox backend unavailable", FailureCode.ENGINE_UNAVAILABLE
            )
        image = image or self.images.by_name[DEFAULT]
        if image.problem is not None:
            raise ServiceUnavailable(image.problem)
