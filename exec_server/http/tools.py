"""Tools a model calls during a rollout: ``/calculate``."""

from __future__ import annotations

from fastapi import APIRouter

from .. import metrics
from ..models import CalculateRequest, CalculateResponse
from .auth import GUARDED
from .json_body import JsonBodyRoute

router = APIRouter(route_class=JsonBodyRoute, dependencies=GUARDED, tags=["tools"])


@router.post("/calculate", response_model=CalculateResponse)
async def calculate(req: CalculateRequest) -> CalculateResponse:
    """Evaluate restricted arithmetic; the expression's own mistakes are 200 with `error`."""
    from ..calculator import CalculationError, evaluate

    try:
        value = evaluate(req.expr)
    except CalculationError as exc:
        metrics.count_request("/calculate", "error")
        return CalculateResponse(value=None, error=str(exc))
    metrics.count_request("/calculate", "ok")
    return CalculateResponse(value=value, error=None)
