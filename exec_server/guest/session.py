"""The resident program of a session sandbox (stdlib only): PID 1 and one persistent interpreter.

A session container runs this instead of the one-shot supervisor (``bootstrap`` picks it by the
configuration's ``program``). It keeps the supervisor's hardening and reuses its pieces: the
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

The interpreter reports the end of a call on its socket (two bytes: failed, MemoryError).
The code can write that socket too, so that report can only claim what the code could get
anyway (``try``/``except`` makes any call end cleanly) or make its verdict worse; every
limit, the exit status of an interpreter that ended and the OOM kill come from this process.
"""

import io
import json
import os
import resource
import select
import signal
import socket
import sys
import time

from . import runner, supervisor, zygote
from .protocol import (
    ERRORS,
    KILLED_CPU,
    KILLED_OUTPUT,
    KILLED_WALL,
    OUTPUT,
    READY_MARKER,
    RESULT,
    frame,
)

READY = b"ready"
CALL = b"call"
CHUNK = 65536
SETUP_TIMEOUT = 30.0


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
        session = config["session"]
        limits = {"cpu": session["cpu_budget"], "memory_mb": session["memory_mb"]}
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


def _serve_calls(channel):
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 16, 1)
        if message != CALL or len(fds) != 1:
            os._exit(0)  # the supervisor is going away
        os.lseek(fds[0], 0, os.SEEK_SET)
        code, stdin = runner.read_body(fds[0])
        os.close(fds[0])
        runner._install_stdin(stdin)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "rb", closefd=False), encoding="utf-8")
        failed, memory_error = _run_cell(code, namespace)
        runner.flush_std_streams()
        channel.send(bytes((failed, memory_error)))


def _run_cell(code, namespace):
    """Run one call's code in the session's namespace: (failed, MemoryError) as 0/1 each.
    ``SystemExit`` ends the interpreter with its status, as it ends ``python -c``."""
    try:
        exec(compile(code, "<string>", "exec"), namespace)
        return 0, 0
    except SystemExit as exc:
        status = runner._exit_code(exc)
        runner.flush_std_streams()
        os._exit(status)
    except BaseException as exc:  # noqa: BLE001 - report every failure like the interpreter
        runner.print_traceback(exc)
        return 1, int(isinstance(exc, MemoryError))


# -- the supervisor side (root, PID 1) ------------------------------------------------------
class _Interpreter:
    """The session's interpreter as the supervisor sees it: its pid, socket and pipes."""

    def __init__(self, config, exits, counters):
        self.exits, self.counters = exits, counters  # the supervisor's SIGCHLD pipe, cgroup files
        self.uid = int(config["uid"])
        self.cap = int(config["output_cap"])
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.out_r, out_w = os.pipe2(os.O_CLOEXEC)
        self.err_r, err_w = os.pipe2(os.O_CLOEXEC)
        self.pid = os.fork()
        if self.pid == 0:
            self.sock.close()
            _interpreter_main(theirs, out_w, err_w, config)
        theirs.close()
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
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def _stop(self):
        """Freeze the interpreter and every thread of it until the next call."""
        os.kill(self.pid, signal.SIGSTOP)
        os.waitid(os.P_PID, self.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)

    def _strays(self):
        return [p for p, alive in supervisor._snippet_processes(self.uid).items() if alive]

    def _kill_others(self):
        """Kill every process of the sandbox uid but the interpreter; how many there were."""
        found = [p for p in self._strays() if p != self.pid]
        deadline = time.monotonic() + supervisor.KILL_SECONDS
        left = found
        while left and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.001)
            for pid in supervisor._snippet_processes(self.uid):
                if pid != self.pid:
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        pass  # the interpreter's own child: a zombie until it runs again
            left = [p for p in self._strays() if p != self.pid]
        return len(found)

    def _forward(self, fd, kind, sent):
        """Send what ``fd`` holds now on as output frames (each stream capped at cap + 1);
        False at end of file."""
        while True:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                return True
            if not data:
                return False
            count = min(len(data), self.cap + 1 - sent[kind])
            if count > 0:
                supervisor._write_all(frame(kind, data[:count]))
                sent[kind] += count

    def call(self, header, body_fd):
        """Run one call; the RESULT report (the output frames are already sent)."""
        wall, cpu_limit = float(header["wall"]), float(header["cpu"])
        cpus = float(header.get("cpus", 1.0))
        sent = {OUTPUT: 0, ERRORS: 0}
        kinds = {self.out_r: OUTPUT, self.err_r: ERRORS}
        counters, exits = self.counters, self.exits
        oom_before = counters.oom_kills()
        ticks_at_start = supervisor._cpu_ticks(supervisor._snippet_processes(self.uid))
        poller = select.poll()
        for fd in (self.out_r, self.err_r, self.sock.fileno(), exits.read_fd):
            poller.register(fd, select.POLLIN)
        started = time.monotonic()
        os.kill(self.pid, signal.SIGCONT)
        socket.send_fds(self.sock, [CALL], [body_fd])
        killed_for, report, exited = None, None, False
        deadline = started + wall
        cpu_check = started + cpu_limit / cpus
        while report is None and not exited and killed_for is None:
            now = time.monotonic()
            if now >= deadline:
                killed_for = KILLED_WALL
                break
            if now >= cpu_check:
                used = supervisor._tree_cpu_seconds(
                    self.uid, ticks_at_start, cpus * (now - started)
                )
                left = cpu_limit - used
                if left <= 0:
                    killed_for = KILLED_CPU
                    break
                cpu_check = now + max(left / cpus, 0.01)
            wait_ms = max(int((min(deadline, cpu_check) - now) * 1000) + 1, 1)
            for fd, _ in poller.poll(wait_ms):
                if fd == exits.read_fd:
                    exits.drain()
                    exited = self.exited()
                elif fd == self.sock.fileno():
                    report = self.sock.recv(16)
                    if not report:  # the code closed its end: wait for the interpreter
                        poller.unregister(fd)
                        report = None
                elif fd in kinds and not self._forward(fd, kinds[fd], sent):
                    poller.unregister(fd)
                if max(sent.values()) > self.cap:
                    killed_for = KILLED_OUTPUT
                    break
        duration_ms = (time.monotonic() - started) * 1000
        cpu_seconds = supervisor._tree_cpu_seconds(
            self.uid, ticks_at_start, cpus * duration_ms / 1000
        )
        # A garbled report (the code wrote on the socket): the interpreter is ended.
        well_formed = report is not None and len(report) == 2 and max(report) <= 1
        ending = killed_for is not None or exited or not well_formed
        strays = 0
        signum = None  # set only from the kernel's wait status, never from the code's report
        if ending:
            self._end()
            _, status, usage = os.wait4(self.pid, 0)
            exit_code = os.waitstatus_to_exitcode(status)
            signum = -exit_code if exit_code < 0 else None
            exit_code = 128 - exit_code if exit_code < 0 else exit_code
            max_rss_kb = usage.ru_maxrss
            supervisor._kill_all(self.uid)
            self.ended = True
        else:
            self._stop()
            strays = self._kill_others()
            exit_code = report[0]
            max_rss_kb = self._peak_rss_kb()
        for fd, kind in kinds.items():
            self._forward(fd, kind, sent)
        if max(sent.values()) > self.cap and killed_for is None:
            killed_for = KILLED_OUTPUT
            if not self.ended:
                self._end()
                os.wait4(self.pid, 0)
                supervisor._kill_all(self.uid)
                self.ended = True
        oom_after = counters.oom_kills()
        return {
            "exit_code": exit_code,
            "signal": signum,
            "killed_for": killed_for,
            "started": True,
            "memory_error": bool(well_formed and report[1]),
            "oom_killed": oom_before is not None and (oom_after or 0) > oom_before,
            "duration_ms": round(duration_ms, 2),
            "cpu_ms": round(cpu_seconds * 1000, 1),
            "max_rss_kb": max_rss_kb,
            "strays": strays,
            "ended": self.ended,
        }

    def _end(self):
        """Kill the interpreter (its group first) and everything else of the sandbox uid."""
        for kill in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, 9)):
            try:
                kill()
            except ProcessLookupError:
                pass
        supervisor._kill_uid(self.uid)

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


def main(config):
    """Serve one session until stdin closes (the host removes the container after that)."""
    supervisor._become_reaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exits = supervisor._ChildExits()
    counters = supervisor._Counters()
    interpreter = _Interpreter(config, exits, counters)
    os.write(1, READY_MARKER)
    while True:
        size = supervisor._read_exact(4)
        if size is None:
            break
        header = json.loads(supervisor._read_exact(int.from_bytes(size, "big")))
        body_fd = os.memfd_create("boxed-call", os.MFD_CLOEXEC)
        try:
            supervisor._receive_body(body_fd, int(header["size"]))
            if interpreter.ended:
                report = {"anomaly": "the session's interpreter has ended"}
            else:
                report = interpreter.call(dict(header, cpus=config["cpus"]), body_fd)
        except Exception as exc:  # noqa: BLE001 - tell the host, which gives the session up
            report = {"anomaly": f"session supervisor failed: {exc!r}"}
        finally:
            os.close(body_fd)
        supervisor._send(RESULT, json.dumps(report).encode())
    if not interpreter.ended:
        interpreter._end()
