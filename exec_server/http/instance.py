"""ASGI middleware that names the service instance on every answer (``X-Boxed-Instance``).

Behind several services (one per node of a Ray cluster, say) a caller, a log or a test can then
tell which one served a request, and that a restarted service is the same instance as before.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

INSTANCE_HEADER = "X-Boxed-Instance"


class InstanceHeader:
    """Adds ``X-Boxed-Instance: <instance>`` to every HTTP answer, errors included."""

    def __init__(self, app: ASGIApp, instance: str) -> None:
        self.app = app
        self.header = (INSTANCE_HEADER.lower().encode(), instance.encode("latin-1"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), self.header]
            await send(message)

        await self.app(scope, receive, named)
