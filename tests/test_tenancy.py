"""Tenants kept apart (no Docker): request ids and cached answers scoped by (credential,
tenant), per-tenant keys that bind a tenant, and per-tenant quotas on sessions and on queued or
running work beside the global ones. The replay scoping on a real engine is in
tests/test_tenancy_docker.py."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from exec_server.admission import Admission, Overloaded, current_tenant
from exec_server.app import create_app
from exec_server.models import ExecuteRequest, ExecuteResponse
from exec_server.settings import Settings
from tests.fakes import FakeExecutor, serving
from tests.test_result_cache import response
from tests.test_sessions import service

RID = {"X-Request-ID": "shared-id-1"}


def a(tenant: str, **headers: str) -> dict[str, str]:
    """Headers of a request as ``tenant``."""
    return {"X-Boxed-Tenant": tenant, **headers}


def make(**settings: Any) -> tuple[TestClient, FakeExecutor]:
    fake = FakeExecutor()
    app = create_app(Settings(instance="tenancy-test", **settings), executor=fake)
    return TestClient(app, raise_server_exceptions=False), fake


# -- request ids and the cache, scoped -----------------------------------------------------


def test_another_tenant_repeating_a_request_id_gets_its_own_run() -> None:
    client, fake = make()
    with client:
        first = client.post("/execute", json={"code": "print(1)"}, headers=a("A", **RID))
        same_body = client.post("/execute", json={"code": "print(1)"}, headers=a("B", **RID))
        other_body = client.post("/execute", json={"code": "print(2)"}, headers=a("C", **RID))
        assert first.status_code == same_body.status_code == other_body.status_code == 200
        assert not same_body.json()["cached"] and not other_body.json()["cached"]
        assert other_body.json()["stdout"] == "print(2)"  # its own run, not A's answer
        assert len(fake.ran) == 3
        # within one tenant the id still replays, and another body under it is still 422
        again = client.post("/execute", json={"code": "print(1)"}, headers=a("B", **RID))
        assert again.json()["cached"] and len(fake.ran) == 3
        reused = client.post("/execute", json={"code": "print(9)"}, headers=a("B", **RID))
        assert reused.status_code == 422


def test_the_judge_route_scopes_its_request_ids_too() -> None:
    judged = {"code": "print(1)", "tests": [{"input": "", "expected_output": "1"}]}
    with service() as (client, fake, _):
        first = client.post("/judge", json=judged, headers=a("A", **RID))
        other = client.post("/judge", json={**judged, "code": "x"}, headers=a("B", **RID))
        assert first.status_code == other.status_code == 200, other.text
        assert not other.json()["cached"] and len(fake.jobs) == 2


def test_a_cached_answer_is_served_only_to_its_own_tenant() -> None:
    client, fake = make()
    body = {"code": "print(3)", "cache": True}
    with client:
        assert not client.post("/execute", json=body, headers=a("A")).json()["cached"]
        assert client.post("/execute", json=body, headers=a("A")).json()["cached"]
        assert not client.post("/execute", json=body, headers=a("B")).json()["cached"]
        assert not client.post("/execute", json=body).json()["cached"]  # the tenant ""
        sf = client.post("/run_code", json={"code": "print(3)", "cache": True}, headers=a("B"))
        assert sf.json()["cached"]  # B's own answer, shared by /execute and /run_code
        assert len(fake.ran) == 3


def test_another_key_of_the_same_tenant_name_gets_its_own_answers() -> None:
    """The scope is the credential too: a shared key declaring a tenant never sees what that
    tenant stored with its own key (nor the other way round)."""
    keys = {"A": "key-of-a", "B": "key-of-b"}
    client, fake = make(api_key="shared", tenant_keys=keys)
    body = {"code": "print(4)", "cache": True}
    with client:
        own = bearer("key-of-a")
        assert not client.post("/execute", json=body, headers=own | RID).json()["cached"]
        assert client.post("/execute", json=body, headers=own | RID).json()["cached"]
        for headers in (bearer("shared", **a("X")), bearer("key-of-b")):
            answer = client.post("/execute", json=body, headers=headers | RID)
            assert answer.status_code == 200 and not answer.json()["cached"], answer.text
        assert len(fake.ran) == 3


def test_the_store_keys_every_answer_by_its_scope() -> None:
    from exec_server.result_cache import ResultCache

    async def scenario() -> list[str]:
        store = ResultCache(100, 1 << 20, 60)
        hows = []

        async def work() -> ExecuteResponse:
            return response("ran")

        for scope in ("s1", "s1", "s2"):
            _answer, how = await store.answer(
                "/x",
                work,
                fingerprint="f",
                request_id="r",
                cache=True,
                cacheable=lambda _: True,
                scope=scope,
            )
            hows.append(how)
        return hows

    assert asyncio.run(scenario()) == ["ran", "replayed", "ran"]


# -- per-tenant keys -----------------------------------------------------------------------


def bearer(key: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **headers}


def test_a_tenant_key_binds_its_tenant_and_a_disagreeing_header_is_403() -> None:
    executor = FakeExecutor()
    seen: list[str] = []
    real = executor.execute

    async def execute(req: ExecuteRequest, request_id: str) -> ExecuteResponse:
        seen.append(current_tenant.get())
        return await real(req, request_id)

    executor.execute = execute  # type: ignore[method-assign]
    keys = {"job-a": "key-of-a", "job-b": "key-of-b"}
    app = create_app(Settings(instance="tenancy-test", tenant_keys=keys), executor=executor)
    with TestClient(app, raise_server_exceptions=False) as client:
        code = {"code": "print(1)"}
        assert client.post("/execute", json=code, headers=bearer("key-of-a")).status_code == 200
        agreeing = bearer("key-of-b", **a("job-b"))
        assert client.post("/execute", json=code, headers=agreeing).status_code == 200
        assert seen == ["job-a", "job-b"]
        wrong = client.post("/execute", json=code, headers=bearer("key-of-a", **a("job-b")))
        assert wrong.status_code == 403
        body = wrong.json()
        assert body["detail"] == (
            "X-Boxed-Tenant 'job-b' is not the tenant of this API key: "
            "send the key's own tenant, or no X-Boxed-Tenant"
        )
        assert body["outcome"] is None and body["failure"] is None  # the caller's mistake
        for headers in ({}, bearer("nobody's key"), a("job-a")):  # a key is now required
            refused = client.post("/execute", json=code, headers=headers)
            assert refused.status_code == 401 and "WWW-Authenticate" in refused.headers
        assert seen == ["job-a", "job-b"]  # neither refused request ran
        assert client.get("/healthz").status_code == 200  # the probes stay open


def test_the_shared_key_cannot_declare_a_tenant_that_has_its_own_key() -> None:
    client, fake = make(api_key="shared", tenant_keys={"job-a": "key-of-a"})
    with client:
        code = {"code": "print(1)"}
        taken = client.post("/execute", json=code, headers=bearer("shared", **a("job-a")))
        assert taken.status_code == 403
        assert taken.json()["detail"] == "tenant 'job-a' has its own API key: send that key"
        free = client.post("/execute", json=code, headers=bearer("shared", **a("job-z")))
        assert free.status_code == 200 and len(fake.ran) == 1


def test_tenant_keys_come_from_the_environment_or_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from exec_server.tenancy import TenantKeys

    monkeypatch.setenv("BOXED_TENANT_KEYS", json.dumps({"job-a": "k1"}))
    assert TenantKeys.of(Settings()).tenant_of("k1") == "job-a"
    monkeypatch.delenv("BOXED_TENANT_KEYS")
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"job-b": "k2", "job-c": "k3"}))
    monkeypatch.setenv("BOXED_TENANT_KEYS_FILE", str(path))
    keys = TenantKeys.of(Settings())
    assert (keys.tenant_of("k2"), keys.tenant_of("k3"), keys.tenant_of("k1")) == (
        "job-b",
        "job-c",
        None,
    )
    assert TenantKeys.of(Settings(tenant_keys_file=None)).tenant_of("k2") is None
    with pytest.raises(ValueError, match="a key in both"):
        TenantKeys.of(Settings(tenant_keys={"job-b": "k4"}))
    path.write_text(json.dumps(["job-b", "k2"]))
    with pytest.raises(ValueError, match="must hold a JSON object"):
        TenantKeys.of(Settings())


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({"a": "same", "b": "same"}, "two tenants share one key"),
        ({"": "k"}, "tenant names must be 1 to 64 characters"),
        ({"a" * 65: "k"}, "tenant names must be 1 to 64 characters"),
        ({"a": ""}, "keys must not be empty"),
        ({"a": "two words"}, "printable ASCII"),
        ({"a": "clé"}, "printable ASCII"),
        ({"a": "shared"}, "BOXED_API_KEY is also a tenant's key"),
    ],
)
def test_ambiguous_tenant_keys_are_refused_at_start(keys: dict[str, str], problem: str) -> None:
    from exec_server.tenancy import TenantKeys

    with pytest.raises(ValueError, match=problem):
        TenantKeys.of(Settings(api_key="shared", tenant_keys=keys))


# -- per-tenant quotas ---------------------------------------------------------------------


def test_quota_settings_default_to_three_quarters_and_stay_within_the_global_limits() -> None:
    s = Settings(max_sessions=32, max_concurrency=4, max_queue=256, max_batch_items=64)
    assert (s.sessions_per_tenant, s.work_per_tenant) == (24, 195)
    # a whole batch of one tenant fits, as long as the service can hold it at all
    assert Settings(max_concurrency=4, max_queue=256, max_batch_items=256).work_per_tenant == 256
    assert Settings(max_concurrency=2, max_queue=6, max_batch_items=256).work_per_tenant == 8
    assert Settings(max_sessions=2).sessions_per_tenant == 2  # rounded up: never below 1
    explicit = Settings(max_sessions=8, max_sessions_per_tenant=8, max_work_per_tenant=3)
    assert (explicit.sessions_per_tenant, explicit.work_per_tenant) == (8, 3)
    with pytest.raises(ValidationError, match="BOXED_MAX_SESSIONS_PER_TENANT exceeds"):
        Settings(max_sessions=8, max_sessions_per_tenant=9)
    with pytest.raises(ValidationError, match="BOXED_MAX_WORK_PER_TENANT exceeds"):
        Settings(max_concurrency=2, max_queue=2, max_work_per_tenant=5)


def test_a_tenant_at_its_session_quota_leaves_room_for_another() -> None:
    with service(max_sessions=4, max_sessions_per_tenant=2, retry_after=2) as (client, _, _e):
        ids = [client.post("/sessions", headers=a("A")).json()["session_id"] for _ in range(2)]
        refused = client.post("/sessions", headers=a("A"))
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "2"
        body = refused.json()
        assert body["detail"] == "overloaded: this tenant holds 2 sessions: its quota"
        assert body["outcome"] == "infrastructure"
        assert body["failure"] == {"code": "overloaded", "retryable": True}
        assert client.post("/sessions", headers=a("B")).status_code == 201
        assert client.post("/sessions").status_code == 201  # the tenant "" is one too
        assert client.delete(f"/sessions/{ids[0]}", headers=a("A")).status_code == 204
        assert client.post("/sessions", headers=a("A")).status_code == 201


def test_a_tenant_at_its_work_quota_leaves_room_for_another() -> None:
    async def scenario() -> None:
        admission = Admission(max_running=2, max_queue=10, queue_timeout=5, max_per_tenant=3)
        release = asyncio.Event()

        async def hold(tenant: str) -> None:
            async with admission.slot(tenant):
                await release.wait()

        held = [asyncio.ensure_future(hold("A")) for _ in range(3)]  # 2 running, 1 waiting
        await asyncio.sleep(0)
        with pytest.raises(Overloaded, match="this tenant has 3 snippets running or waiting"):
            async with admission.slot("A"):
                pass
        other = asyncio.ensure_future(hold("B"))  # B waits in the queue, not refused
        await asyncio.sleep(0)
        assert admission.waiting_by_tenant() == {"A": 1, "B": 1}
        release.set()
        await asyncio.gather(*held, other)
        assert admission.running == admission.waiting == 0
        async with admission.slot("A"):  # A's quota is free again
            assert admission.running == 1

    asyncio.run(scenario())


class Holding(FakeExecutor):
    """A fake whose ``hold`` snippets keep their slot until ``release`` is set."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.release = threading.Event()

    async def execute(self, req: ExecuteRequest, request_id: str) -> ExecuteResponse:
        if req.code == "hold":
            async with self.admission.slot():
                while not self.release.is_set():
                    await asyncio.sleep(0.01)
        return await super().execute(req, request_id)


def test_the_work_quota_is_429_overloaded_over_http_and_another_tenant_runs() -> None:
    executor = Holding(max_running=4, max_queue=4)
    executor.admission = Admission(4, 4, queue_timeout=1.0, max_per_tenant=2)
    with serving(executor, retry_after=3) as url, ThreadPoolExecutor(2) as pool:
        holders = [
            pool.submit(httpx.post, f"{url}/execute", json={"code": "hold"}, headers=a("A"))
            for _ in range(2)
        ]
        deadline = time.monotonic() + 10
        while executor.admission.running < 2:
            assert time.monotonic() < deadline, "the holders never got their slots"
            time.sleep(0.01)
        refused = httpx.post(f"{url}/execute", json={"code": "1"}, headers=a("A"))
        ran = httpx.post(f"{url}/execute", json={"code": "1"}, headers=a("B"))
        executor.release.set()
        assert all(h.result().status_code == 200 for h in holders)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "3"
    assert refused.json()["outcome"] == "infrastructure"
    assert refused.json()["failure"] == {"code": "overloaded", "retryable": True}
    assert ran.status_code == 200


def test_the_executor_gives_admission_the_work_quota() -> None:
    from exec_server.app import Executor
    from exec_server.backends.fake import FakeBackend, observed

    s = Settings(
        instance="fake", isolation="container", max_concurrency=2, max_queue=6, max_batch_items=4
    )
    executor = Executor(s, backends={"container": FakeBackend(lambda job: observed())})
    assert executor.admission.max_per_tenant == s.work_per_tenant == 6


def test_a_session_exists_only_for_the_caller_that_made_it() -> None:
    with service() as (client, fake, executor):
        sid = client.post("/sessions", headers=a("A")).json()["session_id"]
        unknown = f"no session {sid!r} (never made, or deleted)"
        for answer in (
            client.get(f"/sessions/{sid}", headers=a("B")),
            client.post(f"/sessions/{sid}/execute", json={"code": "x"}, headers=a("B")),
            client.post("/execute", json={"code": "x"}, headers=a("B", **{"X-Session-ID": sid})),
            client.delete(f"/sessions/{sid}", headers=a("B")),
            client.get(f"/sessions/{sid}"),  # the tenant "" is another caller too
        ):
            assert answer.status_code == 404 and answer.json()["detail"] == unknown
        assert fake.jobs == [] and executor.sessions.open_count == 1
        ran = client.post(f"/sessions/{sid}/execute", json={"code": "x = 1"}, headers=a("A"))
        assert ran.status_code == 200 and ran.json()["stdout"] == "x = 1"
        assert client.delete(f"/sessions/{sid}", headers=a("A")).status_code == 204
