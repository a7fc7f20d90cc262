"""The HTTP layer: FastAPI routes over the executor, the calculator and the scorer."""

from __future__ import annotations

import hmac
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from . import metrics
from .executor import Executor, Overloaded, RequestError, ServiceUnavailable
from .http_limits import BodySizeLimit
from .models import (
    CalculateRequest,
    CalculateResponse,
    ErrorResponse,
    ExecuteRequest,
    ExecuteResponse,
)
from .settings import Settings, get_settings

log = logging.getLogger("boxed.app")
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in {
        401: "Missing or wrong API key.",
        413: "Request or field too large.",
        422: "Invalid request.",
        429: "Overloaded; retry after Retry-After seconds.",
        503: "Sandboxes unavailable (Docker down); retry after Retry-After seconds.",
    }.items()
}


def _request_id(request: Request) -> str:
    return request.headers.get("x-request-id") or uuid.uuid4().hex


def create_app(settings: Settings | None = None, executor: Executor | None = None) -> FastAPI:
    """Build the service. ``executor`` may be given by tests; by default it drives Docker."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.executor = executor or Executor(settings)
        await app.state.executor.start()
        try:
            yield
        finally:
            await app.state.executor.stop()

    def require_key(authorization: str | None = Header(default=None)) -> None:
        if settings.api_key is None:
            return
        expected = f"Bearer {settings.api_key}"
        if authorization is None or not hmac.compare_digest(authorization, expected):
            raise HTTPException(401, "missing or wrong API key (Authorization: Bearer ...)")

    app = FastAPI(title="boxed", version="0.1.0", lifespan=lifespan, responses=_ERRORS)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    guarded = [Depends(require_key)]

    def retry_later(status: int, detail: str) -> JSONResponse:
        return JSONResponse(
            {"detail": detail},
            status_code=status,
            headers={"Retry-After": str(settings.retry_after)},
        )

    @app.exception_handler(RequestError)
    async def _request_error(request: Request, exc: RequestError) -> JSONResponse:
        metrics.REQUESTS.labels(request.url.path, str(exc.status_code)).inc()
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)

    @app.exception_handler(Overloaded)
    async def _overloaded(request: Request, exc: Overloaded) -> JSONResponse:
        metrics.REQUESTS.labels(request.url.path, "429").inc()
        return retry_later(429, f"overloaded: {exc}")

    @app.exception_handler(ServiceUnavailable)
    async def _unavailable(request: Request, exc: ServiceUnavailable) -> JSONResponse:
        metrics.REQUESTS.labels(request.url.path, "503").inc()
        return retry_later(503, f"service unavailable: {exc}")

    @app.post("/execute", response_model=ExecuteResponse, dependencies=guarded)
    async def execute(req: ExecuteRequest, request: Request, response: Response) -> ExecuteResponse:
        """Run one snippet in a fresh sandbox. The code's own failures are 200 with a status."""
        request_id = _request_id(request)
        response.headers["X-Request-ID"] = request_id
        result = await request.app.state.executor.execute(req, request_id)
        metrics.REQUESTS.labels("/execute", result.status).inc()
        return result

    @app.post("/calculate", response_model=CalculateResponse, dependencies=guarded)
    async def calculate(req: CalculateRequest) -> CalculateResponse:
        """Evaluate restricted arithmetic; the expression's own mistakes are 200 with `error`."""
        from .calculator import CalculationError, evaluate

        try:
            value = evaluate(req.expr)
        except CalculationError as exc:
            metrics.REQUESTS.labels("/calculate", "error").inc()
            return CalculateResponse(value=None, error=str(exc))
        metrics.REQUESTS.labels("/calculate", "ok").inc()
        return CalculateResponse(value=value, error=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"description": "Not ready."}})
    async def readyz(request: Request) -> JSONResponse:
        """Readiness: Docker reachable, sandbox image present, pool warm."""
        ex: Executor = request.app.state.executor
        state = ex.readiness()
        return JSONResponse({"ready": ex.ready, **state}, status_code=200 if ex.ready else 503)

    @app.get("/metrics", response_class=PlainTextResponse, dependencies=guarded)
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    app.state.settings = settings
    app.state.run_in_threadpool = run_in_threadpool
    return app
