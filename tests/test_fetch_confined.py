"""The guest's reading of fetched files (``exec_server/guest/fetch.py``) on this machine's own
file system: what a run directory may hold (links out of it, link chains, FIFOs, devices,
unreadable and huge files) and the status each name gets. The same module runs in every
sandbox; tests/test_files.py drives it through a real service in both isolation modes and
under gVisor."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from exec_server.backends.base import Job, SandboxError
from exec_server.backends.supervised import Preload, SupervisedSandbox
from exec_server.guest.fetch import (
    MISSING,
    REFUSED_LINK,
    REFUSED_NOT_REGULAR,
    REFUSED_OVER_CAP,
    REFUSED_UNREADABLE,
    send_files,
    send_one,
)
from exec_server.guest.protocol import (
    FETCH_OK,
    FILE_DATA,
    FILE_NAME,
    RESULT,
    FetchedFile,
    RunReport,
    frame,
)
from exec_server.verdict import Observation, RunLimits


class Collected:
    """An ``Output`` stand-in that keeps what ``queue_file`` would send: name -> bytes."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def queue_file(self, fd: int, name_frame: bytes, left: int) -> int:
        name = name_frame[8:].decode()
        data = os.read(fd, left + 1)  # one byte past: a read past ``left`` would show here
        assert len(data) <= left
        self.files[name] = data
        return left - len(data)


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    run = tmp_path / "run"
    run.mkdir()
    yield run


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """A read that blocks (a FIFO without writer) fails the test instead of hanging it."""

    def stuck(*_: object) -> None:
        raise TimeoutError("a fetch blocked")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def fetch(run: Path, name: str, left: int = 1 << 20) -> tuple[str, int, bytes | None]:
    out = Collected()
    status, size = send_one(str(run), name, left, out)
    return status, size, out.files.get(name)


def test_a_regular_file_in_a_subdirectory_is_sent_whole(run_dir: Path) -> None:
    (run_dir / "a" / "b").mkdir(parents=True)
    (run_dir / "a" / "b" / "out.txt").write_bytes(b"42\n")
    assert fetch(run_dir, "a/b/out.txt") == (FETCH_OK, 3, b"42\n")


@pytest.mark.parametrize(
    ("links", "name"),
    [
        ({"out": "/proc/self/maps"}, "out"),  # the last component a link
        ({"p": "/proc/self"}, "p/maps"),  # an inner one: the supervisor's own memory map
        ({"p": "/proc/1"}, "p/environ"),
        ({"etc": "/etc"}, "etc/shadow"),
        ({"etc": "/etc"}, "etc/passwd"),  # readable by anyone, still outside the run
        ({"a": "b", "b": "c", "c": "/"}, "a/etc/passwd"),  # a chain that leaves the directory
        ({"a": "b", "b": "inside"}, "a/file"),  # a chain that stays inside: a link all the same
        ({"zero": "/dev/zero"}, "zero"),
        ({"dev": "/dev"}, "dev/zero"),
    ],
)
@pytest.mark.parametrize("nofollow", ["kept", "ignored"])
def test_no_link_is_followed(
    run_dir: Path, links: dict[str, str], name: str, nofollow: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ignored``: as under gVisor, which follows a link to a directory despite O_NOFOLLOW
    when O_DIRECTORY is set: the entry's own lstat still tells."""
    if nofollow == "ignored":
        real_open = os.open

        def following(path: str, flags: int, *args: object, **kwargs: object) -> int:
            return real_open(path, flags & ~os.O_NOFOLLOW, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "open", following)
    (run_dir / "inside").mkdir()
    (run_dir / "inside" / "file").write_bytes(b"x")
    for link, target in links.items():
        (run_dir / link).symlink_to(target)
    assert fetch(run_dir, name) == (REFUSED_LINK, 0, None)


def test_a_fifo_is_refused_without_waiting_for_a_writer(run_dir: Path) -> None:
    os.mkfifo(run_dir / "fifo")
    assert fetch(run_dir, "fifo") == (REFUSED_NOT_REGULAR, 0, None)


def test_a_device_node_is_refused(run_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mknod of a character device needs root")
    os.mknod(run_dir / "zero", 0o666 | 0o020000, os.makedev(1, 5))  # /dev/zero's numbers
    assert fetch(run_dir, "zero") == (REFUSED_NOT_REGULAR, 0, None)


def test_a_directory_and_a_file_used_as_one_are_refused(run_dir: Path) -> None:
    (run_dir / "dir").mkdir()
    (run_dir / "file").write_bytes(b"x")
    assert fetch(run_dir, "dir") == (REFUSED_NOT_REGULAR, 0, None)
    assert fetch(run_dir, "file/x") == (REFUSED_NOT_REGULAR, 0, None)
    assert fetch(run_dir, "gone/x") == (MISSING, 0, None)
    assert fetch(run_dir, "gone") == (MISSING, 0, None)


def test_a_file_over_what_is_left_is_refused_whole_before_it_is_read(run_dir: Path) -> None:
    (run_dir / "big").write_bytes(b"x" * 1000)
    assert fetch(run_dir, "big", left=999) == (REFUSED_OVER_CAP, 0, None)
    assert fetch(run_dir, "big", left=1000) == (FETCH_OK, 1000, b"x" * 1000)


def test_the_cap_counts_across_names(run_dir: Path) -> None:
    for name in ("a", "b", "c"):
        (run_dir / name).write_bytes(b"y" * 400)
    out = Collected()
    statuses = send_files(str(run_dir), ["a", "b", "c"], 1000, out, os.geteuid(), os.getegid())
    assert statuses == [
        FetchedFile("a", FETCH_OK, 400),
        FetchedFile("b", FETCH_OK, 400),
        FetchedFile("c", REFUSED_OVER_CAP, 0),
    ]
    assert out.files == {"a": b"y" * 400, "b": b"y" * 400}


def test_files_are_read_with_the_snippets_rights_not_roots(run_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("reading as another uid needs root")
    (run_dir / "root-only").write_bytes(b"secret")
    os.chmod(run_dir / "root-only", 0o600)
    run_dir.chmod(0o755)
    run_dir.parent.chmod(0o755)
    out = Collected()
    statuses = send_files(str(run_dir), ["root-only"], 1000, out, 10001, 10001)
    assert statuses == [FetchedFile("root-only", REFUSED_UNREADABLE, 0)]
    assert out.files == {}
    assert os.geteuid() == 0 and os.getegid() == 0  # root's rights are back for the supervisor


class Scripted:
    """A supervisor stream that answers with the frames it was given, then ends."""

    def __init__(self, frames: bytes) -> None:
        self.frames = frames

    async def send(self, data: bytes) -> None:
        pass

    async def receive(self) -> bytes:
        data, self.frames = self.frames, b""
        return data


def observe(frames: bytes, fetch_bytes: int = 100) -> tuple[SupervisedSandbox, object]:
    sandbox = SupervisedSandbox(
        "f" * 64,
        Scripted(frames),  # type: ignore[arg-type]
        256,
        reusable=True,
        max_runs=5,
        preload=Preload(available=False),
    )
    job = Job(
        code="",
        stdin="",
        limits=RunLimits(2, 2, 256, 65536),
        fetch=("out.txt", "p/maps"),
        fetch_bytes=fetch_bytes,
    )
    try:
        return sandbox, asyncio.run(sandbox._observe(job))
    except SandboxError as exc:
        return sandbox, exc


def report(*fetched: FetchedFile) -> bytes:
    result = RunReport(
        exit_code=0,
        signal=None,
        killed_for=None,
        started=True,
        memory_error=False,
        oom_killed=False,
        duration_ms=1.0,
        cpu_ms=1.0,
        max_rss_kb=1,
        strays=0,
        fetched_files=list(fetched),
    )
    return frame(RESULT, result.to_json())


def sent(name: bytes, data: bytes) -> bytes:
    return frame(FILE_NAME, name) + frame(FILE_DATA, data)


OUT_OK = FetchedFile("out.txt", FETCH_OK, 3)


def test_the_host_answers_the_files_with_the_supervisors_statuses() -> None:
    statuses = [OUT_OK, FetchedFile("p/maps", REFUSED_LINK)]
    sandbox, obs = observe(sent(b"out.txt", b"42\n") + report(*statuses))
    assert isinstance(obs, Observation) and not sandbox.broken
    assert obs.files == {"out.txt": b"42\n"}
    assert obs.fetch_status == {"out.txt": FETCH_OK, "p/maps": REFUSED_LINK}


@pytest.mark.parametrize(
    ("frames", "statuses", "cap"),
    [
        (sent(b"p/maps", b"x"), [FetchedFile("p/maps", REFUSED_LINK)], 100),
        (sent(b"out.txt", b"4242"), [OUT_OK], 100),
        (sent(b"out.txt", b"42\n"), [OUT_OK], 2),
    ],
    ids=["refused-but-sent", "longer-than-reported", "over-the-cap"],
)
def test_files_that_disagree_with_the_report_break_the_sandbox(
    frames: bytes, statuses: list[FetchedFile], cap: int
) -> None:
    """Not the code's doing (the supervisor reads the files): no verdict, the sandbox retired."""
    sandbox, obs = observe(frames + report(*statuses), fetch_bytes=cap)
    assert isinstance(obs, SandboxError) and "disagree" in str(obs)
    assert sandbox.broken
