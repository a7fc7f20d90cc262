"""The API key: when ``BOXED_API_KEY`` or ``BOXED_TENANT_KEYS`` is set, every route but the
probes needs a key as a Bearer token, the docs and the schema included (they name every route,
limit and field). The check also names the request's caller (``exec_server.tenancy``): the
tenant it runs as and the scope of its request ids and cached answers."""

from __future__ import annotations

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPBearer

from ..admission import current_tenant
from ..tenancy import Caller, identify

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="boxed"'}


class ApiKey(HTTPBearer):
    """Declares the Bearer scheme in /openapi.json (the docs' "Authorize" button) and checks
    the key itself, so that a missing and a wrong key get the same 401 with its
    WWW-Authenticate challenge. One dependency, not a check over FastAPI's ``HTTPBearer``:
    each level of dependencies costs every request its own resolution."""

    async def __call__(self, request: Request) -> None:  # type: ignore[override]
        """401 unless the request carries ``Authorization: Bearer <key>`` with
        ``BOXED_API_KEY`` or a tenant's key (or no key is set); 403 for a tenant its key may
        not claim. Sets the request's caller and, for a tenant's key, its tenant. Async:
        FastAPI would run a plain function in its thread pool, a hop per request (and the
        tenant must be set in the request's own context)."""
        scheme, _sep, token = request.headers.get("authorization", "").partition(" ")
        # bytes: compare_digest refuses non-ASCII str, and a header may hold any latin-1 byte
        given = token.strip().encode("latin-1", "replace") if scheme.lower() == "bearer" else None
        caller = identify(
            given,
            current_tenant.get(),  # as declared (``TenantFromHeader``)
            request.app.state.settings.api_key,
            request.app.state.tenant_keys,
        )
        if caller is None:
            raise HTTPException(
                401, "missing or wrong API key: send Authorization: Bearer <key>", headers=CHALLENGE
            )
        request.state.caller = caller
        current_tenant.set(caller.tenant)


def caller_of(request: Request) -> Caller:
    """The caller ``require_key`` named (every guarded route has one)."""
    caller: Caller = request.state.caller
    return caller


# scheme_name: the name FastAPI's own HTTPBearer has in the schema
require_key = ApiKey(
    auto_error=False,
    scheme_name="HTTPBearer",
    description="BOXED_API_KEY or a tenant's key (BOXED_TENANT_KEYS), when the service sets any.",
)

GUARDED = [Depends(require_key)]
"""Dependencies of every route that follows the key."""
