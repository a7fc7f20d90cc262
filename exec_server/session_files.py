"""A session's files: put, get, list and delete files of its working directory (``/tmp/run``).

An agent's tool calls move files (a repository's source, a data set, a plot) without passing
them through code. Paths are checked here: relative, UTF-8, no empty, ``.`` or ``..``
component. Sizes are capped (``BOXED_SESSION_FILE_MAX_BYTES`` a file,
``BOXED_SESSION_LIST_MAX_ENTRIES`` a listing). The bytes travel to the session program (PID 1,
root, out of the code's reach) on its request stream, as a call's do, so it works wherever
sessions do (Docker under runc or gVisor, pods); it resolves each path one component at a time
under the working directory, follows no link, refuses other file systems (``/proc``) and
anything but regular files and directories, and does the I/O with the sandbox uid's rights
(``guest/session_files.py``), so a file written belongs to the code's uid.

A file request holds the session as a call does (409 while a call runs, 404 and 410 as for
calls: ``SessionManager.turn``), runs no code, holds no running slot, and counts as activity
for the idle timeout. What the session program refuses is the caller's mistake (a 4xx with
the reason, no outcome); a session program that fails loses the session (410 ``session_lost``).
"""

from __future__ import annotations

from .guest.fetch import (
    MISSING,
    REFUSED_LINK,
    REFUSED_NOT_REGULAR,
    REFUSED_OTHER_FS,
    REFUSED_OVER_CAP,
    REFUSED_UNREADABLE,
)
from .guest.protocol import FETCH_OK, FileReport, FileRequest
from .guest.session_files import REFUSED_NO_SPACE, REFUSED_UNWRITABLE
from .models import SessionFileEntry, SessionFileListing
from .request_errors import RequestError
from .sessions import SessionManager

MAX_PATH_BYTES = 4096  # Linux's PATH_MAX
MAX_NAME_BYTES = 255  # NAME_MAX of one component


def check_path(path: str, *, directory: bool = False) -> str:
    """``path`` once it names something under the working directory by plain components;
    422 otherwise. ``directory``: "" (the working directory itself) is allowed too."""
    if path == "" and directory:
        return path
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(422, "the path is not valid Unicode text") from None
    parts = path.split("/")
    why = None
    if path.startswith("/"):
        why = "it is absolute: paths are relative to the session's working directory"
    elif any(part in ("", ".", "..") for part in parts):
        why = "it has an empty, '.' or '..' component"
    elif "\0" in path:
        why = "it holds a NUL byte"
    elif len(raw) > MAX_PATH_BYTES or any(len(p.encode()) > MAX_NAME_BYTES for p in parts):
        why = f"it is longer than {MAX_PATH_BYTES} bytes, or a component than {MAX_NAME_BYTES}"
    if why is not None:
        raise RequestError(422, f"path {path[:200]!r} refused: {why}")
    return path


def refusal(request: FileRequest, status: str, size: int, cap: int) -> RequestError:
    """The caller's answer to ``request`` once the session program refused it with ``status``
    (``size``: the file's bytes; ``cap``: BOXED_SESSION_FILE_MAX_BYTES)."""
    path, op = request.path, request.op
    where = f"{path!r} in the session's working directory" if path else "the working directory"
    if status == MISSING:
        return RequestError(404, f"no such file or directory: {where}")
    if status == REFUSED_OVER_CAP:
        return RequestError(
            413,
            f"{where} holds {size} bytes: more than BOXED_SESSION_FILE_MAX_BYTES ({cap} bytes)",
        )
    if status == REFUSED_LINK:
        return RequestError(
            403, f"{where} passes through a symbolic link: the file API follows none"
        )
    if status in (REFUSED_OTHER_FS, REFUSED_UNREADABLE, REFUSED_UNWRITABLE):
        return RequestError(403, f"{where}: {status}")
    if status == REFUSED_NO_SPACE:
        return RequestError(507, f"no space left for {where}: the session's /tmp is full")
    if status == REFUSED_NOT_REGULAR:
        what = {
            "get": "is not a regular file (a directory? list it with GET "
            "/sessions/{id}/files?dir=...)",
            "list": "is not a directory",
        }.get(op, "has a component that is not a directory")
        return RequestError(422, f"{where} {what}")
    return RequestError(422, f"{where}: {status}")  # a directory where a file is meant


class SessionFiles:
    """The file API of the sessions of one ``SessionManager``."""

    def __init__(self, sessions: SessionManager) -> None:
        self.sessions = sessions
        self.max_bytes = sessions.settings.session_file_max_bytes
        self.max_entries = sessions.settings.session_list_max_entries

    async def _ask(
        self, session_id: str, owner: str, request: FileRequest, data: bytes = b""
    ) -> tuple[FileReport, bytes]:
        async with self.sessions.turn(session_id, owner) as session:
            report, got = await session.sandbox.file_request(request, data)
        if report.status != FETCH_OK:
            raise refusal(request, report.status, report.size, self.max_bytes)
        return report, got

    async def write(self, session_id: str, owner: str, path: str, data: bytes) -> bool:
        """Write ``data`` as the file ``path`` (its parent folders made, an old file or link
        there replaced); True when the file is new. 413 over the cap."""
        check_path(path)
        if len(data) > self.max_bytes:
            raise RequestError(413, self.too_large(len(data)))
        request = FileRequest(op="put", path=path, cap=self.max_bytes)
        report, _ = await self._ask(session_id, owner, request, data)
        return report.created

    def too_large(self, size: int) -> str:
        """The 413's detail for a file of ``size`` bytes (also the body-size middleware's)."""
        return (
            f"a file of {size} bytes is more than BOXED_SESSION_FILE_MAX_BYTES "
            f"({self.max_bytes} bytes) allows"
        )

    async def read(self, session_id: str, owner: str, path: str) -> bytes:
        """The bytes of the regular file ``path``; 404 missing, 413 over the cap."""
        check_path(path)
        request = FileRequest(op="get", path=path, cap=self.max_bytes)
        _, data = await self._ask(session_id, owner, request)
        return data

    async def listing(self, session_id: str, owner: str, directory: str) -> SessionFileListing:
        """The entries of ``directory`` ("": the working directory), as they are."""
        check_path(directory, directory=True)
        request = FileRequest(op="list", path=directory, cap=self.max_entries)
        report, _ = await self._ask(session_id, owner, request)
        entries = [SessionFileEntry.model_validate(e.to_wire()) for e in report.entries]
        return SessionFileListing(dir=directory, entries=entries, truncated=report.truncated)

    async def delete(self, session_id: str, owner: str, path: str) -> None:
        """Remove the file, link or empty directory ``path`` (a link itself, never its
        target); 404 missing, 422 a directory that is not empty."""
        check_path(path)
        await self._ask(session_id, owner, FileRequest(op="delete", path=path, cap=0))
