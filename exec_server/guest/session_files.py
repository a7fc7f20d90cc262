"""A session's file API inside its sandbox (stdlib only): put, get, list and delete files of
the working directory for the host, confined to it.

The session program (PID 1, root) serves a ``protocol.FileRequest`` between two calls, when
nothing of the session runs (the interpreter is stopped, every other process of the sandbox
uid killed), with the sandbox uid's rights as its effective uid and gid: a file written belongs
to that uid, and nothing is read or written that the session's own code could not touch.
Names are resolved as ``fetch`` resolves them: one component at a time under the working
directory, no link followed (a link is listed, replaced or deleted itself, never gone
through), nothing on another file system, only regular files read. A put writes a temporary
file next to its target and renames it over the target, so it never writes through a link or
a hard link, and a failed put leaves the old file as it was.
"""

import errno
import os
import stat

from . import fetch
from .protocol import FETCH_OK, FILE_DATA, FILE_NAME, RESULT, FileEntry, FileReport, frame
from .stdio import CHUNK, send, skip_body, write_all

REFUSED_DIRECTORY = "refused: a directory"
REFUSED_NOT_EMPTY = "refused: a directory that is not empty"
REFUSED_NO_SPACE = "refused: no space left"
REFUSED_UNWRITABLE = "refused: unwritable"
FILE_MODE, DIR_MODE = 0o644, 0o755
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class Body:
    """A put's body on stdin: read once, and whatever is left skipped after the request (a
    refused put must not leave its bytes to be taken for the next request)."""

    def __init__(self, size):
        self.left = size

    def copy_to(self, fd):
        """Write the body into ``fd``; a write that fails (a full disk) drains the rest first."""
        failure = None
        while self.left:
            chunk = os.read(0, min(self.left, CHUNK))
            if not chunk:
                raise EOFError("stdin closed inside a request")
            self.left -= len(chunk)
            if failure is None:
                try:
                    write_all(chunk, fd)
                except OSError as exc:
                    failure = exc
        if failure is not None:
            raise failure

    def skip(self):
        skip_body(self.left)
        self.left = 0


def serve(request, root, uid, gid):
    """Answer one FileRequest on stdout (a get's frames, then a RESULT of a FileReport), with
    ``uid``/``gid`` as the effective ids."""
    body = Body(request.size)
    os.setegid(gid)
    os.seteuid(uid)
    try:
        report = _OPERATIONS[request.op](request, root, body)
    except fetch.Refused as refused:
        report = FileReport(status=str(refused))
    except OSError as exc:
        report = FileReport(status=_write_status(exc))
    finally:
        os.seteuid(0)
        os.setegid(0)
        body.skip()
    send(RESULT, report.to_json())


def _write_status(exc):
    if exc.errno in _FULL:
        return REFUSED_NO_SPACE
    if exc.errno == errno.ENOENT:
        return fetch.MISSING
    if exc.errno in (errno.EISDIR, errno.ENOTEMPTY):
        return REFUSED_DIRECTORY
    return REFUSED_UNWRITABLE


def _parts(path, named=True):
    """The components of ``path`` ("" is the working directory itself, unless ``named``)."""
    parts = path.split("/") if path or named else []
    if any(part in ("", ".", "..") for part in parts):
        raise fetch.Refused(fetch.REFUSED_NOT_REGULAR)
    return parts


def open_directory(root, parts, make=False):
    """A descriptor of the directory ``root``/``parts`` (no component a link nor on another
    file system), its missing components made (``make``, mode 0755); raises ``fetch.Refused``."""
    try:
        current = os.open(root, fetch.DIR_FLAGS)
    except OSError as exc:
        raise fetch.Refused(fetch.REFUSED_UNREADABLE) from exc
    try:
        device = os.fstat(current).st_dev
        for part in parts:
            made = False
            if make and not _exists(current, part):
                os.mkdir(part, DIR_MODE, dir_fd=current)
                made = True
            fd, _ = fetch.step(current, part, device, inner=True)
            os.close(current)
            current = fd
            if made:
                os.fchmod(current, DIR_MODE)  # whatever this process's umask
        found, current = current, -1
        return found
    finally:
        if current >= 0:
            os.close(current)


def _exists(directory, name):
    try:
        os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _put(request, root, body):
    *parents, name = _parts(request.path)
    parent = open_directory(root, parents, make=True)
    try:
        try:
            existing = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            return FileReport(status=REFUSED_DIRECTORY)
        temporary = f".boxed-put-{os.urandom(8).hex()}"
        fd = os.open(temporary, _NEW_FILE, FILE_MODE, dir_fd=parent)
        try:
            os.fchmod(fd, FILE_MODE)
            body.copy_to(fd)
            os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            os.unlink(temporary, dir_fd=parent)
            raise
        finally:
            os.close(fd)
        return FileReport(status=FETCH_OK, size=request.size, created=existing is None)
    finally:
        os.close(parent)


def _get(request, root, body):
    fd, size = fetch.open_beneath(root, "/".join(_parts(request.path)))
    try:
        if size > request.cap:
            return FileReport(status=fetch.REFUSED_OVER_CAP, size=size)
        write_all(frame(FILE_NAME, request.path.encode()))
        left = size
        while left > 0 and (chunk := os.read(fd, min(CHUNK, left))):
            write_all(frame(FILE_DATA, chunk))
            left -= len(chunk)
        return FileReport(status=FETCH_OK, size=size - left)
    finally:
        os.close(fd)


def _kind(mode):
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def _list(request, root, body):
    fd = open_directory(root, _parts(request.path, named=False))
    entries, truncated = [], False
    try:
        with os.scandir(fd) as found:
            for entry in found:
                if len(entries) >= request.cap:
                    truncated = True
                    break
                info = entry.stat(follow_symlinks=False)
                kind = _kind(info.st_mode)
                # a name that is not UTF-8 is spelled out, never sent as a lone surrogate
                name = os.fsencode(entry.name).decode("utf-8", "backslashreplace")
                entries.append(
                    FileEntry(name=name, kind=kind, size=info.st_size * (kind == "file"))
                )
    finally:
        os.close(fd)
    entries.sort(key=lambda e: e.name)
    return FileReport(status=FETCH_OK, entries=entries, truncated=truncated)


def _delete(request, root, body):
    *parents, name = _parts(request.path)
    parent = open_directory(root, parents)
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            try:
                os.rmdir(name, dir_fd=parent)
            except OSError as exc:
                if exc.errno == errno.ENOTEMPTY:
                    return FileReport(status=REFUSED_NOT_EMPTY)
                raise
        else:
            os.unlink(name, dir_fd=parent)  # a link itself, never what it points to
        return FileReport(status=FETCH_OK)
    finally:
        os.close(parent)


_OPERATIONS = {"put": _put, "get": _get, "list": _list, "delete": _delete}
