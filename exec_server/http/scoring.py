"""Grading answers: ``/score`` and ``/score/batch``, through admission like code runs.

Grading is CPU-bound Python (parsing, extraction; sympy runs in the scorer's own workers), so it
runs in the service's worker processes (:mod:`exec_server.grading_pool`), where a slow input
cannot stall the event loop, and holds one admission slot: under load it is answered 429 like
``/execute``, instead of queueing without bound. Each item has ``BOXED_SCORE_DEADLINE`` seconds;
past it the item is a ``grader_timeout`` row (no reward), never a wrong answer. The other
limits are the service's settings: ``BOXED_MAX_BATCH_ITEMS`` items, ``BOXED_TIMEOUT_MAX``
seconds an answer check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request

from .. import metrics
from ..grading_pool import WorkerLost, WorkerPool, WorkTimeout
from ..models import ScoreBatchRequest, ScoreBatchResponse, ScoreRequest, ScoreRow
from ..request_errors import RequestError
from ..settings import Settings
from .auth import GUARDED
from .json_body import JsonBodyRoute

router = APIRouter(route_class=JsonBodyRoute, dependencies=GUARDED, tags=["scoring"])


@router.post("/score", response_model=ScoreRow)
async def score(req: ScoreRequest, request: Request) -> dict[str, Any]:
    """Grade one trajectory (any supported format with its gold, or
    ``{response, answer, preset}``); a caller mistake is 422, a grader failure a row whose
    ``outcome`` is ``grader`` (no reward)."""
    from scorer.api import score as score_one

    body = req.model_dump(exclude_unset=True)
    settings: Settings = request.app.state.settings
    _within_limits(body, 1, settings)
    async with request.app.state.executor.admission.slot():
        row = await _in_worker(request, score_one, body, body, None)
    metrics.count_request("/score", "ok")
    return row


@router.post("/score/batch", response_model=ScoreBatchResponse)
async def score_batch(req: ScoreBatchRequest, request: Request) -> dict[str, Any]:
    """Grade many trajectories, items side by side in the worker processes, each under its own
    deadline; a bad or slow item becomes an ``error`` or ``timeout`` row."""
    from scorer.api import batch_options, score_item_packed
    from scorer.grading import summarize

    body = req.model_dump(exclude_unset=True)
    settings: Settings = request.app.state.settings
    _within_limits(body, len(req.items), settings)
    options = batch_options(body)  # ScoreInputError: 422 (http/errors.py)
    envelope = {k: v for k, v in body.items() if k != "items"}
    async with request.app.state.executor.admission.slot():
        results = await asyncio.gather(
            *(
                _in_worker(request, score_item_packed, (envelope, options, item, n), item, n)
                for n, item in enumerate(req.items, 1)
            )
        )
    rows = [row for item_rows in results for row in item_rows]
    metrics.count_request("/score/batch", "ok")
    return {"results": rows, "summary": summarize(rows, options.rewards)}


async def _in_worker(
    request: Request, fn: Callable[[Any], Any], arg: Any, item: Any, n: int | None
) -> Any:
    """``fn(arg)`` in a worker process under the per-item deadline; a late item is its
    ``grader_timeout`` row (a list of it for a batch item), a lost worker a ``grader_error``."""
    from scorer.api import deadline_row
    from scorer.grading import error_row
    from scorer.outcome import Failure, FailureCode

    settings: Settings = request.app.state.settings
    pool: WorkerPool = request.app.state.workers
    deadline = settings.score_deadline
    try:
        return await pool.run(fn, arg, deadline)  # ScoreInputError: 422 (http/errors.py)
    except WorkTimeout:
        row = deadline_row(item, n, deadline)
    except WorkerLost as exc:
        row = error_row(
            f"grader error: {exc}", line=n, failure=Failure.of(FailureCode.GRADER_ERROR)
        )
    return row if n is None else [row]


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
