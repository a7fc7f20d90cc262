"""One hardened Docker container per snippet: create it warm, run one snippet, remove it.

Everything here is blocking docker-py work; the async layers call it from threads. A failure
of the engine (unreachable daemon, container removed from outside) raises ``SandboxError`` so
that it is answered as a service error, never mistaken for the code's own failure.
"""

from __future__ import annotations

import logging
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker.errors
import requests.exceptions
from docker.types import LogConfig, Ulimit

import docker

from .settings import Settings

log = logging.getLogger("boxed.sandbox")
RUNNER_SOURCE = (Path(__file__).parent / "sandbox_runner.py").read_text()
READY_MARKER = b"\x00boxed-ready\x00\n"
TRAILER_PREFIX = b"\x00boxed-exit:"
TRAILER_ROOM = 128  # bytes a stream may pass the cap by while the trailer is still to come
SERVICE_LABEL = "boxed.service"
INSTANCE_LABEL = "boxed.instance"
EXIT_WAIT = 1.0  # longest wait for a finished container to exit before it is removed
WARMUP_TIMEOUT = 60.0
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    # numeric libraries otherwise start one thread per host core, which pids_limit refuses
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
_MEMORY_ERROR_LINE = re.compile(rb"(?m)^MemoryError\b[^\n]*\n?\Z")
_STDOUT, _STDERR = 1, 2


# What a call to the engine may raise: docker-py's own errors, and the transport's (a vanished
# socket is a requests ConnectionError, a stuck engine a ReadTimeout).
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


class SandboxError(RuntimeError):
    """The sandbox infrastructure failed; the snippet's outcome is unknown."""


@dataclass
class WarmContainer:
    """A started container whose interpreter waits on stdin for its snippet (or snippets)."""

    id: str
    sock: socket.socket
    memory_mb: int
    runs: int = 0
    exiting: bool = False  # its runner finished and is exiting by itself
    _buffer: bytearray = field(default_factory=bytearray)
    _stdout: bytearray = field(default_factory=bytearray)  # demultiplexed, not yet parsed


@dataclass
class RunResult:
    status: str
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    truncated_stdout: bool
    truncated_stderr: bool
    duration_ms: float


def pop_frames(buffer: bytearray) -> Iterator[tuple[int, bytes]]:
    """Take complete frames (Docker's attach format: kind, 3 zero bytes, 4-byte big-endian
    length) off the front of ``buffer``; an incomplete tail stays for the next read."""
    while len(buffer) >= 8:
        kind, size = buffer[0], int.from_bytes(buffer[4:8], "big")
        if len(buffer) < 8 + size:
            return
        data = bytes(buffer[8 : 8 + size])
        del buffer[: 8 + size]
        yield kind, data


class Streams:
    """Demultiplexes Docker's attach stream (8-byte frame headers) into capped buffers."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.out = {_STDOUT: bytearray(), _STDERR: bytearray()}
        self.truncated = {_STDOUT: False, _STDERR: False}

    def feed_frames(self, buffer: bytearray) -> None:
        for kind, data in pop_frames(buffer):
            self.add(kind, data)

    def add(self, kind: int, data: bytes) -> None:
        target = self.out.get(kind)
        if target is None:
            return
        room = self.cap - len(target)
        if len(data) > room:
            self.truncated[kind] = True
            data = data[: max(room, 0)]
        target.extend(data)

    @property
    def over_cap(self) -> bool:
        return self.truncated[_STDOUT] or self.truncated[_STDERR]

    def clip(self, cap: int) -> bool:
        """Cut both streams to ``cap`` bytes (marking them truncated); True if any was over."""
        for kind, data in self.out.items():
            if len(data) > cap:
                del data[cap:]
                self.truncated[kind] = True
        return self.over_cap

    def result(self, status: str, exit_code: int | None, duration_ms: float) -> RunResult:
        """The run's answer from what was kept (both isolation modes build it here)."""
        return RunResult(
            status=status,
            exit_code=exit_code,
            stdout=bytes(self.out[_STDOUT]),
            stderr=bytes(self.out[_STDERR]),
            truncated_stdout=self.truncated[_STDOUT],
            truncated_stderr=self.truncated[_STDERR],
            duration_ms=round(duration_ms, 2),
        )


def verdict(exit_code: int, *, memory: bool) -> str:
    """The status of a run that ended by itself: a memory failure, else by its exit code."""
    if memory:
        return "memory_limit"
    return "ok" if exit_code == 0 else "error"


def runner_frame(code: str, stdin: str, nonce: str = "") -> bytes:
    """The frame ``sandbox_runner`` reads: the 4-byte big-endian lengths of the code, the input
    and the nonce, then the three. With a nonce the runner ends its stdout and stderr with an
    exit trailer (see ``take_trailer``)."""
    parts = [code.encode("utf-8", "surrogatepass"), stdin.encode("utf-8", "surrogatepass")]
    parts.append(nonce.encode())
    return b"".join(len(part).to_bytes(4, "big") for part in parts) + b"".join(parts)


def take_trailer(stdout: bytearray, nonce: str) -> tuple[int, bool] | None:
    """Cut the runner's exit trailer off the end of ``stdout``: (exit code, MemoryError?)."""
    if not stdout.endswith(b"\n"):
        return None
    start = stdout.rfind(TRAILER_PREFIX + nonce.encode() + b":", max(0, len(stdout) - TRAILER_ROOM))
    if start < 0:
        return None
    fields = bytes(stdout[start:]).rstrip(b"\n").split(b":")
    try:
        exit_code, memory_error = int(fields[-2]), fields[-1] == b"1"
    except (ValueError, IndexError):
        return None
    del stdout[start:]
    return exit_code, memory_error


def _raw_socket(sock: object) -> socket.socket:
    return getattr(sock, "_sock", sock)  # docker-py hands back a SocketIO over a unix socket


class DockerSandboxes:
    """Creates, runs and removes sandbox containers with the hardening of the settings.

    Container isolation: one container per snippet, never reused. Subclasses change what runs
    inside (``_command``, ``_user``, ``_host_options``) and whether a container may serve again
    (``can_reuse``/``settle``).
    """

    reuses_containers = False

    def __init__(self, settings: Settings, client: docker.DockerClient | None = None) -> None:
        self.settings = settings
        self._client = client
        self._client_lock = threading.Lock()
        self.labels = {SERVICE_LABEL: "boxed", INSTANCE_LABEL: settings.instance}

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

    # -- engine state --------------------------------------------------------------------
    def ping(self) -> bool:
        try:
            return bool(self.api.ping())
        except Exception:
            return False

    def image_present(self) -> bool:
        try:
            self.api.inspect_image(self.settings.sandbox_image)
            return True
        except docker.errors.ImageNotFound:
            return False
        except Exception as exc:
            raise SandboxError(f"cannot inspect image: {exc}") from exc

    # -- lifecycle -----------------------------------------------------------------------
    def _command(self) -> list[str]:
        return ["python3", "-I", "-u", "-c", RUNNER_SOURCE, ",".join(self.settings.preload_modules)]

    def _user(self) -> str:
        return self.settings.sandbox_user

    def container_memory_mb(self, memory_mb: int) -> int:
        """The container's memory limit for a snippet limit of ``memory_mb``."""
        return memory_mb

    def _host_options(self, memory_mb: int) -> dict[str, Any]:
        s = self.settings
        fsize = s.tmpfs_mb * 1024 * 1024
        limit = f"{self.container_memory_mb(memory_mb)}m"
        return dict(
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": f"rw,noexec,nosuid,nodev,size={s.tmpfs_mb}m,nr_inodes=4096,mode=1777"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=s.pids_limit,
            mem_limit=limit,
            memswap_limit=limit,
            nano_cpus=int(s.cpus * 1e9),
            ulimits=[
                Ulimit(name="nofile", soft=s.nofile, hard=s.nofile),
                Ulimit(name="fsize", soft=fsize, hard=fsize),
                Ulimit(name="core", soft=0, hard=0),
            ],
            init=True,
            ipc_mode="none",
            log_config=LogConfig(type=LogConfig.types.NONE),
            runtime=s.runtime,
        )

    def create_warm(self, memory_mb: int | None = None) -> WarmContainer:
        """Create and start a container, and wait until its interpreter is ready for code."""
        memory_mb = memory_mb or self.settings.memory_mb_default
        try:
            container_id = self.api.create_container(
                self.settings.sandbox_image,
                command=self._command(),
                user=self._user(),
                environment=SANDBOX_ENV,
                working_dir="/tmp",
                hostname="sandbox",
                labels=self.labels,
                stdin_open=True,
                network_disabled=True,
                host_config=self.api.create_host_config(**self._host_options(memory_mb)),
            )["Id"]
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot create sandbox: {exc}") from exc
        try:
            params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            sock = _raw_socket(self.api.attach_socket(container_id, params=params))
            self.api.start(container_id)
            warm = WarmContainer(container_id, sock, memory_mb)
            self._wait_ready(warm)
            return warm
        except Exception as exc:
            self.remove(container_id)
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"cannot start sandbox: {exc}") from exc

    def _wait_ready(self, warm: WarmContainer) -> None:
        streams = Streams(cap=1 << 20)
        deadline = time.monotonic() + WARMUP_TIMEOUT
        while READY_MARKER not in streams.out[_STDOUT]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SandboxError("sandbox interpreter did not become ready")
            warm.sock.settimeout(remaining)
            chunk = warm.sock.recv(65536)
            if not chunk:
                err = bytes(streams.out[_STDERR][-500:]).decode(errors="replace")
                raise SandboxError(f"sandbox exited during warm-up: {err}")
            warm._buffer.extend(chunk)
            streams.feed_frames(warm._buffer)

    def resize(self, warm: WarmContainer, memory_mb: int) -> None:
        """Give a warm container another memory limit (both RAM and RAM+swap)."""
        limit = f"{self.container_memory_mb(memory_mb)}m"
        try:
            self.api.update_container(warm.id, mem_limit=limit, memswap_limit=limit)
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot set memory limit: {exc}") from exc
        warm.memory_mb = memory_mb

    def run(self, warm: WarmContainer, code: str, stdin: str, timeout: float) -> RunResult:
        """Send the snippet to a warm container and collect its verdict.

        Output is read from the stream while the code runs; at the wall limit, or when a
        stream passes its cap, the container is SIGKILLed and what was read is kept. The run
        ends at the runner's trailer (keyed by a fresh nonce), so the container's own exit is
        neither waited for nor charged to the snippet.
        """
        limit = self.settings.output_max_bytes
        streams = Streams(cap=limit + TRAILER_ROOM)
        nonce = secrets.token_hex(16)
        trailers: dict[int, tuple[int, bool]] = {}
        killed_for: str | None = None
        self._send(warm, runner_frame(code, stdin, nonce))
        started, started_wall = time.monotonic(), time.time()
        deadline = started + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                killed_for = "timeout"
                break
            warm.sock.settimeout(remaining)
            try:
                chunk = warm.sock.recv(65536)
            except TimeoutError:
                killed_for = "timeout"
                break
            except OSError as exc:
                raise SandboxError(f"lost the sandbox stream: {exc}") from exc
            if not chunk:
                break
            warm._buffer.extend(chunk)
            streams.feed_frames(warm._buffer)
            for kind in (_STDOUT, _STDERR):
                if kind not in trailers and (found := take_trailer(streams.out[kind], nonce)):
                    trailers[kind] = found
            if len(trailers) == 2:  # both streams fully read: the runner is done
                break
            if streams.over_cap:
                killed_for = "output_limit"
                break
        duration_ms = (time.monotonic() - started) * 1000
        over_cap = streams.clip(limit)
        if killed_for:
            # Close our end first: the engine will not finish a kill while it is blocked
            # writing output into an attach stream that nobody reads any more.
            self._close(warm)
            self.kill(warm.id)
            return streams.result(killed_for, None, duration_ms)
        trailer = trailers.get(_STDOUT) or trailers.get(_STDERR)
        warm.exiting = len(trailers) == 2
        if trailer is not None:
            exit_code, memory_error = trailer
            status = verdict(exit_code, memory=memory_error)
        else:  # the runner did not finish normally: ask the engine how the container ended
            exit_code, oom_killed = self._exit_state(warm.id)
            if (
                exit_code == 137
                and not oom_killed
                and self._killed_from_outside(warm.id, started_wall)
            ):
                raise SandboxError("sandbox container was killed from outside while running")
            status = verdict(exit_code, memory=oom_killed)
        if over_cap:
            return streams.result("output_limit", None, duration_ms)
        return streams.result(status, exit_code, duration_ms)

    def _killed_from_outside(self, container_id: str, since: float) -> bool:
        """An engine ``kill``/``destroy`` we did not ask for (a snippet killing itself makes
        no engine event): the container was removed or killed by someone else."""
        try:
            events = self.api.events(
                since=int(since) - 1,
                until=int(time.time()) + 1,
                filters={"container": container_id, "event": ["kill", "destroy"]},
                decode=True,
            )
            return any(True for _ in events)
        except Exception:
            return True  # cannot tell: never let an engine problem pass as the code's verdict

    @staticmethod
    def _send(warm: WarmContainer, data: bytes) -> None:
        try:
            warm.sock.sendall(data)
        except OSError as exc:
            raise SandboxError(f"sandbox not accepting code: {exc}") from exc

    def can_reuse(self, warm: WarmContainer, result: RunResult) -> bool:
        """Whether the container may serve another snippet after ``result`` (never, here)."""
        return False

    def settle(self, warm: WarmContainer) -> bool:
        """Wait until a reusable container is clean again; False means remove it."""
        return False

    @staticmethod
    def _status(killed_for: str | None, exit_code: int, oom_killed: bool, stderr: bytes) -> str:
        if killed_for:
            return killed_for
        memory = oom_killed or (exit_code == 1 and bool(_MEMORY_ERROR_LINE.search(stderr)))
        return verdict(exit_code, memory=memory)

    def _exit_state(self, container_id: str) -> tuple[int, bool]:
        try:
            exit_code = int(self.api.wait(container_id, timeout=10)["StatusCode"])
            oom_killed = False
            if exit_code == 137:  # SIGKILL: ask the engine whether the kernel's OOM killer did it
                oom_killed = bool(self.api.inspect_container(container_id)["State"]["OOMKilled"])
            return exit_code, oom_killed
        except docker.errors.NotFound as exc:
            raise SandboxError("sandbox container disappeared while running") from exc
        except Exception as exc:
            raise SandboxError(f"cannot read the sandbox's exit state: {exc}") from exc

    def kill(self, container_id: str) -> None:
        """SIGKILL, best effort: the verdict is already known, and the background removal
        (``remove(force=True)``) finishes the job if the engine does not answer now."""
        try:
            self.api.kill(container_id, signal="SIGKILL")
        except docker.errors.APIError:
            pass  # already exited
        except Exception as exc:
            log.warning("kill of %s failed: %s", container_id[:12], exc)

    def remove(self, container_id: str) -> bool:
        """Force-remove a container; True when it is gone (removed now or before)."""
        try:
            self.api.remove_container(container_id, force=True, v=True)
            return True
        except docker.errors.NotFound:
            return True
        except Exception:
            return False

    @staticmethod
    def _close(warm: WarmContainer) -> None:
        # shutdown() first: close() alone leaves the descriptor open while docker-py's SocketIO
        # still refers to it, and the engine keeps blocking on a stream nobody reads.
        for step in (lambda: warm.sock.shutdown(socket.SHUT_RDWR), warm.sock.close):
            try:
                step()
            except OSError:
                pass

    def discard(self, warm: WarmContainer) -> bool:
        if warm.exiting:
            self._await_exit(warm)
        self._close(warm)
        return self.remove(warm.id)

    @staticmethod
    def _await_exit(warm: WarmContainer, seconds: float = EXIT_WAIT) -> None:
        """Wait (briefly) for a container whose runner is ending to exit by itself. Under load
        an immediate removal catches about a quarter of them still exiting, and the engine
        kills those: waiting gave ~10% more containers per second (16 threads, this machine)."""
        deadline = time.monotonic() + seconds
        try:
            while (remaining := deadline - time.monotonic()) > 0:
                warm.sock.settimeout(remaining)
                if not warm.sock.recv(65536):
                    return  # the attach stream ends when the container has exited
        except OSError:
            return  # timed out or closed: the forced removal does the rest

    def list_ids(self) -> list[str]:
        """Ids of every container of this service instance, running or not."""
        filters = {"label": [f"{k}={v}" for k, v in self.labels.items()]}
        return [c["Id"] for c in self.api.containers(all=True, filters=filters)]
