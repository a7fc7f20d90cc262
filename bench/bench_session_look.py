"""A session call's latency on two checkouts side by side, under runc or gVisor: what a change
to the session program's end-of-call check costs (docs/sessions.md).

    git worktree add /tmp/base <commit>
    python bench/bench_session_look.py /tmp/base [--runtime runsc] [--rounds 4] [--calls 60]

Starts one service per checkout (process mode, pool 1, no warm sessions), each from its own
tree (its own guest programs); under ``--runtime runsc`` both run on a private dockerd with
gVisor registered (the test suite's, ``tests/private_docker.py``), the sandbox image loaded
into it. Each round opens a session on each service in turn, taking turns at going first,
and times ``--calls`` calls of ``print(1)`` one at a time, every answer checked.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_checkouts import service_for  # noqa: E402

from tests.private_docker import RUNSC_CONFIG, PrivateDocker  # noqa: E402
from tests.service import IMAGE  # noqa: E402

HERE = Path(__file__).resolve().parent.parent


@contextmanager
def engine_env(runtime: str) -> Iterator[dict[str, str]]:
    """The services' environment for ``runtime``: runc on the system daemon, or a private
    gVisor daemon for the run."""
    if runtime == "runc":
        yield {}
        return
    daemon = PrivateDocker(RUNSC_CONFIG)
    daemon.start()
    try:
        daemon.load_image(IMAGE)
        yield {"DOCKER_HOST": daemon.host, "BOXED_RUNTIME": "runsc"}
    finally:
        daemon.destroy()


def session_calls(url: str, calls: int) -> list[float]:
    """Seconds of each ``print(1)`` call in a new session (deleted after)."""
    with httpx.Client(base_url=url, timeout=60) as http:
        made = http.post("/sessions", json={})
        made.raise_for_status()
        path = f"/sessions/{made.json()['session_id']}"
        seconds = []
        try:
            for _ in range(calls):
                start = time.perf_counter()
                data = http.post(f"{path}/execute", json={"code": "print(1)"}).json()
                seconds.append(time.perf_counter() - start)
                if (data.get("status"), data.get("stdout")) != ("ok", "1\n"):
                    raise RuntimeError(f"a call did not answer ok: {data}")
        finally:
            http.delete(path)
    return seconds


def main(args: argparse.Namespace) -> None:
    trees = {"base": args.base.resolve(), "this checkout": HERE}
    with engine_env(args.runtime) as env:
        services = {
            name: service_for(tree, BOXED_ISOLATION="process", BOXED_POOL_SIZE="1", **env).start()
            for name, tree in trees.items()
        }
        times: dict[str, list[float]] = {name: [] for name in trees}
        try:
            for turn in range(args.rounds):
                order = list(services) if turn % 2 == 0 else list(reversed(services))
                for name in order:
                    times[name] += session_calls(services[name].url, args.calls)
        finally:
            for service in services.values():
                service.stop()
    table = Table(title=f"print(1) in a session, {args.runtime}: latency (ms), one at a time")
    for column in ("checkout", "calls", "p50", "p90", "mean"):
        table.add_column(column, justify="left" if column == "checkout" else "right")
    for name, seconds in times.items():
        ms = sorted(s * 1000 for s in seconds)
        p90 = ms[int(len(ms) * 0.9)]
        row = (f"{statistics.median(ms):.2f}", f"{p90:.2f}", f"{statistics.mean(ms):.2f}")
        table.add_row(f"{name} ({trees[name]})", str(len(ms)), *row)
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("base", type=Path, help="the other checkout (a git worktree)")
    parser.add_argument("--runtime", choices=("runc", "runsc"), default="runc")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=60, help="calls per session and round")
    main(parser.parse_args())
