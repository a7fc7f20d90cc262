"""How a JSON route reads its body: as JSON whatever the ``Content-Type``, except from browsers.

``curl -d '{"code": "print(1)"}'`` sends ``application/x-www-form-urlencoded`` and many clients
send no type at all; a user who pastes that curl line wants it to run. Those two are read as
JSON when the request carries no ``Origin`` header. A browser always sends ``Origin`` with a
cross-site POST, and a form post is the one kind of request a foreign web page can make
without asking (no CORS pre-flight): refusing it keeps a page in a browser from running code
on a boxed on the same machine. Any other non-JSON type is refused with 415, naming the header.
Validation errors leave here as :class:`~exec_server.http.errors.InvalidInput`, with the
route's body model, so an unknown field is answered with the fields it accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from .errors import InvalidInput, field_errors

READ_AS_JSON = frozenset({"", "application/x-www-form-urlencoded"})
"""Media types (``""``: no header) read as JSON unless the request comes from a browser."""
_JSON = b"application/json"


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_json(media: str) -> bool:
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def refusal(content_type: str | None, from_browser: bool) -> str | None:
    """Why a body sent with ``content_type`` is not read, or ``None`` when it is read as JSON."""
    media = media_type(content_type)
    if is_json(media):
        return None
    sent = f"Content-Type: {content_type}" if content_type else "no Content-Type"
    if media in READ_AS_JSON and not from_browser:
        return None
    if media in READ_AS_JSON:
        return f"a browser form post ({sent}) is refused: send Content-Type: application/json"
    return f"the body must be JSON: send Content-Type: application/json ({sent} was sent)"


class JsonBodyRoute(APIRoute):
    """An ``APIRoute`` that reads its body as described above."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        model = self.body_field.field_info.annotation if self.body_field else None

        async def route(request: Request) -> Response:
            sent = request.headers.get("content-type")
            reason = refusal(sent, from_browser="origin" in request.headers)
            if reason is not None:
                raise HTTPException(415, reason)
            if not is_json(media_type(sent)):
                headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-type"]
                request.scope["headers"] = [*headers, (b"content-type", _JSON)]
                request = Request(request.scope, request.receive)
            try:
                return await handle(request)
            except RequestValidationError as exc:
                raise InvalidInput(field_errors(exc.errors(), model, sent)) from None

        return route
