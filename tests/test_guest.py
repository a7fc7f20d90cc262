"""The guest programs themselves: stdlib only, one wire protocol, and the runner as a host
subprocess (the frame it reads, its report, the error path). Everything else about them is
tested through the service in both isolation modes."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

from exec_server.guest import GUEST_DIR, MODULES, module_sources
from exec_server.guest.protocol import (
    REPORT_MEMORY_ERROR,
    REPORT_STARTED,
    frame,
    pop_frames,
    snippet_body,
)
from tests.conftest import top_level_imports

# Installs the guest modules as bootstrap.py does, then forks: the child runs the snippet with
# the runner, the parent writes the child's exit status and report page as JSON to argv[2].
HARNESS = """
import json, mmap, os, sys, types
package = types.ModuleType("boxed_guest"); package.__path__ = []
sys.modules["boxed_guest"] = package
for name, source in json.loads(sys.argv[1]).items():
    module = types.ModuleType("boxed_guest." + name); module.__package__ = "boxed_guest"
    sys.modules[module.__name__] = module
    exec(compile(source, name, "exec"), module.__dict__)
report = mmap.mmap(-1, mmap.PAGESIZE)
pid = os.fork()
if pid == 0:
    sys.modules["boxed_guest.runner"].run(report)
_, status = os.waitpid(pid, 0)
with open(sys.argv[2], "w") as f:
    json.dump([os.waitstatus_to_exitcode(status), report[0], report[1]], f)
"""


def run_runner(code: str, stdin: str = "") -> tuple[bytes, bytes, int, bool, bool]:
    """(stdout, stderr, exit code, started, memory error) of the runner on ``code``."""
    sources = {name: src for name, src in module_sources().items() if name != "supervisor"}
    with tempfile.NamedTemporaryFile("r", suffix=".json") as report:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", HARNESS, json.dumps(sources), report.name],
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
