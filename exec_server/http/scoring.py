"""Grading answers: ``/score`` and ``/score/batch``, through admission like code runs.

Grading blocks (the equivalence check runs sympy in a worker process, up to ``timeout`` seconds
an answer), so it runs off the event loop and holds one admission slot: under load it is
answered 429 like ``/execute``, instead of queueing without bound. The limits are the
service's settings: ``BOXED_MAX_BATCH_ITEMS`` items, ``BOXED_TIMEOUT_MAX`` seconds an answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from .. import metrics
from ..executor import RequestError
from ..models import ScoreBatchRequest, ScoreBatchResponse, ScoreRequest, ScoreRow
from ..settings import Settings
from .auth import GUARDED
from .json_body import JsonBodyRoute

router = APIRouter(route_class=JsonBodyRoute, dependencies=GUARDED, tags=["scoring"])


@router.post("/score", response_model=ScoreRow)
async def score(req: ScoreRequest, request: Request) -> dict[str, Any]:
    """Grade one trajectory (any supported format with its gold, or
    ``{response, answer, preset}``); a caller mistake is 422, a grader failure 500."""
    from scorer.api import score as score_one

    body = req.model_dump(exclude_unset=True)
    return await _grade(request, "/score", score_one, body, items=1)


@router.post("/score/batch", response_model=ScoreBatchResponse)
async def score_batch(req: ScoreBatchRequest, request: Request) -> dict[str, Any]:
    """Grade many trajectories; a bad item becomes an ``error`` row."""
    from scorer.api import score_batch as score_many

    body = req.model_dump(exclude_unset=True)
    return await _grade(request, "/score/batch", score_many, body, items=len(req.items))


async def _grade(
    request: Request, route: str, grade: Callable[[Any], dict[str, Any]], body: dict, items: int
) -> dict[str, Any]:
    settings: Settings = request.app.state.settings
    _within_limits(body, items, settings)
    async with request.app.state.executor.admission.slot():
        result = await run_in_threadpool(grade, body)
    metrics.count_request(route, "ok")
    return result


def _within_limits(body: dict[str, Any], items: int, settings: Settings) -> None:
    if items > settings.max_batch_items:
        raise RequestError(
            422, f"{items} items; the maximum is {settings.max_batch_items}", "items"
        )
    timeout = body.get("timeout")
    if isinstance(timeout, float) and timeout > settings.timeout_max:
        raise RequestError(
            422, f"timeout {timeout:g} s exceeds the maximum {settings.timeout_max:g} s", "timeout"
        )
