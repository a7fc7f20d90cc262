"""Session figures beside one-shot /execute, in one run on one service:

    python bench/bench_sessions.py [--sessions N] [--calls N]

Starts its own service (process mode, default settings) on a free loopback port, then
measures, one request at a time: session creation (``POST /sessions``) and deletion, a trivial
call in a session (``POST /sessions/{id}/execute``) beside the same snippet as one-shot
``POST /execute``, and ``import sympy`` as the first call of a session (cold) beside a later
call that uses it (kept) and beside one-shot /execute (its preloaded zygote). Prints a
markdown table of latencies (ms).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.service import ServiceProcess  # noqa: E402

TRIVIAL = "print(1)"
SYMPY = "import sympy\nprint(sympy.sqrt(8))"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def row(name: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return (
        f"| {name} | {len(ms)} | {pct(ms, 50):.1f} | {pct(ms, 90):.1f} | "
        f"{statistics.mean(ms):.1f} |"
    )


def timed(
    http: httpx.Client, method: str, path: str, body: object = None
) -> tuple[float, httpx.Response]:
    """Seconds one request took, and its answer (which must be a success)."""
    started = time.perf_counter()
    response = http.request(method, path, json=body)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed, response


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions made and deleted")
    parser.add_argument("--calls", type=int, default=200, help="calls of each kind")
    args = parser.parse_args()
    service = ServiceProcess().start()
    try:
        with httpx.Client(base_url=service.url, timeout=120) as http:
            for _ in range(20):  # warm both paths
                http.post("/execute", json={"code": TRIVIAL})
            create, delete, cold, kept, oneshot_sympy = [], [], [], [], []
            for _ in range(args.sessions):
                seconds, made = timed(http, "POST", "/sessions", {})
                create.append(seconds)
                path = f"/sessions/{made.json()['session_id']}"
                cold.append(timed(http, "POST", f"{path}/execute", {"code": SYMPY})[0])
                again = {"code": "print(sympy.sqrt(8))"}
                kept.append(timed(http, "POST", f"{path}/execute", again)[0])
                oneshot_sympy.append(timed(http, "POST", "/execute", {"code": SYMPY})[0])
                delete.append(timed(http, "DELETE", path)[0])
            path = f"/sessions/{http.post('/sessions', json={}).json()['session_id']}"
            in_session, oneshot = [], []
            for _ in range(args.calls):  # interleaved: both see the same machine
                in_session.append(timed(http, "POST", f"{path}/execute", {"code": TRIVIAL})[0])
                oneshot.append(timed(http, "POST", "/execute", {"code": TRIVIAL})[0])
            http.delete(path)
    finally:
        service.stop()
    print("| measure | n | p50 ms | p90 ms | mean ms |")
    print("|---|---|---|---|---|")
    print(row("POST /sessions (create, ready for code)", create))
    print(row("DELETE /sessions/{id} (sandbox gone)", delete))
    print(row("`print(1)` in a session", in_session))
    print(row("`print(1)` one-shot /execute", oneshot))
    print(row("`import sympy` first call of a session", cold))
    print(row("sympy call later in the session (kept)", kept))
    print(row("`import sympy` one-shot /execute (preloaded)", oneshot_sympy))


if __name__ == "__main__":
    main()
