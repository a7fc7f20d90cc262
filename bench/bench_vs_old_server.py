"""boxed beside the old :5002 server, in one run, same client, same snippet: issue 11's targets.

    python bench/bench_vs_old_server.py [--budget SECONDS] [--quick] [--json FILE]
        [--boxed-env KEY=VALUE ...] [--runtime runsc] [--rounds N]

Two servers on free loopback ports, both up for the whole run, loaded one after the other, each
warmed first:

* old server: ``bench/old_server.py`` (Flask dev server, threaded; ``subprocess.run(["python",
  file])`` per snippet, no isolation at all) run by a venv that holds only flask, made on first
  use under ``~/.cache/boxed-bench/old-venv``;
* boxed: ``python -m exec_server`` with its defaults: no ``BOXED_*`` setting but its instance
  label (inherited ones are dropped), plus ``--boxed-env`` and ``--runtime`` if given.

One load client (httpx.AsyncClients with keep-alive, at most 16 connections each: one pool of
256 costs the client 7-10 ms of CPU per request here, which the 2 cores then lack; see
``SpreadClient``) with C workers sends ``print(sum(range(100)))`` at C = 1, 16, 64 and 256;
every answer is checked (HTTP 200 and ``4950\\n`` as the output) and anything else is counted
by kind. On boxed, ``print(1)`` and an
``import sympy`` snippet also run at C = 1. A phase ends at its request count or after
``--budget`` seconds (no new request starts after it but the first C, a whole burst; the ones
in flight finish), and starts once the server and its sandboxes have gone quiet. During the
C = 16 phase /proc is sampled (bench/proc_cpu.py) to split CPU per snippet by process class.
Then ``--rounds`` (3) more C = 16 phases per server and load client, the servers taking turns,
whose median ratios are the headline throughput figures (the machine's other users weigh on
adjacent phases alike): with httpx, and with ``RawClient``, a lean HTTP/1.1 client whose CPU
leaves more of the 2 cores to the servers (see its docstring and docs/bench-old-server.md).
Prints markdown tables and the issue's ratios; ``--json`` writes everything. Exits 0 whatever
the figures: it reports, it does not judge (a non-zero exit means the bench itself broke).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from json import dumps as _json_dumps
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
from proc_cpu import (  # noqa: E402
    ATTRIBUTED,
    OTHER_CONTAINERS,
    Account,
    Classes,
    CpuSampler,
    quiet,
)

from tests.service import ServiceProcess, free_port  # noqa: E402

SUM = ("print(sum(range(100)))", "4950\n")
PRINT1 = ("print(1)", "1\n")
SYMPY = ("import sympy; print(sympy.Integer(2)**10)", "1024\n")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "boxed-bench"
OLD_VENV = CACHE / "old-venv"
OLD = "old server"
CPU_CONCURRENCY = 16
CLIENT_TIMEOUT = 120.0
# (name, snippet, concurrency, most requests): the budget usually ends the slow ones first
SUM_PHASES = [
    ("sum", SUM, 1, 3000),
    ("sum", SUM, 16, 10000),
    ("sum", SUM, 64, 64 * 8),
    ("sum", SUM, 256, 256 * 4),
]
SYMPY_PHASES = [("print(1)", PRINT1, 1, 3000), ("import sympy", SYMPY, 1, 3000)]
# The load client's connections, for every phase and round alike (SpreadClient: pools of 16,
# taken in turn): at concurrency 16 one pool of 16 cost the client 1.8-2.4 ms of CPU per
# request against 1.3-1.6 ms for sixteen pools, which the 2 cores then lack.
CLIENT_CONNECTIONS = max(c for _, _, c, _ in SUM_PHASES)
# The alternating rounds run with each (see alternate): httpx (SpreadClient), as the phases do,
# and the lean RawClient, whose CPU leaves more of the 2 cores to the servers.
CLIENT_KINDS = ("httpx", "raw")


@dataclass
class Phase:
    server: str
    phase: str
    concurrency: int
    sent: int
    ok: int  # 200 with the right output
    seconds: float
    per_second: float  # right answers per second
    p50_ms: float | None  # over the right answers
    p99_ms: float | None
    errors: dict[str, int] = field(default_factory=dict)
    wrong_samples: list[str] = field(default_factory=list)
    cpu: dict[str, Any] | None = None
    client: str = "httpx"  # the load client (CLIENT_KINDS)
    client_cpu_ms: float | None = None  # its CPU per request (the rounds, where nothing else runs)


@dataclass
class Server:
    name: str
    url: str
    output_field: str  # where the snippet's stdout is in the answer
    classes: Classes  # its processes' classes, for the CPU account


@dataclass
class Plan:
    budget: float  # seconds per phase
    quiet: float  # most seconds to wait for quiet before a phase
    warm: int  # warm-up snippets
    quick: bool  # one burst at C = 64 and 256, quiet only before the CPU phase
    rounds: int  # alternating C = 16 rounds after the phases (see ``alternate``)

    def requests(self, concurrency: int, most: int) -> int:
        return {64: 64, 256: 256}.get(concurrency, most) if self.quick else most


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


# -- the two servers ---------------------------------------------------------------------------


def old_python() -> Path:
    """The old server's venv (only flask in it), made on first use."""
    python = OLD_VENV / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import flask"]).returncode == 0:
        return python
    print(f"making the old server's venv in {OLD_VENV} (once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", OLD_VENV], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "flask"], check=True)
    return python


class OldServer:
    """bench/old_server.py on a free loopback port, ``python`` on its PATH being the venv's."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = Path(tempfile.gettempdir()) / f"old-server-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> OldServer:
        python = old_python()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env["PATH"] = f"{OLD_VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(OLD_VENV)
        self.proc = subprocess.Popen(
            [python, HERE / "old_server.py", "--port", str(self.port)],
            cwd=tempfile.gettempdir(),
            env=env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                httpx.get(self.url, timeout=2)  # any answer (404) means it listens
                return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise TimeoutError(f"old server not up in {timeout} s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.unlink(missing_ok=True)


def boxed_service(extra: dict[str, str]) -> tuple[ServiceProcess, list[str]]:
    """A ServiceProcess with boxed's defaults: only its instance label and ``extra`` are set."""
    service = ServiceProcess(**extra)
    service.env = {  # drops what it sets for tests (pool size, image) and what we inherited
        k: v
        for k, v in service.env.items()
        if not k.startswith("BOXED_") or k == "BOXED_INSTANCE" or k in extra
    }
    return service, sorted(k for k in os.environ if k.startswith("BOXED_") and k not in extra)


# -- the client --------------------------------------------------------------------------------


class SpreadClient:
    """The load client: requests go round robin over httpx clients of ``per_pool`` connections.

    httpcore's pool does work in proportion to its connections on every request: measured here
    at 256 in flight, one pool of 256 connections cost the client 7.2-9.8 ms of CPU per request
    against 1.4-1.6 ms for sixteen pools of 16 (and a service at 88-113 snippets/s against
    248/s), the same for every server."""

    def __init__(self, base_url: str, connections: int, per_pool: int = 16) -> None:
        limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
        self.clients = [
            httpx.AsyncClient(base_url=base_url, timeout=CLIENT_TIMEOUT, limits=limits)
            for _ in range(-(-connections // per_pool))
        ]
        self._next = 0

    async def post(self, path: str, **kwargs: Any) -> httpx.Response:
        self._next = (self._next + 1) % len(self.clients)
        return await self.clients[self._next].post(path, **kwargs)

    async def __aenter__(self) -> SpreadClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.gather(*(c.aclose() for c in self.clients))


@dataclass
class RawAnswer:
    """What ``RawClient.post`` answers: the parts of an httpx.Response that ``run_phase`` reads."""

    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class _Connection(asyncio.Protocol):
    """One keep-alive connection of ``RawClient``: an answer is whole once its head and
    ``Content-Length`` bytes of body are in (the status line and that header are parsed, and
    ``Connection``; nothing else)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[RawAnswer] | None = None
        self.close_after = False  # the server said it closes this connection
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._answer()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionResetError("the server closed the connection"))

    def send(self, data: bytes) -> asyncio.Future[RawAnswer]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.waiter

    def _answer(self) -> None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None or self.waiter.done():
            return
        lines = bytes(self.buffer[:end]).split(b"\r\n")
        status, length = int(lines[0].split()[1]), 0
        self.close_after = not lines[0].startswith(b"HTTP/1.1")
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection":
                self.close_after = value.strip().lower() == b"close"
            elif name == b"transfer-encoding":
                self.waiter.set_exception(ValueError("chunked answers are not read here"))
                return
        if len(self.buffer) < end + 4 + length:
            return  # the rest of the body is still coming
        content = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        self.waiter.set_result(RawAnswer(status, content))


class RawClient:
    """The lean load client: HTTP/1.1 on asyncio protocols, a connection kept alive per request
    in flight (a new one when the server answers ``Connection: close``, as the old server's
    Werkzeug does every time), the status line and ``Content-Length`` parsed, nothing else.

    Both servers share the 2 cores with the load client, while in training the client is the
    trainer's, on other machines: what the client costs here is taken from the servers, and
    more from the faster one. httpx costs 1.3-2.1 ms of CPU per request here; this client less
    (the bench prints the client's CPU per request in each round, for both)."""

    def __init__(self, base_url: str) -> None:
        url = httpx.URL(base_url)
        self.host, self.port = url.host, url.port or 80
        self.idle: list[_Connection] = []
        self.head = f"Host: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"

    async def post(self, path: str, *, json: Any) -> RawAnswer:
        body = _json_dumps(json).encode()
        request = f"POST {path} HTTP/1.1\r\n{self.head}Content-Length: {len(body)}\r\n\r\n"
        while self.idle and self.idle[-1].lost:
            self.idle.pop()  # closed by the server while idle
        connection = self.idle.pop() if self.idle else await self._connect()
        try:
            answer = await connection.send(request.encode() + body)
        except BaseException:
            if connection.transport is not None:
                connection.transport.close()
            raise
        if connection.close_after or connection.lost:
            assert connection.transport is not None
            connection.transport.close()
        else:
            self.idle.append(connection)
        return answer

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(_Connection, self.host, self.port)
        return connection

    async def __aenter__(self) -> RawClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for connection in self.idle:
            if connection.transport is not None:
                connection.transport.close()
        self.idle.clear()


LoadClient = SpreadClient | RawClient
# what a request of the load client can fail with (counted, never raised)
CLIENT_ERRORS = (httpx.HTTPError, OSError, ValueError)


async def run_phase(
    client: LoadClient,
    server: Server,
    name: str,
    snippet: tuple[str, str],
    concurrency: int,
    most: int,
    budget: float,
) -> Phase:
    """Send up to ``most`` snippets, ``concurrency`` at once; after ``budget`` s start no more
    (but the first ``concurrency``: a burst at C = 256 is 256 requests in flight). One worker
    per request in flight, each sending its next request when its answer is in: ``most``
    tasks waiting at a semaphore would cost the load client more than its requests."""
    code, expected = snippet
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    wrong: list[str] = []
    sent = 0
    started = time.perf_counter()
    deadline = started + budget

    async def one() -> None:
        t = time.perf_counter()
        try:
            r = await client.post("/execute", json={"code": code, "input": ""})
        except CLIENT_ERRORS as exc:
            errors[f"no answer ({type(exc).__name__})"] += 1
            return
        took = time.perf_counter() - t
        if r.status_code != 200:
            errors[f"HTTP {r.status_code}"] += 1
            return
        try:
            output = r.json().get(server.output_field)
        except ValueError:
            output = None
        if output != expected:
            errors["wrong output"] += 1
            if len(wrong) < 3:
                wrong.append(r.text[:200])
            return
        latencies.append(took)

    async def worker() -> None:
        nonlocal sent
        first = True  # the first burst always goes out whole
        while sent < most and (first or time.perf_counter() < deadline):
            first = False
            sent += 1
            await one()

    await asyncio.gather(*(worker() for _ in range(min(concurrency, most))))
    seconds = time.perf_counter() - started
    ms = [v * 1000 for v in latencies]
    return Phase(
        server=server.name,
        phase=name,
        concurrency=concurrency,
        sent=sent,
        ok=len(ms),
        seconds=seconds,
        per_second=len(ms) / seconds,
        p50_ms=pct(ms, 50),
        p99_ms=pct(ms, 99),
        errors=dict(errors),
        wrong_samples=wrong,
    )


def cpu_figures(account: Account, snippets: int) -> dict[str, Any]:
    """The account as milliseconds per snippet."""
    per = 1000 / max(snippets, 1)
    return {
        "snippets": snippets,
        "ms_per_snippet": {k: v * per for k, v in sorted(account.seconds.items())},
        "attributed_ms": sum(account.seconds.get(c, 0.0) for c in ATTRIBUTED) * per,
        "unexplained_ms": account.unexplained() * per,
        "sampler_ms": account.sampler * per,
        "machine_busy_ms": account.machine_busy * per,
        "docker_cgroups_ms": None
        if account.docker_cgroups is None
        else account.docker_cgroups * per,
        "scans": account.scans,
        "containers_not_identified": account.unknown_containers,
    }


async def bench_server(server: Server, plan: Plan) -> list[Phase]:
    phases = SUM_PHASES + (SYMPY_PHASES if server.name != OLD else [])
    rows = []
    async with SpreadClient(server.url, CLIENT_CONNECTIONS) as c:
        warm = await run_phase(c, server, "warm-up", SUM, 16, plan.warm, 30.0)
        print(f"{server.name}: warmed ({warm.ok}/{warm.sent} right)", file=sys.stderr)
        for name, snippet, concurrency, most in phases:
            cpu_phase = name == "sum" and concurrency == CPU_CONCURRENCY
            waited = await quiet(server.classes, plan.quiet) if cpu_phase or not plan.quick else 0.0
            most = plan.requests(concurrency, most)
            sampler = CpuSampler(server.classes).start() if cpu_phase else None
            row = await run_phase(c, server, name, snippet, concurrency, most, plan.budget)
            if sampler is not None:
                row.cpu = cpu_figures(sampler.stop(), row.ok)
            rows.append(row)
            print(
                f"{server.name}: {name} c={concurrency}: {row.ok}/{row.sent} right, "
                f"{row.per_second:.1f}/s, errors {row.errors} (quiet after {waited:.1f} s)",
                file=sys.stderr,
            )
    return rows


def start_old() -> tuple[OldServer, Server]:
    old = OldServer().start()
    assert old.proc is not None
    return old, Server(OLD, old.url, "output", Classes(old.proc.pid, "sandbox side", None))


def start_boxed(name: str, extra: dict[str, str]) -> tuple[ServiceProcess, Server]:
    service, dropped = boxed_service(extra)
    if dropped:
        print(
            f"boxed: ignoring inherited {', '.join(dropped)} (defaults measured)", file=sys.stderr
        )
    service.start(ready_timeout=180)
    assert service.proc is not None
    classes = Classes(service.proc.pid, "service", service.instance)
    return service, Server(name, service.url, "stdout", classes)


def load_client(kind: str, url: str) -> LoadClient:
    return SpreadClient(url, CLIENT_CONNECTIONS) if kind == "httpx" else RawClient(url)


async def alternate(servers: list[Server], plan: Plan) -> list[Phase]:
    """The C = 16 phase again, ``plan.rounds`` times, with each load client (CLIENT_KINDS), the
    servers taking turns: each round's two phases are minutes closer together than the
    sequential ones, so the machine's other users weigh on both alike (their load moves within
    a run: see the load averages). This process is the load client, and nothing else of it
    runs during a round: its CPU time per request is the client's."""
    rows = []
    clients = {(kind, s.name): load_client(kind, s.url) for kind in CLIENT_KINDS for s in servers}
    try:
        for round_ in range(1, plan.rounds + 1):
            for kind in CLIENT_KINDS:
                for server in servers:
                    await quiet(server.classes, plan.quiet)
                    cpu = time.process_time()
                    row = await run_phase(
                        clients[kind, server.name],
                        server,
                        f"sum, round {round_}, {kind} client",
                        SUM,
                        CPU_CONCURRENCY,
                        10000,
                        plan.budget,
                    )
                    row.client = kind
                    row.client_cpu_ms = (time.process_time() - cpu) * 1000 / max(row.sent, 1)
                    rows.append(row)
                    print(
                        f"{server.name}: round {round_}, {kind} client: {row.ok}/{row.sent} "
                        f"right, {row.per_second:.1f}/s, client CPU {row.client_cpu_ms:.2f} "
                        "ms/request",
                        file=sys.stderr,
                    )
    finally:
        await asyncio.gather(*(c.__aexit__() for c in clients.values()))
    return rows


# -- report ------------------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def errors_text(row: Phase) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(row.errors.items())) or "0"


def phase_table(rows: list[Phase]) -> str:
    lines = [
        "| server | phase | concurrency | sent | right | snippets/s | p50 ms | p99 ms | errors "
        "| client CPU ms/request |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.server} | {r.phase} | {r.concurrency} | {r.sent} | {r.ok} | "
            f"{r.per_second:.1f} | {fmt(r.p50_ms)} | {fmt(r.p99_ms)} | {errors_text(r)} | "
            f"{fmt(r.client_cpu_ms, 2)} |"
        )
    return "\n".join(lines)


def cpu_table(row: Phase) -> str:
    cpu = row.cpu
    assert cpu is not None
    ms = cpu["ms_per_snippet"]
    lines = [
        f"CPU per snippet, {row.server}, `{SUM[0]}` at concurrency {row.concurrency} "
        f"({cpu['snippets']} snippets, {row.seconds:.1f} s, {cpu['scans']} /proc scans):",
        "",
        "| class | CPU ms per snippet |",
        "|---|---|",
    ]
    for cls in ATTRIBUTED:
        lines.append(f"| {cls} | {ms.get(cls, 0.0):.2f} |")
    lines.append(f"| **attributed** | **{cpu['attributed_ms']:.2f}** |")
    for cls in sorted(set(ms) - set(ATTRIBUTED)):
        lines.append(f"| not attributed: {cls} | {ms[cls]:.2f} |")
    lines.append(
        f"| not attributed: lost (after a process's last sighting, reaped by an unsampled "
        f"parent, irq) | {cpu['unexplained_ms']:.2f} |"
    )
    lines.append(f"| the /proc sampler itself (this bench) | {cpu['sampler_ms']:.2f} |")
    lines.append(f"| machine busy, all CPUs (/proc/stat) | {cpu['machine_busy_ms']:.2f} |")
    if ms.get(OTHER_CONTAINERS, 0.0) > 0:
        lines.append(
            "\nOther instances' containers ran meanwhile: the engine and kernel lines include "
            "work done for them (the engine is shared)."
        )
    if cpu["docker_cgroups_ms"] is not None:
        ours = row.server != OLD  # boxed's sandbox side is in containers, the old one's is not
        side = ms.get("sandbox side", 0.0) * ours + ms.get(OTHER_CONTAINERS, 0.0)
        lines.append(
            f"\nCross-check: every Docker container's cgroup (cpuacct, removed ones included) "
            f"{cpu['docker_cgroups_ms']:.2f} ms/snippet; "
            f"{'sandbox side + ' if ours else ''}other instances' containers by /proc {side:.2f}."
        )
    if cpu["containers_not_identified"]:
        lines.append(
            f"{cpu['containers_not_identified']} containers' labels could not be read (another "
            "engine's, or gone already): counted as other instances' (ours are read while they "
            "live)."
        )
    return "\n".join(lines)


def ratios(rows: list[Phase], boxed: str) -> dict[str, Any]:
    by = {(r.server, r.phase, r.concurrency): r for r in rows}

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or not b else a / b

    rounds = {
        kind: sorted(
            ratio(by[boxed, r.phase, 16].per_second, r.per_second) or 0.0
            for r in rows
            if r.server == OLD and r.phase.startswith("sum, round") and r.client == kind
        )
        for kind in CLIENT_KINDS
    }
    client_cpu = {
        kind: [r.client_cpu_ms for r in rows if r.client_cpu_ms is not None and r.client == kind]
        for kind in CLIENT_KINDS
    }
    out: dict[str, Any] = {
        "throughput_c16_boxed_over_old": ratio(
            by[boxed, "sum", 16].per_second, by[OLD, "sum", 16].per_second
        ),
        "throughput_c16_rounds": rounds,
        "throughput_c16_rounds_median": {
            kind: values[len(values) // 2] if values else None for kind, values in rounds.items()
        },
        "client_cpu_ms_per_request": {
            kind: [min(v), max(v)] if v else None for kind, v in client_cpu.items()
        },
        "p50_c1_boxed_over_old": ratio(by[boxed, "sum", 1].p50_ms, by[OLD, "sum", 1].p50_ms),
        "sympy_p50_over_print1_p50": ratio(
            by[boxed, "import sympy", 1].p50_ms, by[boxed, "print(1)", 1].p50_ms
        ),
    }
    for c in (64, 256):
        for server in (boxed, OLD):
            r = by[server, "sum", c]
            out[f"all_right_c{c}_{'boxed' if server == boxed else 'old'}"] = {
                "all_right": r.sent > 0 and r.ok == r.sent,
                "sent": r.sent,
                "right": r.ok,
                "errors": r.errors,
            }
    return out


def ratios_text(out: dict[str, Any]) -> str:
    def x(v: float | None, digits: int = 2) -> str:
        return "n/a" if v is None else f"{v:.{digits}f}"

    lines = [
        f"- boxed / old throughput at c=16: {x(out['throughput_c16_boxed_over_old'])}x in the "
        "phases above (httpx client)"
    ]
    for kind in CLIENT_KINDS:
        rounds = ", ".join(f"{v:.2f}x" for v in out["throughput_c16_rounds"][kind]) or "none"
        cpu = out["client_cpu_ms_per_request"][kind]
        cpu_text = f"{cpu[0]:.2f}-{cpu[1]:.2f}" if cpu else "n/a"
        lines.append(
            f"- the median of the alternating rounds with the {kind} client: "
            f"{x(out['throughput_c16_rounds_median'][kind])}x ({rounds}; the client's CPU "
            f"{cpu_text} ms per request) (target >= 2.5x)"
        )
    lines += [
        f"- boxed p50 / old p50 at c=1: {x(out['p50_c1_boxed_over_old'])} (target <= 0.40)",
    ]
    for c in (64, 256):
        for who in ("boxed", "old"):
            r = out[f"all_right_c{c}_{who}"]
            errs = ", ".join(f"{n} {k}" for k, n in sorted(r["errors"].items())) or "no errors"
            verdict = "yes" if r["all_right"] else "no"
            lines.append(
                f"- c={c}, {who}: every request 200 with the right output: {verdict} "
                f"({r['right']}/{r['sent']}; {errs})"
            )
    lines.append(
        f"- boxed `import sympy` p50 / `print(1)` p50 at c=1: "
        f"{x(out['sympy_p50_over_print1_p50'])} (target <= 2.0)"
    )
    return "\n".join(lines)


def parse_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.startswith("BOXED_"):
            raise SystemExit(f"--boxed-env wants BOXED_KEY=VALUE, got {pair!r}")
        env[key] = value
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=15.0, help="seconds per phase")
    parser.add_argument("--quick", action="store_true", help="tiny budgets: a check in < 60 s")
    parser.add_argument(
        "--boxed-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a BOXED_ setting for boxed (repeatable)",
    )
    parser.add_argument("--runtime", default=None, help="BOXED_RUNTIME for boxed, e.g. runsc")
    parser.add_argument("--json", type=Path, default=None, help="also write everything here")
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating C = 16 rounds after the phases"
    )
    args = parser.parse_args()
    extra = parse_env(args.boxed_env)
    if args.runtime:
        extra["BOXED_RUNTIME"] = args.runtime
    if args.quick:
        plan = Plan(budget=min(args.budget, 1.0), quiet=1.0, warm=16, quick=True, rounds=1)
    else:
        plan = Plan(budget=args.budget, quiet=20.0, warm=64, quick=False, rounds=args.rounds)
    boxed = "boxed (" + (" ".join(f"{k}={v}" for k, v in extra.items()) or "defaults") + ")"
    load = os.getloadavg()
    started = time.monotonic()
    old, old_server = start_old()
    try:
        service, boxed_server = start_boxed(boxed, extra)
        try:
            rows = asyncio.run(bench_server(old_server, plan))
            rows += asyncio.run(bench_server(boxed_server, plan))
            rows += asyncio.run(alternate([old_server, boxed_server], plan))
        finally:
            service.stop()
    finally:
        old.stop()
    out = ratios(rows, boxed)
    print(
        f"\n{os.cpu_count()} CPUs, load average {load[0]:.2f} at start and "
        f"{os.getloadavg()[0]:.2f} at the end (other users of the machine show here), "
        f"{time.monotonic() - started:.0f} s in all; budget {plan.budget:g} s per phase\n"
    )
    print(phase_table(rows))
    for row in rows:
        if row.cpu is not None:
            print()
            print(cpu_table(row))
    print("\nTargets (issue 11):\n")
    print(ratios_text(out))
    if args.json:
        report = {
            "machine": {
                "cpus": os.cpu_count(),
                "loadavg_at_start": load,
                "loadavg_at_end": os.getloadavg(),
                "platform": platform.platform(),
                "python": platform.python_version(),
            },
            "plan": asdict(plan),
            "boxed_env": extra,
            "boxed": boxed,
            "phases": [asdict(r) for r in rows],
            "ratios": out,
        }
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
