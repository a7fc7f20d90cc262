"""Watching a run (stdlib only): its wall-clock limit, the CPU time of the sandbox uid's
processes, and its output cap, while the output is forwarded; then the drain of its pipes.

One loop for the supervisor's children and the session's calls: ``watch`` polls the output
pipes and the caller's own end-of-run descriptors (a zygote's report, an interpreter's socket)
until the run ends by itself or a limit stops it. The CPU time is read from /proc only when
the budget could be spent (no earlier moment can see it spent at the container's quota).
"""

from __future__ import annotations

import math
import os
import select
import signal
import time

from .processes import CLOCK_TICKS, cpu_ticks, kill_uid, snippet_processes
from .protocol import KILLED_CPU, KILLED_OUTPUT, KILLED_WALL
from .stdio import Output

DRAIN_SECONDS = 1.0  # longest wait for pipe EOF once the child is dead
DRAIN_TICK = 0.02  # a pipe open and quiet this long once the child is dead: a stray holds it


def physical_cpu(seconds: float, ceiling: float) -> float:
    """``seconds`` of counted CPU time, at most ``ceiling``: the container's CPU quota times the
    wall time, all the CPU its processes can have had. gVisor counts a task's time in the
    application even while the host has it waiting for a CPU, so with more busy processes than
    CPUs it counts several times what they got (a fork bomb: 100 s of CPU in 3 s of wall time);
    runc's kernel counts what they got, which the quota bounds (to within the scheduler's
    slack). Capped, the same code gets the same CPU time, and CPU verdict, on both."""
    return min(seconds, ceiling)


def tree_cpu_seconds(uid: int, ticks_at_start: int, ceiling: float) -> float:
    """CPU time of the snippet's processes so far, less what they had at the start, at most
    ``ceiling`` (see ``physical_cpu``)."""
    return physical_cpu(
        max(cpu_ticks(snippet_processes(uid)) - ticks_at_start, 0) / CLOCK_TICKS, ceiling
    )


def backstop_fired(exit_code: int, counted: float, cpu_limit: float) -> bool:
    """Whether the kernel's RLIMIT_CPU backstop ended the child: a SIGXCPU death (or the SIGKILL
    at the hard limit) with at least the limit spent, as the kernel that enforces the rlimit
    counts it, before ``physical_cpu``'s cap. gVisor's count runs ahead of the CPU the threads
    got while they wait for a core, so its backstop can fire while the capped figure is still
    under the limit (64 spinning threads on a loaded machine): that is the limit's verdict
    too. A snippet that signals itself before it spent its budget keeps its own verdict."""
    return exit_code in (128 + signal.SIGXCPU, 128 + signal.SIGKILL) and counted >= cpu_limit


class Clock:
    """A run's wall-clock and CPU limits, from the moment it is made (the run's start)."""

    def __init__(self, uid: int, wall: float, cpu: float, cpus: float, ticks_at_start: int) -> None:
        self.uid, self.cpu, self.cpus = uid, cpu, cpus  # cpus: the container's CPU quota
        self.ticks_at_start = ticks_at_start
        self.started = time.monotonic()
        self.deadline = self.started + wall
        self.cpu_check = self.started + cpu / cpus  # no earlier moment can see it spent

    def limit_reached(self, now: float) -> str | None:
        """KILLED_WALL or KILLED_CPU once that limit is reached at ``now``, else None."""
        if now >= self.deadline:
            return KILLED_WALL
        if now >= self.cpu_check:
            left = self.cpu - self.cpu_seconds(now)
            if left <= 0:
                return KILLED_CPU
            self.cpu_check = now + max(left / self.cpus, 0.01)
        return None

    def cpu_seconds(self, now: float) -> float:
        """The CPU time the uid's processes spent since the start, as ``physical_cpu`` caps it."""
        return tree_cpu_seconds(self.uid, self.ticks_at_start, self.cpus * (now - self.started))

    def next_check(self) -> float:
        """When a limit may be reached next, if nothing else happens."""
        return min(self.deadline, self.cpu_check)


class RunEnd:
    """How a run tells that it ended by itself (the caller's side of ``watch``)."""

    fds: tuple[int, ...] = ()  # descriptors to poll besides the output pipes

    def over(self) -> bool:
        """Whether the run has ended, looked at before every wait."""
        return False

    def tick(self) -> float | None:
        """The longest wait before ``over`` should be looked at again (None: no limit)."""
        return None

    def event(self, fd: int) -> tuple[bool, bool]:
        """``fd`` is readable: (the run has ended, keep polling ``fd``)."""
        return False, True


def watch(clock: Clock, output: Output, end: RunEnd) -> str | None:
    """Forward ``output`` until ``end`` says the run ended (None) or a limit stops it:
    KILLED_WALL, KILLED_CPU or KILLED_OUTPUT."""
    poller = select.poll()
    for fd in (*output.kinds, *end.fds):
        poller.register(fd, select.POLLIN)
    while True:
        now = time.monotonic()
        if end.over():
            return None
        killed_for = clock.limit_reached(now)
        if killed_for is not None:
            return killed_for
        wake = clock.next_check()
        if (tick := end.tick()) is not None:
            wake = min(wake, now + tick)
        ended = False
        for fd, _ in poller.poll(math.ceil((wake - now) * 1000)):
            if fd in output.kinds:
                if not output.forward(fd):
                    poller.unregister(fd)
                    output.close(fd)
            elif fd in end.fds:
                over, keep = end.event(fd)
                ended = ended or over
                if not keep:
                    poller.unregister(fd)
            if output.over_cap:
                return KILLED_OUTPUT
        if ended:
            return None


def drain(output: Output, deadline: float, uid: int) -> set[int]:
    """Forward what is left in the pipes until every writer is gone (EOF); the pids of the
    uid found while a pipe stayed open and quiet (none: no stray was missed).

    The child is reaped by now and a dead process holds no descriptor, so a pipe still open
    is held by a live process of the uid: one forked while the first kill went round (no
    kernel promises that a group kill races no fork; gVisor's does not), or one the process
    list showed as a zombie. Each quiet tick kills the uid's processes again instead of
    waiting the whole deadline for them."""
    for fd in list(output.kinds):
        os.set_blocking(fd, False)
    found = set()
    while output.kinds and (now := time.monotonic()) < deadline:
        readable, _, _ = select.select(list(output.kinds), [], [], min(deadline - now, DRAIN_TICK))
        if not readable:
            found |= kill_uid(uid)
        for fd in readable:
            if not output.forward(fd):
                output.close(fd)
    return found
