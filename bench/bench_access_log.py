"""What the access log costs the service: ``BOXED_ACCESS_LOG`` all / errors / off, side by side.

    python bench/bench_access_log.py [--rounds 3] [--seconds 8] [--concurrency 16]

One boxed service per setting (its defaults otherwise: process isolation), started once; then
``--rounds`` rounds, each sending ``print(sum(range(100)))`` to every service in turn for
``--seconds`` at ``--concurrency`` in flight with the lean load client (``RawClient``). The
service's CPU per snippet is its own process's ``/proc`` time (the sandboxes are the same for
every setting and are left out); its log goes to a file, as ``docker logs`` keeps it. Every
answer is checked (HTTP 200 and the expected output). Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
from bench_vs_old_server import SUM, RawClient, Server, run_phase, start_boxed  # noqa: E402
from proc_cpu import read_stat  # noqa: E402

SETTINGS = ("all", "errors", "off")


def service_cpu(pid: int) -> float:
    """The service process's own CPU seconds so far."""
    stat = read_stat(pid)
    assert stat is not None, "the service is gone"
    return stat.own


async def round_of(
    server: Server, pid: int, seconds: float, concurrency: int
) -> tuple[float, float]:
    """(service CPU ms per snippet, snippets per second) of one phase on ``server``."""
    async with RawClient(server.url) as client:
        before = service_cpu(pid)
        phase = await run_phase(client, server, "c16", SUM, concurrency, 10**9, seconds)
        spent = service_cpu(pid) - before
    assert phase.ok == phase.sent and not phase.errors, phase.errors
    return spent * 1000 / phase.ok, phase.per_second


async def measure(
    rounds: int, seconds: float, concurrency: int
) -> dict[str, list[tuple[float, float]]]:
    started = [
        (setting, *start_boxed(setting, {"BOXED_ACCESS_LOG": setting})) for setting in SETTINGS
    ]
    figures: dict[str, list[tuple[float, float]]] = {setting: [] for setting in SETTINGS}
    try:
        for _, service, server in started:  # warm: pools full, first requests served
            assert service.proc is not None
            await round_of(server, service.proc.pid, 2.0, concurrency)
        for _ in range(rounds):
            for setting, service, server in started:
                assert service.proc is not None
                figures[setting].append(
                    await round_of(server, service.proc.pid, seconds, concurrency)
                )
    finally:
        for _, service, _ in started:
            service.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.rounds, args.seconds, args.concurrency))
    table = Table(
        title=f"BOXED_ACCESS_LOG, c={args.concurrency}, {args.rounds} rounds (median, spread)"
    )
    for column in ("setting", "service CPU ms/snippet", "snippets/s", "CPU against 'all'"):
        table.add_column(column, justify="left" if column == "setting" else "right")
    base = statistics.median(cpu for cpu, _ in figures["all"])
    for setting, rows in figures.items():
        cpu = [c for c, _ in rows]
        rate = [r for _, r in rows]
        table.add_row(
            setting,
            f"{statistics.median(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f})",
            f"{statistics.median(rate):.0f} ({min(rate):.0f}-{max(rate):.0f})",
            f"{statistics.median(cpu) / base:.2f}",
        )
    Console().print(table)
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
