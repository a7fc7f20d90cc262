"""A session interpreter's fork under a host uid of its own, through user namespaces (stdlib
only; docs/sessions.md#forks says why each step is needed).

The interpreter forks (twice: the fork becomes PID 1's child); the fork and then the parent
each ``unshare`` a user namespace: two siblings, so neither holds a capability over the other.
PID 1 writes both maps as the namespaces' owner (``MapWriter``); the fork switches to its uid,
both drop every capability, and PID 1 checks both from /proc, which the code cannot write.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import os
import select
import shutil
import signal
import socket
import stat
import struct
import time
from collections.abc import Callable, Iterable, Iterator

from .processes import processes, read_small

CLONE_NEWUSER = 0x10000000
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAPABILITY_VERSION_3 = 0x20080522
MAX_DEPTH = 32  # the kernel's nesting limit for user namespaces (init is level 0)
RUN_DIR = "/tmp/run"
FORK = b"fork"  # PID 1 to an interpreter: FORK, nonce, uid (4 bytes); the fork's 3 descriptors
UNSHARED, MAPPED, READY, FORKED = b"unshared", b"mapped", b"ready", b"forked"
GO, ABORT = b"go", b"abort"  # PID 1 to the parent: the fork is in its namespace (or failed)
NONCE_BYTES = 16
FORK_TIMEOUT = 10.0  # longest PID 1 waits for an interpreter's part of a fork
SETUP_FAILED = 126

libc = ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


# -- both sides: capabilities ---------------------------------------------------------------
def raise_effective() -> None:
    """Make the permitted capabilities effective (an euid change from 0 cleared them)."""
    header, data = _CapHeader(CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(libc.capget(ctypes.byref(header), data), "capget")
    for half in data:
        half.effective = half.permitted
    _check(libc.capset(ctypes.byref(header), data), "capset")


def drop_all_capabilities() -> None:
    """Drop every capability: bounding set first (it needs CAP_SETPCAP), ambient, the rest."""
    for cap in range(64):  # up to the kernel's last (gVisor has no cap_last_cap to read)
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() != errno.EINVAL or cap == 0:
                _check(-1, "PR_CAPBSET_DROP")
            break
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # (none in gVisor: EINVAL)
    header = _CapHeader(CAPABILITY_VERSION_3, 0)
    _check(libc.capset(ctypes.byref(header), (_CapData * 2)()), "capset")


# -- the interpreter's side (the sandbox uid) ------------------------------------------------
def enter_new_namespace() -> None:
    """Move into a new user namespace of its own (root there only; set-groups denied)."""
    _check(libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    try:  # (a privileged writer's maps need no "deny"; gVisor refuses to write it)
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
    except PermissionError:
        pass


def become(uid: int, gid: int) -> None:
    """Switch to ``uid``/``gid`` in the mapped namespace and drop every capability; then own
    its /proc again (the switch made it non-dumpable), as the session's interpreter does."""
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    drop_all_capabilities()
    _check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "PR_SET_DUMPABLE")


class DirectorySnapshot:
    """The working directory's files, opened while the fork has the parent's uid, written as
    its copy after the switch (the parent's directory is 0700 to the new uid)."""

    def __init__(self, root: str = RUN_DIR) -> None:
        self.root = root
        self.entries: list[tuple[str, int, int | str | None]] = []  # (path, mode, fd/target)
        for folder, dirs, files in os.walk(root):
            relative = os.path.relpath(folder, root)
            if relative != ".":
                self.entries.append((relative, stat.S_IMODE(os.lstat(folder).st_mode), None))
            for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
                path = os.path.join(folder, name)
                info = os.lstat(path)
                rel = os.path.normpath(os.path.join(relative, name))
                if stat.S_ISLNK(info.st_mode):
                    self.entries.append((rel, 0, os.readlink(path)))
                elif stat.S_ISREG(info.st_mode):
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    self.entries.append((rel, stat.S_IMODE(info.st_mode), fd))

    def write(self, destination: str) -> None:
        """Make ``destination`` (new, 0700) a copy of the snapshot, and close its files."""
        os.mkdir(destination, 0o700)
        for rel, mode, source in self.entries:
            path = os.path.join(destination, rel)
            if source is None:
                os.mkdir(path, mode)
            elif isinstance(source, str):
                os.symlink(source, path)
            else:
                out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
                try:
                    os.lseek(source, 0, os.SEEK_SET)
                    while os.sendfile(out, source, None, 1 << 20):
                        pass
                finally:
                    os.close(out)
                    os.close(source)


def carry_open_files(kept: Iterable[int], old_root: str, new_root: str) -> None:
    """Reopen each descriptor on a file of ``old_root`` on its copy, at its offset, flags and
    number; every other but ``kept`` becomes /dev/null (one shared with the parent would be a
    channel between the two)."""
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in kept or fd == null:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own
        inheritable = os.get_inheritable(fd)
        if target.startswith(old_root + "/") and os.path.isfile(target):
            flags = libc.fcntl(fd, 3, 0)  # F_GETFL
            offset = os.lseek(fd, 0, os.SEEK_CUR)
            copy = new_root + target[len(old_root) :]
            keep = flags & (os.O_ACCMODE | os.O_APPEND | os.O_NONBLOCK)
            fresh = os.open(copy, keep | os.O_NOFOLLOW | os.O_CLOEXEC)
            os.lseek(fresh, offset, os.SEEK_SET)
            os.dup2(fresh, fd, inheritable=inheritable)
            os.close(fresh)
        else:
            os.dup2(null, fd, inheritable=inheritable)
    os.close(null)


def fork_interpreter(
    channel: socket.socket,
    message: bytes,
    fds: list[int],
    serve_as_fork: Callable[[socket.socket], None],
    fork: Callable[[], int] = os.fork,
    leave: Callable[[int], None] = os._exit,
) -> None:
    """The interpreter's part of a fork (from its serve loop): the child becomes the fork
    (``serve_as_fork`` serves its calls); this process moves to a namespace of its own and
    drops what that gave it. PID 1 sees any failure (a missing message) and refuses."""
    nonce = message[len(FORK) : len(FORK) + NONCE_BYTES]
    uid = int.from_bytes(message[len(FORK) + NONCE_BYTES :][:4], "big")
    os.umask(0o077)  # files made from now on are their maker's alone
    middle = fork()
    if middle == 0:
        try:
            if fork() != 0:
                leave(0)  # the fork is PID 1's child from now on
            channel.close()
            _become_fork(fds, uid, serve_as_fork)
        finally:
            leave(SETUP_FAILED)
    for fd in fds:
        os.close(fd)
    os.waitpid(middle, 0)
    if channel.recv(64) != GO + nonce:
        return  # the fork failed: nothing changed here
    enter_new_namespace()
    drop_all_capabilities()
    channel.send(UNSHARED + nonce)
    if channel.recv(64) == MAPPED + nonce:
        channel.send(FORKED + nonce)


def _become_fork(fds: list[int], uid: int, serve_as_fork: Callable[[socket.socket], None]) -> None:
    os.setsid()  # ending the parent's group spares it
    for fd, number in zip(fds, (3, 1, 2), strict=True):  # socket, stdout, stderr
        os.dup2(fd, number)
        os.close(fd)
    sock = socket.socket(fileno=3)
    old_root = os.getcwd()
    snapshot = DirectorySnapshot(old_root)  # while it can read the parent's files
    enter_new_namespace()
    sock.send(UNSHARED)  # with its pid, by the kernel's word (SO_PASSCRED)
    if sock.recv(64) != MAPPED:
        return
    become(uid, uid)
    for stale in glob.glob(f"/tmp/fork-{uid}-*"):  # an ended fork's
        shutil.rmtree(stale, ignore_errors=True)
    target = f"/tmp/fork-{uid}-{os.urandom(4).hex()}"
    snapshot.write(target)
    os.chdir(target)
    carry_open_files({0, 1, 2, 3}, old_root, target)
    sock.send(READY)
    serve_as_fork(sock)


# -- PID 1's side (root) ---------------------------------------------------------------------
def uid_map(uids: Iterable[int]) -> str:
    """An identity map of ``uids``: a line per run of consecutive ids."""
    runs: list[list[int]] = []
    for uid in sorted(set(uids)):
        if runs and uid == runs[-1][0] + runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([uid, 1])
    return "".join(f"{first} {first} {count}\n" for first, count in runs)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())  # one write: a map is set whole, once
    finally:
        os.close(fd)


def _write_maps(targets: Iterable[tuple[int, Iterable[int]]]) -> None:
    for pid, uids in targets:
        text = uid_map(uids)
        _write(f"/proc/{pid}/gid_map", text)
        _write(f"/proc/{pid}/uid_map", text)


class MapWriter:
    """PID 1's writer of new namespaces' maps. ``owner``: the session's first uid, which made
    every first-level namespace: as that euid PID 1 holds every capability over them all."""

    def __init__(self, owner: int) -> None:
        self.owner = owner

    def namespace_of(self, pid: int) -> int:
        """An open descriptor of ``pid``'s user namespace (for a later ``write``)."""
        with _euid(self.owner):
            return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)

    def write(self, parent_ns: int | None, targets: list[tuple[int, list[int]]]) -> None:
        """Write the maps of ``targets`` ((pid, uids) pairs), whose namespaces are children of
        ``parent_ns`` (from ``namespace_of``; None: the root one, else a helper enters it)."""
        if parent_ns is None:
            with _euid(self.owner):
                raise_effective()
                _write_maps(targets)
            return
        pid = os.fork()  # entering a namespace is for good: a helper does it
        if pid == 0:
            try:
                os.setresuid(-1, self.owner, -1)
                _check(libc.setns(parent_ns, CLONE_NEWUSER), "setns")
                _write_maps(targets)
            except BaseException as exc:  # noqa: BLE001 - a helper never returns
                os.write(2, f"boxed session: writing a fork's maps failed: {exc!r}\n".encode())
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError("writing a fork's namespace maps failed")


@contextlib.contextmanager
def _euid(uid: int) -> Iterator[None]:
    """PID 1 as euid ``uid`` for a moment (its real and saved uids stay 0, so its capabilities
    come back with euid 0)."""
    os.setresuid(-1, uid, -1)
    try:
        yield
    finally:
        os.setresuid(-1, 0, -1)


class SyscallReader:
    """PID 1's reader of a fork's ``/proc/<pid>/syscall``: a helper in the fork's user
    namespace, where it holds every capability (PID 1 has no ptrace right there: the
    session's first uid owns it). It reads that one file on each request and nothing else,
    keeps no descriptor but its socket, and has real and saved uid 0, so no process of the
    sandbox may signal or trace it. None from ``read`` when it cannot say."""

    def __init__(self, owner: int, ns: int, pid: int) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            _serve_syscall_reads(owner, ns, pid, theirs)
        theirs.close()
        ours.settimeout(1.0)  # a helper that does not answer says nothing: not idle
        self.sock = ours

    def read(self) -> bytes | None:
        try:
            self.sock.send(b"?")
            answer = self.sock.recv(512)
        except OSError:
            return None
        return answer if answer not in (b"", b"-") else None

    def close(self) -> None:
        self.sock.close()
        _kill(self.pid)


def _serve_syscall_reads(owner: int, ns: int, pid: int, sock: socket.socket) -> None:
    """The helper's life (``SyscallReader``): enter the namespace, then answer. Never returns."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setresuid(-1, owner, -1)  # as the owner, it may enter the namespace
        _check(libc.setns(ns, CLONE_NEWUSER), "setns")
        keep = sock.fileno()
        os.closerange(0, keep)
        os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
        path = f"/proc/{pid}/syscall"
        while sock.recv(8):
            try:
                text = read_small(path)
            except OSError:
                text = b""
            sock.send(text[:512] or b"-")
    finally:
        os._exit(0)


class ForkRefused(Exception):
    """The interpreter could not be forked, by its own state or doing."""


class Member:
    """PID 1's record of an interpreter's user namespace (None: the container's), the uids
    it maps (None: all) and its depth."""

    def __init__(self, ns: int | None = None, mapped: frozenset[int] | None = None) -> None:
        self.ns, self.mapped, self.depth = ns, mapped, 0


def _status(pid: int) -> dict[str, list[str]]:
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return fields


def check_member(pid: int, uid: int, threads: bool = False) -> None:
    """Raise unless /proc shows ``pid`` as PID 1's child, all uids and gids ``uid``, with no
    capability, tracer or other thread (``threads``), and no_new_privs."""
    fields = _status(pid)
    wanted = {"PPid": ["1"], "Uid": [str(uid)] * 4, "Gid": [str(uid)] * 4, "TracerPid": ["0"]}
    wanted.update({"NoNewPrivs": ["1"], **({"Threads": ["1"]} if threads else {})})
    wanted.update({k: ["0" * 16] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")})
    wrong = [k for k, v in wanted.items() if k in fields and fields[k] != v]
    if wrong:
        raise ForkRefused(f"process {pid} is not as a fork must be: {wrong}")


def kill_uid_but(uid: int, kept: set[int]) -> None:
    """SIGKILL every process of ``uid`` but ``kept`` (reaped by whoever is their parent)."""
    for other, (owner, _, _) in processes().items():
        if owner == uid and other not in kept:
            try:
                os.kill(other, signal.SIGKILL)
            except ProcessLookupError:
                pass


class _Waiter:
    """Messages from the interpreters taking part in a fork, until a deadline."""

    def __init__(self) -> None:
        self.deadline = time.monotonic() + FORK_TIMEOUT

    def receive(self, sock: socket.socket, expected: bytes, credentials: bool = False) -> int:
        """Wait for ``expected`` on ``sock`` (others dropped); the sender's pid by the kernel's
        word (SO_PASSCRED) when ``credentials``, else 0."""
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise ForkRefused("the interpreter did not play its part of the fork in time")
            message, ancillary, _, _ = sock.recvmsg(64, socket.CMSG_SPACE(12))
            if not message:
                raise ForkRefused("the interpreter closed its socket during the fork")
            if message != expected:
                continue
            for level, kind, data in ancillary:
                if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS):
                    return struct.unpack("3i", data[:12])[0]
            return 0


def fork_member(
    pid: int,
    sock: socket.socket,
    uid: int,
    member: Member,
    fork_uid: int,
    free: Iterable[int],
    writer: MapWriter,
    block: Iterable[int] = (),
) -> tuple[int, socket.socket, int, int, Member]:
    """Fork the idle interpreter ``pid`` (``uid``, on ``sock``) into one running as
    ``fork_uid``: (its pid, socket, stdout and stderr pipes, Member). ``free``: uids no
    interpreter holds (the fork's namespace maps them, for its own forks); ``block``: every
    uid of the session. Raises ForkRefused, after killing the fork."""
    if member.depth + 1 >= MAX_DEPTH:
        raise ForkRefused(f"a fork of a fork nests {MAX_DEPTH} deep at most (user namespaces)")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    nonce = os.urandom(NONCE_BYTES)
    child = 0
    try:
        socket.send_fds(
            sock, [FORK + nonce + fork_uid.to_bytes(4, "big")], [theirs.fileno(), out_w, err_w]
        )
        for fd in (theirs.detach(), out_w, err_w):
            os.close(fd)
        wait = _Waiter()
        try:
            child = wait.receive(ours, UNSHARED, credentials=True)
        except ForkRefused:
            sock.send(ABORT + nonce)
            raise
        sock.send(GO + nonce)
        wait.receive(sock, UNSHARED + nonce)
        if _status(child).get("Uid", [""])[0] != str(uid):
            raise ForkRefused(f"process {child} reported as the fork but is not it")
        # The parent, checked capless while stopped, keeps every uid (freed ones come back to
        # it); the fork, which needs CAP_SETUID to switch, maps only its own and free ones.
        _hold_still(pid, uid, child)
        parent_ids = frozenset(block) if member.mapped is None else member.mapped
        available = set(free) if member.mapped is None else set(free) & member.mapped
        fork_ids = frozenset({fork_uid} | available)
        try:
            writer.write(member.ns, [(pid, sorted(parent_ids)), (child, sorted(fork_ids))])
        finally:
            os.kill(pid, signal.SIGCONT)
        ours.send(MAPPED)
        sock.send(MAPPED + nonce)
        wait.receive(ours, READY)
        wait.receive(sock, FORKED + nonce)
        check_member(child, fork_uid)
        check_member(pid, uid)
        fork = Member(writer.namespace_of(child), fork_ids)
        moved = Member(writer.namespace_of(pid), parent_ids)
    except BaseException:
        ours.close()
        for fd in (out_r, err_r):
            os.close(fd)
        if child:
            _kill(child)
        raise
    if member.ns is not None:
        os.close(member.ns)
    member.ns, member.mapped = moved.ns, moved.mapped
    member.depth += 1
    fork.depth = member.depth
    return child, ours, out_r, err_r, fork


def _hold_still(pid: int, uid: int, child: int) -> None:
    """Stop the parent before its map exists and make sure it can use none of it: one
    thread, no capability, no other process of its uid but the fork."""
    os.kill(pid, signal.SIGSTOP)
    os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOWAIT)
    check_member(pid, uid, threads=True)
    kill_uid_but(uid, {pid, child})


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
