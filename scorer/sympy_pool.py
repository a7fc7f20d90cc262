"""The pool of sympy worker processes, seen from the calling process: hard wall-clock limits
for sympy work, by killing a worker that is late.

The split: this module is the *caller's side* (start, hand out, time and kill workers; no
sympy import); :mod:`scorer.sympy_worker` is the *code that runs inside* those processes (import
sympy, compare, answer one JSON line per request).

No ``signal``/``alarm``: those only work on the main thread and cannot interrupt a C-level
big-integer power anyway. Instead a small pool of worker processes does the work; the caller
writes one JSON request to a worker and ``select``-s on its reply stream until the deadline.
Past the deadline the worker is SIGKILLed, a replacement is started at once, and the caller
gets :class:`DeadlineExceeded`.

Workers are forked from a *zygote* (``python -m scorer.sympy_worker --zygote``) that imported
sympy once, so a replacement is ready in milliseconds and shares the warm caches copy-on-write;
if the zygote cannot run, workers are started directly (``python -m scorer.sympy_worker``, about
half a second each). A worker that dies is reported as :class:`WorkerCrashed`. Everything is
thread-safe (one request per worker at a time, a condition variable hands out idle workers) and
fork-safe (a forked child starts its own pool).

Workers are started by one long-lived spawner thread and ask the kernel to SIGKILL them when
that thread — i.e. this process — dies (``PR_SET_PDEATHSIG``), so a crashed caller cannot leave
a worker spinning on a power tower.

Start-up (the zygote's first ``import sympy``, about half a second, once per process) is not
charged to a request's deadline; waiting for a free worker is not either.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

STARTUP_TIMEOUT = 60.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


class DeadlineExceeded(Exception):  # noqa: N818 - reads better at call sites
    """The worker did not answer in time and was killed."""


class WorkerCrashed(Exception):  # noqa: N818
    """The worker process died or answered garbage."""


def default_pool_size() -> int:
    """``BOXED_SCORER_WORKERS``, else 1 inside a multiprocessing child (``boxed-scorer -j``
    already runs one grader per core), else min(2, cpu count)."""
    env = os.environ.get("BOXED_SCORER_WORKERS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return 1
    return max(1, min(2, os.cpu_count() or 1))


class _Worker:
    """One worker process and its line-buffered reply stream (a pipe or a socket)."""

    _ids = itertools.count(1)

    def __init__(
        self,
        pid: int,
        rfd: int,
        send: Callable[[bytes], None],
        kill: Callable[[], None],
        ready: bool = False,
    ) -> None:
        self.pid = pid
        self._rfd = rfd
        self._send = send
        self._kill = kill
        self.buf = b""
        self.ready = ready

    @classmethod
    def from_popen(cls, proc: subprocess.Popen[bytes]) -> _Worker:
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        def send(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        def kill() -> None:
            try:
                proc.kill()  # SIGKILL cannot be caught: the wait below is immediate
            except OSError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for f in (stdin, stdout):
                try:
                    f.close()
                except OSError:
                    pass

        return cls(proc.pid, stdout.fileno(), send, kill)

    def _readline(self, deadline: float) -> bytes | None:
        """One line of output, or None at the deadline. Raises WorkerCrashed on EOF."""
        while b"\n" not in self.buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            r, _, _ = select.select([self._rfd], [], [], remaining)
            if not r:
                return None
            try:
                chunk = os.read(self._rfd, 1 << 16)
            except OSError as exc:
                raise WorkerCrashed(f"worker {self.pid}: {exc}") from exc
            if not chunk:
                raise WorkerCrashed(f"worker {self.pid} exited")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def is_dead(self) -> bool:
        """Non-blocking check of an idle worker: EOF on its stream means it died."""
        try:
            r, _, _ = select.select([self._rfd], [], [], 0)
            if not r:
                return False
            chunk = os.read(self._rfd, 1 << 16)
        except (OSError, ValueError):
            return True
        if not chunk:
            return True
        self.buf += chunk
        return False

    def wait_ready(self, timeout: float) -> None:
        if self.ready:
            return
        line = self._readline(time.monotonic() + timeout)
        if line is None:
            raise WorkerCrashed("worker did not start in time")
        if line.strip() != b"ready":
            raise WorkerCrashed(f"unexpected start-up line {line[:80]!r}")
        self.ready = True

    def request(self, payload: dict, timeout: float) -> dict:
        req_id = next(self._ids)
        data = json.dumps({"id": req_id, **payload}).encode() + b"\n"
        try:
            self._send(data)
        except OSError as exc:
            raise WorkerCrashed(f"worker {self.pid} is gone: {exc}") from exc
        deadline = time.monotonic() + timeout
        while True:
            line = self._readline(deadline)
            if line is None:
                raise DeadlineExceeded(f"no answer within {timeout:g}s")
            try:
                reply = json.loads(line)
            except ValueError as exc:
                raise WorkerCrashed(f"bad reply {line[:80]!r}") from exc
            if reply.get("id") == req_id:
                return reply

    def kill(self) -> None:
        self._kill()

    def close_fds(self) -> None:
        try:
            os.close(self._rfd)
        except OSError:
            pass


class _Zygote:
    """A process that imported sympy once and forks ready workers in milliseconds."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.proc = proc
        self.sock = sock
        self.lock = threading.Lock()
        self.ready = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float) -> None:
        with self.lock:
            if self.ready:
                return
            self.sock.settimeout(timeout)
            msg = self.sock.recv(64)
            if msg != b"ready":
                raise OSError(f"zygote start-up failed: {msg!r}")
            self.ready = True

    def spawn(self) -> _Worker:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self.lock:
                self.sock.settimeout(10)
                socket.send_fds(self.sock, [b"spawn"], [theirs.fileno()])
                msg = self.sock.recv(64)
        finally:
            theirs.close()
        if not msg.startswith(b"pid "):
            ours.close()
            raise OSError(f"zygote answered {msg!r}")
        pid = int(msg.split()[1])

        def kill() -> None:
            try:
                with self.lock:
                    self.sock.settimeout(5)
                    self.sock.send(b"kill %d" % pid)
            except OSError:
                pass  # zygote gone: its workers died with it (PR_SET_PDEATHSIG)
            ours.close()

        return _Worker(pid, ours.fileno(), ours.sendall, kill)

    def close(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.sock.close()


class WorkerPool:
    """Up to ``size`` workers, started lazily; ``call`` runs one request under a deadline."""

    def __init__(self, size: int | None = None, module: str = "scorer.sympy_worker") -> None:
        self.size = size or default_pool_size()
        self.module = module
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._cond = threading.Condition()
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="boxed-scorer-spawner")
        self._closed = False
        self._zlock = threading.Lock()
        self._zygote: _Zygote | None = None
        self._zygote_failed = not hasattr(socket, "send_fds")

    # -- process management
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = _PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("PYTHONHASHSEED", "0")
        return env

    def _popen(self, argv: list[str], **kw) -> subprocess.Popen[bytes]:
        # Popen runs on the spawner thread: PR_SET_PDEATHSIG in the child fires when the
        # thread that forked it exits, and this thread lives as long as the process.
        return self._spawner.submit(
            subprocess.Popen, argv, env=self._env(), close_fds=True, **kw
        ).result()

    def _zygote_or_none(self) -> _Zygote | None:
        with self._zlock:
            if self._zygote_failed:
                return None
            z = self._zygote
            if z is not None and not z.alive():
                z.close()
                z = self._zygote = None
            if z is None:
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                try:
                    proc = self._popen(
                        [sys.executable, "-m", self.module, "--zygote", str(theirs.fileno())],
                        pass_fds=(theirs.fileno(),),
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                finally:
                    theirs.close()
                z = self._zygote = _Zygote(proc, ours)
        try:
            z.wait_ready(STARTUP_TIMEOUT)
        except OSError:
            with self._zlock:
                z.close()
                self._zygote = None
                self._zygote_failed = True
            return None
        return z

    def _spawn(self) -> _Worker:
        z = self._zygote_or_none()
        if z is not None:
            try:
                return z.spawn()
            except OSError:
                with self._zlock:
                    z.close()
                    if self._zygote is z:
                        self._zygote = None
        proc = self._popen(
            [sys.executable, "-m", self.module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        return _Worker.from_popen(proc)

    def _acquire(self) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise WorkerCrashed("pool is closed")
                if self._idle:
                    # prefer a worker that finished starting (a fresh replacement may still
                    # be importing sympy)
                    for k in range(len(self._idle) - 1, -1, -1):
                        if self._idle[k].ready:
                            return self._idle.pop(k)
                    return self._idle.pop()
                if len(self._all) < self.size:
                    break
                self._cond.wait()
            placeholder = object()
            self._all.add(placeholder)  # type: ignore[arg-type]
        try:
            w = self._spawn()
        except BaseException:
            with self._cond:
                self._all.discard(placeholder)  # type: ignore[arg-type]
                self._cond.notify()
            raise
        with self._cond:
            self._all.discard(placeholder)  # type: ignore[arg-type]
            self._all.add(w)
        return w

    def _release(self, w: _Worker) -> None:
        with self._cond:
            if self._closed:
                w.kill()
                return
            self._idle.append(w)
            self._cond.notify()

    def _replace(self, w: _Worker) -> None:
        """Kill a late/broken worker and start its replacement now (warms up meanwhile)."""
        w.kill()
        with self._cond:
            self._all.discard(w)
            self._cond.notify()
        try:
            fresh = self._acquire_slot_and_spawn()
        except Exception:
            return
        self._release(fresh)

    def _acquire_slot_and_spawn(self) -> _Worker:
        with self._cond:
            if self._closed or len(self._all) >= self.size:
                raise WorkerCrashed("no slot")
            placeholder = object()
            self._all.add(placeholder)  # type: ignore[arg-type]
        try:
            w = self._spawn()
        finally:
            with self._cond:
                self._all.discard(placeholder)  # type: ignore[arg-type]
        with self._cond:
            self._all.add(w)
        return w

    # -- public
    def call(self, payload: dict, timeout: float) -> dict:
        """Run one request; raises DeadlineExceeded (worker killed) or WorkerCrashed.

        Idle workers found dead (killed from outside, crashed earlier) are replaced before
        use; a request whose worker dies under it is retried once on a fresh worker. A deadline
        is never retried.
        """
        for attempt in (0, 1):
            w = self._acquire()
            while w.is_dead():
                self._replace(w)
                w = self._acquire()
            try:
                w.wait_ready(STARTUP_TIMEOUT)
                reply = w.request(payload, max(timeout, 0.001))
            except WorkerCrashed:
                self._replace(w)
                if attempt:
                    raise
                continue
            except BaseException:
                self._replace(w)
                raise
            self._release(w)
            return reply
        raise WorkerCrashed("unreachable")

    def warm_up(self) -> None:
        """Start every worker now and wait until they are ready."""
        workers = []
        try:
            while True:
                with self._cond:
                    if len(self._all) >= self.size:
                        break
                workers.append(self._acquire_slot_and_spawn())
        except WorkerCrashed:
            pass
        for w in workers:
            try:
                w.wait_ready(STARTUP_TIMEOUT)
            except WorkerCrashed:
                self._replace(w)
                continue
            self._release(w)

    def pids(self) -> list[int]:
        with self._cond:
            return [w.pid for w in self._all if isinstance(w, _Worker)]

    def close(self) -> None:
        with self._cond:
            self._closed = True
            workers = [w for w in self._all if isinstance(w, _Worker)]
            self._idle.clear()
            self._all.clear()
            self._cond.notify_all()
        for w in workers:
            w.kill()
        with self._zlock:
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None
        self._spawner.shutdown(wait=False)

    def _forget_after_fork(self) -> None:
        """In a forked child: drop (never kill) the parent's processes, close their fds."""
        for w in list(self._all):
            if isinstance(w, _Worker):
                w.close_fds()
        if self._zygote is not None:
            try:
                self._zygote.sock.close()
            except OSError:
                pass


_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool() -> WorkerPool:
    """The process-wide pool (created on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = WorkerPool()
        return _POOL


def _after_fork_in_child() -> None:
    global _POOL, _POOL_LOCK
    old = _POOL
    _POOL = None
    _POOL_LOCK = threading.Lock()
    if old is not None:
        old._forget_after_fork()


def _shutdown() -> None:
    if _POOL is not None:
        _POOL.close()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_shutdown)
