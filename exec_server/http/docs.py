"""``/openapi.json``, ``/docs`` and ``/redoc``, behind the API key like every non-probe route:
the schema names every route, limit and field, and "only the probes are open" stays true."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from .auth import GUARDED

router = APIRouter(dependencies=GUARDED, include_in_schema=False)


@router.get("/openapi.json")
async def openapi(request: Request) -> JSONResponse:
    return JSONResponse(request.app.openapi())


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="boxed API")


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return get_redoc_html(openapi_url="/openapi.json", title="boxed API")
