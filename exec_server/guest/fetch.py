"""Reading the run directory's files back for the host (``fetch_files``), confined to it.

The supervisor reads them as root after the snippet's processes are gone, but the names are the
caller's and the directory is the snippet's: a link in it may point anywhere (``/proc/1/maps``,
``/etc/shadow``), a name may be a FIFO that blocks a reader or a device that never ends. So a
name is opened one component at a time, relative to the run directory, never following a link
(``O_NOFOLLOW`` on every component, ``O_DIRECTORY`` on the inner ones, and each opened entry
compared with its own ``lstat``, as gVisor follows a link despite ``O_NOFOLLOW`` when
``O_DIRECTORY`` is set), on the run directory's own file system only (a mount point is
refused), with the snippet uid's rights, and only a
regular file is read: at most its size at ``fstat`` time, and only when that fits what is left
of the cap (a file over it is refused whole, never cut). Every name gets a status the host
answers (:class:`FetchedFile`); only files with status ``ok`` send data.
"""

import errno
import os
import stat

from .protocol import FETCH_OK, FILE_NAME, FetchedFile, frame

MISSING = "missing"
REFUSED_LINK = "refused: a link"
REFUSED_NOT_REGULAR = "refused: not a regular file"
REFUSED_OTHER_FS = "refused: another file system"
REFUSED_OVER_CAP = "refused: over the fetch cap"
REFUSED_UNREADABLE = "refused: unreadable"

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO does not wait for a writer; nothing is read from one anyway.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class Refused(Exception):
    """A name that is not sent: its status."""


def _status_of(exc, directory=None, part=None):
    """The status of a name whose component ``part`` (in ``directory``) failed with ``exc``."""
    if exc.errno == errno.ENOENT:
        return MISSING
    if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link
        return REFUSED_LINK
    if exc.errno == errno.ENOTDIR and part is not None:
        # O_DIRECTORY met a file, or a link (to a directory or not): lstat tells which
        try:
            info = os.stat(part, dir_fd=directory, follow_symlinks=False)
        except OSError:
            return REFUSED_UNREADABLE
        return REFUSED_LINK if stat.S_ISLNK(info.st_mode) else REFUSED_NOT_REGULAR
    return REFUSED_UNREADABLE


def _refusal(opened, seen, device, inner):
    """Why the component opened as ``opened`` (fstat) and named ``seen`` (lstat) is refused,
    or None. Both are compared because a runtime may follow a link despite O_NOFOLLOW (gVisor
    does with O_DIRECTORY): what was opened must be the directory entry itself."""
    if stat.S_ISLNK(seen.st_mode) or (seen.st_dev, seen.st_ino) != (opened.st_dev, opened.st_ino):
        return REFUSED_LINK
    if opened.st_dev != device:
        return REFUSED_OTHER_FS  # a mount point inside the run directory
    if not (stat.S_ISDIR if inner else stat.S_ISREG)(opened.st_mode):
        return REFUSED_NOT_REGULAR
    return None


def step(directory, part, device, inner):
    """A descriptor of the entry ``part`` of ``directory`` (a descriptor) and its fstat, once
    it is no link, on ``device`` and a directory (``inner``) or a regular file."""
    try:
        fd = os.open(part, DIR_FLAGS if inner else _FILE_FLAGS, dir_fd=directory)
    except OSError as exc:
        raise Refused(_status_of(exc, directory, part)) from None
    try:
        opened = os.fstat(fd)
        seen = os.stat(part, dir_fd=directory, follow_symlinks=False)
        why = _refusal(opened, seen, device, inner)
    except OSError:
        why = REFUSED_UNREADABLE
    if why is not None:
        os.close(fd)
        raise Refused(why)
    return fd, opened


def open_beneath(root, name):
    """A descriptor of the regular file ``name`` under the directory ``root`` (a path) and its
    size, no component a link nor on another file system; raises :class:`Refused`."""
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise Refused(REFUSED_NOT_REGULAR)
    try:
        current = os.open(root, DIR_FLAGS)
    except OSError as exc:
        raise Refused(_status_of(exc)) from None
    try:
        device = os.fstat(current).st_dev
        for index, part in enumerate(parts):
            fd, opened = step(current, part, device, inner=index < len(parts) - 1)
            os.close(current)
            current = fd
        found, current = current, -1
        return found, opened.st_size
    finally:
        if current >= 0:
            os.close(current)


def send_files(root, names, cap, output, uid, gid):
    """Queue the files ``names`` of ``root`` on ``output`` (FILE_NAME, then FILE_DATA frames),
    read with the rights of ``uid``/``gid``, ``cap`` bytes in all; one FetchedFile each."""
    left, statuses = cap, []
    os.setegid(gid)
    os.seteuid(uid)
    try:
        for name in names:
            status, size = send_one(root, name, left, output)
            left -= size
            statuses.append(FetchedFile(name=name, status=status, size=size))
    finally:
        os.seteuid(0)
        os.setegid(0)
    return statuses


def send_one(root, name, left, output):
    """Queue the file ``name`` of ``root`` on ``output`` when it fits in ``left`` bytes:
    (its status, the bytes sent). Whoever calls it holds the rights it reads with."""
    try:
        fd, size = open_beneath(root, name)
    except Refused as refused:
        return str(refused), 0
    try:
        if size > left:
            return REFUSED_OVER_CAP, 0
        rest = output.queue_file(fd, frame(FILE_NAME, name.encode()), size)
        return FETCH_OK, size - rest
    finally:
        os.close(fd)
