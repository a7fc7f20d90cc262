"""Sandboxes on a Docker engine: hardened containers running the guest supervisor.

Two backends share everything here and differ only in reuse:

* ``docker-process`` (process isolation): a pooled container serves snippet after snippet, each
  in a freshly forked child of its supervisor, and is proven clean between them;
* ``docker-container`` (container isolation): a fresh container per snippet, removed after it.

The same supervisor decides every verdict in both, so the two modes agree by construction.
Only this module imports ``docker`` or knows a container id's meaning. Engine calls block and run
in threads; the supervisor's stream is read on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
import socket
import struct
import tarfile
import threading
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import docker.errors
import requests.exceptions
from docker.types import LogConfig, Ulimit

import docker

from ..guest import bootstrap_source, packed_sources
from ..guest.protocol import pop_frames
from ..image_labels import sandbox_versions
from ..image_scan import ChunkReader, ImageReport, ScanCache, scan_tar
from ..settings import Settings
from .base import BackendHealth, SandboxError, SessionSpec
from .host_uids import FORK_UIDS_LABEL, UID_LABEL, Lease, LeaseBlock, sandbox_uids
from .session_seccomp import session_profile
from .supervised import (
    SANDBOX_ENV,
    Preload,
    SocketStream,
    SupervisedSandbox,
    runs_per_sandbox,
    supervisor_config,
)

log = logging.getLogger("boxed.docker")
SERVICE_LABEL = "boxed.service"
INSTANCE_LABEL = "boxed.instance"
BACKEND_LABEL = "boxed.backend"
SESSION_LABEL = "boxed.session"  # a session's container: the session's id (docker ps --filter)
EXIT_WAIT = 1.0  # longest wait for a finished container to exit before it is removed
# The supervisor's socket (guest/bootstrap.py) in a tmpfs only root can enter; the service
# connects from outside, or writes KEEP_ATTACH on stdin when it cannot.
SOCKET_DIR = "/run/boxed"
SOCKET_PATH = f"{SOCKET_DIR}/host.sock"
SOCKET_WAIT = 10.0  # from the container's start to the socket's bind: the interpreter's start-up
SOCKET_RETRY = 0.005
KEEP_ATTACH = b"a"
UID_LIST_TTL = 1.0  # longest a listing of the engine's sandbox uids is trusted
WARMUP_TIMEOUT = 60.0
DIAGNOSTICS_KEPT = 2000
GVISOR_HOST_PIDS = 16384  # host tasks of one gVisor sandbox: the sentry's, the gofer's, stubs
# The supervisor's only privileges: dropping a child's ids and killing what the snippet left
# (docs/process-mode.md, threat model).
SUPERVISOR_CAPS = ["SETUID", "SETGID", "KILL"]
# Under gVisor also CAP_SYS_PTRACE, the sentry's (no host capability): a session's PID 1 stops
# its interpreter for a moment to see where it waits, which gVisor's /proc does not show.
GVISOR_SUPERVISOR_CAPS = [*SUPERVISOR_CAPS, "SYS_PTRACE"]
# Objects in these namespaces outlive the processes that made them: allow none at all.
IPC_SYSCTLS = {
    "kernel.shmmax": "0",
    "kernel.shmall": "0",
    "kernel.shm_rmid_forced": "1",
    "kernel.msgmni": "0",
    "kernel.sem": "0 0 0 0",
    "fs.mqueue.queues_max": "0",
}
# No TIME_WAIT entries: a closed loopback connection would otherwise hold its port for 60 s
# in the next snippet's namespace (process mode); the supervisor also retires a container
# whose network counters moved.
NET_SYSCTLS = {"net.ipv4.tcp_max_tw_buckets": "0"}
# Docker 20.10's default seccomp profile less io_uring_setup/enter/register (as Docker 25+):
# io_uring bypasses the syscall filter for the operations it submits.
SECCOMP_PROFILE = json.dumps(json.loads((Path(__file__).parent / "seccomp.json").read_text()))
# What a call to the engine may raise: docker-py's own errors, and the transport's (a vanished
# socket is a requests ConnectionError, a stuck engine a ReadTimeout).
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


def _raw_socket(sock: object) -> socket.socket:
    return getattr(sock, "_sock", sock)  # docker-py hands back a SocketIO over a unix socket


def _running(proc: Path) -> bool:
    """Whether the process of ``proc`` (its /proc directory) runs: not gone, not a zombie."""
    try:
        state = (proc / "stat").read_bytes().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


class AttachStream(SocketStream):
    """The supervisor's stdin/stdout through Docker's attach socket, on the event loop.

    Docker multiplexes the container's stdout and stderr in 8-byte-header frames; stdout is the
    supervisor's protocol, stderr only diagnostics (kept, short)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        self._raw = bytearray()
        self._diagnostics = bytearray()

    async def receive(self) -> bytes:
        loop = asyncio.get_running_loop()
        while True:
            out = self._demultiplex()
            if out:
                return out
            chunk = await loop.sock_recv(self.sock, 65536)
            if not chunk:
                return b""
            self._raw += chunk

    def _demultiplex(self) -> bytes:
        """The stdout in the complete frames read so far; stderr goes to the diagnostics."""
        out = bytearray()
        for kind, data in pop_frames(self._raw):
            if kind == 1:
                out += data
            else:
                self._diagnostics = (self._diagnostics + data)[-DIAGNOSTICS_KEPT:]
        return bytes(out)

    def diagnostics(self) -> str:
        return self._diagnostics.decode(errors="replace").strip()

    def read_diagnostics(self) -> str:
        """The diagnostics, with what the engine has sent since, read without waiting (for an
        attach stream that carries only stderr)."""
        try:
            while chunk := self.sock.recv(65536):
                self._raw += chunk
        except OSError:  # BlockingIOError: nothing more yet
            pass
        self._demultiplex()
        return self.diagnostics()


class DirectStream(SocketStream):
    """The supervisor's stdin/stdout over the unix socket it accepted from this service
    (``guest/bootstrap.py``), with no engine process between the two ends: dockerd and
    containerd-shim copied every request and answer once each way (about 0.5 ms of their CPU
    per snippet here). Its stderr still comes through the attach stream, which carries nothing
    else (the supervisor writes there only as it fails) and is read when the diagnostics are
    wanted, and to its end once the supervisor has exited."""

    def __init__(self, sock: socket.socket, attach: AttachStream) -> None:
        super().__init__(sock)
        self.attach = attach

    async def receive(self) -> bytes:
        data = await super().receive()
        if not data:  # the supervisor exited: its last words may still be in the engine
            await self.attach.wait_closed(EXIT_WAIT)
        return data

    def diagnostics(self) -> str:
        return self.attach.read_diagnostics()

    def close(self) -> None:
        super().close()
        self.attach.close()


_told_attach = threading.Event()


def _fell_back_to_attach(exc: OSError) -> None:
    """Say once per process why supervisors are reached through the attach stream: under
    compose (no host PID namespace) every backend and container would otherwise repeat it,
    and the service's first log would look broken though it works."""
    if not _told_attach.is_set():
        _told_attach.set()
        log.info(
            "reaching sandbox supervisors through the engine's attach stream (about 0.6 ms "
            "more CPU per snippet), not their own socket: %s; expected when the service does "
            "not run as root in the host's PID namespace, as under compose "
            "(BOXED_SUPERVISOR_SOCKET=false skips the attempt)",
            exc,
        )


class DockerSandbox(SupervisedSandbox):
    """One container with its supervisor."""

    stream: SocketStream

    def __init__(
        self, backend: DockerBackend, container_id: str, stream: SocketStream, memory_mb: int
    ) -> None:
        s = backend.settings
        super().__init__(
            container_id,
            stream,
            memory_mb,
            reusable=backend.reuses_sandboxes,
            max_runs=runs_per_sandbox(s, backend.reuses_sandboxes),
            preload=backend.preload,
        )
        self.backend = backend

    async def resize(self, memory_mb: int) -> None:
        if self.backend.resizable:
            await self.backend.resize(self.id, memory_mb)
        self.memory_mb = memory_mb  # the child's own limit, which the supervisor sets

    async def oom_killed(self) -> bool:
        return await self.backend.oom_killed(self.id)

    async def discard(self) -> bool:
        if self.runs and not self.reusable and not self.broken:
            # After its one run the supervisor exits when its stdin closes: removing an exited
            # container costs the engine a delete only, a moment earlier a kill too.
            await self.stream.close_input()
            await self.stream.wait_closed(EXIT_WAIT)
        self.stream.close()
        return await self.backend.remove(self.id)


class DockerBackend:
    """Hardened containers on a Docker engine; ``reuse`` selects the isolation mode."""

    def __init__(
        self, settings: Settings, *, reuse: bool, client: docker.DockerClient | None = None
    ) -> None:
        self.settings = settings
        self.reuses_sandboxes = reuse
        self.name = "docker-process" if reuse else "docker-container"
        self.preload = Preload.for_backend(settings, reuse)
        self._client = client
        self._client_lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(settings.max_concurrency * 2 + 16)
        gvisor = settings.runtime == "runsc"
        # gVisor's runsc cannot update a running container's limits: its containers are made
        # with room for the largest request, and each child keeps its own limit (RLIMIT_AS).
        self.resizable = not gvisor
        # Under gVisor the host's pids cgroup counts the sentry's threads and stub processes,
        # so it only backstops; the snippet's own process limit is RLIMIT_NPROC, which each
        # gVisor kernel counts for its own sandbox alone (on runc it would count the sandbox
        # uid across every container of the host: there the pids cgroup is the limit).
        self.host_pids_limit = GVISOR_HOST_PIDS if gvisor else settings.pids_limit
        # gVisor's sentry keeps the container's files to itself: no socket to reach from here.
        # Until this service finds it cannot reach the socket:
        self.direct = settings.supervisor_socket and not gvisor
        self.child_nproc = settings.pids_limit if gvisor else None
        self.supervisor_caps = GVISOR_SUPERVISOR_CAPS if gvisor else SUPERVISOR_CAPS
        # each container runs its code as a host uid of its own, held until it is removed
        self.uids = sandbox_uids(settings)
        self._leases: dict[str, Lease | LeaseBlock] = {}
        self._labelled: tuple[float, frozenset[str]] = (-UID_LIST_TTL, frozenset())
        self._labelled_lock = threading.Lock()
        # The image id the service checked (``exec_server.images``): containers are made
        # from it, not from the tag, which may have moved to an image not checked yet.
        self.pinned_image: str | None = None
        self._image_env: dict[str, list[str]] = {}  # each image's ENV (``snippet_env``)
        self.labels = {
            SERVICE_LABEL: "boxed",
            INSTANCE_LABEL: settings.instance_label,
            BACKEND_LABEL: self.name,
        }

    # -- engine calls, in threads ---------------------------------------------------------------
    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=self._limiter)

    @property
    def api(self) -> docker.APIClient:
        """The engine's API client, made on first use: the engine may be down at start-up."""
        with self._client_lock:
            if self._client is None:
                try:
                    self._client = docker.from_env(max_pool_size=128, timeout=30)
                except ENGINE_ERRORS as exc:
                    raise SandboxError(f"Docker engine unreachable: {exc}") from exc
            return self._client.api

    # -- the container's make-up ----------------------------------------------------------------
    def command(
        self, lease: Lease | LeaseBlock, session: SessionSpec | None = None, direct: bool = False
    ) -> list[str]:
        """The supervisor's command line; its code runs as ``lease``'s uid (a session's forks
        as the block's others)."""
        config = supervisor_config(
            self.settings,
            reuse=self.reuses_sandboxes,
            nproc=self.child_nproc,
            preload_at_start=self.preload.at_start,
            user=(lease.uid, lease.gid),
            session=session,
            fork_uids=lease.fork_uids if isinstance(lease, LeaseBlock) else (),
        )
        config = dataclasses.replace(config, env=self.snippet_env())
        if direct:
            config = dataclasses.replace(config, socket=SOCKET_PATH)
        wire = json.dumps(config.to_wire())
        sources = packed_sources(config.program)
        return ["python3", "-I", "-u", "-c", bootstrap_source(), sources, wire]

    def snippet_env(self) -> list[str]:
        """Every snippet's environment: the image's ``ENV`` with the service's variables over it,
        as the engine merges them. The guest runs with no environment of its own and gives its
        snippets this one, from its configuration (``guest/bootstrap.py``)."""
        image = self.pinned_image or self.settings.sandbox_image
        if image not in self._image_env:  # an image's ENV never changes: inspected once
            self._image_env[image] = self.api.inspect_image(image)["Config"].get("Env") or []
        merged = dict(entry.split("=", 1) for entry in self._image_env[image] if "=" in entry)
        return [f"{name}={value}" for name, value in {**merged, **SANDBOX_ENV}.items()]

    def container_labels(
        self, lease: Lease | LeaseBlock, session: SessionSpec | None = None
    ) -> dict[str, str]:
        """The labels of a new container: the backend's, its uids (``uid_in_use``), and a
        session's id on its sandbox (``docker ps --filter label=boxed.session=ID``)."""
        labels = {**self.labels, UID_LABEL: str(lease.uid)}
        if isinstance(lease, LeaseBlock):
            labels[FORK_UIDS_LABEL] = ",".join(map(str, lease.fork_uids))
        if session is not None:
            labels[SESSION_LABEL] = session.session_id
        return labels

    def lease_uid(self) -> Lease:
        """A uid for a new container, of its own on the host (``host_uids``)."""
        return self.uids.acquire(self.uid_in_use)

    def lease_block(self, forks: int) -> Lease | LeaseBlock:
        """A new container's uids: one, or a forkable session's one plus one per fork."""
        if forks == 0:
            return self.lease_uid()
        leases: list[Lease] = []
        try:
            for _ in range(1 + forks):
                leases.append(self.lease_uid())
        except BaseException:
            for lease in leases:
                lease.release()
            raise
        return LeaseBlock(leases)

    def uid_in_use(self, uid: int) -> bool:
        """Whether a container of the engine still carries ``uid`` (a crashed service's, not
        reaped yet, whose lock died with it). Read from a listing at most ``UID_LIST_TTL``
        old: one engine call per second, not one per container (35 ms each on a loaded host)."""
        with self._labelled_lock:
            listed_at, labelled = self._labelled
            if time.monotonic() - listed_at >= UID_LIST_TTL:
                filters = {"label": [f"{SERVICE_LABEL}=boxed", UID_LABEL]}
                try:
                    listed = self.api.containers(all=True, filters=filters)
                except ENGINE_ERRORS as exc:
                    raise SandboxError(f"cannot list sandboxes: {exc}") from exc
                labelled = frozenset(
                    uid
                    for c in listed
                    for uid in (
                        c["Labels"][UID_LABEL],
                        *filter(None, c["Labels"].get(FORK_UIDS_LABEL, "").split(",")),
                    )
                )
                self._labelled = (time.monotonic(), labelled)
        return str(uid) in labelled

    def hold(self, container_id: str, lease: Lease | LeaseBlock) -> None:
        """Keep ``lease`` until the container is removed."""
        self._leases[container_id] = lease

    def user_of(self, container_id: str) -> tuple[int, int] | None:
        """The uid and gid a live container of this backend runs its code as."""
        lease = self._leases.get(container_id)
        return None if lease is None else (lease.uid, lease.gid)

    def container_memory_mb(self, memory_mb: int) -> int:
        """The container's limit for a snippet limit of ``memory_mb``: the supervisor's too."""
        return memory_mb + self.settings.process_memory_overhead_mb

    def host_options(self, memory_mb: int, socket: bool = False) -> dict[str, Any]:
        """The container's hardening and limits; ``socket``: with the supervisor's socket
        directory (``direct``: a container the service reaches over that socket)."""
        s = self.settings
        fsize = s.tmpfs_mb * 1024 * 1024
        limit = f"{self.container_memory_mb(memory_mb)}m"
        return dict(
            network_mode="none",
            read_only=True,
            tmpfs={
                "/tmp": f"rw,noexec,nosuid,nodev,size={s.tmpfs_mb}m,nr_inodes=4096,mode=1777",
                # compiled programs: root's, mode 0755 (runnable, not writable by snippets)
                "/box": f"rw,exec,nosuid,nodev,size={s.tmpfs_mb}m,nr_inodes=16,mode=0755",
                # the supervisor's socket until the service has connected: root's alone
                **(
                    {SOCKET_DIR: "rw,noexec,nosuid,nodev,size=16k,nr_inodes=4,mode=0700"}
                    if socket
                    else {}
                ),
            },
            cap_drop=["ALL"],
            cap_add=self.supervisor_caps,
            security_opt=["no-new-privileges", f"seccomp={SECCOMP_PROFILE}"],
            sysctls={**IPC_SYSCTLS, **NET_SYSCTLS},
            pids_limit=self.host_pids_limit,
            mem_limit=limit,
            memswap_limit=limit,
            nano_cpus=int(s.cpus * 1e9),
            cpuset_cpus=s.cpuset,  # None: any CPU
            ulimits=[
                Ulimit(name="nofile", soft=s.nofile, hard=s.nofile),
                Ulimit(name="fsize", soft=fsize, hard=fsize),
                Ulimit(name="core", soft=0, hard=0),
            ],
            init=False,  # the supervisor is PID 1: the reaper of every orphan
            ipc_mode="none",
            log_config=LogConfig(type=LogConfig.types.NONE),
            runtime=s.runtime,
        )

    def _create_and_start(
        self, memory_mb: int, session: SessionSpec | None = None
    ) -> tuple[str, SocketStream]:
        kind = "session" if session is not None else self.name[7:]
        name = f"boxed-{self.settings.instance_label}-{kind}-{uuid.uuid4().hex[:10]}"
        # A container that serves one snippet would pay more for finding the socket (an
        # engine call, the polling) than the attach stream costs it.
        direct = self.direct and (self.reuses_sandboxes or session is not None)
        forks = session.max_forks if session is not None else 0
        options = self.host_options(memory_mb * (1 + forks), socket=direct)
        if forks:  # its forks take user namespaces (``session_seccomp``)
            options["security_opt"] = ["no-new-privileges", f"seccomp={session_profile()}"]
        lease = self.lease_block(forks)
        try:
            container_id = self.api.create_container(
                self.pinned_image or self.settings.sandbox_image,
                command=self.command(lease, session, direct),
                entrypoint=[""],  # an operator image's own would wrap the supervisor
                user="0:0",  # the supervisor; only root can hold capabilities (no ambient caps)
                environment=SANDBOX_ENV,
                working_dir="/tmp",
                hostname="sandbox",
                labels=self.container_labels(lease, session),
                name=name,
                stdin_open=True,  # and StdinOnce (docker-py, not detached): our end of the
                # attach stream closing ends the supervisor's stdin
                network_disabled=True,
                host_config=self.api.create_host_config(**options),
            )["Id"]
        except ENGINE_ERRORS as exc:
            lease.release()  # no container: a failed create leaves none behind
            raise SandboxError(f"cannot create sandbox: {exc}") from exc
        except BaseException:
            lease.release()
            raise
        self.hold(container_id, lease)
        try:
            params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            sock = _raw_socket(self.api.attach_socket(container_id, params=params))
            self.api.start(container_id)
            return container_id, self._direct_stream(
                container_id, sock
            ) if direct else AttachStream(sock)
        except Exception as exc:
            self._remove_now(container_id)
            raise SandboxError(f"cannot start sandbox: {exc}") from exc

    def _direct_stream(self, container_id: str, attach: socket.socket) -> SocketStream:
        """A stream over the supervisor's own socket, or the attach stream when this service
        cannot reach that socket: then the reason is logged and later containers skip it."""
        pid = int(self.api.inspect_container(container_id)["State"]["Pid"])
        try:
            connection = self._connect_to_supervisor(container_id, pid)
        except OSError as exc:
            self.direct = False
            _fell_back_to_attach(exc)
            attach.sendall(KEEP_ATTACH)  # the supervisor stops listening
            return AttachStream(attach)
        if connection is None:  # it exited first: the warm-up reads its last words
            return AttachStream(attach)
        return DirectStream(connection, AttachStream(attach))

    def _connect_to_supervisor(self, container_id: str, pid: int) -> socket.socket | None:
        """A connection to the socket the container's supervisor (host PID ``pid``) listens
        on, reached through its root directory in /proc: a service in the host's PID
        namespace, as root, sees it. None if the supervisor exited before it listened; OSError
        if this service cannot reach it."""
        proc = Path(f"/proc/{pid}")
        try:
            ours = container_id in (proc / "cgroup").read_text()
        except OSError:
            ours = False
        if not ours:
            raise OSError(
                f"the container's process {pid} is not visible here (a service in a PID "
                "namespace of its own, as in a container, cannot reach its socket)"
            )
        path = f"{proc}/root{SOCKET_PATH}"
        deadline = time.monotonic() + SOCKET_WAIT
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            try:
                sock.connect(path)
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()  # not bound yet, or not listening yet
                if not _running(proc):
                    return None
                if time.monotonic() > deadline:
                    raise OSError(f"no supervisor socket at {path} after {SOCKET_WAIT} s") from None
                time.sleep(SOCKET_RETRY)
                continue
            except OSError:
                sock.close()
                raise
            peer, _, _ = struct.unpack(
                "3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            )
            if peer != pid:
                sock.close()
                raise OSError(f"the socket at {path} is process {peer}'s, not the supervisor's")
            return sock

    # -- the interface ----------------------------------------------------------------------------
    async def create_warm(self, memory_mb: int | None = None) -> DockerSandbox:
        memory_mb = memory_mb or self.settings.memory_mb_default
        room = memory_mb if self.resizable else self.settings.memory_mb_max
        container_id, stream = await self._call(self._create_and_start, room)
        return await self._ready(DockerSandbox(self, container_id, stream, memory_mb))

    async def create_session(self, spec: SessionSpec) -> DockerSandbox:
        """A container of its own running the session program (``guest/session.py``), with
        the one-shot sandboxes' options: its memory limit is the session's, for its life."""
        container_id, stream = await self._call(self._create_and_start, spec.memory_mb, spec)
        sandbox = DockerSandbox(self, container_id, stream, spec.memory_mb)
        # Discarded like a used one-shot container: its stdin closes first, and the session
        # program exits by itself (an exited container is removed faster).
        sandbox.reusable = False
        return await self._ready(sandbox)

    async def _ready(self, sandbox: DockerSandbox) -> DockerSandbox:
        """The sandbox once its supervisor says ready; removed if it never does."""
        try:
            await sandbox.wait_ready(WARMUP_TIMEOUT)
        except BaseException:
            sandbox.stream.close()
            await asyncio.shield(self.remove(sandbox.id))
            raise
        return sandbox

    async def resize(self, container_id: str, memory_mb: int) -> None:
        limit = f"{self.container_memory_mb(memory_mb)}m"
        try:
            await self._call(
                self.api.update_container, container_id, mem_limit=limit, memswap_limit=limit
            )
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot set memory limit: {exc}") from exc

    def _oom_killed(self, container_id: str) -> bool:
        try:
            self.api.wait(container_id, timeout=10)  # its PID 1 is gone: it stops at once
            return bool(self.api.inspect_container(container_id)["State"]["OOMKilled"])
        except Exception as exc:  # cannot tell: an engine problem must not pass as a verdict
            log.warning("cannot read the exit state of %s: %s", container_id[:12], exc)
            return False

    async def oom_killed(self, container_id: str) -> bool:
        """Whether the kernel's OOM killer acted in the container (the engine's own record)."""
        return await self._call(self._oom_killed, container_id)

    def _remove_now(self, container_id: str) -> bool:
        """Remove a container, then give its uid back; a container that may still exist
        keeps its uid (the process's exit releases it)."""
        try:
            self.api.remove_container(container_id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except Exception:
            return False
        lease = self._leases.pop(container_id, None)
        if lease is not None:
            lease.release()
        return True

    async def remove(self, sandbox_id: str) -> bool:
        return await self._call(self._remove_now, sandbox_id)

    async def list_owned(self) -> list[str]:
        filters = {"label": [f"{k}={v}" for k, v in self.labels.items()]}
        try:
            listed = await self._call(self.api.containers, all=True, filters=filters)
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot list sandboxes: {exc}") from exc
        return [c["Id"] for c in listed]

    def _health(self) -> BackendHealth:
        try:
            up = bool(self.api.ping())
        except Exception as exc:
            return BackendHealth(up=False, problem=f"Docker engine unreachable: {exc}")
        image = self.settings.sandbox_image
        try:
            inspected = self.api.inspect_image(image)
            labels = inspected.get("Config", {}).get("Labels")
        except docker.errors.ImageNotFound:
            problem = (
                f"sandbox image {image} is missing; build it with "
                "`python -m tools.build_image --offline` (or `docker compose build`)"
            )
            return BackendHealth(up=up, problem=problem, details={"image_present": False})
        except Exception as exc:
            return BackendHealth(up=up, problem=f"cannot inspect image {image}: {exc}")
        return BackendHealth(
            up=up,
            details={
                "image_present": True,
                "image_id": inspected.get("Id"),  # part of the result cache's key
                "sandbox": sandbox_versions(labels),
            },
        )

    async def health(self) -> BackendHealth:
        return await self._call(self._health)

    def _examine_image(self, cache: ScanCache) -> ImageReport:
        image = self.settings.sandbox_image
        try:
            inspected = self.api.inspect_image(image)
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot inspect image {image}: {exc}") from exc
        image_id = inspected["Id"]
        labels = inspected.get("Config", {}).get("Labels") or {}
        scan = cache.get(image_id)
        if scan is not None:
            return ImageReport(image, image_id, labels, scan)
        started = time.monotonic()
        # Created from the id just inspected (a tag moved meanwhile is not what was scanned),
        # never started; labelled as the backend's, so the reaper removes one a crash left.
        try:
            container = self.api.create_container(
                image_id, command=["/nonexistent"], labels=self.labels, network_disabled=True
            )["Id"]
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot scan image {image}: {exc}") from exc
        try:
            scan = scan_tar(io.BufferedReader(ChunkReader(self.api.export(container, 1 << 20))))
        except (*ENGINE_ERRORS, tarfile.TarError) as exc:
            raise SandboxError(f"cannot scan image {image}: {exc}") from exc
        finally:
            self._remove_now(container)
        cache.put(image_id, scan)
        return ImageReport(image, image_id, labels, scan, time.monotonic() - started)

    async def examine_image(self, cache: ScanCache) -> ImageReport:
        """The sandbox image's id, labels and filesystem scan (``image_scan``), the scan from
        ``cache`` when it holds one for that id."""
        return await self._call(self._examine_image, cache)

    async def close(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
