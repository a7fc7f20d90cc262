"""The warm pool of session sandboxes on real containers (runc and gVisor) and on the pod
backend's stand-in: a warm create answers fast and its session works from a clean start, its
sandbox has the session's limits and goes with it, a create with other limits starts its own,
and the service's stop leaves no container. The pool's logic: tests/test_session_pool.py."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from exec_server.settings import Settings
from tests.conftest import running_service
from tests.runtimes import PODS, SYSTEM, Engine, engine_for

pytestmark = pytest.mark.docker
POOL = 2


@dataclass
class Service:
    url: str
    instance: str
    engine: Engine
    http: httpx.Client
    pods: bool  # the pod backend: a pod's container is sized for the largest request

    def pool_ready(self) -> int:
        return self.http.get("/readyz").json()["session_pool_ready"].get("default", 0)

    def wait_pool_full(self, seconds: float = 60.0) -> float:
        """Seconds until the pool holds its size again."""
        started = time.monotonic()
        while self.pool_ready() < POOL:
            assert time.monotonic() - started < seconds, "the pool did not refill"
            time.sleep(0.01)
        return time.monotonic() - started

    def metric(self, name: str, **labels: str) -> float:
        text = self.http.get("/metrics").text
        wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
        found = re.search(rf"^{name}{{{wanted}}} (\S+)$", text, re.M)
        return float(found.group(1)) if found else 0.0

    def containers(self, *filters: str) -> list[str]:
        instance = f"label=boxed.instance={self.instance}"
        flags = [arg for f in (instance, *filters) for arg in ("--filter", f)]
        out = subprocess.run(
            [*self.engine.docker, "ps", "-aq", *flags], capture_output=True, text=True, check=True
        )
        return out.stdout.split()

    def container_of(self, session_id: str) -> str:
        """A session's container, by its label (a Docker backend's; pods carry none)."""
        (container,) = self.containers(f"label=boxed.session={session_id}")
        return container

    def wait_session_containers(self, count: int, seconds: float = 60.0) -> None:
        deadline = time.monotonic() + seconds
        while len(self.containers("name=-session-")) != count:
            assert time.monotonic() < deadline, self.containers("name=-session-")
            time.sleep(0.05)

    def inspect(self, container: str) -> dict[str, Any]:
        out = subprocess.run(
            [*self.engine.docker, "inspect", "--format", "{{json .}}", container],
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout)


@pytest.fixture(scope="module", params=["runc", "runsc", "pods"])
def svc(request: pytest.FixtureRequest) -> Iterator[Service]:
    """One service per runtime for the module, and one over the pod backend's stand-in, with
    the pool at its default size (2); its stop must leave no container (``running_service``)."""
    pods = request.param == "pods"
    engine = engine_for(request, "runc" if pods else request.param)
    with running_service(
        engine,
        **(PODS.env if pods else {}),
        BOXED_POOL_SIZE="1",
        BOXED_STRICT_POOL_SIZE="0",
        BOXED_QUEUE_TIMEOUT="60",
        BOXED_SESSION_POOL_SIZE=str(POOL),  # the default, which tests/service.py turns off
    ) as service:
        with httpx.Client(base_url=service.url, timeout=60) as http:
            yield Service(service.url, service.instance, engine, http, pods)


def test_a_warm_create_answers_fast_and_its_session_starts_clean(svc: Service) -> None:
    seconds, refills = [], []
    for _ in range(5):
        svc.wait_pool_full()
        warm_before = svc.metric("boxed_session_sandboxes_total", start="warm")
        started = time.perf_counter()
        made = svc.http.post("/sessions", json={})
        seconds.append(time.perf_counter() - started)
        assert made.status_code == 201, made.text
        assert svc.metric("boxed_session_sandboxes_total", start="warm") == warm_before + 1
        refills.append(svc.wait_pool_full())
        info = made.json()
        sid = info["session_id"]
        assert info["calls"] == 0
        probe = "import os\nprint(sorted(k for k in globals() if not k.startswith('__')), "
        probe += "os.listdir('.'))"
        first = svc.http.post(f"/sessions/{sid}/execute", json={"code": probe}).json()
        assert (first["status"], first["stdout"]) == ("ok", "['os'] []\n")  # ran nothing before
        svc.http.post(f"/sessions/{sid}/execute", json={"code": "x = 41\nopen('f', 'w')"})
        kept = svc.http.post(f"/sessions/{sid}/execute", json={"code": "print(x + 1)"}).json()
        assert kept["stdout"] == "42\n"
        if not svc.pods:
            assert svc.container_of(sid) in svc.containers("name=-session-")
        assert svc.http.delete(f"/sessions/{sid}").status_code == 204
        svc.wait_session_containers(POOL)  # its sandbox went with it: never pooled again
        if not svc.pods:
            assert svc.containers(f"label=boxed.session={sid}") == []
    # A cold create costs about 150 ms here; a warm one a few ms (docs/sessions.md#warm-pool).
    # Loose bounds: the suite shares a loaded machine.
    assert statistics.median(seconds) < 0.1, seconds
    assert statistics.median(refills) < 5.0, refills


def test_a_warm_sandbox_has_the_session_limits_and_others_start_cold(svc: Service) -> None:
    svc.wait_pool_full()
    s = Settings()
    cold_before = svc.metric("boxed_session_sandboxes_total", start="cold")
    warm = svc.http.post("/sessions", json={"timeout": 3}).json()["session_id"]  # still warm
    cold = svc.http.post("/sessions", json={"memory_mb": 128}).json()["session_id"]
    assert svc.metric("boxed_session_sandboxes_total", start="cold") == cold_before + 1
    rlimit = "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[1] // 2**20)"
    for sid, memory in ((warm, s.memory_mb_default), (cold, 128)):
        if not svc.pods:  # a pod's container is sized for the largest request
            cgroup = svc.inspect(svc.container_of(sid))["HostConfig"]["Memory"] // 2**20
            assert cgroup == memory + s.process_memory_overhead_mb
        answer = svc.http.post(f"/sessions/{sid}/execute", json={"code": rlimit}).json()
        # the interpreter's own limit: its share on top of what it had mapped at the fork
        assert memory < int(answer["stdout"]) < memory + 200, (sid, answer)
        svc.http.delete(f"/sessions/{sid}")


def test_the_stop_removes_the_warm_sandboxes() -> None:
    with running_service(
        BOXED_POOL_SIZE="0", BOXED_STRICT_POOL_SIZE="0", BOXED_SESSION_POOL_SIZE=str(POOL)
    ) as service:
        with httpx.Client(base_url=service.url, timeout=60) as http:
            svc = Service(service.url, service.instance, SYSTEM, http, pods=False)
            svc.wait_pool_full()
            assert http.post("/sessions").status_code == 201
            svc.wait_pool_full()
            assert len(SYSTEM.containers(service.instance)) == POOL + 1  # no one-shot pool
    assert SYSTEM.containers(service.instance) == []  # (running_service checks it too)
