"""ASGI middleware that refuses oversized request bodies with 413 before reading them whole
(in the one error shape of :class:`exec_server.models.ErrorResponse`)."""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodySizeLimit:
    """A declared ``Content-Length`` over the limit is refused without reading the body. A
    chunked body is read up to the limit first and replayed to the app, so the 413 comes from
    here rather than from a parse error deep inside the framework."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, exempt: Callable[[Scope], bool] = lambda scope: False
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.exempt = exempt  # requests whose route reads and caps its body itself

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.exempt(scope):
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            if length.isdigit() and int(length) > self.max_bytes:
                await self._refuse(send)
                return
            await self.app(scope, receive, send)  # the server enforces the declared length
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        detail = f"request body exceeds the maximum of {self.max_bytes} bytes"
        await send_refusal(send, 413, detail)


def error_body(detail: str) -> bytes:
    """The service's one error shape for an answer sent before any route (a caller's
    mistake: no outcome, no failure)."""
    return json.dumps({"detail": detail, "errors": [], "outcome": None, "failure": None}).encode()


async def send_refusal(send: Send, status: int, detail: str) -> None:
    """Answer ``status`` with ``detail`` from ASGI middleware and close the connection."""
    body = error_body(detail)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
