"""Request ids and cached answers scoped per tenant on the real engine: another tenant (or
another tenant's key) repeating an id or a cached request gets a run of its own, which the
code's own random output proves."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import running_service

pytestmark = pytest.mark.docker

CODE = "import os; print(os.urandom(8).hex())"  # every real run prints something new
KEYS = {"job-a": "key-of-a", "job-b": "key-of-b"}


def test_ids_and_the_cache_never_cross_tenants_on_the_real_engine() -> None:
    env = {"BOXED_POOL_SIZE": "1", "BOXED_TENANT_KEYS": json.dumps(KEYS)}
    with running_service(**env) as service, httpx.Client(base_url=service.url, timeout=60) as http:

        def run(key: str, cache: bool = False, **headers: str) -> dict[str, object]:
            headers["Authorization"] = f"Bearer {key}"
            body = {"code": CODE, "cache": cache}
            answer = http.post("/execute", json=body, headers=headers)
            assert answer.status_code == 200, answer.text
            return answer.json()

        rid = {"X-Request-ID": "one-id"}
        first = run("key-of-a", **rid)
        retried = run("key-of-a", **rid)
        other = run("key-of-b", **rid)
        assert first["status"] == other["status"] == "ok"
        assert retried["cached"] and retried["stdout"] == first["stdout"]
        assert not other["cached"] and other["stdout"] != first["stdout"]

        stored = run("key-of-a", cache=True)
        assert run("key-of-a", cache=True)["stdout"] == stored["stdout"]
        fresh = run("key-of-b", cache=True)
        assert not fresh["cached"] and fresh["stdout"] != stored["stdout"]

        refused = http.post(
            "/execute",
            json={"code": CODE},
            headers={"Authorization": "Bearer key-of-a", "X-Boxed-Tenant": "job-b"},
        )
        assert refused.status_code == 403
