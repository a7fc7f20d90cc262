"""What runs inside a sympy worker process (not a public API).

The split: :mod:`scorer.sympy_pool` is the caller's side (it starts these processes, times each
request and kills a late worker); this module is the process's own code: import sympy, compare
with :class:`scorer.symbolic.SympyBackend`, answer each request.

Two ways to run:

* ``python -m scorer.sympy_worker --zygote FD`` — the *zygote*: imports sympy once, warms the
  caches, then waits on the control socket ``FD`` (AF_UNIX, SOCK_SEQPACKET). ``spawn`` (with a
  socket attached as SCM_RIGHTS) forks a worker that serves requests on that socket and
  answers ``pid N``; ``kill N`` SIGKILLs and reaps one of its workers. All reaping happens in
  this single thread, so a pid is never signalled after it could have been reused.
* ``python -m scorer.sympy_worker`` — a stand-alone worker on stdin/stdout (fallback when the
  zygote cannot be used).

Worker protocol: it prints ``ready``; then for each JSON line ``{"id", "pred", "gold"}``
(normalized answer strings) it prints one JSON line ``{"id", "correct", "reason", "detail"}``;
it exits on EOF. The caller enforces the deadline by killing the worker; the kernel kills
workers and zygote when their parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import BinaryIO


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return


def _limit_memory() -> None:
    mb = int(os.environ.get("BOXED_SCORER_WORKER_MEM_MB", "4096"))
    if mb <= 0:
        return
    try:
        import resource

        limit = mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def handle(comparer, parse_answer, req: dict) -> dict:
    """One request -> one reply; never raises."""
    from scorer.parse import TooDeep
    from scorer.verdict import Reason

    out: dict = {"id": req.get("id")}
    try:
        p = parse_answer(req["pred"])
        g = parse_answer(req["gold"])
        res = comparer.compare(p, g)
        out.update(correct=bool(res.correct), reason=res.reason, detail=res.detail)
    except (TooDeep, RecursionError):
        out.update(correct=False, reason=Reason.TOO_DEEP, detail="expression too deep")
    except MemoryError:
        out.update(correct=False, reason=Reason.ERROR, detail="out of memory")
    except Exception as exc:  # noqa: BLE001 - the worker must answer every request
        out.update(correct=False, reason=Reason.ERROR, detail=f"{type(exc).__name__}: {exc}"[:200])
    return out


def _setup():
    sys.setrecursionlimit(5_000)
    from scorer.compare import Comparer
    from scorer.parse import parse_answer
    from scorer.symbolic import SympyBackend

    comparer = Comparer(SympyBackend())
    for pred, gold in (("\\sqrt{x^2+2x+1}", "x+1"), ("\\{1, 2\\}", "x > 1"), ("0.33", "\\pi")):
        handle(comparer, parse_answer, {"id": 0, "pred": pred, "gold": gold})
    return comparer, parse_answer


def serve(comparer, parse_answer, rfile: BinaryIO, wfile: BinaryIO) -> None:
    wfile.write(b"ready\n")
    wfile.flush()
    for line in rfile:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        reply = handle(comparer, parse_answer, req)
        wfile.write(json.dumps(reply).encode() + b"\n")
        wfile.flush()


def _forked_worker(comparer, parse_answer, ctl: socket.socket, fd: int) -> None:
    try:
        ctl.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _die_with_parent()
        if os.getppid() == 1:
            os._exit(1)
        sock = socket.socket(fileno=fd)
        serve(comparer, parse_answer, sock.makefile("rb"), sock.makefile("wb"))
    finally:
        os._exit(0)


def zygote(ctl_fd: int) -> None:
    """Fork pre-warmed workers on request (see module docstring)."""
    _die_with_parent()
    _limit_memory()
    comparer, parse_answer = _setup()
    ctl = socket.socket(fileno=ctl_fd)
    ctl.sendall(b"ready")
    live: set[int] = set()
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 256, 1)
        except (OSError, InterruptedError):
            break
        if not msg:
            break
        _reap(live)
        cmd = msg.split()
        if cmd[0] == b"spawn" and fds:
            pid = os.fork()
            if pid == 0:
                _forked_worker(comparer, parse_answer, ctl, fds[0])
            os.close(fds[0])
            live.add(pid)
            ctl.sendall(b"pid %d" % pid)
        elif cmd[0] == b"kill" and len(cmd) == 2:
            pid = int(cmd[1])
            if pid in live:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
                live.discard(pid)
        else:
            for fd in fds:
                os.close(fd)
    for pid in live:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os._exit(0)


def _reap(live: set[int]) -> None:
    while live:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            live.clear()
            return
        if pid == 0:
            return
        live.discard(pid)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--zygote":
        zygote(int(sys.argv[2]))
        return
    _die_with_parent()
    if os.getppid() == 1:
        os._exit(1)
    _limit_memory()
    comparer, parse_answer = _setup()
    serve(comparer, parse_answer, sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
