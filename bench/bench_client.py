"""The Python client's own CPU per request: its connections in pools of 16 against one pool.

    python bench/bench_client.py [--requests 1024] [--concurrency 64] [--rounds 2]

Starts its own service (the tests' settings: pool 4) on a free loopback port, then sends
``print(sum(range(100)))`` through ``boxed_client.AsyncClient`` at the client's default
concurrency, alternating (in one run) the shipped pooling (``CONNECTIONS_PER_POOL``, 16) with
one pool holding every connection, as the client had before. Prints, per round and way, the
snippets per second and the client process's CPU per request (``time.process_time``): the
client shares the machine with the service, so its CPU is CPU the service lacks.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from boxed_client import AsyncClient  # noqa: E402
from boxed_client import base as client_base  # noqa: E402  (its pools read CONNECTIONS_PER_POOL)
from tests.service import ServiceProcess  # noqa: E402

SNIPPET, EXPECTED = "print(sum(range(100)))", "4950\n"


async def one_way(url: str, per_pool: int, requests: int, concurrency: int) -> tuple[float, float]:
    """(snippets per second, client CPU ms per request) with pools of ``per_pool``."""
    shipped = client_base.CONNECTIONS_PER_POOL
    client_base.CONNECTIONS_PER_POOL = per_pool
    try:
        client = AsyncClient(url, max_concurrency=concurrency)
    finally:
        client_base.CONNECTIONS_PER_POOL = shipped
    async with client:
        await asyncio.gather(*(client.execute(SNIPPET) for _ in range(concurrency)))  # connect
        cpu, wall = time.process_time(), time.perf_counter()
        answers = await asyncio.gather(*(client.execute(SNIPPET) for _ in range(requests)))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert all(a.status == "ok" and a.stdout == EXPECTED for a in answers)
    return requests / wall, cpu * 1000 / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=64, help="the client's default")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    shipped = client_base.CONNECTIONS_PER_POOL
    ways = {
        f"pools of {shipped} (shipped)": shipped,
        f"one pool of {args.concurrency}": args.concurrency,
    }
    service = ServiceProcess().start()
    try:
        print("| round | connections | snippets/s | client CPU ms per request |")
        print("|---|---|---|---|")
        for round_ in range(1, args.rounds + 1):
            for name, per_pool in ways.items():
                rate, cpu_ms = asyncio.run(
                    one_way(service.url, per_pool, args.requests, args.concurrency)
                )
                print(f"| {round_} | {name} | {rate:.1f} | {cpu_ms:.2f} |", flush=True)
    finally:
        service.stop()


if __name__ == "__main__":
    main()
