"""Code-RL judging throughput: POST /judge against one /run_code call per test (the way verl's
SandboxFusion client does it), in the same run, for C++ and Python; and the result cache on a
GRPO-shaped batch (16 completions per problem, half of them identical).

    python bench/bench_judge.py [--problems 100] [--tests 10] [--rounds 5]
                                [--languages cpp,python] [--cpu]

Starts its own service on a free loopback port (pool 2). Every problem has its own program
(so neither way gets a cache hit), ten stdin/stdout tests and a correct solution; both ways
must find every test passed. Each round runs both ways, one after the other, taking turns at
going first (the machine is shared: a ratio of two runs minutes apart says little); the table
shows every round's speed-up and their median. ``--cpu`` adds the CPU milliseconds per test by
process class (``proc_cpu.py``) for each way and round.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from proc_cpu import ATTRIBUTED, Classes, CpuSampler, quiet  # noqa: E402

from tests.service import ServiceProcess  # noqa: E402

CONCURRENCY = 4
JUDGE, KEPT, FRESH = "/judge", "/run_code", "/run_code, a connection per call"
QUIET_LIMIT = 30.0  # longest wait for the service to go idle before a phase
CPP = """#include <iostream>
int main() {{ long long n, x, s = 0; std::cin >> n;
  for (long long i = 0; i < n; ++i) {{ std::cin >> x; s += x * {k}; }}
  std::cout << s << "\\n"; }}
"""
PYTHON = "n, *xs = map(int, open(0).read().split())\nprint(sum(x * {k} for x in xs[:n]))\n"


def problem(k: int, tests: int) -> list[dict[str, str]]:
    cases = []
    for t in range(tests):
        xs = [(k * 31 + t * 7 + i) % 1000 for i in range(20 + t)]
        cases.append(
            {
                "input": f"{len(xs)}\n{' '.join(map(str, xs))}\n",
                "expected_output": f"{sum(x * k for x in xs)}\n",
            }
        )
    return cases


async def gather_limited(jobs: list, concurrency: int = CONCURRENCY) -> list:
    gate = asyncio.Semaphore(concurrency)

    async def one(job):  # type: ignore[no-untyped-def]
        async with gate:
            return await job

    return await asyncio.gather(*(one(j) for j in jobs))


async def by_judge(client: httpx.AsyncClient, language: str, codes: list, suites: list) -> float:
    started = time.perf_counter()
    answers = await gather_limited(
        [
            client.post("/judge", json={"code": c, "language": language, "tests": s})
            for c, s in zip(codes, suites, strict=True)
        ]
    )
    elapsed = time.perf_counter() - started
    verdicts = [a.json()["verdict"] for a in answers]
    assert verdicts == ["accepted"] * len(codes), verdicts
    return elapsed


def run_code_body(code: str, language: str, stdin: str) -> dict:
    """What verl's SandboxFusion client sends for one test case (``call_sandbox_api``)."""
    return {
        "compile_timeout": 10,
        "run_timeout": 10,
        "code": code,
        "stdin": stdin,
        "language": language,
        "files": {},
        "fetch_files": [],
    }


async def by_run_code(client: httpx.AsyncClient, language: str, codes: list, suites: list) -> float:
    started = time.perf_counter()
    jobs = [
        client.post("/run_code", json=run_code_body(c, language, t["input"]))
        for c, s in zip(codes, suites, strict=True)
        for t in s
    ]
    answers = await gather_limited(jobs)
    elapsed = time.perf_counter() - started
    expected = [t["expected_output"] for s in suites for t in s]
    got = [a.json()["run_result"]["stdout"] for a in answers]
    assert got == expected
    return elapsed


async def grpo(client: httpx.AsyncClient, problems: int, cache: bool) -> tuple[float, int]:
    """16 completions per problem, 8 of them the same program; the rest distinct."""
    bodies = []
    for k in range(problems):
        tests = problem(k + 1, 10)
        same = PYTHON.format(k=k + 1)
        distinct = [PYTHON.format(k=k + 1) + f"# variant {v}\n" for v in range(8)]
        for code in [same] * 8 + distinct:
            bodies.append({"code": code, "tests": tests, "cache": cache})
    started = time.perf_counter()
    answers = await gather_limited([client.post("/judge", json=b) for b in bodies])
    elapsed = time.perf_counter() - started
    data = [a.json() for a in answers]
    assert all(d["verdict"] == "accepted" for d in data)
    return elapsed, sum(d["cached"] for d in data)


async def accounted(
    classes: Classes | None, tests: int, way: Awaitable[float]
) -> tuple[float, str]:
    """``way``'s seconds, and (with ``classes``) its CPU per test by process class."""
    sampler = CpuSampler(classes).start() if classes else None
    elapsed = await way
    if sampler is None:
        return elapsed, ""
    seconds = sampler.stop().seconds
    per_test = {c: seconds.get(c, 0.0) * 1000 / tests for c in ATTRIBUTED}
    shown = ", ".join(f"{c} {ms:.2f}" for c, ms in per_test.items())
    return elapsed, f"{sum(per_test.values()):.2f} ms ({shown})"


async def main(args: argparse.Namespace) -> None:
    service = ServiceProcess(BOXED_POOL_SIZE="2", BOXED_QUEUE_TIMEOUT="600").start()
    classes = Classes(service.proc.pid, "service", service.instance)
    cpu_rows = []
    try:
        limits = httpx.Limits(max_connections=CONCURRENCY)
        # verl's client posts with requests.post, no session: a new connection for every call
        per_call = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=0)
        async with (
            httpx.AsyncClient(base_url=service.url, timeout=600, limits=limits) as client,
            httpx.AsyncClient(base_url=service.url, timeout=600, limits=per_call) as fresh,
        ):
            print(
                f"{args.problems} problems x {args.tests} tests, {CONCURRENCY} requests at once\n"
            )
            print(
                "| language | round | /judge s | /run_code s, kept connections | /run_code s, "
                "a connection per call | speed-up | speed-up, a connection per call |"
            )
            print("| --- | --- | --- | --- | --- | --- | --- |")
            for language in args.languages.split(","):
                template = CPP if language == "cpp" else PYTHON
                warm = [template.format(k=k + 1) + "\n" for k in range(2)]
                await by_judge(client, language, warm, [problem(k + 1, args.tests) for k in (0, 1)])
                tests, n = args.problems * args.tests, args.problems
                ratios: dict[str, list[float]] = {KEPT: [], FRESH: []}
                for round_ in range(args.rounds):
                    # a different constant per problem and per round: no answer is reused
                    ks = [round_ * n + k + 1 for k in range(n)]
                    suites = [problem(k, args.tests) for k in ks]
                    codes = [template.format(k=k) for k in ks]
                    ways = {
                        JUDGE: by_judge(client, language, codes, suites),
                        KEPT: by_run_code(client, language, codes, suites),
                        FRESH: by_run_code(fresh, language, codes, suites),
                    }
                    turn = round_ % len(ways)  # each way goes first in turn
                    order = list(ways)[turn:] + list(ways)[:turn]
                    seconds, cpu = {}, {}
                    for way in order:
                        await quiet(classes, QUIET_LIMIT)  # each way starts on an idle service
                        seconds[way], cpu[way] = await accounted(
                            classes if args.cpu else None, tests, ways[way]
                        )
                    for way in (KEPT, FRESH):
                        ratios[way].append(seconds[way] / seconds[JUDGE])
                    cpu_rows += [(language, round_ + 1, way, cpu[way]) for way in ways]
                    print(f"| {language} | {round_ + 1} | {seconds[JUDGE]:.2f} | "
                          f"{seconds[KEPT]:.2f} | {seconds[FRESH]:.2f} | "
                          f"{ratios[KEPT][-1]:.2f}x | {ratios[FRESH][-1]:.2f}x |")  # fmt: skip
                print(f"| {language} | median | | | | **{statistics.median(ratios[KEPT]):.2f}x** "
                      f"| **{statistics.median(ratios[FRESH]):.2f}x** |")  # fmt: skip
            if args.cpu:
                print("\nCPU per test, milliseconds, by process class")
                for language, round_, way, figures in cpu_rows:
                    print(f"- {language} round {round_} {way}: {figures}")
            cold, _ = await grpo(client, args.grpo_problems, cache=False)
            warm_, hits = await grpo(client, args.grpo_problems, cache=True)
            total = args.grpo_problems * 16
            print(f"\nGRPO batch: {args.grpo_problems} problems x 16 completions (8 identical)")
            print("| cache | seconds | completions/s | answered from the cache |")
            print("| --- | --- | --- | --- |")
            print(f"| off | {cold:.1f} | {total / cold:.1f} | 0 |")
            print(f"| on | {warm_:.1f} | {total / warm_:.1f} | {hits} of {total} |")
    finally:
        service.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--tests", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of both ways, taking turns")
    parser.add_argument("--languages", default="cpp,python")
    parser.add_argument("--grpo-problems", type=int, default=8)
    parser.add_argument("--cpu", action="store_true", help="CPU per test by process class")
    asyncio.run(main(parser.parse_args()))
