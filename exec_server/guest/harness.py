"""A test script judged outside the submission's process (stdlib only): the *harness* and the
*submission* as two processes of two uids, which meet only through plain values.

A run of a test script (``RunRequest.harness``) is forked from a zygote as root and splits in
two (``run``): the submission's process drops to the sandbox uid, as every snippet does, runs
the code and then serves calls (``_serve``); the harness's process (the zygote's child, whose
exit status the supervisor reports) drops to the harness uid, made non-dumpable, and runs the
test script, in which every function the script uses but does not define, and the
``candidate`` of ``check(candidate)``, is a ``Proxy``: a call sends the function's name and its
arguments over a socket pair and takes back a return value, or an exception as its type's name
and message, in ``values``' codec. Nothing with behaviour crosses, and the submission cannot
signal, trace or read the harness (another uid, not dumpable): its influence on the verdict is
the values it returns. The verdict is the harness's exit status (``HARNESS_PASSED``,
``HARNESS_FAILED`` for a failed assert, ``HARNESS_ERROR``), which only the kernel reports.

The submission's process never holds the test script: it is forked after reading the code and
before the script (the rest of the body, fd 0) is read, it closes fd 0 first, and it runs no
code of the submission's until the harness has replaced its fd 0 and dropped root.
"""

import builtins
import ctypes
import json
import os
import socket
import struct
import sys
import time

from . import values
from .protocol import (
    HARNESS_ERROR,
    HARNESS_FAILED,
    HARNESS_PASSED,
    REPORT_MEMORY_ERROR,
    REPORT_STARTED,
)
from .runner import exit_code, flush_std_streams, install_stdin, print_traceback, read_exact

LENGTH = struct.Struct(">I")
READY, VALUE, RAISED, GO = b"r", b"v", b"e", b"g"
QUIT_GRACE = 0.5  # seconds the harness waits for the submission to leave after the script
PR_SET_DUMPABLE = 4

libc = ctypes.CDLL(None, use_errno=True)


class CandidateError(Exception):
    """An exception the submission's function raised (its type's name and message), or a
    failure of the call itself (it left, it returned what cannot cross)."""

    def __init__(self, kind, message):
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind


# -- the channel -----------------------------------------------------------------------------
def _send(sock, tag, text=""):
    data = tag + text.encode("utf-8", "surrogatepass")
    sock.sendall(LENGTH.pack(len(data)) + data)


def _receive(sock):
    """(tag, text) of the next message; None once the other side has closed its end. A
    message over ``values.MAX_BYTES`` is refused before it is read."""
    header = _read_socket(sock, LENGTH.size)
    if header is None:
        return None
    size = LENGTH.unpack(header)[0]
    if not 0 < size <= values.MAX_BYTES + 1:
        raise values.BadValue(f"a message of {size} bytes (the cap is {values.MAX_BYTES})")
    data = _read_socket(sock, size)
    if data is None:
        return None
    return data[:1], data[1:].decode("utf-8", "surrogatepass")


def _read_socket(sock, size):
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# -- the submission's side -------------------------------------------------------------------
def _call(namespace, request):
    """Answer one call: (VALUE, the return value's text) or (RAISED, (type name, message))."""
    name, args, kwargs = values.decode(request)
    function = namespace.get(name)
    if function is None and isinstance(namespace.get("Solution"), type):
        function = getattr(namespace["Solution"](), name, None)
    if not callable(function):
        return RAISED, values.encode(("NameError", f"the code defines no function {name}"))
    try:
        return VALUE, values.encode(function(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - the exception is the answer
        return RAISED, values.encode((type(exc).__name__, _message(exc)))


def _message(exc):
    try:
        return str(exc)[:1000]
    except BaseException:  # noqa: BLE001 - its __str__ is the code's
        return ""


def _serve(code, sock, report):
    """The submission's process: run the code, then answer calls until the harness closes
    the socket. Never returns."""
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    report[0] = REPORT_STARTED
    try:
        exec(compile(code, "<string>", "exec"), namespace)
        _send(sock, READY)
        while (message := _receive(sock)) is not None:
            _send(sock, *_call(namespace, message[1]))
        status = 0
    except SystemExit as exc:
        status = exit_code(exc)
    except BaseException as exc:  # noqa: BLE001 - reported like the interpreter
        if isinstance(exc, MemoryError):
            report[1] = REPORT_MEMORY_ERROR
        print_traceback(exc)
        status = 1
    flush_std_streams()
    os._exit(status)


# -- the harness's side ----------------------------------------------------------------------
class Proxy:
    """The harness's stand-in for a function of the submission: a call goes over the socket."""

    def __init__(self, name, channel):
        self.name, self.channel = name, channel
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        return self.channel.call(self.name, args, kwargs)

    def __repr__(self):
        return f"<the submission's {self.name}>"


class Channel:
    """The harness's end of the socket pair; once a call fails to get an answer, every later
    one fails the same way (the two sides are out of step)."""

    def __init__(self, sock):
        self.sock, self.broken = sock, None

    def call(self, name, args, kwargs):
        """The value the submission's ``name`` returned for ``args``, or raise CandidateError."""
        if self.broken is not None:
            raise CandidateError(*self.broken)
        _send(self.sock, VALUE, values.encode((name, args, kwargs)))
        try:
            answer = _receive(self.sock)
            if answer is None:
                raise CandidateError("SubmissionExited", "the submission's process ended")
            tag, text = answer
            value = values.decode(text)
        except values.BadValue as exc:
            self.broken = ("BadValue", str(exc))
            raise CandidateError(*self.broken) from None
        except CandidateError as exc:
            self.broken = (exc.kind, "the submission's process ended")
            raise
        if tag == RAISED and type(value) is tuple and len(value) == 2:
            raise CandidateError(str(value[0]), str(value[1]))
        if tag != VALUE:
            self.broken = ("BadAnswer", "the submission answered out of turn")
            raise CandidateError(*self.broken)
        return value


def _referenced(code):
    """Every name ``code`` (and the functions in it) looks up."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _referenced(const)
    return names


def _judge(spec, channel):
    """Run the test script (and ``check(entry)``); the harness's exit status."""
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        script = compile(spec["script"], "<test>", "exec")
        for name in _referenced(script):
            if not hasattr(builtins, name):  # never a stand-in for a built-in
                namespace[name] = Proxy(name, channel)
        exec(script, namespace)
        if spec["entry"] is not None:
            namespace["check"](Proxy(spec["entry"], channel))
    except AssertionError as exc:
        print_traceback(exc)
        return HARNESS_FAILED
    except SystemExit as exc:
        return exit_code(exc)
    except BaseException as exc:  # noqa: BLE001 - the script's error, as the interpreter says
        print_traceback(exc)
        return HARNESS_ERROR
    return HARNESS_PASSED


def _ready(channel):
    """Wait for the submission's code to have run: whether it did (else say why on stderr)."""
    try:
        answer = _receive(channel.sock)
    except values.BadValue:
        answer = None
    if answer is not None and answer[0] == READY:
        return True
    os.write(2, b"\nboxed: the submission ended before the test script could call it\n")
    return False


def _leave(sock, pid, status):
    """Close the channel, give the submission QUIT_GRACE to leave (its CPU time and memory
    then count in this process's), and exit with ``status``. Its end of the socket closes as
    it exits: that is waited for, then its exit (one left running is the supervisor's stray)."""
    sock.shutdown(socket.SHUT_WR)
    sock.settimeout(QUIT_GRACE)
    deadline = time.monotonic() + QUIT_GRACE
    try:
        while sock.recv(65536):
            pass  # an answer it was still writing
        while not os.waitpid(pid, os.WNOHANG)[0] and time.monotonic() < deadline:
            time.sleep(0.0002)
    except OSError:  # the grace ran out (TimeoutError), or it was reaped
        pass
    flush_std_streams()
    os._exit(status)


def _become_harness(config, drop):
    """Drop to the harness uid with no capability, not dumpable, in a directory of nobody's."""
    drop(config.harness_uid, config.harness_gid)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_DUMPABLE")
    os.chdir("/")


def run(report, config, enter_sandbox, drop):
    """Split into the submission's process and the harness, and judge. Never returns.

    Called as root in the zygote's child with the request's limits set and the body on fd 0;
    ``enter_sandbox(config)`` makes the submission's process a snippet's, ``drop(uid, gid)``
    drops privileges (``zygote``'s)."""
    sizes = read_exact(0, 8)
    code = read_exact(0, int.from_bytes(sizes[:4], "big")).decode("utf-8", "surrogatepass")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    report[0] = REPORT_STARTED
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            os.close(0)  # the test script follows the code there
            install_stdin(b"")
            enter_sandbox(config)
            # No code of the submission's runs before the harness has let go of the body and
            # of root (gVisor lets another uid list and open a process's descriptors).
            if _read_socket(theirs, 1) != GO:
                os._exit(HARNESS_ERROR)
        except BaseException as exc:  # noqa: BLE001
            os.write(2, f"boxed supervisor: submission set-up failed: {exc!r}\n".encode())
            os._exit(HARNESS_ERROR)
        _serve(code, theirs, report)
    theirs.close()
    del code
    spec = json.loads(read_exact(0, int.from_bytes(sizes[4:], "big")))
    install_stdin(b"")
    _become_harness(config, drop)
    ours.sendall(GO)
    channel = Channel(ours)
    status = _judge(spec, channel) if _ready(channel) else HARNESS_ERROR
    sys.stdout.flush()
    _leave(ours, pid, status)
