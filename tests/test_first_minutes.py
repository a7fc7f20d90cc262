"""What a new user sees first: the start-up summary line, readable sandbox names, readiness
that names the sandbox's versions, and a missing image reported once with the command that
builds it (a 503 that says so, never a verdict)."""

from __future__ import annotations

import subprocess
import time

import httpx
import pytest

from tests.conftest import running_service
from tests.service import ServiceProcess, instance_containers

pytestmark = pytest.mark.docker


def test_start_up_summary_names_and_versions() -> None:
    with running_service(BOXED_POOL_SIZE="1", BOXED_STRICT_POOL_SIZE="0") as service:
        ready = httpx.get(f"{service.url}/readyz").json()
        names = subprocess.run(
            ["docker", "ps", "--format", "{{.Names}}"]
            + ["--filter", f"label=boxed.instance={service.instance}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        log = service.log.read_text()
    summary = [line for line in log.splitlines() if "isolation=" in line]
    assert len(summary) == 1, log
    for part in ("isolation=process", "backend=docker-process", "auth=off"):
        assert part in summary[0], summary
    assert f"instance={service.instance}" in summary[0], summary
    kinds = {name.removeprefix(f"boxed-{service.instance}-").split("-")[0] for name in names}
    assert "process" in kinds and kinds <= {"process", "session"}, names  # warm sessions too
    assert ready["sandbox"]["python"].startswith("3.11"), ready
    assert set(ready["sandbox"]["packages"]) >= {"sympy", "numpy"}, ready


def test_a_missing_image_is_reported_once_with_the_command_that_builds_it() -> None:
    service = ServiceProcess(
        BOXED_SANDBOX_IMAGE="boxed-sandbox:never-built", BOXED_BACKEND_CHECK_INTERVAL="0.2"
    )
    try:
        service.start(probe="/healthz")
        time.sleep(2)  # ten health checks
        ready = httpx.get(f"{service.url}/readyz")
        answer = httpx.post(f"{service.url}/execute", json={"code": "print(1)"})
        log = service.log.read_text()
    finally:
        service.stop()
    assert ready.status_code == 503 and "tools.build_image" in ready.json()["problem"], ready.text
    assert answer.status_code == 503 and answer.headers["Retry-After"], answer.text
    assert "boxed-sandbox:never-built is missing" in answer.json()["detail"], answer.text
    assert "python -m tools.build_image" in answer.json()["detail"], answer.text
    assert log.count("sandboxes unavailable") == 1, log  # logged once, not per retry
    assert "warm-up failed" not in log, log  # no warm-up tried while it cannot work
    assert instance_containers(service.instance) == []
