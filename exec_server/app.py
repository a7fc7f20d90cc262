"""The app factory: the engine and the use cases over it (execute, judge, sessions) wired
together as the ``Executor`` the routes call, behind the routers of :mod:`exec_server.http`.

This is the one place that assembles the use cases; none of them imports another.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from . import __version__
from .admission import TenantFromHeader
from .backends import SandboxBackend
from .backends.base import BackendHealth
from .engine import Engine
from .execute import execute as execute_snippet
from .grading_pool import WorkerPool
from .http import (
    docs,
    errors,
    execute,
    images,
    judge,
    probes,
    scoring,
    session_files,
    sessions,
    tools,
)
from .http.instance import InstanceHeader
from .http_limits import BodySizeLimit
from .judge import judge as judge_submission
from .models import ErrorResponse, ExecuteRequest, ExecuteResponse, JudgeRequest, JudgeResponse
from .result_cache import ResultCache
from .sessions import SessionManager
from .settings import Isolation, Settings, get_settings
from .tenancy import TenantKeys

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in {
        400: "Body is not parsable (e.g. invalid UTF-8).",
        401: "Missing or wrong API key (WWW-Authenticate: Bearer).",
        413: "Request or field too large.",
        415: "Body sent as something other than JSON.",
        422: "Invalid request: `detail` says why, `errors` lists each problem of the body.",
        429: "Overloaded; retry after Retry-After seconds.",
        503: "Sandboxes unavailable (Docker down); retry after Retry-After seconds.",
    }.items()
}


class Executor:
    """What the routes call: the engine, and the use cases over it. Tests may hand the app
    anything with the same face (``start``/``stop``/``execute``/``readiness``/``ready``/
    ``admission``: ``tests/fakes.py``)."""

    def __init__(
        self, settings: Settings, backends: Mapping[Isolation, SandboxBackend] | None = None
    ) -> None:
        self.settings = settings
        self.engine = Engine(settings, backends)
        self.admission = self.engine.admission
        self.sessions = SessionManager(self.engine)
        self.engine.attach(self.sessions)

    @property
    def health(self) -> BackendHealth:
        return self.engine.health

    @property
    def ready(self) -> bool:
        return self.engine.ready

    def readiness(self) -> dict[str, Any]:
        """What ``/readyz`` reports: the engine's state and its keepers' (sessions)."""
        return self.engine.readiness()

    async def start(self) -> None:
        await self.engine.start()

    async def stop(self) -> None:
        await self.engine.stop()

    async def execute(
        self, req: ExecuteRequest, request_id: str, fetch_bytes: int | None = None
    ) -> ExecuteResponse:
        """One snippet (``exec_server.execute``); ``fetch_bytes``: a batch item's fetch share."""
        return await execute_snippet(self.engine, req, request_id, fetch_bytes)

    async def judge(self, req: JudgeRequest, request_id: str) -> JudgeResponse:
        """A submission against its tests (``exec_server.judge``)."""
        return await judge_submission(self.engine, req, request_id)


def create_app(settings: Settings | None = None, executor: Executor | None = None) -> FastAPI:
    """Build the service. ``executor`` may be given by tests (anything with the executor's
    ``start``/``stop``/``execute``/``readiness``/``ready``/``admission``); by default it is an
    ``Executor`` over the configured backends."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.executor = executor or Executor(settings)
        await app.state.executor.start()
        try:
            yield
        finally:
            await app.state.executor.stop()
            app.state.workers.close()

    app = FastAPI(
        title="boxed",
        version=__version__,
        lifespan=lifespan,
        responses=_ERRORS,
        # served by exec_server.http.docs, behind the API key
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.tenant_keys = TenantKeys.of(settings)  # a bad key file stops the start
    app.state.workers = WorkerPool(settings.grading_workers)  # started on first use
    app.state.result_cache = ResultCache(
        settings.result_cache_entries,
        settings.result_cache_mb * 1024 * 1024,
        settings.result_cache_ttl,
    )
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.max_body_bytes,
        exempt=session_files.streams_its_body,  # a session file's body: capped by its route
    )
    app.add_middleware(TenantFromHeader)  # fair queueing between tenants (admission.py)
    # outermost: the body-size 413 and every error answer name the instance too
    app.add_middleware(InstanceHeader, instance=settings.instance_label)
    errors.install(app)
    for module in (execute, judge, sessions, session_files, images, scoring, tools, probes, docs):
        app.include_router(module.router)
    return app
