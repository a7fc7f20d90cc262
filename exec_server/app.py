"""The app factory: the routers of :mod:`exec_server.http` over an executor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from . import __version__
from .admission import TenantFromHeader
from .executor import Executor
from .grading_pool import WorkerPool
from .http import docs, errors, execute, judge, probes, scoring, sessions, tools
from .http.instance import InstanceHeader
from .http_limits import BodySizeLimit
from .models import ErrorResponse
from .result_cache import ResultCache
from .settings import Settings, get_settings
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


def create_app(settings: Settings | None = None, executor: Executor | None = None) -> FastAPI:
    """Build the service. ``executor`` may be given by tests (anything with the executor's
    ``start``/``stop``/``execute``/``readiness``/``ready``/``admission``); by default it drives
    Docker."""
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
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(TenantFromHeader)  # fair queueing between tenants (admission.py)
    # outermost: the body-size 413 and every error answer name the instance too
    app.add_middleware(InstanceHeader, instance=settings.instance_label)
    errors.install(app)
    for module in (execute, judge, sessions, scoring, tools, probes, docs):
        app.include_router(module.router)
    return app
