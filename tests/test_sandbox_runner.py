"""The runner itself, as a host subprocess: the frame it reads, the trailer, the error path.

Everything else about it is tested through the service in both isolation modes."""

from __future__ import annotations

import subprocess
import sys

from exec_server.sandbox import RUNNER_SOURCE, runner_frame, take_trailer
from exec_server.sandbox_runner import READY_MARKER


def run_runner(code: str, stdin: str = "", nonce: str = "n0nce") -> tuple[bytes, bytes, int]:
    proc = subprocess.run(
        [sys.executable, "-I", "-u", "-c", RUNNER_SOURCE, ""],
        input=runner_frame(code, stdin, nonce),
        capture_output=True,
        timeout=30,
    )
    assert proc.stdout.startswith(READY_MARKER), proc
    return proc.stdout[len(READY_MARKER) :], proc.stderr, proc.returncode


def test_binary_frame_carries_code_input_and_nonce() -> None:
    code = "import sys\nprint('héllo', sys.stdin.read()[::-1])\nsys.exit(3)"
    out, err, rc = run_runner(code, stdin="abc ✓")
    stdout, stderr = bytearray(out), bytearray(err)
    assert take_trailer(stdout, "n0nce") == (3, False)
    assert take_trailer(stderr, "n0nce") == (3, False)
    assert bytes(stdout) == "héllo ✓ cba\n".encode() and bytes(stderr) == b"" and rc == 3


def test_traceback_as_python_c_prints_it() -> None:
    out, err, rc = run_runner("def f():\n    raise ValueError('boom')\nf()")
    stderr = bytearray(err)
    assert take_trailer(stderr, "n0nce") == (1, False) and rc == 1
    assert bytes(stderr).startswith(b"Traceback (most recent call last):\n")
    assert b"line 2, in f\n" in stderr and bytes(stderr).endswith(b"ValueError: boom\n")


def test_error_line_still_printed_when_the_traceback_cannot_be() -> None:
    # As when formatting the traceback of a deep recursion runs out of address space.
    code = "import sys\nsys.modules['traceback'] = None\nraise MemoryError('no room')"
    _, err, rc = run_runner(code)
    stderr = bytearray(err)
    assert take_trailer(stderr, "n0nce") == (1, True) and rc == 1
    assert bytes(stderr) == b"\nMemoryError: no room\n"
