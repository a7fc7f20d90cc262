"""The OpenEnv environment served by openenv-core's own app over a real boxed service: driven
by openenv-core's real client over WebSocket (one episode per socket), over HTTP as the library
defines it (a fresh environment per /reset and /step request), and the example episode
runner's log graded end to end by ``python -m scorer grade``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import REPO, running_service
from tests.service import free_port

if not os.environ.get("CI"):  # CI installs the extra: there a missing one fails loudly
    pytest.importorskip("openenv.core", reason="pip install boxed[openenv]")
from boxed_openenv import CodeAction  # noqa: E402
from boxed_openenv.client import BoxedEnvClient  # noqa: E402

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


@pytest.fixture(scope="module")
def env_server() -> Iterator[tuple[str, str]]:
    """(URL of the environment server, the boxed instance behind it)."""
    with running_service(BOXED_POOL_SIZE="1", BOXED_STRICT_POOL_SIZE="0") as boxed:
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "boxed_openenv", "--port", str(port), "--boxed-url", boxed.url],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None and time.monotonic() < deadline
                try:
                    if httpx.get(f"{url}/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            yield url, boxed.instance
        finally:
            proc.terminate()
            proc.wait(30)


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
        after = env.step(CodeAction(answer="def f(): return 1"))
        assert after.done and after.reward == 0.0
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
    assert lines[1].endswith(" reward=0.00 done=false error=null")
    assert lines[4] == "[END] success=true steps=3 score=1.000 rewards=0.00,0.00,1.00"
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
