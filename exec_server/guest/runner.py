"""Runs one snippet in the current process, as ``python -c`` would (stdlib only), or execs a
program in its place (a compiler, a compiled submission, a shell script).

The supervisor's child calls ``run`` once its set-up is done and its limits are set: fd 0 holds
the snippet body (see ``protocol.snippet_body``), fds 1 and 2 are the snippet's stdout and
stderr. The snippet runs with ``__name__ == "__main__"``, tracebacks go to stderr as the
interpreter prints them, an uncaught exception exits 1 and ``sys.exit`` is honoured. Its input
becomes its stdin. Nothing is ever written to the snippet's output streams on its behalf.
"""

import errno
import os
import resource
import sys

from .protocol import REPORT_MEMORY_ERROR, REPORT_STARTED, read_files_section


def read_exact(fd, n):
    """Exactly ``n`` bytes from ``fd`` (EOFError if it ends first)."""
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            raise EOFError("snippet body cut short")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def install_stdin(data):
    """Make ``data`` the process's fd 0 (an in-memory file, so any size fits)."""
    fd = os.memfd_create("stdin")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)


def exit_code(exc):
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


def read_body(fd=0):
    """(code, input) from the snippet body on ``fd``."""
    sizes = read_exact(fd, 8)
    code_size, input_size = int.from_bytes(sizes[:4], "big"), int.from_bytes(sizes[4:], "big")
    code = read_exact(fd, code_size).decode("utf-8", "surrogatepass")
    return code, read_exact(fd, input_size)


def _exec_program(report, code, stdin, argv, source):
    """Exec ``argv`` in this process (its limits and uid stay), with the body's input as its
    stdin; the code is first written to ``source`` in the working directory when given (the
    compiler's input, a script). Never returns."""
    if source:
        fd = os.open(source, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        view = memoryview(code.encode("utf-8", "surrogatepass"))
        while view:
            view = view[os.write(fd, view) :]
        os.close(fd)
    install_stdin(stdin)
    report[0] = REPORT_STARTED
    try:
        try:
            os.execv(argv[0], argv)
        except OSError as exc:
            if exc.errno != errno.ENOMEM:
                raise
            # gVisor counts this process's own mappings against the new program's limit:
            # exec within the hard limit (the interpreter's mappings plus the share)
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
            os.execv(argv[0], argv)
    except OSError as exc:
        os.write(2, f"boxed: cannot run {argv[0]}: {exc.strerror}\n".encode())
    os._exit(127)  # as a shell answers a command it cannot run


def _write_files(files):
    """The request's input files, in the working directory (the host checked their names)."""
    for name, data in files:
        folder = os.path.dirname(name)
        if folder:
            os.makedirs(folder, exist_ok=True)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.close(fd)


def print_traceback(exc):
    """Print the traceback of ``exc``, raised by the exec'd code, as the interpreter prints it:
    without this module's frame, the last sys.tracebacklimit (1000) entries, none at 0
    (printing all of a 200,000-frame recursion takes seconds)."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    depth = getattr(sys, "tracebacklimit", 1000)
    depth = depth if isinstance(depth, int) else 1000
    try:
        import traceback  # preloaded by the supervisor: no import cost here

        traceback.print_exception(type(exc), exc, tb if depth > 0 else None, limit=-depth)
    except BaseException:  # noqa: BLE001 - e.g. no memory left to format it
        _write_last_line(exc)


def flush_std_streams():
    """Flush stdout and stderr; a closed stream must not change the verdict."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass


def run(report, options=None):
    """Run the snippet on fd 0 and ``os._exit`` with its exit status; never returns.

    ``report`` is the page shared with the supervisor (see ``protocol``). ``options`` (the
    request's): ``files``, input files follow the body; ``argv``, the program it names runs
    instead of the code, after writing the code to ``source`` (see ``_exec_program``)."""
    options = options or {}
    code, stdin = read_body()
    if options.get("files"):
        _write_files(read_files_section(lambda n: read_exact(0, n)))
    if options.get("argv"):
        _exec_program(report, code, stdin, options["argv"], options.get("source"))
    install_stdin(stdin)  # fd 0 is the snippet's from here on
    sys.argv = ["-c"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    status, memory_error = 0, False
    report[0] = REPORT_STARTED
    try:
        exec(compile(code, "<string>", "exec"), namespace)
    except SystemExit as exc:
        status = exit_code(exc)
    except BaseException as exc:  # noqa: BLE001 - report every failure like the interpreter
        memory_error = isinstance(exc, MemoryError)
        print_traceback(exc)
        status = 1
    flush_std_streams()
    if memory_error:
        report[1] = REPORT_MEMORY_ERROR
    os._exit(status)
