"""The HTTP layer: FastAPI routes over the executor, the calculator and the scorer."""

from __future__ import annotations

import asyncio
import hmac
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from . import metrics
from .executor import Executor, Overloaded, RequestError, ServiceUnavailable
from .http_limits import BodySizeLimit
from .models import (
    CalculateRequest,
    CalculateResponse,
    ErrorResponse,
    ExecuteBatchItemError,
    ExecuteBatchRequest,
    ExecuteBatchResponse,
    ExecuteRequest,
    ExecuteResponse,
    ItemError,
    RunCodeRequest,
    RunCodeResponse,
    RunResult,
)
from .settings import Settings, get_settings

JsonObject = Annotated[dict[str, Any], Body()]
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in {
        400: "Body is not parsable (e.g. invalid UTF-8).",
        401: "Missing or wrong API key.",
        413: "Request or field too large.",
        422: "Invalid request.",
        429: "Overloaded; retry after Retry-After seconds.",
        503: "Sandboxes unavailable (Docker down); retry after Retry-After seconds.",
    }.items()
}


def _request_id(request: Request) -> str:
    return request.headers.get("x-request-id") or uuid.uuid4().hex


def _item_error(status_code: int, detail: Any) -> ExecuteBatchItemError:
    return ExecuteBatchItemError(error=ItemError(status_code=status_code, detail=detail))


def _as_sandbox_fusion(result: ExecuteResponse) -> RunCodeResponse:
    run_status = "TimeLimitExceeded" if result.status == "timeout" else "Finished"
    return RunCodeResponse(
        status="Success" if result.status == "ok" else "Failed",
        message="" if result.status in ("ok", "error") else result.status,
        run_result=RunResult(
            status=run_status,
            execution_time=result.duration_ms / 1000,
            return_code=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
        ),
        boxed_status=result.status,
    )


async def _scorer_call(fn: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Scoring blocks (sympy in a worker process): keep it off the event loop."""
    try:
        return await run_in_threadpool(fn, body)
    except ValueError as exc:
        raise RequestError(422, str(exc)) from exc


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

    async def require_key(authorization: str | None = Header(default=None)) -> None:
        # async: FastAPI would run a plain function in its thread pool, a hop per request
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

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the offending input, which cannot always be rendered
        # (NaN, lone surrogates): answer with where and why only, never a 500.
        detail = [
            {"type": e.get("type"), "loc": list(e.get("loc", ())), "msg": e.get("msg")}
            for e in exc.errors()
        ]
        metrics.REQUESTS.labels(request.url.path, "422").inc()
        return JSONResponse({"detail": detail}, status_code=422)

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

    @app.post("/execute/batch", response_model=ExecuteBatchResponse, dependencies=guarded)
    async def execute_batch(batch: ExecuteBatchRequest, request: Request) -> ExecuteBatchResponse:
        """Run many snippets concurrently (within the service's limits); answers keep the
        order of the items, and an item that fails carries its own ``error``."""
        if len(batch.items) > settings.max_batch_items:
            raise RequestError(
                422, f"{len(batch.items)} items; the maximum is {settings.max_batch_items}"
            )
        request_id = _request_id(request)
        executor: Executor = request.app.state.executor

        async def one(index: int, item: dict[str, Any]) -> ExecuteResponse | ExecuteBatchItemError:
            try:
                req = ExecuteRequest.model_validate(item)
                result = await executor.execute(req, f"{request_id}-{index}")
            except ValidationError as exc:
                return _item_error(422, exc.errors(include_url=False, include_context=False))
            except RequestError as exc:
                return _item_error(exc.status_code, exc.detail)
            except Overloaded as exc:
                return _item_error(429, f"overloaded: {exc}")
            except ServiceUnavailable as exc:
                return _item_error(503, f"service unavailable: {exc}")
            metrics.REQUESTS.labels("/execute/batch", result.status).inc()
            return result

        results = await asyncio.gather(*(one(i, item) for i, item in enumerate(batch.items)))
        return ExecuteBatchResponse(results=list(results))

    @app.post("/run_code", response_model=RunCodeResponse, dependencies=guarded)
    async def run_code(req: RunCodeRequest, request: Request) -> RunCodeResponse:
        """SandboxFusion-compatible subset, so verl/SkyRL users can point at boxed."""
        if req.files:
            raise RequestError(422, "'files' is not supported; put the data in the code or stdin")
        language = "python" if req.language.lower() in ("python", "python3") else req.language
        memory = req.memory_limit_MB if req.memory_limit_MB and req.memory_limit_MB > 0 else None
        execute_req = ExecuteRequest(
            code=req.code,
            input=req.stdin or "",
            language=language,
            timeout=req.run_timeout,
            memory_mb=memory,
        )
        result = await request.app.state.executor.execute(execute_req, _request_id(request))
        metrics.REQUESTS.labels("/run_code", result.status).inc()
        return _as_sandbox_fusion(result)

    @app.post("/score", dependencies=guarded)
    async def score(body: JsonObject) -> dict[str, Any]:
        """Grade one trajectory (any supported format with its gold, or
        ``{response, answer, preset}``); runs off the event loop."""
        from scorer.api import score as score_one

        return await _scorer_call(score_one, body)

    @app.post("/score/batch", dependencies=guarded)
    async def score_batch(body: JsonObject) -> dict[str, Any]:
        """Grade many trajectories; a bad item becomes an ``error`` row."""
        from scorer.api import score_batch as score_many

        return await _scorer_call(score_many, body)

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
    return app
