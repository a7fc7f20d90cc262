"""The resident program of every sandbox container (stdlib only): PID 1, one snippet at a time.

It runs as root in a container that keeps only CAP_SETUID, CAP_SETGID and CAP_KILL (see
docs/process-mode.md), and serves snippets, each in a freshly forked
child that drops to the sandbox uid before it runs anything of the snippet's:

* Two parents to fork from, both *zygotes* (``zygote.py``): root programs of their own,
  started fresh by the supervisor, that fork the snippets' children, reap them and report
  their exit status and resource usage (the supervisor itself forks nothing per run, so its
  pages stay its own). The light zygote, started before any snippet came, holds only the
  standard library and forks the children of snippets that import nothing else (a small
  interpreter forks and exits in a fraction of the time a preloaded one takes); the heavy one
  imports the preload modules (sympy, numpy) for the snippets that import anything else: at
  start, or at the first such snippet when the host says none has come yet
  (``preload_at_start``). The host says which kind a snippet needs.
* The child is forked ahead of its snippet, once the container has been proven clean, and
  sets itself up (``zygote._child``): its own session, the snippet body as stdin, its output
  pipes and nothing else, the sandbox uid with no capability, an empty ``/tmp/run``; it then
  waits for the snippet's limits and hands over to ``runner.run``.
* The supervisor forwards the pipes with a per-stream cap, stops the run at the wall-clock
  limit, at the CPU-time limit of the snippet's whole process tree, or when a stream passes
  its cap, and reports the exit status the zygote reaped (never anything the snippet wrote;
  should the zygote die, the supervisor adopts and reaps the child itself). After the run it
  kills every process of the sandbox uid (found in /proc, until none is left; the supervisor
  and the zygotes are root's), empties ``/tmp``
  (with the sandbox uid as its effective uid), and proves the container clean before the next
  child is forked.

A request may name a program to exec instead of Python code (``argv``: a compiler, a script's
interpreter, a compiled submission; ``runner.run``), with the same drop of privileges, limits
and clean-up. After a compile request exits 0 the supervisor copies its output into
``/box`` (``PROGRAM_DIR``, a tmpfs that allows exec, root's, mode 0755), where later runs can
execute it but not replace it; a request without ``keep`` empties ``/box`` in its clean-up.

The code and input never pass through the supervisor's memory (they are spliced from stdin into
the child's memfd), and child output passes through one buffer that is zeroed after each run;
the children are copies of a zygote, which never held a snippet's code, input or output.

Being PID 1 makes the supervisor the reaper of every orphan (docker-init is not used; gVisor
refuses ``PR_SET_CHILD_SUBREAPER``), and its death ends every process in the container.
"""

import ctypes
import errno
import functools
import gc
import json
import math
import mmap
import os
import select
import signal
import socket
import stat
import sys
import time

from . import zygote
from .protocol import (
    CLEANUP,
    ERRORS,
    FILE_DATA,
    FILE_NAME,
    KILLED_CPU,
    KILLED_OUTPUT,
    KILLED_WALL,
    OUTPUT,
    READY_MARKER,
    REPORT_MEMORY_ERROR,
    REPORT_STARTED,
    RESULT,
    frame,
)

CHUNK = 65536
PROGRAM_DIR = "/box"  # compiled programs: root's, executable (/tmp is noexec), not wiped
WRITABLE = "/tmp"
KILL_SECONDS = 2.0  # longest wait for SIGKILLed processes to vanish
DRAIN_SECONDS = 1.0  # longest wait for pipe EOF once the child is dead
DRAIN_TICK = 0.02  # a pipe open and quiet this long once the child is dead: a stray holds it
ORPHAN_TICK = 0.01  # how often the exit of a child whose zygote died is looked for
MAX_TREE_DEPTH = 64
PR_SET_CHILD_SUBREAPER = 36
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
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STATUS_KEYS = (b"Stat", b"Uid:", b"Thre")  # State, Uid, Threads

_buffer = bytearray(8 + CHUNK)  # where child output is read into; zeroed after each run
# Output frames wait here to leave with the next ones (most runs: one write for all their
# output and the result, where a write to the engine's pipe costs a context switch or two).
_pending = bytearray(2 * CHUNK)
_dirty = {"buffer": 0, "pending": 0}  # how much of each a run wrote: what the zeroing clears
# The children's report page (see protocol): a memfd, which each zygote maps for its children
# (``zygote.main``) and the supervisor reads and resets with pread and pwrite (no mapping: mmap
# would hold a second descriptor of it).
_report_fd = os.memfd_create("boxed-report", os.MFD_CLOEXEC)
os.ftruncate(_report_fd, mmap.PAGESIZE)


def _report():
    """The child's report: its first two bytes."""
    return os.pread(_report_fd, 2, 0)


def _clear_report():
    os.pwrite(_report_fd, b"\0\0", 0)


# The guest modules a zygote is started with (``_zygote_command``).
ZYGOTE_MODULES = ("protocol", "runner", "zygote")


def _write_all(data, fd=1):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _send(kind, data):
    _write_all(frame(kind, data))


def _read_exact(n):
    chunks = []
    while n:
        chunk = os.read(0, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


_splice_works = True  # until it fails: stdin is a socket (splice needs a pipe at one end)


def _receive_body(fd, size):
    """Move the snippet body from stdin into the child's memfd, spliced so that it never
    passes through this process's memory where it can (over the host's socket, and in gVisor,
    it cannot: there it passes through the output buffer, which is zeroed after every run)."""
    global _splice_works
    while size:
        moved = None
        if _splice_works:
            try:
                moved = os.splice(0, fd, size)
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                    raise
                _splice_works = False  # not tried again: a failed call per run costs
        if moved is None:
            moved = os.readv(0, [memoryview(_buffer)[: min(size, len(_buffer))]])
            _dirty["buffer"] = max(_dirty["buffer"], moved)
            _write_all(memoryview(_buffer)[:moved], fd)
        if not moved:
            raise EOFError("stdin closed inside a request")
        size -= moved


def _zygote_command(config, heavy, sock_fd):
    """The command that starts a zygote: the supervisor's interpreter and options (as the host
    started it: ``-c`` and the starting program follow them), ``bootstrap`` with the zygote's
    modules and its configuration (the supervisor's, without the host's socket)."""
    options = sys.orig_argv[1 : sys.orig_argv.index("-c")]
    sources = sys.modules["boxed_guest"].sources
    modules = {name: sources[name] for name in ZYGOTE_MODULES}
    own = {key: value for key, value in config.items() if key not in ("socket", "bootstrap")}
    own.update(program="zygote", zygote={"socket": sock_fd, "report": _report_fd, "heavy": heavy})
    arguments = [json.dumps(modules), json.dumps(own)]
    return [sys.executable, *options, "-c", config["bootstrap"], *arguments]


class _Zygote:
    """The supervisor's handle on a zygote (``zygote.py``): a fresh interpreter, started with
    the supervisor's options, ``bootstrap`` and only the modules it needs."""

    def __init__(self, config, heavy=False):
        self.heavy = heavy
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = _zygote_command(config, heavy, theirs.fileno())
        self.pid = os.fork()
        if self.pid == 0:
            try:
                # Nothing of the supervisor's but the socket and the report page goes across
                # (every other descriptor is close-on-exec), not even the host's stream.
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                for fd in (theirs.fileno(), _report_fd):
                    os.set_inheritable(fd, True)
                os.execv(command[0], command)
            finally:
                os._exit(zygote.SETUP_FAILED)
        theirs.close()
        # Waited for: the clean-up compares the container's memory with what it held when
        # ready, which must include the zygote's imports.
        if self.sock.recv(16) != b"ready":
            raise RuntimeError("the zygote did not start")

    def spawn(self, fds):
        """Fork a child on ``fds`` (body, stdout, stderr, hand-over); its pid. Its exit comes
        as a message on ``sock`` (``exit_of``)."""
        socket.send_fds(self.sock, [b"fork"], fds)
        return int(self._receive())

    def exit_of(self, block=True):
        """(wait status, CPU seconds, peak RSS in KiB) of the child, waiting for its exit
        unless ``block`` is false (then None while it runs); raises ``_ZygoteGone``."""
        try:
            answer = self._receive(0 if block else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        status, cpu, rss = answer.split()
        return int(status), float(cpu), int(rss)

    def _receive(self, flags=0):
        answer = self.sock.recv(64, flags)
        if not answer:
            # Its children are the supervisor's once it is a zombie (PID 1 adopts orphans).
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            raise _ZygoteGone
        return answer


class _ZygoteGone(Exception):
    """The zygote ended (the OOM killer may take it): its live children are PID 1's now."""


class _Child:
    """A forked child that has done its set-up and waits on the hand-over pipe.

    It owns the supervisor's ends of the child's descriptors; each is closed exactly once.
    """

    def __init__(self, zygote):
        self.zygote = zygote
        self.heavy = zygote.heavy
        self.body_fd = os.memfd_create("boxed-request", os.MFD_CLOEXEC)
        self.out_r, out_w = os.pipe2(os.O_CLOEXEC)
        self.err_r, err_w = os.pipe2(os.O_CLOEXEC)
        go_r, self.go_w = os.pipe2(os.O_CLOEXEC)
        theirs = (self.body_fd, out_w, err_w, go_r)
        try:
            self.pid = zygote.spawn(theirs)
        finally:
            for fd in (out_w, err_w, go_r):
                os.close(fd)
        self.open = {self.body_fd, self.out_r, self.err_r, self.go_w}
        self.ended = None  # (wait status, CPU seconds, peak RSS KiB) once reaped
        self.orphaned = False  # its zygote is gone: the supervisor reaps it itself

    @property
    def exit_fd(self):
        """Readable once the child has ended (its zygote's report is waiting), or the zygote."""
        return self.zygote.sock.fileno()

    def _zygote_report(self, block):
        """Take the zygote's report of the child's exit, if there is one (or wait for it)."""
        if self.ended is None and not self.orphaned:
            try:
                self.ended = self.zygote.exit_of(block)
            except _ZygoteGone:
                self.orphaned = True

    def has_ended(self):
        """Whether the child has ended (its exit is then known), without waiting."""
        self._zygote_report(block=False)
        if self.ended is None and self.orphaned:
            if os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                self.wait()
        return self.ended is not None

    def hand_over(self, limits):
        """Give the child its limits: it runs the snippet already spliced into its memfd."""
        try:
            _write_all(zygote.hand_over_text(limits), self.go_w)
        except BrokenPipeError:  # it died in its set-up: say why
            os.set_blocking(self.err_r, False)
            try:
                why = os.read(self.err_r, 2000).decode(errors="replace").strip()
            except BlockingIOError:
                why = "no message"
            raise RuntimeError(why) from None
        self.close(self.go_w)
        self.close(self.body_fd)

    def close(self, fd):
        if fd in self.open:
            self.open.discard(fd)
            os.close(fd)

    def wait(self):
        """(wait status, CPU seconds with its reaped descendants', peak RSS KiB), once ended."""
        self._zygote_report(block=True)
        if self.ended is None:
            try:
                _, status, usage = os.wait4(self.pid, 0)
            except ChildProcessError:
                raise RuntimeError("the zygote ended before it reported the exit") from None
            self.ended = (status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)
        return self.ended

    def discard(self):
        """Kill the child if it is still there, wait for its end and close what is left open."""
        if self.ended is None:
            try:  # by pid: it may not have its own group yet
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # ended, and reaped by the zygote
            self.wait()
        for fd in list(self.open):
            self.close(fd)


# -- watching a run --------------------------------------------------------------------------
class _Run:
    """Forwards the child's pipes to the host with a per-stream cap."""

    def __init__(self, child, cap):
        self.child = child
        self.kinds = {child.out_r: OUTPUT, child.err_r: ERRORS}
        self.sent = {OUTPUT: 0, ERRORS: 0}
        self.cap = cap
        self.queued = 0  # bytes of frames in _pending

    def queue(self, data):
        """Send ``data`` (whole frames) with the next write, or now if it does not fit."""
        if self.queued + len(data) > len(_pending):
            self.flush()
        if len(data) > len(_pending):
            _write_all(data)
            return
        _pending[self.queued : self.queued + len(data)] = data
        self.queued += len(data)
        _dirty["pending"] = max(_dirty["pending"], self.queued)

    def flush(self):
        if self.queued:
            _write_all(memoryview(_pending)[: self.queued])
            self.queued = 0

    @property
    def over_cap(self):
        return max(self.sent.values()) > self.cap

    def forward(self, fd):
        """Send one chunk of ``fd`` on; False at end of file or once the stream passed its cap."""
        view = memoryview(_buffer)
        n = os.readv(fd, [view[8:]])
        if not n:
            return False
        _dirty["buffer"] = max(_dirty["buffer"], 8 + n)
        kind = self.kinds[fd]
        count = min(n, self.cap + 1 - self.sent[kind])
        if count > 0:
            view[0:8] = bytes((kind, 0, 0, 0)) + count.to_bytes(4, "big")
            self.queue(view[: 8 + count])
            self.sent[kind] += count
        return self.sent[kind] <= self.cap

    def drain(self, deadline, uid):
        """Forward what is left in the pipes until every writer is gone (EOF); the pids of the
        uid found while a pipe stayed open and quiet (none: no stray was missed).

        The child is reaped by now and a dead process holds no descriptor, so a pipe still open
        is held by a live process of the uid: one forked while the first kill went round (no
        kernel promises that a group kill races no fork; gVisor's does not), or one the process
        list showed as a zombie. Each quiet tick kills the uid's processes again instead of
        waiting the whole deadline for them."""
        for fd in list(self.kinds):
            os.set_blocking(fd, False)
        found = set()
        while self.kinds and (now := time.monotonic()) < deadline:
            readable, _, _ = select.select(
                list(self.kinds), [], [], min(deadline - now, DRAIN_TICK)
            )
            if not readable:
                found |= _kill_uid(uid)
            for fd in readable:
                try:
                    if not self.forward(fd):
                        self.close(fd)
                except BlockingIOError:
                    continue
        return found

    def close(self, fd):
        if self.kinds.pop(fd, None) is not None:
            self.child.close(fd)

    def close_all(self):
        for fd in list(self.kinds):
            self.close(fd)


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


class _Counters:
    """The files read after every run, opened once (an open costs more than the read): the
    cgroup's OOM-kill counter and memory charge, the System V IPC tables, the network
    namespace's counters and sockets."""

    def __init__(self):
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

    def oom_kills(self):
        if self.oom is None:
            return None
        for line in _read_at_start(self.oom).splitlines():
            key, _, value = line.partition(b" ")
            if key == b"oom_kill":
                return int(value)
        return None

    def sysv_objects_left(self):
        """Whether any System V IPC object exists (each table has a header line)."""
        return any(_read_at_start(fd).count(b"\n") > 1 for fd in self.sysv)

    def memory_charged(self):
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

    def net_counters(self):
        texts = [_read_at_start(fd) for fd in self.net]
        return _local_use(texts) if _own_connection() else texts

    def socket_counts(self):
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

    def sockets_listed(self):
        """Where there is no sockstat: the sockets each inet table lists (less its header)."""
        found = []
        own = _own_connection()  # not a socket left: the one this supervisor is served over
        for fd, path in self.inet:
            rows = [tuple(line.split()[1:3]) for line in _read_at_start(fd).splitlines()[1:]]
            left = sum(row not in own for row in rows)
            if left > 0:
                found.append(f"{left} sockets left in {path}")
        return found

    def unix_sockets_bound(self):
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


def _processes():
    """Every process but this one (PID 1): pid -> (real uid, state letter, threads).

    From /proc/<pid>/status, which names the real uid even of a process that made itself
    non-dumpable (its /proc directory then belongs to root)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            lines = _read_small(f"/proc/{name}/status").split(b"\n")
            fields = dict(line.split(b":", 1) for line in lines if line[:4] in STATUS_KEYS)
            found[int(name)] = (
                int(fields[b"Uid"].split()[0]),
                fields[b"State"].split()[0].decode(),
                int(fields.get(b"Threads", b"1")),
            )
        except (OSError, KeyError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


def _read_small(path):
    """A small /proc file, in one read (no buffered file object: it costs a run four more
    system calls and the objects of a file per process looked at)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


def _snippet_processes(uid):
    """The processes of the sandbox uid: everything the snippet started (zombies included):
    pid -> whether it is alive (a zombie whose main thread ended while others run is)."""
    return {
        pid: state != "Z" or threads > 1
        for pid, (owner, state, threads) in _processes().items()
        if owner == uid
    }


def _cpu_ticks(pids):
    """CPU clock ticks of ``pids`` (live or zombie), with those of the children they reaped."""
    total = 0
    for pid in pids:
        try:
            stat = _read_small(f"/proc/{pid}/stat")
            total += sum(int(t) for t in stat.rpartition(b")")[2].split()[11:15])
        except (OSError, ValueError):
            continue  # reaped meanwhile: its time is in its reaper's
    return total


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_uid(uid):
    """SIGKILL every process of the sandbox uid (by pid: ``kill(-1)`` would take the zygote
    too, and a helper process could not be forked under a fork bomb); the pids found."""
    found = _snippet_processes(uid)
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return found.keys()


def _kill_all(uid):
    """Kill and reap every process of the sandbox uid; True when none is left."""
    deadline = time.monotonic() + KILL_SECONDS
    while True:
        _reap()
        if not _snippet_processes(uid):
            return True
        if time.monotonic() > deadline:
            return False
        _kill_uid(uid)
        time.sleep(0.001)


def _tree_cpu_seconds(uid, ticks_at_start, ceiling):
    """CPU time of the snippet's processes so far, less what they had at the start, at most
    ``ceiling`` (see ``_physical_cpu``)."""
    return _physical_cpu(
        max(_cpu_ticks(_snippet_processes(uid)) - ticks_at_start, 0) / CLOCK_TICKS, ceiling
    )


def _backstop_fired(exit_code, counted, cpu_limit):
    """Whether the kernel's RLIMIT_CPU backstop ended the child: a SIGXCPU death (or the SIGKILL
    at the hard limit) with at least the limit spent, as the kernel that enforces the rlimit
    counts it, before ``_physical_cpu``'s cap. gVisor's count runs ahead of the CPU the threads
    got while they wait for a core, so its backstop can fire while the capped figure is still
    under the limit (64 spinning threads on a loaded machine): that is the limit's verdict
    too. A snippet that signals itself before it spent its budget keeps its own verdict."""
    return exit_code in (128 + signal.SIGXCPU, 128 + signal.SIGKILL) and counted >= cpu_limit


def _physical_cpu(seconds, ceiling):
    """``seconds`` of counted CPU time, at most ``ceiling``: the container's CPU quota times the
    wall time, all the CPU its processes can have had. gVisor counts a task's time in the
    application even while the host has it waiting for a CPU, so with more busy processes than
    CPUs it counts several times what they got (a fork bomb: 100 s of CPU in 3 s of wall time);
    runc's kernel counts what they got, which the quota bounds (to within the scheduler's
    slack). Capped, the same code gets the same CPU time, and CPU verdict, on both."""
    return min(seconds, ceiling)


class _ChildExits:
    """Wakes the supervisor's poll when any child ends: SIGCHLD through a wake-up pipe (gVisor
    has no pidfd_open). The children restore the signal dispositions they inherit."""

    def __init__(self):
        self.read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.fds = {self.read_fd, write_fd}
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    def drain(self):
        try:
            while os.read(self.read_fd, 4096):
                pass
        except BlockingIOError:
            pass


def _serve_one(header, child, config, counters):
    _receive_body(child.body_fd, int(header["size"]))
    uid = int(config["uid"])
    wall, cpu_limit = float(header["wall"]), float(header["cpu"])
    cpus = float(config["cpus"])  # the container's CPU quota: CPU time grows at most this fast
    pid = child.pid
    run = _Run(child, int(config["output_cap"]))
    poller = select.poll()
    for fd in (child.out_r, child.err_r, child.exit_fd):
        poller.register(fd, select.POLLIN)
    _clear_report()
    oom_before = counters.oom_kills()
    ticks_at_start = _cpu_ticks([pid])  # the child's own set-up (it is alone: proven clean)
    started = time.monotonic()
    handed = {"cpu": cpu_limit, "memory_mb": int(header["memory_mb"])}
    handed.update((key, header[key]) for key in ("argv", "source", "files") if header.get(key))
    child.hand_over(handed)
    killed_for, exited = None, False
    deadline = started + wall
    cpu_check = started + cpu_limit / cpus  # no earlier moment can see the budget spent
    while not exited and killed_for is None:
        now = time.monotonic()
        if child.orphaned and child.has_ended():
            break
        if now >= deadline:
            killed_for = KILLED_WALL
            break
        if now >= cpu_check:
            left = cpu_limit - _tree_cpu_seconds(uid, ticks_at_start, cpus * (now - started))
            if left <= 0:
                killed_for = KILLED_CPU
                break
            cpu_check = now + max(left / cpus, 0.01)
        wake = min(deadline, cpu_check, now + ORPHAN_TICK if child.orphaned else deadline)
        for fd, _ in poller.poll(math.ceil((wake - now) * 1000)):
            if fd == child.exit_fd:
                exited = child.has_ended()
                if child.orphaned:  # no more reports: looked at every tick instead
                    poller.unregister(fd)
            elif fd in run.kinds and not run.forward(fd):
                poller.unregister(fd)
                run.close(fd)
            if run.over_cap:
                killed_for = KILLED_OUTPUT
                break
    duration_ms = (time.monotonic() - started) * 1000
    if killed_for:
        try:  # its own session and group first, in one call: a fork bomb stops spinning before
            os.killpg(pid, signal.SIGKILL)  # the process list is read (gVisor reads it slowly)
        except ProcessLookupError:
            pass
    # Whatever the snippet left running is a stray: it is killed now, before anything else.
    others = _snippet_processes(uid)
    strays = [p for p, alive in others.items() if p != pid and alive]
    if killed_for or strays:
        _kill_uid(uid)  # then everything else of its uid, wherever it moved to
    stray_ticks = _cpu_ticks(p for p in others if p != pid)  # a killed process's stay readable
    wait_status, child_cpu, max_rss_kb = child.wait()
    missed = run.drain(time.monotonic() + DRAIN_SECONDS, uid) - {pid}
    if missed and not strays:
        strays = sorted(missed)  # held a pipe open: alive, whatever the process list said
    run.close_all()
    if run.over_cap and not killed_for:
        killed_for = KILLED_OUTPUT  # it flooded and exited before we read past the cap
    exit_code = os.waitstatus_to_exitcode(wait_status)
    signum = -exit_code if exit_code < 0 else None  # the kernel's word: no exit code forges it
    if exit_code < 0:
        exit_code = 128 - exit_code  # as a shell reports a signal death
    counted = child_cpu + stray_ticks / CLOCK_TICKS
    cpu_seconds = _physical_cpu(counted, cpus * duration_ms / 1000)
    if killed_for is None and _backstop_fired(exit_code, counted, cpu_limit):
        killed_for = KILLED_CPU
    oom_after = counters.oom_kills()
    installed, fetched = False, {}
    if header.get("install") and exit_code == 0 and killed_for is None and not strays:
        _install_program(header["install"], uid, int(config["gid"]))
        installed = True
    if header.get("fetch"):
        fetched = _fetch_files(header["fetch"], int(header["fetch_cap"]), run, uid, config)
    report = _report()
    run.queue(
        frame(
            RESULT,
            json.dumps(
                {
                    "exit_code": exit_code,
                    "signal": signum,
                    "killed_for": killed_for,
                    "started": report[0] == REPORT_STARTED,
                    "memory_error": report[1] == REPORT_MEMORY_ERROR,
                    "oom_killed": oom_before is not None and (oom_after or 0) > oom_before,
                    "duration_ms": round(duration_ms, 2),
                    "cpu_ms": round(cpu_seconds * 1000, 1),
                    "max_rss_kb": max_rss_kb,
                    "strays": len(strays),
                    "installed": installed,
                    "fetched": fetched,
                }
            ).encode(),
        )
    )
    run.flush()
    # Listed after the child's exit: with no stray then, nothing of the snippet's but zombies
    # can exist any more (a zombie forks nothing), so the clean-up need not hunt for processes.
    return not strays and killed_for is None


# -- compiled programs -----------------------------------------------------------------------
def _install_program(name, uid, gid):
    """Copy the compiler's output ``name`` from the run directory into PROGRAM_DIR, owned by
    root, mode 0755: the submission's later runs can execute it but not replace it. It is read
    with the sandbox uid's rights (the run directory is the sandbox's, mode 0700; no link is
    followed), and every process of that uid is dead by now."""
    if os.sep in name or name.startswith("."):
        raise RuntimeError(f"bad program name {name!r}")
    os.setegid(gid)
    os.seteuid(uid)
    try:
        path = os.path.join(zygote.RUN_DIR, name)
        source = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    finally:
        os.seteuid(0)
        os.setegid(0)
    try:
        if not os.path.isfile(f"/proc/self/fd/{source}"):
            raise RuntimeError(f"the compiler's output {name!r} is not a regular file")
        target = os.open(
            os.path.join(PROGRAM_DIR, name),
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o755,
        )
        try:
            while os.sendfile(target, source, None, 1 << 20):
                pass
            os.fchmod(target, 0o755)
        finally:
            os.close(target)
    finally:
        os.close(source)


def _fetch_files(names, cap, run, uid, config):
    """Send the run directory's files ``names`` to the host (FILE_NAME, then FILE_DATA frames
    through the zeroed buffer, as output is), read with the sandbox uid's rights, ``cap``
    bytes in all: {name: bytes sent, or None when it is not a regular file there}."""
    sizes, left = {}, cap
    view = memoryview(_buffer)
    os.setegid(int(config["gid"]))
    os.seteuid(uid)
    try:
        for name in names:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            try:
                fd = os.open(os.path.join(zygote.RUN_DIR, name), flags)
            except OSError:
                sizes[name] = None
                continue
            try:
                if not os.path.isfile(f"/proc/self/fd/{fd}"):
                    sizes[name] = None
                    continue
                run.queue(frame(FILE_NAME, name.encode()))
                sent = 0
                while left > 0 and (n := os.readv(fd, [view[8 : 8 + min(CHUNK, left)]])):
                    _dirty["buffer"] = max(_dirty["buffer"], 8 + n)
                    view[0:8] = bytes((FILE_DATA, 0, 0, 0)) + n.to_bytes(4, "big")
                    run.queue(view[: 8 + n])
                    sent, left = sent + n, left - n
                sizes[name] = sent
            finally:
                os.close(fd)
    finally:
        os.seteuid(0)
        os.setegid(0)
    return sizes


def _drop_programs():
    """Remove the compiled programs (the clean-up of a request that does not keep them);
    what cannot be removed is a problem that retires the container."""
    try:
        for name in os.listdir(PROGRAM_DIR):
            os.unlink(os.path.join(PROGRAM_DIR, name))
        return [] if not os.listdir(PROGRAM_DIR) else [f"{PROGRAM_DIR} not empty"]
    except FileNotFoundError:
        return []  # a container made without the directory never held a program
    except OSError as exc:
        return [f"cannot empty {PROGRAM_DIR}: {exc!r}"]


# -- proving the container clean -------------------------------------------------------------
class _Baseline:
    """What this container looks like clean: measured once, before its first child exists."""

    def __init__(self, counters):
        self.counters = counters
        self.oom_kills = counters.oom_kills()
        self.memory = counters.memory_charged()
        self.net = counters.net_counters()
        self.sockets = counters.socket_counts()
        self.memory_grown = 0  # the last check's finding (reported, for the margin's sake)

    def problems(self):
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


def _wipe_writable(uid, gid):
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


def _problems(uid, gid, zygotes, counters, alone, baseline):
    """Everything that keeps this container from serving another snippet (empty: clean).

    ``alone``: the run already proved that the snippet left no process but zombies."""
    found = []
    for parent in zygotes:
        try:  # looked at before any reaping, which would take a dead zygote away
            flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
            if os.waitid(os.P_PID, parent.pid, flags) is not None:
                found.append("a zygote died")
        except ChildProcessError:
            found.append("a zygote is gone")
    if alone:
        _reap()
    else:
        if not _kill_all(uid):
            found.append(f"processes survived SIGKILL: {sorted(_snippet_processes(uid))}")
        others = set(_processes()) - {parent.pid for parent in zygotes}
        if others:
            found.append(f"unexpected processes: {sorted(others)}")
    try:
        _wipe_writable(uid, gid)
    except (OSError, RuntimeError) as exc:
        found.append(f"cannot empty {WRITABLE}: {exc!r}")
    if os.listdir(WRITABLE):
        found.append(f"{WRITABLE} not empty after the wipe")
    found += baseline.problems()
    if counters.sysv_objects_left():
        found.append("System V IPC objects left")
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    expected = {0, 1, 2, _report_fd, *(parent.sock.fileno() for parent in zygotes), *counters.fds}
    if not expected <= set(fds) or len(fds) > len(expected) + 1:  # + the one listdir used
        found.append(f"supervisor descriptors leaked: {fds}")
    for name, buffer in (("buffer", _buffer), ("pending", _pending)):
        buffer[: _dirty[name]] = bytes(_dirty[name])
        _dirty[name] = 0
    _clear_report()
    return found


def _skip(count):
    """Answer the next ``count`` requests of a stopped batch without running them: each gets a
    RESULT that says so (the host runs them again elsewhere); the last one's header."""
    header = {}
    for _ in range(count):
        size = _read_exact(4)
        text = size and _read_exact(int.from_bytes(size, "big"))
        if not text:
            break  # the host is gone
        header = json.loads(text)
        left = int(header["size"])
        while left and (chunk := os.read(0, min(left, CHUNK))):
            left -= len(chunk)
        _send(RESULT, json.dumps({"skipped": True}).encode())
    return header


def _late_zygote(config, baseline):
    """The heavy zygote, started once the container served snippets (proven clean since the
    last): what it holds, memory and its socket pair, is added to the clean-up's baseline."""
    counters = baseline.counters
    memory, sockets = counters.memory_charged(), counters.socket_counts()
    if sockets != baseline.sockets:
        raise RuntimeError("the socket counts moved since the last clean-up")
    zygote = _Zygote(config, heavy=True)
    after = counters.memory_charged()
    if baseline.memory is not None and memory is not None and after is not None:
        baseline.memory += after - memory
    baseline.sockets = counters.socket_counts()
    return zygote


def _become_reaper():
    """PID 1 reaps every orphan by itself; anywhere else, ask to be the subreaper."""
    if os.getpid() != 1 and zygote.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "not PID 1 and cannot become the subreaper")


def main(config):
    _become_reaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # PID 1 then ignores every signal it can
    uid, gid = int(config["uid"]), int(config["gid"])
    light = _Zygote(config)  # a program of its own: it inherits its socket and the report page only
    # The heavy zygote now, or at the first snippet that needs it (see backends/supervised.py:
    # Preload): importing sympy and numpy is most of a container's start-up.
    heavy_zygote = _Zygote(config, heavy=True) if config.get("preload_at_start", True) else None
    counters = _Counters()
    gc.freeze()
    heavy = False  # the kind of child forked ahead: the kind the last snippet needed
    baseline = _Baseline(counters)
    child = _Child(light)
    os.write(1, READY_MARKER)
    while True:
        size = _read_exact(4)
        if size is None:
            if child:
                child.discard()
            return
        header = json.loads(_read_exact(int.from_bytes(size, "big")))
        alone = False
        try:
            heavy = bool(header.get("heavy"))
            if child is not None and child.heavy != heavy:
                child.discard()  # forked ahead for the other kind
                child = None
                _wipe_writable(uid, gid)  # its working directory
            if heavy and heavy_zygote is None:
                heavy_zygote = _late_zygote(config, baseline)
            child = child or _Child(heavy_zygote if heavy else light)
            alone = _serve_one(header, child, config, counters)
        except Exception as exc:  # noqa: BLE001 - tell the host, which retires this container
            _send(RESULT, json.dumps({"anomaly": f"supervisor failed: {exc!r}"}).encode())
        if child:
            child.discard()  # a no-op after a run; fds of a failed one
        child = None
        zygotes = [z for z in (light, heavy_zygote) if z is not None]
        problems = None  # the clean-up's findings, once it has run
        following = int(header.get("then", 0))  # requests of the same batch, already sent
        if following:
            # A batch goes on after a run that ended by itself, alone, within its memory
            # (what the host would continue after), once the clean-up proves the container
            # clean: the same proof as between two requests, without the round trip.
            if alone and _report()[1] != REPORT_MEMORY_ERROR:
                problems = _problems(uid, gid, zygotes, counters, alone, baseline)
                if not problems:
                    try:
                        child = _Child(heavy_zygote if heavy else light)
                        continue  # no CLEANUP inside a batch: its next request is waiting
                    except (OSError, RuntimeError) as exc:
                        problems = [f"cannot fork the next child: {exc!r}"]
            header = _skip(following) or header
            following = -1  # stopped: the host reads a verdict, even from a last run's container
        if header.get("last") and following == 0:
            # The container is discarded: no clean-up to prove. Exit once the host has read
            # the result and closed stdin (gVisor may drop output written just before PID 1
            # exits); PID 1's exit ends every process left.
            continue
        if problems is None:
            problems = _problems(uid, gid, zygotes, counters, alone, baseline)
        if not header.get("keep"):
            problems += _drop_programs()  # a compiled program lives for its judge request only
        if not problems:
            # Only now, with every process of the last snippet dead, the next child may exist.
            try:
                child = _Child(heavy_zygote if heavy else light)
            except (OSError, RuntimeError) as exc:
                problems.append(f"cannot fork the next child: {exc!r}")
        verdict = {"clean": not problems, "problems": problems}
        verdict["memory_grown_kb"] = baseline.memory_grown >> 10
        _send(CLEANUP, json.dumps(verdict).encode())
