"""Where one process-mode snippet's time goes, layer by layer (sequential, `print(1)`).

    python bench/bench_breakdown.py [--runs N] [--sandbox-only] [--streams [--rounds R]]

* sandbox: ``DockerSandbox.run`` (the docker-process backend) on one warm container, no
  service: from sending the snippet to the observation, and the part of it from the hand-over
  to the reaped child (``duration_ms``); then ``settle`` (the clean-up and the next child's
  fork, off the request's path), with the CPU per snippet of the container, of the engine
  (dockerd, containerd and the shims) and of this process (the host side of the backend);
  ``--streams`` measures only this layer, over the supervisor's own socket and over the
  engine's attach stream (``BOXED_SUPERVISOR_SOCKET``), taking turns ``--rounds`` times;
* executor: ``Executor.execute`` in this process (admission, the pool, the run, the verdict);
* HTTP layer: ``POST /execute`` against the real app whose executor answers at once (uvicorn,
  routing, validation, serialisation), and ``GET /healthz`` beside it;
* service: ``POST /execute`` against a real process-mode service.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import uvicorn

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]
from proc_cpu import ENGINE_PREFIXES, read_stat  # noqa: E402

from exec_server.answers import to_response  # noqa: E402
from exec_server.app import Executor, create_app  # noqa: E402
from exec_server.backends.base import Job  # noqa: E402
from exec_server.backends.docker import DockerBackend  # noqa: E402
from exec_server.backends.fake import observed  # noqa: E402
from exec_server.models import ExecuteRequest  # noqa: E402
from exec_server.settings import Settings  # noqa: E402
from exec_server.verdict import RunLimits, decide  # noqa: E402
from tests.service import IMAGE, ServiceProcess, free_port  # noqa: E402

CODE = "print(1)"


def p50(values: list[float]) -> float:
    return statistics.median(values[len(values) // 10 :])  # the first tenth warms up


def settings(**extra: object) -> Settings:
    return Settings(
        isolation="process", sandbox_image=IMAGE, instance=f"bench-{uuid.uuid4().hex[:8]}", **extra
    )


def container_cpu_ns(container_id: str) -> int | None:
    """The container's CPU time so far (cgroup v1 cpuacct, or v2 cpu.stat), None if unknown."""
    v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cpuacct.usage")
    v2 = Path(f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cpu.stat")
    try:
        if v1.exists():
            return int(v1.read_text())
        return int(v2.read_text().split("usage_usec ")[1].split()[0]) * 1000
    except (OSError, IndexError, ValueError):
        return None


def engine_cpu() -> dict[tuple[int, int], float]:
    """CPU seconds so far of each engine process (dockerd, containerd, the shims), keyed by
    (pid, start time)."""
    found = {}
    for name in os.listdir("/proc"):
        stat = read_stat(int(name)) if name.isdigit() else None
        if stat is not None and stat.comm.startswith(ENGINE_PREFIXES):
            found[int(name), stat.start] = stat.own
    return found


def engine_cpu_since(before: dict[tuple[int, int], float]) -> float:
    """What the engine processes alive before and now used in between (a shim that exited
    meanwhile, another container's, does not count)."""
    now = engine_cpu()
    return sum(now[key] - used for key, used in before.items() if key in now)


async def sandbox_layer(runs: int, socket: bool = True) -> dict[str, float]:
    backend = DockerBackend(settings(supervisor_socket=socket), reuse=True)
    job = Job(code=CODE, stdin="", limits=RunLimits(5, 5, 256, 65536))
    sandbox = await backend.create_warm(256)
    total, child, settle, cpu = [], [], [], []
    engine, host = engine_cpu(), time.process_time()
    try:
        for _ in range(runs):
            cpu_before = container_cpu_ns(sandbox.id)
            started = time.perf_counter()
            observation = await sandbox.run(job)
            answered = time.perf_counter()
            assert observation.stdout == b"1\n" and await sandbox.settle(), observation
            total.append((answered - started) * 1000)
            settle.append((time.perf_counter() - answered) * 1000)
            child.append(observation.duration_ms)
            cpu_after = container_cpu_ns(sandbox.id)
            if cpu_before is not None and cpu_after is not None:
                cpu.append((cpu_after - cpu_before) / 1e6)
            if sandbox.runs >= backend.settings.process_max_runs - 1:
                await sandbox.discard()
                sandbox = await backend.create_warm(256)
        engine_used, host_used = engine_cpu_since(engine), time.process_time() - host
    finally:
        await sandbox.discard()
        await backend.close()
    return {
        "sandbox run": p50(total),
        "  of it hand-over to reaped child": p50(child),
        "settle (after the answer)": p50(settle),
        **({"sandbox CPU per snippet (container cgroup)": p50(cpu)} if cpu else {}),
        "engine CPU per snippet (mean)": engine_used * 1000 / runs,
        "host side CPU per snippet (this process, mean)": host_used * 1000 / runs,
    }


async def streams(runs: int, rounds: int) -> None:
    """The sandbox layer over each stream, taking turns: one column per stream and round."""
    columns: dict[str, dict[str, float]] = {}
    for round_ in range(1, rounds + 1):
        for socket in (True, False):
            name = f"{'socket' if socket else 'attach'} {round_}"
            columns[name] = await sandbox_layer(runs, socket)
            print(f"{name}: done", file=sys.stderr)
    print(f"\n`{CODE}`, {runs} sequential runs per column (p50 in ms, means marked)\n")
    print("| layer | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for row in next(iter(columns.values())):
        print(f"| {row} | " + " | ".join(f"{c[row]:.2f}" for c in columns.values()) + " |")


async def executor_layer(runs: int) -> dict[str, float]:
    executor = Executor(settings(strict_pool_size=0))
    await executor.start()
    try:
        while executor.engine.pool.ready_count < executor.settings.pool_size:
            await asyncio.sleep(0.1)
        request, times = ExecuteRequest(code=CODE), []
        for _ in range(runs):
            started = time.perf_counter()
            response = await executor.execute(request, "bench")
            times.append((time.perf_counter() - started) * 1000)
            assert response.stdout == "1\n", response
    finally:
        await executor.stop()
    return {"executor": p50(times)}


class _AnswersAtOnce:
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def execute(self, req: ExecuteRequest, request_id: str) -> object:
        limits = RunLimits(5, 5, 256, 65536)
        return to_response(decide(observed(stdout=b"1\n"), limits), request_id)


def timed_requests(url: str, runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"GET /healthz": [], "POST /execute": []}
    with httpx.Client(base_url=url) as client:
        for _ in range(runs):
            for what, call in (
                ("GET /healthz", lambda: client.get("/healthz")),
                ("POST /execute", lambda: client.post("/execute", json={"code": CODE})),
            ):
                started = time.perf_counter()
                assert call().status_code == 200
                times[what].append((time.perf_counter() - started) * 1000)
    return times


def http_layer(runs: int) -> dict[str, float]:
    port = free_port()
    config = uvicorn.Config(
        create_app(Settings(), executor=_AnswersAtOnce()), port=port, log_level="warning"
    )  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        times = timed_requests(f"http://127.0.0.1:{port}", runs)
    finally:
        server.should_exit = True
        thread.join()
    return {f"HTTP layer only, {what}": p50(values) for what, values in times.items()}


def service_layer(runs: int) -> dict[str, float]:
    service = ServiceProcess(BOXED_ISOLATION="process").start()
    try:
        times = timed_requests(service.url, runs)["POST /execute"]
    finally:
        service.stop()
    return {"service, POST /execute": p50(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--sandbox-only", action="store_true", help="only the sandbox layer")
    parser.add_argument("--streams", action="store_true", help="the sandbox layer, each stream")
    parser.add_argument("--rounds", type=int, default=3, help="turns each stream takes")
    args = parser.parse_args()
    runs = args.runs
    if args.streams:
        return asyncio.run(streams(runs, args.rounds))
    rows = asyncio.run(sandbox_layer(runs))
    if args.sandbox_only:
        return print_rows(rows, runs)
    rows |= asyncio.run(executor_layer(runs))
    rows |= http_layer(runs)
    rows |= service_layer(runs)
    print_rows(rows, runs)


def print_rows(rows: dict[str, float], runs: int) -> None:
    print(f"\n`{CODE}`, {runs} sequential runs per layer, p50 in ms\n")
    print("| layer | p50 ms |\n|---|---|")
    for what, value in rows.items():
        print(f"| {what} | {value:.2f} |")


if __name__ == "__main__":
    main()
