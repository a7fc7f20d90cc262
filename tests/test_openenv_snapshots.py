"""Episodes that start from a saved state, and shell steps, through openenv-core's real
server (``python -m boxed_openenv --max-forks``) and client over a real boxed: a snapshot step
forks the episode's session, a later episode's ``reset(snapshot=id)`` forks that, the snapshot
stays as it was taken, and the server deletes its snapshots when it stops."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.conftest import running_service
from tests.service import ServiceProcess

if not os.environ.get("CI"):  # CI installs the extra: there a missing one fails loudly
    pytest.importorskip("openenv.core", reason="pip install boxed[openenv]")

from boxed_openenv import CodeAction  # noqa: E402
from boxed_openenv.client import BoxedEnvClient, EnvServerError  # noqa: E402
from tests.test_openenv import env_server_for, session_containers, until_no_session  # noqa: E402

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def boxed() -> Iterator[ServiceProcess]:
    """A real boxed (runc: forks need it) with no warm session sandboxes: the tests count
    session containers."""
    with running_service(
        BOXED_POOL_SIZE="1", BOXED_STRICT_POOL_SIZE="0", BOXED_SESSION_POOL_SIZE="0"
    ) as service:
        yield service


def test_an_episode_resets_from_a_snapshot_and_runs_shell_steps(
    boxed: ServiceProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    log = tmp_path_factory.mktemp("openenv-snap") / "server.log"
    task = {"id": "t", "prompt": "x + 1?", "answer": "42"}
    with env_server_for(boxed.url, log, "--max-forks", "4") as server:
        with BoxedEnvClient(base_url=server.url).sync() as first:
            first.reset(task=task)
            assert first.step(CodeAction(code="x = 41")).observation.status == "ok"
            taken = first.step(CodeAction(snapshot=True))
            snapshot_id = taken.observation.snapshot_id
            assert snapshot_id and taken.reward == 0.0 and not taken.done
            first.step(CodeAction(code="x = 0"))  # after the snapshot: not in it
            for _ in range(2):  # each reset forks the snapshot anew, which stays as taken
                with BoxedEnvClient(base_url=server.url).sync() as later:
                    later.reset(task=task, snapshot=snapshot_id)
                    assert later.state().snapshot == snapshot_id
                    seen = later.step(CodeAction(code="print(x + 1)\nx = -1"))
                    assert seen.observation.stdout == "42\n"
                    cd = later.step(CodeAction(shell="mkdir -p d && cd d && export A=7"))
                    assert cd.observation.status == "ok" and cd.reward == 0.0
                    shell = later.step(CodeAction(shell='echo "$A ${PWD##*/}"'))
                    assert shell.observation.stdout == "7 d\n" and later.state().shell_session_id
                    right = later.step(CodeAction(answer="42"))
                    assert right.done and right.reward == 1.0
            assert first.step(CodeAction(code="print(x)")).observation.stdout == "0\n"
            with pytest.raises(EnvServerError):
                first.reset(task=task, snapshot="not-a-snapshot")
        # the episodes' sessions are deleted; the snapshot's is kept while the server runs
        assert len(until_no_session_but(boxed.instance, 1)) == 1
    assert until_no_session(boxed.instance) == []  # the server deleted it as it stopped


def test_a_snapshot_without_forks_is_refused_and_the_episode_goes_on(
    boxed: ServiceProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    log = tmp_path_factory.mktemp("openenv-nosnap") / "server.log"
    with env_server_for(boxed.url, log) as server:
        with BoxedEnvClient(base_url=server.url).sync() as env:
            env.reset()
            refused = env.step(CodeAction(snapshot=True))
            assert refused.observation.status == "refused" and not refused.done
            assert refused.reward == 0.0 and refused.observation.outcome == "code"
            assert "max_forks 0" in (refused.observation.error or "")
            assert env.step(CodeAction(code="print(1)")).observation.stdout == "1\n"
    assert until_no_session(boxed.instance) == []


def test_a_step_takes_one_thing_to_run() -> None:
    with pytest.raises(ValueError, match="one of them"):
        CodeAction(code="1", shell="true")
    with pytest.raises(ValueError, match="no answer"):
        CodeAction(snapshot=True, answer="1")


def until_no_session_but(instance: str, keep: int, seconds: float = 20) -> list[str]:
    """The session containers once at most ``keep`` are left (or after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while len(left := session_containers(instance)) > keep and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
