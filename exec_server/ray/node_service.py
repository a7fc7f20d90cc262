"""One node's boxed service, owned by a Ray actor pinned to that node.

The actor runs ``python -m exec_server`` as its child (:mod:`exec_server.ray.child`) on a fixed
host and port, under a fixed instance label, and starts it again whenever it exits: a crashed
service comes back on the same URL, and its successor reaps the sandboxes it left (the
engine removes every container of its instance label at start). The child dies with the
actor, so neither a service nor a container outlives it.

This module does not import Ray: Ray makes the class an actor (:mod:`exec_server.ray`).
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from exec_server.ray.child import service_pid

log = logging.getLogger("boxed.ray")

PORT_WAIT = 60.0  # longest wait for a predecessor still stopping to free the port
RESTART_DELAY = 0.5  # first delay before starting a service that exited; doubles up to:
RESTART_DELAY_MAX = 10.0
STABLE_AFTER = 30.0  # a service that ran this long before exiting restarts after RESTART_DELAY


@dataclass(frozen=True)
class ServiceSpec:
    """Where and how one node's service runs; what :func:`exec_server.ray.reconcile` copies to
    a node that joins later (``default_port``, ``env``, ``num_cpus``)."""

    node_id: str
    host: str
    port: int
    default_port: int = 5002
    env: dict[str, str] = field(default_factory=dict)
    num_cpus: float = 0

    @property
    def instance(self) -> str:
        """The instance label: fixed per node, so a restarted service reaps its predecessor's
        sandboxes and never another node's (several nodes may share one Docker engine)."""
        return f"ray-{self.node_id[:16]}"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


class NodeService:
    """Keeps one boxed service running on this node until :meth:`stop`."""

    def __init__(self, spec: ServiceSpec) -> None:
        self.spec = spec
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._starts = 0
        self._stopping = threading.Event()
        # The thread that starts every child: the child's death signal fires when the thread
        # that forked it ends, so it must live as long as the actor (it does, until stop).
        self._keeper = threading.Thread(target=self._keep, name="boxed-keeper", daemon=True)
        self._keeper.start()

    # -- the child ------------------------------------------------------------------------------
    def _keep(self) -> None:
        delay = RESTART_DELAY
        while not self._stopping.is_set():
            _wait_port_free(self.spec.host, self.spec.port, self._stopping)
            proc = self._spawn()
            if proc is None:
                return
            started = time.monotonic()
            code = proc.wait()
            if self._stopping.is_set():
                return
            delay = RESTART_DELAY if time.monotonic() - started > STABLE_AFTER else delay
            log.warning(
                "boxed on node %s (pid %d) exited with %s; starting it again in %.1f s",
                self.spec.node_id,
                proc.pid,
                code,
                delay,
            )
            self._stopping.wait(delay)
            delay = min(delay * 2, RESTART_DELAY_MAX)

    def _spawn(self) -> subprocess.Popen[bytes] | None:
        env = {**os.environ, **self.spec.env, "BOXED_INSTANCE": self.spec.instance}
        command = [sys.executable, "-m", "exec_server.ray.child", str(os.getpid())]
        command += ["--host", self.spec.host, "--port", str(self.spec.port)]
        with self._lock:
            if self._stopping.is_set():
                return None
            # its own session: a signal to the actor's process group is not the service's stop
            self._proc = subprocess.Popen(command, env=env, start_new_session=True)
            self._starts += 1
            return self._proc

    # -- the actor's methods --------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """The service's URL, instance and current process (``pid``, the service's own, not its
        launcher's; None between two runs)."""
        with self._lock:
            proc = self._proc
            alive = proc is not None and proc.poll() is None
            return {
                "node_id": self.spec.node_id,
                "url": self.spec.url,
                "instance": self.spec.instance,
                "pid": service_pid(proc.pid) if alive and proc is not None else None,
                "starts": self._starts,
                "spec": asdict(self.spec),
            }

    def ready(self) -> bool:
        """Whether the service answers ``/readyz`` with 200 (engine up, pool warm)."""
        try:
            return httpx.get(f"{self.spec.url}/readyz", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for :meth:`ready`."""
        end = time.monotonic() + timeout
        while not self.ready():
            if time.monotonic() >= end or self._stopping.is_set():
                return False
            time.sleep(0.2)
        return True

    def stop(self, timeout: float = 60.0) -> int | None:
        """Stop the service for good (its graceful stop removes its sandboxes); its exit code."""
        self._stopping.set()
        with self._lock:
            proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._keeper.join(5)
        return proc.returncode


def _wait_port_free(host: str, port: int, stop: threading.Event) -> None:
    """Wait (at most :data:`PORT_WAIT`) until nothing listens on ``host:port``: after a crash of
    the actor its old service may still be stopping there."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    end = time.monotonic() + PORT_WAIT
    while time.monotonic() < end and not stop.is_set():
        with socket.socket(family) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            try:
                sock.bind((host, port))
                return
            except OSError:
                pass
        stop.wait(0.2)
