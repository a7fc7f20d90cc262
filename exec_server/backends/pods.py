"""Sandboxes that are pods: the supervisor served over TCP by ``guest/listener.py``.

A pod backend does not make sandboxes: a controller does (a Deployment of sandbox pods in a
cluster, the Docker stand-in in CI). It *claims* one: connects to a pod's listener, proves it
holds the shared secret (and makes the pod prove it too), sends the guest modules and the
supervisor's configuration, and from then on speaks the supervisor's protocol over that
connection, exactly as the Docker backends do over the attach stream (``supervised.py``):
same verdicts, same clean-up proofs, same retirement rules. Retiring a sandbox deletes its pod;
the controller replaces it with a fresh one.

Where pods come from and how they are reached is a ``PodSource``: ``kubernetes.py`` (the
Kubernetes API), ``docker_pods.py`` (the stand-in).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from collections.abc import Callable
from typing import Protocol

from ..guest import module_sources
from ..guest.listener import GREETING, NONCE_SIZE, PROOF_SIZE, SANDBOX, SERVICE, proof, read_key
from ..settings import Settings
from ..verdict import SnippetResult
from .base import BackendHealth, SandboxError, SessionSpec
from .supervised import (
    Preload,
    SocketStream,
    SupervisedSandbox,
    runs_per_sandbox,
    supervisor_config,
)

log = logging.getLogger("boxed.pods")
HANDSHAKE_TIMEOUT = 5.0
WARMUP_TIMEOUT = 60.0
CLAIM_ATTEMPTS = 3  # pods tried per warm-up (another replica may take one first)


class HandshakeFailed(SandboxError):
    """The pod's listener and the service did not authenticate each other."""


class PodSource(Protocol):
    """Where sandbox pods come from (a controller), and how one is reached and deleted."""

    name: str

    async def connect(self, deadline: float, session: bool = False) -> tuple[str, socket.socket]:
        """A pod not claimed yet and a fresh connection to its listener (non-blocking);
        raises ``SandboxError`` when none is reachable before ``deadline`` (loop time).
        ``session``: it will hold a session (only names it so)."""
        ...

    def refused(self, pod_id: str, why: Exception) -> bool:
        """The pod's hand-shake failed: True when another pod may be tried (another replica
        of the service claimed this one first), False when the pod is broken (delete it)."""
        ...

    def claimed(self, pod_id: str) -> None:
        """The pod is this service's now."""
        ...

    def retiring(self, pod_id: str) -> bool:
        """Whether the controller is taking the pod away (it must not serve again)."""
        ...

    def user_of(self, pod_id: str) -> tuple[int, int] | None:
        """The host uid and gid of the pod's own (the stand-in's pods on this host); None:
        the backend's one uid (a cluster's pods, whose host is the node: docs/deploy.md)."""
        ...

    async def oom_killed(self, pod_id: str) -> bool: ...

    async def delete(self, pod_id: str) -> bool:
        """Retire the pod (the controller replaces it); True when it is gone."""
        ...

    async def list_owned(self) -> list[str]: ...

    async def health(self) -> BackendHealth: ...

    async def close(self) -> None: ...


class PodStream(SocketStream):
    """The supervisor's stdin and stdout: one TCP connection. Its stderr is the pod's log
    (``kubectl logs``), which the service does not read."""

    def diagnostics(self) -> str:
        return "see the pod's log"


async def _receive_exact(stream: SocketStream, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = await stream.receive()
        if not chunk:
            raise HandshakeFailed("the pod's listener closed the connection")
        data += chunk
    return bytes(data)


async def open_session(stream: SocketStream, key: bytes, bootstrap: bytes) -> None:
    """The service's side of the listener's hand-shake, then the bootstrap (see listener.py)."""
    greeting = await _receive_exact(stream, len(GREETING) + NONCE_SIZE)
    if not greeting.startswith(GREETING):
        raise HandshakeFailed(f"not a boxed listener (it said {greeting[:20]!r})")
    challenge = greeting[len(GREETING) :]
    nonce = os.urandom(NONCE_SIZE)
    await stream.send(nonce + proof(key, SERVICE, challenge, nonce))
    try:
        answer = await _receive_exact(stream, PROOF_SIZE)
    except HandshakeFailed:
        raise HandshakeFailed(
            "the pod refused the service's proof: do both hold the same shared secret?"
        ) from None
    if answer != proof(key, SANDBOX, challenge, nonce):
        raise HandshakeFailed("the pod could not prove it holds the shared secret")
    await stream.send(len(bootstrap).to_bytes(4, "big") + bootstrap)


class PodSandbox(SupervisedSandbox):
    """One claimed pod with its supervisor."""

    stream: PodStream

    def __init__(self, backend: PodBackend, pod_id: str, stream: PodStream) -> None:
        s = backend.settings
        super().__init__(
            pod_id,
            stream,
            s.memory_mb_default,
            reusable=backend.reuses_sandboxes,
            max_runs=runs_per_sandbox(s, backend.reuses_sandboxes),
            preload=backend.preload,
        )
        self.source = backend.source

    async def resize(self, memory_mb: int) -> None:
        # A pod's limits are fixed (sized for the largest request, as under gVisor): each
        # child keeps its own limit (RLIMIT_AS), which the supervisor sets.
        self.memory_mb = memory_mb

    def can_reuse(self, result: SnippetResult) -> bool:
        return super().can_reuse(result) and not self.source.retiring(self.id)

    async def oom_killed(self) -> bool:
        return await self.source.oom_killed(self.id)

    async def discard(self) -> bool:
        self.stream.close()
        return await self.source.delete(self.id)


class PodBackend:
    """Sandboxes claimed from a ``PodSource``; ``reuse`` selects the isolation mode."""

    def __init__(self, settings: Settings, source: PodSource, *, reuse: bool) -> None:
        self.settings = settings
        self.source = source
        self.reuses_sandboxes = reuse
        self.name = source.name
        if settings.pod_key_file is None:
            raise ValueError("BOXED_POD_KEY_FILE is needed: the secret shared with the pods")
        self.key = read_key(settings.pod_key_file)
        # Under gVisor (a RuntimeClass) each pod has a kernel of its own, which counts
        # RLIMIT_NPROC for it alone; under runc the pod's pids cgroup is the limit (the
        # kubelet's podPidsLimit), as RLIMIT_NPROC would count the uid across the node.
        self.nproc = settings.pids_limit if settings.runtime == "runsc" else None
        self.preload = Preload.for_backend(settings, reuse)
        # a cluster's pods all run code as the range's first uid (or the deprecated user)
        user = settings.sandbox_user
        uid, _, gid = user.partition(":") if user else (str(settings.sandbox_uid_range.first),) * 3
        self.user = (int(uid), int(gid or uid))

    def _bootstrap(
        self, session: SessionSpec | None, user: tuple[int, int], preload_at_start: bool = False
    ) -> bytes:
        """What a claimed pod's listener gets: the guest modules and the program's settings."""
        config = supervisor_config(
            self.settings,
            reuse=self.reuses_sandboxes,
            nproc=self.nproc,
            preload_at_start=preload_at_start,
            user=user,
            session=session,
        )
        return json.dumps({"modules": module_sources(), "config": config.to_wire()}).encode()

    async def create_warm(self, memory_mb: int | None = None) -> PodSandbox:
        at_start = self.preload.at_start
        return await self._claim(
            lambda user: self._bootstrap(None, user, at_start),
            memory_mb or self.settings.memory_mb_default,
        )

    async def create_session(self, spec: SessionSpec) -> PodSandbox:
        """A pod of its own running the session program (``guest/session.py``) for the
        session's life; deleted with the session. Its memory limit is the pod's (sized for
        the largest request); the interpreter keeps the session's own address-space limit."""
        if spec.memory_mb > self.settings.memory_mb_max:
            raise SandboxError(f"a session of {spec.memory_mb} MiB exceeds the pods' size")
        sandbox = await self._claim(
            lambda user: self._bootstrap(spec, user), spec.memory_mb, session=True
        )
        sandbox.reusable = False
        return sandbox

    async def _claim(
        self,
        bootstrap: Callable[[tuple[int, int]], bytes],
        memory_mb: int,
        session: bool = False,
    ) -> PodSandbox:
        """A pod claimed and ready; ``bootstrap``: what its listener gets, for its uid."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WARMUP_TIMEOUT
        problem: Exception | None = None
        for _ in range(CLAIM_ATTEMPTS):
            pod_id, sock = await self.source.connect(deadline, session)
            sandbox = PodSandbox(self, pod_id, PodStream(sock))
            sandbox.memory_mb = memory_mb
            try:
                async with asyncio.timeout(HANDSHAKE_TIMEOUT):
                    user = self.source.user_of(pod_id) or self.user
                    await open_session(sandbox.stream, self.key, bootstrap(user))
            except (OSError, TimeoutError, HandshakeFailed) as exc:
                sandbox.stream.close()
                problem = exc
                if self.source.refused(pod_id, exc):
                    continue
                await asyncio.shield(self.source.delete(pod_id))
                raise SandboxError(
                    f"sandbox pod {pod_id[:12]} failed the hand-shake: {exc}"
                ) from exc
            self.source.claimed(pod_id)
            try:
                await sandbox.wait_ready(max(deadline - loop.time(), 1.0))
            except BaseException:
                await asyncio.shield(sandbox.discard())
                raise
            return sandbox
        raise SandboxError(f"no sandbox pod could be claimed: {problem or 'none reachable'}")

    async def list_owned(self) -> list[str]:
        return await self.source.list_owned()

    async def remove(self, sandbox_id: str) -> bool:
        return await self.source.delete(sandbox_id)

    async def health(self) -> BackendHealth:
        return await self.source.health()

    async def close(self) -> None:
        await self.source.close()
