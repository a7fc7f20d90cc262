"""Stateful sessions: ``/sessions`` and its calls (``exec_server.sessions`` does the work).

``POST /sessions/{id}/execute`` takes exactly what ``POST /execute`` takes and answers what it
answers, plus the session's time left; ``/execute`` with an ``X-Session-ID`` header runs in
that session too (``http/execute.py``). Errors go through the one table of ``http/errors.py``:
404 unknown session, 409 a call already running, 410 lost or expired (with the reason), 429
``BOXED_MAX_SESSIONS`` reached.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request, Response

from .. import metrics
from ..models import ExecuteRequest, SessionCreateRequest, SessionExecuteResponse, SessionInfo
from .auth import GUARDED, caller_of
from .execute import request_id
from .json_body import JsonBodyRoute

# The body may be left out: every limit then takes the server default.
OptionalLimits = Annotated[SessionCreateRequest, Body(default_factory=SessionCreateRequest)]
router = APIRouter(route_class=JsonBodyRoute, dependencies=GUARDED, tags=["sessions"])
_ANSWERS = {
    404: {"description": "No such session (never made, or deleted)."},
    410: {"description": "The session is lost or expired: `detail` says why."},
}


@router.post(
    "/sessions",
    response_model=SessionInfo,
    status_code=201,
)
async def create_session(request: Request, req: OptionalLimits) -> SessionInfo:
    """Open a session: a persistent interpreter in a sandbox of its own (429 when
    ``BOXED_MAX_SESSIONS`` are open)."""
    info = await request.app.state.executor.sessions.create(req, caller_of(request).scope)
    metrics.count_request("/sessions", "201")
    return info


@router.post(
    "/sessions/{session_id}/fork",
    response_model=SessionInfo,
    status_code=201,
    responses={
        **_ANSWERS,
        409: {"description": "A call is running, or the session cannot fork: `detail` says why."},
    },
)
async def fork_session(session_id: str, request: Request) -> SessionInfo:
    """Fork the session: a new session with a copy of its interpreter's state (globals,
    imports, open files at their offsets) and of its working directory, independent from
    then on (its own uid, limits, time left and verdicts), counted in the tenant's quota."""
    sessions = request.app.state.executor.sessions
    info = await sessions.fork(session_id, caller_of(request).scope)
    metrics.count_request("/sessions/{session_id}/fork", "201")
    return info


@router.get("/sessions/{session_id}", response_model=SessionInfo, responses=_ANSWERS)
async def get_session(session_id: str, request: Request) -> SessionInfo:
    """The session's limits and the time it has left."""
    return request.app.state.executor.sessions.info(session_id, caller_of(request).scope)


@router.delete("/sessions/{session_id}", status_code=204, responses={404: _ANSWERS[404]})
async def delete_session(session_id: str, request: Request) -> Response:
    """Remove the session; answers once its sandbox is gone."""
    await request.app.state.executor.sessions.delete(session_id, caller_of(request).scope)
    metrics.count_request("/sessions/{session_id}", "204")
    return Response(status_code=204)


@router.post(
    "/sessions/{session_id}/execute",
    response_model=SessionExecuteResponse,
    responses={
        **_ANSWERS,
        409: {"description": "Another call of the session is running."},
    },
)
async def execute_in_session(
    session_id: str, req: ExecuteRequest, request: Request, response: Response
) -> SessionExecuteResponse:
    """Run one call in the session: what ``/execute`` does, with the session's globals,
    imports and files kept from the calls before."""
    rid = request_id(request)
    response.headers["X-Request-ID"] = rid
    sessions = request.app.state.executor.sessions
    result = await sessions.execute(session_id, req, rid, caller_of(request).scope)
    metrics.count_request("/sessions/{session_id}/execute", result.status)
    return result
