"""The program a warm sandbox container runs (stdlib only; its text is passed to ``python -c``).

It imports the popular modules first, so the snippet's ``import sympy`` costs nothing, prints
the ready marker, then blocks until the service sends one frame on stdin: a 4-byte big-endian
length and a JSON object ``{"code": ..., "input": ...}``. The snippet then runs in this very
process, as ``python -c`` would run it: ``__name__ == "__main__"``, tracebacks on stderr, exit
code 1 on an uncaught exception, ``sys.exit`` honoured. ``input`` becomes the snippet's stdin.

When the request carries a ``nonce`` (container mode), the runner's last bytes on stdout and on
stderr are a trailer ``\0boxed-exit:<nonce>:<exit code>:<1 if MemoryError>``: once it has come
through both streams, the service has all the output and the verdict without waiting for the
container to exit, and never infers the verdict from stderr text.
"""

import json
import os
import sys
import traceback

READY_MARKER = b"\x00boxed-ready\x00\n"
TRAILER_PREFIX = b"\x00boxed-exit:"


def _read_exact(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            os._exit(125)  # the service went away before sending code
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _install_stdin(data):
    """Make ``data`` the process's fd 0 (an in-memory file, so any size fits)."""
    fd = os.memfd_create("stdin")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def main():
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    for name in config.get("preload", []):
        try:
            __import__(name)
        except Exception:
            pass  # a missing optional module only costs the snippet its own import
    os.write(1, READY_MARKER)

    size = int.from_bytes(_read_exact(0, 4), "big")
    request = json.loads(_read_exact(0, size))
    _install_stdin(request.get("input", "").encode())
    sys.argv = ["-c"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}

    nonce = str(request.pop("nonce", "")).encode()
    status, memory_error = 0, False
    try:
        exec(compile(request.pop("code"), "<string>", "exec"), namespace)
    except SystemExit as exc:
        status = _exit_code(exc)
    except BaseException as exc:  # noqa: BLE001 - report every failure like the interpreter
        memory_error = isinstance(exc, MemoryError)
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        try:
            traceback.print_exception(type(exc), exc, tb)
        except BaseException:  # noqa: BLE001 - e.g. no memory left to format it
            pass
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - a closed stream must not change the verdict
            pass
    if nonce:
        trailer = TRAILER_PREFIX + nonce + b":%d:%d\n" % (status, memory_error)
        for fd in (1, 2):
            try:
                os.write(fd, trailer)
            except OSError:
                pass  # the snippet closed it: the service falls back to the exit status
    os._exit(status)


if __name__ == "__main__":
    main()
