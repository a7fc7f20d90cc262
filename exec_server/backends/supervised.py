"""The host side of the guest supervisor (``exec_server/guest/supervisor.py``), over any stream.

Every backend whose sandboxes run the supervisor (both Docker ones today; pods tomorrow)
speaks through this class: send a request, collect the output frames into capped buffers until
the result frame, and later read the clean-up verdict (``settle``) before the sandbox serves
again. How bytes reach the supervisor (Docker's attach stream, a socket) is the backend's
``SupervisorStream``; how a sandbox is removed or resized is the backend's too.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ..guest import bootstrap_source
from ..guest.protocol import (
    CLEANUP,
    ERRORS,
    FETCH_OK,
    FILE_DATA,
    FILE_NAME,
    OUTPUT,
    READY_MARKER,
    RESULT,
    Anomaly,
    CleanupVerdict,
    FileReport,
    FileRequest,
    GuestConfig,
    MemberReport,
    RunReport,
    RunRequest,
    SessionLimits,
    Skipped,
    encode_request,
    files_section,
    pop_frames,
    read_result,
    snippet_body,
)
from ..settings import Settings
from ..verdict import Observation, SnippetResult, Status
from .base import Job, SandboxError, SessionSpec

log = logging.getLogger("boxed.supervised")
REPORT_GRACE = 10.0  # the supervisor stops runs itself (a bomb's sweep can take a few seconds
# on saturated CPUs); no report this long after the wall limit means it is broken
SETTLE_TIMEOUT = 10.0
FILE_GRACE = 10.0  # a session's file request: this long, plus the time its bytes take at
FILE_BYTES_PER_SECOND = 2**20  # this rate (a slow engine stream), before it counts as broken
MEMBER_TIMEOUT = 30.0  # a fork waits up to 10 s for each of the interpreter's parts
REUSABLE = (Status.OK, Status.ERROR)
# The guest program of a session, by its language (``SessionSpec.language``).
SESSION_PROGRAMS = {"python": "session", "bash": "shell"}
MAX_PARSED_CODE = 64 * 1024  # longer code is not parsed to choose the interpreter: preloaded
_STDLIB = sys.stdlib_module_names
# The variables every snippet gets (over its image's ENV on Docker: DockerBackend.snippet_env),
# whatever the container's: the guest programs set them from their configuration and run with
# none of their own (guest/bootstrap.py).
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    # numeric libraries otherwise start one thread per host core, which pids_limit refuses
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
# The result of a run whose supervisor the OOM killer took.
LOST_TO_OOM = RunReport(
    exit_code=128 + 9,
    signal=None,
    killed_for=None,
    started=True,
    memory_error=False,
    oom_killed=True,
    duration_ms=0.0,
    cpu_ms=None,
    max_rss_kb=None,
    strays=0,
)


def needs_preload(code: str) -> bool:
    """Whether the code imports anything beyond the standard library (then its child is
    forked from the interpreter that preloaded sympy and numpy, so the import costs nothing).

    Read from the code's syntax tree; a dynamic import (``__import__``, ``importlib``) counts
    as a non-stdlib one. Code that imports a heavy module in a way the tree does not show
    still runs, only slower (the light interpreter imports it cold)."""
    if "import" not in code:
        return False
    if len(code) > MAX_PARSED_CODE:
        return True
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False  # it fails to compile in the sandbox too
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [] if node.level else [node.module or ""]
        elif isinstance(node, ast.Name) and node.id == "__import__":
            return True
        else:
            continue
        if any(name.partition(".")[0] not in _STDLIB for name in names):
            return True
        if any(name.startswith("importlib") for name in names):
            return True
    return False


def runs_per_sandbox(settings: Settings, reuse: bool) -> int:
    """The snippets one sandbox serves in its life: ``BOXED_PROCESS_MAX_RUNS`` where sandboxes
    are reused (process mode), else one."""
    return settings.process_max_runs if reuse else 1


@dataclass
class Preload:
    """Whether one backend's sandboxes have the preload modules (``BOXED_PRELOAD``) to fork
    snippets from, and whether a new sandbox should import them at start.

    A sandbox imports them at start (off the requests' path) while snippets that need them
    are recent: one came within the last ``window`` snippets this backend served, the runs
    one sandbox serves in its life. Otherwise it imports them only when a snippet asks. Both
    ways cost a sandbox the same import (about 0.35 s of CPU here) once it serves such a
    snippet; at start it is paid also by every sandbox that never does, which a workload that
    needed sympy once, or rarely, would pay at each renewal (0.35 ms per snippet at 1000 runs
    per sandbox)."""

    available: bool
    window: int = 1000
    served: int = 0  # snippets sent to this backend's sandboxes
    last_needed: int | None = None  # ``served`` when the last one that needed them was sent

    def note(self, needed: bool) -> None:
        """Count one snippet sent, and whether it needed the preload modules."""
        self.served += 1
        if needed:
            self.last_needed = self.served

    @classmethod
    def for_backend(cls, settings: Settings, reuse: bool) -> Preload:
        """A backend's: its window is the life of one of its sandboxes."""
        return cls(bool(settings.preload_modules), window=runs_per_sandbox(settings, reuse))

    @property
    def at_start(self) -> bool:
        """Whether a sandbox made now imports the modules at start."""
        recent = self.last_needed is not None and self.served - self.last_needed < self.window
        return self.available and recent


def supervisor_config(
    settings: Settings,
    *,
    reuse: bool,
    nproc: int | None,
    preload_at_start: bool,
    user: tuple[int, int],
    session: SessionSpec | None = None,
    fork_uids: Sequence[int] = (),
) -> GuestConfig:
    """The guest program's configuration (``guest/supervisor.py``, or ``guest/session.py``
    for a ``session``), the same for every backend; ``nproc``: the child's RLIMIT_NPROC where
    the sandbox has a kernel of its own (gVisor); ``preload_at_start``: the preload modules
    are imported at start, not at the first snippet that needs them (see ``Preload``);
    ``user``: the sandbox's own uid and gid (``host_uids``), which its code runs as."""
    uid, gid = user
    harness_uid, _, harness_gid = settings.harness_user.partition(":")
    return GuestConfig(
        # no zygote in a session: its interpreter imports what it uses once
        preload=list(settings.preload_modules) if session is None else [],
        preload_at_start=preload_at_start,
        uid=uid,
        gid=gid,
        harness_uid=int(harness_uid),
        harness_gid=int(harness_gid or harness_uid),
        output_cap=settings.output_max_bytes,
        nofile=settings.nofile,
        fsize=settings.tmpfs_mb * 1024 * 1024,  # as the tmpfs: one file can fill it, no more
        cpus=float(settings.cpus),
        nproc=nproc,
        reuse=reuse,
        bootstrap=bootstrap_source(),  # what the supervisor starts its zygotes with
        env=[f"{name}={value}" for name, value in SANDBOX_ENV.items()],
        # the session program instead of the one-shot supervisor (a shell's: guest/shell.py)
        program="supervisor" if session is None else SESSION_PROGRAMS[session.language],
        session=None
        if session is None
        else SessionLimits(
            memory_mb=session.memory_mb,
            cpu_budget=session.cpu_budget,
            fork_uids=list(fork_uids),  # ``user``'s block: one uid for each fork it may hold
        ),
    )


def socket_open(sock: socket.socket) -> bool:
    """Whether a supervisor's socket is still open: an idle supervisor sends nothing, so any
    byte waiting means it lives, and end of stream means its sandbox went away."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return True
    except OSError:
        return False


def close_socket(sock: socket.socket) -> None:
    """Shut a supervisor's socket down, then close it: close() alone leaves the descriptor open
    while another object (docker-py's SocketIO) still refers to it, and the other end keeps
    blocking on a stream nobody reads."""
    for step in (lambda: sock.shutdown(socket.SHUT_RDWR), sock.close):
        try:
            step()
        except OSError:
            pass


class SocketStream:
    """A supervisor's stdin and stdout over one connected socket, read on the event loop."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock

    async def send(self, data: bytes) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, data)

    async def receive(self) -> bytes:
        return await asyncio.get_running_loop().sock_recv(self.sock, 65536)

    def diagnostics(self) -> str:
        return ""

    def is_alive(self) -> bool:
        return socket_open(self.sock)

    async def close_input(self) -> None:
        """End the supervisor's stdin: it exits once it has read what was sent."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    async def wait_closed(self, seconds: float) -> None:
        """Wait (briefly) for the stream to end: the supervisor has exited."""
        try:
            async with asyncio.timeout(seconds):
                while await self.receive():
                    pass
        except (TimeoutError, OSError):
            pass

    def close(self) -> None:
        close_socket(self.sock)


class SupervisorGone(SandboxError):
    """The supervisor's stream ended: the sandbox died (killed from outside, or OOM-killed)."""


class SupervisorStream(Protocol):
    """Bytes to and from one supervisor."""

    async def send(self, data: bytes) -> None: ...

    async def receive(self) -> bytes:
        """The next bytes the supervisor wrote on its stdout; b"" once it has exited."""
        ...

    def diagnostics(self) -> str:
        """The last lines the supervisor wrote on its stderr."""
        ...

    def is_alive(self) -> bool: ...

    def close(self) -> None: ...


class SupervisedSandbox:
    """A sandbox whose supervisor serves snippets; backends add ``discard`` and ``resize``."""

    def __init__(
        self,
        sandbox_id: str,
        stream: SupervisorStream,
        memory_mb: int,
        *,
        reusable: bool,
        max_runs: int,
        preload: Preload,
    ) -> None:
        self.id = sandbox_id
        self.stream = stream
        self.memory_mb = memory_mb
        self.reusable = reusable
        self.max_runs = max_runs
        self.preload = preload
        self.runs = 0
        self.holding = False  # a run with ``more`` was the last: a program may be installed
        self.broken = False  # broke protocol or was stopped: never reused
        self.ended = False  # a session's interpreter is gone (its RESULT said so, or it died)
        self._frames = bytearray()  # supervisor frames not yet consumed

    async def wait_ready(self, timeout: float) -> None:
        """Wait for the supervisor's ready marker (it has forked its first child)."""
        try:
            async with asyncio.timeout(timeout):
                while READY_MARKER not in self._frames:
                    chunk = await self.stream.receive()
                    if not chunk:
                        raise SandboxError(f"sandbox exited during warm-up: {self._why()}")
                    self._frames += chunk
        except TimeoutError:
            raise SandboxError("sandbox supervisor did not become ready") from None
        del self._frames[: self._frames.index(READY_MARKER) + len(READY_MARKER)]

    def _why(self) -> str:
        # No last words: it was stopped from outside (container killed or removed, OOM killer)
        return self.stream.diagnostics() or (
            "it wrote nothing: its container was killed or removed from outside"
        )

    async def run(self, job: Job, member: int = 0) -> Observation:
        """Hand the snippet to the supervisor and collect its output and result; ``member``:
        which interpreter of a session with forks runs it (``session_forks``)."""
        await self._send(self._request(job, following=0, member=member))
        observation = await self._observe(job)
        if observation is None:
            self.broken = True
            raise SandboxError("the supervisor skipped a run that was not in a batch")
        return observation

    async def run_batch(self, jobs: Sequence[Job]) -> list[Observation | None]:
        """Run ``jobs`` one after another, each in a fresh process, sent in one message: the
        supervisor goes from one to the next without waiting for the host, proving the sandbox
        clean between two as between two requests (one ``CLEANUP`` verdict, at the end). It
        stops the batch after a run the host would not continue after (a limit killed it, it
        left processes, it ran out of memory) or a failed proof: the later ones come back None."""
        requests = b"".join(
            self._request(job, following=len(jobs) - 1 - i) for i, job in enumerate(jobs)
        )
        # Sent while the results are read: a long batch must not wait for the supervisor to
        # read it while the supervisor waits for the host to read its output.
        sending = asyncio.ensure_future(self._send(requests))
        try:
            # after the first, a run waits for the clean-up of the one before it
            observations = [
                await self._observe(job, SETTLE_TIMEOUT if i else 0.0) for i, job in enumerate(jobs)
            ]
            await sending
        finally:
            if not sending.done():
                self.broken = True
                sending.cancel()
            elif not sending.cancelled():
                sending.exception()  # retrieved: a failed send has marked the sandbox broken
        return observations

    async def member_request(self, op: str, member: int) -> MemberReport:
        """A session's ``fork`` or ``end`` of interpreter ``member`` (``session_forks``)."""
        header = RunRequest(wall=0.0, cpu=0.0, memory_mb=self.memory_mb, heavy=False, last=False)
        await self._send(encode_request(replace(header, op=op, member=member), b""))
        try:
            async with asyncio.timeout(MEMBER_TIMEOUT):
                result = self._result(await self._read_until(RESULT))
        except TimeoutError:
            self.broken = True
            raise SandboxError(f"the session program did not answer a {op}") from None
        if not isinstance(result, MemberReport):
            self.broken = True
            raise SandboxError(f"the session program failed a {op}: {result}")
        return result

    def _request(self, job: Job, following: int, member: int = 0) -> bytes:
        """The supervisor request for ``job``; ``following``: requests of its batch after it."""
        limits = job.limits
        heavy = self.preload.available and not job.argv and (job.heavy or needs_preload(job.code))
        self.preload.note(heavy)
        header = RunRequest(
            wall=float(limits.wall_seconds),
            cpu=float(limits.cpu_seconds),
            memory_mb=self.memory_mb,
            heavy=heavy,
            last=not self.reusable and not job.more,
            argv=list(job.argv) if job.argv else None,
            source=job.source if job.argv else None,
            install=job.install if job.argv else None,
            keep=bool(job.more),
            then=following,
            files=bool(job.files),
            fetch=list(job.fetch or ()),
            fetch_cap=job.fetch_bytes if job.fetch else 0,
            harness=job.harness,
            member=member,
            # While snippets that need the preload modules are recent, a sandbox that has not
            # imported them does so after this run's clean-up, off any snippet's path: the
            # next one that needs them finds them loaded (no cold-import spike).
            preload=self.preload.at_start,
        )
        body = snippet_body(job.code, job.stdin)
        if job.files:
            body += files_section(job.files)
        return encode_request(header, body)

    async def _observe(self, job: Job, before: float = 0.0) -> Observation | None:
        """Read ``job``'s output and result (None: the supervisor skipped it); ``before``: the
        longest the supervisor may take before the run starts (a clean-up)."""
        limits = job.limits
        cap = limits.output_bytes
        out = {OUTPUT: bytearray(), ERRORS: bytearray()}
        files: dict[str, bytearray] = {}
        try:
            async with asyncio.timeout(before + limits.wall_seconds + REPORT_GRACE):
                result = self._result(await self._read_until(RESULT, out, cap + 1, files))
        except TimeoutError:
            self.broken = True
            raise SandboxError("the supervisor did not report in time") from None
        except SupervisorGone:
            # The snippet is a sandbox's only tenant: if the kernel's OOM killer took the
            # supervisor (the snippet can lower its own OOM score), the snippet ran it out of
            # memory. Only the engine can say so; anything else stays a service error.
            self.ended = True
            if not await self.oom_killed():
                raise
            result = LOST_TO_OOM
        if isinstance(result, Anomaly):
            self.broken = True
            raise SandboxError(f"sandbox supervisor failed: {result.anomaly}")
        if isinstance(result, Skipped):
            return None
        if isinstance(result, MemberReport):
            self.broken = True
            raise SandboxError("the session program answered a call as a fork")
        self.runs += 1
        self.holding = job.more
        self.ended = self.ended or result.ended
        if result.strays:
            log.info("sandbox %s: killed %d leftover processes", self.id[:12], result.strays)
        truncated = {kind: len(data) > cap for kind, data in out.items()}
        for data in out.values():
            del data[cap:]
        return Observation(
            exit_code=result.exit_code,
            signal=result.signal,
            killed_for=result.killed_for,
            started=result.started,
            oom_killed=result.oom_killed,
            memory_error=result.memory_error,
            stdout=bytes(out[OUTPUT]),
            stderr=bytes(out[ERRORS]),
            truncated_stdout=truncated[OUTPUT],
            truncated_stderr=truncated[ERRORS],
            duration_ms=result.duration_ms,
            cpu_ms=result.cpu_ms,
            max_rss_kb=result.max_rss_kb,
            installed=result.installed,
            files=self._fetched(result, files, job.fetch_bytes),
            fetch_status={f.name: f.status for f in result.fetched_files},
        )

    async def file_request(
        self, request: FileRequest, data: bytes = b""
    ) -> tuple[FileReport, bytes]:
        """One request on a session's working directory, where no code runs
        (``guest/session_files.py``): the session program's report, and the file it sent for a
        ``get``. A session program that fails or breaks the protocol raises ``SandboxError``."""
        await self._send(encode_request(request, data))
        files: dict[str, bytearray] = {}
        moved = len(data) + (request.cap if request.op == "get" else 0)
        try:
            async with asyncio.timeout(FILE_GRACE + moved / FILE_BYTES_PER_SECOND):
                answer = await self._read_until(RESULT, files=files)
        except TimeoutError:
            self.broken = True
            raise SandboxError(
                "the session program did not answer a file request in time"
            ) from None
        try:
            report = FileReport.from_json(answer)
        except ValueError:
            result = self._result(answer)  # an Anomaly; anything else is malformed
            self.broken = True
            why = result.anomaly if isinstance(result, Anomaly) else "an answer of another kind"
            raise SandboxError(f"session program failed: {why}") from None
        sent = b"".join(bytes(chunk) for chunk in files.values())
        expected = {request.path} if request.op == "get" and report.status == FETCH_OK else set()
        if files.keys() != expected or len(sent) != (report.size if expected else 0):
            self.broken = True
            raise SandboxError("the session program's file disagrees with its report")
        return report, sent

    def _fetched(
        self, result: RunReport, files: dict[str, bytearray], cap: int
    ) -> dict[str, bytes]:
        """The files the supervisor sent, once they agree with its statuses (sizes, the cap);
        a disagreement breaks the sandbox (it is not the code's doing)."""
        sent = {f.name: f.size for f in result.fetched_files if f.status == FETCH_OK}
        sizes = {name: len(data) for name, data in files.items()}
        if sizes != sent or sum(sizes.values()) > cap:
            self.broken = True
            raise SandboxError(f"fetched files disagree with the supervisor's report: {sizes}")
        return {name: bytes(data) for name, data in files.items()}

    def _result(self, data: bytes) -> RunReport | Skipped | Anomaly | MemberReport:
        """The RESULT frame's record; a malformed one breaks the sandbox."""
        try:
            return read_result(data)
        except ValueError as exc:  # a ProtocolError, or no JSON at all
            self.broken = True
            raise SandboxError(f"malformed supervisor report: {exc}") from exc

    async def _send(self, data: bytes) -> None:
        try:
            await self.stream.send(data)
        except OSError as exc:
            self.broken = True
            raise SandboxError(f"sandbox not accepting code: {exc}") from exc

    async def _read_until(
        self,
        wanted: int,
        out: dict[int, bytearray] | None = None,
        cap: int = 0,
        files: dict[str, bytearray] | None = None,
    ) -> bytes:
        """Read supervisor frames until one of kind ``wanted`` (its data); output frames go to
        ``out`` (each stream kept to ``cap`` bytes), fetched files to ``files``. Later frames
        stay buffered."""
        current: bytearray | None = None
        while True:
            for kind, data in pop_frames(self._frames):
                if kind == wanted:
                    return data
                if files is not None and kind == FILE_NAME:
                    current = files.setdefault(data.decode("utf-8", "replace"), bytearray())
                    continue
                if files is not None and kind == FILE_DATA and current is not None:
                    current += data
                    continue
                if out is None or kind not in out:
                    self.broken = True
                    raise SandboxError(f"unexpected supervisor frame of kind {kind}")
                target = out[kind]
                target += data[: max(cap - len(target), 0)]
            try:
                chunk = await self.stream.receive()
            except OSError as exc:
                self.broken = True
                raise SandboxError(f"lost the supervisor's stream: {exc}") from exc
            if not chunk:
                self.broken = True
                raise SupervisorGone(f"the supervisor exited: {self._why()}")
            self._frames += chunk

    def can_reuse(self, result: SnippetResult) -> bool:
        """Reuse after a normal end only: a timeout, memory or output kill retires it."""
        return (
            self.reusable
            and not self.broken
            and not self.holding
            and result.status in REUSABLE
            and self.runs < self.max_runs
        )

    def can_continue(self, result: SnippetResult) -> bool:
        """The next run of the same request: after a normal end only, as for reuse."""
        return not self.broken and result.status in REUSABLE

    async def settle(self) -> bool:
        """Wait for the supervisor's clean-up verdict: True when the sandbox is clean."""
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT):
                verdict = CleanupVerdict.from_json(await self._read_until(CLEANUP))
        except (SandboxError, TimeoutError, ValueError) as exc:  # ValueError: malformed
            log.warning("sandbox %s retired: %s", self.id[:12], exc or "no clean-up verdict")
            return False
        if not verdict.clean:
            log.warning("sandbox %s retired: %s", self.id[:12], verdict.problems)
            return False
        return True

    def is_alive(self) -> bool:
        return not self.broken and self.stream.is_alive()

    async def oom_killed(self) -> bool:
        """Whether the engine saw the OOM killer act in this sandbox (backends that can tell
        override this)."""
        return False
