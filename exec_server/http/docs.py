"""``/openapi.json``, ``/docs`` and ``/redoc``, behind the API key like every non-probe route:
the schema names every route, limit and field, and "only the probes are open" stays true.

The pages' scripts and styles are served here too (from ``fastapi-offline``'s copies of
Swagger UI and ReDoc), never from a CDN: the docs must render on a machine with no network,
the one boxed is made for."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, HTTPException, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from .auth import GUARDED

router = APIRouter(dependencies=GUARDED, include_in_schema=False)
ASSETS = Path(fastapi_offline.__file__).parent / "static"
SERVED = frozenset({"swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"})


@router.get("/openapi.json")
async def openapi(request: Request) -> JSONResponse:
    return JSONResponse(request.app.openapi())


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="boxed API",
        swagger_js_url="/docs-assets/swagger-ui-bundle.js",
        swagger_css_url="/docs-assets/swagger-ui.css",
        swagger_favicon_url="/docs-assets/favicon.png",
    )


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title="boxed API",
        redoc_js_url="/docs-assets/redoc.standalone.js",
        redoc_favicon_url="/docs-assets/favicon.png",
        with_google_fonts=False,
    )


@router.get("/docs-assets/{name}")
async def asset(name: str) -> FileResponse:
    if name not in SERVED:
        raise HTTPException(404, f"no docs asset {name!r}")
    return FileResponse(ASSETS / name)
