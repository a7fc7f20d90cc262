"""The processes of a sandbox (stdlib only): listing them from /proc, their CPU time, killing
and reaping them, and waking up when a child ends.

Every process a snippet starts runs as the sandbox uid; the supervisor, the zygotes and the
session program are root's. So "everything of the snippet's" is "every process of that uid",
found in /proc (by pid: ``kill(-1)`` would take the zygotes too, and a helper process could not
be forked under a fork bomb). Used by the supervisor and the session program alike.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Iterable, KeysView

KILL_SECONDS = 2.0  # longest wait for SIGKILLed processes to vanish
PR_SET_CHILD_SUBREAPER = 36
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STATUS_KEYS = (b"Stat", b"Uid:", b"Thre")  # State, Uid, Threads

libc = ctypes.CDLL(None, use_errno=True)


def read_small(path: str) -> bytes:
    """A small /proc file, in one read (no buffered file object: it costs a run four more
    system calls and the objects of a file per process looked at)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


def processes() -> dict[int, tuple[int, str, int]]:
    """Every process but this one (PID 1): pid -> (real uid, state letter, threads).

    From /proc/<pid>/status, which names the real uid even of a process that made itself
    non-dumpable (its /proc directory then belongs to root)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            lines = read_small(f"/proc/{name}/status").split(b"\n")
            fields = dict(line.split(b":", 1) for line in lines if line[:4] in STATUS_KEYS)
            found[int(name)] = (
                int(fields[b"Uid"].split()[0]),
                fields[b"State"].split()[0].decode(),
                int(fields.get(b"Threads", b"1")),
            )
        except (OSError, KeyError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


def snippet_processes(uid: int) -> dict[int, bool]:
    """The processes of the sandbox uid: everything the snippet started (zombies included):
    pid -> whether it is alive (a zombie whose main thread ended while others run is)."""
    return {
        pid: state != "Z" or threads > 1
        for pid, (owner, state, threads) in processes().items()
        if owner == uid
    }


def cpu_ticks(pids: Iterable[int]) -> int:
    """CPU clock ticks of ``pids`` (live or zombie), with those of the children they reaped."""
    total = 0
    for pid in pids:
        try:
            stat = read_small(f"/proc/{pid}/stat")
            total += sum(int(t) for t in stat.rpartition(b")")[2].split()[11:15])
        except (OSError, ValueError):
            continue  # reaped meanwhile: its time is in its reaper's
    return total


def task_state(pid: int) -> tuple[str, int, bytes] | None:
    """The kernel's view of a process at this instant: (state letter, live threads, context
    switches so far), or None when it is gone. Read from /proc/<pid>/status and task/, which
    need no ptrace access (the syscall and wchan files do, and gVisor has neither); the code
    cannot forge any of it."""
    try:
        lines = read_small(f"/proc/{pid}/status").split(b"\n")
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None
    fields = dict(line.split(b":", 1) for line in lines if b":" in line)
    state = fields.get(b"State", b"?").split()
    switches = fields.get(b"voluntary_ctxt_switches", b"") + fields.get(
        b"nonvoluntary_ctxt_switches", b""
    )
    return (state[0].decode() if state else "?", threads, switches.strip())


def reap() -> None:
    """Reap every child that has ended, without waiting."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_uid(uid: int) -> KeysView[int]:
    """SIGKILL every process of the sandbox uid; the pids found."""
    found = snippet_processes(uid)
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return found.keys()


def kill_all(uid: int) -> bool:
    """Kill and reap every process of the sandbox uid; True when none is left."""
    deadline = time.monotonic() + KILL_SECONDS
    while True:
        reap()
        if not snippet_processes(uid):
            return True
        if time.monotonic() > deadline:
            return False
        kill_uid(uid)
        time.sleep(0.001)


def exit_status(wait_status: int) -> tuple[int, int | None]:
    """(exit code, signal) of a wait status: a death by signal N is exit code 128 + N, as a
    shell reports it, and the signal is the kernel's word (no exit code forges it), else None."""
    code = os.waitstatus_to_exitcode(wait_status)
    return (128 - code, -code) if code < 0 else (code, None)


def become_reaper() -> None:
    """PID 1 reaps every orphan by itself; anywhere else, ask to be the subreaper."""
    if os.getpid() != 1 and libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "not PID 1 and cannot become the subreaper")


class ChildExits:
    """Wakes a poll when any child ends: SIGCHLD through a wake-up pipe (gVisor has no
    pidfd_open). The children restore the signal dispositions they inherit."""

    def __init__(self) -> None:
        self.read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.fds = {self.read_fd, write_fd}
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    def drain(self) -> None:
        """Empty the wake-up pipe (the poll saw it readable)."""
        try:
            while os.read(self.read_fd, 4096):
                pass
        except BlockingIOError:
            pass
