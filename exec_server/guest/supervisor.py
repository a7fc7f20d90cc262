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

The guest kit does the work the session program shares: ``processes`` (listing and killing the
sandbox uid's processes), ``stdio`` (framed requests and output), ``watch`` (the wall, CPU and
output limits of a run) and ``cleanup`` (the proof that the container is clean); the messages
are ``protocol``'s records.

Being PID 1 makes the supervisor the reaper of every orphan (docker-init is not used; gVisor
refuses ``PR_SET_CHILD_SUBREAPER``), and its death ends every process in the container.
"""

import dataclasses
import gc
import json
import mmap
import os
import signal
import socket
import sys
import time

from . import zygote
from .cleanup import Baseline, Counters, prove_clean, wipe_writable
from .fetch import send_files
from .processes import (
    CLOCK_TICKS,
    become_reaper,
    cpu_ticks,
    exit_status,
    kill_uid,
    snippet_processes,
)
from .protocol import (
    CLEANUP,
    KILLED_CPU,
    KILLED_OUTPUT,
    READY_MARKER,
    REPORT_MEMORY_ERROR,
    REPORT_STARTED,
    RESULT,
    Anomaly,
    CleanupVerdict,
    RunReport,
    Skipped,
    ZygoteLink,
    frame,
    pack_sources,
)
from .stdio import Output, read_request, receive_body, scrub, send, skip_body, write_all
from .watch import DRAIN_SECONDS, Clock, RunEnd, backstop_fired, drain, physical_cpu, watch

PROGRAM_DIR = "/box"  # compiled programs: root's, executable (/tmp is noexec), not wiped
ORPHAN_TICK = 0.01  # how often the exit of a child whose zygote died is looked for
# The guest modules a zygote is started with (``_zygote_command``).
ZYGOTE_MODULES = ("protocol", "runner", "values", "harness", "zygote")

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


def _zygote_command(config, heavy, sock_fd):
    """The command that starts a zygote: the supervisor's interpreter and options (as the host
    started it: ``-c`` and the starting program follow them), ``bootstrap`` with the zygote's
    modules and its configuration (the supervisor's, without the host's socket)."""
    options = sys.orig_argv[1 : sys.orig_argv.index("-c")]
    sources = sys.modules["boxed_guest"].sources
    modules = {name: sources[name] for name in ZYGOTE_MODULES}
    own = dataclasses.replace(
        config,
        program="zygote",
        socket=None,
        bootstrap=None,
        zygote=ZygoteLink(socket=sock_fd, report=_report_fd, heavy=heavy),
    )
    arguments = [pack_sources(modules), json.dumps(own.to_wire())]
    return [sys.executable, *options, "-c", config.bootstrap, *arguments]


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
                # (every other descriptor is close-on-exec), not even the host's stream, nor
                # an environment (the zygote sets its snippets' own: bootstrap.py).
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                for fd in (theirs.fileno(), _report_fd):
                    os.set_inheritable(fd, True)
                os.execve(command[0], command, {})
            finally:
                os._exit(zygote.SETUP_FAILED)
        theirs.close()
        # Waited for: the clean-up compares the container's memory with what it held when
        # ready, which must include the zygote's imports.
        if self.sock.recv(16) != b"ready":
            raise RuntimeError("the zygote did not start")

    def spawn(self, fds, judged=False):
        """Fork a child on ``fds`` (body, stdout, stderr, hand-over); its pid. Its exit comes
        as a message on ``sock`` (``exit_of``). ``judged``: a test script's run (``harness``)."""
        socket.send_fds(self.sock, [b"harness" if judged else b"fork"], fds)
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

    def __init__(self, zygote, judged=False):
        self.zygote = zygote
        self.heavy = zygote.heavy
        self.judged = judged  # a test script's run: the harness and the submission (harness)
        self.body_fd = os.memfd_create("boxed-request", os.MFD_CLOEXEC)
        self.out_r, out_w = os.pipe2(os.O_CLOEXEC)
        self.err_r, err_w = os.pipe2(os.O_CLOEXEC)
        go_r, self.go_w = os.pipe2(os.O_CLOEXEC)
        theirs = (self.body_fd, out_w, err_w, go_r)
        try:
            self.pid = zygote.spawn(theirs, judged)
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
            write_all(zygote.hand_over_text(limits), self.go_w)
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


# -- one run ---------------------------------------------------------------------------------
class _ChildEnd(RunEnd):
    """A child's end as ``watch`` sees it: its zygote's report, or (its zygote gone) its
    exit looked for every ORPHAN_TICK."""

    def __init__(self, child):
        self.child = child
        self.fds = (child.exit_fd,)

    def over(self):
        return self.child.orphaned and self.child.has_ended()

    def tick(self):
        return ORPHAN_TICK if self.child.orphaned else None

    def event(self, fd):
        ended = self.child.has_ended()
        return ended, not self.child.orphaned  # orphaned: no more reports, looked at per tick


def _handed_limits(header):
    """What the child gets at the hand-over: the run's limits and how to run it."""
    handed = {"cpu": header.cpu, "memory_mb": header.memory_mb}
    for key in ("argv", "source", "files"):
        if getattr(header, key):
            handed[key] = getattr(header, key)
    return handed


def _end_run(child, output, config, killed_for):
    """Kill what is left of the run, reap the child and drain its pipes: (wait status, CPU
    seconds counted, peak RSS in KiB, the strays found)."""
    pid, uid = child.pid, config.uid
    if killed_for:
        try:  # its own session and group first, in one call: a fork bomb stops spinning before
            os.killpg(pid, signal.SIGKILL)  # the process list is read (gVisor reads it slowly)
        except ProcessLookupError:
            pass
    if child.judged:  # the harness's uid runs nothing after its process (the child)
        kill_uid(config.harness_uid)
    # Whatever the snippet left running is a stray: it is killed now, before anything else.
    others = snippet_processes(uid)
    strays = [p for p, alive in others.items() if p != pid and alive]
    if killed_for or strays:
        kill_uid(uid)  # then everything else of its uid, wherever it moved to
    stray_ticks = cpu_ticks(p for p in others if p != pid)  # a killed process's stay readable
    wait_status, child_cpu, max_rss_kb = child.wait()
    if child.judged:  # whatever the harness's uid left is killed, and the batch stops here
        strays += sorted(snippet_processes(config.harness_uid))
    missed = drain(output, time.monotonic() + DRAIN_SECONDS, uid) - {pid}
    if missed and not strays:
        strays = sorted(missed)  # held a pipe open: alive, whatever the process list said
    output.close_all()
    return wait_status, child_cpu + stray_ticks / CLOCK_TICKS, max_rss_kb, strays


def _serve_one(header, child, config, counters):
    """Run the request's snippet in ``child``, forward its output and queue its RESULT;
    whether it ended by itself, alone (no stray, no limit)."""
    receive_body(child.body_fd, header.size)
    uid, gid, cpus = config.uid, config.gid, config.cpus  # cpus: CPU time grows at most this fast
    output = Output(child.out_r, child.err_r, config.output_cap, on_close=child.close)
    _clear_report()
    oom_before = counters.oom_kills()
    # the child's own set-up (it is alone: proven clean); a test script's child is root's until
    # the hand-over, and the sandbox uid's processes are counted
    ticks_at_start = 0 if child.judged else cpu_ticks([child.pid])
    clock = Clock(uid, header.wall, header.cpu, cpus, ticks_at_start)
    child.hand_over(_handed_limits(header))
    killed_for = watch(clock, output, _ChildEnd(child))
    duration_ms = (time.monotonic() - clock.started) * 1000
    wait_status, counted, max_rss_kb, strays = _end_run(child, output, config, killed_for)
    if output.over_cap and not killed_for:
        killed_for = KILLED_OUTPUT  # it flooded and exited before we read past the cap
    exit_code, signum = exit_status(wait_status)
    if killed_for is None and backstop_fired(exit_code, counted, header.cpu):
        killed_for = KILLED_CPU
    oom_after = counters.oom_kills()
    installed = bool(header.install and exit_code == 0 and killed_for is None and not strays)
    if installed:
        _install_program(header.install, uid, config.gid)
    fetched = []
    if header.fetch:  # read as the snippet's uid, confined to the run directory (fetch.py)
        fetched = send_files(zygote.RUN_DIR, header.fetch, header.fetch_cap, output, uid, gid)
    report = _report()
    result = RunReport(
        exit_code=exit_code,
        signal=signum,
        killed_for=killed_for,
        started=report[0] == REPORT_STARTED,
        memory_error=report[1] == REPORT_MEMORY_ERROR,
        oom_killed=oom_before is not None and (oom_after or 0) > oom_before,
        duration_ms=round(duration_ms, 2),
        cpu_ms=round(physical_cpu(counted, cpus * duration_ms / 1000) * 1000, 1),
        max_rss_kb=max_rss_kb,
        strays=len(strays),
        installed=installed,
        fetched_files=fetched,
    )
    output.queue(frame(RESULT, result.to_json()))
    output.flush()
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
def _problems(config, zygotes, counters, alone, baseline):
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
    pids = [parent.pid for parent in zygotes]
    found += prove_clean(config.uid, config.gid, counters, baseline, alone, pids)
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    expected = {0, 1, 2, _report_fd, *(parent.sock.fileno() for parent in zygotes), *counters.fds}
    if not expected <= set(fds) or len(fds) > len(expected) + 1:  # + the one listdir used
        found.append(f"supervisor descriptors leaked: {fds}")
    scrub()
    _clear_report()
    return found


def _skip(count):
    """Answer the next ``count`` requests of a stopped batch without running them: each gets a
    RESULT that says so (the host runs them again elsewhere); the last one's header (None: no
    request came)."""
    header = None
    for _ in range(count):
        request = read_request()
        if request is None:
            break  # the host is gone
        header = request
        skip_body(header.size)
        send(RESULT, Skipped().to_json())
    return header


def _late_zygote(config, baseline):
    """The heavy zygote, started once the container served snippets (proven clean since the
    last): what it holds, memory and its socket pair, is added to the clean-up's baseline."""
    counters = baseline.counters
    memory, sockets = counters.memory_charged(), counters.socket_counts()
    if sockets != baseline.sockets:
        raise RuntimeError("the socket counts moved since the last clean-up")
    late = _Zygote(config, heavy=True)
    after = counters.memory_charged()
    if baseline.memory is not None and memory is not None and after is not None:
        baseline.memory += after - memory
    baseline.sockets = counters.socket_counts()
    return late


# -- the request loop ------------------------------------------------------------------------
class _Server:
    """The supervisor's state between requests: its zygotes, the clean container's baseline
    and the child forked ahead for the next run."""

    def __init__(self, config):
        self.config = config
        # Each zygote is a program of its own: it inherits its socket and the report page only.
        # The heavy one now, or at the first snippet that needs it (see backends/supervised.py:
        # Preload): importing sympy and numpy is most of a container's start-up.
        self.zygotes = {False: _Zygote(config)}
        self.zygotes[True] = _Zygote(config, heavy=True) if config.preload_at_start else None
        self.counters = Counters()
        gc.freeze()
        self.baseline = Baseline(self.counters)
        self.child = _Child(self.zygotes[False])

    def run(self, header):
        """Serve one request's run; whether it ended by itself, alone. A failure is answered
        as an Anomaly (the host retires this container)."""
        alone = False
        try:
            if self.child is not None and (self.child.heavy != header.heavy or header.harness):
                self.child.discard()  # forked ahead for the other kind
                self.child = None
                wipe_writable(self.config.uid, self.config.gid)  # its working directory
            if header.heavy and self.zygotes[True] is None:
                self.zygotes[True] = _late_zygote(self.config, self.baseline)
            self.child = self.child or _Child(self.zygotes[header.heavy], header.harness)
            alone = _serve_one(header, self.child, self.config, self.counters)
        except Exception as exc:  # noqa: BLE001 - tell the host, which retires this container
            send(RESULT, Anomaly(f"supervisor failed: {exc!r}").to_json())
        if self.child:
            self.child.discard()  # a no-op after a run; fds of a failed one
        self.child = None
        return alone

    def problems(self, alone):
        """The clean-up's findings (see ``_problems``)."""
        zygotes = [z for z in self.zygotes.values() if z is not None]
        return _problems(self.config, zygotes, self.counters, alone, self.baseline)

    def start_heavy(self):
        """Start the heavy zygote in a container just proven clean (the host asks while
        snippets that need it are recent): the problem that stopped it, if any."""
        try:
            self.zygotes[True] = _late_zygote(self.config, self.baseline)
        except (OSError, RuntimeError) as exc:
            return [f"cannot start the preloaded zygote: {exc!r}"]
        return []

    def fork_next(self, heavy):
        """Fork the child of the next run: the problem that stopped it, if any."""
        try:
            self.child = _Child(self.zygotes[heavy])
        except (OSError, RuntimeError) as exc:
            return [f"cannot fork the next child: {exc!r}"]
        return []

    def settle(self, header, alone):
        """After a request's run: go on with its batch, or prove the container clean and
        answer CLEANUP (forking the next child if it is)."""
        problems = None  # the clean-up's findings, once it has run
        following = header.then  # requests of the same batch, already sent
        last = header
        if following:
            # A batch goes on after a run that ended by itself, alone, within its memory
            # (what the host would continue after), once the clean-up proves the container
            # clean: the same proof as between two requests, without the round trip.
            if alone and _report()[1] != REPORT_MEMORY_ERROR:
                problems = self.problems(alone) or self.fork_next(header.heavy)
                if not problems:
                    return  # no CLEANUP inside a batch: its next request is waiting
            last = _skip(following) or header
            following = -1  # stopped: the host reads a verdict, even from a last run's container
        if last.last and following == 0:
            # The container is discarded: no clean-up to prove. Exit once the host has read
            # the result and closed stdin (gVisor may drop output written just before PID 1
            # exits); PID 1's exit ends every process left.
            return
        if problems is None:
            problems = self.problems(alone)
        if not last.keep:
            problems += _drop_programs()  # a compiled program lives for its judge request only
        if not problems and last.preload and self.zygotes[True] is None:
            problems = self.start_heavy()
        if not problems:
            # Only now, with every process of the last snippet dead, the next child may exist.
            problems = self.fork_next(header.heavy)
        verdict = CleanupVerdict(
            clean=not problems, problems=problems, memory_grown_kb=self.baseline.memory_grown >> 10
        )
        send(CLEANUP, verdict.to_json())


def main(config):
    """Serve requests until the host closes stdin."""
    become_reaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # PID 1 then ignores every signal it can
    server = _Server(config)
    os.write(1, READY_MARKER)
    while (header := read_request()) is not None:
        server.settle(header, server.run(header))
    if server.child:
        server.child.discard()
