"""The wire protocol between the host and a sandbox's supervisor (stdlib only; both sides).

Host to supervisor, on its stdin, one request at a time: a 4-byte big-endian length, a JSON
header (``Limits`` below, plus ``size``), then ``size`` bytes of snippet body: the 4-byte
lengths of the code and of the input, then the code (UTF-8) and the input, then (when the
header says ``files``) the input files: their count, then each one's name and data, every
length 4 bytes big-endian (``files_section``).

Supervisor to host, on its stdout: ``READY_MARKER`` once, then frames with an 8-byte header
(kind, three zero bytes, 4-byte big-endian length): ``OUTPUT`` and ``ERRORS`` carry the
snippet's stdout and stderr, ``RESULT`` the run's result (JSON, after the snippet's last
output), ``CLEANUP`` the clean-up verdict (JSON). Files the header asks for (``fetch``)
come before ``RESULT``: a ``FILE_NAME`` frame, then its ``FILE_DATA`` frames. The host sends
the next request only after ``CLEANUP``, except within a *batch* (one request's runs, a
judge's tests): a header with ``then: k`` says that k more requests of the batch follow at
once. The supervisor then answers each with its frames and ``RESULT``, proving the container
clean between two runs as ever but sending no ``CLEANUP``; once it stops the batch (a run it
would not go on after, or a failed proof), each later request gets a ``RESULT`` of
``{"skipped": true}``; one ``CLEANUP`` follows the batch's last ``RESULT``.

The child reports to the supervisor through a shared memory page, never through its output:
``REPORT_STARTED`` at offset 0 once the snippet is about to run, ``REPORT_MEMORY_ERROR`` at
offset 1 when it ended with an uncaught ``MemoryError``. The snippet can write that page too,
so the host may use it only to make the snippet's own verdict worse (see ``verdict.decide``).
"""

import json

READY_MARKER = b"\x00boxed-ready\x00\n"
OUTPUT, ERRORS, RESULT, CLEANUP, FILE_NAME, FILE_DATA = 1, 2, 3, 4, 5, 6
FRAME_HEADER_SIZE = 8
REPORT_STARTED = ord("R")
REPORT_MEMORY_ERROR = ord("M")

# Why the supervisor stopped a run ("killed_for" in the RESULT frame).
KILLED_WALL, KILLED_CPU, KILLED_OUTPUT = "wall", "cpu", "output"


def frame(kind, data):
    """One frame: kind, three zero bytes, the 4-byte big-endian length, the data."""
    return bytes((kind, 0, 0, 0)) + len(data).to_bytes(4, "big") + data


def pop_frames(buffer):
    """Take complete frames off the front of ``buffer`` (a bytearray): (kind, data) pairs.

    An incomplete tail stays in the buffer for the next read. Docker's attach stream uses the
    same 8-byte header, so this also demultiplexes that stream."""
    while len(buffer) >= FRAME_HEADER_SIZE:
        size = int.from_bytes(buffer[4:8], "big")
        if len(buffer) < FRAME_HEADER_SIZE + size:
            return
        kind, data = buffer[0], bytes(buffer[FRAME_HEADER_SIZE : FRAME_HEADER_SIZE + size])
        del buffer[: FRAME_HEADER_SIZE + size]
        yield kind, data


def snippet_body(code, stdin):
    """The body the child reads: the two lengths, then the code and the input."""
    parts = (code.encode("utf-8", "surrogatepass"), stdin.encode("utf-8", "surrogatepass"))
    return b"".join(len(p).to_bytes(4, "big") for p in parts) + b"".join(parts)


def files_section(files):
    """The input files' part of a body: ``files`` is a list of (name, bytes)."""
    parts = [len(files).to_bytes(4, "big")]
    for name, data in files:
        raw = name.encode("utf-8")
        parts += [len(raw).to_bytes(4, "big"), raw, len(data).to_bytes(4, "big"), data]
    return b"".join(parts)


def read_files_section(read):
    """The (name, bytes) pairs of a files section; ``read(n)`` returns exactly n bytes."""
    files = []
    for _ in range(int.from_bytes(read(4), "big")):
        name = read(int.from_bytes(read(4), "big")).decode("utf-8")
        files.append((name, read(int.from_bytes(read(4), "big"))))
    return files


def request(header, body):
    """One request: the length of the JSON header, the header (with ``size``), the body."""
    text = json.dumps(dict(header, size=len(body))).encode()
    return len(text).to_bytes(4, "big") + text + body
