"""Probes (open to all, for orchestrators) and ``/metrics`` (behind the key, for Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..models import Health, Readiness
from .auth import GUARDED

router = APIRouter(tags=["probes"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: the process answers."""
    return Health()


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(request: Request) -> JSONResponse:
    """Readiness: 200 when the engine can run code (Docker reachable, sandbox image present,
    pool warm); 503 with the same body, saying what is missing, otherwise."""
    executor = request.app.state.executor
    ready = bool(executor.ready)
    return JSONResponse({"ready": ready, **executor.readiness()}, status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse, dependencies=GUARDED)
async def metrics_endpoint() -> Response:
    """Prometheus metrics of this process."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
