"""Running code: ``/execute``, its batch, and the SandboxFusion ``/run_code`` adapter."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from fastapi import APIRouter, Request, Response

from .. import metrics
from ..files import fetch_share
from ..languages import LANGUAGES
from ..models import (
    CompileResult,
    ExecuteBatchItemError,
    ExecuteBatchRequest,
    ExecuteBatchResponse,
    ExecuteRequest,
    ExecuteResponse,
    LanguageInfo,
    LanguagesResponse,
    RunCodeRequest,
    RunCodeResponse,
    RunResult,
)
from ..request_errors import RequestError
from ..settings import Settings
from . import cached
from .auth import GUARDED, caller_of
from .errors import RetryAtGateway, failure_of, problem, validated
from .json_body import JsonBodyRoute

log = logging.getLogger("boxed.http")
router = APIRouter(route_class=JsonBodyRoute, dependencies=GUARDED, tags=["execute"])


def request_id(request: Request) -> str:
    return request.headers.get("x-request-id") or uuid.uuid4().hex


SESSION_HEADER = "x-session-id"


@router.get("/languages", response_model=LanguagesResponse)
async def list_languages() -> LanguagesResponse:
    """Every language, its version and the commands it is compiled and run with (in the
    sandbox)."""
    return LanguagesResponse(languages=[LanguageInfo(**lang.describe()) for lang in LANGUAGES])


@router.post("/execute", response_model=ExecuteResponse)
async def execute(req: ExecuteRequest, request: Request, response: Response) -> ExecuteResponse:
    """Run one snippet in a fresh sandbox. The code's own failures are 200 with a status.
    With an ``X-Session-ID`` header it runs in that session instead (an unknown id is a 404,
    never a new session); ``X-Session-Expires-In`` then gives the session's time left."""
    rid = request_id(request)
    response.headers["X-Request-ID"] = rid
    session_id = request.headers.get(SESSION_HEADER)
    if session_id is not None:
        sessions = request.app.state.executor.sessions
        answer = await sessions.execute(session_id, req, rid, caller_of(request).scope)
        response.headers["X-Session-ID"] = answer.session_id
        response.headers["X-Session-Expires-In"] = f"{answer.expires_in:g}"
        result = ExecuteResponse.model_validate(answer.model_dump(include=EXECUTE_FIELDS))
    else:  # stateful session calls are never cached or replayed
        result = await cached.answer(
            request,
            "/execute",
            "execute",
            req,
            lambda: request.app.state.executor.execute(req, rid),
            cached.execute_cacheable,
            request_id=rid,
        )
    metrics.count_request("/execute", result.status)
    return result


EXECUTE_FIELDS = set(ExecuteResponse.model_fields)


def refuse_session_header(request: Request) -> None:
    """Routes that cannot run in a session say so, rather than run one-shot silently."""
    if request.headers.get(SESSION_HEADER) is not None:
        raise RequestError(422, "X-Session-ID is accepted on /execute only")


def fetch_kind(req: ExecuteRequest, share: int, settings: Settings) -> str:
    """The cache's kind of a batch item: ``execute`` (shared with /execute and /run_code),
    unless its fetch_files get a smaller cap than theirs, which may change the answer."""
    if req.fetch_files and share < settings.max_fetch_bytes:
        return f"execute:fetch-{share}"
    return "execute"


@router.post("/execute/batch", response_model=ExecuteBatchResponse)
async def execute_batch(batch: ExecuteBatchRequest, request: Request) -> ExecuteBatchResponse:
    """Run many snippets concurrently (within the service's limits); answers keep the order
    of the items, and an item that fails carries the error ``/execute`` would have answered."""
    refuse_session_header(request)
    limit = request.app.state.settings.max_batch_items
    if len(batch.items) > limit:
        raise RequestError(422, f"{len(batch.items)} items; the maximum is {limit}", "items")
    rid = request_id(request)
    executor = request.app.state.executor
    share = fetch_share(len(batch.items), request.app.state.settings)

    async def one(index: int, item: dict[Any, Any]) -> ExecuteResponse | ExecuteBatchItemError:
        try:
            req = validated(ExecuteRequest, item)
            result = await cached.answer(
                request,
                "/execute/batch",
                fetch_kind(req, share, request.app.state.settings),
                req,
                lambda: executor.execute(req, f"{rid}-{index}", share),
                cached.execute_cacheable,
                request_id=f"{rid}-{index}",
                idempotent=False,  # one id for the batch: its items are not replayed alone
            )
        except Exception as exc:  # every item gets an answer: the batch is never lost
            answer = problem(exc)
            if answer.status == 500:
                log.exception("item %d of batch %s failed unexpectedly", index, rid)
            metrics.count_request("/execute/batch", str(answer.status))
            return ExecuteBatchItemError(error=answer.as_item())
        metrics.count_request("/execute/batch", result.status)
        return result

    results = await asyncio.gather(*(one(i, item) for i, item in enumerate(batch.items)))
    return ExecuteBatchResponse(results=list(results))


@router.post("/run_code", response_model=RunCodeResponse)
async def run_code(req: RunCodeRequest, request: Request) -> RunCodeResponse:
    """SandboxFusion-compatible subset, so verl/SkyRL users can point at boxed. Fields it does
    not use (``compile_timeout``, ...) are accepted and ignored, as SandboxFusion callers send
    them."""
    refuse_session_header(request)
    memory = req.memory_limit_MB if req.memory_limit_MB and req.memory_limit_MB > 0 else None
    execute_req = validated(
        ExecuteRequest,
        {
            "code": req.code,
            "input": req.stdin or "",
            "language": req.language,
            "timeout": req.run_timeout,
            "memory_mb": memory,
            "compile_timeout": req.compile_timeout,
            "cache": req.cache,
            "files": req.files,
            "fetch_files": req.fetch_files,
            "image": req.image,
        },
    )
    rid = request_id(request)
    try:
        result = await cached.answer(
            request,
            "/run_code",
            "execute",
            execute_req,
            lambda: request.app.state.executor.execute(execute_req, rid),
            cached.execute_cacheable,
            request_id=rid,
        )
    except Exception as exc:
        _, failure = failure_of(exc)
        if failure is not None and failure.retryable:
            raise RetryAtGateway(exc) from exc
        raise
    metrics.count_request("/run_code", result.status)
    return as_sandbox_fusion(result)


def _compile_result(step: CompileResult) -> RunResult:
    """SandboxFusion's ``compile_result``: the compiler's run as a command result."""
    return RunResult(
        status="TimeLimitExceeded" if step.status == "timeout" else "Finished",
        execution_time=step.duration_ms / 1000,
        return_code=step.exit_code,
        stdout=step.stdout,
        stderr=step.stderr,
    )


def as_sandbox_fusion(result: ExecuteResponse) -> RunCodeResponse:
    compiled = _compile_result(result.compile) if result.compile is not None else None
    if result.status == "compile_error":
        # SandboxFusion's answer to a compile error: Failed, no run, the compiler's result
        return RunCodeResponse(
            status="Failed",
            message="CompileError",
            compile_result=compiled,
            run_result=None,
            boxed_status=result.status,
            cached=result.cached,
            outcome=result.outcome,
            failure=result.failure,
        )
    run_status = "TimeLimitExceeded" if result.status == "timeout" else "Finished"
    return RunCodeResponse(
        status="Success" if result.status == "ok" else "Failed",
        message="" if result.status in ("ok", "error") else result.status,
        compile_result=compiled,
        run_result=RunResult(
            status=run_status,
            execution_time=result.duration_ms / 1000,
            return_code=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
        ),
        boxed_status=result.status,
        cached=result.cached,
        files=result.files,
        fetch_status=result.fetch_status,
        outcome=result.outcome,
        failure=result.failure,
    )
