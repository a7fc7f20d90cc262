"""Session figures beside one-shot /execute, in one run on one service.

    python bench/bench_sessions.py [--url URL] [--sessions N] [--calls N] [--forks N]
        [--fork-sizes 10,100,500] [--files N]

Starts its own service (process mode, default settings: a warm pool of 2 session sandboxes) on
a free loopback port, or measures the one at ``--url``. One request at a time, it measures:

* creating a session from the warm pool (``POST /sessions`` while the pool holds one) beside a
  cold create (limits the warm sandboxes were not made with: a container started for it), and
  how long the pool takes to refill after a warm create;
* deleting a session (its sandbox gone);
* a trivial call in a session beside the same snippet one-shot (``POST /execute``);
* ``import sympy`` as a session's first call, a later sympy call, and sympy one-shot;
* a fork (``POST /sessions/{id}/fork``) by the size of the parent's interpreter (10, 100 and
  500 MiB written, so resident; the parent made with ``max_forks``);
* a shell session's call (``"language": "bash"``): a trivial one, and one that reads and
  changes the state the call before it left;
* a 1 MiB file put into a session and got back (``/sessions/{id}/files/...``).

Each measure is one function that returns its rows; ``MEASURES`` lists them in table order
(add a measure there). Prints a table of latencies (ms) with rich.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from exec_server.settings import Settings  # noqa: E402
from tests.service import ServiceProcess  # noqa: E402

TRIVIAL = "print(1)"
SYMPY = "import sympy\nprint(sympy.sqrt(8))"
POLL = 0.002  # seconds between looks at the warm pool
POOL_WAIT = 60.0  # longest wait for the pool to hold a sandbox
SLOW_CALL = 30  # seconds a sympy call may take on a loaded machine (the default maximum; a
# per-call limit: the sessions stay warm ones)


@dataclass(frozen=True)
class Row:
    """One measure: its name and the seconds of each request (or wait) it timed."""

    name: str
    seconds: list[float]
    note: str = ""


@dataclass(frozen=True)
class Options:
    sessions: int
    calls: int
    forks: int = 20
    fork_sizes: tuple[int, ...] = (10, 100, 500)
    files: int = 50


Measure = Callable[[httpx.Client, Options], list[Row]]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def timed(
    http: httpx.Client, method: str, path: str, body: object = None
) -> tuple[float, httpx.Response]:
    """Seconds one request took, and its answer (a success, and a run's status ``ok``)."""
    started = time.perf_counter()
    response = http.request(method, path, json=body)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    if path.endswith("/execute") and response.json()["status"] != "ok":
        raise RuntimeError(f"{path} answered {response.json()}")
    return elapsed, response


def pool_ready(http: httpx.Client) -> int:
    """Warm sandboxes of the default image the service holds now (0: none, or no pool)."""
    return http.get("/readyz").json().get("session_pool_ready", {}).get("default", 0)


def wait_pool(http: httpx.Client, at_least: int) -> float:
    """Seconds until the pool holds ``at_least`` warm sandboxes."""
    started = time.perf_counter()
    while pool_ready(http) < at_least:
        if time.perf_counter() - started > POOL_WAIT:
            raise TimeoutError(f"the warm pool did not reach {at_least} in {POOL_WAIT} s")
        time.sleep(POLL)
    return time.perf_counter() - started


def session_path(response: httpx.Response) -> str:
    return f"/sessions/{response.json()['session_id']}"


# -- the measures ------------------------------------------------------------------------
def measure_create(http: httpx.Client, opts: Options) -> list[Row]:
    """Warm and cold creates, taking turns so that both see the same machine, and the pool's
    refill after each warm one. A cold create asks a lifetime 1 s short of the default: the
    warm sandboxes were made with the default (their CPU budget), so it starts its own."""
    probe = http.post("/sessions", json={})
    probe.raise_for_status()
    lifetime = probe.json()["max_lifetime"]
    http.delete(session_path(probe))
    size = http.get("/readyz").json().get("session_pool_size", {}).get("default", 0)
    warm, refill, cold = [], [], []
    for _ in range(opts.sessions):
        if size:
            wait_pool(http, size)
            seconds, made = timed(http, "POST", "/sessions", {})
            warm.append(seconds)
            refill.append(wait_pool(http, size))
            http.delete(session_path(made))
        seconds, made = timed(http, "POST", "/sessions", {"max_lifetime": lifetime - 1})
        cold.append(seconds)
        http.delete(session_path(made))
    rows = [Row("POST /sessions, cold (a container started for it)", cold)]
    if size:
        rows[:0] = [
            Row("POST /sessions, warm (the pool held one)", warm),
            Row(f"warm pool refilled to {size} after a warm create", refill, "background"),
        ]
    return rows


def measure_delete(http: httpx.Client, opts: Options) -> list[Row]:
    """``DELETE /sessions/{id}`` of a session that ran a call: answered once its sandbox is
    gone."""
    seconds = []
    for _ in range(opts.sessions):
        path = session_path(http.post("/sessions", json={}))
        timed(http, "POST", f"{path}/execute", {"code": TRIVIAL})
        seconds.append(timed(http, "DELETE", path)[0])
    return [Row("DELETE /sessions/{id} (sandbox gone)", seconds)]


def measure_calls(http: httpx.Client, opts: Options) -> list[Row]:
    """A trivial call in a session beside the same snippet one-shot, interleaved."""
    for _ in range(20):  # warm the one-shot path
        http.post("/execute", json={"code": TRIVIAL})
    path = session_path(http.post("/sessions", json={}))
    in_session, one_shot = [], []
    try:
        for _ in range(opts.calls):
            in_session.append(timed(http, "POST", f"{path}/execute", {"code": TRIVIAL})[0])
            one_shot.append(timed(http, "POST", "/execute", {"code": TRIVIAL})[0])
    finally:
        http.delete(path)
    return [
        Row("`print(1)` in a session", in_session),
        Row("`print(1)` one-shot /execute", one_shot),
    ]


def measure_sympy(http: httpx.Client, opts: Options) -> list[Row]:
    """``import sympy``: a session's first call (no zygote in a session), a later call that
    uses it, and one-shot (its preloaded zygote)."""
    first, later, one_shot = [], [], []
    sympy = {"code": SYMPY, "timeout": SLOW_CALL}
    for _ in range(opts.sessions):
        path = session_path(http.post("/sessions", json={"timeout": SLOW_CALL}))
        try:
            first.append(timed(http, "POST", f"{path}/execute", sympy)[0])
            again = {"code": "print(sympy.sqrt(8))"}
            later.append(timed(http, "POST", f"{path}/execute", again)[0])
        finally:
            http.delete(path)
        one_shot.append(timed(http, "POST", "/execute", sympy)[0])
    return [
        Row("`import sympy` first call of a session", first),
        Row("sympy call later in the session (kept)", later),
        Row("`import sympy` one-shot /execute (preloaded)", one_shot),
    ]


def fork_times(http: httpx.Client, mib: int, forks: int) -> list[float]:
    """Seconds of each fork of a session whose interpreter holds ``mib`` MiB (written, so
    resident); each fork is deleted before the next."""
    limits = {"memory_mb": mib + 256, "max_forks": 1, "timeout": SLOW_CALL}
    path = session_path(timed(http, "POST", "/sessions", limits)[1])
    fill = f"blob = bytearray({mib} << 20)\nfor i in range(0, len(blob), 4096): blob[i] = 1"
    seconds = []
    try:
        timed(http, "POST", f"{path}/execute", {"code": fill, "timeout": SLOW_CALL})
        for _ in range(forks):
            elapsed, made = timed(http, "POST", f"{path}/fork")
            seconds.append(elapsed)
            http.delete(session_path(made)).raise_for_status()
    finally:
        http.delete(path)
    return seconds


def measure_fork(http: httpx.Client, opts: Options) -> list[Row]:
    """``POST /sessions/{id}/fork`` by the size of the parent's interpreter."""
    return [
        Row(f"POST /sessions/{{id}}/fork, {mib} MiB interpreter", fork_times(http, mib, opts.forks))
        for mib in opts.fork_sizes
    ]


def measure_shell(http: httpx.Client, opts: Options) -> list[Row]:
    """A shell session's calls: a trivial one, and one that reads the state the call before it
    left (its working directory and a variable) and changes it."""
    path = session_path(timed(http, "POST", "/sessions", {"language": "bash"})[1])
    trivial, stateful = [], []
    try:
        timed(http, "POST", f"{path}/execute", {"code": "mkdir -p a; cd a; export N=0"})
        for _ in range(opts.calls):
            trivial.append(timed(http, "POST", f"{path}/execute", {"code": "echo 1"})[0])
            body = {"code": 'N=$((N + 1)); cd ../a; echo "$N $PWD"'}
            stateful.append(timed(http, "POST", f"{path}/execute", body)[0])
    finally:
        http.delete(path)
    return [
        Row("`echo 1` in a shell session", trivial),
        Row("shell call that reads and changes its state", stateful),
    ]


def measure_files(http: httpx.Client, opts: Options) -> list[Row]:
    """A 1 MiB file put into a session and got back (checked to be the bytes put)."""
    data = os.urandom(1 << 20)
    path = session_path(timed(http, "POST", "/sessions", {})[1])
    put, get = [], []
    try:
        for i in range(opts.files):
            name = f"{path}/files/bench/{i % 4}.bin"
            started = time.perf_counter()
            http.put(name, content=data).raise_for_status()
            put.append(time.perf_counter() - started)
            started = time.perf_counter()
            got = http.get(name)
            get.append(time.perf_counter() - started)
            got.raise_for_status()
            if got.content != data:
                raise RuntimeError(f"GET {name} answered other bytes than were put")
    finally:
        http.delete(path)
    return [
        Row("PUT a 1 MiB file into a session", put),
        Row("GET a 1 MiB file from a session", get),
    ]


MEASURES: list[Measure] = [
    measure_create,
    measure_delete,
    measure_calls,
    measure_sympy,
    measure_fork,
    measure_shell,
    measure_files,
]


# -- running -----------------------------------------------------------------------------
@contextmanager
def service_url(url: str | None) -> Iterator[str]:
    """``url``, or a service of this checkout started for the run (stopped after)."""
    if url:
        yield url
        return
    # the service's own default pool (test services start none: tests count containers)
    pool = str(Settings.model_fields["session_pool_size"].default)
    service = ServiceProcess(BOXED_SESSION_POOL_SIZE=pool).start()
    try:
        yield service.url
    finally:
        service.stop()


def table(rows: list[Row]) -> Table:
    out = Table(title="sessions: latency (ms), one request at a time")
    for column in ("measure", "n", "p50", "p90", "mean", "note"):
        out.add_column(column, justify="left" if column in ("measure", "note") else "right")
    for row in rows:
        ms = [s * 1000 for s in row.seconds]
        out.add_row(
            row.name,
            str(len(ms)),
            f"{pct(ms, 50):.1f}",
            f"{pct(ms, 90):.1f}",
            f"{statistics.mean(ms):.1f}",
            row.note,
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="a running service (default: start one on 127.0.0.1)")
    parser.add_argument("--sessions", type=int, default=20, help="sessions made per measure")
    parser.add_argument("--calls", type=int, default=200, help="calls of each kind")
    parser.add_argument("--forks", type=int, default=20, help="forks per interpreter size")
    parser.add_argument("--fork-sizes", default="10,100,500", help="interpreter sizes, MiB")
    parser.add_argument("--files", type=int, default=50, help="1 MiB files put and got")
    args = parser.parse_args()
    sizes = tuple(int(size) for size in args.fork_sizes.split(",") if size)
    opts = Options(args.sessions, args.calls, args.forks, sizes, args.files)
    rows: list[Row] = []
    try:
        with service_url(args.url) as url, httpx.Client(base_url=url, timeout=120) as http:
            for measure in MEASURES:
                rows += measure(http, opts)
    finally:  # what was measured before a failure is still shown
        if rows:
            Console().print(table(rows))


if __name__ == "__main__":
    main()
