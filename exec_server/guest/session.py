"""The resident program of a session sandbox (stdlib only): PID 1 and one persistent interpreter.

A session container runs this instead of the one-shot supervisor (``bootstrap`` picks it by the
configuration's ``program``). It keeps the supervisor's hardening and shares its guest kit
(``processes``, ``stdio``, ``watch``, ``cleanup``) and ``zygote``'s set-up of a child: the
interpreter is a forked child that drops to the sandbox uid with no capability left, gets its
own session, an OOM score of 1000, nice 19, the session's memory limit (RLIMIT_AS), and
``/tmp/run`` as its working directory; it runs every call of the session in one namespace, so
globals, imports and files persist.

Per call, as for a one-shot snippet: the body (code and input) arrives on stdin with a
``protocol.request`` header; it is handed to the interpreter in a memfd over a socket; the
interpreter's stdout and stderr are forwarded with a per-call cap; the call is stopped at its
wall-clock limit, at the CPU-time limit of the sandbox uid's processes, or when a stream passes
its cap. The RESULT frame adds ``ended``: whether the interpreter is gone (a limit killed it,
or the code ended it: ``sys.exit``, ``os._exit``, a crash), after which the host refuses
every later call of the session.

Between calls nothing of the session runs: every other process of the sandbox uid is killed
(a stray the code left) and the interpreter is stopped (SIGSTOP) with all its threads, until
the next call continues it (SIGCONT). An idle session therefore uses no CPU.

The interpreter reports the end of a call on its socket (two bytes: failed, MemoryError, then
the call's nonce). The code can write that socket too, so a report ends nothing by itself: a
call ends when the interpreter exits, or when it reported this call's nonce and the kernel
shows it quiet (one thread, asleep, no context switch between two looks, and where the kernel
shows it, waiting in the serve loop's own ``recvmsg``); until then the limits run. A report
may only make the verdict worse; every limit, the exit status of an
interpreter that ended and the OOM kill come from this process (docs/sessions.md says what
code that owns its interpreter can and cannot still do).
"""

import contextlib
import ctypes
import dataclasses
import glob
import io
import os
import resource
import signal
import socket
import stat
import struct
import sys
import time

from . import forks, runner, session_files, zygote
from .cleanup import Counters
from .processes import (
    KILL_SECONDS,
    ChildExits,
    become_reaper,
    cpu_ticks,
    exit_status,
    kill_all,
    kill_uid,
    libc,
    processes,
    read_small,
    snippet_processes,
    task_state,
)
from .protocol import (
    KILLED_OUTPUT,
    READY_MARKER,
    RESULT,
    Anomaly,
    FileRequest,
    MemberReport,
    RunReport,
    read_session_request,
)
from .stdio import CHUNK, Output, read_request, receive_body, scrub, send
from .watch import Clock, RunEnd, tree_cpu_seconds, watch

READY = b"ready"
CALL = b"call"  # then the call's nonce, which its report repeats
NONCE_BYTES = 16
SETUP_TIMEOUT = 30.0
QUIET_TICK = 0.002  # how often a reported call is looked at until its interpreter is quiet
RECVMSG = {"x86_64": 47, "aarch64": 212}.get(os.uname().machine)  # the serve loop's wait
PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_GETREGS, PTRACE_EVENT_STOP = 0x4206, 0x4207, 12, 128


# -- the interpreter (the sandbox uid) ------------------------------------------------------
def _interpreter_main(sock, out_w, err_w, config):
    """The forked interpreter: set up like a snippet's child, then serve calls. Never returns."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        for fd, target in ((devnull, 0), (out_w, 1), (err_w, 2), (sock.fileno(), 3)):
            os.dup2(fd, target)
        os.closerange(4, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        zygote.interpreter_defaults(config)  # no zygote made this one
        zygote.enter_sandbox(config)
        zygote.check_no_capabilities()  # no zygote proved the drop for this process
        limits = {"cpu": config.session.cpu_budget, "memory_mb": config.session.memory_mb}
        zygote.set_request_limits(limits, config)
        channel = socket.socket(fileno=3)
    except BaseException as exc:  # noqa: BLE001 - any set-up failure must stop before code
        os.write(2, f"boxed session: interpreter set-up failed: {exc!r}\n".encode())
        os._exit(zygote.SETUP_FAILED)
    try:
        channel.send(READY)
        _serve_calls(channel)
    finally:
        os._exit(1)  # never fall back into the supervisor's code


def _serve_calls(channel, namespace=None, fork=forks.fork_interpreter):
    """Serve calls until the supervisor goes away. What this loop calls is bound here, before
    any code of the session runs, so code that patches builtins, ``os``, ``socket`` or ``sys``
    later does not change how a call is received, run or reported. A fork request makes a
    fork that serves its own calls in a copy of ``namespace`` (``forks``)."""
    if namespace is None:
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    receive, report, take = channel.recvmsg, channel.send, _take_call
    while True:
        message, ancillary, _, _ = receive(64, socket.CMSG_SPACE(4 * 3))
        fds = _received_fds(ancillary)
        if message[: len(forks.FORK)] == forks.FORK and len(fds) == 3:
            fork(channel, message, fds, lambda own: _serve_calls(own, namespace))
            continue
        if message[: len(CALL)] != CALL or len(fds) != 1:
            os._exit(0)  # the supervisor is going away
        failed, memory_error = take(fds[0], namespace)
        report(bytes((failed, memory_error)) + message[len(CALL) :])


def _received_fds(ancillary, unpack=struct.unpack, rights=(socket.SOL_SOCKET, socket.SCM_RIGHTS)):
    """The descriptors an SCM_RIGHTS message carried."""
    fds = []
    for level, kind, data in ancillary:
        if (level, kind) == rights:
            fds.extend(unpack(f"{len(data) // 4}i", data[: len(data) // 4 * 4]))
    return fds


def _take_call(
    fd,
    namespace,
    seek=os.lseek,
    close=os.close,
    read_body=runner.read_body,
    install_stdin=runner.install_stdin,
    text_stdin=lambda: io.TextIOWrapper(io.FileIO(0, "rb", closefd=False), encoding="utf-8"),
    flush=runner.flush_std_streams,
):
    """Read one call's body from ``fd``, run it with its input as stdin: (failed, MemoryError)."""
    seek(fd, 0, os.SEEK_SET)
    code, stdin = read_body(fd)
    close(fd)
    install_stdin(stdin)
    sys.stdin = text_stdin()
    outcome = _run_cell(code, namespace)
    flush()
    return outcome


def _run_cell(
    code,
    namespace,
    run=exec,
    build=compile,
    leave=os._exit,
    exit_code=runner.exit_code,
    flush=runner.flush_std_streams,
    traceback=runner.print_traceback,
    system_exit=SystemExit,
    memory_error=MemoryError,
):
    """Run one call's code in the session's namespace: (failed, MemoryError) as 0/1 each.
    ``SystemExit`` ends the interpreter with its status, as it ends ``python -c``."""
    try:
        run(build(code, "<string>", "exec"), namespace)
        return 0, 0
    except system_exit as exc:
        status = exit_code(exc)
        flush()
        leave(status)
    except BaseException as exc:  # noqa: BLE001 - report every failure like the interpreter
        traceback(exc)
        return 1, int(isinstance(exc, memory_error))


# -- the supervisor side (root, PID 1) ------------------------------------------------------
class _CallEnd(RunEnd):
    """A call's end as the supervisor observes it: the interpreter exited (SIGCHLD), or it
    reported this call's end (its nonce) and the kernel shows it quiet (``_Interpreter.quiet``).
    A report alone ends nothing: the code can write the socket too."""

    def __init__(self, interpreter, nonce):
        self.interpreter, self.nonce = interpreter, nonce
        self.fds = (interpreter.exits.read_fd, interpreter.sock.fileno())
        self.reported = False  # a report of this call arrived
        self.failed = self.memory_error = False  # any report of this call said so
        self.exited = False

    def event(self, fd):
        if fd == self.interpreter.exits.read_fd:
            self.interpreter.exits.drain()
            self.exited = self.interpreter.exited()
            return self.exited, True
        while True:
            try:
                report = self.interpreter.sock.recv(64, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return False, True
            if not report:  # the code closed its end: wait for the interpreter
                return False, False
            self._take(report)

    def _take(self, report):
        """Count one report: another call's (stale or forged) is ignored; this call's may only
        make the verdict worse."""
        if len(report) != 2 + NONCE_BYTES or report[2:] != self.nonce:
            return
        self.reported = True
        self.failed = self.failed or report[0] != 0
        self.memory_error = self.memory_error or report[1] == 1

    def over(self):
        return self.reported and self.interpreter.quiet()

    def tick(self):
        return QUIET_TICK if self.reported else None


class _Interpreter:
    """The session's interpreter as the supervisor sees it: its pid, socket and pipes."""

    def __init__(self, config, exits, counters, fork=None):
        """The session's first interpreter, forked from here; or ``fork``: (uid, what
        ``forks.fork_member`` answered, the namespaces' owner) for a fork of one."""
        self.exits, self.counters = exits, counters  # the supervisor's SIGCHLD pipe, cgroup files
        self.uid = config.uid
        self.cap = config.output_cap
        self.cpus = config.cpus  # the container's CPU quota: CPU time grows at most this fast
        self.ended = False
        self.member = forks.Member()  # its user namespace, for forking it
        self.idle = None  # where it waits in its serve loop, as the kernel shows it (or None)
        self.reader = None  # a fork's: forks.SyscallReader (PID 1 reads the others' itself)
        self.syscall_file = True  # the kernel shows /proc/<pid>/syscall (not gVisor's)
        if fork is not None:
            self.uid, (self.pid, self.sock, self.out_r, self.err_r, self.member), owner = fork
            for fd in (self.out_r, self.err_r):
                os.set_blocking(fd, False)
            self.reader = forks.SyscallReader(owner, self.member.ns, self.pid)
            self.idle = self._idle_wait()
            self._stop()
            return
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.out_r, out_w = os.pipe2(os.O_CLOEXEC)
        self.err_r, err_w = os.pipe2(os.O_CLOEXEC)
        self.pid = os.fork()
        if self.pid == 0:
            self.sock.close()
            _interpreter_main(theirs, out_w, err_w, config)
        theirs.close()
        # gVisor has no such file: there the look reads registers (``_registers_waiting``)
        self.syscall_file = os.path.exists(f"/proc/{self.pid}/syscall")
        for fd in (out_w, err_w):
            os.close(fd)
        for fd in (self.out_r, self.err_r):
            os.set_blocking(fd, False)
        self.sock.settimeout(SETUP_TIMEOUT)
        try:
            answer = self.sock.recv(16)
        except TimeoutError:
            answer = b""
        self.sock.settimeout(None)
        if answer != READY:
            why = self._read_available(self.err_r).decode(errors="replace").strip()
            raise RuntimeError(f"the interpreter did not start: {why or 'no message'}")
        self.ended = False
        self.idle = self._idle_wait()
        self._stop()

    @staticmethod
    def _read_available(fd):
        chunks = []
        try:
            while chunk := os.read(fd, CHUNK):
                chunks.append(chunk)
        except BlockingIOError:
            pass
        return b"".join(chunks)

    def exited(self):
        """Whether the interpreter has ended (a ptrace stop it caused is let go first)."""
        info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        return info is not None and not self._untraced(info)

    def _untraced(self, info):
        """Let the interpreter go if ``info`` is a ptrace stop: code that called
        PTRACE_TRACEME made this process its tracer, and a tracee stays stopped (SIGCONT
        included) until its tracer continues it. Detached with the signal that stopped it, it
        goes on untraced; True when it was such a stop."""
        if not _trapped(info, self.pid):
            return False
        _, status = os.waitpid(self.pid, os.WUNTRACED)  # (gVisor's waitid hides the signal)
        libc.ptrace(zygote.PTRACE_DETACH, self.pid, None, os.WSTOPSIG(status))
        return True

    def _stop(self):
        """Freeze the interpreter and every thread of it until the next call."""
        os.kill(self.pid, signal.SIGSTOP)
        while self._untraced(os.waitid(os.P_PID, self.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)):
            pass  # detached with SIGSTOP: it stops again, untraced

    def quiet(self):
        """Whether the kernel shows the interpreter idle: one thread (none left running by the
        call), asleep, with no context switch between two looks, and (where the kernel shows
        it, ``idle``) asleep in its serve loop's wait: the same system call, arguments and
        stack pointer as before any code ran. The code cannot forge this;
        without ``idle`` it can be idle elsewhere than in its serve loop (docs/sessions.md)."""
        first = task_state(self.pid)
        if first is None or first[:2] != ("S", 1):
            return False
        time.sleep(QUIET_TICK / 2)
        if task_state(self.pid) != first:
            return False
        # last: under gVisor the look stops the interpreter for a moment (a context switch)
        return self.idle is None or self._waiting_in() == self.idle

    def _waiting_in(self):
        """The system call the interpreter is in (number, its first three arguments, stack
        pointer), from ``/proc/<pid>/syscall``; None when it cannot be read. The stack pointer
        tells the serve loop's wait from any the code makes, which is deeper in the stack
        (inside the call, a hook, a signal handler); not the instruction pointer, since glibc's
        wrapper takes another path once a thread was ever made. Reading the file takes ptrace
        rights over the interpreter (it is dumpable and holds no capability): PID 1 takes them
        as its uid and gid for a moment; a fork's reader holds them in the fork's namespace.
        gVisor has no such file: there PID 1 stops the interpreter to read its registers
        (``_registers_waiting``).
        """
        if not self.syscall_file:
            return _registers_waiting(self.pid)
        if self.reader is not None:
            text = self.reader.read()
        else:
            try:
                with _as_owner(self.pid):
                    text = read_small(f"/proc/{self.pid}/syscall")
            except OSError:
                text = None
        if text is None:
            return None
        fields = text.split()
        return (*fields[:4], fields[7]) if len(fields) >= 9 else tuple(fields[:1])

    def _idle_wait(self):
        """Where the interpreter waits for a call, seen before any call runs: its serve loop's
        ``recvmsg``, the first sleep the kernel shows there (None where ``_waiting_in`` cannot
        read, or it did not get there in SETUP_TIMEOUT: then ``quiet`` goes without it)."""
        deadline = time.monotonic() + SETUP_TIMEOUT
        while RECVMSG is not None and time.monotonic() < deadline:
            first = task_state(self.pid)
            if first is None:
                return None
            time.sleep(QUIET_TICK / 4)
            if first[:2] == ("S", 1) and task_state(self.pid) == first:
                waiting = self._waiting_in()
                if waiting is None:
                    return None
                if waiting[0] == b"%d" % RECVMSG:
                    return waiting
        return None

    def _strays(self):
        return [p for p, alive in snippet_processes(self.uid).items() if alive]

    def _kill_others(self):
        """Kill every process of the sandbox uid but the interpreter; how many there were."""
        found = [p for p in self._strays() if p != self.pid]
        deadline = time.monotonic() + KILL_SECONDS
        left = found
        while left and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.001)
            for pid in snippet_processes(self.uid):
                if pid != self.pid:
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        pass  # the interpreter's own child: a zombie until it runs again
            left = [p for p in self._strays() if p != self.pid]
        return len(found)

    def fork(self, fork_uid, free, writer, config, block):
        """A fork of this interpreter running as ``fork_uid`` (``forks``), both stopped
        after; raises ``forks.ForkRefused``."""
        os.kill(self.pid, signal.SIGCONT)
        try:
            if len(os.listdir(f"/proc/{self.pid}/task")) != 1:
                raise forks.ForkRefused("the interpreter runs threads (a fork copies one)")
            made = forks.fork_member(
                self.pid, self.sock, self.uid, self.member, fork_uid, free, writer, block
            )
        finally:
            if not self.exited():
                self._stop()
            self._kill_others()
        return _Interpreter(config, self.exits, self.counters, fork=(fork_uid, made, writer.owner))

    def call(self, header, body_fd):
        """Run one call: its RESULT report, after its output frames (sent)."""
        output = Output(self.out_r, self.err_r, self.cap)
        oom_before = self.counters.oom_kills()
        ticks_at_start = cpu_ticks(snippet_processes(self.uid))
        clock = Clock(self.uid, header.wall, header.cpu, self.cpus, ticks_at_start)
        nonce = os.urandom(NONCE_BYTES)
        os.kill(self.pid, signal.SIGCONT)
        socket.send_fds(self.sock, [CALL + nonce], [body_fd])
        end = _CallEnd(self, nonce)
        killed_for = watch(clock, output, end)
        duration_ms = (time.monotonic() - clock.started) * 1000
        cpu_seconds = tree_cpu_seconds(self.uid, ticks_at_start, self.cpus * duration_ms / 1000)
        if killed_for is not None or end.exited:
            exit_code, signum, max_rss_kb = self._end_and_reap()
            strays = 0
        else:
            self._stop()
            strays = self._kill_others()
            exit_code, signum, max_rss_kb = int(end.failed), None, self._peak_rss_kb()
        output.forward_available()
        if output.over_cap and killed_for is None:
            killed_for = KILLED_OUTPUT
            if not self.ended:
                self._end_and_reap()
        output.flush()
        oom_after = self.counters.oom_kills()
        return RunReport(
            exit_code=exit_code,
            signal=signum,  # set only from the kernel's wait status, never from the code's report
            killed_for=killed_for,
            started=True,
            memory_error=end.memory_error and not end.exited and killed_for is None,
            oom_killed=oom_before is not None and (oom_after or 0) > oom_before,
            duration_ms=round(duration_ms, 2),
            cpu_ms=round(cpu_seconds * 1000, 1),
            max_rss_kb=max_rss_kb,
            strays=strays,
            ended=self.ended,
        )

    def _end_and_reap(self):
        """End the interpreter, reap it and kill everything else of the sandbox uid: (exit
        code, signal, peak RSS in KiB) from its wait status."""
        self.end()
        _, status, usage = zygote.wait_ended(self.pid)
        kill_all(self.uid)
        self.ended = True
        return (*exit_status(status), usage.ru_maxrss)

    def end(self):
        """Kill the interpreter (its group first) and everything else of the sandbox uid, and
        its reader."""
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        for kill in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, 9)):
            try:
                kill()
            except ProcessLookupError:
                pass
        kill_uid(self.uid)

    def _peak_rss_kb(self):
        """The interpreter's peak resident memory so far (its whole life, not this call's)."""
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return None


def _registers_waiting(pid):
    """``_Interpreter._waiting_in`` where the kernel has no ``/proc/<pid>/syscall`` (gVisor,
    x86-64): PID 1 (CAP_SYS_PTRACE there, the sentry's) seizes the interpreter and interrupts
    it (or, its tracer already by the code's PTRACE_TRACEME, stops it with SIGSTOP), reads the
    system call it was in (``orig_rax``), its first three arguments and the stack pointer, and
    lets it go, untraced (its wait restarts). None when it cannot look: another tracer, a
    signal of its own on the way (passed on), or no longer there."""
    if RECVMSG != 47:
        return None
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) == 0:
        stopped = libc.ptrace(PTRACE_INTERRUPT, pid, None, None) == 0
        mark = PTRACE_EVENT_STOP << 8 | signal.SIGTRAP  # the interrupt's stop
    elif _tracer(pid) == os.getpid():
        os.kill(pid, signal.SIGSTOP)
        stopped, mark = True, signal.SIGSTOP  # its signal-delivery stop, the signal dropped
    else:
        return None
    signo = 0
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WSTOPPED | os.WNOWAIT) if stopped else None
        if info is None or not _trapped(info, pid):
            return None  # it ended: left to the exit's own wait
        _, status = os.waitpid(pid, os.WUNTRACED)
        if status >> 8 != mark:
            signo = os.WSTOPSIG(status)  # another signal's stop: not idle, the signal goes on
            return None
        regs = (ctypes.c_ulonglong * 27)()  # struct user_regs_struct
        if libc.ptrace(PTRACE_GETREGS, pid, None, regs):
            return None
        return b"%d" % regs[15], *(b"%#x" % regs[i] for i in (14, 13, 12, 19))
    finally:
        libc.ptrace(zygote.PTRACE_DETACH, pid, None, signo)


def _tracer(pid):
    try:
        return _status_fields(pid, b"TracerPid")[0]
    except OSError:
        return None


def _trapped(info, pid):
    """Whether ``waitid`` shows a ptrace stop of ``pid``: CLD_TRAPPED; gVisor gives every stop
    as CLD_KILLED with the raw stop mark (0x7f) as the signal, which no signal has: a ptrace
    stop there when this process is its tracer."""
    if info.si_code == os.CLD_TRAPPED:
        return True
    return (info.si_code, info.si_status) == (os.CLD_KILLED, 0x7F) and _tracer(pid) == os.getpid()


@contextlib.contextmanager
def _as_owner(pid):
    """PID 1 with the file-system uid and gid of ``pid``'s owner for a moment (its real and
    saved ids stay 0, so its capabilities come back): what /proc asks of a reader of another
    uid's syscall file. Real and saved 0: no process of the sandbox uid may signal or trace
    PID 1 meanwhile."""
    owner = _ids(pid)
    os.setresgid(-1, owner[1], -1)
    try:
        os.setresuid(-1, owner[0], -1)
        try:
            yield
        finally:
            os.setresuid(-1, 0, -1)
    finally:
        os.setresgid(-1, 0, -1)


def _ids(pid):
    """``pid``'s real uid and gid, from its status."""
    return _status_fields(pid, b"Uid", b"Gid")


def _status_fields(pid, *names):
    """The first number of each of ``names`` in ``pid``'s status, from one read (OSError when
    it cannot be read or lacks one)."""
    found = {}
    for line in read_small(f"/proc/{pid}/status").split(b"\n"):
        key, _, value = line.partition(b":")
        if key in names:
            found[key] = int(value.split()[0])
    if len(found) != len(names):
        raise OSError(f"no {set(names) - set(found)} in the status of {pid}")
    return tuple(found[name] for name in names)


def main(config):
    """Serve one session until stdin closes (the host removes the container after that)."""
    become_reaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exits = ChildExits()
    counters = Counters()
    members = {0: _Interpreter(config, exits, counters)}  # the first, then its forks
    family = _Family(config)
    os.write(1, READY_MARKER)
    while (header := read_request(read_session_request)) is not None:
        if isinstance(header, FileRequest):  # the file API, between calls (session_files.py)
            try:
                session_files.serve(header, *_files_of(members, header.member, config))
            except Exception as exc:  # noqa: BLE001 - tell the host, which gives the session up
                send(RESULT, Anomaly(f"session file request failed: {exc!r}").to_json())
            continue
        body_fd = os.memfd_create("boxed-call", os.MFD_CLOEXEC)
        try:
            receive_body(body_fd, header.size)
            interpreter = members.get(header.member)
            if header.op == "end" and interpreter is not None:
                if not interpreter.ended:
                    interpreter.end()
                    zygote.wait_ended(interpreter.pid)
                del members[header.member]
                report = MemberReport(member=header.member, uid=interpreter.uid)
            elif interpreter is None or interpreter.ended:
                report = Anomaly(f"the session's interpreter {header.member} has ended")
            elif header.op == "fork":
                report = family.fork(members, header.member)
            else:
                report = interpreter.call(header, body_fd)
        except Exception as exc:  # noqa: BLE001 - tell the host, which gives the session up
            report = Anomaly(f"session supervisor failed: {exc!r}")
        finally:
            os.close(body_fd)
        send(RESULT, report.to_json())
        scrub()  # no call's output stays in this process's buffers
    for interpreter in members.values():
        if not interpreter.ended:
            interpreter.end()


def _kill_strangers(members, fork):
    """After a fork only the session's interpreters may run in the container: kill anything
    else (a process made during the fork could have taken a free uid of the block)."""
    every = [*members, fork]
    known = {m.pid for m in every} | {m.reader.pid for m in every if m.reader is not None}
    for pid in processes():
        if pid not in known:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, os.WNOHANG)  # this process's own child: no zombie left
            except (ProcessLookupError, ChildProcessError):
                pass  # gone, or another's child (a zombie until its parent runs again)


def _files_of(members, member, config):
    """(root, uid, gid) a file request on ``member`` is served with: the first interpreter's
    working directory and ids, or a fork's own copy (``forks``: /tmp/fork-<uid>-*, a directory
    its uid owns) with its uid, so a request reaches only what that member's code could."""
    interpreter = members.get(member)
    if interpreter is None:
        return "/nonexistent", config.uid, config.gid  # an ended member: every path is missing
    if member == 0:
        return zygote.RUN_DIR, config.uid, config.gid
    uid = interpreter.uid
    for path in glob.glob(f"/tmp/fork-{uid}-*"):
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == uid:
            return path, uid, uid
    return "/nonexistent", uid, uid  # its directory is gone: every path is missing


class _Family:
    """The session's interpreters' uids: the first one's, and the block its forks take
    theirs from (``SessionLimits.fork_uids``, leased for the container by the host)."""

    def __init__(self, config):
        self.config = config
        self.first = config.uid
        self.block = [config.uid, *config.session.fork_uids]
        self.writer = forks.MapWriter(config.uid)
        self.made = 0

    def fork(self, members, which):
        """Fork interpreter ``which`` into a new member: its MemberReport (``refused`` says
        why not, a state of the interpreter's own making; the parent goes on either way)."""
        held = {m.uid for m in members.values() if not m.ended}
        free = [uid for uid in self.block if uid not in held]
        # Its namespace can only give out the uids it maps: those free when it was made (or
        # last forked). A uid freed since comes back for interpreters made after that.
        mapped = members[which].member.mapped
        usable = [uid for uid in free if mapped is None or uid in mapped]
        if not usable:
            return MemberReport(member=which, uid=0, refused="no fork left: the maximum")
        uid, rest = usable[0], [other for other in free if other != usable[0]]
        config = dataclasses.replace(self.config, uid=uid, gid=uid)
        try:
            fork = members[which].fork(uid, rest, self.writer, config, self.block)
            _kill_strangers(members.values(), fork)
        except forks.ForkRefused as exc:
            return MemberReport(member=which, uid=0, refused=str(exc))
        self.made += 1
        members[self.made] = fork
        return MemberReport(member=self.made, uid=uid)
