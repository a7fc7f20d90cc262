"""The zygote program (stdlib only), and the set-up of every process that runs a snippet's code.

A zygote is the parent the snippets' children are forked from: a root process that forks a
child when the supervisor asks (on its socket, with the child's descriptors), reaps it and
reports its exit status and resource usage as ``wait4`` gave them (a process the snippet cannot
signal, trace or write to). The supervisor itself forks no child per run: a fork write-protects
every page of the parent, which then pays a fault for each page it writes while the child lives.

It is a program of its own, started fresh (``bootstrap`` with this module, ``runner`` and
``protocol`` only), not a fork of the supervisor: a fork copies a page table entry for every
page of the parent's memory, and an exit tears each down, and each child writes to a share of
the parent's pages. Compiling the supervisor leaves about 3 MiB in a process; a child of this
interpreter forks and exits without them. Two zygotes: the light one holds only the standard
library and forks the children of snippets that import nothing else; the heavy one imports the
preload modules (sympy, numpy) first. Each sets once what every child inherits (signal
dispositions, thread defaults, fixed limits) and proves once that the uid drop leaves no
capability.

Its configuration (``protocol.GuestConfig``) is the supervisor's, with ``zygote``
(``protocol.ZygoteLink``): ``socket``, the descriptor of its end of the supervisor's socket
pair; ``report``, a memfd holding the children's report page (see ``protocol``), mapped here
so that every child shares it; ``heavy``.

The child (``_child``) is forked ahead of its snippet: it gets its own session, a memfd with
the snippet body as stdin, two pipes as stdout/stderr and a hand-over pipe, nothing else, an
OOM score of 1000 (a hint it may undo), nice 19; it drops to the sandbox uid/gid with no
supplementary groups, makes an empty ``/tmp/run`` its working directory and blocks on the
hand-over pipe. When the snippet comes it sets the request's rlimits and hands over to
``runner.run``.
"""

import ctypes
import gc
import json
import math
import mmap
import os
import resource
import signal
import socket
import sys

# Preloaded for the runner, which imports it only on an error: a child whose address space a
# deep recursion exhausted could not import it then, and its stderr would lose the error.
import traceback  # noqa: F401

from . import runner
from .protocol import REPORT_MEMORY_ERROR, REPORT_STARTED

RUN_DIR = "/tmp/run"
harness = None  # the test-script judge (guest/harness.py): imported by ``main``, since only the
# one-shot supervisor's zygotes judge; a session's or a shell's program is sent without it
SETUP_FAILED = 126
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
CAP_LINES = (b"\nCapInh:", b"\nCapPrm:", b"\nCapEff:", b"\nCapAmb:")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
M_ARENA_MAX = -8
THREAD_STACK = 4 * 1024 * 1024
PTRACE_DETACH = 17

libc = ctypes.CDLL(None, use_errno=True)
_report = None  # the children's report page: mapped by main


def _small_threads():
    """Make a thread cost what it uses, not what glibc reserves: RLIMIT_AS counts reserved
    address space, and each thread would reserve a 64 MiB malloc arena and an 8 MiB stack
    (RLIMIT_STACK), so 32 threads would pass a 256 MiB limit without using it. One arena and
    4 MiB stacks (for every thread, Python's or a library's) leave the limit to real use."""
    attr = ctypes.create_string_buffer(64)  # pthread_attr_t is 56 bytes on x86-64
    if (
        not libc.mallopt(M_ARENA_MAX, 1)
        or libc.pthread_attr_init(attr)
        or libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(THREAD_STACK))
        or libc.pthread_setattr_default_np(attr)
    ):
        raise RuntimeError("cannot set the thread stack size or the malloc arenas")
    libc.pthread_attr_destroy(attr)


def _set_fixed_limits(config):
    """The limits every snippet of this sandbox gets, whatever its request: set once in each
    zygote and inherited by its children (RLIMIT_NPROC stays per child: it would bound the
    zygote's own forks)."""
    _lower_limits(
        (resource.RLIMIT_NOFILE, config.nofile, config.nofile),
        (resource.RLIMIT_FSIZE, config.fsize, config.fsize),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_MSGQUEUE, 0, 0),
    )


def mapped_bytes():
    """This process's mapped address space (``/proc/self/statm``): a request's memory share goes
    on top of it."""
    fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return int(os.read(fd, 64).split(None, 1)[0]) * PAGE_SIZE
    finally:
        os.close(fd)


def set_request_limits(limits, config, mapped=None):
    """The limits of this request: its address space and CPU time (and gVisor's RLIMIT_NPROC).

    ``mapped``: the address space already read (a waiting child reads it before its request
    comes, off the run's path); read now if not given."""
    if mapped is None:
        mapped = mapped_bytes()
    share = int(limits["memory_mb"]) * 1024 * 1024
    address_space = mapped + share  # its own share on top
    # An exec'd program leaves this interpreter's mappings behind: its soft limit is its share
    # alone (the runner raises it to the hard one only where exec itself needs more: gVisor).
    soft_space = share if limits.get("argv") else address_space
    cpu = math.ceil(float(limits["cpu"])) + 1  # a backstop: the supervisor stops it on time
    nproc = config.nproc  # gVisor: its own kernel counts this sandbox's tasks alone
    if nproc:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    _lower_limits(
        (resource.RLIMIT_AS, soft_space, address_space),
        (resource.RLIMIT_CPU, cpu, cpu + 1),  # SIGXCPU, then SIGKILL a second later
        # an exec'd program's stack may use its whole memory limit (deep recursion in C++)
        *([(resource.RLIMIT_STACK, share, share)] if limits.get("argv") else []),
    )


def _lower_limits(*settings):
    for which, soft, hard in settings:
        ceiling = resource.getrlimit(which)[1]
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        try:
            resource.setrlimit(which, (soft, hard))
        except ValueError:
            # gVisor refuses a zero message-queue limit; it has no message queues to limit
            if which != resource.RLIMIT_MSGQUEUE:
                raise


def drop_privileges(uid, gid):
    """Become ``uid``/``gid`` (real, effective and saved) with no supplementary group."""
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise RuntimeError("uid/gid drop incomplete")


def check_no_capabilities():
    """Raise unless this process holds no capability (after ``drop_privileges``)."""
    fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    try:
        status = _read_to_end(fd)
    finally:
        os.close(fd)
    # gVisor's /proc shows no CapAmb line; the other three must be there and empty
    for key in CAP_LINES:
        at = status.find(key)
        if at < 0 and key != b"\nCapAmb:":
            raise RuntimeError(f"no {key.strip()!r} line in /proc/self/status")
        if at >= 0 and int(status[at + len(key) : status.index(b"\n", at + 1)], 16):
            raise RuntimeError(f"capabilities left after the drop: {status[at : at + 40]!r}")


def prove_the_drop(uid, gid):
    """Fork a child that drops to the sandbox uid and proves it holds no capability.

    Done once per zygote, not in every child (reading and parsing /proc/self/status cost a child
    about 25 copy-on-write faults): what a uid change leaves depends only on the process's
    capability sets and securebits, which every child inherits unchanged from its zygote, and
    which the zygote never changes. Each child still checks its own uid and gid change."""
    pid = os.fork()
    if pid == 0:
        try:
            drop_privileges(uid, gid)
            check_no_capabilities()
        except BaseException as exc:  # noqa: BLE001 - every failure must stop the zygote
            os.write(2, f"boxed supervisor: the uid drop is not clean: {exc!r}\n".encode())
            os._exit(SETUP_FAILED)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RuntimeError("the uid drop leaves capabilities (see the message above)")


def _read_to_end(fd):
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)


def wait_ended(pid):
    """``wait4`` for ``pid``'s end: (pid, wait status, usage). A child that called
    PTRACE_TRACEME made its parent (this process) its tracer, and wait reports its every stop;
    each is detached with the signal that stopped it (a SIGSTOP then stops it untraced, and its
    limits end it), so only its end is returned, never a stop as if it were one."""
    while True:
        waited, status, usage = os.wait4(pid, 0)
        if not os.WIFSTOPPED(status):
            return waited, status, usage
        libc.ptrace(PTRACE_DETACH, pid, None, os.WSTOPSIG(status))


def interpreter_defaults(config):
    """What a snippet's interpreter inherits from the process that forks it: the signal
    dispositions, ``sys.argv``, the thread defaults and the fixed limits. Set once in each
    zygote and in a session's interpreter; a child that set them again would pay a copy-on-write
    fault for every page it touched."""
    _restore_signals()
    sys.argv = ["-c"]
    _small_threads()
    _set_fixed_limits(config)


def enter_sandbox(config):
    """The snippet's side of the sandbox, entered by every child and by a session's interpreter
    before any of its code runs (the caller has made it a session leader with its own streams)."""
    # Under memory pressure the kernel should take the snippet. The snippet may lower it
    # again (a floor needs CAP_SYS_RESOURCE): then the host learns of the OOM kill from
    # the engine, and the verdict is the same.
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
    os.write(fd, b"1000")  # (one write into procfs, whole or an error)
    os.close(fd)
    os.nice(19)  # the supervisor keeps its CPU share (and its timer) under a busy snippet
    drop_privileges(config.uid, config.gid)  # its zygote proved it clean
    # The uid change made us non-dumpable, which hands /proc/self to root; the snippet may
    # own its /proc entries as in container mode (its memory is only a preload's copy).
    if libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_DUMPABLE")
    os.mkdir(RUN_DIR, 0o700)
    os.chdir(RUN_DIR)


def hand_over_text(limits):
    """What the supervisor writes to a child that waits for its snippet: "cpu memory_mb" for a
    plain run (a json.loads costs the child about 25 copy-on-write faults), JSON otherwise; one
    line, so the child stops reading at its newline rather than waiting to be woken again by
    the pipe's end (``read_hand_over``)."""
    if limits.keys() == {"cpu", "memory_mb"}:
        return b"%r %d\n" % (float(limits["cpu"]), int(limits["memory_mb"]))
    return json.dumps(limits).encode() + b"\n"


def read_hand_over(fd):
    """The line ``hand_over_text`` wrote, usually in one read (a pipe write of up to PIPE_BUF
    bytes arrives whole); empty if the pipe ended first (the supervisor is going away), and a
    line cut short by the pipe's end is refused."""
    data = os.read(fd, 4096)
    while data and not data.endswith(b"\n"):
        more = os.read(fd, 4096)
        if not more:
            raise RuntimeError("the hand-over ended before its newline")
        data += more
    return data


def handed_limits(data):
    """The limits ``hand_over_text`` wrote."""
    if data.startswith(b"{"):
        return json.loads(data)
    cpu, memory_mb = data.split()
    return {"cpu": float(cpu), "memory_mb": int(memory_mb)}


def _child(body_fd, out_w, err_w, go_r, config, judged=False):
    """The forked child: set up, wait for the snippet, run it. Never returns.

    ``judged``: a test script's run (``harness``), forked when its request came: it stays root
    until the hand-over, then splits into the submission's process and the harness."""
    try:
        # (The interpreter defaults are the zygote's: interpreter_defaults.)
        os.setsid()
        for fd, target in ((body_fd, 0), (out_w, 1), (err_w, 2), (go_r, 3)):
            os.dup2(fd, target)
        os.closerange(4, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        if not judged:
            enter_sandbox(config)
        mapped = mapped_bytes()  # before the wait: off the run's path
        handed = read_hand_over(3)  # blocks until the snippet is in the memfd
        if not handed:
            os._exit(0)  # the supervisor is going away
        os.close(3)
        os.lseek(0, 0, os.SEEK_SET)
        # Only lowering limits, which needs no privilege.
        # (Processes: the container's pids cgroup, which only this snippet uses while it runs;
        # RLIMIT_NPROC would count the sandbox uid across every container of the host.)
        limits = handed_limits(handed)
        set_request_limits(limits, config, mapped)
    except BaseException as exc:  # noqa: BLE001 - any set-up failure must stop before the code
        os.write(2, f"boxed supervisor: child set-up failed: {exc!r}\n".encode())
        os._exit(SETUP_FAILED)
    try:
        # os._exit()s with the snippet's status (or execs the program of a compile/exec run)
        if judged:
            harness.run(_report, config, enter_sandbox, drop_privileges)
        runner.run(_report, limits)
    except MemoryError:
        # The address-space limit left no room even for the runner's own work.
        _report[0], _report[1] = REPORT_STARTED, REPORT_MEMORY_ERROR
    finally:
        os._exit(1)  # never fall back into the supervisor's loop, whatever happened


def _restore_signals():
    """A snippet starts with the signal dispositions of ``python -c``."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _close_all_but(*kept):
    """Close every descriptor from 3 up but ``kept``."""
    low = 3
    for fd in sorted(kept):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, resource.getrlimit(resource.RLIMIT_NOFILE)[1])


def main(config):
    """Serve the supervisor until it closes its end of the socket. Never returns."""
    global _report, harness
    try:
        from . import harness  # before any child: each would import it again

        own = config.zygote
        sock, report_fd = own.socket, own.report
        # Only what the supervisor passed on is open (the standard streams, which the children
        # replace, the socket and the report page's memfd); closed to be sure, as a child must
        # inherit nothing else.
        _close_all_but(sock, report_fd)
        sock = socket.socket(fileno=sock)
        _report = mmap.mmap(report_fd, mmap.PAGESIZE)  # (keeps a duplicate: the children close it)
        os.close(report_fd)
        interpreter_defaults(config)
        prove_the_drop(config.uid, config.gid)
        # The children's first calls of these, made here: a first call sets up what later ones
        # reuse (ctypes looks the function up, json its decoder), each child would pay for it.
        libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
        json.loads('{"memory_mb": 1}')
        handed_limits(b"1.0 1\n")
        for name in config.preload if own.heavy else []:
            try:
                __import__(name)
            except Exception:
                pass  # a missing optional module only costs the snippet its own import
        # Hand the heap's free pages back (compiling the guest modules from source left some):
        # a fork copies, and an exit tears down, a page table entry for each page still mapped.
        libc.malloc_trim(0)
        gc.freeze()  # children then leave the objects' pages shared (no GC writes)
        sock.send(b"ready")
        while True:
            message, fds, _, _ = socket.recv_fds(sock, 16, 4)
            if not message:
                os._exit(0)
            pid = os.fork()
            if pid == 0:
                _child(*fds, config, judged=message == b"harness")
            for fd in fds:
                os.close(fd)
            sock.send(b"%d" % pid)
            _, status, usage = wait_ended(pid)  # a traced child's stops are let go
            cpu = usage.ru_utime + usage.ru_stime
            sock.send(b"%d %r %d" % (status, cpu, usage.ru_maxrss))
    finally:
        os._exit(1)
