"""boxed on every node of a real local Ray cluster (exec_server.ray, docs/ray.md).

One module-scoped cluster: three nodes on 127.0.0.1 (a small object store each), one boxed
service per node at pool size 1. Tests that remove or add a node come last.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# Before Ray is imported: every node, the driver and the workers take 127.0.0.1 as their IP
# (Ray would otherwise resolve 127.0.0.1 to the host's outward address).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import httpx
import pytest
import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import exec_server.ray as boxed_ray
from exec_server.client import Client, SessionUnreachable
from scorer.outcome import Failure, FailureCode
from tests.conftest import REPO, free_port, instance_containers
from tests.test_ray_child import process_gone

pytestmark = pytest.mark.docker

OBJECT_STORE = 80 * 1024 * 1024  # Ray's floor is 75 MiB
SERVICE_ENV = {
    "BOXED_POOL_SIZE": "1",
    "BOXED_STRICT_POOL_SIZE": "0",
    "BOXED_MAX_CONCURRENCY": "1",
    "BOXED_MAX_QUEUE": "1",
}
RUNTIME_ENV = {"env_vars": {"PYTHONPATH": str(REPO)}}  # workers import this checkout


@dataclass
class RayCluster:
    cluster: Cluster
    ports: dict[str, int]

    def status(self) -> dict[str, dict[str, Any]]:
        return boxed_ray.status()


def _alive() -> list[str]:
    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])


@pytest.fixture(scope="module")
def rc() -> Iterator[RayCluster]:
    head = {"num_cpus": 2, "object_store_memory": OBJECT_STORE, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=2, object_store_memory=OBJECT_STORE)
        ray.init(address=cluster.address, runtime_env=RUNTIME_ENV, log_to_driver=False)
        cluster.wait_for_nodes()
        ports = {node: free_port() for node in _alive()}
        urls = boxed_ray.deploy(ports=ports, env=SERVICE_ENV, timeout=180)
        assert len(urls) == 3
        yield RayCluster(cluster, ports)
        instances = [s["instance"] for s in boxed_ray.status().values() if s["instance"]]
        assert len(boxed_ray.shutdown()) >= 3
        assert boxed_ray.status() == {}
        for instance in instances:
            assert instance_containers(instance) == [], instance
    finally:
        ray.shutdown()
        cluster.shutdown()


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}")


def requests_served(url: str, route: str = "/execute") -> dict[str, float]:
    """``boxed_requests_total`` of ``route`` by status, from the service's ``/metrics``."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    pattern = rf'^boxed_requests_total{{route="{re.escape(route)}",status="(\w+)"}} (\S+)$'
    return {status: float(n) for status, n in re.findall(pattern, text, flags=re.M)}


def ok_count(url: str) -> float:
    return requests_served(url).get("ok", 0.0)


def on_node(node_id: str, **options: Any) -> dict[str, Any]:
    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    return {"scheduling_strategy": strategy, "num_cpus": 0, **options}


@ray.remote
def run_snippets(n: int) -> list[str]:
    """``n`` snippets through exec_server.ray's client, from whichever node runs this task."""
    with boxed_ray.client() as client:
        return [client.execute(f"print({i})").stdout for i in range(n)]


TRAINER_JOB = """
import json, os, sys
import ray
from exec_server.client import Client

@ray.remote(num_cpus=0)
def rollout():
    # trainer code that knows nothing of Ray: Client() from the environment
    with Client() as client:
        return {
            "node": ray.get_runtime_context().get_node_id(),
            "BOXED_URL": os.environ["BOXED_URL"],
            "BOXED_ROUTING": os.environ["BOXED_ROUTING"],
            "urls": client.urls,
            "stdout": client.execute("print(6 * 7)").stdout,
        }

hook = "exec_server.ray.use_node_local_service"
env = {"worker_process_setup_hook": hook, "env_vars": {"PYTHONPATH": os.getcwd()}}
ray.init(address=sys.argv[1], runtime_env=env, log_to_driver=False)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
refs = [rollout.options(scheduling_strategy=On(n, soft=False)).remote() for n in nodes]
print(json.dumps(ray.get(refs, timeout=120)))
"""


def test_one_ready_service_per_node_on_loopback_and_deploy_is_idempotent(
    rc: RayCluster,
) -> None:
    before = rc.status()
    assert sorted(before) == _alive()
    assert len({s["instance"] for s in before.values()}) == 3
    for node, service in before.items():
        assert service["ready"] and service["alive"] and service["pid"]
        assert service["url"] == f"http://127.0.0.1:{rc.ports[node]}"
        host = urlsplit(service["url"]).hostname
        assert host is not None and ipaddress.ip_address(host).is_loopback
        answer = httpx.get(f"{service['url']}/healthz", timeout=10)
        assert answer.headers["X-Boxed-Instance"] == service["instance"]
    assert boxed_ray.deploy(ports=rc.ports, env=SERVICE_ENV) == boxed_ray.urls()
    after = rc.status()
    assert {n: s["pid"] for n, s in after.items()} == {n: s["pid"] for n, s in before.items()}


def test_the_command_line_reports_every_nodes_service(rc: RayCluster) -> None:
    command = [sys.executable, "-m", "exec_server.ray", "--address", rc.cluster.address]
    out = subprocess.run(
        [*command, "status"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    reported = json.loads(out.stdout)
    assert {node: s["url"] for node, s in reported.items()} == boxed_ray.urls()
    assert all(s["ready"] and s["alive"] for s in reported.values())


def test_each_nodes_tasks_are_served_by_their_own_nodes_service(rc: RayCluster) -> None:
    urls = boxed_ray.urls()
    before = {node: ok_count(url) for node, url in urls.items()}
    per_node = 4
    refs = [run_snippets.options(**on_node(node)).remote(per_node) for node in urls]
    for out in ray.get(refs, timeout=120):
        assert out == [f"{i}\n" for i in range(per_node)]
    after = {node: ok_count(url) for node, url in urls.items()}
    assert {node: after[node] - before[node] for node in urls} == dict.fromkeys(urls, per_node)


def test_the_worker_hook_makes_client_from_the_environment_node_local(rc: RayCluster) -> None:
    """A trainer's own job (a driver of its own) with the hook: every node's rollouts reach
    their own node's service first."""
    urls = boxed_ray.urls()
    job = subprocess.run(
        [sys.executable, "-c", TRAINER_JOB, rc.cluster.address],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert job.returncode == 0, job.stderr[-3000:]
    seen_nodes = []
    for seen in json.loads(job.stdout.strip().splitlines()[-1]):
        seen_nodes.append(seen["node"])
        assert seen["stdout"] == "42\n"
        assert seen["BOXED_ROUTING"] == "ordered"
        assert seen["urls"][0] == urls[seen["node"]]
        assert sorted(seen["urls"]) == sorted(urls.values())
        assert seen["BOXED_URL"] == ",".join(seen["urls"])
    assert sorted(seen_nodes) == sorted(urls)


def test_an_overloaded_service_spills_over_to_the_next_node(rc: RayCluster) -> None:
    first, second, _ = boxed_ray.ordered_urls(_alive()[0])
    # one snippet running and one queued fill the first service (concurrency 1, queue 1)
    with Client([first], routing="ordered", max_attempts=1) as direct:
        fill = [threading.Thread(target=direct.execute, args=("import time; time.sleep(4)",))]
        fill.append(threading.Thread(target=direct.execute, args=("import time; time.sleep(4)",)))
        refused, served = requests_served(first).get("429", 0), ok_count(second)
        for thread in fill:
            thread.start()
        wait_for(lambda: _busy(first), 10, "the first service full")
        with Client([first, second], routing="ordered") as client:
            assert client.execute("print('spilled')").stdout == "spilled\n"
        for thread in fill:
            thread.join()
    assert requests_served(first).get("429", 0) == refused + 1
    assert ok_count(second) == served + 1


def _busy(url: str) -> bool:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return bool(re.search(r"^boxed_queued 1\.0$", text, flags=re.M))


def test_a_crashed_service_is_back_on_its_url_with_its_orphans_reaped(rc: RayCluster) -> None:
    node = _alive()[1]
    service = rc.status()[node]
    orphans = set(instance_containers(service["instance"]))
    assert orphans
    os.kill(service["pid"], signal.SIGKILL)
    back = wait_for(
        lambda: (s := rc.status()[node])["ready"] and s["pid"] != service["pid"] and s,
        90,
        "the service back",
    )
    assert back["url"] == service["url"] and back["starts"] == service["starts"] + 1
    assert orphans.isdisjoint(instance_containers(service["instance"]))
    with Client(back["url"]) as client:
        assert client.execute("print(1)").ok


def test_a_killed_actor_takes_its_service_and_containers_with_it(rc: RayCluster) -> None:
    node = _alive()[2]
    service = rc.status()[node]
    assert instance_containers(service["instance"])
    actor = ray.get_actor(boxed_ray.PREFIX + node, namespace=boxed_ray.NAMESPACE)
    ray.kill(actor, no_restart=True)  # no successor to reap after it: the service must clean up
    wait_for(lambda: process_gone(service["pid"]), 60, "the service gone with its actor")
    wait_for(lambda: instance_containers(service["instance"]) == [], 60, "its containers gone")
    assert node not in boxed_ray.urls()
    assert boxed_ray.reconcile(ports=rc.ports) == {"added": [node], "removed": []}
    back = rc.status()[node]
    assert back["ready"] and back["url"] == service["url"] and back["pid"] != service["pid"]


@ray.remote(num_cpus=0)
class Echo:
    def answer(self, value: Any, delay: float = 0.0) -> Any:
        time.sleep(delay)
        return value


def test_a_call_to_every_actor_leaves_out_a_lost_one_but_raises_on_a_hang(rc: RayCluster) -> None:
    """status() and shutdown() while a node dies: its actor is lost (Ray raises RayActorError
    before it marks the node dead), the others still answer; a hang is an error, not a loss."""
    alive, lost = Echo.options(**on_node(_alive()[0])).remote(), Echo.remote()
    ray.kill(lost, no_restart=True)
    assert boxed_ray._call_each({"alive": alive, "lost": lost}, "answer", 7) == {"alive": 7}
    with pytest.raises(ray.exceptions.GetTimeoutError):
        boxed_ray._call_each({"alive": alive}, "answer", 7, 30, timeout=0.5)
    ray.kill(alive, no_restart=True)


def _load(client: Client, stop: threading.Event, results: list[Any]) -> None:
    while not stop.is_set():
        try:
            results.append(client.execute("print(7)").stdout)
        except Exception as exc:  # counted: the test asserts there are none
            results.append(exc)


def _under_load(urls: list[str], fault: Callable[[], None], threads: int = 3) -> list[Any]:
    """Results of snippets sent through an ordered client while ``fault`` happens."""
    stop = threading.Event()
    results: list[Any] = []
    with Client(urls, routing="ordered", cooloff=30) as client:
        workers = [
            threading.Thread(target=_load, args=(client, stop, results)) for _ in range(threads)
        ]
        for worker in workers:
            worker.start()
        wait_for(lambda: len(results) >= 6, 60, "load flowing")
        fault()
        done = len(results)
        wait_for(lambda: len(results) >= done + 12, 90, "load flowing after the fault")
        stop.set()
        for worker in workers:
            worker.join(60)
    return results


def test_failover_under_load_when_the_local_service_dies(rc: RayCluster) -> None:
    node = _alive()[0]
    service = rc.status()[node]
    results = _under_load(
        boxed_ray.ordered_urls(node), lambda: os.kill(service["pid"], signal.SIGKILL)
    )
    errors = [r for r in results if r != "7\n"]
    assert errors == [] and len(results) >= 18
    wait_for(lambda: rc.status()[node]["ready"], 90, "the service back")


def test_a_node_that_joins_gets_a_service_and_one_removed_under_load_costs_no_error(
    rc: RayCluster,
) -> None:
    before = set(_alive())
    added = rc.cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE)
    rc.cluster.wait_for_nodes()
    (new,) = set(_alive()) - before
    changes = boxed_ray.reconcile(ports={new: free_port()}, timeout=180)
    assert changes == {"added": [new], "removed": []}
    service = rc.status()[new]
    assert service["ready"]
    with Client(boxed_ray.ordered_urls(new), routing="ordered", session_timeout=5) as client:
        session = client.session().open()
        assert session.execute("x = 41").ok

        results = _under_load(
            boxed_ray.ordered_urls(new), lambda: rc.cluster.remove_node(added, allow_graceful=False)
        )
        assert [r for r in results if r != "7\n"] == [] and len(results) >= 18

        # The node's service ends with its actor's worker, which ends when its raylet does;
        # when is Ray's business (a slow machine takes seconds), so wait for it here.
        wait_for(lambda: process_gone(service["pid"]), 60, "the removed node's service gone")
        start = time.monotonic()
        with pytest.raises(SessionUnreachable) as lost:  # never a new interpreter elsewhere
            session.execute("print(x + 1)")
        assert time.monotonic() - start < 10
        assert lost.value.failure == Failure.of(FailureCode.SERVICE_UNREACHABLE)
    wait_for(lambda: new not in _alive(), 60, "the node seen dead")
    assert boxed_ray.reconcile() == {"added": [], "removed": [new]}
    assert new not in boxed_ray.urls() and new not in rc.status()
    wait_for(lambda: instance_containers(service["instance"]) == [], 60, "its containers gone")
