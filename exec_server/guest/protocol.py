"""The wire protocol between the host and a sandbox's supervisor (stdlib only; both sides).

The guest program starts with a :class:`GuestConfig` (JSON in its command, or from the pod
listener) whose ``version`` must be this module's :data:`VERSION`: a guest and a host of
different protocols refuse to start.

Host to supervisor, on its stdin, one request at a time: a 4-byte big-endian length, a JSON
header (:class:`RunRequest`, ``size`` included), then ``size`` bytes of snippet body: the 4-byte
lengths of the code and of the input, then the code (UTF-8) and the input, then (when the
header says ``files``) the input files: their count, then each one's name and data, every
length 4 bytes big-endian (``files_section``).

Supervisor to host, on its stdout: ``READY_MARKER`` once, then frames with an 8-byte header
(kind, three zero bytes, 4-byte big-endian length): ``OUTPUT`` and ``ERRORS`` carry the
snippet's stdout and stderr, ``RESULT`` the run's result (JSON: a :class:`RunReport`, or
:class:`Skipped` or :class:`Anomaly`; after the snippet's last output), ``CLEANUP`` the
clean-up verdict (JSON: a :class:`CleanupVerdict`). Files the header asks for (``fetch``)
come before ``RESULT``: a ``FILE_NAME`` frame, then its ``FILE_DATA`` frames, for each one read
(the ``RESULT``'s ``fetched_files`` says what became of every name). The host sends
the next request only after ``CLEANUP``, except within a *batch* (one request's runs, a
judge's tests): a header with ``then: k`` says that k more requests of the batch follow at
once. The supervisor then answers each with its frames and ``RESULT``, proving the container
clean between two runs as ever but sending no ``CLEANUP``; once it stops the batch (a run it
would not go on after, or a failed proof), each later request gets a ``RESULT`` of
``{"skipped": true}`` (:class:`Skipped`); one ``CLEANUP`` follows the batch's last ``RESULT``.
A session program also takes a :class:`FileRequest` in place of a ``RunRequest`` (a key
``op``): it answers with a ``RESULT`` of a :class:`FileReport`, after the file's frames for a
``get``, and no ``CLEANUP``.

The child reports to the supervisor through a shared memory page, never through its output:
``REPORT_STARTED`` at offset 0 once the snippet is about to run, ``REPORT_MEMORY_ERROR`` at
offset 1 when it ended with an uncaught ``MemoryError``. The snippet can write that page too,
so the host may use it only to make the snippet's own verdict worse (see ``verdict.decide``).

Every message is built and read through the records at the end of this module: ``to_wire``
writes every field, ``from_wire`` refuses a key it does not know, a missing one or a value of
another type (:class:`ProtocolError`), so the two sides cannot drift apart silently. Like
every guest module, this one runs in the sandbox's Python 3.11 with the standard library only.
"""

import base64
import dataclasses
import json
import types
import zlib
from dataclasses import dataclass, field

READY_MARKER = b"\x00boxed-ready\x00\n"
OUTPUT, ERRORS, RESULT, CLEANUP, FILE_NAME, FILE_DATA = 1, 2, 3, 4, 5, 6
FRAME_HEADER_SIZE = 8
REPORT_STARTED = ord("R")
REPORT_MEMORY_ERROR = ord("M")

# A test script's harness exits with these (``harness``): the kernel reports them, the code cannot.
HARNESS_PASSED, HARNESS_ERROR, HARNESS_FAILED = 0, 1, 3

# Why the supervisor stopped a run ("killed_for" in the RESULT frame).
KILLED_WALL, KILLED_CPU, KILLED_OUTPUT = "wall", "cpu", "output"
FETCH_OK = "ok"  # a fetched file's status when it was sent (FetchedFile)


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


# -- the typed messages ----------------------------------------------------------------------
VERSION = 3
"""The protocol's version: a change to any record below changes it."""


class ProtocolError(ValueError):
    """A message this side cannot read: another version, or unknown or missing keys."""


def _check(value: object, kind: object, where: tuple[str, str]) -> object:
    """``value`` as ``kind`` says (a JSON int is accepted where a float is meant), or raise;
    ``where``: the record's and the field's names, for the message."""
    if type(value) is kind:  # the common case, first: a plain value of its exact type
        return value
    if isinstance(kind, types.UnionType):
        if value is None and type(None) in kind.__args__:
            return None
        kind = next(option for option in kind.__args__ if option is not type(None))
    if isinstance(kind, type) and issubclass(kind, Message):
        if not isinstance(value, dict):
            raise ProtocolError(f"{'.'.join(where)}: expected an object, got {value!r}")
        return kind.from_wire(value)
    if isinstance(kind, types.GenericAlias):  # list[str]
        if not isinstance(value, list):
            raise ProtocolError(f"{'.'.join(where)}: expected a list, got {value!r}")
        return [_check(item, kind.__args__[0], where) for item in value]
    if kind is float and type(value) is int:
        return float(value)
    if type(value) is not kind:  # (bool is not int here)
        raise ProtocolError(f"{'.'.join(where)}: expected {kind.__name__}, got {value!r}")
    return value


def _wire(value: object) -> object:
    """``value`` as JSON-ready data: a record as an object, a list item by item."""
    if isinstance(value, Message):
        return value.to_wire()
    if isinstance(value, list):
        return [_wire(item) for item in value]
    return value


class Message:
    """What every message record shares: an exact JSON form, read strictly."""

    def to_wire(self) -> dict:
        """The record as JSON-ready data: every field, nested records as objects."""
        return {name: _wire(getattr(self, name)) for name in self.__dataclass_fields__}

    def to_json(self) -> bytes:
        """The record as the UTF-8 JSON text a frame carries."""
        return json.dumps(self.to_wire()).encode()

    @classmethod
    def from_wire(cls, data: dict) -> "Message":
        """The record ``data`` holds; raises ``ProtocolError`` on a key too many or missing,
        or a value of another type."""
        names = cls.__dataclass_fields__
        if data.keys() != names.keys():
            unknown, missing = data.keys() - names.keys(), names.keys() - data.keys()
            raise ProtocolError(
                f"{cls.__name__}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}"
            )
        name = cls.__name__
        return cls(**{key: _check(data[key], f.type, (name, key)) for key, f in names.items()})

    @classmethod
    def from_json(cls, text: bytes | str) -> "Message":
        """The record in a frame's JSON text."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ProtocolError(f"{cls.__name__}: expected an object, got {data!r}")
        return cls.from_wire(data)


@dataclass(frozen=True)
class SessionLimits(Message):
    """A session's own limits, for its interpreter's whole life."""

    memory_mb: int
    cpu_budget: float
    fork_uids: list[int] = field(default_factory=list)  # the uids its forks may get (``forks``)


@dataclass(frozen=True)
class ZygoteLink(Message):
    """What a zygote gets from the supervisor that started it: descriptors it inherited."""

    socket: int  # its end of the supervisor's socket pair
    report: int  # the memfd of the children's report page
    heavy: bool  # it imports the preload modules


@dataclass(frozen=True)
class GuestConfig(Message):
    """The guest program's configuration, built by the host (``supervisor_config``)."""

    uid: int  # the sandbox uid and gid every snippet runs as
    gid: int
    harness_uid: int  # the uid and gid a test script's harness runs as (another than the snippet's)
    harness_gid: int
    output_cap: int  # bytes per stream and run
    nofile: int  # RLIMIT_NOFILE of every snippet
    fsize: int  # RLIMIT_FSIZE of every snippet
    cpus: float  # the container's CPU quota: CPU time grows at most this fast
    nproc: int | None  # RLIMIT_NPROC where the sandbox has a kernel of its own (gVisor)
    preload: list[str]  # modules the heavy zygote imports
    preload_at_start: bool  # the heavy zygote starts at once, not at the first heavy snippet
    reuse: bool  # diagnostics only: the host decides reuse
    bootstrap: str | None  # the program the supervisor starts its zygotes with
    env: list[str]  # every snippet's environment, NAME=value (the guest programs have none)
    program: str = "supervisor"  # the module whose ``main`` runs: or "session", "shell", "zygote"
    socket: str | None = None  # serve over a unix socket at this path (``bootstrap``)
    session: SessionLimits | None = None  # the session program's limits
    zygote: ZygoteLink | None = None  # a zygote's link to its supervisor
    version: int = VERSION

    @classmethod
    def from_wire(cls, data: dict) -> "GuestConfig":
        """The configuration ``data`` holds, once its version is this module's."""
        version = data.get("version")
        if version != VERSION:
            raise ProtocolError(
                f"the host speaks protocol version {version!r}, this guest {VERSION}: "
                "the guest modules and their configuration come from different releases"
            )
        return super().from_wire(data)


@dataclass(frozen=True)
class RunRequest(Message):
    """One run's header (host to supervisor): its limits and what to do around it."""

    wall: float  # seconds of wall-clock time
    cpu: float  # seconds of CPU time of the snippet's processes
    memory_mb: int  # the snippet's share of address space
    heavy: bool  # fork it from the zygote that preloaded sympy and numpy
    last: bool  # the container is discarded after it: no clean-up to prove
    argv: list[str] | None = None  # a program to exec instead of running the code
    source: str | None = None  # where the code is written for ``argv``
    install: str | None = None  # the compiler's output to copy into /box on exit 0
    keep: bool = False  # keep /box: the request's later runs execute its program
    then: int = 0  # requests of the same batch sent right after this one
    files: bool = False  # input files follow the snippet body
    fetch: list[str] = field(default_factory=list)  # run-directory files sent back
    fetch_cap: int = 0  # bytes of fetched files in all
    harness: bool = False  # the input is a test script, judged in a process of its own
    preload: bool = False  # start the heavy zygote after the clean-up (its snippets are recent)
    size: int = 0  # bytes of body after the header
    op: str = "run"  # a session's: "run" a call, "fork" the member, "end" the member
    member: int = 0  # a session's interpreter the request is for: 0 its first, then its forks


@dataclass(frozen=True)
class MemberReport(Message):
    """The ``RESULT`` of a session's ``fork`` or ``end`` request: the member made (or ended)
    and its uid, or why the interpreter could not be forked (its own doing: threads left,
    the nesting limit, no uid left, no answer)."""

    member: int
    uid: int
    refused: str | None = None


@dataclass(frozen=True)
class FetchedFile(Message):
    """What became of one name of ``fetch``: ``status`` is ``ok`` (its ``size`` bytes were
    sent, as FILE_NAME and FILE_DATA frames before the RESULT), ``missing`` or ``refused: why``
    (nothing sent; see ``fetch.py``)."""

    name: str
    status: str
    size: int = 0


@dataclass(frozen=True)
class RunReport(Message):
    """One run's result (the ``RESULT`` frame), from the supervisor or the session program."""

    exit_code: int  # 128 + N for a death by signal N, as a shell says
    signal: int | None  # the signal from the kernel's wait status (never the code's word)
    killed_for: str | None  # KILLED_WALL, KILLED_CPU, KILLED_OUTPUT or None
    started: bool  # the child reached the code
    memory_error: bool  # it ended with an uncaught MemoryError
    oom_killed: bool  # the OOM killer acted in the container during the run
    duration_ms: float
    cpu_ms: float | None
    max_rss_kb: int | None
    strays: int  # processes the run left, killed
    installed: bool = False  # the compiler's output is in /box
    ended: bool = False  # a session's interpreter is gone
    fetched_files: list[FetchedFile] = field(default_factory=list)  # one per name of ``fetch``


@dataclass(frozen=True)
class Skipped(Message):
    """The ``RESULT`` of a batch's request the supervisor did not run (the batch stopped)."""

    skipped: bool = True


@dataclass(frozen=True)
class Anomaly(Message):
    """The ``RESULT`` of a request the guest program failed on: it retires the sandbox."""

    anomaly: str


def read_result(text: bytes | str) -> "RunReport | Skipped | Anomaly | MemberReport":
    """The ``RESULT`` frame's record: a RunReport, Skipped, Anomaly or MemberReport."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ProtocolError(f"RESULT: expected an object, got {data!r}")
    if "anomaly" in data:
        return Anomaly.from_wire(data)
    if "skipped" in data:
        return Skipped.from_wire(data)
    if "member" in data:
        return MemberReport.from_wire(data)
    return RunReport.from_wire(data)


@dataclass(frozen=True)
class CleanupVerdict(Message):
    """The ``CLEANUP`` frame: whether the container may serve again, and if not why."""

    clean: bool
    problems: list[str]
    memory_grown_kb: int  # the memory charge's growth since ready (diagnostics)


@dataclass(frozen=True)
class FileRequest(Message):
    """A request on a session's working directory (host to session program) in place of a
    ``RunRequest``: no code runs. ``op`` is ``put`` (the file's ``size`` bytes follow as the
    body), ``get`` (the file comes back as FILE_NAME and FILE_DATA frames before the RESULT),
    ``list`` or ``delete``; ``path`` is relative to the working directory ("" for itself)."""

    op: str
    path: str
    cap: int  # get: the largest file sent; list: the most entries answered
    size: int = 0  # bytes of body after the header
    member: int = 0  # whose working directory: the first interpreter's, or a fork's


@dataclass(frozen=True)
class FileEntry(Message):
    """One entry of a listed directory; ``size`` is a regular file's (0 for other kinds)."""

    name: str
    kind: str  # "file", "dir", "link" or "other"
    size: int


@dataclass(frozen=True)
class FileReport(Message):
    """The ``RESULT`` of a :class:`FileRequest`: ``status`` is ``ok``, ``missing`` or
    ``refused: why`` (``session_files.py``); ``size``: the file's bytes (put, get);
    ``created``: a put made a new file; ``entries``: a listing, in name order, ``truncated``
    when the directory held more than the request's cap."""

    status: str
    size: int = 0
    created: bool = False
    entries: list[FileEntry] = field(default_factory=list)
    truncated: bool = False


FILE_OPS = ("put", "get", "list", "delete")  # a FileRequest's; a RunRequest's are run/fork/end


def read_session_request(text: bytes | str) -> "RunRequest | FileRequest":
    """A session program's request header: a call (``RunRequest``) or a ``FileRequest``."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ProtocolError(f"request: expected an object, got {data!r}")
    if data.get("op") in FILE_OPS:
        return FileRequest.from_wire(data)
    return RunRequest.from_wire(data)


def encode_request(header: RunRequest | FileRequest, body: bytes) -> bytes:
    """One request: the length of its JSON header (``size``: the body's), the header, the body."""
    text = dataclasses.replace(header, size=len(body)).to_json()
    return len(text).to_bytes(4, "big") + text + body


def pack_sources(sources):
    """Guest module sources (name -> text) as one command-line argument: JSON, zlib-compressed,
    in base64. One argument of ``execve`` holds at most 128 KiB (``MAX_ARG_STRLEN``), which the
    plain JSON of the guest's sources outgrew; compressed they take about a third of it.
    ``bootstrap.py`` undoes it (it cannot import this module before the modules exist)."""
    return base64.b64encode(zlib.compress(json.dumps(sources).encode(), 9)).decode("ascii")


def unpack_sources(packed):
    """The sources :func:`pack_sources` packed."""
    return json.loads(zlib.decompress(base64.b64decode(packed)))
