"""Sessions without Docker: the session manager and its routes over the in-memory fake backend
(the real app, executor and admission), and their settings. The persistent interpreter itself
is tested in tests/test_guest.py and, with real sandboxes, in tests/test_sessions_docker.py."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from exec_server.app import Executor, create_app
from exec_server.backends.base import Job, SessionSandbox
from exec_server.backends.fake import FakeBackend, FakeSession, observed
from exec_server.guest.protocol import KILLED_WALL
from exec_server.settings import Settings


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@contextmanager
def service(
    behaviour: Any = None, **settings: Any
) -> Iterator[tuple[TestClient, FakeBackend, Executor]]:
    """The real app over a real executor whose backend is the fake (calls answer their code
    on stdout unless ``behaviour`` says otherwise). No warm pool unless asked: these tests
    count session sandboxes (the pool's own are in tests/test_session_pool.py)."""
    settings.setdefault("session_pool_size", 0)
    s = Settings(instance="fake", isolation="container", pool_size=1, **settings)
    fake = FakeBackend(behaviour or (lambda job: observed(stdout=job.code.encode())))
    executor = Executor(s, backends={"container": fake})
    with TestClient(create_app(s, executor), raise_server_exceptions=False) as client:
        yield client, fake, executor


def sessions_alive(fake: FakeBackend) -> list[str]:
    return [i for i, sandbox in fake.sandboxes.items() if isinstance(sandbox, FakeSession)]


def wait_until(condition: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_a_session_is_made_used_read_and_deleted() -> None:
    with service() as (client, fake, _):
        made = client.post("/sessions", json={"memory_mb": 128, "timeout": 2, "idle_timeout": 60})
        assert made.status_code == 201
        info = made.json()
        sid = info["session_id"]
        assert (info["memory_mb"], info["timeout"], info["idle_timeout"]) == (128, 2.0, 60.0)
        assert info["state"] == "idle" and info["calls"] == 0 and info["expires_in"] <= 60
        (sandbox_id,) = sessions_alive(fake)
        assert fake.sandboxes[sandbox_id].spec.memory_mb == 128
        assert fake.sandboxes[sandbox_id].session_id == sid  # the Docker label boxed.session

        answer = client.post(f"/sessions/{sid}/execute", json={"code": "x = 1", "stdin": "in"})
        assert answer.status_code == 200
        body = answer.json()
        assert (body["status"], body["stdout"], body["session_id"]) == ("ok", "x = 1", sid)
        assert body["session_lost"] is None and 0 < body["expires_in"] <= 60
        assert body["lifetime_left"] > 3000
        job: Job = fake.jobs[-1]
        assert (job.stdin, job.limits.wall_seconds, job.limits.memory_mb) == ("in", 2.0, 128)
        assert client.get(f"/sessions/{sid}").json()["calls"] == 1

        assert client.delete(f"/sessions/{sid}").status_code == 204
        assert sandbox_id in fake.removed and sessions_alive(fake) == []
        for answer in (
            client.get(f"/sessions/{sid}"),
            client.post(f"/sessions/{sid}/execute", json={"code": "x"}),
            client.delete(f"/sessions/{sid}"),
        ):
            assert answer.status_code == 404, answer.text
            assert "never made, or deleted" in answer.json()["detail"]


def test_no_body_takes_the_defaults_and_limits_above_the_maxima_are_refused() -> None:
    limits = {"timeout_max": 10, "session_idle_timeout_max": 100}
    with service(**limits, session_idle_timeout_default=100) as (client, fake, _):
        info = client.post("/sessions").json()
        assert (info["memory_mb"], info["timeout"], info["idle_timeout"]) == (256, 5.0, 100.0)
        for field, value, maximum in (
            ("timeout", 11, "10"),
            ("idle_timeout", 101, "100"),
            ("memory_mb", 4096, "2048"),
        ):
            answer = client.post("/sessions", json={field: value})
            assert answer.status_code == 422
            assert answer.json()["detail"] == f"{field} {value} exceeds the maximum {maximum}"
        assert client.post("/sessions", json={"timout": 1}).status_code == 422  # a typo
        sid = info["session_id"]
        call = client.post(f"/sessions/{sid}/execute", json={"code": "1", "memory_mb": 512})
        assert call.status_code == 422 and "memory_mb is fixed per session" in call.text
        call = client.post(f"/sessions/{sid}/execute", json={"code": "1", "timeout": 11})
        assert call.status_code == 422 and "exceeds the maximum 10" in call.text
        assert len(sessions_alive(fake)) == 1  # refused calls lose nothing


def test_settings_keep_session_defaults_within_their_maxima() -> None:
    s = Settings()
    assert (s.max_sessions, s.session_idle_timeout_default, s.session_call_wait) == (32, 300, 0)
    assert s.session_lifetime_default <= s.session_lifetime_max
    with pytest.raises(ValueError, match="SESSION_IDLE_TIMEOUT_DEFAULT exceeds"):
        Settings(session_idle_timeout_default=10, session_idle_timeout_max=5)
    with pytest.raises(ValueError, match="SESSION_LIFETIME_DEFAULT exceeds"):
        Settings(session_lifetime_default=10, session_lifetime_max=5)


@pytest.mark.parametrize(
    ("fields", "ends", "status", "reason"),
    [
        ({"killed_for": KILLED_WALL, "exit_code": 137}, False, "timeout", "wall-clock limit"),
        ({"exit_code": 1, "memory_error": True}, False, "memory_limit", "memory limit of"),
        ({"exit_code": 0}, True, "ok", "the interpreter exited with code 0"),  # sys.exit(0)
        ({"exit_code": 139}, True, "error", "the interpreter exited with code 139"),  # a crash
    ],
)
def test_a_call_that_ends_the_interpreter_loses_the_session(
    fields: dict[str, Any], ends: bool, status: str, reason: str
) -> None:
    behaviour = (lambda job: observed(**fields)) if not fields.get("killed_for") else None
    behaviour = behaviour or (lambda job: observed(**fields))
    lost_before = metric("boxed_sessions_lost_total", status=status)
    with service(behaviour) as (client, fake, _):
        fake.ends_session = lambda job: ends
        sid = client.post("/sessions").json()["session_id"]
        answer = client.post(f"/sessions/{sid}/execute", json={"code": "end"}).json()
        assert answer["status"] == status
        assert reason in answer["session_lost"]
        assert answer["expires_in"] == 0
        wait_until(lambda: sessions_alive(fake) == [])
        for later in (
            client.post(f"/sessions/{sid}/execute", json={"code": "print(1)"}),
            client.get(f"/sessions/{sid}"),
        ):
            assert later.status_code == 410
            assert later.json()["detail"].startswith(f"session {sid} is lost: ")
            assert reason in later.json()["detail"]
        assert len(fake.jobs) == 1  # never a fresh interpreter behind its back
        assert client.delete(f"/sessions/{sid}").status_code == 204  # forgets it
        assert client.get(f"/sessions/{sid}").status_code == 404
    assert metric("boxed_sessions_lost_total", status=status) == lost_before + 1


def test_a_call_the_sandbox_failed_is_410_session_lost_never_retried() -> None:
    """The interpreter's state went with its sandbox: the call is never retried (a fresh
    interpreter would answer for state it never had) and answers the infrastructure's failure
    code, as every later call does; a 503 would invite a retry of a session that is gone."""
    lost = {"outcome": "infrastructure", "failure": {"code": "session_lost", "retryable": False}}
    with service() as (client, fake, _):
        sid = client.post("/sessions").json()["session_id"]
        (sandbox_id,) = sessions_alive(fake)
        fake.sandboxes[sandbox_id].alive = False  # removed from outside
        answer = client.post(f"/sessions/{sid}/execute", json={"code": "1"})
        later = client.post(f"/sessions/{sid}/execute", json={"code": "1"})
        for a in (answer, later):
            assert a.status_code == 410 and "its sandbox failed" in a.json()["detail"]
            assert {k: a.json()[k] for k in lost} == lost
        assert len(fake.jobs) == 0  # never run again on a fresh interpreter


class Gate:
    """A behaviour whose calls wait until ``release``; counts the running slots they see."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.go = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.running_seen: list[int] = []
        self.executor: Executor | None = None

    async def __call__(self, job: Job) -> Any:
        assert self.executor is not None
        self.running_seen.append(self.executor.admission.running)
        if job.code == "wait":
            self.loop = asyncio.get_running_loop()
            self.entered.set()
            await self.go.wait()
        return observed(stdout=job.code.encode())

    def release(self) -> None:
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self.go.set)


@pytest.mark.parametrize("wait", [0.0, 5.0])
def test_one_call_at_a_time_a_second_is_409_or_waits_its_turn(wait: float) -> None:
    gate = Gate()
    with service(gate, session_call_wait=wait) as (client, _, executor):
        gate.executor = executor
        sid = client.post("/sessions").json()["session_id"]
        assert executor.admission.running == 0  # an open, idle session holds no slot
        answers: dict[str, Any] = {}
        first = threading.Thread(
            target=lambda: answers.update(
                first=client.post(f"/sessions/{sid}/execute", json={"code": "wait"})
            )
        )
        first.start()
        assert gate.entered.wait(5)
        assert client.get(f"/sessions/{sid}").json()["state"] == "busy"
        if wait == 0:
            second = client.post(f"/sessions/{sid}/execute", json={"code": "second"})
            assert second.status_code == 409
            assert second.json()["detail"] == f"session {sid} is running another call"
            gate.release()
            first.join(5)
        else:
            second_thread = threading.Thread(
                target=lambda: answers.update(
                    second=client.post(f"/sessions/{sid}/execute", json={"code": "second"})
                )
            )
            second_thread.start()
            time.sleep(0.2)
            assert "second" not in answers  # waiting for the first
            gate.release()
            first.join(5)
            second_thread.join(5)
            assert answers["second"].json()["stdout"] == "second"
        assert answers["first"].json()["stdout"] == "wait"
        assert gate.running_seen and set(gate.running_seen) == {1}  # each call held one slot
        assert client.get(f"/sessions/{sid}").json()["state"] == "idle"


def test_the_session_limit_is_429_with_retry_after() -> None:
    with service(max_sessions=2, retry_after=3) as (client, fake, _):
        ids = [client.post("/sessions").json()["session_id"] for _ in range(2)]
        refused = client.post("/sessions")
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "3"
        assert refused.json()["detail"] == "overloaded: 2 sessions open: the maximum"
        assert len(sessions_alive(fake)) == 2
        client.delete(f"/sessions/{ids[0]}")
        assert client.post("/sessions").status_code == 201


def test_idle_sessions_expire_and_answer_410_with_nothing_left() -> None:
    expired_before = metric("boxed_sessions_expired_total", limit="idle")
    with service(session_check_interval=0.05) as (client, fake, executor):
        sid = client.post("/sessions", json={"idle_timeout": 0.3}).json()["session_id"]
        keep = client.post("/sessions", json={"idle_timeout": 60}).json()["session_id"]
        for _ in range(3):  # each call restarts the idle time
            time.sleep(0.15)
            assert client.post(f"/sessions/{sid}/execute", json={"code": "1"}).status_code == 200
        wait_until(lambda: len(sessions_alive(fake)) == 1)
        answer = client.post(f"/sessions/{sid}/execute", json={"code": "1"})
        assert answer.status_code == 410
        assert answer.json()["detail"] == f"session {sid} expired: idle for more than 0.3 s"
        assert client.get(f"/sessions/{keep}").status_code == 200
        assert executor.sessions.open_count == 1
    assert metric("boxed_sessions_expired_total", limit="idle") == expired_before + 1


def test_a_session_expires_at_its_lifetime_however_busy() -> None:
    with service(session_check_interval=0.05) as (client, fake, _):
        sid = client.post("/sessions", json={"max_lifetime": 0.4}).json()["session_id"]
        deadline = time.monotonic() + 5
        while (answer := client.post(f"/sessions/{sid}/execute", json={"code": "1"})).is_success:
            assert answer.json()["lifetime_left"] <= 0.4
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert answer.status_code == 410
        assert "expired: reached its maximum lifetime of 0.4 s" in answer.json()["detail"]
        wait_until(lambda: sessions_alive(fake) == [])


def test_x_session_id_runs_in_the_session_and_an_unknown_one_is_404() -> None:
    with service() as (client, fake, _):
        sid = client.post("/sessions").json()["session_id"]
        answer = client.post("/execute", json={"code": "in session"}, headers={"X-Session-ID": sid})
        assert answer.status_code == 200 and answer.headers["X-Session-ID"] == sid
        assert float(answer.headers["X-Session-Expires-In"]) > 0
        assert answer.json()["stdout"] == "in session" and "session_id" not in answer.json()
        (sandbox_id,) = sessions_alive(fake)
        assert [j.code for j in fake.sandboxes[sandbox_id].calls] == ["in session"]
        unknown = client.post("/execute", json={"code": "1"}, headers={"X-Session-ID": "nope"})
        assert unknown.status_code == 404
        assert len(sessions_alive(fake)) == 1  # never a new session
        for path, body in (("/execute/batch", {"items": [{"code": "1"}]}), ("/run_code", {})):
            refused = client.post(path, json=body or {"code": "1"}, headers={"X-Session-ID": sid})
            assert refused.status_code == 422
            assert refused.json()["detail"] == "X-Session-ID is accepted on /execute only"


def test_the_reaper_keeps_session_sandboxes_and_the_stop_removes_them() -> None:
    with service() as (client, fake, executor):
        for _ in range(3):
            client.post("/sessions")
        held = set(sessions_alive(fake))
        loop_result: dict[str, int] = {}

        async def reap_twice() -> None:
            loop_result["first"] = await executor.engine.reap()
            loop_result["second"] = await executor.engine.reap()

        client.portal.call(reap_twice)  # type: ignore[union-attr]
        assert loop_result == {"first": 0, "second": 0}
        assert set(sessions_alive(fake)) == held
        assert metric("boxed_sessions_open") == 3
        assert client.get("/readyz").json()["sessions_open"] == 3
    assert sessions_alive(fake) == [] and held <= set(fake.removed)
    assert metric("boxed_sessions_open") == 0


def test_the_fake_session_keeps_the_interface() -> None:
    with service() as (client, fake, _):
        client.post("/sessions")
        (sandbox_id,) = sessions_alive(fake)
        assert isinstance(fake.sandboxes[sandbox_id], SessionSandbox)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"language": "cpp"}, "Python only"),
        ({"language": "bash"}, "Python only"),
        ({"files": {"a.txt": "eA=="}}, "files"),
        ({"fetch_files": ["out.txt"]}, "fetch_files"),
        ({"cache": True}, "cache"),
        ({"isolation": "container"}, "isolation"),
    ],
)
def test_one_shot_only_fields_are_refused_in_a_session(extra: dict[str, Any], named: str) -> None:
    """A session is one Python interpreter: C code is never run as Python, files are never
    silently dropped, a stateful call is never cached; the session stays usable."""
    with service() as (client, fake, _):
        sid = client.post("/sessions", json={}).json()["session_id"]
        runs = len(fake.jobs)
        for answer in (
            client.post(f"/sessions/{sid}/execute", json={"code": "x = 1", **extra}),
            client.post("/execute", json={"code": "x = 1", **extra}, headers={"X-Session-ID": sid}),
        ):
            assert answer.status_code == 422, answer.text
            assert named in answer.json()["detail"]
        assert len(fake.jobs) == runs  # nothing ran
        assert client.post(f"/sessions/{sid}/execute", json={"code": "y = 2"}).status_code == 200


def test_a_session_of_an_earlier_run_of_this_service_is_410_session_lost() -> None:
    """After a restart the id is unknown, but it says it was made here: lost with the
    restart (infrastructure: no reward), not a 404 that reads as the caller's mistake. An id
    made by another instance (a call sent to the wrong node) stays a 404."""
    with service() as (client, _, executor):
        sid = client.post("/sessions").json()["session_id"]
        ids = executor.sessions.ids
        assert len(sid) == 32 and sid.startswith(ids.instance + ids.run)
        other_run = "000000" if ids.run != "000000" else "111111"
        earlier = ids.instance + other_run + sid[12:]
        lost = client.post(f"/sessions/{earlier}/execute", json={"code": "1"})
        assert lost.status_code == 410, lost.text
        assert lost.json()["failure"] == {"code": "session_lost", "retryable": False}
        assert "restarted" in lost.json()["detail"]
        elsewhere = ("0" if sid[0] != "0" else "1") + sid[1:]
        assert client.get(f"/sessions/{elsewhere}").status_code == 404
