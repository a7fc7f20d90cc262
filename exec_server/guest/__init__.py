"""Programs that run inside a sandbox (stdlib only), and the wire protocol they speak.

Nothing here is executed on the host: the host reads these files as text and hands them to the
sandbox's interpreter (``bootstrap.py`` installs them there as the package ``boxed_guest``).
The host imports only ``protocol``, so both sides share one definition of the wire format.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from .protocol import pack_sources

GUEST_DIR = Path(__file__).parent
# Installed in this order inside the sandbox: each may import the ones before it.
MODULES = (
    "protocol",
    "runner",
    "values",
    "harness",
    "zygote",
    "processes",
    "stdio",
    "fetch",
    "watch",
    "cleanup",
    "supervisor",
    "forks",
    "session_files",
    "session",
    "shell",
)


# Modules only one program uses: a container of the other is started without them, which keeps
# its command line (one argument of at most 128 KiB) short.
PROGRAM_ONLY = {
    "supervisor": ("supervisor", "harness", "values"),  # test scripts are judged one-shot only
    "session": ("forks", "session"),
    "shell": ("shell",),
}


def module_sources(program: str | None = None) -> dict[str, str]:
    """Source text of the guest modules ``program`` needs (None: every one), keyed by module
    name (in installation order)."""
    left_out = {n for p, only in PROGRAM_ONLY.items() if p != program for n in only}
    names = MODULES if program is None else [n for n in MODULES if n not in left_out]
    return {name: (GUEST_DIR / f"{name}.py").read_text() for name in names}


@cache
def packed_sources(program: str = "supervisor") -> str:
    """The guest modules ``program`` needs as the one command-line argument ``bootstrap.py``
    reads (``protocol.pack_sources``), made once per process."""
    return pack_sources(module_sources(program))


def bootstrap_source() -> str:
    """The ``python -c`` program that installs the guest modules and starts the supervisor."""
    return (GUEST_DIR / "bootstrap.py").read_text()
