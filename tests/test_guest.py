"""The guest programs themselves: stdlib only, one wire protocol, the runner as a host
subprocess (the frame it reads, its report, the error path), and the session interpreter's
call loop as a host subprocess (one namespace, one report per call). Everything else about
them is tested through the service in both isolation modes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile

import pytest

from exec_server.guest import GUEST_DIR, MODULES, module_sources, packed_sources
from exec_server.guest.protocol import (
    REPORT_MEMORY_ERROR,
    REPORT_STARTED,
    frame,
    pack_sources,
    pop_frames,
    snippet_body,
)
from tests.conftest import top_level_imports

# Installs the guest modules (argv[1]: name -> source, packed) as bootstrap.py does.
INSTALL_GUEST = """
import base64, json, sys, types, zlib
package = types.ModuleType("boxed_guest"); package.__path__ = []
sys.modules["boxed_guest"] = package
for name, source in json.loads(zlib.decompress(base64.b64decode(sys.argv[1]))).items():
    module = types.ModuleType("boxed_guest." + name); module.__package__ = "boxed_guest"
    sys.modules[module.__name__] = module
    exec(compile(source, name, "exec"), module.__dict__)
    setattr(package, name, module)
"""
HARNESS = (
    INSTALL_GUEST
    + """
import mmap, os
report = mmap.mmap(-1, mmap.PAGESIZE)
pid = os.fork()
if pid == 0:
    sys.modules["boxed_guest.runner"].run(report)
_, status = os.waitpid(pid, 0)
with open(sys.argv[2], "w") as f:
    json.dump([os.waitstatus_to_exitcode(status), report[0], report[1]], f)
"""
)


def run_runner(code: str, stdin: str = "") -> tuple[bytes, bytes, int, bool, bool]:
    """(stdout, stderr, exit code, started, memory error) of the runner on ``code``."""
    sources = {
        name: src for name, src in module_sources().items() if name in ("protocol", "runner")
    }
    with tempfile.NamedTemporaryFile("r", suffix=".json") as report:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", HARNESS, pack_sources(sources), report.name],
            input=snippet_body(code, stdin),
            capture_output=True,
            timeout=30,
        )
        assert proc.returncode == 0, proc.stderr
        rc, started, memory = json.load(report)
    return proc.stdout, proc.stderr, rc, started == REPORT_STARTED, memory == REPORT_MEMORY_ERROR


def test_guest_code_imports_only_the_standard_library() -> None:
    files = sorted(GUEST_DIR.glob("*.py"))
    assert {f.stem for f in files} >= set(MODULES) | {"bootstrap"}
    for path in files:
        if path.name == "__init__.py":
            continue  # the host's view of the folder (reads the files as text)
        outside = top_level_imports(path) - set(sys.stdlib_module_names) - {"__future__"}
        assert outside == set(), f"{path.name} imports {outside}"


def test_framing_round_trips_when_cut_anywhere() -> None:
    frames = [(1, b"out"), (2, b""), (3, b'{"a": 1}'), (4, b"x" * 70000)]
    stream = b"".join(frame(kind, data) for kind, data in frames)
    buffer, got = bytearray(), []
    for i in range(0, len(stream), 7):
        buffer += stream[i : i + 7]
        got += list(pop_frames(buffer))
    assert got == frames and buffer == b""


def test_runner_reads_code_and_input_and_reports_it_started() -> None:
    code = "import sys\nprint('héllo', sys.stdin.read()[::-1])\nsys.exit(3)"
    out, err, rc, started, memory = run_runner(code, stdin="abc ✓")
    assert (out, err, rc, started, memory) == ("héllo ✓ cba\n".encode(), b"", 3, True, False)


def test_traceback_as_python_c_prints_it_and_nothing_else_is_written() -> None:
    out, err, rc, started, memory = run_runner("def f():\n    raise ValueError('boom')\nf()")
    assert rc == 1 and started and not memory and out == b""
    assert err.startswith(b"Traceback (most recent call last):\n")
    assert b"line 2, in f\n" in err and err.endswith(b"ValueError: boom\n")


def test_uncaught_memory_error_is_reported_beside_the_output() -> None:
    # As when formatting the traceback of a deep recursion runs out of address space.
    code = "import sys\nsys.modules['traceback'] = None\nraise MemoryError('no room')"
    _, err, rc, started, memory = run_runner(code)
    assert rc == 1 and started and memory
    assert err == b"\nMemoryError: no room\n"


def test_a_memory_error_line_written_by_the_snippet_is_only_text() -> None:
    _, err, rc, _, memory = run_runner("import os\nos.write(2, b'MemoryError\\n')\nos._exit(1)")
    assert (err, rc, memory) == (b"MemoryError\n", 1, False)


def test_a_deep_traceback_is_printed_as_python_c_prints_it() -> None:
    # The interpreter prints the last sys.tracebacklimit (1000) entries; printing all of a
    # deep recursion's frames would take seconds and differ from python -c.
    code = "import sys\nsys.setrecursionlimit(5000)\ndef f(n):\n    return f(n + 1)\nf(0)"
    _, err, rc, _, _ = run_runner(code)
    reference = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
    assert rc == reference.returncode == 1
    assert err == reference.stderr
    assert b"more times]" in err and err.count(b'  File "<string>"') <= 1000


# Installs the guest modules, then forks the session interpreter's call loop on one end of a
# socket pair (its stdout and stderr: files); the parent sends each call as the session
# supervisor does (a memfd, with a fresh nonce) and writes, per call, the report bytes (the
# nonce checked) and the output so far.
SESSION_HARNESS = (
    INSTALL_GUEST
    + """
import os, socket, tempfile
session, protocol = sys.modules["boxed_guest.session"], sys.modules["boxed_guest.protocol"]
ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
pid = os.fork()
if pid == 0:
    ours.close()
    os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
    session._serve_calls(theirs)
theirs.close()
answers = []
for code, stdin in json.loads(sys.argv[2]):
    body = os.memfd_create("call")
    os.write(body, protocol.snippet_body(code, stdin))
    nonce = os.urandom(session.NONCE_BYTES)
    socket.send_fds(ours, [session.CALL + nonce], [body])
    os.close(body)
    report = ours.recv(64)
    answers.append(list(report[:2]))
    if not report:
        break
    assert report[2:] == nonce, report  # each report names its call
ours.close()
_, status = os.waitpid(pid, 0)
out.seek(0); err.seek(0)
json.dump([answers, os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode()],
          open(sys.argv[3], "w"))
"""
)


def run_session(calls: list[tuple[str, str]]) -> tuple[list[list[int]], int, str, str]:
    """(report of each call, the interpreter's exit status, its stdout, its stderr)."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as result:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", SESSION_HARNESS]
            + [packed_sources("session"), json.dumps(calls), result.name],
            capture_output=True,
            timeout=30,
        )
        assert proc.returncode == 0, proc.stderr
        answers, status, out, err = json.load(result)
    return answers, status, out, err


def test_session_calls_share_one_namespace_and_each_gets_its_own_input() -> None:
    calls = [
        ("import math\nx = 41", ""),
        ("x += 1\nprint(x, math.floor(2.5), input())", "first"),
        ("print(input(), __name__)", "second"),
    ]
    answers, status, out, err = run_session(calls)
    assert answers == [[0, 0], [0, 0], [0, 0]]
    assert out == "42 2 first\nsecond __main__\n" and err == ""
    assert status == 0  # its socket closed: the loop ends by itself


def test_a_failing_call_reports_its_traceback_and_the_session_goes_on() -> None:
    calls = [("def f():\n    raise ValueError('boom')\nf()", ""), ("print('after')", "")]
    answers, _, out, err = run_session(calls)
    assert answers == [[1, 0], [0, 0]] and out == "after\n"
    assert err.startswith("Traceback (most recent call last):\n")
    assert "line 2, in f\n" in err and err.endswith("ValueError: boom\n")


def test_an_uncaught_memory_error_is_reported_with_the_failure() -> None:
    answers, _, _, _ = run_session([("raise MemoryError('no room')", "")])
    assert answers == [[1, 1]]


def test_sys_exit_ends_the_interpreter_with_its_status() -> None:
    answers, status, out, _ = run_session([("print('bye')\nimport sys\nsys.exit(7)", "")])
    assert answers == [[]] and status == 7 and out == "bye\n"


DRAIN_PROBE = r"""
import json, os, random, sys, time
from exec_server.guest import protocol, stdio, watch

class Child:  # the pipe ends the output is forwarded from, closed once
    def __init__(self):
        (self.out_r, out_w), (self.err_r, err_w) = os.pipe(), os.pipe()
        self.writers = (out_w, err_w)
    def close(self, fd):
        os.close(fd)

uid, stray_lives = random.randint(40000, 49999), sys.argv[1] == "stray"
child = Child()
pid = os.fork()
if pid == 0:  # holds both write ends, as a process the first kill missed would
    os.setgid(uid)
    os.setuid(uid)
    os.write(child.writers[0], b"out")
    if stray_lives:
        time.sleep(30)
    os._exit(0)
for fd in child.writers:
    os.close(fd)
if not stray_lives:
    os.waitpid(pid, 0)
output = stdio.Output(child.out_r, child.err_r, 1 << 20, on_close=child.close)
started = time.monotonic()
found = watch.drain(output, started + watch.DRAIN_SECONDS, uid)
elapsed = time.monotonic() - started
_, status = os.waitpid(pid, 0) if stray_lives else (pid, 0)
print(json.dumps({"elapsed": elapsed, "found": sorted(found) == [pid], "none": not found,
                  "killed": os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9,
                  "open": len(output.kinds), "sent": output.sent[protocol.OUTPUT]}))
"""


def drain_probe(case: str) -> dict:
    if os.geteuid() != 0:
        pytest.fail("the drain probe needs root (to run its stray as a uid of its own)")
    out = subprocess.run(
        [sys.executable, "-c", DRAIN_PROBE, case], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_pipe_held_open_after_the_child_is_a_stray_killed_at_the_next_quiet_tick() -> None:
    """The drain does not wait its whole second for a process the first kill missed: a pipe
    open and quiet for a tick is a live holder's, and the uid's processes are killed again."""
    found = drain_probe("stray")
    assert found["found"] and found["killed"], found
    assert found["open"] == 0 and found["sent"] == 3, found  # what it wrote was still read
    assert found["elapsed"] < 0.5, found


def test_a_drain_with_every_writer_gone_ends_at_once_and_finds_no_stray() -> None:
    found = drain_probe("gone")
    assert found["none"] and found["open"] == 0 and found["sent"] == 3, found
    assert found["elapsed"] < 0.2, found


PROVE_THE_DROP = """
import sys
from exec_server.guest import zygote
zygote.prove_the_drop(10001, 10001)  # a plain drop from root: no capability left
PR_SET_KEEPCAPS = 8
assert zygote.libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) == 0
try:
    zygote.prove_the_drop(10001, 10001)  # keep-caps: the drop leaves the permitted set
except RuntimeError as exc:
    print("refused:", exc)
"""


def test_a_zygote_proves_the_uid_drop_leaves_no_capability() -> None:
    # Every child of a zygote inherits its capability sets and securebits unchanged, so the
    # zygote's one proof covers each child's drop (the children check only their uid and gid).
    assert os.geteuid() == 0, "the supervisor's uid drop needs root"
    proc = subprocess.run(
        [sys.executable, "-c", PROVE_THE_DROP], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("refused: the uid drop leaves capabilities"), proc.stdout
    assert "capabilities left after the drop" in proc.stderr and "CapPrm" in proc.stderr


@pytest.mark.parametrize(
    "limits",
    [
        {"cpu": 2.5, "memory_mb": 256},
        {"cpu": 10.0, "memory_mb": 2048},
        {"cpu": 1.0, "memory_mb": 64, "argv": ["/usr/bin/g++", "x.cpp"], "source": "x.cpp"},
        {"cpu": 1.0, "memory_mb": 64, "files": True},
    ],
)
def test_a_child_reads_back_the_limits_the_supervisor_hands_over(limits: dict) -> None:
    from exec_server.guest import zygote

    text = zygote.hand_over_text(limits)
    assert zygote.handed_limits(text) == limits
    assert text.startswith(b"{") == (len(limits) > 2)  # JSON only when there is more


def test_a_child_reads_the_hand_over_to_its_newline_not_to_the_pipes_end() -> None:
    from exec_server.guest import zygote

    text = zygote.hand_over_text({"cpu": 2.5, "memory_mb": 256})
    read, write = os.pipe()
    try:
        os.write(write, text)  # the supervisor's end still open: the read must not wait for it
        assert zygote.read_hand_over(read) == text
        os.write(write, text[:3])  # a line written in two parts is read whole
        os.write(write, text[3:])
        assert zygote.read_hand_over(read) == text
        os.write(write, text[:3])
        os.close(write)
        write = -1
        with pytest.raises(RuntimeError, match="ended before its newline"):
            zygote.read_hand_over(read)  # a line cut short by the pipe's end is refused
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)
    read, write = os.pipe()
    os.close(write)
    assert zygote.read_hand_over(read) == b""  # the supervisor going away
    os.close(read)


@pytest.mark.parametrize(
    ("exit_code", "counted", "fired"),
    [
        (128 + signal.SIGXCPU, 3.5, True),  # the soft limit
        (128 + signal.SIGKILL, 4.2, True),  # the hard limit a second later
        (128 + signal.SIGXCPU, 1.0, False),  # the snippet signalled itself early
        (128 + signal.SIGKILL, 0.2, False),
        (1, 10.0, False),  # an exit of its own, whatever it spent
    ],
)
def test_the_cpu_backstop_is_the_limits_verdict_as_the_kernel_counts(
    exit_code: int, counted: float, fired: bool
) -> None:
    """Judged on the CPU time the enforcing kernel counted, not on the quota-capped figure:
    under gVisor the count outruns the capped one with many busy threads."""
    from exec_server.guest import watch

    assert watch.backstop_fired(exit_code, counted, 3.0) is fired
