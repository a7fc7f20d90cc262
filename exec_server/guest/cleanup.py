"""The clean-up proof (stdlib only): what a container looks like clean, and whether a run
left anything of its own behind once every process of the sandbox uid is dead.

A run may leave what no process holds: files in ``/tmp``, System V IPC objects, sockets (kept
alive in flight, or in TIME_WAIT), memory charged to the cgroup, moved network counters (it
used the network), an OOM kill. Each retires the container (see docs/process-mode.md). The
files read after every run are opened once (``Counters``), and what they said when the
container was ready is its ``Baseline``. Used by the supervisor and the session program.
"""

from __future__ import annotations

import functools
import os
import socket
import stat
from collections.abc import Iterable

from .processes import kill_all, processes, reap, snippet_processes

WRITABLE = "/tmp"
MAX_TREE_DEPTH = 64
OOM_FILES = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")
# The cgroup's memory charge (cgroup v1, v2) and its breakdown (to leave out the page cache).
MEMORY_FILES = (
    ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory/memory.stat", b"total_"),
    ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat", b""),
)
MEMORY_MARGIN = 16 * 1024 * 1024  # charge a clean container may gain (slab, page tables)
# Counters of the network namespace: they change only when a snippet uses the network, and a
# snippet can set them to values the next one reads (see docs/process-mode.md).
NET_COUNTERS = ("/proc/net/snmp", "/proc/net/snmp6", "/proc/net/netstat", "/proc/net/dev")
# The namespace's socket counts ("sockets: used", "inuse", "tw": per network namespace; the
# other figures are the machine's). Listing the sockets instead (/proc/net/tcp) walks the host's
# whole TCP hash table: about 0.6 ms per file per read here. gVisor has no sockstat: its own
# socket lists are short, and are read instead.
SOCKSTAT = ("/proc/net/sockstat", "/proc/net/sockstat6")
SOCKSTAT_PER_NAMESPACE = (b"used", b"inuse", b"tw")
INET_SOCKETS = ("/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6")
# Served over the network (listener.py), the only counters compared (see _local_use): by
# protocol in /proc/net/snmp, by name in /proc/net/snmp6.
LOCAL_USE = {
    b"Tcp": (b"ActiveOpens", b"PassiveOpens", b"AttemptFails", b"CurrEstab"),
    b"Udp": (b"InDatagrams", b"OutDatagrams", b"RcvbufErrors", b"SndbufErrors"),
    b"UdpLite": (b"InDatagrams", b"OutDatagrams", b"RcvbufErrors", b"SndbufErrors"),
    b"Icmp": (b"OutEchos",),
}
LOCAL_USE6 = frozenset(
    {
        b"Udp6InDatagrams",
        b"Udp6OutDatagrams",
        b"Udp6RcvbufErrors",
        b"Udp6SndbufErrors",
        b"UdpLite6InDatagrams",
        b"UdpLite6OutDatagrams",
        b"Icmp6OutEchos",
    }
)
SYSV_FILES = ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem")


def _open_first(paths):
    """A descriptor of the first of ``paths`` that opens, or None."""
    for path in paths:
        try:
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
    return None


def _read_at_start(fd):
    """The whole of a /proc or cgroup file through a descriptor kept open (no open per run)."""
    chunks, offset = [], 0
    while chunk := os.pread(fd, 65536, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


class Counters:
    """The files read after every run, opened once (an open costs more than the read): the
    cgroup's OOM-kill counter and memory charge, the System V IPC tables, the network
    namespace's counters and sockets."""

    def __init__(self) -> None:
        self.oom = _open_first(OOM_FILES)
        self.sysv = _open_each(SYSV_FILES)
        self.memory = None  # (usage fd, stat fd, stat key prefix) of the cgroup, if any
        for usage_path, stat_path, prefix in MEMORY_FILES:
            usage, stat = _open_first([usage_path]), _open_first([stat_path])
            if usage is not None and stat is not None:
                self.memory = (usage, stat, prefix)
                break
            for fd in (usage, stat):
                if fd is not None:
                    os.close(fd)
        self.net = _open_each(NET_COUNTERS)
        self.sockstat = _open_each(SOCKSTAT)
        self.inet = [] if self.sockstat else _open_named(INET_SOCKETS)
        self.unix = _open_first(["/proc/net/unix"])
        self.fds = (
            {
                fd
                for fd in (self.oom, self.unix, *self.sysv, *self.net, *self.sockstat)
                if fd is not None
            }
            | {fd for fd, _ in self.inet}
            | set((self.memory or ())[:2])
        )

    def oom_kills(self) -> int | None:
        if self.oom is None:
            return None
        for line in _read_at_start(self.oom).splitlines():
            key, _, value = line.partition(b" ")
            if key == b"oom_kill":
                return int(value)
        return None

    def sysv_objects_left(self) -> bool:
        """Whether any System V IPC object exists (each table has a header line)."""
        return any(_read_at_start(fd).count(b"\n") > 1 for fd in self.sysv)

    def memory_charged(self) -> int | None:
        """The cgroup's memory charge less its page cache (bytes; None where there is no cgroup
        file, as under gVisor): what processes, memfds, sockets and the kernel's objects hold."""
        if self.memory is None:
            return None
        usage_fd, stat_fd, prefix = self.memory
        try:
            usage = int(_read_at_start(usage_fd))
            stat = dict(line.split() for line in _read_at_start(stat_fd).splitlines())
        except ValueError:
            return None
        kinds = (b"active_file", b"inactive_file")
        return usage - sum(int(stat.get(prefix + kind, 0)) for kind in kinds)

    def net_counters(self) -> list:
        texts = [_read_at_start(fd) for fd in self.net]
        return _local_use(texts) if _own_connection() else texts

    def socket_counts(self) -> tuple[tuple[bytes, bytes, bytes], ...]:
        """The namespace's own socket counts from sockstat: ((protocol, key, value), ...)."""
        counts = []
        for fd in self.sockstat:
            for line in _read_at_start(fd).splitlines():
                protocol, _, rest = line.partition(b":")
                fields = rest.split()
                counts += [
                    (protocol, key, value)
                    for key, value in zip(fields[::2], fields[1::2], strict=False)
                    if key in SOCKSTAT_PER_NAMESPACE
                ]
        return tuple(counts)

    def sockets_listed(self) -> list[str]:
        """Where there is no sockstat: the sockets each inet table lists (less its header)."""
        found = []
        own = _own_connection()  # not a socket left: the one this supervisor is served over
        for fd, path in self.inet:
            rows = [tuple(line.split()[1:3]) for line in _read_at_start(fd).splitlines()[1:]]
            left = sum(row not in own for row in rows)
            if left > 0:
                found.append(f"{left} sockets left in {path}")
        return found

    def unix_sockets_bound(self) -> list[bytes]:
        if self.unix is None:
            return []
        lines = _read_at_start(self.unix).splitlines()[1:]
        return [fields[7] for fields in map(bytes.split, lines) if len(fields) > 7]


def _socket_key(address):
    """A socket address as /proc/net/tcp* writes it: the address's 32-bit words, each in host
    byte order (little-endian here), in hex, then the port."""
    host, port = address[0], address[1]
    packed = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    words = "".join(packed[i : i + 4][::-1].hex().upper() for i in range(0, len(packed), 4))
    return f"{words}:{port:04X}".encode()


@functools.cache
def _own_connection():
    """Both ends of the TCP connection this supervisor is served over (``listener.py``), as
    (local, remote) pairs of /proc/net/tcp*; empty when its stdin is no TCP socket (Docker's
    attach stream is a pipe, the Docker backends' own socket a unix one)."""
    if not stat.S_ISSOCK(os.fstat(0).st_mode):
        return frozenset()
    sock = socket.socket(fileno=os.dup(0))
    try:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return frozenset()
        here, there = _socket_key(sock.getsockname()), _socket_key(sock.getpeername())
    except (OSError, ValueError):
        return frozenset()
    finally:
        sock.close()
    return frozenset({(here, there), (there, here)})  # the host's end may be listed here too


def _local_use(texts):
    """Of the network counters, those that move only when a process of the sandbox opens,
    sends on or receives on a socket of its own (raw and packet sockets need capabilities the
    snippet lacks). Served over the network, the host's own connection and what the cluster
    sends the pod (probes, refused connections) move the traffic counters all the time."""
    kept = []
    for text in texts:
        lines = text.splitlines()
        if not lines or lines[0].startswith(b"Inter-"):  # /proc/net/dev: traffic only
            continue
        if lines[0].split(b" ", 1)[0].endswith(b":"):  # snmp, netstat: names, then values
            for names, values in zip(lines[::2], lines[1::2], strict=False):
                proto, *fields = names.split()
                row = dict(zip(fields, values.split()[1:], strict=False))
                kept += [(proto, name, row.get(name)) for name in LOCAL_USE.get(proto[:-1], ())]
        else:  # snmp6: a name and a value per line
            kept += [line for line in lines if line.partition(b" ")[0] in LOCAL_USE6]
    return kept


def _open_named(paths):
    """(descriptor, path) of those of ``paths`` that open."""
    return [(fd, path) for fd, path in ((_open_first([p]), p) for p in paths) if fd is not None]


def _open_each(paths):
    """Descriptors of those of ``paths`` that open."""
    return [fd for fd, _ in _open_named(paths)]


class Baseline:
    """What this container looks like clean: measured once, before its first child exists."""

    def __init__(self, counters: Counters) -> None:
        self.counters = counters
        self.oom_kills = counters.oom_kills()
        self.memory = counters.memory_charged()
        self.net = counters.net_counters()
        self.sockets = counters.socket_counts()
        self.memory_grown = 0  # the last check's finding (reported, for the margin's sake)

    def problems(self) -> list[str]:
        """What the snippet left that no process holds: each retires the container."""
        counters, found = self.counters, []
        if self.oom_kills is not None and counters.oom_kills() != self.oom_kills:
            # the victim may have been the zygote, or memory charged beyond the snippet's
            found.append("the OOM killer acted in this container")
        if counters.net_counters() != self.net:
            found.append("the network counters moved: a snippet used the network")
        # Sockets that outlived every process of the snippet (held by descriptors in flight in
        # a unix socket sent into itself, or in TIME_WAIT).
        sockets = counters.socket_counts()
        if sockets != self.sockets:
            moved = sorted(set(sockets) - set(self.sockets))
            found.append(f"sockets left in the network namespace: {_text(moved)}")
        found += counters.sockets_listed()
        bound = counters.unix_sockets_bound()
        if bound:
            found.append(f"{len(bound)} unix sockets still bound (first: {bound[0][:40]!r})")
        memory = counters.memory_charged()
        if self.memory is not None and memory is not None:
            self.memory_grown = memory - self.memory
            if self.memory_grown > MEMORY_MARGIN:
                found.append(
                    f"{self.memory_grown >> 20} MiB more memory charged than when ready "
                    "(memory no process holds)"
                )
        return found


def _text(counts):
    return ", ".join(f"{p.decode()} {k.decode()} {v.decode()}" for p, k, v in counts)


def _wipe_dir(dir_fd, depth):
    if depth > MAX_TREE_DEPTH:
        raise RuntimeError("directory tree too deep to wipe")
    for entry in list(os.scandir(dir_fd)):
        if entry.is_dir(follow_symlinks=False):
            os.chmod(entry.name, 0o700, dir_fd=dir_fd)
            sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            try:
                _wipe_dir(sub, depth + 1)
            finally:
                os.close(sub)
            os.rmdir(entry.name, dir_fd=dir_fd)
        else:
            os.unlink(entry.name, dir_fd=dir_fd)


def wipe_writable(uid: int, gid: int) -> None:
    """Empty /tmp with the sandbox uid's file rights (no capability bypasses file modes): the
    effective ids are the sandbox's meanwhile, and every process of that uid is dead by now."""
    os.setegid(gid)
    os.seteuid(uid)
    try:
        fd = os.open(WRITABLE, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _wipe_dir(fd, 0)
        finally:
            os.close(fd)
    finally:
        os.seteuid(0)
        os.setegid(0)
    if os.geteuid() != 0 or os.getegid() != 0:
        raise RuntimeError("could not restore the effective ids")


def prove_clean(
    uid: int,
    gid: int,
    counters: Counters,
    baseline: Baseline,
    alone: bool,
    expected_pids: Iterable[int],
) -> list[str]:
    """What keeps this container from serving another snippet, beyond the caller's own
    processes and descriptors (empty: clean). ``alone``: the run already proved that the
    snippet left no process but zombies; ``expected_pids``: the processes that may live (the
    zygotes)."""
    found = []
    if alone:
        reap()
    else:
        if not kill_all(uid):
            found.append(f"processes survived SIGKILL: {sorted(snippet_processes(uid))}")
        others = set(processes()) - set(expected_pids)
        if others:
            found.append(f"unexpected processes: {sorted(others)}")
    try:
        wipe_writable(uid, gid)
    except (OSError, RuntimeError) as exc:
        found.append(f"cannot empty {WRITABLE}: {exc!r}")
    if os.listdir(WRITABLE):
        found.append(f"{WRITABLE} not empty after the wipe")
    found += baseline.problems()
    if counters.sysv_objects_left():
        found.append("System V IPC objects left")
    return found
