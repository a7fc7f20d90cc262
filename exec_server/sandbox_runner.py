"""The program a warm sandbox container runs (stdlib only; its text is passed to ``python -c``).

It imports the popular modules first (``argv[1]``, comma-separated), so the snippet's
``import sympy`` costs nothing, prints the ready marker, then blocks until the service sends
one frame on stdin: three 4-byte big-endian lengths, then the code (UTF-8), the input and the
nonce. The snippet then runs in this very process, as ``python -c`` would run it:
``__name__ == "__main__"``, tracebacks on stderr, exit code 1 on an uncaught exception,
``sys.exit`` honoured. ``input`` becomes the snippet's stdin. The frame is binary, not JSON,
because importing ``json`` (and ``re`` with it) costs 8 ms of every fresh container's start.

When the request carries a nonce, the runner's last bytes on stdout and on stderr are a trailer
``\0boxed-exit:<nonce>:<exit code>:<1 if MemoryError>``: once it has come through both
streams, the service has all the output and the verdict without waiting for the container to
exit, and never infers the verdict from stderr text.
"""

import os
import sys

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


def _write_last_line(exc):
    """When the traceback cannot be printed (its formatting ran out of memory), still end
    stderr with what the interpreter prints last: the exception, or at least its type."""
    name = type(exc).__name__
    try:
        text = f"{name}: {exc}" if str(exc) else name
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - even that may fail
        text = name
    try:
        os.write(2, b"\n" + text.encode("utf-8", "replace") + b"\n")
    except OSError:
        pass  # the snippet closed stderr


def main():
    for name in filter(None, sys.argv[1].split(",") if len(sys.argv) > 1 else []):
        try:
            __import__(name)
        except Exception:
            pass  # a missing optional module only costs the snippet its own import
    os.write(1, READY_MARKER)

    sizes = _read_exact(0, 12)
    code_size, input_size, nonce_size = (int.from_bytes(sizes[i : i + 4], "big") for i in (0, 4, 8))
    code = _read_exact(0, code_size).decode("utf-8", "surrogatepass")
    stdin = _read_exact(0, input_size)
    nonce = _read_exact(0, nonce_size)
    _install_stdin(stdin)  # fd 0 is the snippet's from here on
    sys.argv = ["-c"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}

    status, memory_error = 0, False
    try:
        exec(compile(code, "<string>", "exec"), namespace)
    except SystemExit as exc:
        status = _exit_code(exc)
    except BaseException as exc:  # noqa: BLE001 - report every failure like the interpreter
        memory_error = isinstance(exc, MemoryError)
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        try:
            import traceback  # only when needed: 8 ms of every fresh container's start

            traceback.print_exception(type(exc), exc, tb)
        except BaseException:  # noqa: BLE001 - e.g. no memory left to format it
            _write_last_line(exc)
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
