"""The guest program's framed stdio (stdlib only): requests in on stdin, frames out on stdout,
and a child's pipes forwarded as capped output frames.

Stdin and stdout are the host's stream (``protocol``). Output passes through one buffer and
leaves with the next frames from a second one (most runs: one write for all their output and
the result, where a write to the engine's pipe costs a context switch or two); both are zeroed
after each run (``scrub``), so nothing of a snippet's output stays in this process's memory.
Used by the supervisor and the session program alike.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Any

from .protocol import ERRORS, FILE_DATA, OUTPUT, RunRequest, frame

CHUNK = 65536

_buffer = bytearray(8 + CHUNK)  # where child output is read into; zeroed after each run
_pending = bytearray(2 * CHUNK)  # frames waiting to leave with the next ones
_dirty = {"buffer": 0, "pending": 0}  # how much of each a run wrote: what ``scrub`` clears
_splice = {"works": True}  # until it fails: stdin is a socket (splice needs a pipe at one end)


def write_all(data: bytes | bytearray | memoryview, fd: int = 1) -> None:
    """Write all of ``data`` to ``fd`` (stdout: the host)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def send(kind: int, data: bytes) -> None:
    """One frame to the host, now."""
    write_all(frame(kind, data))


def read_exact(n: int) -> bytes | None:
    """``n`` bytes of stdin, or None once it ended."""
    chunks = []
    while n:
        chunk = os.read(0, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_request(parse: Callable[[bytes], Any] = RunRequest.from_json) -> Any:
    """The next request's header (``parse``: a ``protocol.RunRequest``, or what the session
    program reads), or None once the host closed stdin; its body (``size`` bytes) follows on
    stdin."""
    size = read_exact(4)
    text = size and read_exact(int.from_bytes(size, "big"))
    return parse(text) if text else None


def skip_body(size: int) -> None:
    """Read and drop a request's body."""
    while size and (chunk := os.read(0, min(size, CHUNK))):
        size -= len(chunk)


def receive_body(fd: int, size: int) -> None:
    """Move a request's body from stdin into ``fd`` (the child's memfd), spliced so that it
    never passes through this process's memory where it can (over the host's socket, and in
    gVisor, it cannot: there it passes through the output buffer, zeroed after every run)."""
    while size:
        moved = None
        if _splice["works"]:
            try:
                moved = os.splice(0, fd, size)
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                    raise
                _splice["works"] = False  # not tried again: a failed call per run costs
        if moved is None:
            moved = os.readv(0, [memoryview(_buffer)[: min(size, len(_buffer))]])
            _dirty["buffer"] = max(_dirty["buffer"], moved)
            write_all(memoryview(_buffer)[:moved], fd)
        if not moved:
            raise EOFError("stdin closed inside a request")
        size -= moved


def scrub() -> None:
    """Zero what a run wrote into the buffers: no output outlives its run here."""
    for name, buffer in (("buffer", _buffer), ("pending", _pending)):
        buffer[: _dirty[name]] = bytes(_dirty[name])
        _dirty[name] = 0


class Output:
    """A run's frames to the host: its stdout and stderr pipes forwarded with a per-stream
    cap (each stream sends at most cap + 1 bytes: one past the cap says it passed it), and
    any frame queued to leave with them."""

    def __init__(
        self, out_r: int, err_r: int, cap: int, on_close: Callable[[int], None] | None = None
    ) -> None:
        self.kinds = {out_r: OUTPUT, err_r: ERRORS}  # the pipes still open
        self.sent = {OUTPUT: 0, ERRORS: 0}
        self.cap = cap
        self.on_close = on_close  # called with a pipe this forwarder is done with
        self.queued = 0  # bytes of frames in _pending

    def queue(self, data: bytes | memoryview) -> None:
        """Send ``data`` (whole frames) with the next write, or now if it does not fit."""
        if self.queued + len(data) > len(_pending):
            self.flush()
        if len(data) > len(_pending):
            write_all(data)
            return
        _pending[self.queued : self.queued + len(data)] = data
        self.queued += len(data)
        _dirty["pending"] = max(_dirty["pending"], self.queued)

    def flush(self) -> None:
        """Write every queued frame."""
        if self.queued:
            write_all(memoryview(_pending)[: self.queued])
            self.queued = 0

    @property
    def over_cap(self) -> bool:
        return max(self.sent.values()) > self.cap

    def forward(self, fd: int) -> bool:
        """Send one chunk of ``fd`` on; False at end of file or once the stream passed its cap
        (True when a non-blocking pipe had nothing yet)."""
        n = self._read(fd)
        return n != 0 and self.sent[self.kinds[fd]] <= self.cap

    def forward_available(self) -> None:
        """Forward all that the (non-blocking) pipes hold now, past the cap too (dropped)."""
        for fd in list(self.kinds):
            while self._read(fd):
                pass

    def _read(self, fd: int) -> int | None:
        """Read a chunk of ``fd`` and queue what the cap lets through: the bytes read (0 at
        end of file, None when a non-blocking pipe is empty)."""
        view = memoryview(_buffer)
        try:
            n = os.readv(fd, [view[8:]])
        except BlockingIOError:
            return None
        if n:
            _dirty["buffer"] = max(_dirty["buffer"], 8 + n)
            kind = self.kinds[fd]
            count = min(n, self.cap + 1 - self.sent[kind])
            if count > 0:
                view[0:8] = bytes((kind, 0, 0, 0)) + count.to_bytes(4, "big")
                self.queue(view[: 8 + count])
                self.sent[kind] += count
        return n

    def queue_file(self, fd: int, name_frame: bytes, left: int) -> int:
        """Queue FILE_DATA frames of ``fd`` after ``name_frame``, at most ``left`` bytes read
        through the zeroed buffer; the bytes left."""
        self.queue(name_frame)
        view = memoryview(_buffer)
        while left > 0 and (n := os.readv(fd, [view[8 : 8 + min(CHUNK, left)]])):
            _dirty["buffer"] = max(_dirty["buffer"], 8 + n)
            view[0:8] = bytes((FILE_DATA, 0, 0, 0)) + n.to_bytes(4, "big")
            self.queue(view[: 8 + n])
            left -= n
        return left

    def close(self, fd: int) -> None:
        """Stop forwarding ``fd``."""
        if self.kinds.pop(fd, None) is not None and self.on_close is not None:
            self.on_close(fd)

    def close_all(self) -> None:
        for fd in list(self.kinds):
            self.close(fd)
