"""Mixed load: 64 concurrent clients, half normal snippets and half hostile ones.

    python bench/load.py [--clients 64] [--per-client 6] [--isolation container|process]

Starts its own service on a free loopback port with a deliberately small queue (so overload is
exercised), measures unloaded latency of normal snippets first, then lets every client send its
requests one after another (a 429 is honoured with its Retry-After and retried). While the load
runs, /readyz and `docker ps` are sampled. Prints a markdown summary: lost responses, 5xx,
wrong verdicts, normal-request latency loaded vs unloaded, running snippets and live containers
vs their bounds, 429s and their Retry-After. Bounded: a fixed request count and a hard deadline.
Exits non-zero when a promise is broken (lost answer, 5xx, wrong verdict, bound exceeded).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.service import ServiceProcess  # noqa: E402

# (code, stdin, expected stdout): the answer is checked, not only the status
NORMAL = [
    ("print(sum(range(1000)))", "", "499500\n"),
    ("import sys\nprint(sys.stdin.read().upper())", "abc", "ABC\n"),
    ("import sympy\nprint(sympy.factorint(360))", "", "{2: 3, 3: 2, 5: 1}\n"),
    ("import math\nprint(math.comb(30, 15))", "", "155117520\n"),
]
# (name, code, expected status): each is a row of tests/data/hostile_cases.jsonl or a variant
FORK = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
THREADS = (
    "import threading, time\nwhile True:\n"
    "    threading.Thread(target=time.sleep, args=(1e9,), daemon=True).start()"
)
HOSTILE = [
    ("infinite_loop", "while True:\n    pass", "timeout"),
    ("fork_bomb", FORK, "timeout"),
    ("memory_bomb", "x = bytearray(2 * 1024**3)", "memory_limit"),
    ("stdout_flood", "while True:\n    print('x' * 1000)", "output_limit"),
    ("thread_bomb", THREADS, "error"),
    ("sleep", "import time\ntime.sleep(3600)", "timeout"),
    ("segfault", "import ctypes\nctypes.string_at(0)", "error"),
    ("fd_exhaustion", "fs = []\nwhile True:\n    fs.append(open('/dev/null'))", "error"),
]
SNIPPET_TIMEOUT = 2.0
REQUEST_DEADLINE = 300.0  # a patient client: one request, 429 retries included


@dataclass
class Tally:
    sent: int = 0
    answered: int = 0
    lost: list[str] = field(default_factory=list)  # no HTTP answer at all
    gave_up: list[str] = field(default_factory=list)  # only 429s until REQUEST_DEADLINE
    server_errors: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    refusals_429: int = 0
    retry_after_missing: int = 0
    normal_attempt_s: list[float] = field(default_factory=list)
    normal_total_s: list[float] = field(default_factory=list)
    hostile_statuses: dict[str, int] = field(default_factory=dict)


@dataclass
class Samples:
    running: list[int] = field(default_factory=list)
    admitted: list[int] = field(default_factory=list)  # running + queued
    containers: list[int] = field(default_factory=list)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def one_request(
    client: httpx.AsyncClient, url: str, hostile: bool, rng: random.Random, tally: Tally
) -> None:
    """Send one snippet until it gets a final answer; record what came back."""
    if hostile:
        name, code, want_status = rng.choice(HOSTILE)
        body = {"code": code, "timeout": SNIPPET_TIMEOUT}
    else:
        code, stdin, want_stdout = rng.choice(NORMAL)
        name, body = "normal", {"code": code, "input": stdin, "timeout": SNIPPET_TIMEOUT}
    tally.sent += 1
    started = time.monotonic()
    while True:
        attempt = time.monotonic()
        try:
            r = await client.post(f"{url}/execute", json=body)
        except httpx.HTTPError as exc:
            tally.lost.append(f"{name}: {type(exc).__name__}")
            return
        if r.status_code == 429:
            tally.refusals_429 += 1
            retry_after = r.headers.get("retry-after")
            if retry_after is None:
                tally.retry_after_missing += 1
            if time.monotonic() - started > REQUEST_DEADLINE:
                tally.gave_up.append(f"{name}: still 429 after {REQUEST_DEADLINE:g} s")
                return
            await asyncio.sleep(float(retry_after or 1) * (0.5 + rng.random()))
            continue
        break
    tally.answered += 1
    if r.status_code >= 500:
        tally.server_errors.append(f"{name}: {r.status_code} {r.text[:120]}")
        return
    if r.status_code != 200:
        tally.wrong.append(f"{name}: HTTP {r.status_code} {r.text[:120]}")
        return
    data = r.json()
    if hostile:
        tally.hostile_statuses[data["status"]] = tally.hostile_statuses.get(data["status"], 0) + 1
        if data["status"] != want_status:
            tally.wrong.append(f"{name}: {data['status']} (want {want_status})")
        return
    now = time.monotonic()
    tally.normal_attempt_s.append(now - attempt)
    tally.normal_total_s.append(now - started)
    if (data["status"], data["stdout"]) != ("ok", want_stdout):
        tally.wrong.append(
            f"normal: {data['status']} stdout={data['stdout'][:60]!r} "
            f"duration_ms={data['duration_ms']}"
        )


async def sample(
    client: httpx.AsyncClient, url: str, instance: str, samples: Samples, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        try:
            ready = (await client.get(f"{url}/readyz")).json()
            samples.running.append(ready["running"])
            samples.admitted.append(ready["running"] + ready["queued"])
        except httpx.HTTPError:
            pass
        ps = await asyncio.create_subprocess_exec(
            *("docker", "ps", "-q", "--filter", f"label=boxed.instance={instance}"),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await ps.communicate()
        samples.containers.append(len(out.split()))
        await asyncio.sleep(0.25)


async def unloaded(url: str, n: int) -> list[float]:
    """Latency of normal snippets one at a time, service otherwise idle."""
    latencies = []
    async with httpx.AsyncClient(timeout=60) as client:
        for i in range(n):
            code, stdin, want = NORMAL[i % len(NORMAL)]
            started = time.monotonic()
            r = await client.post(f"{url}/execute", json={"code": code, "input": stdin})
            latencies.append(time.monotonic() - started)
            assert r.status_code == 200 and r.json()["stdout"] == want, r.text
            await asyncio.sleep(0.5)  # let the pool refill: this is the warm, idle latency
    return latencies


async def load(args: argparse.Namespace, url: str, instance: str) -> tuple[Tally, Samples, float]:
    tally, samples, stop = Tally(), Samples(), asyncio.Event()
    limits = httpx.Limits(max_connections=args.clients + 8)
    async with httpx.AsyncClient(timeout=REQUEST_DEADLINE, limits=limits) as client:

        async def client_loop(index: int) -> None:
            rng = random.Random(args.seed + index)
            kinds = [True, False] * (args.per_client // 2) + [index % 2 == 0] * (
                args.per_client % 2
            )
            rng.shuffle(kinds)
            for hostile in kinds:
                await one_request(client, url, hostile, rng, tally)

        sampler = asyncio.create_task(sample(client, url, instance, samples, stop))
        started = time.monotonic()
        try:
            await asyncio.wait_for(
                asyncio.gather(*(client_loop(i) for i in range(args.clients))), args.deadline
            )
        except TimeoutError:
            tally.lost.append(f"run cut at the {args.deadline:g} s deadline")
        elapsed = time.monotonic() - started
        stop.set()
        await sampler
    return tally, samples, elapsed


def report(
    args: argparse.Namespace, base: list[float], tally: Tally, samples: Samples, elapsed: float
) -> tuple[str, bool]:
    container_bound = args.max_concurrency + args.pool_size + args.warmups
    loaded_p50 = pct(tally.normal_attempt_s, 50) if tally.normal_attempt_s else float("nan")
    loaded_p99 = pct(tally.normal_attempt_s, 99) if tally.normal_attempt_s else float("nan")
    ok = not (tally.lost or tally.server_errors or tally.wrong or tally.retry_after_missing)
    ok = ok and tally.answered + len(tally.gave_up) == tally.sent
    ok = ok and max(samples.running, default=0) <= args.max_concurrency
    ok = ok and max(samples.admitted, default=0) <= args.max_concurrency + args.max_queue
    ok = ok and max(samples.containers, default=0) <= container_bound
    verdicts = ", ".join(f"{k}={v}" for k, v in sorted(tally.hostile_statuses.items()))
    lines = [
        f"## boxed mixed load ({args.isolation} isolation)",
        "",
        f"Command: `python bench/load.py --clients {args.clients} --per-client "
        f"{args.per_client} --isolation {args.isolation} --max-concurrency "
        f"{args.max_concurrency} --max-queue {args.max_queue} --pool-size {args.pool_size}`",
        "",
        f"Service: max_concurrency={args.max_concurrency}, max_queue={args.max_queue}, "
        f"pool_size={args.pool_size}, warmup_parallelism={args.warmups}; snippet timeout "
        f"{SNIPPET_TIMEOUT:g} s; {args.clients} clients, half normal / half hostile.",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| requests sent / answered | {tally.sent} / {tally.answered} |",
        f"| lost responses (no HTTP answer) | {len(tally.lost)} |",
        f"| gave up after {REQUEST_DEADLINE:g} s of 429s | {len(tally.gave_up)} |",
        f"| 5xx answers | {len(tally.server_errors)} |",
        f"| wrong verdicts or outputs | {len(tally.wrong)} |",
        f"| wall time under load | {elapsed:.1f} s |",
        f"| normal, unloaded p50 / p99 | {pct(base, 50) * 1000:.0f} / "
        f"{pct(base, 99) * 1000:.0f} ms ({len(base)} requests) |",
        f"| normal, loaded p50 / p99 (answered attempt) | {loaded_p50 * 1000:.0f} / "
        f"{loaded_p99 * 1000:.0f} ms ({len(tally.normal_attempt_s)} requests) |",
        f"| loaded / unloaded p50 factor | {loaded_p50 / pct(base, 50):.1f}x |",
        f"| normal, loaded p50 / p99 incl. 429 retries | "
        f"{pct(tally.normal_total_s, 50) * 1000:.0f} / "
        f"{pct(tally.normal_total_s, 99) * 1000:.0f} ms |",
        f"| max running snippets (/readyz) vs bound | {max(samples.running, default=0)} "
        f"<= {args.max_concurrency} |",
        f"| max running + queued (/readyz) vs bound | {max(samples.admitted, default=0)} "
        f"<= {args.max_concurrency + args.max_queue} |",
        f"| max live containers (docker ps) vs bound | {max(samples.containers, default=0)} "
        f"<= {container_bound} |",
        f"| samples taken | {len(samples.running)} |",
        f"| 429 answers (all with Retry-After) | {tally.refusals_429} "
        f"({tally.retry_after_missing} without) |",
        f"| hostile verdicts | {verdicts} |",
        "",
        f"**Result: {'PASS' if ok else 'FAIL'}**",
    ]  # fmt: skip
    for title, items in (
        ("Lost", tally.lost),
        ("Gave up", tally.gave_up),
        ("5xx", tally.server_errors),
        ("Wrong", tally.wrong),
    ):
        if items:
            lines += ["", f"{title} (first 10):", *(f"- {item}" for item in items[:10])]
    return "\n".join(lines), ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--per-client", type=int, default=4, help="requests per client")
    parser.add_argument("--isolation", choices=["container", "process"], default="container")
    parser.add_argument("--max-concurrency", type=int, default=8)
    parser.add_argument("--max-queue", type=int, default=16, help="small: exercise 429")
    parser.add_argument("--pool-size", type=int, default=4)
    parser.add_argument("--warmups", type=int, default=3, help="BOXED_WARMUP_PARALLELISM")
    parser.add_argument("--unloaded", type=int, default=30, help="sequential baseline requests")
    parser.add_argument("--deadline", type=float, default=480.0, help="hard cap, seconds")
    parser.add_argument("--seed", type=int, default=6)
    args = parser.parse_args()
    service = ServiceProcess(
        BOXED_ISOLATION=args.isolation,
        BOXED_MAX_CONCURRENCY=str(args.max_concurrency),
        BOXED_MAX_QUEUE=str(args.max_queue),
        BOXED_POOL_SIZE=str(args.pool_size),
        BOXED_WARMUP_PARALLELISM=str(args.warmups),
    )
    try:
        service.start()
        time.sleep(2)  # let the pool fill: the baseline is the unloaded, warm service
        base = asyncio.run(unloaded(service.url, args.unloaded))
        tally, samples, elapsed = asyncio.run(load(args, service.url, service.instance))
    finally:
        service.stop()
    text, ok = report(args, base, tally, samples, elapsed)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
