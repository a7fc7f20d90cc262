"""Start a real boxed service in a subprocess: for integration tests and benchmarks (a checkout
only: it is not part of the shipped package)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
IMAGE = os.environ.get("BOXED_SANDBOX_IMAGE", "boxed-sandbox:latest")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def instance_containers(instance: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=boxed.instance={instance}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


class ServiceProcess:
    """A real ``python -m exec_server`` on a free loopback port."""

    def __init__(self, **env: str) -> None:
        self.instance = f"test-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "BOXED_INSTANCE": self.instance,
            "BOXED_POOL_SIZE": "4",
            # no warm session sandboxes unless a test asks (tests/test_session_pool_docker.py):
            # tests count a service's containers, and two idle ones would only cost CPU
            "BOXED_SESSION_POOL_SIZE": "0",
            "BOXED_SANDBOX_IMAGE": IMAGE,
            **env,
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.gettempdir()) / f"boxed-{self.instance}.log"

    def start(self, ready_timeout: float = 120.0, probe: str = "/readyz") -> ServiceProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exec_server", "--port", str(self.port)],
            cwd=REPO,
            env=self.env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.wait_ready(ready_timeout, probe)
        return self

    def wait_ready(self, timeout: float, probe: str = "/readyz") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()
            try:
                if httpx.get(f"{self.url}{probe}", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"service not ready in {timeout} s:\n{self.log.read_text()[-3000:]}")

    def stop(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.unlink(missing_ok=True)  # failures already quote it (wait_ready)
        return self.proc.returncode
