"""Worker processes for CPU-bound request work (grading, ``/calculate``), each call under a
wall-clock deadline.

Why processes: the scorer's parsing and the calculator are pure Python and regular expressions.
In a thread of the service they hold the GIL (a regex over megabytes holds it for its whole run),
so one crafted ``/score`` froze ``/healthz`` and every other request for seconds. In a worker
process they cannot stall the event loop, and a call past its deadline is ended by SIGKILL (a
thread cannot be stopped) and the worker replaced.

Workers come from a ``forkserver`` that imported the scorer once, so a replacement is ready in
milliseconds and never inherits the service's threads or sockets. They start on first use: a
service that never grades pays nothing.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import anyio.to_thread

_PRELOAD = ["scorer.api", "exec_server.calculator"]


class WorkTimeout(Exception):  # noqa: N818 - reads better at call sites
    """The call ran past its deadline; its worker was killed and replaced."""


class WorkerLost(Exception):  # noqa: N818
    """The worker died during the call (killed from outside, out of memory)."""


def _serve(conn: Connection) -> None:
    """A worker's loop: one ``(function, argument)`` in, one ``(ok, value)`` out."""
    while True:
        try:
            fn, arg = conn.recv()
        except EOFError:
            return
        try:
            reply: tuple[bool, Any] = (True, fn(arg))
        except Exception as exc:  # the caller re-raises it
            reply = (False, exc)
        conn.send(reply)


class _Worker:
    def __init__(self, ctx: Any) -> None:
        self.conn, child = ctx.Pipe()
        self.process: BaseProcess = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.process.start()
        child.close()

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.conn.close()


class WorkerPool:
    """``size`` worker processes; :meth:`call` blocks the calling thread (run it off the event
    loop), never the loop itself."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(_PRELOAD)
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._slots: asyncio.Semaphore | None = None

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            for _ in range(self.size):
                self._idle.put(self._new_worker())
            self._started = True

    def _new_worker(self) -> _Worker:
        worker = _Worker(self._ctx)
        self._all.add(worker)
        return worker

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            if not self._closed:
                self._idle.put(self._new_worker())

    def call(self, fn: Callable[[Any], Any], arg: Any, deadline: float) -> Any:
        """``fn(arg)`` in a worker; its exception is raised here. :class:`WorkTimeout` when it
        takes more than ``deadline`` seconds (waiting for a free worker is not counted),
        :class:`WorkerLost` when the worker dies. ``fn`` must be importable (pickled by name)."""
        self._start()
        worker = self._idle.get()
        started = time.monotonic()
        try:
            worker.conn.send((fn, arg))
            if not worker.conn.poll(max(deadline - (time.monotonic() - started), 0)):
                self._replace(worker)
                raise WorkTimeout(f"took more than {deadline:g} s")
            ok, value = worker.conn.recv()
        except (EOFError, OSError) as exc:
            self._replace(worker)
            raise WorkerLost(f"the worker process died ({type(exc).__name__})") from exc
        self._idle.put(worker)
        if not ok:
            raise value
        return value

    async def run(self, fn: Callable[[Any], Any], arg: Any, deadline: float) -> Any:
        """:meth:`call` from the event loop: in a thread, and only as many at once as there are
        workers, so a big batch never holds the shared thread pool's threads while it waits."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        async with self._slots:
            return await anyio.to_thread.run_sync(self.call, fn, arg, deadline)

    def close(self) -> None:
        """Kill every worker (the service is stopping)."""
        with self._lock:
            self._closed = True
            workers, self._all = list(self._all), set()
        for worker in workers:
            worker.kill()
