"""The result cache and idempotent retries: the store's bounds (LRU, bytes, TTL), what it never
keeps, joining a run in flight, and both through the HTTP routes (a fake executor)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi.testclient import TestClient

from exec_server.app import create_app
from exec_server.models import ExecuteRequest, ExecuteResponse, Truncated
from exec_server.request_errors import RequestError
from exec_server.result_cache import ResultCache, fingerprint
from exec_server.settings import Settings
from tests.fakes import FakeExecutor


def response(stdout: str = "x", status: str = "ok") -> ExecuteResponse:
    return ExecuteResponse(
        status=status,
        exit_code=0,
        stdout=stdout,
        stderr="",
        output=stdout,
        error="",
        truncated=Truncated(),
        duration_ms=1.0,
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lru_by_entries_and_bytes_and_ttl() -> None:
    clock = Clock()
    store = ResultCache(max_entries=2, max_bytes=10_000, ttl_seconds=10, clock=clock)
    for key in "abc":
        store.put(key, response(key), "f")
    assert store.get("a") is None and store.get("b") is not None and len(store) == 2
    store.put("d", response("d"), "f")  # "b" was used last: "c" goes
    assert store.get("c") is None and store.get("b") is not None
    clock.now = 11
    assert store.get("b") is None and len(store) == 1  # expired, dropped when looked at
    small = ResultCache(max_entries=100, max_bytes=600, ttl_seconds=10)
    small.put("big", response("y" * 1000), "f")  # larger than the whole budget: not kept
    assert small.get("big") is None and small.bytes == 0
    for i in range(5):
        small.put(str(i), response(str(i)), "f")
    assert 0 < small.bytes <= 600 and small.get("0") is None and small.get("4") is not None


def test_fingerprint_covers_the_body_and_the_image_but_not_the_cache_flag() -> None:
    one = ExecuteRequest(code="print(1)", cache=True)
    assert fingerprint("execute", one, "img") == fingerprint(
        "execute", ExecuteRequest(code="print(1)"), "img"
    )
    assert fingerprint("execute", one, "img") != fingerprint("execute", one, "other")
    assert fingerprint("execute", one, "img") != fingerprint(
        "execute", ExecuteRequest(code="print(1)", stdin="x"), "img"
    )
    assert fingerprint("execute", one, "img") != fingerprint("judge", one, "img")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_same_request_id_replays_joins_or_refuses() -> None:
    async def scenario() -> None:
        store = ResultCache(100, 1 << 20, 60)
        calls = []
        gate = asyncio.Event()

        async def work() -> ExecuteResponse:
            calls.append(1)
            await gate.wait()
            return response("ran", status="timeout")

        def ask(fp: str = "f") -> Any:
            return store.answer(
                "/x",
                work,
                fingerprint=fp,
                request_id="r1",
                cache=False,
                cacheable=lambda a: True,
                scope="s",
            )

        first = asyncio.ensure_future(ask())
        await asyncio.sleep(0)
        second = asyncio.ensure_future(ask())  # the retry while the first still runs
        await asyncio.sleep(0)
        with pytest.raises(RequestError) as refused:
            await ask("another body")
        assert refused.value.status_code == 422
        gate.set()
        (a, how_a), (b, how_b) = await first, await second
        assert (how_a, how_b) == ("ran", "joined") and a.stdout == b.stdout == "ran"
        assert not a.cached and b.cached  # the retry did not run the code
        again, how = await ask()  # later: the stored answer, timeout and all
        assert how == "replayed" and again.cached and again.status == "timeout"
        assert len(calls) == 1

    run(scenario())


def test_cache_never_keeps_what_it_must_not_and_errors_run_again() -> None:
    async def scenario() -> None:
        store = ResultCache(100, 1 << 20, 60)
        answers = iter([RuntimeError("infra"), response("t", "timeout"), response("ok")])
        calls = []

        async def work() -> ExecuteResponse:
            calls.append(1)
            item = next(answers)
            if isinstance(item, Exception):
                raise item
            return item

        def ask() -> Any:
            return store.answer(
                "/x",
                work,
                fingerprint="f",
                request_id=None,
                cache=True,
                cacheable=lambda a: a.status != "timeout",
                scope="s",
            )

        with pytest.raises(RuntimeError):
            await ask()
        assert (await ask())[1] == "ran"  # after an error: runs again
        assert (await ask())[1] == "ran"  # the timeout was not kept
        hit, how = await ask()
        assert how == "hit" and hit.cached and hit.stdout == "ok" and len(calls) == 3

    run(scenario())


def make(**settings: Any) -> tuple[TestClient, FakeExecutor]:
    fake = FakeExecutor()
    app = create_app(Settings(instance="cache-test", **settings), executor=fake)
    return TestClient(app, raise_server_exceptions=False), fake


def test_routes_replay_a_retried_request_id_and_serve_cache_hits() -> None:
    client, fake = make()
    with client:
        headers = {"X-Request-ID": "retry-1"}
        first = client.post("/execute", json={"code": "print(1)"}, headers=headers).json()
        again = client.post("/execute", json={"code": "print(1)"}, headers=headers).json()
        assert len(fake.ran) == 1 and not first["cached"] and again["cached"]
        assert again["request_id"] == first["request_id"] == "retry-1"
        other = client.post("/execute", json={"code": "print(2)"}, headers=headers)
        assert other.status_code == 422 and "X-Request-ID" in other.json()["detail"]
        # the cache: opt-in per request, shared by /execute and /run_code
        body = {"code": "print(3)", "cache": True}
        assert not client.post("/execute", json=body).json()["cached"]
        hit = client.post("/execute", json=body).json()
        assert hit["cached"] and hit["stdout"] == "print(3)" and len(fake.ran) == 2
        sf = client.post("/run_code", json={"code": "print(3)", "cache": True}).json()
        assert sf["cached"] and sf["run_result"]["stdout"] == "print(3)" and len(fake.ran) == 2
        client.post("/execute", json={"code": "print(3)"})  # without "cache": runs
        assert len(fake.ran) == 3


def test_the_server_switch_turns_the_cache_off() -> None:
    client, fake = make(result_cache=False)
    with client:
        for _ in range(2):
            assert not client.post("/execute", json={"code": "1", "cache": True}).json()["cached"]
        assert len(fake.ran) == 2
