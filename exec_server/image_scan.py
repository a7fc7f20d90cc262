"""What a sandbox image's root filesystem holds that the hardening must answer for: device
nodes outside ``/dev`` (refused) and set-uid or set-gid files (neutralised, reported).

gVisor passes a device node of the image's filesystem through to the host's device
(CVE-2026-96812), so an image that carries one outside ``/dev`` (where the runtime mounts a
fresh tmpfs over the image's own) is refused before any sandbox is made of it. A set-uid
file cannot raise a snippet's privileges: every sandbox runs with ``no-new-privileges``, under
which the kernel (and gVisor's) ignores the set-uid and set-gid bits at ``exec``.

The scan reads the flattened filesystem as a tar stream (``docker export`` of a container
created, never started, from the image) and looks at the headers only. It costs seconds for
the default image (measured in docs/sandbox-image.md), so results are kept by image id, which
names the content: in memory, and in a directory only the service's user may write.
"""

from __future__ import annotations

import io
import json
import logging
import os
import stat
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger("boxed.images")
ALLOWED_DEVICE_DIR = "dev/"  # the runtime mounts its own tmpfs here: the image's nodes are hidden
LISTED = 20  # paths named in a report, at most, per kind


@dataclass(frozen=True)
class ImageScan:
    """The findings of one image's filesystem; ``entries``: how many paths it holds."""

    entries: int
    device_nodes: list[str] = field(default_factory=list)  # block or char devices outside /dev
    setuid_files: list[str] = field(default_factory=list)  # set-uid or set-gid regular files

    @property
    def refusal(self) -> str | None:
        """Why the image may not serve sandboxes, or None when it may."""
        if not self.device_nodes:
            return None
        shown = ", ".join(f"/{p}" for p in self.device_nodes[:LISTED])
        return (
            f"it carries {len(self.device_nodes)} device node(s) outside /dev ({shown}); "
            "gVisor would pass them through to the host's devices (CVE-2026-96812)"
        )

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class ImageReport:
    """One image as the engine holds it: the id its reference names now, its labels, and its
    filesystem's scan (``scan_seconds`` None: the scan came from the cache)."""

    reference: str
    image_id: str
    labels: dict[str, str]
    scan: ImageScan
    scan_seconds: float | None = None


def _name_of(name: str) -> str:
    """A member's path relative to the root, without ``./`` or ``/`` in front."""
    while name.startswith(("./", "/")):
        name = name[2:] if name.startswith("./") else name[1:]
    return name


def scan_tar(stream: io.RawIOBase | io.BufferedIOBase) -> ImageScan:
    """Scan a root filesystem given as an uncompressed tar stream (read once, in order)."""
    devices: list[str] = []
    setuid: list[str] = []
    nodes: set[str] = set()  # every device node, in /dev too: a hard link may name one
    entries = 0
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            entries += 1
            name = _name_of(member.name)
            if member.ischr() or member.isblk():
                nodes.add(name)
                device = True
            else:
                device = member.islnk() and _name_of(member.linkname) in nodes
            if device and not name.startswith(ALLOWED_DEVICE_DIR):
                devices.append(name)
            elif member.isfile() and member.mode & (stat.S_ISUID | stat.S_ISGID):
                setuid.append(name)
    return ImageScan(entries, sorted(devices), sorted(setuid))


class ChunkReader(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (the engine's export answer)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


class ScanCache:
    """Scans by image id: in memory, and as one JSON file per id in ``directory`` when it is
    the service user's own and writable by nobody else (else in memory only, said once)."""

    def __init__(self, directory: str | None) -> None:
        self._memory: dict[str, ImageScan] = {}
        self._dir = self._usable(Path(directory)) if directory else None

    @staticmethod
    def _usable(path: Path) -> Path | None:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = path.stat()
        except OSError as exc:
            log.info("image scans are not kept on disk (%s): %s", path, exc)
            return None
        if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            log.warning(
                "image scans are not kept in %s: another user owns it or may write to it", path
            )
            return None
        return path

    def _file(self, image_id: str) -> Path | None:
        digest = image_id.removeprefix("sha256:")
        if self._dir is None or not digest.isalnum():
            return None
        return self._dir / f"{digest}.json"

    def get(self, image_id: str) -> ImageScan | None:
        if image_id in self._memory:
            return self._memory[image_id]
        path = self._file(image_id)
        if path is None:
            return None
        try:
            scan = ImageScan(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        self._memory[image_id] = scan
        return scan

    def put(self, image_id: str, scan: ImageScan) -> None:
        self._memory[image_id] = scan
        path = self._file(image_id)
        if path is None:
            return
        part = path.with_suffix(f".{os.getpid()}.part")
        try:
            part.write_text(json.dumps(scan.as_dict()))
            part.replace(path)
        except OSError as exc:
            log.warning("cannot keep the scan of %s in %s: %s", image_id[:19], path, exc)
