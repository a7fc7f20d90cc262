"""boxed through exec_server.ray on a local Ray cluster, node-local against across nodes, and
Ray's own sandboxes (``ray.experimental.sandbox``) beside it where they can run here:

    python bench/bench_ray.py [--calls N] [--burst N] [--creates N] [--ray-sandbox-image TAR]

Starts a three-node cluster on 127.0.0.1 (``ray.cluster_utils.Cluster``), deploys boxed on
every node, then from Ray tasks pinned to two nodes measures: ``print(1)`` latency one call at
a time (p50, p90), snippets per second with 16 in flight (8 from a task on each of the two
nodes), and session creation (``POST /sessions`` to the first answer, p50), each with every
task using its own node's service (node-local) and the other node's (across nodes). With Ray's
sandboxes usable (runsc 20240729 or newer and mkfs.erofs 1.7 or newer on PATH, and an image as
a ``docker save`` tar), the same figures for them; otherwise the reason they cannot run.
Every service is warmed first, and the two ways take turns going first over two rounds.
Prints a markdown table. Not part of CI (docs/ray.md).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every node on 127.0.0.1

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import exec_server.ray as boxed_ray  # noqa: E402
from tests.service import free_port  # noqa: E402

SNIPPET = "print(1)"
OBJECT_STORE = 80 * 1024 * 1024


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


@ray.remote(num_cpus=0)
def boxed_latency(url: str, calls: int) -> list[float]:
    from boxed_client import Client

    out = []
    with Client(url) as client:
        client.execute(SNIPPET)  # the connection made
        for _ in range(calls):
            start = time.perf_counter()
            assert client.execute(SNIPPET).ok
            out.append(time.perf_counter() - start)
    return out


@ray.remote(num_cpus=0)
def boxed_burst(url: str, n: int, in_flight: int, start_at: float) -> tuple[float, float]:
    from boxed_client import Client

    with Client(url, max_concurrency=in_flight) as client:
        client.execute(SNIPPET)
        while time.time() < start_at:  # both nodes' tasks start together
            time.sleep(0.001)
        start = time.time()
        results = client.execute_many([SNIPPET] * n)
        assert all(r.ok for r in results)
        return start, time.time()


@ray.remote(num_cpus=0)
def boxed_creates(url: str, n: int) -> list[float]:
    from boxed_client import Client

    out = []
    with Client(url) as client:
        for _ in range(n):
            start = time.perf_counter()
            with client.session() as session:
                assert session.execute(SNIPPET).ok
                out.append(time.perf_counter() - start)
    return out


def ray_sandbox_problem(image: str | None) -> str | None:
    """Why Ray's sandboxes cannot run on this machine, or None."""
    problems = []
    runsc = shutil.which("runsc")
    if runsc is None:
        problems.append("no runsc on PATH")
    else:
        out = subprocess.run([runsc, "--version"], capture_output=True, text=True).stdout
        found = re.search(r"(\d{8})", out)
        if not found or found.group(1) < "20240729":
            problems.append(f"runsc {found.group(1) if found else '?'} older than 20240729")
    erofs = shutil.which("mkfs.erofs")
    if erofs is None:
        problems.append("no mkfs.erofs on PATH")
    else:
        out = subprocess.run([erofs, "--version"], capture_output=True, text=True)
        version = re.search(r"(\d+)\.(\d+)", out.stdout + out.stderr)
        if not version or (int(version.group(1)), int(version.group(2))) < (1, 7):
            problems.append(f"mkfs.erofs {version.group(0) if version else '?'} older than 1.7")
    if image is None:
        problems.append("no image tar given (--ray-sandbox-image)")
    return "; ".join(problems) or None


@ray.remote(num_cpus=0)
def ray_sandbox_figures(image: str, calls: int, creates: int) -> dict[str, list[float]]:
    from ray.experimental import sandbox

    made = []
    for _ in range(creates):
        start = time.perf_counter()
        box = sandbox.create(image=image, cpu=1, memory="512Mi")
        ray.get(box.exec.remote(["python3", "-c", SNIPPET]))
        made.append(time.perf_counter() - start)
        ray.kill(box)
    box = sandbox.create(image=image, cpu=1, memory="512Mi")
    ray.get(box.exec.remote(["python3", "-c", SNIPPET]))
    lat = []
    for _ in range(calls):
        start = time.perf_counter()
        result = ray.get(box.exec.remote(["python3", "-c", SNIPPET]))
        assert "1" in str(result), result
        lat.append(time.perf_counter() - start)
    ray.kill(box)
    return {"create": made, "exec": lat}


def on(node: str) -> dict[str, Any]:
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}


def burst_rate(pairs: list[tuple[str, str]], n: int) -> float:
    """Snippets per second with 8 in flight from a task on each node of ``pairs``
    (node, url)."""
    start_at = time.time() + 3
    spans = ray.get(
        [boxed_burst.options(**on(node)).remote(url, n, 8, start_at) for node, url in pairs]
    )
    first = min(s for s, _ in spans)
    last = max(e for _, e in spans)
    return n * len(pairs) / (last - first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per way")
    parser.add_argument("--burst", type=int, default=400, help="snippets per task in a burst")
    parser.add_argument("--creates", type=int, default=20, help="sessions created per way")
    parser.add_argument("--ray-sandbox-image", default=None, help="docker save tar for Ray's")
    args = parser.parse_args()

    head = {"num_cpus": 2, "object_store_memory": OBJECT_STORE, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=2, object_store_memory=OBJECT_STORE)
        ray.init(
            address=cluster.address,
            runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
            log_to_driver=False,
        )
        cluster.wait_for_nodes()
        nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
        urls = boxed_ray.deploy(ports={n: free_port() for n in nodes}, timeout=300)
        a, b = nodes[:2]
        ways = {
            "boxed, node-local": [(a, urls[a]), (b, urls[b])],
            "boxed, across nodes": [(a, urls[b]), (b, urls[a])],
        }
        # warm every service (zygotes, pool, connections) before anything is measured
        burst_rate(ways["boxed, node-local"], args.burst // 4)
        burst_rate(ways["boxed, across nodes"], args.burst // 4)
        rows = []
        # the two ways take turns going first: round 1 node-local first, round 2 across first
        for turn, order in enumerate((list(ways), list(ways)[::-1]), start=1):
            for way in order:
                pairs = ways[way]
                lat = ray.get(boxed_latency.options(**on(a)).remote(pairs[0][1], args.calls))
                made = ray.get(boxed_creates.options(**on(a)).remote(pairs[0][1], args.creates))
                rate = burst_rate(pairs, args.burst)
                rows.append(
                    f"| {way} (round {turn}) | {pct(lat, 50) * 1000:.1f} | "
                    f"{pct(lat, 90) * 1000:.1f} | {rate:.0f} | "
                    f"{statistics.median(made) * 1000:.0f} |"
                )
        problem = ray_sandbox_problem(args.ray_sandbox_image)
        if problem is None:
            figures = ray.get(
                ray_sandbox_figures.options(**on(a)).remote(
                    args.ray_sandbox_image, args.calls, args.creates
                )
            )
            lat, made = figures["exec"], figures["create"]
            rows.append(
                f"| Ray sandbox | {pct(lat, 50) * 1000:.1f} | {pct(lat, 90) * 1000:.1f} | "
                f"- | {statistics.median(made) * 1000:.0f} |"
            )
        print("| way | exec p50 ms | exec p90 ms | snippets/s, 16 in flight | create p50 ms |")
        print("| --- | ---: | ---: | ---: | ---: |")
        print("\n".join(rows))
        if problem is not None:
            print(f"\nRay's sandboxes not run: {problem}")
        boxed_ray.shutdown()
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
