"""An in-memory backend for unit tests of the pool, the engine, admission and the routes.

It runs no code: each run answers what its ``behaviour`` returns for the job (by default the
input echoed on stdout, exit 0). It keeps the books a leak test needs: every sandbox made,
every sandbox removed, and the ones still alive.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from ..guest.protocol import FETCH_OK, FileEntry, FileReport, FileRequest
from ..image_scan import ImageReport, ImageScan, ScanCache
from ..verdict import Observation, SnippetResult, Status
from .base import BackendHealth, Job, SandboxError, SessionSpec

Behaviour = Callable[[Job], Observation | Awaitable[Observation]]


def observed(
    stdout: bytes = b"", stderr: bytes = b"", exit_code: int = 0, **fields: object
) -> Observation:
    """An observation of a run that ended by itself, with ``fields`` overriding the rest."""
    base = Observation(
        exit_code=exit_code,
        killed_for=None,
        started=True,
        oom_killed=False,
        memory_error=False,
        stdout=stdout,
        stderr=stderr,
        truncated_stdout=False,
        truncated_stderr=False,
        duration_ms=1.0,
        cpu_ms=1.0,
        max_rss_kb=1024,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def echo(job: Job) -> Observation:
    return observed(stdout=job.stdin.encode())


class FakeSandbox:
    def __init__(self, backend: FakeBackend, sandbox_id: str, memory_mb: int) -> None:
        self.backend = backend
        self.id = sandbox_id
        self.memory_mb = memory_mb
        self.runs = 0
        self.alive = True

    async def run(self, job: Job) -> Observation:
        self.runs += 1
        self.backend.jobs.append(job)
        answer = self.backend.behaviour(job)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    async def run_batch(self, jobs: Sequence[Job]) -> list[Observation | None]:
        """As the supervisor runs a batch: in order, stopping after a run a limit killed."""
        self.backend.batches.append(len(jobs))
        observations: list[Observation | None] = []
        for job in jobs:
            observation = await self.run(job)
            observations.append(observation)
            if observation.killed_for is not None:
                break
        return observations + [None] * (len(jobs) - len(observations))

    def can_reuse(self, result: SnippetResult) -> bool:
        return self.backend.reuses_sandboxes and result.status in (Status.OK, Status.ERROR)

    def can_continue(self, result: SnippetResult) -> bool:
        return result.status in (Status.OK, Status.ERROR)

    async def settle(self) -> bool:
        await asyncio.sleep(0)
        return self.backend.settle_clean

    async def resize(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb

    def is_alive(self) -> bool:
        return self.alive

    async def discard(self) -> bool:
        return await self.backend.remove(self.id)


class FakeSession:
    """A session sandbox in memory: each call answers the backend's ``behaviour``; a call
    for which ``ends_session`` is true ends the interpreter, as ``sys.exit`` would."""

    def __init__(self, backend: FakeBackend, sandbox_id: str, spec: SessionSpec) -> None:
        self.backend = backend
        self.id = sandbox_id
        self.memory_mb = spec.memory_mb
        self.spec = spec
        self.session_id = spec.session_id  # as the Docker backend's label boxed.session
        self.ended = False
        self.alive = True
        self.calls: list[Job] = []
        self.files: dict[str, bytes] = {}  # its working directory, flat
        self.file_requests: list[FileRequest] = []

    async def run(self, job: Job) -> Observation:
        if not self.alive:
            raise SandboxError("fake session sandbox removed")
        self.calls.append(job)
        self.backend.jobs.append(job)
        answer = self.backend.behaviour(job)
        if inspect.isawaitable(answer):
            answer = await answer
        # a limit kills a Python session's interpreter; a shell's call is a bash of its own
        killed = answer.killed_for is not None and self.spec.language == "python"
        self.ended = killed or self.backend.ends_session(job)
        return answer

    async def file_request(
        self, request: FileRequest, data: bytes = b""
    ) -> tuple[FileReport, bytes]:
        """Files in a flat dict (path -> bytes), no folders: enough for the routes' tests."""
        if not self.alive:
            raise SandboxError("fake session sandbox removed")
        self.file_requests.append(request)
        path, files = request.path, self.files
        if request.op == "put":
            created = path not in files
            files[path] = data
            return FileReport(status=FETCH_OK, size=len(data), created=created), b""
        if request.op == "list":
            entries = [FileEntry(name=name, kind="file", size=len(files[name])) for name in files]
            return FileReport(status=FETCH_OK, entries=sorted(entries, key=lambda e: e.name)), b""
        if path not in files:
            return FileReport(status="missing"), b""
        if request.op == "delete":
            del files[path]
            return FileReport(status=FETCH_OK), b""
        return FileReport(status=FETCH_OK, size=len(files[path])), files[path]

    def is_alive(self) -> bool:
        return self.alive

    async def discard(self) -> bool:
        return await self.backend.remove(self.id)


class FakeBackend:
    """Sandboxes in memory; ``create_failures`` makes the next N warm-ups fail."""

    def __init__(
        self,
        behaviour: Behaviour = echo,
        *,
        reuse: bool = True,
        name: str = "fake",
        create_failures: int = 0,
        settle_clean: bool = True,
        ends_session: Callable[[Job], bool] = lambda job: False,
    ) -> None:
        self.behaviour = behaviour
        self.ends_session = ends_session
        self.reuses_sandboxes = reuse
        self.name = name
        self.create_failures = create_failures
        self.settle_clean = settle_clean
        self.up = True
        self.problem: str | None = None  # e.g. "image missing": up, but cannot make sandboxes
        self.sandboxes: dict[str, FakeSandbox | FakeSession] = {}  # alive
        self.created: list[str] = []
        self.removed: list[str] = []
        self.jobs: list[Job] = []
        self.batches: list[int] = []  # the size of each batch a sandbox was sent
        # what examine_image finds (operator images): its image's id and filesystem
        self.image_id = f"sha256:{name}"
        self.image_scan = ImageScan(entries=1)
        self._ids = itertools.count(1)

    async def create_warm(self, memory_mb: int) -> FakeSandbox:
        await asyncio.sleep(0)
        if not self.up:
            raise SandboxError("fake engine down")
        if self.create_failures > 0:
            self.create_failures -= 1
            raise SandboxError("fake warm-up failed")
        sandbox = FakeSandbox(self, f"{self.name}-{next(self._ids)}", memory_mb)
        self.sandboxes[sandbox.id] = sandbox
        self.created.append(sandbox.id)
        return sandbox

    async def create_session(self, spec: SessionSpec) -> FakeSession:
        await asyncio.sleep(0)
        if not self.up:
            raise SandboxError("fake engine down")
        session = FakeSession(self, f"{self.name}-session-{next(self._ids)}", spec)
        self.sandboxes[session.id] = session
        self.created.append(session.id)
        return session

    async def list_owned(self) -> list[str]:
        return list(self.sandboxes)

    async def examine_image(self, cache: ScanCache) -> ImageReport:
        """Its image as ``image_scan`` says it is (``cache`` unused: nothing to scan)."""
        return ImageReport(f"fake:{self.name}", self.image_id, {}, self.image_scan)

    async def remove(self, sandbox_id: str) -> bool:
        sandbox = self.sandboxes.pop(sandbox_id, None)
        if sandbox is not None:
            sandbox.alive = False
            self.removed.append(sandbox_id)
        return True

    async def health(self) -> BackendHealth:
        if not self.up:
            return BackendHealth(up=False, problem="fake engine down")
        return BackendHealth(up=True, problem=self.problem)

    async def close(self) -> None:
        return None
