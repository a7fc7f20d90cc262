"""The verdict rule: one closed set of statuses, decided from what the sandbox observed.

Every backend reports an ``Observation``; ``decide`` alone turns it into a ``SnippetResult``.
The rule: the exit status, the kill reason and the OOM kill come from the supervisor or the
engine, never from anything the snippet wrote. The child's own report (an uncaught
``MemoryError``) is writable by the snippet, so it may only make the snippet's verdict worse:
it turns a failing exit into ``memory_limit``, never a clean exit into anything.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field, replace

from boxed_client.status import Limit, Status

from .guest.protocol import KILLED_CPU, KILLED_OUTPUT, KILLED_WALL


@dataclass(frozen=True)
class RunLimits:
    """The limits one run had (the reason line quotes them)."""

    wall_seconds: float
    cpu_seconds: float
    memory_mb: int
    output_bytes: int


@dataclass(frozen=True)
class Observation:
    """What a backend saw of one run, before any verdict."""

    exit_code: int | None  # reaped by the supervisor (128+N for signal N)
    killed_for: str | None  # the supervisor stopped it: protocol.KILLED_*
    started: bool  # the child reached the snippet (else the set-up failed: not a verdict)
    oom_killed: bool  # the kernel's OOM killer acted in the sandbox during the run
    memory_error: bool  # the child reported an uncaught MemoryError (snippet-writable!)
    stdout: bytes
    stderr: bytes
    truncated_stdout: bool
    truncated_stderr: bool
    duration_ms: float
    cpu_ms: float | None = None
    max_rss_kb: int | None = None
    installed: bool = False  # a compile run's output is kept as the program of later runs
    signal: int | None = None  # the signal that killed it, from the kernel's wait status
    files: dict[str, bytes] = field(default_factory=dict)  # the fetched files found
    fetch_status: dict[str, str] = field(default_factory=dict)  # every fetched name's status


@dataclass(frozen=True)
class SnippetResult:
    """The verdict on one snippet with its output and what it used."""

    status: Status
    exit_code: int | None
    limit: Limit | None
    reason: str | None  # one human line when a limit ended the run
    stdout: bytes
    stderr: bytes
    truncated_stdout: bool
    truncated_stderr: bool
    duration_ms: float
    cpu_ms: float | None
    max_rss_kb: int | None
    files: dict[str, bytes] = field(default_factory=dict)
    fetch_status: dict[str, str] = field(default_factory=dict)  # name -> ok, missing, refused


class NotAVerdict(Exception):
    """The observation says the sandbox failed, not the code (answered as a service error)."""


SIGKILL_EXIT = 128 + 9


def _limit_and_status(obs: Observation) -> tuple[Status, Limit | None]:
    if not obs.started and obs.killed_for not in (KILLED_WALL, KILLED_CPU):
        # It ended by itself before the code ran: its set-up failed (stderr says why). Stopped
        # at a time limit before it got there, the limit was simply shorter than a start.
        why = obs.stderr[-300:].decode(errors="replace").strip() or f"exit {obs.exit_code}"
        raise NotAVerdict(f"the sandbox's child died before running the code: {why}")
    if obs.killed_for == KILLED_WALL:
        return Status.TIMEOUT, Limit.WALL
    if obs.killed_for == KILLED_CPU:
        return Status.TIMEOUT, Limit.CPU
    if obs.killed_for == KILLED_OUTPUT or obs.truncated_stdout or obs.truncated_stderr:
        return Status.OUTPUT_LIMIT, Limit.OUTPUT
    if obs.killed_for is not None:
        raise NotAVerdict(f"unknown kill reason {obs.killed_for!r}")
    if obs.exit_code == 0:
        return Status.OK, None
    if (obs.oom_killed and obs.exit_code == SIGKILL_EXIT) or obs.memory_error:
        return Status.MEMORY_LIMIT, Limit.MEMORY
    return Status.ERROR, None


def signal_name(signum: int) -> str:
    """``11 (SIGSEGV)``, or the bare number for a signal Python does not name."""
    try:
        return f"{signum} ({signal.Signals(signum).name})"
    except ValueError:
        return str(signum)


def _reason(limit: Limit | None, limits: RunLimits, obs: Observation) -> str | None:
    if limit is Limit.WALL:
        return f"wall-clock limit of {limits.wall_seconds:g} s reached"
    if limit is Limit.CPU:
        return f"CPU-time limit of {limits.cpu_seconds:g} s reached"
    if limit is Limit.MEMORY:
        return f"memory limit of {limits.memory_mb} MiB reached"
    if limit is Limit.OUTPUT:
        cut = (("stdout", obs.truncated_stdout), ("stderr", obs.truncated_stderr))
        streams = [name for name, truncated in cut if truncated] or ["stdout"]
        return f"output limit of {limits.output_bytes} bytes reached on {' and '.join(streams)}"
    if obs.signal is not None:
        return f"killed by signal {signal_name(obs.signal)}"
    return None


BAD_ALLOC = b"std::bad_alloc"
NEAR_LIMIT = 0.9  # peak memory this close to the limit: an allocation failed at the limit


def out_of_memory(obs: Observation, limits: RunLimits) -> Observation:
    """A program's memory verdict (an exec'd program has no ``MemoryError`` report): a failing
    exit whose stderr names ``std::bad_alloc`` or whose peak memory reached the limit. Both are
    the program's own, so, as the rule says, they only turn a failure into ``memory_limit``."""
    failed = obs.killed_for is None and obs.exit_code not in (0, None)
    peak = (obs.max_rss_kb or 0) * 1024
    near = peak >= NEAR_LIMIT * limits.memory_mb * 1024 * 1024
    if failed and (BAD_ALLOC in obs.stderr[-4096:] or near) and not obs.memory_error:
        return replace(obs, memory_error=True)
    return obs


def decide(obs: Observation, limits: RunLimits) -> SnippetResult:
    """The verdict on ``obs``; raises ``NotAVerdict`` when the sandbox, not the code, failed."""
    status, limit = _limit_and_status(obs)
    stopped = limit in (Limit.WALL, Limit.CPU, Limit.OUTPUT)
    return SnippetResult(
        status=status,
        exit_code=None if stopped else obs.exit_code,
        limit=limit,
        reason=_reason(limit, limits, obs),
        stdout=obs.stdout,
        stderr=obs.stderr,
        truncated_stdout=obs.truncated_stdout,
        truncated_stderr=obs.truncated_stderr,
        duration_ms=obs.duration_ms,
        cpu_ms=obs.cpu_ms,
        max_rss_kb=obs.max_rss_kb,
        files=obs.files,
        fetch_status=obs.fetch_status,
    )
