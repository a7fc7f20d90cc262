"""The launcher between a Ray actor and its service (exec_server.ray.child), without Ray: the
service's exit code comes back through it, and the service stops gracefully (removing its
containers) when the launcher is SIGKILLed, as Ray kills a dead worker's children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from exec_server.ray.child import service_pid
from tests.conftest import IMAGE, REPO, free_port, instance_containers

CHILD = [sys.executable, "-m", "exec_server.ray.child"]


def test_the_services_exit_code_comes_back_through_the_launcher() -> None:
    out = subprocess.run(
        [*CHILD, str(os.getpid()), "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0 and "healthcheck" in out.stdout, out.stderr


def test_a_launcher_whose_parent_is_not_its_starter_exits_at_once() -> None:
    out = subprocess.run([*CHILD, "1", "--help"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 1 and "ended before its child started" in out.stderr


def process_gone(pid: int) -> bool:
    """No such process, or only its zombie (exited, its parent gone and not reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


@pytest.mark.docker
def test_a_sigkilled_launcher_still_stops_its_service_gracefully() -> None:
    instance = f"test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {**os.environ, "BOXED_INSTANCE": instance, "BOXED_POOL_SIZE": "1"}
    env["BOXED_SANDBOX_IMAGE"] = IMAGE
    launcher = subprocess.Popen(
        [*CHILD, str(os.getpid()), "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert launcher.poll() is None and time.monotonic() < deadline, "not ready"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        service = service_pid(launcher.pid)
        assert service is not None and service != launcher.pid
        assert instance_containers(instance)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        deadline = time.monotonic() + 60
        while not (process_gone(service) and instance_containers(instance) == []):
            assert time.monotonic() < deadline, "the service or its containers outlived it"
            time.sleep(0.2)
    finally:
        if launcher.poll() is None:
            launcher.kill()
