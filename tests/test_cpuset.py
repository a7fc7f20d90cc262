"""``BOXED_CPUSET`` on the real engine: every sandbox is confined to the CPUs it names, so a GPU
node's inference engine keeps the others (docs/ray.md)."""

from __future__ import annotations

import httpx
import pytest

import docker
from exec_server.settings import Settings
from tests.conftest import instance_containers, running_service


def test_cpuset_must_be_a_cpu_list() -> None:
    assert Settings(cpuset="0-3,8").cpuset == "0-3,8"
    assert Settings(cpuset="").cpuset is None  # compose's unset variable
    with pytest.raises(ValueError, match="cpuset"):
        Settings(cpuset="all")


@pytest.mark.docker
def test_sandboxes_run_only_on_the_cpuset() -> None:
    with running_service(BOXED_CPUSET="0", BOXED_POOL_SIZE="1") as service:
        engine = docker.from_env()
        containers = instance_containers(service.instance)
        assert containers
        for container_id in containers:
            host = engine.api.inspect_container(container_id)["HostConfig"]
            assert host["CpusetCpus"] == "0"
        code = "import os; print(sorted(os.sched_getaffinity(0)))"
        answer = httpx.post(f"{service.url}/execute", json={"code": code}, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["stdout"] == "[0]\n"
        assert answer.headers["X-Boxed-Instance"] == service.instance
