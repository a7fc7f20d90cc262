"""The Docker stand-in for a cluster's sandbox pods (backend ``docker-pods``): what CI runs.

No cluster is reachable from CI, so Docker stands in for the kubelet: each "pod" is a sandbox
container with the pod's hardening (that of the Docker backends: read-only root, capabilities
dropped but the supervisor's three, no-new-privileges, the seccomp profile, the IPC and network
sysctls, a memory limit sized for the largest request as a pod's is), the shared secret
mounted read-only for root only, a root-only state directory, and ``guest/listener.py`` as
PID 1. Each is in its own network namespace that holds only a loopback interface (Docker's
``none`` network); the service reaches the listener on 127.0.0.1 *inside that namespace*, from
a short-lived helper thread that enters it (``setns``) to connect. No traffic ever goes to an
address outside 127.0.0.1 or a namespace made here. That needs root (CAP_SYS_ADMIN) on the
service's side, which a service in a cluster does not have or need: there it is a plain TCP
connection to the pod's IP.

The stand-in is also the controller: a claim starts a fresh container, a deletion removes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ..guest import GUEST_DIR
from ..settings import Settings
from .base import BackendHealth, SandboxError
from .docker import ENGINE_ERRORS, SANDBOX_ENV, DockerBackend
from .pods import PodBackend

KEY_PATH = "/run/secrets/boxed/sandbox-key"  # where the pod manifest mounts the secret
STATE_DIR = "/run/boxed"
CLONE_NEWNET = 0x40000000
CONNECT_RETRY = 0.02  # the listener binds its port a moment after the container starts
_libc = ctypes.CDLL(None, use_errno=True)


def connect_in_netns(pid: int, port: int, deadline: float) -> socket.socket:
    """A TCP connection to 127.0.0.1:``port`` in the network namespace of process ``pid``.

    Made in a thread of its own that enters the namespace and then ends: ``setns`` moves only
    the calling thread, and a thread that ends need not move back (no pool thread is ever left
    in a sandbox's namespace). The socket belongs to the namespace it was made in."""
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into the sandbox's network: {os.strerror(err)}")
            finally:
                os.close(fd)
            while True:
                try:
                    result["sock"] = socket.create_connection(("127.0.0.1", port), timeout=2)
                    return
                except ConnectionRefusedError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(CONNECT_RETRY)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            result["error"] = exc

    thread = threading.Thread(target=work, name="boxed-netns-connect", daemon=True)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["sock"]


class DockerPods:
    """A ``PodSource`` whose pods are hardened containers on the Docker engine."""

    def __init__(self, settings: Settings, *, reuse: bool, key_file: Path) -> None:
        self.engine = DockerBackend(settings, reuse=reuse)
        self.name = "docker-pods" if reuse else "docker-pods-container"
        self.engine.labels = {**self.engine.labels, "boxed.backend": self.name}
        self.settings = settings
        self.key_file = key_file
        self.listener = (GUEST_DIR / "listener.py").read_text()

    def _command(self) -> list[str]:
        port = str(self.settings.pod_port)
        args = ["--port", port, "--host", "0.0.0.0", "--key", KEY_PATH, "--state", STATE_DIR]
        return ["python3", "-I", "-u", "-c", self.listener, *args]

    def _host_config(self) -> dict[str, Any]:
        options = self.engine.host_options(self.settings.memory_mb_max)
        options["tmpfs"] = {
            **options["tmpfs"],
            STATE_DIR: "rw,noexec,nosuid,nodev,size=1m,mode=0700",
        }
        options["binds"] = {str(self.key_file): {"bind": KEY_PATH, "mode": "ro"}}
        return options

    def _start(self, kind: str) -> tuple[str, int]:
        """Create and start one pod; its container id and the pid of its PID 1."""
        api = self.engine.api
        name = f"boxed-{self.settings.instance_label}-{kind}-{uuid.uuid4().hex[:10]}"
        lease = self.engine.lease_uid()  # the pod's own host uid, until it is removed
        try:
            container_id = api.create_container(
                self.settings.sandbox_image,
                command=self._command(),
                user="0:0",
                environment=SANDBOX_ENV,
                working_dir="/tmp",
                hostname="sandbox",
                labels=self.engine.container_labels(lease),
                name=name,
                network_disabled=False,
                host_config=api.create_host_config(**self._host_config()),
            )["Id"]
        except ENGINE_ERRORS as exc:
            lease.release()
            raise SandboxError(f"cannot create sandbox pod: {exc}") from exc
        except BaseException:
            lease.release()
            raise
        self.engine.hold(container_id, lease)
        try:
            api.start(container_id)
            pid = int(api.inspect_container(container_id)["State"]["Pid"])
            if not pid:
                raise SandboxError("the sandbox pod exited at once")
            return container_id, pid
        except Exception as exc:
            self.engine._remove_now(container_id)
            raise SandboxError(f"cannot start sandbox pod: {exc}") from exc

    def _start_and_connect(self, deadline: float, kind: str) -> tuple[str, socket.socket]:
        container_id, pid = self._start(kind)
        try:
            return container_id, connect_in_netns(pid, self.settings.pod_port, deadline)
        except OSError as exc:
            self.engine._remove_now(container_id)
            gone = exc.errno == errno.ENOENT
            why = "the sandbox pod exited" if gone else str(exc)
            raise SandboxError(f"cannot reach the sandbox pod's listener: {why}") from exc

    async def connect(self, deadline: float, session: bool = False) -> tuple[str, socket.socket]:
        left = deadline - asyncio.get_running_loop().time()
        kind = "session" if session else "pod"  # named as the Docker backend names them
        return await self.engine._call(self._start_and_connect, time.monotonic() + left, kind)

    def refused(self, pod_id: str, why: Exception) -> bool:
        return False  # nobody else claims the stand-in's pods: this one is broken

    def claimed(self, pod_id: str) -> None:
        pass

    def user_of(self, pod_id: str) -> tuple[int, int] | None:
        return self.engine.user_of(pod_id)

    def retiring(self, pod_id: str) -> bool:
        return False

    async def oom_killed(self, pod_id: str) -> bool:
        return await self.engine.oom_killed(pod_id)

    async def delete(self, pod_id: str) -> bool:
        return await self.engine.remove(pod_id)

    async def list_owned(self) -> list[str]:
        return await self.engine.list_owned()

    async def health(self) -> BackendHealth:
        return await self.engine.health()

    async def close(self) -> None:
        await self.engine.close()


class DockerPodBackend(PodBackend):
    """The pod backend over the stand-in; owns the secret file when it made it."""

    def __init__(self, settings: Settings, *, reuse: bool) -> None:
        self._own_key: Path | None = None
        if settings.pod_key_file is None:
            backend = "docker-pods" if reuse else "docker-pods-container"
            self._own_key = new_key_file(f"{settings.instance_label}-{backend}")
            settings = settings.model_copy(update={"pod_key_file": str(self._own_key)})
        key_file = Path(str(settings.pod_key_file))
        super().__init__(
            settings, DockerPods(settings, reuse=reuse, key_file=key_file), reuse=reuse
        )

    async def close(self) -> None:
        await super().close()
        if self._own_key is not None:
            self._own_key.unlink(missing_ok=True)


def new_key_file(owner: str) -> Path:
    """A fresh shared secret in a file only root can read (the snippet's uid cannot), named
    after its owner (service instance and backend): the successor of a killed service (same
    instance) replaces the file its predecessor could not remove."""
    path = Path(tempfile.gettempdir()) / f"boxed-pod-key-{owner}"
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # ours from a killed predecessor; another user's stays (then O_EXCL fails)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(32).hex().encode())
    return path
