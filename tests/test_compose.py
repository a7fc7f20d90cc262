"""End to end: `docker compose up` builds both images offline, serves the seed payload, and
`down` leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid

import httpx
import pytest

from tests.conftest import REPO, free_port, instance_containers
from tools import build_image as image

pytestmark = pytest.mark.docker


def compose_command() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]  # Debian's v1 reads compose.yaml too
    pytest.fail("neither `docker compose` nor `docker-compose` is installed")


def health(container: str) -> str:
    out = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Health.Status}}", container],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def test_compose_up_serves_seed_payload_and_down_cleans_up() -> None:
    if not image.image_exists(image.OFFLINE_BASE):
        image.build_offline_base()
    image.download_wheels()
    image.download_sandbox_wheels()  # so that compose's sandbox build installs only from them
    project = f"boxede2e{uuid.uuid4().hex[:6]}"
    port = free_port()
    instance = f"{project}-instance"
    env = {
        **os.environ,
        "BOXED_BASE": image.OFFLINE_BASE,
        "BOXED_PORT": str(port),
        "BOXED_INSTANCE": instance,
        "BOXED_POOL_SIZE": "2",
    }
    compose = [*compose_command(), "-p", project, "-f", "compose.yaml"]
    compose += ["-f", "tests/compose.test.yaml"]

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*compose, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
        )

    up = run("up", "-d", "--build")
    try:
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        container = f"{project}_boxed_1"
        if not health(container):
            container = f"{project}-boxed-1"  # compose v2 naming
        deadline = time.monotonic() + 180
        while health(container) != "healthy":
            assert time.monotonic() < deadline, run("logs").stdout[-3000:]
            time.sleep(1)
        r = httpx.post(
            f"http://127.0.0.1:{port}/execute", json={"code": "print(6*7)", "input": ""}, timeout=30
        )
        assert r.status_code == 200 and r.json()["output"] == "42\n"
    finally:
        down = run("down", "--remove-orphans", timeout=120)
    assert down.returncode == 0, down.stderr
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
    )
    assert left.stdout.split() == []
    assert instance_containers(instance) == []
