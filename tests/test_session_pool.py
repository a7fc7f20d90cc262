"""The warm pool of session sandboxes without Docker: the real app, executor and session
manager over the in-memory fake backend. Refill, one session per sandbox, cold creates for
other limits, quotas that ignore warm sandboxes, dead ones skipped, and nothing left at stop.
With real sandboxes: tests/test_session_pool_docker.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from pydantic import ValidationError

from exec_server.app import Executor, create_app
from exec_server.backends.fake import FakeBackend, FakeSession, observed
from exec_server.images import allow_list
from exec_server.settings import SESSION_POOL_MAX, Settings


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@contextmanager
def service(**settings: Any) -> Iterator[tuple[TestClient, FakeBackend, Executor]]:
    """The real app over the fake backend, with the warm pool at its default size."""
    s = Settings(instance="fake", isolation="container", pool_size=1, **settings)
    fake = FakeBackend(lambda job: observed(stdout=job.code.encode()))
    executor = Executor(s, backends={"container": fake})
    with TestClient(create_app(s, executor), raise_server_exceptions=False) as client:
        yield client, fake, executor


def sessions_of(fake: FakeBackend) -> dict[str, FakeSession]:
    return {i: s for i, s in fake.sandboxes.items() if isinstance(s, FakeSession)}


def warm_ids(executor: Executor) -> set[str]:
    return executor.sessions.pools["default"].sandbox_ids()


def wait_until(condition: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def sandbox_of(fake: FakeBackend, session_id: str) -> FakeSession:
    (sandbox,) = [s for s in sessions_of(fake).values() if s.session_id == session_id]
    return sandbox


def test_the_pool_keeps_two_warm_hands_one_out_and_refills() -> None:
    with service() as (client, fake, executor):
        wait_until(lambda: len(warm_ids(executor)) == 2)
        ready = client.get("/readyz").json()
        assert (ready["session_pool_ready"], ready["session_pool_size"]) == ({"default": 2},) * 2
        assert metric("boxed_session_pool_ready", image="default") == 2
        before = warm_ids(executor)
        warm_before = metric("boxed_session_sandboxes_total", start="warm")

        sid = client.post("/sessions").json()["session_id"]
        sandbox = sandbox_of(fake, sid)
        assert sandbox.id in before and sandbox.id not in warm_ids(executor)
        assert sandbox.calls == [] and sandbox.spec.session_id == sid  # its label is its id
        assert metric("boxed_session_sandboxes_total", start="warm") == warm_before + 1
        wait_until(lambda: len(warm_ids(executor)) == 2)  # refilled in the background
        assert len(sessions_of(fake)) == 3
        assert client.post(f"/sessions/{sid}/execute", json={"code": "x = 1"}).json()["stdout"]


def test_a_warm_sandbox_serves_one_session_only_and_goes_with_it() -> None:
    with service() as (client, fake, executor):
        served: list[str] = []
        for turn in range(6):
            wait_until(lambda: len(warm_ids(executor)) == 2)
            sid = client.post("/sessions").json()["session_id"]
            sandbox = sandbox_of(fake, sid)
            assert sandbox.calls == [], "handed out after it ran a call"
            assert sandbox.id not in served
            served.append(sandbox.id)
            client.post(f"/sessions/{sid}/execute", json={"code": f"turn = {turn}"})
            if turn % 2:
                assert client.delete(f"/sessions/{sid}").status_code == 204
                assert sandbox.id in fake.removed and sandbox.id not in fake.sandboxes
        assert not set(served) & warm_ids(executor)
        # a lost session's sandbox is removed too, never pooled again
        fake.ends_session = lambda job: job.code == "exit"
        sid = client.post("/sessions").json()["session_id"]
        sandbox = sandbox_of(fake, sid)
        ended = client.post(f"/sessions/{sid}/execute", json={"code": "exit"})
        assert ended.json()["session_lost"]
        wait_until(lambda: sandbox.id in fake.removed)
        assert sandbox.id not in warm_ids(executor)


@pytest.mark.parametrize(
    ("body", "warm"),
    [
        ({"timeout": 2, "cpu_timeout": 1, "idle_timeout": 30}, True),  # per call, host side
        ({"memory_mb": 128}, False),  # the interpreter's limit and its container's
        ({"max_lifetime": 60}, False),  # the CPU budget it is started with
    ],
)
def test_a_create_gets_a_warm_sandbox_only_with_the_limits_it_was_made_with(
    body: dict[str, Any], warm: bool
) -> None:
    with service() as (client, fake, executor):
        wait_until(lambda: len(warm_ids(executor)) == 2)
        before = warm_ids(executor)
        made = client.post("/sessions", json=body)
        assert made.status_code == 201
        sandbox = sandbox_of(fake, made.json()["session_id"])
        assert (sandbox.id in before) is warm
        memory = body.get("memory_mb", executor.settings.memory_mb_default)
        lifetime = body.get("max_lifetime", executor.settings.session_lifetime_default)
        assert sandbox.spec.memory_mb == memory
        assert sandbox.spec.cpu_budget == lifetime * executor.settings.cpus
        if not warm:
            assert warm_ids(executor) == before  # the warm ones wait for a create they fit


def test_warm_sandboxes_count_against_no_quota() -> None:
    tenant = {"X-Boxed-Tenant": "a"}
    with service(max_sessions=2, max_sessions_per_tenant=1) as (client, fake, executor):
        wait_until(lambda: len(warm_ids(executor)) == 2)
        assert client.post("/sessions", headers=tenant).status_code == 201
        wait_until(lambda: len(warm_ids(executor)) == 2)
        refused = client.post("/sessions", headers=tenant)
        assert refused.status_code == 429 and "its quota" in refused.json()["detail"]
        other = client.post("/sessions", headers={"X-Boxed-Tenant": "b"})
        assert other.status_code == 201
        refused = client.post("/sessions", headers={"X-Boxed-Tenant": "c"})
        assert refused.status_code == 429 and "2 sessions open" in refused.json()["detail"]
        assert executor.sessions.open_count == 2 and len(warm_ids(executor)) == 2


def test_the_pool_is_at_most_max_sessions_and_its_size_has_a_maximum() -> None:
    assert Settings().session_pool_size == 2
    with pytest.raises(ValidationError):
        Settings(session_pool_size=SESSION_POOL_MAX + 1)
    with pytest.raises(ValidationError):
        Settings(session_pool_size=-1)
    with service(max_sessions=1) as (client, fake, executor):
        wait_until(lambda: len(warm_ids(executor)) == 1)
        time.sleep(0.05)
        assert len(sessions_of(fake)) == 1
    with service(session_pool_size=0) as (client, fake, executor):
        assert executor.sessions.pools == {}
        assert client.post("/sessions").status_code == 201  # a cold one
        assert client.get("/readyz").json()["session_pool_ready"] == {}


def test_a_dead_warm_sandbox_is_skipped_and_replaced() -> None:
    with service() as (client, fake, executor):
        wait_until(lambda: len(warm_ids(executor)) == 2)
        pool = executor.sessions.pools["default"]
        oldest = next(iter(pool._ready)).sandbox  # the next one handed out
        oldest.alive = False  # as if its container were removed from outside
        sid = client.post("/sessions").json()["session_id"]
        sandbox = sandbox_of(fake, sid)
        assert sandbox is not oldest and sandbox.alive
        wait_until(lambda: oldest.id in fake.removed and len(warm_ids(executor)) == 2)


def test_no_warm_up_while_the_backend_cannot_make_sandboxes() -> None:
    with service(backend_check_interval=0.05) as (client, fake, executor):
        wait_until(lambda: len(warm_ids(executor)) == 2)
        fake.problem = "image missing"
        wait_until(lambda: not executor.engine.health.ok)
        assert client.post("/sessions").status_code == 503  # the health check says no
        created = len(fake.created)
        time.sleep(0.3)
        assert len(fake.created) == created
        fake.problem = None
        wait_until(lambda: len(warm_ids(executor)) == 2)


def test_the_reaper_spares_warm_sandboxes_and_the_stop_removes_them() -> None:
    with service() as (client, fake, executor):
        wait_until(lambda: len(warm_ids(executor)) == 2)
        warm = warm_ids(executor)
        sid = client.post("/sessions").json()["session_id"]
        wait_until(lambda: len(warm_ids(executor)) == 2)

        async def reap_twice() -> tuple[int, int]:
            return await executor.engine.reap(), await executor.engine.reap()

        assert client.portal.call(reap_twice) == (0, 0)  # type: ignore[union-attr]
        assert warm <= set(fake.sandboxes) | {sandbox_of(fake, sid).id}
    assert sessions_of(fake) == {}
    assert warm <= set(fake.removed)
    assert metric("boxed_session_pool_ready", image="default") == 0


# -- operator images: a warm pool each --------------------------------------------------------


@contextmanager
def imaged_service(
    images: dict[str, Any], **settings: Any
) -> Iterator[tuple[TestClient, Executor]]:
    """The real app over fake backends (one per image), with operator images ``images``."""
    s = Settings(
        instance="fake",
        process_backend="fake",
        container_backend="fake",
        pool_size=1,
        images=images,
        image_scan_dir=None,
        **settings,
    )
    executor = Executor(s)
    with TestClient(create_app(s, executor), raise_server_exceptions=False) as client:
        yield client, executor


def sessions_on(executor: Executor, image: str) -> dict[str, FakeSession]:
    backend = executor.engine.backend_for(executor.engine.image(image))
    assert isinstance(backend, FakeBackend)
    return sessions_of(backend)


def test_each_operator_image_keeps_its_own_warm_sessions_with_its_limits() -> None:
    images = {
        "tools": {"image": "tools:1", "memory_mb_max": 256, "session_pool_size": 1},
        "plain": "plain:1",  # no session_pool_size: no pool
    }
    with imaged_service(images) as (client, executor):
        pools = executor.sessions.pools
        wait_until(lambda: [len(p.sandbox_ids()) for p in pools.values()] == [2, 1])
        ready = client.get("/readyz").json()
        assert ready["session_pool_size"] == {"default": 2, "tools": 1}
        assert ready["session_pool_ready"] == {"default": 2, "tools": 1}
        rows = {
            row["name"]: row["session_pool_size"] for row in client.get("/images").json()["images"]
        }
        assert rows == {"default": 2, "tools": 1, "plain": 0}

        warm_tools = pools["tools"].sandbox_ids()
        made = client.post("/sessions", json={"image": "tools"})
        assert made.status_code == 201 and made.json()["memory_mb"] == 256  # the image's limit
        (sandbox,) = [
            s
            for s in sessions_on(executor, "tools").values()
            if s.session_id == made.json()["session_id"]
        ]
        assert sandbox.id in warm_tools and sandbox.calls == []
        assert sandbox.spec.memory_mb == 256 and sandbox.spec.session_id == sandbox.session_id
        assert len(pools["default"].sandbox_ids()) == 2  # the default image's pool untouched
        wait_until(lambda: len(pools["tools"].sandbox_ids()) == 1)  # refilled
        assert len(sessions_on(executor, "tools")) == 2

        before = set(sessions_on(executor, "plain"))
        cold = client.post("/sessions", json={"image": "plain"})
        assert cold.status_code == 201
        assert before == set() and len(sessions_on(executor, "plain")) == 1  # started for it
    for image in ("default", "tools", "plain"):
        assert sessions_on(executor, image) == {}  # the stop removed warm and open alike


def test_max_sessions_caps_the_warm_sandboxes_of_every_image_together() -> None:
    images = {
        "tools": {"image": "tools:1", "session_pool_size": 2},
        "more": {"image": "more:1", "session_pool_size": 2},
    }
    with imaged_service(images, max_sessions=3) as (client, executor):
        sizes = {name: pool.size for name, pool in executor.sessions.pools.items()}
        assert sizes == {"default": 2, "tools": 1}  # the default image first, in list order
        wait_until(lambda: sum(len(p.sandbox_ids()) for p in executor.sessions.pools.values()) == 3)
    with pytest.raises(ValueError, match="less than or equal to 8.*session_pool_size"):
        allow_list(Settings(images={"big": {"image": "big:1", "session_pool_size": 9}}))
