"""boxed's snippet lane against the fork floor, side by side in one run (issue 33, items 1, 3, 4).

    python bench/bench_speed.py [--repeats 3] [--budget SECONDS] [--json FILE]
        [--boxed-env KEY=VALUE ...]

Each repeat measures, one after the other on the same machine:

(a) **The fork floor.** Two plain Python processes on the host: a server (``FLOOR_SERVER``, a
    bare ``python -I -c``) that forks a child per request, the child writing one line to the
    connection and exiting, the parent reaping it; and this process sending requests over a unix
    socket, 16 in flight, reading the line. Bare, and with sympy and numpy preloaded in the
    server (what boxed's heavy zygote holds). CPU per fork is the server's own time plus its
    reaped children's, from ``/proc/<pid>/stat``.
(b) **boxed**, ``python -m exec_server`` started fresh for the repeat with its defaults (process
    isolation) on 127.0.0.1: ``print(sum(range(100)))`` at 16 in flight with the lean load client
    (``RawClient``); boxed's CPU per snippet is the service process (``/proc``) plus the
    sandboxes' containers (their cgroup v1 ``cpuacct.usage``, sampled while they live); the
    engine's CPU over the phase is printed beside it (with the supervisor socket it is not on
    a snippet's path; other users of the machine's engine show in it), and so is the load
    client's. Then p50 at one in flight, and a burst of 256 in flight that must all be right.
(c) **A sympy mix** at 64 in flight (256 requests) right after (b) (so the heavy zygotes are
    cold, as after a stretch of plain snippets): half ``import sympy``, a quarter
    ``import numpy``, a quarter plain; p50 and p99 (target: p99 within 3x of p50).

Every answer is checked (HTTP 200 and the expected output). The machine is shared and noisy:
compare the ratios within a repeat; the table gives each repeat, the median and the spread.
Exits 0 whatever the figures (it reports, it does not judge).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
from bench_vs_old_server import (  # noqa: E402
    SUM,
    RawAnswer,
    RawClient,
    Server,
    parse_env,
    pct,
    start_boxed,
)
from proc_cpu import CpuSampler, quiet, read_stat  # noqa: E402

CPUACCT = Path("/sys/fs/cgroup/cpuacct/docker")  # cgroup v1, cgroupfs driver
CGROUP_V2 = Path("/sys/fs/cgroup/system.slice")  # cgroup v2, systemd driver: docker-<id>.scope
FLOOR_LINE = b"4950\n"
SYMPY = ("import sympy\nprint(sympy.factorint(360))", "{2: 3, 3: 2, 5: 1}\n")
NUMPY = ("import numpy\nprint(int(numpy.arange(10).sum()))", "45\n")
MIX = [SYMPY, NUMPY, SYMPY, SUM]  # half sympy, a quarter numpy, a quarter plain


# -- (a) the fork floor ------------------------------------------------------------------------


# The floor server, run as ``python -I -S -c FLOOR_SERVER PATH MODULES``: a plain interpreter
# holding nothing but what it imports here (a fork copies the page tables of all the parent
# holds: a server started as this bench, with httpx and rich loaded, would flatter boxed).
# Per request line it forks a child that writes one line to the connection and exits, and
# reaps it before the next. Prints "ready" once listening.
FLOOR_SERVER = """
import os, selectors, socket, sys
for module in filter(None, sys.argv[2].split(",")):
    __import__(module)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(512)
sel = selectors.DefaultSelector()
sel.register(listener, selectors.EVENT_READ)
print("ready", flush=True)
while True:
    for key, _ in sel.select():
        sock = key.fileobj
        if sock is listener:
            sel.register(listener.accept()[0], selectors.EVENT_READ)
            continue
        data = sock.recv(64)
        if not data:
            sel.unregister(sock)
            sock.close()
            continue
        for _ in range(data.count(b"\\n")):
            pid = os.fork()
            if pid == 0:
                try:
                    sock.sendall(b"4950\\n")
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
"""


@dataclass
class Floor:
    """One fork-floor phase: throughput and CPU per fork (server + reaped children)."""

    preload: str
    forks: int
    seconds: float
    per_second: float
    cpu_ms_per_fork: float
    client_cpu_ms: float


async def floor_phase(preload: list[str], concurrency: int, budget: float) -> Floor:
    """Start a floor server, load it ``budget`` s at ``concurrency`` in flight, stop it."""
    path = os.path.join(tempfile.mkdtemp(prefix="floor-"), "sock")
    args = [sys.executable, "-I", "-c", FLOOR_SERVER, path, ",".join(preload)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    try:
        streams = [await asyncio.open_unix_connection(path) for _ in range(concurrency)]
        for reader, writer in streams[:4]:  # warm: the first forks touch the heap
            writer.write(b"x\n")
            await reader.readline()
        before = read_stat(proc.pid)
        assert before is not None
        cpu0, forks = time.process_time(), 0
        started = time.perf_counter()
        deadline = started + budget

        async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal forks
            while time.perf_counter() < deadline:
                writer.write(b"x\n")
                if await reader.readline() != FLOOR_LINE:
                    raise RuntimeError("the floor server answered something else")
                forks += 1

        await asyncio.gather(*(worker(r, w) for r, w in streams))
        seconds = time.perf_counter() - started
        client_cpu = time.process_time() - cpu0
        after = read_stat(proc.pid)
        assert after is not None
        cpu = (after.own + after.children) - (before.own + before.children)
        for _, writer in streams:
            writer.close()
    finally:
        proc.kill()
        proc.wait()
    return Floor(
        "+".join(preload) or "bare",
        forks,
        seconds,
        forks / seconds,
        cpu * 1000 / forks,
        client_cpu * 1000 / forks,
    )


# -- (b) boxed's CPU: the service and its containers' cgroups ----------------------------------


def container_usage(cid: str) -> float | None:
    """A container's CPU seconds from its cgroup (v1 cpuacct or v2 cpu.stat), None if gone."""
    try:
        return int((CPUACCT / cid / "cpuacct.usage").read_text()) / 1e9
    except (OSError, ValueError):
        pass
    try:
        stat = (CGROUP_V2 / f"docker-{cid}.scope" / "cpu.stat").read_text()
        return int(stat.split()[1]) / 1e6  # usage_usec
    except (OSError, ValueError, IndexError):
        return None


def instance_containers(instance: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-q", "--no-trunc", "--filter", f"label=boxed.instance={instance}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


class CgroupSampler:
    """The CPU of one instance's containers over a window: each container's cgroup is read every
    ``interval`` s while it lives (the list from the engine every second); a container first
    seen mid-window counts from zero, one gone counts to its last reading (its tail is lost)."""

    def __init__(self, instance: str, interval: float = 0.2) -> None:
        self.instance, self.interval = instance, interval
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cgroups", daemon=True)

    def start(self) -> CgroupSampler:
        for cid in instance_containers(self.instance):
            if (usage := container_usage(cid)) is not None:
                self.first[cid] = self.last[cid] = usage
        self._thread.start()
        return self

    def stop(self) -> tuple[float, int]:
        """CPU seconds of the instance's containers in the window, and how many were seen."""
        self._stop.set()
        self._thread.join()
        self._read(list(self.last))
        return sum(self.last[c] - self.first.get(c, 0.0) for c in self.last), len(self.last)

    def _read(self, cids: list[str]) -> None:
        for cid in cids:
            if (usage := container_usage(cid)) is not None:
                self.last[cid] = usage
                self.first.setdefault(cid, 0.0)

    def _loop(self) -> None:
        cids, listed = list(self.last), 0.0
        while not self._stop.wait(self.interval):
            if time.monotonic() - listed > 1.0:
                cids, listed = instance_containers(self.instance), time.monotonic()
            self._read(cids)


@dataclass
class Boxed:
    """One repeat's boxed figures."""

    c16_per_second: float
    c16_snippets: int
    service_cpu_ms: float  # /proc, the service process
    sandbox_cgroups_cpu_ms: float  # the containers' cgroups
    sandbox_proc_cpu_ms: float  # the same seen from /proc (cross-check)
    engine_cpu_ms: float  # the engine's processes over the phase (shared with other users)
    client_cpu_ms: float
    containers: int
    c1_p50_ms: float | None
    c256_right: int
    c256_sent: int
    mix_p50_ms: float | None
    mix_p99_ms: float | None
    mix_right: int
    mix_sent: int
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def cpu_ms(self) -> float:
        """boxed's CPU per snippet: the service plus its sandboxes."""
        return self.service_cpu_ms + self.sandbox_cgroups_cpu_ms


async def send(
    client: RawClient, code: str, errors: dict[str, int]
) -> tuple[RawAnswer, float] | None:
    """One snippet until it is answered: a 429 is an honest "later", honoured after its
    Retry-After and counted; the answer and the ms of the answered attempt (None: no answer)."""
    while True:
        started = time.perf_counter()
        try:
            r = await client.post("/execute", json={"code": code, "input": ""})
        except (OSError, ValueError) as exc:
            key = f"no answer ({type(exc).__name__})"
            errors[key] = errors.get(key, 0) + 1
            return None
        if r.status_code != 429:
            return r, (time.perf_counter() - started) * 1000
        errors["429, retried"] = errors.get("429, retried", 0) + 1
        await asyncio.sleep(1.0)


async def load(
    client: RawClient,
    snippets: list[tuple[str, str]],
    concurrency: int,
    most: int,
    budget: float,
    errors: dict[str, int],
) -> tuple[list[float], int, float]:
    """``concurrency`` workers send ``snippets`` in turn until ``most`` are sent or ``budget`` s
    pass (the first burst always goes out whole). Latencies (ms) of the right answers, the count
    sent, the seconds taken; anything else counted in ``errors``."""
    latencies: list[float] = []
    sent = 0
    started = time.perf_counter()
    deadline = started + budget

    async def worker() -> None:
        nonlocal sent
        first = True
        while sent < most and (first or time.perf_counter() < deadline):
            first = False
            code, expected = snippets[sent % len(snippets)]
            sent += 1
            answer = await send(client, code, errors)
            if answer is None:
                continue
            r, took = answer
            if r.status_code != 200 or r.json().get("stdout") != expected:
                key = f"HTTP {r.status_code}" if r.status_code != 200 else "wrong output"
                errors[key] = errors.get(key, 0) + 1
                continue
            latencies.append(took)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, most))))
    return latencies, sent, time.perf_counter() - started


async def boxed_phases(server: Server, instance: str, budget: float) -> Boxed:
    errors: dict[str, int] = {}
    async with RawClient(server.url) as client:
        await load(client, [SUM], 16, 64, 30.0, errors)  # warm
        await quiet(server.classes, 20.0)
        procs = CpuSampler(server.classes).start()
        cgroups = CgroupSampler(instance).start()
        cpu0 = time.process_time()
        c16, sent16, seconds = await load(client, [SUM], 16, 100_000, budget, errors)
        client_cpu = time.process_time() - cpu0
        sandbox_cgroups, containers = cgroups.stop()
        account = procs.stop()
        per = 1000 / max(len(c16), 1)
        await quiet(server.classes, 20.0)
        c1, _, _ = await load(client, [SUM], 1, 2000, budget / 2, errors)
        await quiet(server.classes, 20.0)
        c256, sent256, _ = await load(client, [SUM], 256, 512, 1.0, errors)
        await quiet(server.classes, 20.0)
        mix, sent_mix, _ = await load(client, MIX, 64, 64 * 4, 120.0, errors)
    return Boxed(
        c16_per_second=len(c16) / seconds,
        c16_snippets=len(c16),
        service_cpu_ms=account.seconds.get("service", 0.0) * per,
        sandbox_cgroups_cpu_ms=sandbox_cgroups * per,
        sandbox_proc_cpu_ms=account.seconds.get("sandbox side", 0.0) * per,
        engine_cpu_ms=account.seconds.get("engine", 0.0) * per,
        client_cpu_ms=(client_cpu - account.sampler) * per,
        containers=containers,
        c1_p50_ms=pct(c1, 50),
        c256_right=len(c256),
        c256_sent=sent256,
        mix_p50_ms=pct(mix, 50),
        mix_p99_ms=pct(mix, 99),
        mix_right=len(mix),
        mix_sent=sent_mix,
        errors=errors,
    )


# -- one repeat, and the table -----------------------------------------------------------------


@dataclass
class Repeat:
    bare: Floor
    preloaded: Floor
    boxed: Boxed


async def one_repeat(extra: dict[str, str], budget: float) -> Repeat:
    bare = await floor_phase([], 16, budget / 2)
    preloaded = await floor_phase(["sympy", "numpy"], 16, budget / 2)
    service, server = start_boxed("boxed", extra)
    try:
        boxed = await boxed_phases(server, service.instance, budget)
    finally:
        service.stop()
    return Repeat(bare, preloaded, boxed)


def measures(r: Repeat) -> dict[str, float | None]:
    """The figures of one repeat, ratios included, by row name."""
    b = r.boxed
    ratio = (b.mix_p99_ms / b.mix_p50_ms) if b.mix_p50_ms and b.mix_p99_ms else None
    return {
        "floor bare: forks/s": r.bare.per_second,
        "floor bare: CPU ms/fork": r.bare.cpu_ms_per_fork,
        "floor sympy+numpy: forks/s": r.preloaded.per_second,
        "floor sympy+numpy: CPU ms/fork": r.preloaded.cpu_ms_per_fork,
        "floor: load client CPU ms/request": r.bare.client_cpu_ms,
        "boxed c=16: snippets/s": b.c16_per_second,
        "boxed: service CPU ms/snippet": b.service_cpu_ms,
        "boxed: sandboxes (cgroups) CPU ms/snippet": b.sandbox_cgroups_cpu_ms,
        "boxed: sandboxes (/proc) CPU ms/snippet": b.sandbox_proc_cpu_ms,
        "boxed: CPU ms/snippet (service + cgroups)": b.cpu_ms,
        "boxed: engine CPU ms/snippet (not on the path)": b.engine_cpu_ms,
        "boxed: load client CPU ms/request": b.client_cpu_ms,
        "ratio: boxed CPU / floor bare CPU (target <= 2)": b.cpu_ms / r.bare.cpu_ms_per_fork,
        "ratio: boxed CPU / floor preloaded CPU": b.cpu_ms / r.preloaded.cpu_ms_per_fork,
        "ratio: boxed snippets/s / floor bare forks/s": b.c16_per_second / r.bare.per_second,
        "boxed c=1: p50 ms (target <= 1.5)": b.c1_p50_ms,
        "boxed c=256: right / sent": b.c256_right / max(b.c256_sent, 1),
        "sympy mix c=64: p50 ms": b.mix_p50_ms,
        "sympy mix c=64: p99 ms": b.mix_p99_ms,
        "ratio: mix p99 / p50 (target <= 3)": ratio,
    }


def table(repeats: list[Repeat]) -> None:
    from rich.console import Console
    from rich.table import Table

    rows = [measures(r) for r in repeats]
    t = Table(title="boxed against the fork floor (each column one repeat, same run)")
    t.add_column("measure")
    for i in range(len(rows)):
        t.add_column(f"#{i + 1}", justify="right")
    t.add_column("median", justify="right")
    t.add_column("spread", justify="right")
    for name in rows[0]:
        values = [row[name] for row in rows]
        known = [v for v in values if v is not None]
        cells = ["-" if v is None else f"{v:.2f}" for v in values]
        median = f"{statistics.median(known):.2f}" if known else "-"
        spread = f"{min(known):.2f}-{max(known):.2f}" if known else "-"
        t.add_row(name, *cells, median, spread)
    Console(width=140).print(t)
    for i, r in enumerate(repeats, 1):
        b = r.boxed
        print(
            f"#{i}: c=16 {b.c16_snippets} snippets over {b.containers} containers; "
            f"c=256 {b.c256_right}/{b.c256_sent} right; mix {b.mix_right}/{b.mix_sent} right; "
            f"errors {b.errors or 'none'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="whole repeats (a)+(b)+(c)")
    parser.add_argument("--budget", type=float, default=10.0, help="seconds of the c=16 phase")
    parser.add_argument(
        "--boxed-env", action="append", default=[], metavar="KEY=VALUE", help="a BOXED_ setting"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    args = parser.parse_args()
    extra = parse_env(args.boxed_env)
    load_avg = os.getloadavg()
    repeats = []
    for i in range(args.repeats):
        repeats.append(asyncio.run(one_repeat(extra, args.budget)))
        print(f"repeat {i + 1} done", file=sys.stderr)
    print(
        f"{os.cpu_count()} CPUs; load average {load_avg[0]:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at the end; boxed settings: {extra or 'defaults'}"
    )
    table(repeats)
    if args.json:
        data: list[dict[str, Any]] = [{**asdict(r), "measures": measures(r)} for r in repeats]
        args.json.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
