"""C++ through ``/run_code`` with the precompiled header and the compile cache, against the same
service with both off, side by side in one run.

    python bench/bench_cpp.py [--programs 20] [--tests 5] [--rounds 1]

Starts two services on free loopback ports (``BOXED_SANDBOX_IMAGE`` or boxed-sandbox:latest,
pool 2): one with the defaults (``BOXED_CPP_PCH=1``, the compile cache on) and one with
``BOXED_CPP_PCH=0 BOXED_COMPILE_CACHE_MB=0``. Requests go one at a time, taking turns between
the two services (the machine is shared: two runs minutes apart say little), every answer
checked. Two workloads, each program a typical ``#include <bits/stdc++.h>`` solution:

* distinct programs: every request another program, one test each (no cache hit can help:
  the precompiled header alone);
* per test, verl's way: each program sent once per test (``--tests``), as verl's client posts
  one ``/run_code`` per test case; the first call compiles, the others may hit the cache.

Prints a ``rich`` table: p50, p90 and mean milliseconds per request on each service and the
ratio of the p50s (on / off).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.service import ServiceProcess  # noqa: E402

# A competitive-programming solution as models write them: the whole library, a few containers.
SOLUTION = """#include <bits/stdc++.h>
using namespace std;
typedef long long ll;
int main() {
    ios::sync_with_stdio(false); cin.tie(nullptr);
    int n; cin >> n; vector<ll> a(n);
    for (auto &x : a) cin >> x;
    sort(a.begin(), a.end());
    map<ll, int> seen; set<ll> distinct(a.begin(), a.end());
    for (ll x : a) seen[x % KCONST]++;
    ll best = 0; for (auto &[r, c] : seen) best = max(best, (ll)c);
    cout << accumulate(a.begin(), a.end(), 0LL) * KCONST + best * 0 + (ll)distinct.size() * 0
         << "\\n";
}
"""
ON, OFF = "on: PCH + cache", "off: neither"


def case(k: int, t: int) -> tuple[str, str]:
    xs = [(k * 37 + t * 11 + i) % 1000 for i in range(10 + t)]
    return f"{len(xs)}\n{' '.join(map(str, xs))}\n", f"{sum(xs) * k}\n"


def body(k: int, stdin: str) -> dict[str, object]:
    """What verl's SandboxFusion client sends for one test case."""
    return {
        "code": SOLUTION.replace("KCONST", str(k)),
        "language": "cpp",
        "stdin": stdin,
        "compile_timeout": 60,  # the maximum: a shared machine can be slow
        "run_timeout": 10,
        "files": {},
        "fetch_files": [],
    }


def call(client: httpx.Client, k: int, t: int) -> float:
    """One /run_code call, checked; its milliseconds."""
    stdin, expected = case(k, t)
    started = time.perf_counter()
    answer = client.post("/run_code", json=body(k, stdin))
    elapsed = (time.perf_counter() - started) * 1000
    data = answer.json()
    got = (data.get("run_result") or {}).get("stdout")
    assert answer.status_code == 200 and got == expected, data
    return elapsed


def workload(clients: dict[str, httpx.Client], calls: list[tuple[int, int]]) -> dict[str, list]:
    """``calls`` on both services, taking turns call by call (who goes first alternates)."""
    times: dict[str, list[float]] = {name: [] for name in clients}
    names = list(clients)
    for i, (k, t) in enumerate(calls):
        for name in names[i % 2 :] + names[: i % 2]:
            times[name].append(call(clients[name], k, t))
    return times


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/bench_cpp.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--programs", type=int, default=20, help="programs per workload")
    parser.add_argument("--tests", type=int, default=5, help="tests per program (verl's way)")
    parser.add_argument("--rounds", type=int, default=1, help="times each workload is run")
    args = parser.parse_args(argv)
    common = {"BOXED_POOL_SIZE": "2", "BOXED_QUEUE_TIMEOUT": "600"}
    services = {
        ON: ServiceProcess(**common),
        OFF: ServiceProcess(**common, BOXED_CPP_PCH="0", BOXED_COMPILE_CACHE_MB="0"),
    }
    console = Console()
    try:
        for service in services.values():
            service.start()
        clients = {n: httpx.Client(base_url=s.url, timeout=600) for n, s in services.items()}
        workload(clients, [(1, 0), (2, 0)])  # warm: the first compile of each service
        table = Table(title=f"C++ /run_code at one in flight, {args.programs} programs")
        for column in ("workload", "round", "service", "calls", "p50 ms", "p90 ms", "mean ms"):
            table.add_column(column, justify="left" if column == "service" else "right")
        table.add_column("p50 on/off", justify="right")
        seed = 1000
        for round_ in range(1, args.rounds + 1):
            distinct = [(seed + k, 0) for k in range(args.programs)]
            seed += args.programs
            per_test = [(seed + k, t) for k in range(args.programs) for t in range(args.tests)]
            seed += args.programs
            shapes = {"distinct programs": distinct, f"{args.tests} tests each": per_test}
            for shape, calls in shapes.items():
                times = workload(clients, calls)
                ratio = statistics.median(times[ON]) / statistics.median(times[OFF])
                console.print(f"round {round_}, {shape}: p50 on/off {ratio:.2f}", style="dim")
                for name, values in times.items():
                    table.add_row(
                        shape,
                        str(round_),
                        name,
                        str(len(values)),
                        f"{statistics.median(values):.0f}",
                        f"{p(values, 0.9):.0f}",
                        f"{statistics.fmean(values):.0f}",
                        f"{ratio:.2f}" if name == ON else "",
                    )
        for client in clients.values():
            client.close()
        console.print(table)
        console.print(f"image {services[ON].env['BOXED_SANDBOX_IMAGE']}, load {os.getloadavg()}")
    finally:
        for service in services.values():
            if service.proc is not None:
                service.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
