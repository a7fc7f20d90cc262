"""A fake executor for tests of the HTTP layer: no Docker, answers chosen by the code.

* ``raise:<Name>``: raises that exception (``RequestError`` is a 413, ``Overloaded``,
  ``ServiceUnavailable``, ``Bug``: a ``ValueError`` out of the engine);
* anything else: status ok, stdout = the code, stderr = the language it was asked in.

It records every request it ran, so tests can check what reached the engine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from exec_server.admission import Admission, Overloaded
from exec_server.app import create_app
from exec_server.models import ExecuteRequest, ExecuteResponse, Truncated
from exec_server.request_errors import RequestError, ServiceUnavailable
from exec_server.settings import Settings
from tests.service import free_port

FAILURES: dict[str, Exception] = {
    "RequestError": RequestError(413, "code is 9 bytes; the maximum is 8"),
    "Overloaded": Overloaded("queue full (0 waiting)"),
    "ServiceUnavailable": ServiceUnavailable("Docker engine unreachable"),
    "Bug": ValueError("a bug in the engine"),
}


class FakeExecutor:
    """What the routes call on an executor: start/stop/execute/readiness/ready/admission."""

    def __init__(self, max_running: int = 4, max_queue: int = 4) -> None:
        self.admission = Admission(max_running, max_queue, queue_timeout=1.0)
        self.ready = True
        self.started = self.stopped = False
        self.ran: list[tuple[ExecuteRequest, str]] = []

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    def readiness(self) -> dict[str, Any]:
        return {"docker": self.ready, "image": True, "pool_ready": 1, "last_error": None}

    async def execute(
        self, req: ExecuteRequest, request_id: str, fetch_bytes: int | None = None
    ) -> ExecuteResponse:
        if req.code.startswith("raise:"):
            raise FAILURES[req.code.removeprefix("raise:")]
        async with self.admission.slot():  # as the real executor: runs and grading share it
            self.ran.append((req, request_id))
        return ExecuteResponse(
            status="ok",
            exit_code=0,
            stdout=req.code,
            stderr=req.language,
            output=req.code,
            error=req.language,
            truncated=Truncated(),
            duration_ms=1.0,
            request_id=request_id,
        )


@contextmanager
def serving(executor: FakeExecutor | None = None, **settings: Any) -> Iterator[str]:
    """The real app over ``executor`` (a new fake by default), served by uvicorn on a free
    loopback port in a thread; yields its URL."""
    port = free_port()
    app = create_app(Settings(instance="fake", **settings), executor=executor or FakeExecutor())
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
