"""The host uid allocator (``exec_server/backends/host_uids.py``): a uid per sandbox, never
handed to two holders on the host at once (two allocators, two processes), back when released
or when its holder dies, refused ranges that meet the host's users, and the settings."""

from __future__ import annotations

import multiprocessing
import os
import signal
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from exec_server.backends.host_uids import (
    HostUids,
    SharedUid,
    UidRangeError,
    UidsExhausted,
    check_clear,
    sandbox_uids,
    sandboxes_at_once,
)
from exec_server.settings import MAX_SANDBOX_UID, MAX_SANDBOX_UIDS, Settings, UidRange

RANGE = UidRange(500000, 500015)


def test_every_uid_of_the_range_once_then_exhausted(tmp_path: Path) -> None:
    uids = HostUids(RANGE, tmp_path)
    leases = [uids.acquire() for _ in range(len(RANGE))]
    assert sorted(lease.uid for lease in leases) == list(range(RANGE.first, RANGE.last + 1))
    assert all(lease.gid == lease.uid for lease in leases)
    with pytest.raises(UidsExhausted, match="500000-500015"):
        uids.acquire()
    leases[3].release()
    leases[3].release()  # idempotent
    assert uids.acquire().uid == leases[3].uid  # released: the only one free


def test_a_release_frees_the_uid_while_a_forked_child_lives(tmp_path: Path) -> None:
    """A child forked while a uid was held (a worker pool) shares its lock file: the release
    still frees the uid for others."""
    uids = HostUids(UidRange(500000, 500000), tmp_path)
    lease = uids.acquire()
    child = os.fork()
    if child == 0:
        signal.pause()
        os._exit(0)
    try:
        lease.release()
        assert HostUids(RANGE, tmp_path).acquire(in_use=lambda uid: uid != 500000).uid == 500000
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def test_two_allocators_in_one_process_never_share(tmp_path: Path) -> None:
    """The lock is the open file's, not the process's: a second allocator (another backend
    of the same service) skips the first one's uids."""
    first, second = HostUids(RANGE, tmp_path), HostUids(RANGE, tmp_path)
    mine = {first.acquire().uid for _ in range(10)}
    theirs = {second.acquire().uid for _ in range(len(RANGE) - 10)}
    assert not mine & theirs and len(mine | theirs) == len(RANGE)
    with pytest.raises(UidsExhausted):
        second.acquire()


def _hold(directory: str, count: int, start: Barrier, out: Connection) -> None:
    """A child process: take ``count`` uids (all children at once), report them, hold them
    until killed."""
    uids = HostUids(RANGE, Path(directory))
    start.wait()
    held = []
    for _ in range(count):
        try:
            held.append(uids.acquire().uid)
        except UidsExhausted:
            break
    out.send(held)
    signal.pause()


def test_two_processes_never_share_a_uid_and_a_dead_ones_come_back(tmp_path: Path) -> None:
    """Two services taking uids at the same moment split the range between them; killed
    (SIGKILL: no clean-up), a service's uids are free again, with nothing to clean."""
    context = multiprocessing.get_context("fork")
    start = context.Barrier(2)
    children = []
    for _ in range(2):
        receive, send = context.Pipe(duplex=False)
        child = context.Process(target=_hold, args=(str(tmp_path), len(RANGE), start, send))
        child.start()
        children.append((child, receive))
    try:
        got = [receive.recv() for _, receive in children]
        assert not set(got[0]) & set(got[1]), got
        assert sorted(got[0] + got[1]) == list(range(RANGE.first, RANGE.last + 1))
        here = HostUids(RANGE, tmp_path)
        with pytest.raises(UidsExhausted):
            here.acquire()
        dead, _ = children[0]
        os.kill(dead.pid, signal.SIGKILL)
        dead.join(10)
        back = {here.acquire().uid for _ in range(len(got[0]))}
        assert back == set(got[0])  # the dead one's, and only those
        with pytest.raises(UidsExhausted):
            here.acquire()
    finally:
        for child, _ in children:
            child.kill()
            child.join(10)


def test_a_uid_a_live_container_still_carries_is_skipped(tmp_path: Path) -> None:
    """A crashed service's container outlives its lock until reaped: its uid is not handed
    out while the engine still lists it."""
    uids = HostUids(UidRange(500000, 500001), tmp_path)
    lease = uids.acquire(in_use=lambda uid: uid == 500000)
    assert lease.uid == 500001
    with pytest.raises(UidsExhausted):
        uids.acquire(in_use=lambda uid: uid == 500000)
    assert uids.held == 1  # the skipped one is not kept


def test_ranges_meeting_the_hosts_users_or_subordinate_ids_are_refused(tmp_path: Path) -> None:
    passwd, group = tmp_path / "passwd", tmp_path / "group"
    subuid, subgid = tmp_path / "subuid", tmp_path / "subgid"
    passwd.write_text("root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n")
    group.write_text("root:x:0:\nbuilders:x:300000:\n")
    subuid.write_text("# comment\nalice:100000:65536\n")
    subgid.write_text("alice:100000:65536\n")
    files = {"accounts": (passwd, group), "subordinate": (subuid, subgid)}
    check_clear(UidRange(165536, 299999), **files)  # between them: clear
    with pytest.raises(UidRangeError, match=r"'alice' \(100000-165535\) in .*subuid"):
        check_clear(UidRange(165000, 170000), **files)
    with pytest.raises(UidRangeError, match=r"'builders' \(300000\) in .*group"):
        check_clear(UidRange(299999, 300000), **files)
    with pytest.raises(UidRangeError, match="'nobody'"):
        check_clear(UidRange(65534, 65534), **files)


def test_the_settings_of_the_range() -> None:
    assert Settings(sandbox_uids="300000-300009").sandbox_uid_range == UidRange(300000, 300009)
    assert len(Settings(sandbox_uids="300000").sandbox_uid_range) == 1
    default = Settings().sandbox_uid_range
    assert default.first > 600100000 and len(default) == 65536  # above useradd's subuids
    for bad in ("0-10", "10-9", f"1-{MAX_SANDBOX_UID + 1}", f"1000-{1000 + MAX_SANDBOX_UIDS}"):
        with pytest.raises(ValueError, match="BOXED_SANDBOX_UIDS"):
            Settings(sandbox_uids=bad)
    with pytest.raises(ValueError, match="BOXED_SANDBOX_UIDS or the deprecated"):
        Settings(sandbox_uids="300000-300009", sandbox_user="10001")


def test_the_deprecated_user_is_one_shared_uid_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="boxed.uids"):
        shared = sandbox_uids(Settings(sandbox_user="30001:30002"))
    assert isinstance(shared, SharedUid)
    assert {(shared.acquire().uid, shared.acquire().gid) for _ in range(3)} == {(30001, 30002)}
    assert "BOXED_SANDBOX_USER is deprecated" in caplog.text


def test_a_range_smaller_than_the_service_is_warned_of(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    small = Settings(
        sandbox_uids="700000000-700000003",
        sandbox_uid_dir=str(tmp_path),
        max_sessions=2,
        pool_size=1,
    )
    with caplog.at_level("WARNING", logger="boxed.uids"):
        uids = sandbox_uids(small)
    assert isinstance(uids, HostUids) and len(uids.uids) == 4
    assert f"holds 4 uids but this service may hold {sandboxes_at_once(small)}" in caplog.text


def test_an_unmakeable_directory_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UidRangeError, match="BOXED_SANDBOX_UID_DIR"):
        HostUids(RANGE, tmp_path / "file" / "uids")
