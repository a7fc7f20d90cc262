"""Client tests against live HTTP servers on 127.0.0.1.

A small FastAPI app imitates the boxed routes; its ``/execute`` behaviour is chosen by the code:

* anything else: status ok, stdout = the code + newline, request_id = the server's name;
* ``#429:N:key`` / ``#503:N:key``: that status (with ``Retry-After``) for the first N calls of
  this exact code (counted over all servers), then ok; ``#429:N:key:R`` sends
  ``Retry-After: R`` (default 1);
* ``#502always:key``: 502 without ``Retry-After`` every time;
* ``#422``: a caller error; ``#422fields``: a validation error in the server's error shape
  (``detail`` and ``errors``); ``""``: a validation error as servers before that shape sent it;
  ``#error``: 200 with status error (the code's own failure);
* ``#sleep:S``: sleeps S seconds first (in-flight requests are counted for the cap test);
* ``#fail:S:N:key:CODE[:R]``: for the first N calls, status S (200 too) with ``outcome`` and
  ``failure`` ``{"code": CODE, ...}`` as the service sends them, and ``Retry-After: R``.

Sessions: ``POST /sessions`` opens one; its calls answer like ``/execute``, except ``#lost``
and ``#expired`` (410 with that infrastructure failure) and ``#ended`` (410, its code ended it).

Tests marked ``docker`` run against the real service from the ``boxed_service`` fixture.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from exec_server.client import (
    AsyncClient,
    BoxedBatchError,
    BoxedError,
    BoxedHTTPError,
    BoxedUnavailable,
    CalculateResult,
    Client,
    ExecuteResult,
    ScoreBatch,
    ScoreResult,
    SessionLost,
    SessionUnreachable,
    reward_or_none,
)
from exec_server.models import ExecuteRequest
from scorer.outcome import Failure, FailureCode, outcome_fields

# ------------------------------------------------------------------------------- the test server


class FakeBoxed:
    """State and routes of one imitation server."""

    # Calls of each ``#429``/``#503`` code over all servers, so "the first N calls" means the
    # first N the client made, wherever they went.
    seen: Counter[str] = Counter()

    def __init__(self, name: str) -> None:
        self.name = name
        self.reset()
        self.app = self._make_app()

    def reset(self) -> None:
        self.calls: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.ready_at = 0.0
        self.api_key: str | None = None
        self.auth_headers: list[str | None] = []
        self.request_ids: list[str | None] = []
        self.sessions_made = 0

    def _ok(self, code: str) -> dict[str, Any]:
        return {
            "status": "ok",
            "exit_code": 0,
            "stdout": code + "\n",
            "stderr": "",
            "output": code + "\n",
            "error": "",
            "truncated": {"stdout": False, "stderr": False},
            "duration_ms": 1.0,
            "request_id": self.name,
        }

    def _failing(self, code: str) -> JSONResponse | None:
        """The answer of a ``#fail:S:N:key:CODE[:R]`` call while it still fails."""
        if not code.startswith("#fail:"):
            return None
        status, times, _, failure_code, *retry_after = code.split(":")[1:]
        FakeBoxed.seen[code] += 1
        if FakeBoxed.seen[code] > int(times):
            return None
        fields = outcome_fields(Failure.of(failure_code))
        headers = {"Retry-After": retry_after[0]} if retry_after else {}
        if status == "200":
            body = {**self._ok(code), "status": "error", **fields}
        else:
            body = {"detail": failure_code, "errors": [], **fields}
        return JSONResponse(body, status_code=int(status), headers=headers)

    def _session_info(self, sid: str) -> dict[str, Any]:
        return {
            "session_id": sid,
            "state": "idle",
            "memory_mb": 256,
            "timeout": 5.0,
            "cpu_timeout": None,
            "idle_timeout": 60.0,
            "max_lifetime": 600.0,
            "calls": 0,
            "created_at": time.time(),
            "expires_in": 60.0,
            "lifetime_left": 600.0,
        }

    def _make_app(self) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def auth(request: Request, call_next):  # type: ignore[no-untyped-def]
            self.auth_headers.append(request.headers.get("authorization"))
            self.request_ids.append(request.headers.get("x-request-id"))
            if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
                return JSONResponse({"detail": "bad or missing API key"}, status_code=401)
            return await call_next(request)

        @app.post("/execute")
        async def execute(body: dict[str, Any]) -> Any:
            code = str(body.get("code", ""))
            self.calls[code] += 1
            if not code:
                return JSONResponse(
                    {"detail": [{"loc": ["body", "code"], "msg": "too short"}]}, status_code=422
                )
            if code.startswith(("#429:", "#503:")):
                parts = code.split(":")
                status, times = int(parts[0][1:]), int(parts[1])
                retry_after = parts[3] if len(parts) > 3 else "1"
                FakeBoxed.seen[code] += 1
                if FakeBoxed.seen[code] <= times:
                    return JSONResponse(
                        {"detail": "busy"}, status_code=status, headers={"Retry-After": retry_after}
                    )
            if (failed := self._failing(code)) is not None:
                return failed
            if code.startswith("#502always"):
                return JSONResponse({"detail": "bad gateway"}, status_code=502)
            if code == "#422":
                return JSONResponse({"detail": "timeout above the maximum 30"}, status_code=422)
            if code == "#422fields":
                errors = [
                    {"loc": ["body", "timout"], "msg": "unknown field", "type": "extra_forbidden"},
                    {"loc": ["body", "memory_mb"], "msg": "must be > 0", "type": "greater_than"},
                ]
                detail = "timout: unknown field; memory_mb: must be > 0"
                return JSONResponse({"detail": detail, "errors": errors}, status_code=422)
            if code == "#error":
                result = self._ok(code)
                result.update(
                    status="error", exit_code=1, stdout="", output="", stderr="Boom", error="Boom"
                )
                return result
            if code.startswith("#sleep:"):
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    await asyncio.sleep(float(code.split(":")[1]))
                finally:
                    self.in_flight -= 1
            result = self._ok(code)
            stdin = body.get("input", body.get("stdin", ""))
            result["stdout"] = result["output"] = code + "\n" + str(stdin)
            return result

        @app.post("/sessions", status_code=201)
        async def open_session() -> Any:
            self.sessions_made += 1
            return self._session_info(f"{self.name}-{self.sessions_made}")

        @app.get("/sessions/{sid}")
        async def session_info(sid: str) -> Any:
            return self._session_info(sid)

        @app.delete("/sessions/{sid}", status_code=204)
        async def close_session(sid: str) -> None:
            return None

        @app.post("/sessions/{sid}/execute")
        async def session_execute(sid: str, body: dict[str, Any]) -> Any:
            code = str(body.get("code", ""))
            gone = {
                "#lost": outcome_fields(Failure.of(FailureCode.SESSION_LOST)),
                "#expired": outcome_fields(Failure.of(FailureCode.SESSION_EXPIRED)),
                "#ended": outcome_fields(None),
            }
            if code in gone:
                return JSONResponse({"detail": code, "errors": [], **gone[code]}, status_code=410)
            if (failed := self._failing(code)) is not None:
                return failed
            if code.startswith("#sleep:"):
                await asyncio.sleep(float(code.split(":")[1]))
            return {**self._ok(code), "session_id": sid, "expires_in": 60.0, "lifetime_left": 60.0}

        @app.post("/calculate")
        async def calculate(body: dict[str, Any]) -> Any:
            table = {"6*7": (42, None), "1/0": (None, "ZeroDivisionError: division by zero")}
            value, error = table.get(body["expr"], (None, "unsupported"))
            return {"value": value, "error": error}

        def grade(body: dict[str, Any]) -> dict[str, Any]:
            if "answer" not in body:
                return {"reward": None, "status": "error", "reasons": ["error"], "error": "no gold"}
            response = body.get("response")
            if response is None:  # a chat record
                response = body["messages"][-1]["content"]
            correct = str(body["answer"]) in response
            return {
                "reward": 1.0 if correct else -1.0,
                "correct": correct,
                "pred": response,
                "gold": str(body["answer"]),
                "status": "correct" if correct else "incorrect",
                "reasons": ["string_match" if correct else "not_equal"],
                "tool_calls": 0,
                "preset": body.get("preset", "binary"),
            }

        @app.post("/score")
        async def score(body: dict[str, Any]) -> Any:
            return grade(body)

        @app.post("/score/batch")
        async def score_batch(body: dict[str, Any]) -> Any:
            preset = body.get("preset", "binary")
            rows = [grade({"preset": preset, **item}) for item in body["items"]]
            return {"results": rows, "summary": {"n": len(rows), "timeout": body.get("timeout")}}

        @app.get("/healthz")
        async def healthz() -> Any:
            return {"status": "ok"}

        @app.get("/readyz")
        async def readyz() -> Any:
            if time.monotonic() < self.ready_at:
                return JSONResponse({"status": "starting"}, status_code=503)
            return {"status": "ready"}

        return app


class LiveServer:
    """A uvicorn server on 127.0.0.1 in a background thread."""

    def __init__(self, name: str, port: int = 0) -> None:
        self.fake = FakeBoxed(name)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self.fake.app, log_level="warning", lifespan="off", access_log=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "test server did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[LiveServer, LiveServer]]:
    pair = (LiveServer("a"), LiveServer("b"))
    yield pair
    for server in pair:
        server.stop()


@pytest.fixture
def live(servers: tuple[LiveServer, LiveServer]) -> tuple[LiveServer, LiveServer]:
    for server in servers:
        server.fake.reset()
    return servers


@pytest.fixture
def dead_url() -> Iterator[str]:
    """A loopback port that is bound but never listens: connections are refused at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def fast(urls: Any, **kwargs: Any) -> dict[str, Any]:
    """Client arguments with short backoff so failing paths stay quick."""
    return {"urls": urls, "backoff_base": 0.01, "backoff_max": 0.05, **kwargs}


def key() -> str:
    return uuid.uuid4().hex[:8]


# ------------------------------------------------------------------------------ every method


def test_sync_methods(live: tuple[LiveServer, LiveServer]) -> None:
    a = live[0]
    with Client(a.url) as client:
        result = client.execute("print(1)", input="x", timeout=2, memory_mb=64)
        assert isinstance(result, ExecuteResult)
        assert result.ok and result.status == "ok" and result.exit_code == 0
        assert result.stdout == result.output == "print(1)\nx"
        assert result.truncated.stdout is False

        calc = client.calculate("6*7")
        assert isinstance(calc, CalculateResult) and calc.ok and calc.value == 42
        bad = client.calculate("1/0")
        assert not bad.ok and bad.value is None and "ZeroDivision" in (bad.error or "")

        score = client.score(response="the answer is 4", answer="4", preset="interleaved")
        assert isinstance(score, ScoreResult)
        assert score.reward == 1.0 and score.correct is True and score.status == "correct"
        assert score.reasons == ["string_match"] and score.model_extra == {"preset": "interleaved"}
        record = {"messages": [{"role": "assistant", "content": "5"}], "answer": "4"}
        assert client.score(record).correct is False

        batch = client.score_many([record, {"response": "4", "answer": 4}, {}], timeout=2)
        assert isinstance(batch, ScoreBatch) and batch.summary == {"n": 3, "timeout": 2}
        assert [r.status for r in batch.results] == ["incorrect", "correct", "error"]
        assert batch.results[2].reward is None and batch.results[2].error == "no gold"

        assert client.health() == {"status": "ok"}
        assert client.wait_until_ready(timeout=2) == [a.url]


def test_async_methods(live: tuple[LiveServer, LiveServer]) -> None:
    a = live[0]

    async def main() -> None:
        async with AsyncClient(a.url) as client:
            result = await client.execute("print(2)")
            assert result.ok and result.stdout == "print(2)\n"
            assert (await client.calculate("6*7")).value == 42
            score = await client.score(response="x = 3", answer="3")
            assert score.reward == 1.0 and score.correct
            batch = await client.score_many([{"response": "2", "answer": 3}], preset="interleaved")
            assert batch.results[0].reward == -1.0
            assert batch.results[0].model_extra == {"preset": "interleaved"}
            assert await client.health() == {"status": "ok"}
            assert await client.wait_until_ready(timeout=2) == [a.url]
            many = await client.execute_many(["1", {"code": "2"}, ExecuteRequest(code="3")])
            assert [r.stdout for r in many] == ["1\n", "2\n", "3\n"]

    asyncio.run(main())


def test_url_and_api_key_from_environment(
    live: tuple[LiveServer, LiveServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = live
    a.fake.api_key = b.fake.api_key = "s3cret"
    monkeypatch.setenv("BOXED_URL", f" {a.url}/ , {b.url}")
    monkeypatch.setenv("BOXED_API_KEY", "s3cret")
    with Client() as client:
        assert client.urls == [a.url, b.url]
        assert client.execute("x").ok
    with Client(a.url, api_key="wrong", max_attempts=3) as client:
        with pytest.raises(BoxedHTTPError) as info:
            client.execute("x")
    assert info.value.status_code == 401 and "API key" in str(info.value)
    assert a.fake.auth_headers[-1] == "Bearer wrong"
    assert a.fake.calls["x"] == 1  # 401 is a caller mistake: not retried


# ------------------------------------------------------------------------------------- retries


def test_retries_429_honouring_retry_after(live: tuple[LiveServer, LiveServer]) -> None:
    a = live[0]
    code = f"#429:1:{key()}"
    with Client(a.url) as client:
        start = time.monotonic()
        result = client.execute(code)
        waited = time.monotonic() - start
    assert result.ok and a.fake.calls[code] == 2
    assert 1.0 <= waited < 2.0  # Retry-After: 1, plus at most 10 % jitter
    # Both attempts carried the same request id, so server logs tie them together.
    first, second = a.fake.request_ids
    assert first and first == second


def test_async_retries_503_with_fractional_retry_after(
    live: tuple[LiveServer, LiveServer],
) -> None:
    a = live[0]
    code = f"#503:2:{key()}:0.3"

    async def main() -> float:
        async with AsyncClient(a.url) as client:
            start = time.monotonic()
            assert (await client.execute(code)).ok
            return time.monotonic() - start

    waited = asyncio.run(main())
    assert a.fake.calls[code] == 3
    assert 0.6 <= waited < 1.5


def test_gives_up_after_max_attempts(live: tuple[LiveServer, LiveServer]) -> None:
    a = live[0]
    code = f"#502always:{key()}"
    with Client(**fast(a.url, max_attempts=3)) as client:
        with pytest.raises(BoxedHTTPError) as info:
            client.execute(code)
    assert info.value.status_code == 502 and a.fake.calls[code] == 3


def test_retry_after_beyond_deadline_fails_fast(live: tuple[LiveServer, LiveServer]) -> None:
    a = live[0]
    code = f"#429:5:{key()}:30"
    with Client(a.url, deadline=1.0, read_timeout=0.5, connect_timeout=0.2) as client:
        start = time.monotonic()
        with pytest.raises(BoxedHTTPError) as info:
            client.execute(code)
    assert time.monotonic() - start < 1.0
    assert info.value.status_code == 429 and info.value.retry_after == 30
    assert a.fake.calls[code] == 1


def test_no_retry_on_code_failure_or_422(live: tuple[LiveServer, LiveServer]) -> None:
    a = live[0]
    with Client(a.url) as client:
        result = client.execute("#error")
        assert result.status == "error" and not result.ok and result.stderr == "Boom"
        with pytest.raises(BoxedHTTPError) as info:
            client.execute("#422")
        with pytest.raises(BoxedHTTPError) as empty:
            client.execute("")
    assert a.fake.calls["#error"] == 1 and a.fake.calls["#422"] == 1 and a.fake.calls[""] == 1
    assert info.value.status_code == 422 and info.value.detail == "timeout above the maximum 30"
    assert "maximum 30" in str(info.value)
    assert "body.code: too short" in str(empty.value)  # pydantic detail lists made readable


def test_http_error_carries_detail_and_the_list_of_errors(
    live: tuple[LiveServer, LiveServer],
) -> None:
    with Client(live[0].url) as client, pytest.raises(BoxedHTTPError) as info:
        client.execute("#422fields")
    error = info.value
    assert error.status_code == 422 and error.detail == error.message
    assert error.message == "timout: unknown field; memory_mb: must be > 0"
    assert [e["loc"] for e in error.errors] == [["body", "timout"], ["body", "memory_mb"]]
    assert [e["type"] for e in error.errors] == ["extra_forbidden", "greater_than"]
    assert str(error).endswith("-> 422: timout: unknown field; memory_mb: must be > 0")
    with Client(live[0].url) as client, pytest.raises(BoxedHTTPError) as other:
        client.execute("#422")
    assert other.value.errors == []


def test_the_real_app_errors_reach_the_client_whole() -> None:
    """The service itself (over a fake executor, no Docker): a typo in an item comes back
    as a 422 naming the field, and the other items run."""
    from tests.fakes import serving

    with serving() as url, Client(url) as client:
        results = client.execute_many(
            ["print(1)", {"code": "print(2)", "timout": 3}], return_exceptions=True
        )
    ok, typo = results
    assert isinstance(ok, ExecuteResult) and ok.stdout == "print(1)"
    assert isinstance(typo, BoxedHTTPError) and typo.status_code == 422
    assert typo.message.startswith("timout: unknown field; did you mean 'timeout'?")
    assert typo.errors[0]["loc"] == ["body", "timout"]


def test_read_timeout_is_derived_from_snippet_timeout(
    live: tuple[LiveServer, LiveServer],
) -> None:
    a = live[0]
    with Client(**fast(a.url, read_timeout=0.2, read_margin=0.6, max_attempts=1)) as client:
        with pytest.raises(BoxedUnavailable, match="ReadTimeout"):
            client.execute("#sleep:0.5")
        # The same wait with a snippet timeout: read timeout = 0.1 + 0.6 > 0.5.
        assert client.execute("#sleep:0.5", timeout=0.1).ok


# -------------------------------------------------------------------------- several URLs


def test_dead_url_first_fails_over_to_live_one(
    live: tuple[LiveServer, LiveServer], dead_url: str
) -> None:
    a = live[0]
    with Client([dead_url, a.url], max_attempts=2) as client:
        start = time.monotonic()
        results = [client.execute(f"x{i}") for i in range(6)]
        elapsed = time.monotonic() - start
    assert all(r.ok and r.request_id == "a" for r in results)
    assert sum(a.fake.calls.values()) == 6
    assert elapsed < 1.0  # failover is immediate, no backoff


def test_only_dead_urls_raise_unavailable(dead_url: str) -> None:
    with Client(**fast(dead_url, max_attempts=3)) as client:
        with pytest.raises(BoxedUnavailable, match="ConnectError.*attempt 3 of 3"):
            client.execute("x")


def test_async_dead_url_fails_over(live: tuple[LiveServer, LiveServer], dead_url: str) -> None:
    b = live[1]

    async def main() -> list[ExecuteResult]:
        async with AsyncClient(f"{dead_url},{b.url}", max_attempts=2) as client:
            return await client.execute_many([f"y{i}" for i in range(5)])

    assert [r.request_id for r in asyncio.run(main())] == ["b"] * 5


def test_round_robin_across_two_servers(live: tuple[LiveServer, LiveServer]) -> None:
    a, b = live
    with Client([a.url, b.url]) as client:
        ids = [client.execute(f"z{i}").request_id for i in range(10)]
    assert Counter(ids) == {"a": 5, "b": 5}
    assert ids[:4] == ["a", "b", "a", "b"]


def test_429_on_one_server_moves_to_the_other_at_once(live: tuple[LiveServer, LiveServer]) -> None:
    a, b = live
    code = f"#429:1:{key()}:30"
    with Client([a.url, b.url]) as client:
        start = time.monotonic()
        result = client.execute(code)
        # ``a`` asked for 30 s of quiet: the next calls go to ``b`` only.
        later = [client.execute(f"w{i}").request_id for i in range(3)]
    assert result.request_id == "b" and time.monotonic() - start < 1.0
    assert later == ["b"] * 3


def test_ordered_routing_sends_every_call_to_the_first_url(
    live: tuple[LiveServer, LiveServer],
) -> None:
    a, b = live
    with Client([a.url, b.url], routing="ordered") as client:
        ids = [client.execute(f"o{i}").request_id for i in range(6)]
    assert ids == ["a"] * 6


def test_ordered_routing_fails_over_past_a_dead_first_url_at_once(
    live: tuple[LiveServer, LiveServer], dead_url: str
) -> None:
    a, b = live
    with Client([dead_url, b.url, a.url], routing="ordered", max_attempts=2) as client:
        start = time.monotonic()
        ids = [client.execute(f"d{i}").request_id for i in range(6)]
    assert ids == ["b"] * 6 and time.monotonic() - start < 1.0


def test_ordered_routing_spills_a_429_to_the_next_url_then_comes_back(
    live: tuple[LiveServer, LiveServer],
) -> None:
    a, b = live
    code = f"#429:1:{key()}:0.5"
    with Client([a.url, b.url], routing="ordered") as client:
        start = time.monotonic()
        spilled = client.execute(code)
        held = client.execute("h").request_id  # ``a`` asked for 0.5 s of quiet
        assert spilled.request_id == "b" and held == "b" and time.monotonic() - start < 0.5
        time.sleep(0.6)
        assert client.execute("back").request_id == "a"


def test_routing_from_the_environment_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOXED_ROUTING", "ordered")
    with Client("http://127.0.0.1:1") as client:
        assert client.routing == "ordered"
    with Client("http://127.0.0.1:1", routing="spread") as client:
        assert client.routing == "spread"
    with pytest.raises(ValueError, match="routing"):
        Client("http://127.0.0.1:1", routing="nearest")  # type: ignore[arg-type]


# ---------------------------------------------------------------- concurrency and execute_many


def test_concurrency_cap_respected(live: tuple[LiveServer, LiveServer]) -> None:
    a = live[0]
    with Client(a.url, max_concurrency=3) as client:
        results = client.execute_many([f"#sleep:0.1:{i}" for i in range(12)])
    assert len(results) == 12 and a.fake.max_in_flight == 3


def test_async_concurrency_cap_respected(live: tuple[LiveServer, LiveServer]) -> None:
    a = live[0]

    async def main() -> None:
        async with AsyncClient(a.url, max_concurrency=4) as client:
            await asyncio.gather(*(client.execute(f"#sleep:0.1:{i}") for i in range(16)))

    asyncio.run(main())
    assert a.fake.max_in_flight == 4


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_cap_above_one_pool_is_reached_over_several(
    live: tuple[LiveServer, LiveServer], kind: str
) -> None:
    """Connections are kept in pools of 16 (httpx's cost per request grows with a pool's busy
    connections): a cap of 40 still has 40 requests in flight, spread over three pools."""
    a = live[0]
    codes = [f"#sleep:0.5:{kind}{i}" for i in range(80)]
    if kind == "sync":
        with Client(a.url, max_concurrency=40) as client:
            assert len(client._clients) == 3
            results = client.execute_many(codes)
    else:

        async def main() -> list[ExecuteResult]:
            async with AsyncClient(a.url, max_concurrency=40) as client:
                assert len(client._clients) == 3
                return await asyncio.gather(*(client.execute(code) for code in codes))

        results = asyncio.run(main())
    assert [r.stdout for r in results] == [f"{code}\n" for code in codes]
    assert a.fake.max_in_flight == 40


def test_execute_many_keeps_order_and_every_result(live: tuple[LiveServer, LiveServer]) -> None:
    a, b = live
    items: list[Any] = [f"#sleep:{0.05 * (i % 3)}:{i}" for i in range(9)]
    items += [{"code": "d", "stdin": "in"}, ExecuteRequest(code="m", input="put")]
    with Client([a.url, b.url]) as client:
        results = client.execute_many(items)
        assert [r.stdout for r in results[:9]] == [f"{item}\n" for item in items[:9]]
        assert results[9].stdout == "d\nin" and results[10].stdout == "m\nput"

        with pytest.raises(BoxedBatchError) as info:
            client.execute_many(["one", "#422", "three"])
        mixed = client.execute_many(["one", "#422", "three"], return_exceptions=True)
        assert client.execute_many([]) == []
    assert [type(r) for r in info.value.results] == [ExecuteResult, BoxedHTTPError, ExecuteResult]
    assert [i for i, _ in info.value.errors] == [1] and "1 of 3 items failed" in str(info.value)
    assert isinstance(mixed[1], BoxedHTTPError) and mixed[1].status_code == 422
    assert [getattr(r, "stdout", None) for r in mixed] == ["one\n", None, "three\n"]


def test_async_execute_many_errors(live: tuple[LiveServer, LiveServer]) -> None:
    a = live[0]

    async def main() -> list[ExecuteResult | BoxedError]:
        async with AsyncClient(a.url) as client:
            with pytest.raises(BoxedBatchError):
                await client.execute_many(["#422"])
            return await client.execute_many(["ok", "#422"], return_exceptions=True)

    ok, err = asyncio.run(main())
    assert isinstance(ok, ExecuteResult) and isinstance(err, BoxedHTTPError)


def test_execute_many_rejects_unknown_item_types(live: tuple[LiveServer, LiveServer]) -> None:
    with Client(live[0].url) as client:
        with pytest.raises(TypeError, match="execute_many items"):
            client.execute_many([42])  # type: ignore[list-item]
    assert sum(live[0].fake.calls.values()) == 0


def test_async_client_refuses_a_second_event_loop(live: tuple[LiveServer, LiveServer]) -> None:
    client = AsyncClient(live[0].url)
    first = asyncio.new_event_loop()
    try:
        assert first.run_until_complete(client.health()) == {"status": "ok"}
        with pytest.raises(BoxedError, match="another event loop"):
            asyncio.run(client.health())
        first.run_until_complete(client.aclose())
    finally:
        first.close()


# ---------------------------------------------------------------- deadlines and typed failures


def test_attempts_are_bounded_by_the_deadline_unless_told_otherwise() -> None:
    client = Client("http://127.0.0.1:9")
    assert client.max_attempts is None and client.deadline == 120 and client.session_timeout == 10
    with pytest.raises(ValueError, match="deadline=None and max_attempts=None"):
        Client("http://127.0.0.1:9", deadline=None)
    with pytest.raises(ValueError, match="deadline=None and max_attempts=None"):
        AsyncClient("http://127.0.0.1:9", deadline=None, max_attempts=None)
    assert Client("http://127.0.0.1:9", deadline=None, max_attempts=3).max_attempts == 3
    with pytest.raises(ValueError, match="max_attempts must be at least 1"):
        Client("http://127.0.0.1:9", max_attempts=0)


def _restart_after(server: LiveServer, outage: float) -> tuple[threading.Timer, list[LiveServer]]:
    """Stop ``server`` now and start a new one on its port ``outage`` seconds later: until
    then every connection to it is refused, as during a service restart."""
    server.stop()
    port = int(server.url.rsplit(":", 1)[1])
    back: list[LiveServer] = []
    timer = threading.Timer(outage, lambda: back.append(LiveServer("back", port)))
    timer.start()
    return timer, back


@pytest.mark.parametrize(("outage", "backoff_max"), [(2.0, 0.5), (15.0, 5.0)])
def test_a_service_restarted_during_the_call_is_reached(outage: float, backoff_max: float) -> None:
    """The defaults (15 s; a short outage with a short backoff keeps the check quick): the call
    keeps trying until its deadline (120 s), so a service back 15 s later answers it (before:
    8 attempts, given up after 9-13 s)."""
    server = LiveServer("first")
    with Client(server.url, backoff_max=backoff_max) as client:
        assert client.execute("before").request_id == "first"
        timer, back = _restart_after(server, outage)
        start = time.monotonic()
        try:
            result = client.execute("during")
            elapsed = time.monotonic() - start
        finally:
            timer.join()
            for restarted in back:
                restarted.stop()
    assert result.ok and result.request_id == "back" and back[0].fake.calls["during"] == 1
    # Reached within one backoff step (backoff_max, 5 s) of its return.
    assert outage <= elapsed < outage + client.backoff_max + 1


def test_a_dead_service_fails_at_the_deadline_not_after(dead_url: str) -> None:
    with Client(dead_url, deadline=5) as client:
        start = time.monotonic()
        with pytest.raises(BoxedUnavailable) as info:
            client.execute("x")
        elapsed = time.monotonic() - start
    assert 4.5 <= elapsed <= 5.5  # it used its time, and no more (it ran 6.8 s before)
    assert info.value.failure == Failure(FailureCode.DEADLINE_EXCEEDED, retryable=False)
    assert info.value.outcome == "infrastructure"
    assert "deadline of 5 s ran out" in str(info.value) and "ConnectError" in str(info.value)


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A loopback port that accepts connections (the kernel's backlog) and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def test_a_silent_service_is_waited_for_until_the_deadline_only(silent_url: str) -> None:
    """The read timeout (30 s) and the wait for one of the client's own slots are both cut
    to the deadline (the snippets' own limit, 0.4 s, fits in it)."""

    async def main() -> list[BaseException | ExecuteResult]:
        async with AsyncClient(silent_url, deadline=1.5, max_concurrency=1) as client:
            calls = [client.execute("x", timeout=0.4), client.execute("y", timeout=0.4)]
            return await asyncio.gather(*calls, return_exceptions=True)

    start = time.monotonic()
    first, second = asyncio.run(main())
    assert time.monotonic() - start <= 2.0
    for error in (first, second):
        assert isinstance(error, BoxedUnavailable)
        assert error.failure is not None and error.failure.code == "deadline_exceeded"
    assert "ReadTimeout" in str(first)


def test_the_wait_for_a_slot_of_the_client_ends_at_the_deadline(
    live: tuple[LiveServer, LiveServer],
) -> None:
    with Client(live[0].url, deadline=0.5, max_concurrency=1) as client:
        client._slot.acquire()  # another thread's call holds the only slot
        start = time.monotonic()
        with pytest.raises(BoxedUnavailable, match="free slot") as info:
            client.execute("x")
        assert 0.45 <= time.monotonic() - start <= 0.7
        client._slot.release()
    assert info.value.failure is not None and info.value.failure.code == "deadline_exceeded"


def test_a_retryable_failure_is_retried_honouring_retry_after(
    live: tuple[LiveServer, LiveServer],
) -> None:
    """/run_code's 504 and any answer whose failure is retryable are retried, after the
    server's Retry-After; a failure that is not retryable is raised at once with it."""
    a = live[0]
    gateway = f"#fail:504:2:{key()}:sandbox_unavailable:0.4"
    engine = f"#fail:500:2:{key()}:engine_unavailable"
    bug = f"#fail:500:9:{key()}:internal_error"
    with Client(**fast(a.url)) as client:
        start = time.monotonic()
        assert client.execute(gateway).ok
        assert time.monotonic() - start >= 0.8  # two waits of Retry-After: 0.4
        assert client.execute(engine).ok
        with pytest.raises(BoxedHTTPError) as info:
            client.execute(bug)
    assert a.fake.calls[gateway] == 3 and a.fake.calls[engine] == 3 and a.fake.calls[bug] == 1
    assert info.value.status_code == 500 and not isinstance(info.value, SessionLost)
    assert info.value.failure == Failure(FailureCode.INTERNAL_ERROR, retryable=False)
    assert info.value.outcome == "infrastructure"


def test_an_answer_with_a_retryable_failure_is_retried_then_returned_as_no_verdict(
    live: tuple[LiveServer, LiveServer],
) -> None:
    a = live[0]
    once = f"#fail:200:1:{key()}:sandbox_lost"
    always = f"#fail:200:999:{key()}:sandbox_lost"
    with Client(**fast(a.url)) as client:
        recovered = client.execute(once)
        start = time.monotonic()
        lost = client.execute(always)
        elapsed = time.monotonic() - start
    assert recovered.ok and recovered.outcome == "code" and a.fake.calls[once] == 2
    # Sent again twice at most (the service retried it once itself), then the last answer is
    # the call's, and it says it is no verdict.
    assert a.fake.calls[always] == 3 and elapsed <= 0.5
    assert lost.outcome == "infrastructure" and lost.failure is not None
    assert lost.failure.code == "sandbox_lost" and lost.failure.retryable
    assert reward_or_none(recovered, lambda r: 1.0) == 1.0
    assert reward_or_none(lost, lambda r: 1.0) is None


def test_score_rows_say_when_the_grader_decided_nothing() -> None:
    """A /score row carries the scorer's outcome: a grader timeout is no reward, not a 0."""
    timed_out = ScoreResult.model_validate(
        {
            "reward": None,
            "status": "timeout",
            "outcome": "grader",
            "failure": {"code": "grader_timeout", "retryable": False},
        }
    )
    graded = ScoreResult.model_validate({"reward": 0.0, "status": "incorrect"})
    assert timed_out.failure is not None and timed_out.failure.code == "grader_timeout"
    assert reward_or_none(timed_out, lambda row: row.reward) is None
    assert graded.outcome == "code" and reward_or_none(graded, lambda row: row.reward) == 0.0


def test_errors_carry_whose_failure_it_is(
    live: tuple[LiveServer, LiveServer], dead_url: str
) -> None:
    a = live[0]
    with Client(**fast(a.url, max_attempts=2)) as client:
        with pytest.raises(BoxedHTTPError) as caller:
            client.execute("#422")
        with pytest.raises(BoxedHTTPError) as proxy:
            client.execute(f"#502always:{key()}")
    with Client(**fast(a.url, deadline=1)) as client:
        with pytest.raises(BoxedHTTPError) as busy:  # Retry-After 30 s: past the deadline
            client.execute(f"#429:5:{key()}:30")
    with Client(**fast(dead_url, max_attempts=2)) as client:
        with pytest.raises(BoxedUnavailable) as down:
            client.execute("x")
    # A caller's own mistake is nobody's verdict: no failure, no outcome.
    assert caller.value.failure is None and caller.value.outcome is None
    # A proxy's bare 502 and a 429 without a body failure still name theirs.
    assert proxy.value.failure == Failure.of(FailureCode.SERVICE_UNREACHABLE)
    assert busy.value.failure == Failure.of(FailureCode.OVERLOADED)
    assert busy.value.outcome == "infrastructure"
    assert down.value.failure == Failure(FailureCode.SERVICE_UNREACHABLE, retryable=True)
    assert "attempt 2 of 2" in str(down.value)
    assert reward_or_none(down.value, lambda r: 1.0) is None
    with pytest.raises(BoxedHTTPError):
        reward_or_none(caller.value, lambda r: 1.0)  # a bug of the caller is not masked


def test_session_lost_by_the_infrastructure_is_told_from_one_its_code_ended(
    live: tuple[LiveServer, LiveServer],
) -> None:
    with Client(live[0].url) as client, client.session() as session:
        assert session.execute("x = 1").ok
        with pytest.raises(SessionLost) as lost:
            session.execute("#lost")
        with pytest.raises(SessionLost) as expired:
            session.execute("#expired")
        with pytest.raises(BoxedHTTPError) as ended:
            session.execute("#ended")
    assert lost.value.status_code == 410 and lost.value.outcome == "infrastructure"
    assert lost.value.failure == Failure(FailureCode.SESSION_LOST, retryable=False)
    assert expired.value.failure == Failure(FailureCode.SESSION_EXPIRED, retryable=False)
    assert not isinstance(ended.value, SessionLost) and ended.value.status_code == 410
    assert ended.value.outcome == "code" and ended.value.failure is None
    assert reward_or_none(lost.value, lambda r: 1.0) is None
    with pytest.raises(BoxedHTTPError):
        reward_or_none(ended.value, lambda r: 1.0)  # the caller decides what its end is worth


def test_a_session_whose_server_is_gone_fails_within_the_session_timeout() -> None:
    """Default settings (deadline 120 s): the session's calls stop trying after 10 s, never
    move to the other server, and closing it does not wait again."""
    a, b = LiveServer("a"), LiveServer("b")
    try:
        with Client([a.url, b.url]) as client:
            session = client.session().open()
            home, other = (a, b) if session.id and session.id.startswith("a-") else (b, a)
            assert session.execute("x = 1").request_id == home.fake.name
            home.stop()
            start = time.monotonic()
            with pytest.raises(SessionUnreachable) as info:
                session.execute("print(x)")
            elapsed = time.monotonic() - start
            start = time.monotonic()
            session.close()
            assert time.monotonic() - start < 0.1 and session.id is None
            assert client.execute("elsewhere").request_id == other.fake.name
    finally:
        a.stop()
        b.stop()
    assert 9.5 <= elapsed <= 10.5
    assert info.value.failure == Failure(FailureCode.SERVICE_UNREACHABLE, retryable=True)
    assert isinstance(info.value, BoxedUnavailable) and "ConnectError" in str(info.value)
    assert other.fake.sessions_made == 0 and sum(other.fake.calls.values()) == 1


def test_async_session_bound_is_a_setting() -> None:
    server = LiveServer("a")

    async def main() -> float:
        async with AsyncClient(server.url, session_timeout=1.0) as client:
            session = await client.session().open()
            server.stop()
            start = time.monotonic()
            with pytest.raises(SessionUnreachable):
                await session.execute("1")
            elapsed = time.monotonic() - start
            await session.close()
            return elapsed

    try:
        assert 0.8 <= asyncio.run(main()) <= 1.3
    finally:
        server.stop()


def test_a_session_call_is_never_sent_twice_even_for_a_retryable_failure(
    live: tuple[LiveServer, LiveServer],
) -> None:
    """A lost sandbox under a session call may have run it: 502/504 and failures that say
    retryable are raised, not sent again (x += 1 run twice is not x += 1)."""
    a = live[0]
    code = f"#fail:504:1:{key()}:sandbox_lost"
    with Client(a.url) as client, client.session() as session:
        with pytest.raises(BoxedHTTPError) as info:
            session.execute(code)
    assert info.value.status_code == 504 and info.value.failure is not None
    assert info.value.failure.code == "sandbox_lost"


def test_the_deadline_never_cuts_a_run_shorter_than_its_own_limit(
    live: tuple[LiveServer, LiveServer],
) -> None:
    """A run cut short would be no reward instead of the code's verdict (slow code could learn
    to escape its verdict that way): the wait for an answer is never cut below the time the
    call gave its code, even past the deadline; retries and waits still stop at it."""
    with Client(live[0].url, deadline=0.5) as client:
        start = time.monotonic()
        assert client.execute("#sleep:1.0", timeout=1).ok
        with client.session(timeout=1) as session:
            assert session.execute("#sleep:1.0").ok
        assert time.monotonic() - start >= 2.0
        with pytest.raises(BoxedUnavailable, match="ReadTimeout"):
            client.execute("#sleep:3", timeout=1)  # past its own limit: cut


def test_read_timeouts_allow_for_the_servers_one_rerun() -> None:
    """The server runs a snippet again once on a fresh sandbox if its sandbox is lost: the
    wait for /execute and /judge allows for two runs; a session call is never rerun."""
    client = Client("http://127.0.0.1:9", read_timeout=1, read_margin=15)
    assert client._exec_read_timeout({"timeout": 10}) == 2 * 10 + 5 + 15
    assert client._exec_read_timeout({"timeout": 10}, rerun=False) == 10 + 15
    tests = [{"timeout": 2}, {"timeout": 3}]
    assert client._judge_read_timeout({"tests": tests}) == (4 + 6) + 2 * (5 + 1) + 60 + 15
    # What the code itself may take, which the deadline never cuts: its limits and start-up.
    assert client._exec_code_time({"timeout": 10}) == 10 + 1
    assert client._exec_code_time({}) == 5 + 1  # the server's default limit
    assert client._judge_code_time({"tests": tests}) == pytest.approx(2.2 + 3.2 + 1)
    cpp = {"tests": tests, "language": "cpp", "comparison": "checker"}
    assert client._judge_code_time(cpp) == pytest.approx(15 + 4.2 + 6.2 + 1)


# ---------------------------------------------------------------------------------- readiness


def test_wait_until_ready(live: tuple[LiveServer, LiveServer], dead_url: str) -> None:
    a, b = live
    a.fake.ready_at = time.monotonic() + 0.5
    start = time.monotonic()
    with Client([dead_url, a.url, b.url]) as client:
        # One ready URL is enough by default: it returns while ``a`` is still starting.
        assert client.wait_until_ready(timeout=5, interval=0.05) == [b.url]
    with Client([a.url, b.url]) as client:
        assert client.wait_until_ready(timeout=5, interval=0.05, all_urls=True) == [a.url, b.url]
        assert time.monotonic() - start >= 0.45
    with Client([dead_url, a.url]) as client:
        with pytest.raises(BoxedUnavailable, match="not ready after 0.3 s.*ConnectError"):
            client.wait_until_ready(timeout=0.3, interval=0.05, all_urls=True)


def test_async_wait_until_ready(live: tuple[LiveServer, LiveServer], dead_url: str) -> None:
    a = live[0]
    a.fake.ready_at = time.monotonic() + 0.3

    async def main() -> list[str]:
        async with AsyncClient([dead_url, a.url]) as client:
            return await client.wait_until_ready(timeout=5, interval=0.05)

    start = time.monotonic()
    assert asyncio.run(main()) == [a.url]
    assert time.monotonic() - start >= 0.25


# ---------------------------------------------------------------------------------- examples


def _load_example(name: str) -> ModuleType:
    """Examples are scripts, not a package: load one from its file."""
    path = Path(__file__).resolve().parent.parent / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"boxed_example_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_exec_tool_example(
    live: tuple[LiveServer, LiveServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    exec_tool = _load_example("exec_tool")
    a = live[0]

    async def main() -> list[str]:
        monkeypatch.setattr(exec_tool, "_client", AsyncClient(a.url))
        calls = [
            {"name": "python_interpreter", "arguments": {"code": "print(1)"}},
            {"name": "python_interpreter", "arguments": '{"code": "#error"}'},
            {"name": "calculator", "arguments": {"expr": "6*7"}},
            {"name": "calculator", "arguments": {"expr": "1/0"}},
            {"name": "python_interpreter", "arguments": {"code": ""}},
            {"name": "browser", "arguments": {}},
        ]
        try:
            return [await exec_tool._exec_tool(call) for call in calls]
        finally:
            await exec_tool._client.aclose()

    out = asyncio.run(main())
    assert (
        out[0] == '<tool_response>{"stdout": "print(1)\\n", "result": "print(1)"}</tool_response>'
    )
    assert '"status": "error"' in out[1] and '"stderr": "Boom"' in out[1]
    assert out[2] == '<tool_response>{"value": 42}</tool_response>'
    assert '"error": "ZeroDivisionError' in out[3]
    assert '"error": "' in out[4] and "too short" in out[4]
    assert "unknown tool" in out[5]


def test_trl_reward_example() -> None:
    pytest.importorskip("scorer.equivalence", reason="the scorer's equivalence engine is absent")
    trl_reward = _load_example("trl_reward")
    completions: list[Any] = [
        "<think>2+2</think> The answer is \\boxed{4}.",
        [{"role": "assistant", "content": "<think>hm</think> \\boxed{\\frac{1}{2}}"}],
        "\\boxed{5}",
        "no box at all",
    ]
    golds = ["4", "0.5", 4, "1"]
    assert trl_reward.reward(completions, golds) == [1.0, 1.0, 0.0, 0.0]
    interleaved = trl_reward.make_reward("interleaved")
    assert interleaved.__name__ == "boxed_interleaved_reward"
    assert interleaved(["\\boxed{4}", "<think>x</think>\\boxed{4}"], [4, 4]) == [-1.0, 1.0]
    assert trl_reward.reward([[{"role": 3}]], ["1"]) == [None]  # ungradable -> no reward


# ------------------------------------------------------------------- the real service (Docker)


@pytest.mark.docker
def test_real_service_execute(boxed_service: str) -> None:
    with Client(boxed_service) as client:
        client.wait_until_ready(timeout=60)
        result = client.execute("print(1+1)")
        assert result.ok and result.output == "2\n" and result.exit_code == 0
        failed = client.execute("raise SystemExit(3)")
        assert failed.status == "error" and failed.exit_code == 3
        many = client.execute_many([f"print({i}*{i})" for i in range(8)])
        assert [r.stdout for r in many] == [f"{i * i}\n" for i in range(8)]


@pytest.mark.docker
def test_real_service_timeout_is_a_result_not_a_retry(boxed_service: str) -> None:
    with Client(boxed_service) as client:
        start = time.monotonic()
        result = client.execute("import time\nprint('hi', flush=True)\ntime.sleep(30)", timeout=1)
        elapsed = time.monotonic() - start
    assert result.status == "timeout" and result.stdout == "hi\n"
    assert elapsed < 10  # one attempt, not several


@pytest.mark.docker
def test_real_service_calculate_and_caller_errors(boxed_service: str) -> None:
    async def main() -> None:
        async with AsyncClient(boxed_service) as client:
            assert (await client.calculate("2**10")).value == 1024
            bad = await client.calculate("().__class__.__bases__[0].__subclasses__()")
            assert bad.value is None and bad.error
            with pytest.raises(BoxedHTTPError) as info:
                await client.execute("print(1)", timeout=10_000)
            assert info.value.status_code == 422

    asyncio.run(main())


@pytest.mark.docker
def test_real_service_score(boxed_service: str) -> None:
    with Client(boxed_service) as client:
        right = client.score(response="<think>half</think> \\boxed{\\frac{1}{2}}", answer="0.5")
        wrong = client.score(response="\\boxed{3}", answer=4, preset="interleaved")
        batch = client.score_many([{"response": "\\boxed{7}", "answer": 7}, {"response": "x"}])
    assert right.correct and right.reward == 1.0 and right.status == "correct"
    assert wrong.reward == -1.0 and wrong.status == "format_error"
    assert [r.status for r in batch.results] == ["correct", "error"]


@pytest.mark.docker
def test_real_service_exec_tool(boxed_service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    exec_tool = _load_example("exec_tool")

    async def main() -> list[str]:
        monkeypatch.setattr(exec_tool, "_client", AsyncClient(boxed_service))
        text = (
            '<tool_call>{"name": "python_interpreter", "arguments": {"code": "print(2**10)"}}'
            '</tool_call><tool_call>{"name": "calculator", "arguments": {"expr": "sqrt(16)"}}'
            "</tool_call><tool_call>not json</tool_call>"
        )
        try:
            return await exec_tool.answer_tool_calls(text)
        finally:
            await exec_tool._client.aclose()

    code, calc, bad = asyncio.run(main())
    assert code == '<tool_response>{"stdout": "1024\\n", "result": "1024"}</tool_response>'
    assert calc == '<tool_response>{"value": 4.0}</tool_response>'
    assert "not a JSON object" in bad


def test_client_rows_read_the_scorers_one_row_schema() -> None:
    from exec_server.client import ScoreResult
    from scorer.row import GradedRow

    for name, field in ScoreResult.model_fields.items():
        assert GradedRow.model_fields[name].annotation == field.annotation, name


@pytest.mark.docker
def test_real_service_faults_reach_the_client_typed() -> None:
    """The real service under real faults: a session whose container is killed raises
    SessionLost (session_lost, no reward); with the service stopped the session's call gives up
    after session_timeout, never moved; a stateless call made while the service is down is
    answered once it is back."""
    from tests.conftest import running_service

    with running_service(BOXED_POOL_SIZE="1") as service:
        with Client(service.url, session_timeout=2) as client:
            session = client.session().open()
            assert session.execute("x = 1").ok
            label = f"label=boxed.session={session.id}"
            ps = ["docker", "ps", "-q", "--filter", label]
            (container,) = subprocess.run(ps, capture_output=True, text=True).stdout.split()
            subprocess.run(["docker", "kill", container], check=True, capture_output=True)
            with pytest.raises(SessionLost) as lost:
                session.execute("print(x)")
            assert lost.value.failure == Failure(FailureCode.SESSION_LOST, retryable=False)
            assert reward_or_none(lost.value, lambda r: 1.0) is None

            alive = client.session().open()
            service.stop()
            start = time.monotonic()
            with pytest.raises(SessionUnreachable) as gone:
                alive.execute("1")
            assert time.monotonic() - start <= 2.5
            assert (
                gone.value.failure is not None and gone.value.failure.code == "service_unreachable"
            )
            alive.close()  # forgotten without waiting again

            restart = threading.Timer(2.0, service.start)
            restart.start()
            try:
                start = time.monotonic()
                result = client.execute("print(6 * 7)")
                elapsed = time.monotonic() - start
            finally:
                restart.join()
    assert result.ok and result.stdout == "42\n" and result.outcome == "code"
    assert elapsed >= 2.0  # it waited out the restart, which it could not have answered sooner
