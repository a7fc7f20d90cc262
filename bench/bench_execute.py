"""Latency and throughput of POST /execute (container mode) beside a plain `docker run --rm`.

    python bench/bench_execute.py [--requests N]

Starts its own service on a free loopback port (default settings), warms it, then measures a
trivial snippet at concurrency 1, 8 and 32, an `import sympy` snippet, and the same snippets as
one `docker run --rm` each with the same hardening flags. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.service import IMAGE, ServiceProcess  # noqa: E402

TRIVIAL = "print(1)"
SYMPY = "import sympy\nprint(sympy.sqrt(8))"
DOCKER_RUN = [
    "docker", "run", "--rm", "--network=none", "--read-only", "--cap-drop=ALL",
    "--security-opt=no-new-privileges", "--pids-limit=64", "--memory=256m",
    "--memory-swap=256m", "--cpus=1", "--init", "--ipc=none", "--user=10001:10001",
    "--tmpfs=/tmp:rw,noexec,nosuid,size=64m", "--log-driver=none", IMAGE, "python3", "-c",
]  # fmt: skip


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def row(name: str, latencies: list[float], elapsed: float) -> str:
    ms = [v * 1000 for v in latencies]
    return (
        f"| {name} | {len(ms)} | {pct(ms, 50):.1f} | {pct(ms, 99):.1f} | "
        f"{statistics.mean(ms):.1f} | {len(ms) / elapsed:.1f} |"
    )


async def service_run(url: str, code: str, n: int, concurrency: int) -> tuple[list[float], float]:
    latencies: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def one() -> None:
            async with gate:
                started = time.perf_counter()
                r = await client.post("/execute", json={"code": code})
                data = r.json()
                assert r.status_code == 200 and data["status"] == "ok", data
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return latencies, time.perf_counter() - started


def docker_run(code: str, n: int, concurrency: int) -> tuple[list[float], float]:
    def one(_: int) -> float:
        started = time.perf_counter()
        subprocess.run([*DOCKER_RUN, code], check=True, capture_output=True)
        return time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        latencies = list(pool.map(one, range(n)))
    return latencies, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=64, help="requests per concurrency level")
    parser.add_argument(
        "--preload", default=None, help="BOXED_PRELOAD for the service ('' = nothing preloaded)"
    )
    args = parser.parse_args()
    n = args.requests
    env = {} if args.preload is None else {"BOXED_PRELOAD": args.preload}
    service = ServiceProcess(**env).start()
    rows = []
    try:
        asyncio.run(service_run(service.url, TRIVIAL, 8, 4))  # warm-up
        for c in (1, 8, 32):
            lat, elapsed = asyncio.run(service_run(service.url, TRIVIAL, n, c))
            rows.append(row(f"boxed `print(1)` c={c}", lat, elapsed))
        lat, elapsed = asyncio.run(service_run(service.url, SYMPY, n // 2, 1))
        rows.append(row("boxed `import sympy` c=1", lat, elapsed))
    finally:
        service.stop()
    for c, count in ((1, n // 4), (8, n // 2)):
        lat, elapsed = docker_run(TRIVIAL, count, c)
        rows.append(row(f"`docker run --rm` `print(1)` c={c}", lat, elapsed))
    lat, elapsed = docker_run(SYMPY, n // 8, 1)
    rows.append(row("`docker run --rm` `import sympy` c=1", lat, elapsed))
    preload = "default (sympy,numpy)" if args.preload is None else repr(args.preload)
    print(f"\n{os.cpu_count()} CPUs; image {IMAGE}; pool 4, concurrency 8; preload {preload}\n")
    print("| what | requests | p50 ms | p99 ms | mean ms | per s |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
