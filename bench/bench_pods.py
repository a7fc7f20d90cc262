"""Sandbox pods on the Docker stand-in (backend ``docker-pods``): the issue's three figures.

    python bench/bench_pods.py [--seconds S] [--json FILE]

* per pod: snippets/s one sandbox pod serves back to back (run, then its clean-up proof),
  through the backend itself (no HTTP), beside one Docker process-mode container;
* per node-sized pool: snippets/s of a real service (HTTP) whose pool holds as many pods as
  the machine has cores and runs that many at once, with 16 clients, beside process mode;
* replacement: from retiring a pod (delete) to a fresh one claimed and ready (the stand-in's
  container start, the listener, the hand-shake, the supervisor's warm-up). In a cluster add
  the scheduler and the kubelet (seconds), which is why pools are kept warm.

Snippet: ``print(1)``. Each figure stops at its count or after ``--seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from exec_server.backends import create_backend  # noqa: E402
from exec_server.backends.base import Job  # noqa: E402
from exec_server.settings import Settings, available_cores  # noqa: E402
from exec_server.verdict import RunLimits  # noqa: E402
from tests.service import IMAGE, ServiceProcess  # noqa: E402

CODE = "print(1)"
LIMITS = RunLimits(wall_seconds=5, cpu_seconds=5, memory_mb=256, output_bytes=65536)
REPLACEMENTS = 8


async def per_sandbox(backend_name: str, seconds: float, count: int = 400) -> dict[str, Any]:
    """One sandbox serving snippet after snippet, each proven clean before the next."""
    settings = Settings(instance=f"bench-{backend_name}", sandbox_image=IMAGE)
    backend = create_backend(backend_name, settings)
    sandbox = await backend.create_warm(LIMITS.memory_mb)
    try:
        done, started = 0, time.monotonic()
        while done < count and time.monotonic() - started < seconds:
            observation = await sandbox.run(Job(code=CODE, stdin="", limits=LIMITS))
            assert observation.stdout == b"1\n", observation
            assert await sandbox.settle(), "a print(1) must leave its sandbox clean"
            done += 1
        elapsed = time.monotonic() - started
    finally:
        await sandbox.discard()
        await backend.close()
    return {"snippets": done, "seconds": round(elapsed, 2), "per_s": round(done / elapsed, 1)}


async def replacement(seconds: float) -> dict[str, Any]:
    """Retire a pod, then claim a fresh one: the time a retired sandbox costs its pool."""
    settings = Settings(instance="bench-replace", sandbox_image=IMAGE)
    backend = create_backend("docker-pods", settings)
    times = []
    try:
        sandbox = await backend.create_warm(LIMITS.memory_mb)
        deadline = time.monotonic() + seconds
        while len(times) < REPLACEMENTS and time.monotonic() < deadline:
            started = time.monotonic()
            await sandbox.discard()
            sandbox = await backend.create_warm(LIMITS.memory_mb)
            times.append(time.monotonic() - started)
        await sandbox.discard()
    finally:
        await backend.close()
    return {
        "replacements": len(times),
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
    }


async def pool(env: dict[str, str], seconds: float, clients: int = 16) -> dict[str, Any]:
    cores = available_cores()
    service = ServiceProcess(
        BOXED_POOL_SIZE=str(cores),
        BOXED_MAX_CONCURRENCY=str(cores),
        BOXED_STRICT_POOL_SIZE="0",
        **env,
    )
    service.start()
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=60) as client:
            for _ in range(20):  # warm
                (await client.post("/execute", json={"code": CODE})).raise_for_status()
            done, stop = 0, time.monotonic() + seconds
            latencies: list[float] = []

            async def worker() -> None:
                nonlocal done
                while time.monotonic() < stop:
                    t = time.monotonic()
                    r = await client.post("/execute", json={"code": CODE})
                    assert r.status_code == 200 and r.json()["stdout"] == "1\n", r.text
                    latencies.append(time.monotonic() - t)
                    done += 1

            started = time.monotonic()
            await asyncio.gather(*(worker() for _ in range(clients)))
            elapsed = time.monotonic() - started
    finally:
        service.stop()
    latencies.sort()
    return {
        "pool": cores,
        "clients": clients,
        "snippets": done,
        "per_s": round(done / elapsed, 1),
        "p50_ms": round(1000 * latencies[len(latencies) // 2], 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    pods = {"BOXED_PROCESS_BACKEND": "docker-pods"}
    figures = {
        "per sandbox, pod": await per_sandbox("docker-pods", args.seconds),
        "per sandbox, docker-process": await per_sandbox("docker-process", args.seconds),
        "node-sized pool, pods": await pool(pods, args.seconds),
        "node-sized pool, docker-process": await pool({}, args.seconds),
        "replacement of a retired pod": await replacement(args.seconds * 3),
    }
    print(f"| {os.cpu_count()} cores | figures |\n|---|---|")
    for what, numbers in figures.items():
        print(f"| {what} | {', '.join(f'{k}={v}' for k, v in numbers.items())} |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
