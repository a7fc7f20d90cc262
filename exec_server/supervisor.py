"""The resident program of a process-mode sandbox (stdlib only; its text goes to ``python -c``).

It runs as root in a container that keeps only CAP_SETUID, CAP_SETGID and CAP_KILL, imports the
popular modules once, and then serves one snippet at a time, each in a freshly forked child:

* the child is forked ahead of its snippet, once the container has been proven clean (a fork
  of this preloaded interpreter costs about 2 ms, which this takes out of the request's
  latency): it gets its own session, a memfd as stdin, two pipes as stdout/stderr and a
  hand-over pipe, nothing else (every other descriptor, including the attach stream, is
  closed), nice 19, drops to the sandbox uid/gid with no supplementary groups, verifies that
  no capability is left, makes an empty ``/tmp/run`` its working directory and blocks on the
  hand-over pipe. When the snippet comes it sets its own rlimits (address space, CPU, file
  size, descriptors, no core, no message queues) and hands over to the container mode's own
  ``sandbox_runner.main`` (so verdicts, tracebacks and exit codes are the same). The next
  child is only forked after every process of the previous snippet is dead: a snippet never
  shares the container with a later child it could trace (same uid);
* the supervisor forwards the pipes with a per-stream cap, kills at the wall limit, and after
  the child ends kills every other process in the container (``kill(-1, SIGKILL)`` reaches
  everything in the PID namespace but init and itself; it is the subreaper, so daemonised
  grandchildren come back to it to be reaped), empties ``/tmp`` (as the sandbox uid, through
  ``setfsuid``), and proves the container clean: no process but init and itself, ``/tmp``
  empty, no System V IPC object, no descriptor beyond 0-2.

The code and input never pass through the supervisor's memory (they are spliced from stdin
into the child's memfd), and child output passes through one buffer that is zeroed after each
run, so a later child, a copy of this process, finds no trace of an earlier snippet.

Protocol. Host to supervisor, on stdin: a 4-byte big-endian length and a JSON header
``{"timeout": s, "memory_mb": n, "size": m}``, then ``m`` bytes that are exactly the frame
``sandbox_runner`` reads (the lengths, then code, input and nonce). Supervisor to host,
on stdout: the ready marker once, then frames with Docker's 8-byte header (kind, three zero
bytes, 4-byte big-endian length): 1 = child stdout, 2 = child stderr, 3 = the run's result,
4 = the clean-up verdict (both JSON). The host sends the next request only after frame 4.
"""

import ctypes
import gc
import json
import math
import os
import resource
import select
import signal
import sys
import time

# Preloaded for the runner, which imports it only on an error: a child whose address space a
# deep recursion exhausted could not import it then, and its stderr would lose the error.
import traceback  # noqa: F401

READY_MARKER = b"\x00boxed-ready\x00\n"
OUT, ERR, RESULT, CLEANUP = 1, 2, 3, 4
CHUNK = 65536
RUN_DIR = "/tmp/run"
WRITABLE = "/tmp"
KILL_SECONDS = 2.0  # longest wait for SIGKILLed processes to vanish
DRAIN_SECONDS = 1.0  # longest wait for pipe EOF once every writer is dead
MAX_TREE_DEPTH = 64
SETUP_FAILED = 126
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
CAP_LINES = ("CapInh:", "CapPrm:", "CapEff:", "CapAmb:")
OOM_FILES = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")
SYSV_FILES = ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem")

_libc = ctypes.CDLL(None, use_errno=True)
_buffer = bytearray(8 + CHUNK)  # the only place child output ever sits; zeroed after each run


def _write_all(data, fd=1):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _send(kind, data):
    header = bytes((kind, 0, 0, 0)) + len(data).to_bytes(4, "big")
    _write_all(header + data)


def _read_exact(n):
    chunks = []
    while n:
        chunk = os.read(0, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _receive_body(fd, size):
    """Move the runner frame from stdin into the child's memfd without copying it into this
    process."""
    while size:
        moved = os.splice(0, fd, size)
        if not moved:
            raise EOFError("stdin closed inside a request")
        size -= moved


# -- the child -------------------------------------------------------------------------------
def _set_limits(timeout, memory_mb, config):
    page = os.sysconf("SC_PAGE_SIZE")
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * page
    address_space = mapped + memory_mb * 1024 * 1024  # the snippet's own share on top
    cpu = math.ceil(timeout) + 1
    for which, soft, hard in (
        (resource.RLIMIT_AS, address_space, address_space),
        (resource.RLIMIT_CPU, cpu, cpu + 1),  # SIGXCPU, then SIGKILL a second later
        (resource.RLIMIT_NOFILE, int(config["nofile"]), int(config["nofile"])),
        (resource.RLIMIT_FSIZE, int(config["fsize"]), int(config["fsize"])),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_MSGQUEUE, 0, 0),
    ):
        ceiling = resource.getrlimit(which)[1]
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        resource.setrlimit(which, (soft, hard))


def _drop_privileges(uid, gid):
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise RuntimeError("uid/gid drop incomplete")
    with open("/proc/self/status") as f:
        caps = [line.split()[1] for line in f if line.startswith(CAP_LINES)]
    if len(caps) != len(CAP_LINES) or any(int(c, 16) for c in caps):
        raise RuntimeError(f"capabilities left after the drop: {caps}")


def _read_to_end(fd):
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)


def _child(body_fd, out_w, err_w, go_r, config, runner_main):
    try:
        os.setsid()
        for fd, target in ((body_fd, 0), (out_w, 1), (err_w, 2), (go_r, 3)):
            os.dup2(fd, target)
        for fd in [int(fd) for fd in os.listdir("/proc/self/fd")]:
            if fd > 3:
                try:
                    os.close(fd)
                except OSError:
                    pass  # the descriptor listdir itself used
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")  # under memory pressure the kernel takes the snippet, not us
        os.nice(19)  # the supervisor keeps its CPU share (and its timer) under a busy snippet
        _drop_privileges(int(config["uid"]), int(config["gid"]))
        # The uid change made us non-dumpable, which hands /proc/self to root; the snippet may
        # own its /proc entries as in container mode (its memory is only a preload's copy).
        if _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_DUMPABLE")
        os.mkdir(RUN_DIR, 0o700)
        os.chdir(RUN_DIR)
        sys.argv = ["-c"]
        handed = _read_to_end(3)  # blocks until the snippet is in the memfd
        if not handed:
            os._exit(0)  # the supervisor is going away
        os.close(3)
        header = json.loads(handed)
        os.lseek(0, 0, os.SEEK_SET)
        # Only lowering limits, which needs no privilege.
        # (Processes: the container's pids cgroup, which only this snippet uses while it runs;
        # RLIMIT_NPROC would count the sandbox uid across every container of the host.)
        _set_limits(float(header["timeout"]), int(header["memory_mb"]), config)
    except BaseException as exc:  # noqa: BLE001 - any set-up failure must stop before the code
        os.write(2, f"boxed supervisor: child set-up failed: {exc!r}\n".encode())
        os._exit(SETUP_FAILED)
    try:
        runner_main()  # writes the ready marker, reads the frame from fd 0, runs, os._exit()s
    except MemoryError:
        # The address-space limit left no room even for the runner's traceback: say what
        # python -c would have said last, so the verdict is memory_limit as in container mode.
        os.write(2, b"\nMemoryError\n")
    finally:
        os._exit(1)  # never fall back into the supervisor's loop, whatever happened


class _Child:
    """A forked child that has done its set-up and waits on the hand-over pipe.

    It owns the supervisor's ends of the child's descriptors; each is closed exactly once.
    """

    def __init__(self, config, runner_main):
        self.body_fd = os.memfd_create("boxed-request", os.MFD_CLOEXEC)
        self.out_r, out_w = os.pipe2(os.O_CLOEXEC)
        self.err_r, err_w = os.pipe2(os.O_CLOEXEC)
        go_r, self.go_w = os.pipe2(os.O_CLOEXEC)
        self.pid = os.fork()
        if self.pid == 0:
            _child(self.body_fd, out_w, err_w, go_r, config, runner_main)
        for fd in (out_w, err_w, go_r):
            os.close(fd)
        self.pidfd = os.pidfd_open(self.pid)
        self.open = {self.body_fd, self.out_r, self.err_r, self.go_w, self.pidfd}
        self.reaped = False

    def hand_over(self, limits):
        """Give the child its limits: it runs the snippet already spliced into its memfd."""
        _write_all(json.dumps(limits).encode(), self.go_w)
        self.close(self.go_w)
        self.close(self.body_fd)

    def close(self, fd):
        if fd in self.open:
            self.open.discard(fd)
            os.close(fd)

    def wait(self):
        """Reap the child: its wait status."""
        _, status = os.waitpid(self.pid, 0)
        self.reaped = True
        return status

    def discard(self):
        """Kill and reap the child if it is still there, and close what is left open."""
        if not self.reaped:
            os.kill(self.pid, signal.SIGKILL)  # by pid: it may not have its own group yet
            self.wait()
        for fd in list(self.open):
            self.close(fd)


# -- watching a run --------------------------------------------------------------------------
class _Run:
    """Forwards the child's pipes to the host with a per-stream cap."""

    def __init__(self, child, cap):
        self.child = child
        self.kinds = {child.out_r: OUT, child.err_r: ERR}
        self.sent = {OUT: 0, ERR: 0}
        self.cap = cap
        self.marker_left = len(READY_MARKER)  # the runner's marker opens stdout; it is ours

    @property
    def over_cap(self):
        return max(self.sent.values()) > self.cap

    def forward(self, fd):
        """Send one chunk of ``fd`` on; False at end of file or once the stream passed its cap."""
        view = memoryview(_buffer)
        n = os.readv(fd, [view[8:]])
        if not n:
            return False
        kind = self.kinds[fd]
        start = 8
        if kind == OUT and self.marker_left:
            take = min(self.marker_left, n)
            done = len(READY_MARKER) - self.marker_left
            if bytes(view[8 : 8 + take]) != READY_MARKER[done : done + take]:
                raise RuntimeError("child stdout did not start with the ready marker")
            self.marker_left -= take
            start += take
        count = min(8 + n - start, self.cap + 1 - self.sent[kind])
        if count > 0:
            view[start - 8 : start] = bytes((kind, 0, 0, 0)) + count.to_bytes(4, "big")
            _write_all(view[start - 8 : start + count])
            self.sent[kind] += count
        return self.sent[kind] <= self.cap

    def drain(self, deadline):
        """Forward what is left in the pipes until every writer is gone (EOF)."""
        for fd in list(self.kinds):
            os.set_blocking(fd, False)
        while self.kinds and time.monotonic() < deadline:
            readable, _, _ = select.select(list(self.kinds), [], [], deadline - time.monotonic())
            for fd in readable:
                try:
                    if not self.forward(fd):
                        self.close(fd)
                except BlockingIOError:
                    continue

    def close(self, fd):
        if self.kinds.pop(fd, None) is not None:
            self.child.close(fd)

    def close_all(self):
        for fd in list(self.kinds):
            self.close(fd)


def _oom_kills():
    for path in OOM_FILES:
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            continue
    return None


def _others():
    """PIDs in the container other than init and this process, with their state letter."""
    me, found = os.getpid(), {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                found[int(name)] = f.read().rpartition(b")")[2].split()[0].decode()
        except (OSError, IndexError):
            continue  # gone meanwhile
    return found


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _sigkill(pid):
    """SIGKILL a process group (pid > 0) or, with -1, every process but init and us."""
    try:
        if pid > 0:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill_all():
    """SIGKILL every process but init and us, reap them; True when none is left."""
    deadline = time.monotonic() + KILL_SECONDS
    while True:
        _sigkill(-1)
        _reap()
        if not _others():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)


def _serve_one(header, child, config):
    _receive_body(child.body_fd, int(header["size"]))
    timeout = float(header["timeout"])
    pid, pidfd = child.pid, child.pidfd
    run = _Run(child, int(config["output_cap"]))
    poller = select.poll()
    for fd in (child.out_r, child.err_r, pidfd):
        poller.register(fd, select.POLLIN)
    oom_before = _oom_kills()
    started = time.monotonic()
    child.hand_over({"timeout": timeout, "memory_mb": int(header["memory_mb"])})
    killed_for, exited = None, False
    deadline = started + timeout
    while not exited and killed_for is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            killed_for = "timeout"
            break
        for fd, _ in poller.poll(math.ceil(remaining * 1000)):
            if fd == pidfd:
                exited = True
            elif fd in run.kinds and not run.forward(fd):
                poller.unregister(fd)
                run.close(fd)
            if run.over_cap:
                killed_for = "output_limit"
                break
    duration_ms = (time.monotonic() - started) * 1000
    child.close(pidfd)
    # Whatever the snippet left running is a stray: it is killed now, before anything else.
    strays = [p for p, state in _others().items() if p != pid and state != "Z"]
    if killed_for:
        _sigkill(pid)  # the child's own session and process group first
    if killed_for or strays:
        _sigkill(-1)  # then everything else, wherever it moved to
    wait_status = child.wait()
    run.drain(time.monotonic() + DRAIN_SECONDS)
    run.close_all()
    if run.over_cap and not killed_for:
        killed_for = "output_limit"  # it flooded and exited before we read past the cap
    exit_code = os.waitstatus_to_exitcode(wait_status)
    if exit_code < 0:
        exit_code = 128 - exit_code  # as the container's init reports a signal death
    oom_after = _oom_kills()
    anomaly = None
    if run.marker_left and not killed_for:
        anomaly = "the child died before running the code"
    _send(
        RESULT,
        json.dumps(
            {
                "exit_code": exit_code,
                "killed_for": killed_for,
                "oom_killed": oom_before is not None and (oom_after or 0) > oom_before,
                "duration_ms": round(duration_ms, 2),
                "strays": len(strays),
                "anomaly": anomaly,
            }
        ).encode(),
    )


# -- proving the container clean -------------------------------------------------------------
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


def _wipe_writable(uid):
    """Empty /tmp with the sandbox uid's file rights (no capability bypasses file modes)."""
    _libc.setfsuid(uid)
    try:
        if _libc.setfsuid(-1) != uid:
            raise RuntimeError("setfsuid refused")
        fd = os.open(WRITABLE, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _wipe_dir(fd, 0)
        finally:
            os.close(fd)
    finally:
        _libc.setfsuid(0)
    if _libc.setfsuid(-1) != 0:
        raise RuntimeError("could not restore fsuid 0")


def _problems(uid):
    """Everything that keeps this container from serving another snippet (empty: clean)."""
    found = []
    if not _kill_all():
        found.append(f"processes survived SIGKILL: {sorted(_others())}")
    try:
        _wipe_writable(uid)
    except (OSError, RuntimeError) as exc:
        found.append(f"cannot empty {WRITABLE}: {exc!r}")
    if os.listdir(WRITABLE):
        found.append(f"{WRITABLE} not empty after the wipe")
    for path in SYSV_FILES:
        try:
            with open(path) as f:
                if len(f.readlines()) > 1:
                    found.append(f"System V IPC objects left in {path}")
        except OSError:
            pass
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    if fds[:3] != [0, 1, 2] or len(fds) > 4:  # 0-2 and the one listdir used
        found.append(f"supervisor descriptors leaked: {fds}")
    _buffer[:] = bytes(len(_buffer))
    return found


def main():
    config = json.loads(sys.argv[1])
    for name in config.get("preload", []):
        try:
            __import__(name)
        except Exception:
            pass  # a missing optional module only costs the snippet its own import
    runner = {"__name__": "boxed_runner"}
    exec(compile(config["runner"], "<boxed-runner>", "exec"), runner)
    gc.freeze()  # children then leave the preloaded objects' pages shared (no GC writes)
    if _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot become the subreaper")
    uid = int(config["uid"])
    child = _Child(config, runner["main"])
    os.write(1, READY_MARKER)
    while True:
        size = _read_exact(4)
        if size is None:
            if child:
                child.discard()
            return
        header = json.loads(_read_exact(int.from_bytes(size, "big")))
        try:
            child = child or _Child(config, runner["main"])
            _serve_one(header, child, config)
        except Exception as exc:  # noqa: BLE001 - tell the host, which retires this container
            _send(RESULT, json.dumps({"anomaly": f"supervisor failed: {exc!r}"}).encode())
        if child:
            child.discard()  # a no-op after a run; fds of a failed one
        child = None
        problems = _problems(uid)
        if not problems:
            # Only now, with every process of the last snippet dead, the next child may exist.
            try:
                child = _Child(config, runner["main"])
            except OSError as exc:
                problems.append(f"cannot fork the next child: {exc!r}")
        _send(CLEANUP, json.dumps({"clean": not problems, "problems": problems}).encode())


if __name__ == "__main__":
    main()
