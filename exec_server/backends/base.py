"""The backend interface: how sandboxes are made, reached, reused and removed.

A *backend* makes warm sandboxes (``create_warm``) and session sandboxes (``create_session``:
one persistent interpreter each, see ``SessionSandbox``), lists what it owns so that orphans can
be reaped, removes sandboxes by id and reports its health for readiness. A *sandbox* is one warm
sandbox, ready for a snippet: it runs one job at a time and reports what it observed (the
verdict is decided apart, by ``exec_server.verdict.decide``), says whether it may serve again,
proves itself clean before it does (``settle``) and is discarded when it may not.

Like httpx's transports: the pool, the engine and the use cases speak only this interface;
``docker.py`` implements it on a Docker engine, ``fake.py`` in memory for unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..guest.protocol import FileReport, FileRequest
from ..verdict import Observation, RunLimits, SnippetResult


class SandboxError(RuntimeError):
    """The sandbox infrastructure failed; the snippet's outcome is unknown (a 503)."""


@dataclass(frozen=True)
class Job:
    """One snippet to run, with its limits resolved."""

    code: str
    stdin: str
    limits: RunLimits
    heavy: bool = False  # needs the preload modules: fork it from the preloaded interpreter
    harness: bool = False  # ``stdin`` is a test script for ``code``, judged in its own process
    argv: tuple[str, ...] = ()  # exec this program instead of running ``code`` as Python
    source: str | None = None  # write ``code`` to this file of the working directory first
    install: str | None = None  # after a clean exit, keep this output file as the program
    files: tuple[tuple[str, bytes], ...] = ()  # written into the working directory first
    fetch: tuple[str, ...] = ()  # files of the working directory returned after the run
    fetch_bytes: int = 0  # at most this many bytes of them in all
    more: bool = False  # more runs of the same request follow: the program and a one-shot
    # sandbox stay (the request ends with a run without ``more``, which removes the program)


@dataclass(frozen=True)
class BackendHealth:
    """Whether the backend can make sandboxes now, and why not."""

    up: bool  # its engine answers
    problem: str | None = None  # why sandboxes cannot be made (None: they can)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.up and self.problem is None


@runtime_checkable
class Sandbox(Protocol):
    """One warm sandbox."""

    id: str
    memory_mb: int  # the memory limit it has now

    async def run(self, job: Job) -> Observation:
        """Run ``job``; raises ``SandboxError`` when the sandbox, not the code, failed."""
        ...

    async def run_batch(self, jobs: Sequence[Job]) -> list[Observation | None]:
        """Run ``jobs`` in order, each in a fresh process, without a round trip between them;
        the sandbox stops after a run it could not continue after (a limit killed it), and
        the jobs it did not run come back None."""
        ...

    def can_reuse(self, result: SnippetResult) -> bool:
        """Whether it may serve another snippet after ``result``."""
        ...

    def can_continue(self, result: SnippetResult) -> bool:
        """Whether it may serve the next run of the same request (a judge's next test, once
        settled) after ``result``; a one-shot sandbox may, a pooled one past its runs too."""
        ...

    async def settle(self) -> bool:
        """Wait until it is proven clean again; False means discard it."""
        ...

    async def resize(self, memory_mb: int) -> None:
        """Give it another memory limit before a run."""
        ...

    def is_alive(self) -> bool:
        """Cheap check that an idle sandbox is still there."""
        ...

    async def discard(self) -> bool:
        """Remove it; True when it is gone."""
        ...


@dataclass(frozen=True)
class SessionSpec:
    """What a session sandbox is made with: fixed for its whole life."""

    memory_mb: int  # the interpreter's memory limit (and its container's, plus the overhead)
    cpu_budget: float  # CPU seconds the interpreter may use in its whole life (a backstop)
    session_id: str  # the session's id, as the API gives it: its sandbox is labelled with it
    max_forks: int = 0  # forks it may hold at once, in its container (``session_forks``)
    language: str = "python"  # "bash": a shell session (guest/shell.py), a fresh bash per call


@runtime_checkable
class SessionSandbox(Protocol):
    """A sandbox of its own holding one persistent interpreter: each ``run`` is one call in
    the same namespace and working directory. Once ``ended`` (a limit killed the interpreter,
    or the code ended it) it serves no more calls; nothing of it runs between calls."""

    id: str
    memory_mb: int
    ended: bool

    async def run(self, job: Job) -> Observation:
        """Run one call; raises ``SandboxError`` when the sandbox, not the code, failed."""
        ...

    def is_alive(self) -> bool:
        """Cheap check that the idle sandbox is still there."""
        ...

    async def discard(self) -> bool:
        """Remove it; True when it is gone."""
        ...

    async def file_request(
        self, request: FileRequest, data: bytes = b""
    ) -> tuple[FileReport, bytes]:
        """One request on its working directory between calls (``exec_server.session_files``):
        the report and a got file's bytes; raises ``SandboxError`` when the sandbox failed."""
        ...


@runtime_checkable
class SandboxBackend(Protocol):
    """A way of making sandboxes (an engine, a runtime, a cluster)."""

    name: str
    reuses_sandboxes: bool  # sandboxes may serve again after settling

    async def create_warm(self, memory_mb: int) -> Sandbox:
        """A started sandbox ready for code; raises ``SandboxError``."""
        ...

    async def create_session(self, spec: SessionSpec) -> SessionSandbox:
        """A started session sandbox with its interpreter ready; raises ``SandboxError``."""
        ...

    async def list_owned(self) -> list[str]:
        """Ids of every sandbox of this backend and service instance, live or not."""
        ...

    async def remove(self, sandbox_id: str) -> bool:
        """Remove a sandbox by id (reaping); True when it is gone."""
        ...

    async def health(self) -> BackendHealth:
        """Whether sandboxes can be made now."""
        ...

    async def close(self) -> None:
        """Release what the backend holds (connections, threads)."""
        ...
