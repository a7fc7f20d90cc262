"""The resident program of a shell session (stdlib only): PID 1, and a fresh ``bash`` per call.

``bootstrap`` runs it instead of ``session`` (the configuration's ``program``). A persistent
bash would be as forgeable as a persistent interpreter (code can ``exec`` over it, trap its
signals, print an end marker), so no shell outlives its call: each call is a new bash child of
this root program, set up as a snippet's child is (own session, the sandbox uid with no
capability, OOM score 1000, nice 19, the call's limits), and the shell's state is carried as
bash code: the call's bash sources the state the call before left (fd 3), runs the code
(``eval``) with its input as stdin, and at its end an EXIT trap writes its state (variables,
functions, umask, working directory, options, aliases) to a fresh memfd (fd 4).

The call's status is bash's wait status as this program reaps it, never its output; when bash
exits (or a limit stops it) every process of the sandbox uid is killed. The new state is kept
only when bash exited by itself and wrote it whole; else the next call starts from the last
kept one. A call can forge its own session's next state (it is code that session runs next),
nothing else: the state is this process's memfd (docs/sessions.md, "Shell sessions").
"""

import errno
import fcntl
import os
import resource
import signal
import string
import time

from . import runner, session_files, zygote
from .cleanup import Counters
from .processes import (
    CLOCK_TICKS,
    ChildExits,
    become_reaper,
    cpu_ticks,
    exit_status,
    kill_all,
    kill_uid,
    snippet_processes,
)
from .protocol import (
    KILLED_CPU,
    KILLED_OUTPUT,
    READY_MARKER,
    RESULT,
    Anomaly,
    FileRequest,
    RunReport,
    read_session_request,
)
from .stdio import Output, read_request, receive_body, scrub, send
from .watch import DRAIN_SECONDS, Clock, RunEnd, backstop_fired, drain, physical_cpu, watch

BASH = "/bin/bash"
STATE_FD, NEXT_STATE_FD, CODE_FD, STARTED_FD = 3, 4, 5, 6  # the call's descriptors
HIGH_FD = 32  # where descriptors wait while the call's are put in place
SETUP_FAILED = b"!"  # written to the STARTED_FD pipe when the set-up failed before the exec
STATE_END = b"# end of the shell state\n"  # a state cut short (too large: EFBIG) lacks it

# Variables bash sets for itself (or per process): restoring them would fail (readonly) or lie.
OWN_VARIABLES = (
    "BASH|BASHOPTS|BASHPID|BASH_ALIASES|BASH_ARGC|BASH_ARGV|BASH_ARGV0|BASH_CMDS|BASH_COMMAND"
    "|BASH_EXECUTION_STRING|BASH_LINENO|BASH_REMATCH|BASH_SOURCE|BASH_SUBSHELL|BASH_VERSINFO"
    "|BASH_VERSION|COMP_*|DIRSTACK|EPOCHREALTIME|EPOCHSECONDS|EUID|FUNCNAME|GROUPS|HISTCMD"
    "|HOSTNAME|HOSTTYPE|LINENO|MACHTYPE|OPTIND|OSTYPE|PIPESTATUS|PPID|PWD|RANDOM|SECONDS"
    "|SHELLOPTS|SHLVL|SRANDOM|UID|_|__boxed_*"
)
# Every variable name, without a fork: "${!a@}" lists the names that begin with "a".
EVERY_NAME = " ".join(f'"${{!{c}@}}"' for c in "_" + string.ascii_letters)

# The EXIT trap: the shell's state as code, on fd 4, ending with STATE_END. Each word is
# "\builtin ..." so that no alias or function of the call changes what it runs; it keeps the
# exit status ("$?"), turns tracing off first, unseen, and a state past the file size limit
# fails to write (EFBIG, not SIGXFSZ: the call's verdict stays its code's).
DUMP = (
    '{ __boxed_o=$SHELLOPTS; \\builtin set +euxv; \\builtin trap "" XFSZ; } 2>/dev/null; {'
    f" for __boxed_n in {EVERY_NAME}; do"
    f" case $__boxed_n in {OWN_VARIABLES}) ;;"
    ' *) \\builtin declare -p -- "$__boxed_n" ;; esac; done;'
    " \\builtin declare -f; \\builtin umask -p;"
    ' \\builtin printf "__boxed_cwd=%q\\n" "$PWD"; \\builtin set +o;'
    ' [[ :$__boxed_o: == *:errexit:* ]] && \\builtin echo "set -o errexit";'
    ' [[ :$__boxed_o: == *:nounset:* ]] && \\builtin echo "set -o nounset";'
    " \\builtin shopt -p; \\builtin alias -p;"
    f' \\builtin echo "{STATE_END.decode().strip()}";'
    " } 2>/dev/null >&4"
)
# What each call's bash runs (``bash -c``), all on line 1 so that the code's line numbers are
# its own: the code read and its descriptor closed, the trap set, the state restored (the
# working directory last: a gone one says so), then the code.
WRAPPER = "; ".join(
    (
        "\\builtin shopt -s expand_aliases",
        f'IFS= \\builtin read -r -d "" __boxed_code <&{CODE_FD}',
        f"\\builtin exec {CODE_FD}<&-",
        f"\\builtin trap '{DUMP}' EXIT",
        f"\\builtin source /dev/fd/{STATE_FD}",
        f"\\builtin exec {STATE_FD}<&-",
        # (OLDPWD is the state's, for "cd -")
        "if [[ -n ${__boxed_cwd-} ]]; then __boxed_old=${OLDPWD-};"
        ' \\builtin cd -- "$__boxed_cwd" 2>/dev/null || {'
        ' \\builtin printf "bash: cd: %s: cannot return to the working directory, now in %s\\n"'
        ' "$__boxed_cwd" "$HOME" >&2; \\builtin cd; }; OLDPWD=$__boxed_old; fi',
        '\\builtin eval "\\builtin unset __boxed_code __boxed_cwd __boxed_old; $__boxed_code"',
    )
)


# -- the call's bash (the sandbox uid) -------------------------------------------------------
def _place(fds):
    """Make each ``target: source`` of ``fds`` that descriptor (inheritable) and close every
    other one but the STARTED_FD pipe's, which closes at the exec."""
    moved = {target: fcntl.fcntl(source, fcntl.F_DUPFD, HIGH_FD) for target, source in fds.items()}
    for target, source in moved.items():
        os.dup2(source, target)
    os.closerange(STARTED_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1])


def _memfd(data):
    """An in-memory file holding ``data``, at offset 0."""
    fd = os.memfd_create("boxed-shell", os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _enter_call(config):
    """The snippet's side of the sandbox, as ``zygote.enter_sandbox`` enters it, for a run
    directory that earlier calls made (and may have removed: it is made again, or /tmp)."""
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
    os.write(fd, b"1000")
    os.close(fd)
    os.nice(19)
    zygote.drop_privileges(config.uid, config.gid)
    if zygote.libc.prctl(zygote.PR_SET_DUMPABLE, 1, 0, 0, 0) != 0:
        raise OSError("PR_SET_DUMPABLE failed")
    zygote.check_no_capabilities()
    try:
        os.makedirs(zygote.RUN_DIR, 0o700, exist_ok=True)
        os.chdir(zygote.RUN_DIR)
    except OSError:
        os.chdir("/tmp")  # the code made /tmp/run unusable: its shell starts elsewhere


def _exec_bash():
    """Replace this process with the call's bash (gVisor counts this interpreter's mappings
    against the new program's address space: then it execs within the hard limit)."""
    argv = [BASH, "--noprofile", "--norc", "-c", WRAPPER, "bash"]
    try:
        os.execv(BASH, argv)
    except OSError as exc:
        if exc.errno != errno.ENOMEM:
            raise
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        os.execv(BASH, argv)


def _call_main(config, header, body_fd, pipes, state_fd, next_fd):
    """The forked child of one call: set up like a snippet's child, then exec bash. Never
    returns; a set-up failure writes SETUP_FAILED on the STARTED_FD pipe (the call is then
    not a verdict: the host loses the session as its sandbox's failure)."""
    out_w, err_w, started_w = pipes
    told = started_w  # where a set-up failure is told: the pipe, wherever it is now
    try:
        os.setsid()
        os.lseek(body_fd, 0, os.SEEK_SET)
        code, stdin = runner.read_body(body_fd)
        code_fd = _memfd(code.encode("utf-8", "surrogatepass"))
        stdin_fd = _memfd(stdin)
        if state_fd is None:
            state_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        _place(
            {
                0: stdin_fd,
                1: out_w,
                2: err_w,
                STATE_FD: state_fd,
                NEXT_STATE_FD: next_fd,
                CODE_FD: code_fd,
                STARTED_FD: started_w,
            }
        )
        told = STARTED_FD
        fcntl.fcntl(STARTED_FD, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
        zygote.interpreter_defaults(config)
        for signum in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; a shell does not
            signal.signal(signum, signal.SIG_DFL)
        _enter_call(config)
        limits = {"cpu": header.cpu, "memory_mb": header.memory_mb, "argv": [BASH]}
        zygote.set_request_limits(limits, config)
        _exec_bash()
    except BaseException as exc:  # noqa: BLE001 - any set-up failure must stop before the code
        try:
            os.write(2, f"boxed shell: call set-up failed: {exc!r}\n".encode())
            os.write(told, SETUP_FAILED)
        finally:
            os._exit(zygote.SETUP_FAILED)
    os._exit(zygote.SETUP_FAILED)


# -- the session program (root, PID 1) -------------------------------------------------------
class _BashEnd(RunEnd):
    """A call ends when its bash exits, as the kernel reports it (a ptrace stop it caused is
    let go first): nothing the code writes ends it."""

    def __init__(self, pid, exits):
        self.pid, self.exits = pid, exits
        self.fds = (exits.read_fd,)
        self.exited = False

    def over(self):
        return self.exited

    def event(self, fd):
        self.exits.drain()
        self.exited = self.has_exited()
        return self.exited, True

    def has_exited(self):
        info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is not None and info.si_code == os.CLD_TRAPPED:
            zygote.libc.ptrace(zygote.PTRACE_DETACH, self.pid, None, info.si_status)
            return False
        return info is not None


class Shell:
    """A shell session as this program keeps it: the sandbox's settings and the state the
    last call that ended by itself left (a memfd; None before the first)."""

    def __init__(self, config, exits, counters):
        if not os.access(BASH, os.X_OK):
            raise RuntimeError(f"{BASH} is not in the sandbox image: no shell session here")
        self.config, self.exits, self.counters = config, exits, counters
        self.state = None

    def call(self, header, body_fd):
        """Run one call in a fresh bash: its RESULT report, after its output frames (sent)."""
        config, uid = self.config, self.config.uid
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        started_r, started_w = os.pipe2(os.O_CLOEXEC)
        next_fd = os.memfd_create("boxed-shell-state", os.MFD_CLOEXEC)
        oom_before = self.counters.oom_kills()
        clock = Clock(uid, header.wall, header.cpu, config.cpus, 0)  # no process of the uid yet
        pid = os.fork()
        if pid == 0:
            _call_main(config, header, body_fd, (out_w, err_w, started_w), self.state, next_fd)
        for fd in (out_w, err_w, started_w):
            os.close(fd)
        for fd in (out_r, err_r):
            os.set_blocking(fd, False)
        output = Output(out_r, err_r, config.output_cap, on_close=os.close)
        killed_for = watch(clock, output, _BashEnd(pid, self.exits))
        duration_ms = (time.monotonic() - clock.started) * 1000
        wait_status, counted, max_rss_kb, strays = self._end_call(pid, output, killed_for)
        if output.over_cap and killed_for is None:
            killed_for = KILLED_OUTPUT  # it flooded and exited before the cap was read past
        exit_code, signum = exit_status(wait_status)
        if killed_for is None and backstop_fired(exit_code, counted, header.cpu):
            killed_for = KILLED_CPU
        started = os.read(started_r, 1) != SETUP_FAILED
        os.close(started_r)
        self._keep_state(next_fd, started and killed_for is None and signum is None)
        output.flush()
        oom_after = self.counters.oom_kills()
        return RunReport(
            exit_code=exit_code,
            signal=signum,  # from the kernel's wait status, never the code's word
            killed_for=killed_for,
            started=started,
            memory_error=False,  # bash has no MemoryError report: the host reads its peak
            oom_killed=oom_before is not None and (oom_after or 0) > oom_before,
            duration_ms=round(duration_ms, 2),
            cpu_ms=round(physical_cpu(counted, config.cpus * duration_ms / 1000) * 1000, 1),
            max_rss_kb=max_rss_kb,
            strays=len(strays),
        )

    def _end_call(self, pid, output, killed_for):
        """Kill what is left of the call, reap its bash and drain its pipes: (wait status, CPU
        seconds counted, peak RSS in KiB, the strays found)."""
        uid = self.config.uid
        if killed_for:
            try:  # its session and group first, in one call (a fork bomb stops at once)
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        others = snippet_processes(uid)
        strays = [p for p, alive in others.items() if p != pid and alive]
        if killed_for or strays:
            kill_uid(uid)  # a background job, a daemon: nothing of a call outlives it
        stray_ticks = cpu_ticks(p for p in others if p != pid)
        _, wait_status, usage = zygote.wait_ended(pid)
        missed = drain(output, time.monotonic() + DRAIN_SECONDS, uid) - {pid}
        if missed and not strays:
            strays = sorted(missed)
        output.close_all()
        kill_all(uid)  # and reap them: no zombie of a call is left for the next one
        counted = usage.ru_utime + usage.ru_stime + stray_ticks / CLOCK_TICKS
        return wait_status, counted, usage.ru_maxrss, strays

    def _keep_state(self, next_fd, ended_by_itself):
        """Make the call's state the session's when its bash exited by itself and wrote one
        whole; else keep the state of the call before (its processes are all gone by now)."""
        tail = max(os.fstat(next_fd).st_size - len(STATE_END), 0)
        if ended_by_itself and os.pread(next_fd, len(STATE_END), tail) == STATE_END:
            if self.state is not None:
                os.close(self.state)
            self.state = next_fd
        else:
            os.close(next_fd)


def main(config):
    """Serve one shell session until stdin closes (the host removes the container after)."""
    become_reaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    shell = Shell(config, ChildExits(), Counters())
    os.setegid(config.gid)  # made before any call, as the sandbox uid (the file API may
    os.seteuid(config.uid)  # write into it first); this process keeps no CAP_CHOWN
    try:
        os.mkdir(zygote.RUN_DIR, 0o700)
    finally:
        os.seteuid(0)
        os.setegid(0)
    os.write(1, READY_MARKER)
    while (header := read_request(read_session_request)) is not None:
        if isinstance(header, FileRequest):  # the file API, between calls (session_files.py)
            try:
                session_files.serve(header, zygote.RUN_DIR, config.uid, config.gid)
            except Exception as exc:  # noqa: BLE001 - tell the host, which gives the session up
                send(RESULT, Anomaly(f"session file request failed: {exc!r}").to_json())
            continue
        body_fd = os.memfd_create("boxed-call", os.MFD_CLOEXEC)
        try:
            receive_body(body_fd, header.size)
            report = shell.call(header, body_fd)
        except Exception as exc:  # noqa: BLE001 - tell the host, which gives the session up
            report = Anomaly(f"shell session failed: {exc!r}")
        finally:
            os.close(body_fd)
        send(RESULT, report.to_json())
        scrub()  # no call's output stays in this process's buffers
    kill_all(config.uid)
