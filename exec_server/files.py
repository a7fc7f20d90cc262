"""Input files (``files``: name -> base64, written into the working directory before the
code runs) and output files (``fetch_files``: names read back after it, answered base64), as
SandboxFusion has them. Names are checked and sizes capped here, before anything runs."""

from __future__ import annotations

import base64
import binascii
import re

from .request_errors import RequestError
from .settings import Settings

# Relative paths of plain components: no absolute path, no "..", nothing hidden by a dot.
_PART = r"[A-Za-z0-9_+=,@-][A-Za-z0-9_.+=,@-]{0,99}"
NAME = re.compile(rf"{_PART}(/{_PART}){{0,7}}")


def _check_name(name: str, field: str) -> str:
    if not NAME.fullmatch(name):
        raise RequestError(
            422,
            f"{field}: {name[:100]!r} is not a plain relative path (letters, digits, _ . + = , @"
            " -; no leading dot, no '..', at most 8 levels)",
        )
    return name


def input_files(files: dict[str, str], settings: Settings) -> tuple[tuple[str, bytes], ...]:
    """The decoded input files, in name order; 422 for a bad name or base64, 413 too many or
    too large."""
    if len(files) > settings.max_files:
        raise RequestError(413, f"{len(files)} files; the maximum is {settings.max_files}")
    decoded, total = [], 0
    for name in sorted(files):
        _check_name(name, "files")
        try:
            data = base64.b64decode(files[name], validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise RequestError(422, f"files: {name!r} is not valid base64") from None
        total += len(data)
        decoded.append((name, data))
    if total > settings.max_files_bytes:
        raise RequestError(
            413, f"files hold {total} bytes; the maximum is {settings.max_files_bytes}"
        )
    return tuple(decoded)


def fetch_names(names: list[str], settings: Settings) -> tuple[str, ...]:
    """The names to fetch, checked and without repeats; 422 for a bad name or too many."""
    if len(names) > settings.max_files:
        raise RequestError(422, f"{len(names)} fetch_files; the maximum is {settings.max_files}")
    return tuple(dict.fromkeys(_check_name(name, "fetch_files") for name in names))


def fetch_share(runs: int, settings: Settings) -> int:
    """What each of a request's ``runs`` (a judge's tests, a batch's items) may fetch: an equal
    share of the request's total, so its answer's files stay bounded whatever the number of
    runs, fixed before any file is read."""
    return min(settings.max_fetch_bytes, settings.max_request_fetch_bytes // max(runs, 1))


def encoded(files: dict[str, bytes]) -> dict[str, str]:
    """Fetched files as answered: name -> base64 (files that were not there are left out)."""
    return {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}
