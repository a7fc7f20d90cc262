"""The API key: when ``BOXED_API_KEY`` is set, every route but the probes needs it as a Bearer
token, the docs and the schema included (they name every route, limit and field)."""

from __future__ import annotations

import hmac

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPBearer

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="boxed"'}


class ApiKey(HTTPBearer):
    """Declares the Bearer scheme in /openapi.json (the docs' "Authorize" button) and checks
    the key itself, so that a missing and a wrong key get the same 401 with its
    WWW-Authenticate challenge. One dependency, not a check over FastAPI's ``HTTPBearer``:
    each level of dependencies costs every request its own resolution."""

    async def __call__(self, request: Request) -> None:  # type: ignore[override]
        """401 unless the request carries ``Authorization: Bearer <BOXED_API_KEY>`` (or no key
        is set). Async: FastAPI would run a plain function in its thread pool, a hop per
        request."""
        key: str | None = request.app.state.settings.api_key
        if key is None:
            return
        scheme, _sep, token = request.headers.get("authorization", "").partition(" ")
        # bytes: compare_digest refuses non-ASCII str, and a header may hold any latin-1 byte
        given = token.strip().encode("latin-1", "replace")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given, key.encode()):
            raise HTTPException(
                401, "missing or wrong API key: send Authorization: Bearer <key>", headers=CHALLENGE
            )


# scheme_name: the name FastAPI's own HTTPBearer has in the schema
require_key = ApiKey(
    auto_error=False,
    scheme_name="HTTPBearer",
    description="BOXED_API_KEY, when the service sets one.",
)

GUARDED = [Depends(require_key)]
"""Dependencies of every route that follows the key."""
