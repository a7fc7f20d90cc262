"""The service as the child of its node's actor: ``python -m exec_server.ray.child PARENT_PID
[serve options]``.

The kernel sends the child SIGTERM when the actor's thread that started it ends, so the service
never outlives its actor (a killed actor, a removed node): SIGTERM is the service's ordinary
graceful stop, which removes its sandboxes. No ``preexec_fn`` (unsafe in the actor's threaded
process): the child asks for the signal itself, then checks that the parent it was started by
is still its parent (it may have died before the request took hold).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """Ask for SIGTERM when the parent ends; exit at once if it has already gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        sys.exit(f"the actor (pid {parent}) ended before its service started")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    die_with_parent(int(args[0]))
    from exec_server.__main__ import main as serve

    return serve(args[1:])


if __name__ == "__main__":
    sys.exit(main())
