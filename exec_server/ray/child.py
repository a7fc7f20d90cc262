"""The service as the child of its node's actor: ``python -m exec_server.ray.child PARENT_PID
[serve options]``.

Two processes, so that the service never outlives its actor and always stops gracefully (its
graceful stop removes its sandboxes):

* the launcher, the actor's child: it gets SIGTERM from the kernel when the actor's thread that
  started it ends, and forwards SIGTERM and SIGINT to the service; but Ray SIGKILLs a worker's
  children when the worker exits (``ray.kill``), so the launcher cannot be the service;
* the service, the launcher's child: it gets SIGTERM from the kernel when the launcher ends,
  however it ends, SIGKILL included.

No ``preexec_fn`` (unsafe in the actor's threaded process): each process asks for its signal
itself, then checks that its parent is still the one it was started by (it may have died
before the request took hold).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import traceback
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """Ask for SIGTERM when the parent ends; exit at once if it has already gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        sys.exit(f"parent {parent} ended before its child started")


def service_pid(launcher: int) -> int | None:
    """The service's pid under ``launcher`` (its one child), or None when it has none."""
    try:
        children = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def _serve(launcher: int, argv: list[str]) -> int:
    """The service's side of the fork: its exit code, whatever ends it."""
    try:
        die_with_parent(launcher)
        from exec_server.__main__ import main as serve

        return serve(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    die_with_parent(int(args[0]))
    launcher = os.getpid()
    pid = os.fork()
    if pid == 0:
        os._exit(_serve(launcher, args[1:]))  # never back into the launcher's code
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, _frame: os.kill(pid, received))
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
