"""The result cache and idempotent retries at the routes (``exec_server.result_cache``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from fastapi import Request
from pydantic import BaseModel

from ..models import ExecuteResponse, JudgeResponse
from ..result_cache import ResultCache, fingerprint
from .auth import caller_of

M = TypeVar("M", bound=BaseModel)


def image_id(request: Request, body: BaseModel | None = None) -> str | None:
    """The sandbox image the answers come from (its id, else its tag): part of every key. An
    operator image the body names (``image``) gives the id it was checked as."""
    executor = request.app.state.executor
    name = getattr(body, "image", None)
    engine = getattr(executor, "engine", None)
    if name is not None and engine is not None:
        image = engine.image(name)  # 422 for a name off the list, before any lookup
        return image.report.image_id if image.report else image.spec.image
    health = getattr(executor, "health", None)
    details = getattr(health, "details", None) or {}
    return details.get("image_id") or request.app.state.settings.sandbox_image


def execute_cacheable(answer: ExecuteResponse) -> bool:
    """Never a timeout, of the run or of the compile step (a loaded machine may cause it)."""
    compile_timeout = answer.compile is not None and answer.compile.status == "timeout"
    return answer.status != "timeout" and not compile_timeout


def judge_cacheable(answer: JudgeResponse) -> bool:
    compile_timeout = answer.compile is not None and answer.compile.status == "timeout"
    return not compile_timeout and all(t.status != "timeout" for t in answer.tests)


async def answer(
    request: Request,
    route: str,
    kind: str,
    body: BaseModel,
    work: Callable[[], Awaitable[M]],
    cacheable: Callable[[M], bool],
    *,
    request_id: str,
    idempotent: bool = True,
) -> M:
    """``work``'s answer, or a stored or in-flight one. ``route`` scopes the request ids,
    ``kind`` the cache keys (``/run_code`` and ``/execute`` share answers), the caller both
    (no answer crosses callers); a cache hit is answered with this request's ``request_id``."""
    store: ResultCache = request.app.state.result_cache
    settings = request.app.state.settings
    rid = request.headers.get("x-request-id") if idempotent else None
    wanted = bool(getattr(body, "cache", False)) and settings.result_cache
    # the key of the body, needed only to look an answer up or keep it (hashing the whole
    # body is a good part of a request's cost otherwise)
    key = fingerprint(kind, body, image_id(request, body)) if wanted or rid is not None else ""
    found, how = await store.answer(
        route,
        work,
        fingerprint=key,
        request_id=rid,
        cache=wanted,
        cacheable=cacheable,
        scope=caller_of(request).scope,
    )
    if how in ("hit", "joined") and hasattr(found, "request_id"):
        found = found.model_copy(update={"request_id": request_id})
    return found
