"""The API key: when ``BOXED_API_KEY`` is set, every route but the probes needs it as a Bearer
token, the docs and the schema included (they name every route, limit and field)."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

# Declares the scheme in /openapi.json (the docs' "Authorize" button); the check is ours, so
# that a missing and a wrong key get the same 401 with its WWW-Authenticate challenge.
_bearer = HTTPBearer(auto_error=False, description="BOXED_API_KEY, when the service sets one.")
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="boxed"'}


async def require_key(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """401 unless the request carries ``Authorization: Bearer <BOXED_API_KEY>`` (or no key is
    set). Async: FastAPI would run a plain function in its thread pool, a hop per request."""
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


GUARDED = [Depends(require_key)]
"""Dependencies of every route that follows the key."""
