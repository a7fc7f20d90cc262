"""A session's files (``session.files``): write, read, list and delete files of its working
directory without passing them through code.

Every request goes to the server that holds the session, like its calls. A write or a read is
sent again after a lost answer (the same bytes written twice are the same file); a delete is
not (a second one would answer 404 for a file the first removed). Paths are relative to the
session's working directory; a ``.`` or ``..`` component is sent as written (percent-encoded,
so no URL normalisation folds it away) and the server refuses it (422), as it refuses a path
through a link (403). A call running in the session makes a file request a 409.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from boxed_client.attempts import Attempts
from boxed_client.models import SessionFileListing

if TYPE_CHECKING:
    from boxed_client.aio import AsyncSession
    from boxed_client.sessions import SessionBase
    from boxed_client.sync import Session


def quote_path(path: str) -> str:
    """``path`` for the URL: each component percent-encoded, a ``.`` or ``..`` one too."""
    parts = path.split("/")
    return "/".join(
        part.replace(".", "%2E") if part in (".", "..") else quote(part, safe="") for part in parts
    )


class SessionFilesBase:
    """What the sync and async file APIs share: the requests, pinned to the session's server."""

    session: SessionBase

    def _file(self, method: str, path: str, *, raw: bool = False) -> Attempts:
        where = self.session._path("/files/" + quote_path(path))
        attempts = self.session._attempts(method, where, replay=method != "DELETE")
        attempts.raw = raw
        return attempts

    def _listing(self, directory: str) -> Attempts:
        return self.session._attempts("GET", self.session._path("/files?dir=" + quote(directory)))


class SessionFiles(SessionFilesBase):
    """The files of a :class:`~boxed_client.sync.Session`."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def write(self, path: str, data: bytes | str) -> None:
        """Write ``data`` (text as UTF-8) as the file ``path``, its parent folders made; an old
        file or link there is replaced. Larger than the server's cap: 413."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        self.session.client._send(self._file("PUT", path, raw=True), raw)

    def read(self, path: str) -> bytes:
        """The bytes of the regular file ``path`` (404 missing, 422 not a file)."""
        data: bytes = self.session.client._send(self._file("GET", path, raw=True))
        return data

    def list(self, dir: str = "") -> SessionFileListing:
        """The entries of the directory ``dir`` ("": the working directory): names, kinds
        (file, dir, link, other) and sizes, in name order."""
        return SessionFileListing.model_validate(self.session.client._send(self._listing(dir)))

    def delete(self, path: str) -> None:
        """Remove the file, link (never its target) or empty directory ``path``."""
        self.session.client._send(self._file("DELETE", path))


class AsyncSessionFiles(SessionFilesBase):
    """The files of an :class:`~boxed_client.aio.AsyncSession`; the methods of
    :class:`SessionFiles`, awaited."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def write(self, path: str, data: bytes | str) -> None:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        await self.session.client._send(self._file("PUT", path, raw=True), raw)

    async def read(self, path: str) -> bytes:
        data: bytes = await self.session.client._send(self._file("GET", path, raw=True))
        return data

    async def list(self, dir: str = "") -> SessionFileListing:
        answer = await self.session.client._send(self._listing(dir))
        return SessionFileListing.model_validate(answer)

    async def delete(self, path: str) -> None:
        await self.session.client._send(self._file("DELETE", path))
