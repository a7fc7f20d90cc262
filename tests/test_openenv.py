"""The OpenEnv environment served by openenv-core's own app over a real boxed service: driven
by openenv-core's real client over WebSocket (one episode per socket), over HTTP as the library
defines it (a fresh environment per /reset and /step request), and the example episode
runner's log graded end to end by ``python -m scorer grade``. Under real faults: a session's
container killed mid-episode, boxed stopped mid-episode, boxed unreachable, boxed at its
session limit, a grader that runs out of time: never a reward, always the failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from exec_server.client import Client
from tests.conftest import REPO, running_service
from tests.service import ServiceProcess, free_port

if not os.environ.get("CI"):  # CI installs the extra: there a missing one fails loudly
    pytest.importorskip("openenv.core", reason="pip install boxed[openenv]")
from websockets.sync.client import connect as ws_connect  # noqa: E402

from boxed_openenv import CodeAction, EnvUnavailable  # noqa: E402
from boxed_openenv.client import BoxedEnvClient  # noqa: E402
from boxed_openenv.environment import BoxedCodeEnvironment  # noqa: E402

pytestmark = pytest.mark.docker


def session_containers(instance: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=boxed.instance={instance}"]
        + ["--filter", "name=-session-"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def until_no_session(instance: str, seconds: float = 20) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := session_containers(instance)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def session_container(session_id: str) -> str:
    """The container of a boxed session, found by its label."""
    out = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"label=boxed.session={session_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    (container,) = out.stdout.split()
    return container


@dataclass
class EnvServer:
    """A running ``python -m boxed_openenv`` and where its log goes."""

    url: str
    log: Path


@contextmanager
def env_server_for(boxed_url: str, log: Path, *options: str) -> Iterator[EnvServer]:
    """``python -m boxed_openenv`` over ``boxed_url`` with ``options``, until the block ends."""
    port = free_port()
    argv = ["--port", str(port), "--boxed-url", boxed_url, *options]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "boxed_openenv", *argv],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            try:
                if httpx.get(f"{url}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield EnvServer(url, log)
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def boxed() -> Iterator[ServiceProcess]:
    """One real boxed for the module, with room for two sessions (to fill it in a test), and
    no warm session sandboxes: the tests count session containers."""
    with running_service(
        BOXED_POOL_SIZE="1",
        BOXED_STRICT_POOL_SIZE="0",
        BOXED_MAX_SESSIONS="2",
        BOXED_SESSION_POOL_SIZE="0",
    ) as service:
        yield service


@pytest.fixture(scope="module")
def served(boxed: ServiceProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvServer]:
    log = tmp_path_factory.mktemp("openenv") / "server.log"
    with env_server_for(boxed.url, log) as server:
        yield server


@pytest.fixture(scope="module")
def env_server(served: EnvServer, boxed: ServiceProcess) -> tuple[str, str]:
    """(URL of the environment server, the boxed instance behind it)."""
    return served.url, boxed.instance


@pytest.fixture(scope="module")
def without_boxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvServer]:
    """An environment server whose boxed URL has nothing listening (boxed is down)."""
    log = tmp_path_factory.mktemp("openenv-down") / "server.log"
    with env_server_for(f"http://127.0.0.1:{free_port()}", log) as server:
        yield server


def test_an_episode_over_the_websocket_client_keeps_state_and_grades_the_answer(
    env_server: tuple[str, str],
) -> None:
    url, instance = env_server
    task = {"id": "t", "prompt": "2**10?", "answer": "1024"}
    with BoxedEnvClient(base_url=url).sync() as env:
        reset = env.reset(task=task)
        assert reset.observation.prompt == "2**10?" and not reset.done
        assert len(session_containers(instance)) == 1
        step = env.step(CodeAction(code="x = 2 ** 10"))
        assert (step.observation.status, step.reward, step.done) == ("ok", 0.0, False)
        step = env.step(CodeAction(code="print(x)\nprint('reward: 1.0')"))
        assert step.observation.stdout == "1024\nreward: 1.0\n" and step.reward == 0.0
        state = env.state()
        assert state.step_count == 2 and state.task_id == "t" and state.session_id
        wrong = env.step(CodeAction(answer="1000"))
        assert wrong.done and wrong.reward == 0.0 and wrong.observation.correct is False
        env.reset(task=task)  # a new episode: a new session, the old one deleted
        assert env.step(CodeAction(code="print('x' in globals())")).observation.stdout == (
            "False\n"
        )
        right = env.step(CodeAction(answer="2^{10}"))
        assert right.done and right.reward == 1.0 and right.observation.correct
    assert until_no_session(instance) == []  # close() deleted the session


def test_a_lost_session_ends_the_episode_with_the_reason(env_server: tuple[str, str]) -> None:
    url, instance = env_server
    with BoxedEnvClient(base_url=url).sync() as env:
        env.reset(task={"tests": "assert f() == 1"})
        step = env.step(CodeAction(code="import sys; sys.exit(2)"))
        assert step.done and step.observation.error == "the interpreter exited with code 2"
        # The code ended its own session: its result, paid as such (never masked).
        assert (step.reward, step.observation.outcome, step.observation.failure) == (
            0.0,
            "code",
            None,
        )
        after = env.step(CodeAction(answer="def f(): return 1"))
        assert after.done and after.reward == 0.0 and after.observation.outcome == "code"
        env.reset(task={"tests": "assert f() == 1"})
        passed = env.step(CodeAction(answer="def f():\n    return 1"))
        assert passed.reward == 1.0
        env.reset(task={"tests": "assert f() == 1"})
        escaped = env.step(CodeAction(answer="import os\nos._exit(0)"))  # skips the tests
        assert escaped.done and escaped.reward == 0.0 and escaped.observation.correct is False
        env.reset(task={"tests": "assert f() == 1"})
        nothing = env.step(CodeAction())
        assert nothing.observation.error == "no code and no answer" and not nothing.done
    assert until_no_session(instance) == []


FORGER = """import os, sys
frame, seen = sys._getframe(), []
while frame is not None:  # every constant of every frame: the program's text as compiled
    seen += [c for c in frame.f_code.co_consts if isinstance(c, str)]
    frame = frame.f_back
for text in seen:
    if len(text) == 32 and all(ch in "0123456789abcdef" for ch in text):
        print(text, flush=True)
os._exit(0)
"""


def test_an_answer_that_prints_what_it_reads_from_the_program_gets_no_reward(
    env_server: tuple[str, str],
) -> None:
    """The tests' verdict is /judge's structured answer, never a token in the program's text:
    an answer that prints every string its frames hold (a token among them) and exits 0
    before the tests run is wrong, not right."""
    url, instance = env_server
    with BoxedEnvClient(base_url=url).sync() as env:
        env.reset(task={"tests": "assert f() == 1"})
        forged = env.step(CodeAction(answer=FORGER))
        assert forged.done and forged.observation.outcome == "code"
        assert forged.reward == 0.0 and forged.observation.correct is False
    assert until_no_session(instance) == []


def test_http_reset_and_step_build_a_fresh_environment_per_request(
    env_server: tuple[str, str],
) -> None:
    url, instance = env_server
    with httpx.Client(base_url=url, timeout=60) as http:
        reset = http.post("/reset", json={"task": {"prompt": "p", "answer": "1"}}).json()
        assert reset["observation"]["prompt"] == "p" and reset["done"] is False
        step = http.post("/step", json={"action": {"code": "y = 6 * 7\nprint(y)"}}).json()
        assert step["observation"]["stdout"] == "42\n" and step["reward"] == 0.0
        again = http.post("/step", json={"action": {"code": "print(y)"}}).json()
        assert "NameError" in again["observation"]["stderr"]  # a fresh environment
        bad = http.post("/step", json={"action": {"code": "1", "cmd": "x"}})
        assert bad.status_code == 422
        bad_task = http.post("/reset", json={"task": {"prompt": "p", "gold": "1"}})
        assert bad_task.status_code == 422 and bad_task.json()["outcome"] is None
        assert bad_task.json()["errors"][0]["loc"] == ["body", "task", "gold"]
        schema = http.get("/schema").json()
        assert {"code", "answer", "timeout"} <= set(schema["action"]["properties"])
        assert {"stdout", "stderr", "exit_code", "status"} <= set(
            schema["observation"]["properties"]
        )
        assert http.get("/health").json()["status"] == "healthy"
    assert until_no_session(instance) == []


def test_the_example_log_is_graded_end_to_end(
    env_server: tuple[str, str], tmp_path: pytest.TempPathFactory
) -> None:
    url, _ = env_server
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "examples/openenv_episodes.py", "--env-url", url],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "[START] task=sum-of-squares env=boxed_code model=scripted"
    assert lines[1].startswith("[STEP] step=1 action=squares = [i * i for i in range(1, 11)] ")
    assert lines[1].endswith(" reward=0.00 done=false outcome=code failure=null error=null")
    assert lines[4] == (
        "[END] success=true steps=3 score=1.000 rewards=0.00,0.00,1.00 outcome=code"
    )
    assert all(line.startswith(("[START] ", "[STEP] ", "[END] ")) for line in lines)
    log = tmp_path / "episodes.log"  # type: ignore[operator]
    log.write_text(run.stdout)
    graded = subprocess.run(
        [sys.executable, "-m", "scorer", "grade", str(log), "--rows"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert graded.returncode == 0, graded.stderr
    assert "scorer:" not in graded.stderr  # every line read, no problem reported
    rows = {row["task"]: row for row in map(json.loads, graded.stdout.splitlines())}
    assert {task: row["success"] for task, row in rows.items()} == {
        "sum-of-squares": True,
        "primes": True,
        "fibonacci": True,
        "half": False,
        "spin": False,
    }
    assert rows["spin"]["error_messages"] == ["wall-clock limit of 1 s reached"]
    assert all(row["complete"] for row in rows.values())
    assert {row["outcome"] for row in rows.values()} == {"code"}  # a time limit is the code's


# --- under faults: never a reward for a failure that is not the code's ---------------------


def test_a_killed_sandbox_ends_the_episode_with_no_reward(served: EnvServer) -> None:
    with BoxedEnvClient(base_url=served.url).sync() as env:
        env.reset(task={"id": "t", "prompt": "1?", "answer": "1"})
        assert env.step(CodeAction(code="x = 1")).reward == 0.0
        session_id = env.state().session_id
        assert session_id
        kill = ["docker", "kill", session_container(session_id)]
        subprocess.run(kill, check=True, capture_output=True)
        lost = env.step(CodeAction(code="print(x)", answer="1"))  # a right answer, never graded
        assert (lost.reward, lost.done, lost.observation.status) == (None, True, "lost")
        assert lost.observation.outcome == "infrastructure" and lost.observation.correct is None
        failure = lost.observation.failure
        assert failure is not None and (failure.code, failure.retryable) == ("session_lost", False)
        later = env.step(CodeAction(answer="1"))  # the episode stays over, still no reward
        assert later.reward is None and later.done and later.observation.failure == failure
        env.reset(task={"id": "t", "prompt": "1?", "answer": "1"})  # a new episode pays again
        assert env.step(CodeAction(answer="1")).reward == 1.0


@pytest.mark.parametrize(
    ("path", "body"),
    [("/reset", {"task": {"prompt": "p", "answer": "1"}}), ("/step", {"action": {"code": "1"}})],
)
def test_http_answers_503_with_retry_after_when_boxed_is_down(
    without_boxed: EnvServer, path: str, body: dict[str, object]
) -> None:
    start = time.monotonic()
    answer = httpx.post(f"{without_boxed.url}{path}", json=body, timeout=30)
    assert time.monotonic() - start < 10
    assert answer.status_code == 503 and int(answer.headers["Retry-After"]) >= 1
    problem = answer.json()
    assert problem["outcome"] == "infrastructure" and problem["errors"] == []
    assert problem["failure"] == {"code": "service_unreachable", "retryable": True}
    assert "Connection refused" in problem["detail"]


def test_the_websocket_and_the_client_get_a_typed_error_when_boxed_is_down(
    without_boxed: EnvServer,
) -> None:
    warning = "boxed could not act (service_unreachable)"
    logged = without_boxed.log.read_text().count(warning)
    ws_url = without_boxed.url.replace("http://", "ws://") + "/ws"
    with ws_connect(ws_url) as ws:
        for message in ({"type": "reset", "data": {}}, {"type": "step", "data": {"code": "1"}}):
            start = time.monotonic()
            ws.send(json.dumps(message))
            frame = json.loads(ws.recv(timeout=30))
            assert time.monotonic() - start < 10
            assert frame["type"] == "error"
            data = frame["data"]  # openenv-core's error message, with the failure added
            assert data["code"] == "EXECUTION_ERROR" and data["outcome"] == "infrastructure"
            assert data["failure"] == {"code": "service_unreachable", "retryable": True}
            assert data["retry_after"] >= 1
    with BoxedEnvClient(base_url=without_boxed.url).sync() as env:
        with pytest.raises(EnvUnavailable) as caught:
            env.reset()
        assert caught.value.failure.code == "service_unreachable" and caught.value.failure.retryable
        assert caught.value.outcome == "infrastructure" and caught.value.retry_after >= 1
        with pytest.raises(EnvUnavailable):
            env.step(CodeAction(code="1"))
    # Both sockets closed cleanly (openenv-core's close of a socket its client had closed
    # logged a WebSocketDisconnect traceback at once): each failure logged once with its code.
    time.sleep(1)
    log = without_boxed.log.read_text()
    assert "Traceback" not in log and "WebSocketDisconnect" not in log, log
    assert log.count(warning) == logged + 4


def test_boxed_at_its_session_limit_answers_503_with_retry_after(
    served: EnvServer, boxed: ServiceProcess
) -> None:
    with Client(boxed.url) as client, client.session(), client.session():  # the limit: 2
        start = time.monotonic()
        answer = httpx.post(f"{served.url}/reset", json={}, timeout=30)
        assert time.monotonic() - start < 10
    assert answer.status_code == 503 and int(answer.headers["Retry-After"]) >= 1
    assert answer.json()["failure"] == {"code": "overloaded", "retryable": True}


def test_a_grader_that_runs_out_of_time_gives_no_reward(boxed: ServiceProcess) -> None:
    with Client(boxed.url) as client:
        env = BoxedCodeEnvironment(client, grade_timeout=0.001)
        try:
            env.reset(task={"id": "t", "prompt": "p", "answer": "1"})
            obs = env.step(CodeAction(answer="sin(x)**2 + cos(x)**2"))  # needs sympy: timed out
            assert (obs.reward, obs.done, obs.outcome, obs.correct) == (None, True, "grader", None)
            assert obs.failure is not None and obs.failure.code == "grader_timeout"
            assert env.step(CodeAction(answer="1")).reward is None  # the episode is over
        finally:
            env.close()


def test_boxed_stopped_mid_episode_is_a_typed_error_and_ends_the_episode(
    served: EnvServer, boxed: ServiceProcess
) -> None:
    """Last: it stops and restarts the module's boxed."""
    with BoxedEnvClient(base_url=served.url).sync() as env:
        env.reset()
        env.step(CodeAction(code="x = 1"))
        boxed.stop()
        try:
            start = time.monotonic()
            with pytest.raises(EnvUnavailable) as caught:
                env.step(CodeAction(code="print(x)"))
            assert time.monotonic() - start < 10
            assert caught.value.failure.code == "service_unreachable"
            after = env.step(CodeAction(code="print(x)"))  # the session's state is gone
            assert after.reward is None and after.done and after.observation.status == "lost"
            assert after.observation.failure is not None
            assert after.observation.failure.code == "service_unreachable"
        finally:
            boxed.start()
        env.reset()  # boxed is back: a new episode runs
        assert env.step(CodeAction(code="print(6 * 7)")).observation.stdout == "42\n"
