"""Typed error messages on the WebSocket for failures that are not the code's.

openenv-core answers an exception of ``reset`` or ``step`` on its WebSocket with its own error
message, ``{"type": "error", "data": {"message": str(exc), "code": "EXECUTION_ERROR"}}``,
built from the exception's text alone. :class:`FailureFrames` (an ASGI middleware) adds the
failure to that message, in the same ``data``: ``outcome``, ``failure`` (``{"code",
"retryable"}``) and ``retry_after``. The environment notes the :class:`EnvUnavailable` it raises
(``note``) in the connection's own context, so the message is matched to its exception, never
to another connection's.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .failures import EnvUnavailable

# The failure raised on this connection and not yet sent; one holder per WebSocket.
_PENDING: ContextVar[list[EnvUnavailable] | None] = ContextVar("boxed_pending", default=None)


def note(exc: EnvUnavailable) -> None:
    """Remember ``exc`` for the error message openenv-core sends next on this WebSocket (a
    no-op outside one: over HTTP the exception handler answers it)."""
    pending = _PENDING.get()
    if pending is not None:
        pending[:] = [exc]


def failure_data(exc: EnvUnavailable) -> dict[str, Any]:
    """The fields a failure adds to an error message (and to an HTTP 503's body)."""
    return {
        "outcome": exc.outcome.value,
        "failure": exc.failure.as_dict(),
        "retry_after": exc.retry_after,
    }


class FailureFrames:
    """Adds the noted failure to openenv-core's next error message on each WebSocket."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        pending: list[EnvUnavailable] = []
        token = _PENDING.set(pending)

        async def typed_send(message: Message) -> None:
            if pending and message["type"] == "websocket.send" and message.get("text"):
                typed = _with_failure(message["text"], pending[0])
                if typed is not None:
                    pending.clear()
                    message = {**message, "text": typed}
            await send(message)

        try:
            await self.app(scope, receive, typed_send)
        finally:
            _PENDING.reset(token)


def _with_failure(text: str, exc: EnvUnavailable) -> str | None:
    """``text`` (an outgoing message) with the failure added; None when it is no error
    message."""
    try:
        frame = json.loads(text)
    except ValueError:
        return None
    if not isinstance(frame, dict) or frame.get("type") != "error":
        return None
    frame["data"] = {**(frame.get("data") or {}), **failure_data(exc)}
    return json.dumps(frame)
