"""Host uids for sandboxes: one of its own per sandbox container, for the container's life,
unique across every boxed service on the host.

Some kernel limits are per user, not per container: pipe buffer pages
(``fs.pipe-user-pages-soft``: a user over it gets 2-page pipes), inotify instances
(``fs.inotify.max_user_instances``), and the like. Without a user namespace a container's uid is
the host's, so two sandboxes running code as one uid share those limits, and a snippet holding
them in one sandbox shrinks the pipes of another tenant's run or makes it fail.

The shared record is one lock file per uid in a host directory (``BOXED_SANDBOX_UID_DIR``): a
uid is taken while an exclusive ``flock`` on its file is held. A ``flock`` belongs to the open
file description, so two allocators conflict whether they live in one process or in two (two
services, two Ray nodes on one host, the tests' services), and the kernel drops it when its
holder dies: a crashed service's uids come back with no stale record to clean. The files stay
(deleting a file someone may be about to lock races with that locker). Docker labels alone
could not be the record: listing then creating is not atomic between two services.

A crashed service's containers outlive its locks until they are reaped, so the Docker backends
also label each container with its uid (``boxed.uid``) and skip a uid that a live container
still carries (``in_use``).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..settings import Settings, UidRange
from .base import SandboxError

log = logging.getLogger("boxed.uids")
UID_LABEL = "boxed.uid"  # a sandbox container's uid, for the engine's listing
FORK_UIDS_LABEL = "boxed.fork_uids"  # a forkable session's other uids, comma-separated
ACCOUNT_FILES = (Path("/etc/passwd"), Path("/etc/group"))  # name:x:id:...
SUBID_FILES = (Path("/etc/subuid"), Path("/etc/subgid"))  # owner:first:count


class UidRangeError(ValueError):
    """The configured range is not clear of the host's users or subordinate id ranges."""


class UidsExhausted(SandboxError):
    """Every uid of the range is held by a live sandbox on this host (a 503: retry later)."""


def _ids_in(path: Path) -> Iterable[tuple[str, int, int]]:
    """(owner, first, last) of each entry of an account file or a subordinate id file."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return
    for line in lines:
        fields = line.strip().split(":")
        if line.startswith("#") or len(fields) < 3:
            continue
        try:
            if path.name in ("subuid", "subgid"):
                first, count = int(fields[1]), int(fields[2])
                yield fields[0], first, first + count - 1
            else:
                yield fields[0], int(fields[2]), int(fields[2])
        except ValueError:
            continue  # a name in a subordinate file's id column, or a malformed line


def check_clear(
    uids: UidRange,
    accounts: Iterable[Path] = ACCOUNT_FILES,
    subordinate: Iterable[Path] = SUBID_FILES,
) -> None:
    """Refuse a range that holds a host user or group id, or meets a subordinate id range:
    a sandbox would share that user's per-user limits, and own its files (the gid is the
    uid). Reads this machine's files: a service in a container sees the container's, so the
    host's must be checked by whoever picks the range there (docs/deploy.md)."""
    for path in (*accounts, *subordinate):
        for owner, first, last in _ids_in(path):
            if first <= uids.last and uids.first <= last:
                ids = str(first) if first == last else f"{first}-{last}"
                raise UidRangeError(
                    f"BOXED_SANDBOX_UIDS {uids} overlaps {owner!r} ({ids}) in {path}: a "
                    "sandbox would share that user's per-user kernel limits and files; choose "
                    "a range clear of every user, group and subordinate id range of the host"
                )


@dataclass
class Lease:
    """One uid held for one sandbox; ``release`` gives it back (idempotent)."""

    uid: int
    gid: int
    _fd: int | None = None
    _owner: HostUids | None = None

    def release(self) -> None:
        if self._owner is not None:
            self._owner._release(self)
            self._owner = None


@dataclass
class LeaseBlock:
    """Uids held together for one container: a session's first (``uid``) and one for each
    fork it may hold (``fork_uids``), each a lease of its own under the same rules."""

    leases: list[Lease]

    @property
    def uid(self) -> int:
        return self.leases[0].uid

    @property
    def gid(self) -> int:
        return self.leases[0].gid

    @property
    def fork_uids(self) -> list[int]:
        return [lease.uid for lease in self.leases[1:]]

    def release(self) -> None:
        for lease in self.leases:
            lease.release()


class HostUids:
    """Hands out the uids of ``uids``, each to one holder on the host at a time."""

    def __init__(self, uids: UidRange, directory: Path) -> None:
        self.uids = uids
        self.directory = directory
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise UidRangeError(
                f"cannot make BOXED_SANDBOX_UID_DIR {directory}: {exc}; it records which uids "
                "the host's sandboxes hold and must be one directory for every boxed service "
                "of the host"
            ) from exc
        self._held: set[int] = set()  # ours: skipped without a system call
        self._lock = threading.Lock()  # engine calls run in threads

    def acquire(self, in_use: Callable[[int], bool] | None = None) -> Lease:
        """A uid no other sandbox on the host holds. ``in_use``: whether a uid still runs
        code though nobody holds its lock (a crashed service's container not reaped yet).
        Searched from a random point, so services seldom try the same uids."""
        count = self.uids.last - self.uids.first + 1
        start = random.randrange(count)
        for step in range(count):
            uid = self.uids.first + (start + step) % count
            with self._lock:
                if uid in self._held:
                    continue
                fd = self._try_lock(uid)
                if fd is None:
                    continue
                self._held.add(uid)
            lease = Lease(uid, uid, fd, self)
            try:
                busy = in_use is not None and in_use(uid)
            except BaseException:
                lease.release()
                raise
            if busy:
                log.warning("uid %d is unlocked but a sandbox still runs as it: skipped", uid)
                lease.release()
                continue
            return lease
        raise UidsExhausted(
            f"every uid of BOXED_SANDBOX_UIDS ({self.uids}, {count}) is held by a sandbox "
            "on this host"
        )

    def _try_lock(self, uid: int) -> int | None:
        path = self.directory / str(uid)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            raise
        return fd

    def _release(self, lease: Lease) -> None:
        with self._lock:
            if lease._fd is not None:
                # unlocked first: a child forked meanwhile shares the open file, and closing
                # only this descriptor would leave the uid locked while that child lives
                fcntl.flock(lease._fd, fcntl.LOCK_UN)
                os.close(lease._fd)
                lease._fd = None
            self._held.discard(lease.uid)

    @property
    def held(self) -> int:
        """How many uids this allocator holds now."""
        return len(self._held)


class SharedUid:
    """The deprecated ``BOXED_SANDBOX_USER``: every sandbox gets the same uid and shares its
    per-user kernel limits with every other (said once, at start-up, as a warning)."""

    def __init__(self, uid: int, gid: int) -> None:
        self.uid, self.gid = uid, gid

    def acquire(self, in_use: Callable[[int], bool] | None = None) -> Lease:
        return Lease(self.uid, self.gid)

    @property
    def held(self) -> int:
        return 0


def sandbox_uids(settings: Settings) -> HostUids | SharedUid:
    """The uids this service's sandboxes run code as: the range (checked clear of the host's
    users), or the one deprecated shared user (warned of by each backend that uses it)."""
    if settings.sandbox_user is not None:
        uid, _, gid = settings.sandbox_user.partition(":")
        log.warning(
            "BOXED_SANDBOX_USER is deprecated: every sandbox runs as uid %s and shares its "
            "per-user kernel limits (pipe buffers, inotify instances) with every other, so "
            "one sandbox can change another's verdict; set BOXED_SANDBOX_UIDS instead",
            uid,
        )
        return SharedUid(int(uid), int(gid or uid))
    uids = settings.sandbox_uid_range
    check_clear(uids)
    demand = sandboxes_at_once(settings)
    if len(uids) < demand:
        log.warning(
            "BOXED_SANDBOX_UIDS holds %d uids but this service may hold %d sandboxes at once: "
            "past the range, new sandboxes wait for a uid (503 with Retry-After)",
            len(uids),
            demand,
        )
    return HostUids(uids, Path(settings.sandbox_uid_dir))


def sandboxes_at_once(settings: Settings) -> int:
    """The most sandboxes this service may hold at once: both pools full, every slot lent
    out, every session open."""
    pools = settings.pool_size + settings.strict_pool_size
    return pools + settings.max_concurrency + settings.max_sessions
