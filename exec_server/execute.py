"""The execute use case: one snippet, compiled first if its language is, run once on a warm
sandbox of the engine under the request's limits, its verdict answered as an ``ExecuteResponse``.

The HTTP layer only translates: ``RequestError`` -> 4xx, ``Overloaded`` -> 429,
``ServiceUnavailable`` -> 503. Anything the code itself did is a normal ``ExecuteResponse``.
"""

from __future__ import annotations

import time

from . import metrics
from .answers import compile_error_response, compile_info, to_response
from .engine import Engine
from .limits import resolve_limits
from .models import ExecuteRequest, ExecuteResponse
from .runs import CompileFailed


async def execute(
    engine: Engine, req: ExecuteRequest, request_id: str, fetch_bytes: int | None = None
) -> ExecuteResponse:
    """Run ``req`` on ``engine``: admission, a warm sandbox, the run, the verdict, the clean-up;
    ``fetch_bytes``: what its files may fetch (a batch item's share)."""
    image = engine.image(req.image)
    limits = resolve_limits(req, image.settings)
    runs = engine.runs(
        req.isolation,
        req.language,
        req.code,
        req.compile_timeout,
        req.files,
        req.fetch_files,
        fetch_bytes,
        image,
    )
    engine.check_available(image)
    started = time.monotonic()
    async with engine.admission.slot():
        async with runs:
            try:
                compiled = await runs.prepare()
                # a sandbox lost under the run compiles again in a fresh one: that may fail
                result = await runs.run(req.input, limits, more=False)
            except CompileFailed as failed:
                return compile_error_response(failed.result, request_id)
        metrics.QUEUE_SECONDS.observe(time.monotonic() - started - result.duration_ms / 1000)
    metrics.observe_run(result)
    metrics.TOTAL_SECONDS.observe(time.monotonic() - started)
    response = to_response(result, request_id)
    if compiled is not None:
        response.compile = compile_info(compiled)
    return response
