"""Throughput of process isolation beside container isolation, the engine, `docker run` and a fork.

    python bench/bench_throughput.py [--budget SECONDS] [--json FILE]

Runs `print(1)` at concurrency 1 and 16 six ways and prints a markdown table (snippets/s,
p50/p99 latency, throughput relative to a naive `docker run`), then the issue's goals:

* process: POST /execute, BOXED_ISOLATION=process (pooled containers, a forked child each);
* container: POST /execute, BOXED_ISOLATION=container (a fresh warm container per snippet,
  sympy and numpy preloaded in it, the default);
* container, no preload: the same with BOXED_PRELOAD="" (the interpreter alone, as below);
* engine churn: what the engine itself sustains, the floor of any container per snippet:
  docker-py create, start, wait, remove of `python3 -c 'print(1)'` with exactly the sandbox's
  flags (``DockerBackend.host_options``), no service;
* docker run: one `docker run --rm` per snippet with the same hardening flags (the naive way);
* host fork: one bare host `python3 -c 'print(1)'` subprocess per snippet, no sandbox at all.

Services run with their default settings (pool 4, 8 snippets at once; a client at 16 queues
in the service). Each service is started on its own free loopback port, warmed, measured and
stopped before the next, so they do not share the machine's cores. Every measurement stops at
its request count or at ``--budget`` seconds, whichever comes first (the whole run takes about
five minutes here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
from bench_execute import DOCKER_RUN, pct  # noqa: E402

from exec_server.backends.docker import DockerBackend, _raw_socket  # noqa: E402
from exec_server.settings import Settings  # noqa: E402
from tests.service import IMAGE, ServiceProcess  # noqa: E402

CODE = "print(1)"
NO_PRELOAD = "container, no preload"
# (what, concurrency) -> most requests; the time budget usually ends the slow ones first.
REQUESTS = {
    ("process", 1): 400,
    ("process", 16): 1600,
    ("container", 1): 40,
    ("container", 16): 120,
    (NO_PRELOAD, 1): 40,
    (NO_PRELOAD, 16): 160,
    ("engine churn", 1): 40,
    ("engine churn", 16): 160,
    ("docker run", 1): 12,
    ("docker run", 16): 48,
    ("host fork", 1): 200,
    ("host fork", 16): 400,
}


@dataclass
class Row:
    what: str
    concurrency: int
    requests: int
    per_second: float
    p50_ms: float
    p99_ms: float


async def measure(
    what: str, concurrency: int, one: Callable[[], Awaitable[None]], budget: float
) -> Row:
    """Run ``one`` with ``concurrency`` workers until the request count or the budget runs out."""
    latencies: list[float] = []
    remaining = REQUESTS[(what, concurrency)]
    started = time.perf_counter()
    deadline = started + budget

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0 and time.perf_counter() < deadline:
            remaining -= 1
            t = time.perf_counter()
            await one()
            latencies.append(time.perf_counter() - t)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    ms = [v * 1000 for v in latencies]
    return Row(what, concurrency, len(ms), len(ms) / elapsed, pct(ms, 50), pct(ms, 99))


async def settled(client: httpx.AsyncClient, quiet: float = 3.0, limit: float = 60.0) -> None:
    """Wait until the number of ready containers has not changed for ``quiet`` seconds."""
    deadline = time.perf_counter() + limit
    last, since = None, time.perf_counter()
    while time.perf_counter() < deadline:
        ready = (await client.get("/readyz")).json()["pool_ready"]
        if ready != last:
            last, since = ready, time.perf_counter()
        elif time.perf_counter() - since >= quiet:
            return
        await asyncio.sleep(0.25)


async def bench_service(what: str, budget: float, **env: str) -> list[Row]:
    service = ServiceProcess(**env).start()
    try:
        limits = httpx.Limits(max_connections=16)
        async with httpx.AsyncClient(base_url=service.url, timeout=120, limits=limits) as client:

            async def one() -> None:
                r = await client.post("/execute", json={"code": CODE})
                data = r.json()
                assert r.status_code == 200 and data["stdout"] == "1\n", data

            # Warm-up: let the pool reach its size (and, in process mode, grow to the
            # concurrency), then let the warm-ups it started finish, so that they do not eat
            # the measured CPU.
            await asyncio.gather(*(one() for _ in range(32)))
            await settled(client)
            return [await measure(what, c, one, budget) for c in (1, 16)]
    finally:
        service.stop()


async def bench_engine(budget: float) -> list[Row]:
    """One container per snippet straight through the engine's API, reading its output."""
    sandboxes = DockerBackend(Settings(sandbox_image=IMAGE, instance="bench-engine"), reuse=False)
    api = sandboxes.api
    host_config = api.create_host_config(**sandboxes.host_options(256))

    def cycle() -> None:
        container = api.create_container(
            IMAGE,
            command=["python3", "-I", "-c", CODE],
            user=str(sandboxes.settings.sandbox_uid_range.first),
            labels=sandboxes.labels,
            network_disabled=True,
            host_config=host_config,
        )["Id"]
        try:
            params = {"stdout": 1, "stderr": 1, "stream": 1}
            sock = _raw_socket(api.attach_socket(container, params=params))
            with sock:
                api.start(container)
                output = b""
                while chunk := sock.recv(65536):
                    output += chunk
            assert output.endswith(b"1\n") and api.wait(container)["StatusCode"] == 0, output
        finally:
            api.remove_container(container, force=True)

    async def one() -> None:
        await asyncio.to_thread(cycle)

    return [await measure("engine churn", c, one, budget) for c in (1, 16)]


async def run_command(argv: list[str]) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0 and out == b"1\n", (argv[:3], out, err)


async def bench_commands(budget: float) -> list[Row]:
    rows = []
    for what, argv in (("docker run", [*DOCKER_RUN, CODE]), ("host fork", ["python3", "-c", CODE])):
        for c in (1, 16):
            rows.append(await measure(what, c, lambda argv=argv: run_command(argv), budget))
    return rows


def table(rows: list[Row]) -> str:
    naive = {r.concurrency: r.per_second for r in rows if r.what == "docker run"}
    lines = [
        "| what | concurrency | snippets | snippets/s | p50 ms | p99 ms | x docker run |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r.concurrency, -r.per_second)):
        lines.append(
            f"| {r.what} | {r.concurrency} | {r.requests} | {r.per_second:.1f} | "
            f"{r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.per_second / naive[r.concurrency]:.1f} |"
        )
    return "\n".join(lines)


def goals(rows: list[Row]) -> str:
    """The issue's goals, checked on this run's figures."""
    by = {(r.what, r.concurrency): r for r in rows}
    lines = []
    for c in (1, 16):
        ratio = by["process", c].per_second / by["docker run", c].per_second
        lines.append(f"process mode >= 15x docker run at c={c}: {ratio:.1f}x")
    lines.append(f"process mode p50 < 10 ms at c=1: {by['process', 1].p50_ms:.1f} ms")
    for c in (1, 16):
        share = by[NO_PRELOAD, c].per_second / by["engine churn", c].per_second
        lines.append(f"container mode (no preload) / engine churn at c={c}: {share:.0%}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=20.0, help="seconds per measurement")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    rows = asyncio.run(bench_service("process", args.budget, BOXED_ISOLATION="process"))
    rows += asyncio.run(bench_service("container", args.budget, BOXED_ISOLATION="container"))
    rows += asyncio.run(
        bench_service(NO_PRELOAD, args.budget, BOXED_ISOLATION="container", BOXED_PRELOAD="")
    )
    rows += asyncio.run(bench_engine(args.budget))
    rows += asyncio.run(bench_commands(args.budget))
    print(f"\n{os.cpu_count()} CPUs; image {IMAGE}; `{CODE}`; services with default settings\n")
    print(table(rows))
    print()
    print(goals(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))


if __name__ == "__main__":
    main()
