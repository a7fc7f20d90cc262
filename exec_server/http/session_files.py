"""A session's files over HTTP: ``/sessions/{id}/files`` (``exec_server.session_files`` does
the work).

``PUT /sessions/{id}/files/{path}`` takes the file's bytes as the body (any content type) and
answers 201 for a new file, 204 for one replaced; ``GET`` answers the bytes
(``application/octet-stream``); ``GET /sessions/{id}/files?dir=...`` lists a directory;
``DELETE`` removes a file, a link or an empty directory. A file's body is read here, streamed
and capped at ``BOXED_SESSION_FILE_MAX_BYTES`` (the body-size middleware's
``BOXED_MAX_BODY_BYTES`` does not apply to it: :func:`streams_its_body`). Errors go through
the one table of ``http/errors.py``: 404 no such session or file, 409 a call running, 410 lost
or expired, 413 over the cap, 422 a path refused.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from starlette.types import Scope

from .. import metrics
from ..models import ErrorResponse, SessionFileListing
from ..session_files import SessionFiles
from .auth import GUARDED, caller_of

router = APIRouter(dependencies=GUARDED, tags=["sessions"])
_FILE = re.compile(r"/sessions/[^/]+/files/")
_CLOSE = {"Connection": "close"}
_ROUTE = "/sessions/{session_id}/files/{path:path}"
_ANSWERS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in {
        403: "A path through a link, or onto another file system: refused.",
        404: "No such session (never made, or deleted), or no such file.",
        409: "A call of the session is running.",
        410: "The session is lost or expired: `detail` says why.",
        422: "A path refused: absolute, a `..` component, not a regular file or directory.",
    }.items()
}
_FILE_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


def streams_its_body(scope: Scope) -> bool:
    """Whether the request is a file's PUT, whose body this module reads and caps itself."""
    return scope.get("method") == "PUT" and _FILE.match(scope.get("path", "")) is not None


def _files(request: Request) -> SessionFiles:
    return SessionFiles(request.app.state.executor.sessions)


async def _body(request: Request, files: SessionFiles) -> bytes:
    """The request's body, refused (413) as soon as it is known to pass the cap. The refusal
    closes the connection: the rest of the body, unread, must not be taken for the next
    request's head."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > files.max_bytes:
        raise HTTPException(413, files.too_large(int(declared)), headers=_CLOSE)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > files.max_bytes:
            raise HTTPException(413, files.too_large(size), headers=_CLOSE)
        chunks.append(chunk)
    return b"".join(chunks)


@router.put(
    _ROUTE,
    status_code=201,
    responses={
        **_ANSWERS,
        204: {"description": "An existing file replaced."},
        507: {"model": ErrorResponse, "description": "The session's /tmp is full."},
    },
    openapi_extra=_FILE_BODY,
)
async def put_file(session_id: str, path: str, request: Request) -> Response:
    """Write the body as the file ``path`` of the session's working directory (its parent
    folders made; an old file or link there replaced, never written through)."""
    files = _files(request)
    data = await _body(request, files)
    created = await files.write(session_id, caller_of(request).scope, path, data)
    status = 201 if created else 204
    metrics.count_request(_ROUTE, str(status))
    return Response(status_code=status)


@router.get(
    _ROUTE,
    response_class=Response,
    responses={**_ANSWERS, 200: {"content": {"application/octet-stream": {}}}},
)
async def get_file(session_id: str, path: str, request: Request) -> Response:
    """The bytes of the regular file ``path`` of the session's working directory."""
    data = await _files(request).read(session_id, caller_of(request).scope, path)
    metrics.count_request(_ROUTE, "200")
    return Response(data, media_type="application/octet-stream")


@router.get("/sessions/{session_id}/files", responses=_ANSWERS)
async def list_files(
    session_id: str,
    request: Request,
    dir: str = Query(default="", description="Relative to the working directory; '' for it."),
) -> SessionFileListing:
    """The entries of a directory of the session's working directory: names, kinds, sizes."""
    listing = await _files(request).listing(session_id, caller_of(request).scope, dir)
    metrics.count_request("/sessions/{session_id}/files", "200")
    return listing


@router.delete(_ROUTE, status_code=204, responses=_ANSWERS)
async def delete_file(session_id: str, path: str, request: Request) -> Response:
    """Remove the file, link (never its target) or empty directory ``path``."""
    await _files(request).delete(session_id, caller_of(request).scope, path)
    metrics.count_request(_ROUTE, "204")
    return Response(status_code=204)
