"""Tool dispatcher of an interleaved-thinking environment, on the boxed client.

The model writes, inside ``<think>``::

    <tool_call>{"name": "python_interpreter", "arguments": {"code": "print(2**10)"}}</tool_call>
    <tool_call>{"name": "calculator", "arguments": {"expr": "sqrt(2)*pi"}}</tool_call>

and the environment splices ``_exec_tool(call)`` back into the same assistant turn::

    <tool_response>{"stdout": "1024\\n", "result": "1024"}</tool_response>
    <tool_response>{"value": 4.442882938158366}</tool_response>

Compared with the seed (a new HTTP client per call, no retries, a fixed 5 s timeout, and the
calculator run with ``eval`` in the environment's own process), one shared
:class:`~boxed_client.AsyncClient` pools connections, caps concurrency, retries overloads
and fails over between servers, and the calculator runs in the service's safe evaluator.

Configure with ``BOXED_URL`` (one URL or several, comma-separated) and ``BOXED_API_KEY``.
Run this file to try it against a running service.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from boxed_client import AsyncClient, BoxedHTTPError

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

# One client for the whole environment: it owns the connection pool and the concurrency cap.
# Created on first use, inside the environment's event loop.
_client: AsyncClient | None = None


def _get_client() -> AsyncClient:
    global _client
    if _client is None:
        _client = AsyncClient()
    return _client


def _tool_response(payload: dict[str, Any]) -> str:
    return f"<tool_response>{json.dumps(payload)}</tool_response>"


async def _exec_tool(call: dict[str, Any]) -> str:
    """Run one parsed tool call and return the ``<tool_response>`` to splice back.

    The model's own mistakes (bad arguments, code that raises, an expression with no value, a
    snippet the service refuses with 422/413) become an ``error`` the model can read. Service
    outages (:class:`~boxed_client.BoxedUnavailable`, the deadline ran out) propagate: the
    trainer should see them, not train on trajectories that blame the model for them.
    """
    name = call.get("name")
    args = call.get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return _tool_response({"error": "arguments are not valid JSON"})
    if not isinstance(args, dict):
        return _tool_response({"error": "arguments must be a JSON object"})
    client = _get_client()
    try:
        if name == "python_interpreter":
            result = await client.execute(str(args.get("code", "")))
            payload: dict[str, Any] = {"stdout": result.output, "result": result.output.strip()}
            if not result.ok:
                # Partial output is kept; the traceback tail tells the model what went wrong.
                payload.update(status=result.status, stderr=result.stderr[-2000:])
        elif name == "calculator":
            calc = await client.calculate(str(args.get("expr", "")))
            payload = {"value": calc.value} if calc.ok else {"value": None, "error": calc.error}
        else:
            payload = {"error": f"unknown tool {name!r}"}
    except BoxedHTTPError as exc:
        if exc.status_code not in (413, 422):
            raise
        payload = {"error": exc.message}
    return _tool_response(payload)


async def answer_tool_calls(text: str) -> list[str]:
    """Responses to every ``<tool_call>`` in ``text``, run concurrently, in order."""
    calls: list[dict[str, Any] | None] = []
    for raw in TOOL_CALL.findall(text):
        try:
            call = json.loads(raw)
        except json.JSONDecodeError:
            call = None
        calls.append(call if isinstance(call, dict) else None)

    async def one(call: dict[str, Any] | None) -> str:
        if call is None:
            return _tool_response({"error": "tool call is not a JSON object"})
        return await _exec_tool(call)

    return list(await asyncio.gather(*(one(c) for c in calls)))


async def _demo() -> None:
    text = (
        '<tool_call>{"name": "python_interpreter", "arguments": {"code": "print(2**10)"}}'
        "</tool_call>"
        '<tool_call>{"name": "calculator", "arguments": {"expr": "sqrt(2)*pi"}}</tool_call>'
    )
    try:
        for response in await answer_tool_calls(text):
            print(response)
    finally:
        await _get_client().aclose()


if __name__ == "__main__":
    asyncio.run(_demo())
