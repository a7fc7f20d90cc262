"""The guest's reading of fetched files (``exec_server/guest/fetch.py``) on this machine's own
file system: what a run directory may hold (links out of it, link chains, FIFOs, devices,
unreadable and huge files) and the status each name gets. The same module runs in every
sandbox; tests/test_files.py drives it through a real service in both isolation modes and
under gVisor."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from exec_server.guest.fetch import (
    MISSING,
    REFUSED_LINK,
    REFUSED_NOT_REGULAR,
    REFUSED_OVER_CAP,
    REFUSED_UNREADABLE,
    send_files,
    send_one,
)
from exec_server.guest.protocol import FETCH_OK, FILE_NAME, FetchedFile, frame


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


def test_the_name_frame_is_the_protocols() -> None:
    assert frame(FILE_NAME, b"x")[:1] == bytes((FILE_NAME,))
