"""Who is asking: a request's caller, the (credential, tenant) pair that scopes its request ids
and cached answers, and the optional per-tenant keys that bind a tenant to a key.

Without per-tenant keys a tenant is whatever ``X-Boxed-Tenant`` says (self-declared): scoping
then keeps jobs from stepping on each other by accident, not one caller from posing as another.
With ``BOXED_TENANT_KEYS`` a request's key decides its tenant: an ``X-Boxed-Tenant`` naming
another is refused (403), and the shared ``BOXED_API_KEY`` (if any) may not declare a tenant
that has a key of its own.

The credential enters a scope only as a keyed digest (a secret drawn once per process), so
no key can be read back from a cache key, a log line or a metric.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from fastapi import HTTPException

from .admission import TENANT_MAX_CHARS
from .settings import Settings

_DIGEST_KEY = secrets.token_bytes(32)  # per process: digests never outlive the service


def digest(text: str) -> str:
    """A keyed digest of ``text``: equal for equal inputs within this process, nothing more."""
    return hmac.new(_DIGEST_KEY, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Caller:
    """The credential a request proved (its digest; ``""``: the service needs none) and the
    tenant it runs as."""

    credential: str
    tenant: str

    @property
    def scope(self) -> str:
        """The key of everything stored for this caller: no answer crosses two scopes."""
        return digest(json.dumps([self.credential, self.tenant]))


class TenantKeys:
    """The per-tenant keys: each key names exactly one tenant."""

    def __init__(self, keys: dict[str, str], api_key: str | None = None) -> None:
        """``keys``: tenant -> key. Refuses (ValueError) anything that would make a key's
        tenant ambiguous."""
        for tenant, key in keys.items():
            if not 1 <= len(tenant) <= TENANT_MAX_CHARS or tenant != tenant.strip():
                raise ValueError(
                    f"tenant names must be 1 to {TENANT_MAX_CHARS} characters, "
                    f"without surrounding spaces: {tenant[:80]!r}"
                )
            if not key:
                raise ValueError(f"tenant keys must not be empty (tenant {tenant!r})")
            if not (key.isascii() and key.isprintable()) or " " in key:
                # a header carries no more: such a key could never be sent
                raise ValueError(f"tenant keys must be printable ASCII, no spaces ({tenant!r})")
            if key == api_key:
                raise ValueError(f"BOXED_API_KEY is also a tenant's key (tenant {tenant!r})")
        if len(set(keys.values())) < len(keys):
            raise ValueError("two tenants share one key in BOXED_TENANT_KEYS")
        self._by_key = {key.encode(): tenant for tenant, key in keys.items()}
        self.tenants = frozenset(keys)

    @classmethod
    def of(cls, settings: Settings) -> TenantKeys:
        """The keys ``BOXED_TENANT_KEYS`` and ``BOXED_TENANT_KEYS_FILE`` give (none: empty)."""
        keys = dict(settings.tenant_keys or {})
        if settings.tenant_keys_file is not None:
            loaded = json.loads(Path(settings.tenant_keys_file).read_text())
            if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
                raise ValueError("BOXED_TENANT_KEYS_FILE must hold a JSON object tenant -> key")
            if twice := sorted(loaded.keys() & keys.keys()):
                raise ValueError(f"tenants with a key in both BOXED_TENANT_KEYS*: {twice}")
            keys.update(loaded)
        return cls(keys, settings.api_key)

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def tenant_of(self, token: bytes | str) -> str | None:
        """The tenant whose key ``token`` is, or None. Every key is compared in constant
        time, so the time taken says nothing about which key came close."""
        given = token.encode("latin-1", "replace") if isinstance(token, str) else token
        found = None
        for key, tenant in self._by_key.items():
            if hmac.compare_digest(given, key):
                found = tenant
        return found


def identify(
    token: bytes | None, declared: str, api_key: str | None, keys: TenantKeys
) -> Caller | None:
    """The caller a request's Bearer ``token`` and ``declared`` tenant make, None when the
    token is missing or wrong while one is needed (401); 403 for a tenant the key may not
    claim."""
    if keys and token is not None and (bound := keys.tenant_of(token)) is not None:
        if declared and declared != bound:
            raise HTTPException(
                403,
                f"X-Boxed-Tenant {declared!r} is not the tenant of this API key: "
                "send the key's own tenant, or no X-Boxed-Tenant",
            )
        return Caller(digest(token.decode("latin-1")), bound)
    if api_key is not None and token is not None and hmac.compare_digest(token, api_key.encode()):
        if declared in keys.tenants:
            raise HTTPException(403, f"tenant {declared!r} has its own API key: send that key")
        return Caller(digest(api_key), declared)
    if api_key is None and not keys:
        return Caller("", declared)  # an open service: no credential to scope by
    return None
