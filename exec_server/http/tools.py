"""Tools a model calls during a rollout: ``/calculate``.

The calculator bounds the cost of every operation before doing it (exec_server/calculator.py),
and it still runs in a worker process under ``BOXED_CALCULATE_DEADLINE``: a cost the estimate
missed stalls one worker, never the event loop.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from .. import metrics
from ..grading_pool import WorkerLost, WorkerPool, WorkTimeout
from ..models import CalculateRequest, CalculateResponse
from ..settings import Settings
from .auth import GUARDED
from .json_body import JsonBodyRoute

router = APIRouter(route_class=JsonBodyRoute, dependencies=GUARDED, tags=["tools"])


@router.post("/calculate", response_model=CalculateResponse)
async def calculate(req: CalculateRequest, request: Request) -> CalculateResponse:
    """Evaluate restricted arithmetic; the expression's own mistakes are 200 with `error`."""
    from ..calculator import CalculationError, evaluate

    settings: Settings = request.app.state.settings
    pool: WorkerPool = request.app.state.workers
    try:
        value = await pool.run(evaluate, req.expr, settings.calculate_deadline)
    except CalculationError as exc:
        metrics.count_request("/calculate", "error")
        return CalculateResponse(value=None, error=str(exc))
    except (WorkTimeout, WorkerLost):
        metrics.count_request("/calculate", "error")
        limit = settings.calculate_deadline
        return CalculateResponse(value=None, error=f"evaluation took too long (max {limit:g} s)")
    metrics.count_request("/calculate", "ok")
    return CalculateResponse(value=value, error=None)
