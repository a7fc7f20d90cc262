"""The runs of one request: compile once, then run the program in fresh processes.

A request (one ``/execute`` snippet, one ``/judge`` submission) holds one sandbox at a time.
Its compile step installs the program in the sandbox (see ``guest/supervisor.py``); each run
is a fresh child, and the sandbox proves itself clean (``settle``) before the next one. A run
that leaves the sandbox unfit to continue (a limit killed it) retires that sandbox; the next run
gets another and compiles the program there again, so every run starts from the same state.

A sandbox lost under a run (killed from outside, its supervisor gone) is not the code's verdict:
the run is tried once more on a fresh sandbox. Lost again under the same code, the verdict is
the code's (``error``, its reason says the sandbox was lost twice): code that reliably takes its
sandbox down must not escape its reward as an infrastructure failure. A failure with no code in
flight (no sandbox to be had) is the infrastructure's: ``ServiceUnavailable``.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from boxed_client.defaults import RETRY_MARGIN  # a lost run's retry: beyond its wall
from scorer.outcome import FailureCode

from . import metrics
from .backends import SandboxError
from .backends.base import Job, Sandbox
from .compile_cache import CachedProgram, CompileCache, program_key
from .languages import PROGRAM, Language
from .pool import WarmPool
from .request_errors import ServiceUnavailable
from .verdict import (
    NotAVerdict,
    Observation,
    RunLimits,
    SnippetResult,
    Status,
    decide,
    out_of_memory,
)

log = logging.getLogger("boxed.runs")
COMPILE_ATTEMPTS = 3  # sandboxes that may fail to settle after the compile step, in a row
NO_OP = ("/bin/true",)  # a run that only ends the request's hold on the sandbox


class SandboxLost(Exception):
    """The sandbox failed under a run: its outcome is unknown. ``code_ran``: the code had
    started (else the sandbox's set-up for it failed, which the code cannot have caused)."""

    def __init__(self, detail: str, code_ran: bool = True) -> None:
        super().__init__(detail)
        self.code_ran = code_ran


@dataclass(frozen=True)
class Run:
    """One run of a request: its stdin, its limits, the code (None: the submission itself);
    ``harness``: the stdin is a test script judged in a process of its own (guest/harness.py)."""

    stdin: str
    limits: RunLimits
    code: str | None = None
    harness: bool = False


class CompileFailed(Exception):
    """The compile step did not produce a program: the submission's own fault. Raised by the
    first compile or by a compile again in a fresh sandbox (a lost one's replacement); either
    way the compile's verdict is the code's. A plain exception, not a frozen dataclass: the
    context managers it passes through set its ``__traceback__``."""

    def __init__(self, result: SnippetResult) -> None:
        super().__init__(result.status)
        self.result = result


def compile_failed(result: SnippetResult) -> bool:
    return result.status is not Status.OK


def lost_twice(first: SandboxLost, second: SandboxLost) -> SnippetResult:
    """The code's verdict when its sandbox was lost under it twice in a row."""
    return SnippetResult(
        status=Status.ERROR,
        exit_code=None,
        limit=None,
        reason=f"the sandbox was lost twice under this code ({first}; then {second})",
        stdout=b"",
        stderr=b"",
        truncated_stdout=False,
        truncated_stderr=False,
        duration_ms=0.0,
        cpu_ms=None,
        max_rss_kb=None,
    )


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
        pch: bool = False,
        compile_cache: CompileCache | None = None,
        image: str = "",
    ) -> None:
        """``pch``: a C++ compile searches the image's precompiled headers first;
        ``compile_cache``: compiled programs kept across requests (``image``: the sandbox
        image's id, part of their key)."""
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
        self.compile_argv = language.compile_argv(pch) if language.compiled else None
        self.cache = compile_cache if compile_cache is not None and compile_cache.enabled else None
        self.cache_key = ""
        if self.cache is not None and self.compile_argv is not None:
            assert compile_limits is not None
            self.cache_key = program_key(
                argv=self.compile_argv,
                version=language.version,
                image=image,
                limits=compile_limits,
                source=code,
                files=files,
            )
        # A program the compile made, stored once the clean-up after the compile passes.
        self.pending: CachedProgram | None = None

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
            elif self.pending is not None and self.cache is not None:
                # proven clean before the compile (or it was not handed out) and again now
                self.cache.put(self.cache_key, self.pending)
        self.pending = None  # only the clean-up right after the compile vouches for it
        if sandbox is None:
            try:
                sandbox = await self.pool.acquire(self.sandbox_wait)
            except TimeoutError:
                reason = self.pool.last_error or "no sandbox became ready in time"
                raise ServiceUnavailable(
                    f"no sandbox available: {reason}", FailureCode.SANDBOX_UNAVAILABLE
                ) from None
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
        self.pending = None

    async def _job(self, job: Job) -> SnippetResult:
        return (await self._jobs([job]))[0]

    async def _jobs(self, jobs: list[Job], program: bool = False) -> list[SnippetResult]:
        """Run ``jobs`` (the same memory limit) in the current (or a new) sandbox, more than one
        in one batch; their results, in order, up to the first after which the sandbox cannot
        go on (it is given back then: later runs get another sandbox). ``program``: the jobs
        run the compiled program, installed first in the sandbox they get (a sandbox that
        failed to settle is replaced by one without it).

        A sandbox lost under them is replaced and the jobs run again, once, while the wall
        limit still fits the request's time; lost again with the code running both times and
        the engine healthy, a lone job's verdict is ``error`` (the module docstring says why)
        and a batch's jobs go on one at a time. Otherwise the loss is the infrastructure's."""
        started = time.monotonic()
        try:
            return await self._attempt(jobs, program)
        except SandboxLost as exc:
            first = exc
        wall = max(job.limits.wall_seconds for job in jobs)
        if time.monotonic() - started > wall + RETRY_MARGIN:
            raise ServiceUnavailable(str(first), FailureCode.SANDBOX_LOST) from first
        log.warning("sandbox lost under a run, trying it once more on a fresh one: %s", first)
        metrics.SANDBOX_RETRIES.inc()
        try:
            return await self._attempt(jobs, program)
        except SandboxLost as exc:
            second = exc
        health = await self.pool.backend.health()
        if not (first.code_ran and second.code_ran) or not health.up or health.problem:
            why = f"the sandbox was lost twice ({first}; then {second})"
            raise ServiceUnavailable(why, FailureCode.SANDBOX_LOST) from second
        if len(jobs) > 1:
            log.warning("sandbox lost twice under a batch: its runs go on one at a time")
            return [result for job in jobs for result in await self._jobs([job], program)]
        log.warning("sandbox lost twice under the same code: the code's verdict is error")
        return [lost_twice(first, second)]

    async def _attempt(self, jobs: list[Job], program: bool) -> list[SnippetResult]:
        """One try of ``_jobs``; ``SandboxLost`` when the sandbox failed under them."""
        for attempt in itertools.count():
            if program and (self.sandbox is None or not self.compiled):
                if attempt == COMPILE_ATTEMPTS:
                    raise ServiceUnavailable("no sandbox stayed clean after the compile step")
                await self._compile()  # takes the sandbox with the compile step's own limit
            sandbox = await self._sandbox(jobs[0].limits.memory_mb)
            if not program or self.compiled:
                break
        results: list[SnippetResult] = []
        try:
            if len(jobs) == 1:
                observations: list[Observation | None] = [await sandbox.run(jobs[0])]
            else:
                observations = await sandbox.run_batch(jobs)
            for job, observation in zip(jobs, observations, strict=True):
                if observation is None:
                    break  # the supervisor stopped the batch before it
                if job.argv:
                    observation = out_of_memory(observation, job.limits)
                results.append(decide(observation, job.limits))
                self.last, self.holding, self.unsettled = results[-1], job.more, True
                if job.install:
                    self.compiled = observation.installed
                if job.more and not sandbox.can_continue(results[-1]):
                    self._give_back(results[-1])
                    break  # what ran after it in this sandbox runs again in another
        except (SandboxError, NotAVerdict) as exc:
            metrics.SANDBOX_ERRORS.inc()
            self._give_back(None)
            raise SandboxLost(str(exc), code_ran=not isinstance(exc, NotAVerdict)) from exc
        except Exception as exc:  # anything else from the backend is still not a verdict
            log.exception("unexpected sandbox failure")
            metrics.SANDBOX_ERRORS.inc()
            self._give_back(None)
            raise SandboxLost(f"sandbox failure: {exc!r}") from exc
        return results

    # -- the request's steps -----------------------------------------------------------------
    async def _compile(self) -> None:
        """Compile into the current (or a new) sandbox, or install the cached program;
        ``CompileFailed`` when the compile fails."""
        assert self.compile_limits is not None and self.compile_argv is not None
        if self.cache is not None and await self._install_cached():
            return
        keep = self.cache is not None
        job = Job(
            code=self.code,
            stdin="",
            limits=self.compile_limits,
            argv=self.compile_argv,
            source=self.language.source,
            install=PROGRAM,
            files=self.files,  # headers or data the code includes
            fetch=(PROGRAM,) if keep else (),  # read back after the compile, for the cache
            fetch_bytes=self.cache.entry_max_bytes if self.cache is not None else 0,
            more=True,
        )
        result = await self._job(job)
        binary = result.files.get(PROGRAM)
        result = replace(result, files={}, fetch_status={})
        self.compile_result = self.compile_result or result
        if compile_failed(result):
            raise CompileFailed(result)
        if not self.compiled:
            raise ServiceUnavailable("the compiler succeeded but no program was installed")
        if keep and binary:
            self.pending = CachedProgram.of(binary, result.stdout, result.stderr)

    async def _install_cached(self) -> bool:
        """Install the cached program (its hash checked) instead of compiling: whether it
        is installed. The compile step's answer is the cached compile's output."""
        assert self.cache is not None and self.compile_limits is not None
        entry = self.cache.get(self.cache_key)
        if entry is None:
            return False
        # Nothing compiles: the sandbox keeps the memory it has (no resize to the compiler's)
        memory = self.sandbox.memory_mb if self.sandbox is not None else self.pool.memory_mb
        job = Job(
            code="",
            stdin="",
            limits=replace(self.compile_limits, memory_mb=memory),
            argv=NO_OP,
            install=PROGRAM,
            files=((PROGRAM, entry.binary),),
            more=True,
        )
        result = await self._job(job)
        if compile_failed(result) or not self.compiled:
            log.warning("a cached program was not installed (%s): compiling it", result.reason)
            return False
        result = replace(result, stdout=entry.stdout, stderr=entry.stderr)
        self.compile_result = self.compile_result or result
        return True

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
        harness: bool = False,
    ) -> SnippetResult:
        """One run of the submission (or of ``code``, Python: a driver around it, a checker)
        on ``stdin``. ``more``: other runs of this request follow; ``own``: the run is the
        submission's, with the request's files (a checker's is not); ``heavy``: ``code``
        imports the preload modules where its syntax tree cannot show it (a driver holds the
        submission as a string); ``harness``: ``stdin`` is a test script (``Run``)."""
        job = self._run_job(Run(stdin, limits, code, harness), more, own, heavy)
        return (await self._jobs([job], program=code is None and self.language.compiled))[0]

    async def run_all(self, runs: Sequence[Run], *, more: bool, heavy: bool) -> list[SnippetResult]:
        """The submission's runs ``runs``, as ``run`` would give them one by one, but sent to
        the sandbox in batches (no round trip between two runs; see ``Sandbox.run_batch``).
        A batch holds runs of one memory limit; one the sandbox cannot go on after ends it,
        and the rest go on in another sandbox (compiled again), as with ``run``."""
        results: list[SnippetResult] = []
        while len(results) < len(runs):
            rest = runs[len(results) :]
            memory = rest[0].limits.memory_mb
            size = next((i for i, r in enumerate(rest) if r.limits.memory_mb != memory), len(rest))
            batch = rest[:size]
            jobs = [
                self._run_job(r, more or len(results) + i < len(runs) - 1, True, heavy)
                for i, r in enumerate(batch)
            ]
            results += await self._jobs(jobs, program=self.language.compiled)
        return results

    def _run_job(self, run: Run, more: bool, own: bool, heavy: bool) -> Job:
        io = {"files": self.files, "fetch": self.fetch, "fetch_bytes": self.fetch_bytes}
        if not own:
            io = {}
        stdin, limits = run.stdin, run.limits
        if run.code is None and self.language.compiled:
            argv: tuple[str, ...] = self.language.run
            return Job(code="", stdin=stdin, limits=limits, argv=argv, more=more, **io)
        if run.code is None and self.language.source is not None:  # a script (bash)
            return Job(
                code=self.code,
                stdin=stdin,
                limits=limits,
                argv=self.language.run,
                source=self.language.source,
                more=more,
                **io,
            )
        text = self.code if run.code is None else run.code
        return Job(
            code=text, stdin=stdin, limits=limits, more=more, heavy=heavy, harness=run.harness, **io
        )

    async def close(self) -> None:
        """End the request: drop a kept program, hand the sandbox back."""
        if self.sandbox is None:
            return
        if self.holding and self.pool.backend.reuses_sandboxes:
            try:  # once: a lost sandbox has nothing left to drop
                no_op = Job(code="", stdin="", limits=self.last_limits(), argv=NO_OP)
                await self._attempt([no_op], program=False)
            except (ServiceUnavailable, SandboxLost):
                return  # the sandbox is already given back (and removed)
        self._give_back(self.last)

    def last_limits(self) -> RunLimits:
        memory = self.sandbox.memory_mb if self.sandbox is not None else 64
        return RunLimits(wall_seconds=5.0, cpu_seconds=5.0, memory_mb=memory, output_bytes=1024)
