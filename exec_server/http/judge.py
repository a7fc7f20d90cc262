"""``POST /judge``: a submission against its tests (the logic is ``exec_server.judge``)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from .. import metrics
from ..models import JudgeRequest, JudgeResponse
from . import cached
from .auth import GUARDED
from .execute import request_id
from .json_body import JsonBodyRoute

router = APIRouter(route_class=JsonBodyRoute, dependencies=GUARDED, tags=["judge"])


@router.post("/judge", response_model=JudgeResponse)
async def judge_route(req: JudgeRequest, request: Request, response: Response) -> JudgeResponse:
    """Compile once, run every test in a fresh process of one sandbox, answer the verdict,
    ``passed``/``total`` and each test's status, time, memory and first difference."""
    rid = request_id(request)
    response.headers["X-Request-ID"] = rid
    result = await cached.answer(
        request,
        "/judge",
        "judge",
        req,
        lambda: request.app.state.executor.judge(req, rid),
        cached.judge_cacheable,
        request_id=rid,
    )
    metrics.count_request("/judge", result.verdict)
    return result
