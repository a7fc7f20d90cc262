"""Two checkouts side by side: tests per second and CPU per test of the sandboxes and of the
service, under the same load, in alternating phases (the machine is shared and noisy: two runs
minutes apart say little, phases taking turns within one run do).

    git worktree add /tmp/base <commit>
    python bench/bench_checkouts.py /tmp/base [--seconds 8] [--rounds 4] [--ways judge,run_code]

Starts one service per checkout, each from its own tree (its own guest programs), with pool 2
and no container renewal during the run (each container's CPU counter then covers every
phase). Each round runs every way on both services in turn, taking turns at going first, for
``--seconds`` each: bench_judge.py's Python problems, 4 requests at once, through ``/judge``
(10 tests a request) or one ``/run_code`` call per test. The CPU figures are the growth of the
service's containers' cgroup counters and of the service process's ``/proc`` times over the
phase, per test; the table shows every phase and the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_judge import PYTHON, problem, run_code_body  # noqa: E402
from proc_cpu import TICK  # noqa: E402

HERE = Path(__file__).resolve().parent.parent
CONCURRENCY = 4
WAYS = ("judge", "run_code")


def service_for(checkout: Path, **env: str):  # type: ignore[no-untyped-def]
    """A ``ServiceProcess`` of ``checkout``'s own ``tests/service.py`` (it runs that tree)."""
    spec = importlib.util.spec_from_file_location(
        f"service_{abs(hash(str(checkout)))}", checkout / "tests" / "service.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ServiceProcess(**env)


def container_ids(instance: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-q", "--no-trunc", "--filter", f"label=boxed.instance={instance}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def container_cpu_seconds(container: str) -> float:
    """A container's CPU time so far, from its cgroup (v1 cpuacct or v2 cpu.stat)."""
    v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{container}/cpuacct.usage")
    if v1.exists():
        return int(v1.read_text()) / 1e9
    v2 = Path(f"/sys/fs/cgroup/system.slice/docker-{container}.scope/cpu.stat")
    usage = v2.read_text().split("usage_usec ", 1)[1].split()[0]
    return int(usage) / 1e6


def process_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK


async def load(url: str, way: str, seconds: float, first_k: int) -> int:
    """Send ``way``'s requests for ``seconds``; the tests run (every answer checked)."""
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        stop, done, ks = time.monotonic() + seconds, [0], iter(range(first_k, first_k + 10**6))

        async def worker() -> None:
            while time.monotonic() < stop:
                k = next(ks)
                tests, code = problem(k, 10), PYTHON.format(k=k)
                if way == "judge":
                    body = {"code": code, "language": "python", "tests": tests}
                    answer = await client.post("/judge", json=body)
                    assert answer.json()["verdict"] == "accepted", answer.text
                    done[0] += len(tests)
                    continue
                for test in tests:
                    body = run_code_body(code, "python", test["input"])
                    answer = await client.post("/run_code", json=body)
                    assert answer.json()["run_result"]["stdout"] == test["expected_output"]
                    done[0] += 1

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return done[0]


def phase(service, way: str, seconds: float, first_k: int) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """(tests/s, sandbox CPU ms per test, service CPU ms per test) of one phase."""
    containers = container_ids(service.instance)
    time.sleep(1.0)  # the last phase's clean-ups and forks ahead settle
    sandboxes = sum(map(container_cpu_seconds, containers))
    own, started = process_cpu_seconds(service.proc.pid), time.monotonic()
    tests = asyncio.run(load(service.url, way, seconds, first_k))
    elapsed = time.monotonic() - started
    sandboxes = sum(map(container_cpu_seconds, containers)) - sandboxes
    own = process_cpu_seconds(service.proc.pid) - own
    return tests / elapsed, 1000 * sandboxes / tests, 1000 * own / tests


def main(args: argparse.Namespace) -> None:
    checkouts = {"base": Path(args.base).resolve(), "this": HERE}
    env = {"BOXED_POOL_SIZE": "2", "BOXED_QUEUE_TIMEOUT": "600"}
    env["BOXED_PROCESS_MAX_RUNS"] = "1000000"
    services = {name: service_for(path, **env) for name, path in checkouts.items()}
    rows: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    try:
        for service in services.values():
            service.start()
            asyncio.run(load(service.url, "judge", 2.0, 10**7))  # warm: both kinds of child
        print(f"base: {checkouts['base']}, this: {HERE}; {args.seconds:g} s phases\n")
        print("| round | way | checkout | tests/s | sandbox CPU ms/test | service CPU ms/test |")
        print("| --- | --- | --- | --- | --- | --- |")
        first_k = 0
        for round_ in range(args.rounds):
            order = list(services)[:: 1 if round_ % 2 == 0 else -1]
            for way in args.ways.split(","):
                for name in order:
                    first_k += 100_000  # new programs each phase: no answer is reused
                    row = phase(services[name], way, args.seconds, first_k)
                    rows.setdefault((way, name), []).append(row)
                    print(f"| {round_ + 1} | {way} | {name} | {row[0]:.1f} | {row[1]:.2f} | "
                          f"{row[2]:.2f} |")  # fmt: skip
        for (way, name), found in rows.items():
            medians = [statistics.median(column) for column in zip(*found, strict=True)]
            print(f"| median | {way} | {name} | **{medians[0]:.1f}** | **{medians[1]:.2f}** | "
                  f"**{medians[2]:.2f}** |")  # fmt: skip
    finally:
        for service in services.values():
            if service.proc is not None:
                service.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("base", help="the other checkout (e.g. a git worktree of main)")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each phase")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--ways", default=",".join(WAYS), help="judge, run_code or both")
    main(parser.parse_args())
