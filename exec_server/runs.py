"""The runs of one request: compile once, then run the program in fresh processes.

A request (one ``/execute`` snippet, one ``/judge`` submission) holds one sandbox at a time.
Its compile step installs the program in the sandbox (see ``guest/supervisor.py``); each run
is a fresh child, and the sandbox proves itself clean (``settle``) before the next one. A run
that leaves the sandbox unfit to continue (a limit killed it) retires that sandbox; the next run
gets another and compiles the program there again, so every run starts from the same state.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from . import metrics
from .backends import SandboxError
from .backends.base import Job, Sandbox
from .languages import PROGRAM, Language
from .pool import WarmPool
from .request_errors import ServiceUnavailable
from .verdict import NotAVerdict, RunLimits, SnippetResult, Status, decide, out_of_memory

log = logging.getLogger("boxed.runs")
NO_OP = ("/bin/true",)  # a run that only ends the request's hold on the sandbox


@dataclass(frozen=True)
class CompileFailed(Exception):
    """The compile step did not produce a program: the submission's own fault."""

    result: SnippetResult


def compile_failed(result: SnippetResult) -> bool:
    return result.status is not Status.OK


class Runs:
    """The sandbox runs of one request (use as ``async with``; not safe for concurrent use)."""

    def __init__(
        self,
        pool: WarmPool,
        running_ids: set[str],
        *,
        language: Language,
        code: str,
        compile_limits: RunLimits | None,
        sandbox_wait: float,
        files: tuple[tuple[str, bytes], ...] = (),
        fetch: tuple[str, ...] = (),
        fetch_bytes: int = 0,
    ) -> None:
        self.pool = pool
        self.running_ids = running_ids
        self.language = language
        self.code = code
        self.compile_limits = compile_limits
        self.sandbox_wait = sandbox_wait
        self.files, self.fetch, self.fetch_bytes = files, fetch, fetch_bytes
        self.sandbox: Sandbox | None = None
        self.unsettled = False  # the last run's clean-up verdict is still to be read
        self.compiled = False  # the program is installed in ``sandbox``
        self.holding = False  # the last run kept the program (a closing run must drop it)
        self.last: SnippetResult | None = None
        self.compile_result: SnippetResult | None = None

    async def __aenter__(self) -> Runs:
        return self

    async def __aexit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is not None and self.sandbox is not None:
            self._give_back(None)  # stopped mid-run (cancelled): its stream state is unknown
        await self.close()

    # -- sandboxes ---------------------------------------------------------------------------
    async def _sandbox(self, memory_mb: int) -> Sandbox:
        """The current sandbox, settled; another one when it cannot prove itself clean."""
        sandbox = self.sandbox
        if sandbox is not None and self.unsettled:
            self.unsettled = False
            if not await sandbox.settle():
                self._give_back(None)
                sandbox = None
        if sandbox is None:
            try:
                sandbox = await self.pool.acquire(self.sandbox_wait)
            except TimeoutError:
                reason = self.pool.last_error or "no sandbox became ready in time"
                raise ServiceUnavailable(f"no sandbox available: {reason}") from None
            self.sandbox = sandbox
            self.running_ids.add(sandbox.id)
            self.compiled = False
        if sandbox.memory_mb != memory_mb:
            await sandbox.resize(memory_mb)
        return sandbox

    def _give_back(self, result: SnippetResult | None) -> None:
        """Hand the sandbox back to its pool (which settles, reuses or removes it)."""
        if self.sandbox is not None:
            self.running_ids.discard(self.sandbox.id)
            self.pool.release(self.sandbox, result)
        self.sandbox, self.compiled, self.holding, self.unsettled = None, False, False, False

    async def _job(self, job: Job) -> SnippetResult:
        sandbox = await self._sandbox(job.limits.memory_mb)
        try:
            observation = await sandbox.run(job)
            if job.argv:
                observation = out_of_memory(observation, job.limits)
            result = decide(observation, job.limits)
        except (SandboxError, NotAVerdict) as exc:
            metrics.SANDBOX_ERRORS.inc()
            self._give_back(None)
            raise ServiceUnavailable(str(exc)) from exc
        except Exception as exc:  # anything else from the backend is still not a verdict
            log.exception("unexpected sandbox failure")
            metrics.SANDBOX_ERRORS.inc()
            self._give_back(None)
            raise ServiceUnavailable(f"sandbox failure: {exc!r}") from exc
        self.last, self.holding, self.unsettled = result, job.more, True
        if job.install:
            self.compiled = observation.installed
        if job.more and not sandbox.can_continue(result):
            self._give_back(result)
        return result

    # -- the request's steps -----------------------------------------------------------------
    async def _compile(self) -> None:
        """Compile into the current (or a new) sandbox; ``CompileFailed`` when it fails."""
        assert self.compile_limits is not None and self.language.compile is not None
        job = Job(
            code=self.code,
            stdin="",
            limits=self.compile_limits,
            argv=self.language.compile,
            source=self.language.source,
            install=PROGRAM,
            files=self.files,  # headers or data the code includes
            more=True,
        )
        result = await self._job(job)
        self.compile_result = self.compile_result or result
        if compile_failed(result):
            raise CompileFailed(result)
        if not self.compiled:
            raise ServiceUnavailable("the compiler succeeded but no program was installed")

    async def prepare(self) -> SnippetResult | None:
        """The compile step, for a compiled language (its result; raises ``CompileFailed``)."""
        if self.language.compiled:
            await self._compile()
        return self.compile_result

    async def run(
        self,
        stdin: str,
        limits: RunLimits,
        *,
        more: bool,
        code: str | None = None,
        own: bool = True,
        heavy: bool = False,
    ) -> SnippetResult:
        """One run of the submission (or of ``code``, Python: a driver around it, a checker)
        on ``stdin``. ``more``: other runs of this request follow; ``own``: the run is the
        submission's, with the request's files (a checker's is not); ``heavy``: ``code``
        imports the preload modules where its syntax tree cannot show it (a driver holds the
        submission as a string)."""
        io = {"files": self.files, "fetch": self.fetch, "fetch_bytes": self.fetch_bytes}
        if not own:
            io = {}
        if code is None and self.language.compiled:
            if self.sandbox is None or not self.compiled:
                await self._compile()
            argv: tuple[str, ...] = self.language.run
            job = Job(code="", stdin=stdin, limits=limits, argv=argv, more=more, **io)
        elif code is None and self.language.source is not None:  # a script (bash)
            job = Job(
                code=self.code,
                stdin=stdin,
                limits=limits,
                argv=self.language.run,
                source=self.language.source,
                more=more,
                **io,
            )
        else:
            text = self.code if code is None else code
            job = Job(code=text, stdin=stdin, limits=limits, more=more, heavy=heavy, **io)
        return await self._job(job)

    async def close(self) -> None:
        """End the request: drop a kept program, hand the sandbox back."""
        if self.sandbox is None:
            return
        if self.holding and self.pool.backend.reuses_sandboxes:
            try:
                await self._job(Job(code="", stdin="", limits=self.last_limits(), argv=NO_OP))
            except ServiceUnavailable:
                return  # the sandbox is already given back (and removed)
        self._give_back(self.last)

    def last_limits(self) -> RunLimits:
        memory = self.sandbox.memory_mb if self.sandbox is not None else 64
        return RunLimits(wall_seconds=5.0, cpu_seconds=5.0, memory_mb=memory, output_bytes=1024)
