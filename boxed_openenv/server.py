"""The environment served by ``openenv-core``'s own app (HTTP and WebSocket), and its command:
``python -m boxed_openenv --port 8001 --boxed-url http://127.0.0.1:5002``.

Failures that are not the code's never reach a caller as a plain-text 500: when boxed is
unreachable or overloaded, ``/reset`` and ``/step`` answer 503 with ``Retry-After`` (boxed's
error body: ``detail``, ``errors``, ``outcome``, ``failure``), and the WebSocket answers
openenv-core's error message with the failure added (``frames.py``), both within the boxed
client's deadline (``--boxed-deadline``, 10 s).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import uvicorn
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse
from openenv.core.env_server import create_app as openenv_app
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect

from boxed_client import Client
from exec_server.models import ErrorResponse, FailureInfo, FieldError
from scorer.outcome import Failure, FailureCode

from .environment import BoxedCodeEnvironment
from .failures import EnvUnavailable
from .frames import FailureFrames
from .models import CodeAction, CodeObservation
from .snapshots import Snapshots

log = logging.getLogger("boxed.openenv")

DEFAULT_DEADLINE = 10.0  # seconds reset and step keep trying to reach boxed
CONNECT_TIMEOUT = 1.0  # seconds per connection attempt (at most a tenth of the deadline)
BACKOFF_BASE, BACKOFF_MAX = 0.1, 5.0  # the boxed client's defaults


def attempts_within(deadline: float, connect: float) -> int:
    """How many attempts fit in ``deadline`` at worst: each connection timing out, and the
    longest backoff between them (a refused connection fails at once: far quicker)."""
    n, spent = 1, connect
    while True:
        spent += min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (n - 1)) + connect
        if spent > deadline:
            return n
        n += 1


def boxed_client(url: str | None, deadline: float, concurrency: int) -> Client:
    """The environment's boxed client: opening a session (reset, an HTTP step) fails within
    ``deadline`` when boxed is unreachable, refuses connections or answers "overloaded" (with
    its 1 s ``Retry-After``), and so does a session call that cannot reach it; a call that
    reached it waits for its code's whole time limit."""
    connect = min(CONNECT_TIMEOUT, deadline / 10)
    return Client(
        url,
        max_concurrency=concurrency,
        deadline=deadline,
        connect_timeout=connect,
        read_timeout=deadline - connect,  # an open's one attempt fits in the deadline
        max_attempts=attempts_within(deadline, connect),
        backoff_base=BACKOFF_BASE,
        backoff_max=BACKOFF_MAX,
    )


def create_app(
    boxed_url: str | None = None,
    max_envs: int = 32,
    deadline: float = DEFAULT_DEADLINE,
    max_forks: int = 0,
) -> FastAPI:
    """``openenv-core``'s app over the environment; every environment shares one boxed
    client (thread-safe, one connection pool), one thread pool for its calls to boxed and the
    server's snapshots (deleted when it stops). ``max_forks`` > 0: episodes' sessions are
    made with it, so that snapshot steps and resets from a snapshot can fork them (boxed
    refuses forks under gVisor)."""
    concurrency = max(max_envs, 8)
    client = boxed_client(boxed_url or os.environ.get("BOXED_URL"), deadline, concurrency)
    threads = ThreadPoolExecutor(max(max_envs, 32), thread_name_prefix="boxed-env")
    snapshots = Snapshots()
    limits = {"max_forks": max_forks} if max_forks else {}
    factory = partial(BoxedCodeEnvironment, client, threads, snapshots=snapshots, **limits)
    app = openenv_app(
        factory, CodeAction, CodeObservation, env_name="boxed_code", max_concurrent_envs=max_envs
    )
    app.add_exception_handler(EnvUnavailable, unavailable)  # type: ignore[arg-type]
    app.add_exception_handler(ValidationError, invalid)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, internal_error)
    app.add_exception_handler(WebSocketDisconnect, peer_gone)  # type: ignore[arg-type]
    app.add_middleware(FailureFrames)
    app.router.on_shutdown.append(snapshots.close)  # the server stopping deletes them
    return app


async def unavailable(request: Request, exc: EnvUnavailable) -> JSONResponse:
    """HTTP ``/reset`` or ``/step`` when boxed could not act: 503, ``Retry-After``, and
    boxed's own error body with the failure (the environment logged the cause)."""
    body = ErrorResponse(
        detail=exc.detail,
        outcome=exc.outcome,
        failure=FailureInfo(code=exc.failure.code, retryable=exc.failure.retryable),
    )
    headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after)))}
    return JSONResponse(body.model_dump(mode="json"), status_code=503, headers=headers)


async def invalid(request: Request, exc: ValidationError) -> JSONResponse:
    """A ``reset`` task that is not a :class:`Task`: the caller's mistake (422)."""
    errors = [
        FieldError(loc=["body", "task", *e["loc"]], msg=e["msg"], type=e["type"])
        for e in exc.errors()
    ]
    body = ErrorResponse(detail=f"invalid task: {errors[0].msg}", errors=errors)
    return JSONResponse(body.model_dump(mode="json"), status_code=422)


async def internal_error(request: Request, exc: Exception) -> JSONResponse:
    """Any other failure of the server (a bug): 500 with the same body, never plain text
    (Starlette still logs the traceback)."""
    failure = Failure.of(FailureCode.INTERNAL_ERROR)
    body = ErrorResponse(
        detail=f"the environment failed: {type(exc).__name__}",
        outcome=failure.outcome,
        failure=FailureInfo(code=failure.code, retryable=failure.retryable),
    )
    return JSONResponse(body.model_dump(mode="json"), status_code=500)


async def peer_gone(websocket: WebSocket, exc: WebSocketDisconnect) -> None:
    """openenv-core closes a WebSocket its client already closed, and only expects a
    ``RuntimeError`` from that: the peer being gone is the normal end of an episode."""
    log.debug("WebSocket closed by its client first (code %s)", exc.code)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="boxed-openenv", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--boxed-url", default=None, help="default: $BOXED_URL, else :5002")
    parser.add_argument("--max-envs", type=int, default=32, help="episodes (WebSockets) at once")
    parser.add_argument(
        "--boxed-deadline",
        type=float,
        default=float(os.environ.get("BOXED_OPENENV_DEADLINE", DEFAULT_DEADLINE)),
        help="seconds reset and step try to reach boxed before answering 503 "
        "(default: $BOXED_OPENENV_DEADLINE, else 10)",
    )
    parser.add_argument(
        "--max-forks",
        type=int,
        default=0,
        help="forks an episode's session may hold (snapshots and resets from one; 0: none)",
    )
    args = parser.parse_args(argv)
    if args.boxed_deadline <= 0:
        parser.error("--boxed-deadline must be positive")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(args.boxed_url, args.max_envs, args.boxed_deadline, args.max_forks)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
