"""How a used container leaves: removed once it has exited by itself, not killed on the way out.

A container-isolation sandbox's supervisor exits right after its one run; removing the
container then costs the engine a delete only, where removing it a moment earlier costs a kill,
its wait and the delete."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

from exec_server.backends.base import Job
from exec_server.backends.docker import EXIT_WAIT, DockerBackend
from exec_server.settings import Settings
from exec_server.verdict import RunLimits, decide
from tests.conftest import IMAGE

pytestmark = pytest.mark.docker


@pytest.fixture
def backend() -> Iterator[DockerBackend]:
    settings = Settings(sandbox_image=IMAGE, instance=f"test-{uuid.uuid4().hex[:8]}", preload="")
    backend = DockerBackend(settings, reuse=False)
    yield backend
    left = asyncio.run(backend.list_owned())
    for container_id in left:
        asyncio.run(backend.remove(container_id))
    assert left == [], "containers left behind"


def engine_actions(backend: DockerBackend, since: float) -> list[str]:
    events = backend.api.events(
        since=int(since) - 1,
        until=int(time.time()) + 1,
        filters={"label": f"boxed.instance={backend.settings.instance}"},
        decode=True,
    )
    return [event.get("Action") or event.get("status") for event in events]


def job(code: str, wall: float = 10) -> Job:
    return Job(code=code, stdin="", limits=RunLimits(wall, wall, 256, 65536))


def test_finished_containers_exit_by_themselves_before_their_removal(
    backend: DockerBackend,
) -> None:
    # Under load (8 at once) a removal that does not wait catches about a quarter of the
    # containers still exiting, and the engine kills them.
    async def one() -> bool:
        sandbox = await backend.create_warm(256)
        result = decide(await sandbox.run(job("print(1)")), job("").limits)
        assert (result.status, result.stdout) == ("ok", b"1\n")
        assert not sandbox.can_reuse(result)
        return await sandbox.discard()

    async def all_of_them() -> list[bool]:
        return await asyncio.gather(*(one() for _ in range(24)))

    since = time.time()
    assert all(asyncio.run(all_of_them()))
    actions = engine_actions(backend, since)
    assert actions.count("die") == actions.count("destroy") == 24, actions
    assert "kill" not in actions, actions


def test_container_that_did_not_finish_is_removed_at_once(backend: DockerBackend) -> None:
    async def scenario() -> None:
        for code in (None, "import time\ntime.sleep(30)"):  # never used; timed out
            sandbox = await backend.create_warm(256)
            if code:
                result = decide(await sandbox.run(job(code, wall=0.5)), job("").limits)
                assert result.status == "timeout"
            started = time.monotonic()
            assert await sandbox.discard()
            assert time.monotonic() - started < EXIT_WAIT, "waited for a container not exiting"
            assert sandbox.id not in await backend.list_owned()

    asyncio.run(scenario())
