"""How a used container leaves: removed once it has exited by itself, not killed on the way out.

A container whose runner finished exits within milliseconds; removing it then costs the engine
a delete only, where removing it a moment earlier costs a kill, its wait and the delete."""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Iterator

import pytest

from exec_server.sandbox import EXIT_WAIT, DockerSandboxes
from exec_server.settings import Settings
from tests.conftest import IMAGE

pytestmark = pytest.mark.docker


@pytest.fixture
def sandboxes() -> Iterator[DockerSandboxes]:
    settings = Settings(sandbox_image=IMAGE, instance=f"test-{uuid.uuid4().hex[:8]}", preload="")
    sandboxes = DockerSandboxes(settings)
    yield sandboxes
    left = sandboxes.list_ids()
    for container_id in left:
        sandboxes.remove(container_id)
    assert left == [], "containers left behind"


def engine_actions(sandboxes: DockerSandboxes, since: float) -> list[str]:
    events = sandboxes.api.events(
        since=int(since) - 1,
        until=int(time.time()) + 1,
        filters={"label": f"boxed.instance={sandboxes.settings.instance}"},
        decode=True,
    )
    return [event.get("Action") or event.get("status") for event in events]


def test_finished_containers_exit_by_themselves_before_their_removal(
    sandboxes: DockerSandboxes,
) -> None:
    # Under load (8 at once) a removal that does not wait catches about a quarter of the
    # containers still exiting, and the engine kills them.
    def one(_: int) -> bool:
        warm = sandboxes.create_warm()
        result = sandboxes.run(warm, "print(1)", "", 10)
        assert (result.status, result.stdout) == ("ok", b"1\n") and warm.exiting
        return sandboxes.discard(warm)

    since = time.time()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(one, range(24)))
    actions = engine_actions(sandboxes, since)
    assert actions.count("die") == actions.count("destroy") == 24, actions
    assert "kill" not in actions, actions


def test_container_that_did_not_finish_is_killed_at_once(sandboxes: DockerSandboxes) -> None:
    for code in (None, "import time\ntime.sleep(30)"):  # never used; timed out
        warm = sandboxes.create_warm()
        if code:
            assert sandboxes.run(warm, code, "", 0.5).status == "timeout"
        assert not warm.exiting
        started = time.monotonic()
        assert sandboxes.discard(warm)
        assert time.monotonic() - started < EXIT_WAIT, "waited for a container that would not exit"
        assert warm.id not in sandboxes.list_ids()
