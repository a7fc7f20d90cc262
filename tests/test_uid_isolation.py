"""Per-user kernel limits are not shared between sandboxes (issue #28, class 5): a session that
holds more pipe buffer pages than ``fs.pipe-user-pages-soft`` and every inotify instance a user
may have cannot shrink another sandbox's pipes or change its verdict, in both isolation modes,
over the pod stand-in and under gVisor (whose kernel is per sandbox anyway); with the deprecated
shared uid it can, which is what the probe detects. And a range of one uid: a second sandbox
waits for the first's uid (503 + Retry-After), which its removal gives back."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from exec_server.backends.docker import UID_LIST_TTL, DockerBackend
from exec_server.backends.host_uids import UidsExhausted
from exec_server.settings import Settings, UidRange
from tests.conftest import running_service
from tests.runtimes import Variant
from tests.service import IMAGE

pytestmark = pytest.mark.docker
SOFT_PAGES = int(Path("/proc/sys/fs/pipe-user-pages-soft").read_text())
INOTIFY_INSTANCES = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
# Pipes grown to 1 MiB (256 pages) until the user's pages pass the soft limit, read ends
# closed to stay under RLIMIT_NOFILE; then every inotify instance the user may have.
HOLDER = f"""
import ctypes, fcntl, os
held = []
for _ in range({SOFT_PAGES // 256 + 24}):
    r, w = os.pipe()
    os.close(r)
    try:
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ: refused once the user is over the limit
    except OSError:
        pass
    held.append(w)
libc = ctypes.CDLL(None, use_errno=True)
instances = [libc.inotify_init1(0) for _ in range({INOTIFY_INSTANCES})]
pages = sum(fcntl.fcntl(w, 1032) for w in held) // 4096  # F_GETPIPE_SZ
print(pages, sum(fd >= 0 for fd in instances))
"""
# A correct program that fills a fresh pipe of the default 64 KiB before reading it: on a
# shrunken pipe its write blocks until the time limit.
CHECKER = """
import ctypes, fcntl, os
r, w = os.pipe()
size = fcntl.fcntl(w, 1032)
os.write(w, b"x" * 65536)
inotify = ctypes.CDLL(None, use_errno=True).inotify_init1(0)
print(size, len(os.read(r, 1 << 17)), inotify >= 0)
"""


def uid_range(size: int) -> str:
    """A range of this test's own: no other service of the host holds its uids."""
    first = random.randrange(1_900_000_000, 2_000_000_000)
    return f"{first}-{first + size - 1}"


def hold_then_check(url: str) -> tuple[str, dict[str, object]]:
    """The holder's report (held in a session) and the checker's answer meanwhile."""
    with httpx.Client(base_url=url, timeout=60) as http:
        opened = http.post("/sessions", json={})
        assert opened.status_code == 201, opened.text
        sid = opened.json()["session_id"]
        try:
            held = http.post(f"/sessions/{sid}/execute", json={"code": HOLDER}).json()
            assert held["status"] == "ok", held
            checked = http.post("/execute", json={"code": CHECKER, "timeout": 3}).json()
        finally:
            http.delete(f"/sessions/{sid}")
    return held["stdout"], checked


def test_a_holder_cannot_shrink_another_sandboxs_pipes_or_take_its_inotify(
    boxed_service: str, request: pytest.FixtureRequest
) -> None:
    """On the suite's shared services (the default range, shared with every other service of
    the host through the lock directory)."""
    variant: Variant = request.node.callspec.params["boxed_service"]
    held, checked = hold_then_check(boxed_service)
    pages, instances = (int(n) for n in held.split())
    if variant.runtime == "runc":  # the probe is real: the holder's uid is over both limits
        assert pages > SOFT_PAGES and instances == INOTIFY_INSTANCES, held
    assert (checked["status"], checked["stdout"]) == ("ok", "65536 65536 True\n"), checked


def test_a_shared_uid_lets_the_holder_shrink_anothers_pipes() -> None:
    """The deprecated BOXED_SANDBOX_USER: one uid for every sandbox, and the correct checker
    times out on an 8 KiB pipe. What the range prevents, shown on runc (process mode)."""
    uid = random.randrange(30000, 40000)
    with running_service(
        BOXED_SANDBOX_USER=f"{uid}:{uid}", BOXED_POOL_SIZE="1", BOXED_STRICT_POOL_SIZE="0"
    ) as service:
        _, checked = hold_then_check(service.url)
    assert (checked["status"], checked["outcome"]) == ("timeout", "code"), checked


def test_a_range_of_one_serves_one_sandbox_at_a_time() -> None:
    """Every uid held: the next sandbox is refused as the service's failure (503 with
    Retry-After, ``sandbox_unavailable``, never the code's verdict); the removal of the
    sandbox that held it gives the uid back."""
    with (
        running_service(
            BOXED_SANDBOX_UIDS=uid_range(1), BOXED_POOL_SIZE="0", BOXED_STRICT_POOL_SIZE="0"
        ) as service,
        httpx.Client(base_url=service.url, timeout=60) as http,
    ):
        first = http.post("/sessions", json={})
        assert first.status_code == 201, first.text
        second = http.post("/sessions", json={})
        assert second.status_code == 503 and second.headers["Retry-After"], second.text
        assert second.json()["failure"] == {"code": "sandbox_unavailable", "retryable": True}
        assert "BOXED_SANDBOX_UIDS" in second.text
        assert http.delete(f"/sessions/{first.json()['session_id']}").status_code == 204
        third = http.post("/sessions", json={})
        assert third.status_code == 201, third.text
        assert http.delete(f"/sessions/{third.json()['session_id']}").status_code == 204


def test_a_uid_an_orphan_container_carries_is_not_handed_out(tmp_path: Path) -> None:
    """A crashed service's lock dies with it, its containers do not (until reaped): a uid a
    container of the engine is labelled with is skipped, and free again once it is gone."""
    uids = UidRange.parse(uid_range(1))
    backend = DockerBackend(
        Settings(sandbox_uids=str(uids), sandbox_uid_dir=str(tmp_path), instance="t-orphan"),
        reuse=False,
    )
    orphan = subprocess.run(
        ["docker", "create", "--label", "boxed.service=boxed", "--label", f"boxed.uid={uids.first}"]
        + ["--label", "boxed.instance=t-orphan", IMAGE, "true"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        with pytest.raises(UidsExhausted):
            backend.lease_uid()
    finally:
        subprocess.run(["docker", "rm", "-f", orphan], capture_output=True, check=True)
    time.sleep(UID_LIST_TTL)
    lease = backend.lease_uid()
    assert lease.uid == uids.first
    lease.release()
