"""What the code did (:class:`Status`) and which limit ended it (:class:`Limit`).

These are the wire's closed sets: a client switches on them, the server's verdict rule
(``exec_server.verdict``) decides them. Stdlib only, so the server imports them from here.
"""

from __future__ import annotations

import enum


class Status(enum.StrEnum):
    """What the code did (closed: clients may switch on it exhaustively)."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    COMPILE_ERROR = "compile_error"  # never from ``decide``: the compile step failed (the
    # compiler's own exit, limit or message), so the program never ran


class Limit(enum.StrEnum):
    """Which limit ended a run."""

    WALL = "wall"
    CPU = "cpu"
    MEMORY = "memory"
    OUTPUT = "output"


__all__ = ["Limit", "Status"]
