"""Sandbox pods in a Kubernetes cluster (backends ``kubernetes``, ``kubernetes-container``).

A Deployment keeps N sandbox pods running (``deploy/kubernetes/``); this source keeps a picture
of them from the API (list, then watch; listed again when a watch window ends or expires) and
claims ready ones for the pod backend (``pods.py``): it connects to a pod's IP on the
listener's port; the listener takes one session only, so when two replicas of the service try
the same pod, the second is refused and tries another. A claimed pod is labelled with its
claimer and given a high deletion cost, so that a scale-down takes idle pods first. Retiring
deletes the pod at once; its ReplicaSet creates a fresh one.

Pods whose container ever restarted (their listener refuses to serve twice) or that stopped for
good are dead weight that any replica deletes (``list_owned``). A pod the controller starts
deleting while claimed serves no further snippet after the one it runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import threading
from collections.abc import Callable

import anyio

from ..settings import Settings
from .base import BackendHealth, SandboxError
from .kube_api import ApiError, PodApi, PodState, load_config, own_namespace
from .pods import PodBackend

log = logging.getLogger("boxed.kubernetes")
WATCH_SECONDS = 240  # one watch window; then the pods are listed afresh
RETRY_SECONDS = 2.0  # after a failed list or watch
CONNECT_TIMEOUT = 2.0
REFUSED_FOR = 10.0  # a pod that refused us is taken by another replica: skip it this long
OOM_WAIT = 10.0  # for the pod's status to say why its supervisor died
LABEL_VALUE_MAX = 63


class KubernetesPods:
    """A ``PodSource`` over the Kubernetes API."""

    def __init__(self, settings: Settings, api: PodApi, *, reuse: bool, claimer: str) -> None:
        self.name = "kubernetes" if reuse else "kubernetes-container"
        self.settings = settings
        self.api = api
        self.claimer = claimer[:LABEL_VALUE_MAX].strip("-_.") or "boxed"
        self.pods: dict[str, PodState] = {}
        self.mine: set[str] = set()  # claimed by this backend
        self.pending: set[str] = set()  # being claimed now (hand-shake under way)
        self.refused_at: dict[str, float] = {}
        self.synced = False
        self.problem: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._marking: set[asyncio.Future[None]] = set()

    # -- the picture of the pods, kept by a watcher thread -----------------------------------
    def _start(self) -> asyncio.Event:
        if self._changed is None:
            self._loop = asyncio.get_running_loop()
            self._changed = asyncio.Event()
            self._thread = threading.Thread(target=self._watch, name="boxed-pod-watch")
            self._thread.daemon = True  # a watch blocks for a window; never hold up an exit
            self._thread.start()
        return self._changed

    def _post(self, change: Callable[[], None]) -> None:
        def apply() -> None:
            change()
            assert self._changed is not None
            # Wake the waiters of now; later ones wait for the next change (a waiter looks at
            # the pods and takes the event with no await in between: no wake-up is lost).
            self._changed.set()
            self._changed = asyncio.Event()

        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(apply)
        except RuntimeError:  # the loop closed: the service is stopping
            self._stop.set()

    def _watch(self) -> None:
        """List, then watch until the window ends; again, for as long as the service runs."""
        while not self._stop.is_set():
            try:
                pods, version = self.api.list()
                self._post(lambda pods=pods: self._replace(pods))
                for kind, pod in self.api.watch(version, WATCH_SECONDS):
                    if self._stop.is_set():
                        return
                    self._post(lambda kind=kind, pod=pod: self._apply(kind, pod))
            except ApiError as exc:
                self._post(lambda why=str(exc): self._failed(why))
                if not getattr(exc, "gone", False):
                    self._stop.wait(RETRY_SECONDS)
            except Exception as exc:  # noqa: BLE001 - the watcher must outlive any surprise
                log.exception("watching sandbox pods failed")
                self._post(lambda why=repr(exc): self._failed(why))  # noqa: B008
                self._stop.wait(RETRY_SECONDS)

    def _replace(self, pods: list[PodState]) -> None:
        self.pods = {pod.name: pod for pod in pods}
        self.synced, self.problem = True, None

    def _apply(self, kind: str, pod: PodState) -> None:
        if kind == "DELETED":
            self.pods.pop(pod.name, None)
            self.mine.discard(pod.name)
        else:
            self.pods[pod.name] = pod

    def _failed(self, why: str) -> None:
        if why != self.problem:
            log.warning("%s", why)
        self.problem = why

    async def _changes(self, seconds: float) -> None:
        changed = self._start()
        try:
            async with asyncio.timeout(max(seconds, 0.0)):
                await changed.wait()
        except TimeoutError:
            pass

    # -- claiming ------------------------------------------------------------------------
    def candidates(self, now: float) -> list[PodState]:
        """Pods worth a claim now, in random order (replicas spread over the pool)."""
        found = [
            pod
            for pod in self.pods.values()
            if pod.usable
            and pod.name not in self.mine
            and pod.name not in self.pending
            and now - self.refused_at.get(pod.name, -REFUSED_FOR) >= REFUSED_FOR
        ]
        random.shuffle(found)
        return found

    async def connect(self, deadline: float, session: bool = False) -> tuple[str, socket.socket]:
        self._start()
        loop = asyncio.get_running_loop()
        while True:
            for pod in self.candidates(loop.time()):
                self.pending.add(pod.name)
                try:
                    return pod.name, await self._open(str(pod.ip))
                except (OSError, TimeoutError) as exc:
                    self.refused(pod.name, exc)
            left = deadline - loop.time()
            if left <= 0:
                raise SandboxError(f"no sandbox pod to claim: {self.summary()}")
            await self._changes(min(left, 1.0))

    async def _open(self, ip: str) -> socket.socket:
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                await asyncio.get_running_loop().sock_connect(sock, (ip, self.settings.pod_port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        except BaseException:
            sock.close()
            raise
        return sock

    def refused(self, pod_id: str, why: Exception) -> bool:
        self.pending.discard(pod_id)
        self.refused_at[pod_id] = asyncio.get_running_loop().time()
        log.debug("pod %s refused: %s", pod_id, why)
        return True  # another replica may have claimed it first: try another

    def claimed(self, pod_id: str) -> None:
        self.pending.discard(pod_id)
        self.mine.add(pod_id)
        self.refused_at.pop(pod_id, None)
        task = asyncio.ensure_future(self._mark(pod_id))
        self._marking.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(self._marking.discard)

    async def _mark(self, pod_id: str) -> None:
        try:
            await anyio.to_thread.run_sync(self.api.mark_claimed, pod_id, self.claimer)
        except ApiError as exc:  # only an operator's view and the scale-down order suffer
            log.warning("%s", exc)

    def user_of(self, pod_id: str) -> tuple[int, int] | None:
        return None  # the node is the pods' host: see docs/deploy.md (hostUsers: false)

    def retiring(self, pod_id: str) -> bool:
        pod = self.pods.get(pod_id)
        return pod is None or pod.deleting

    async def oom_killed(self, pod_id: str) -> bool:
        """Whether the kubelet reports the pod's container OOM-killed (waits for the status)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + OOM_WAIT
        while loop.time() < deadline:
            pod = self.pods.get(pod_id)
            if pod is None:
                return False
            if pod.oom_killed:
                return True
            if pod.restarts or pod.phase in ("Failed", "Succeeded"):
                return False  # it ended for another reason
            await self._changes(deadline - loop.time())
        return False

    # -- retiring and reaping ----------------------------------------------------------------
    async def delete(self, pod_id: str) -> bool:
        try:
            gone = await anyio.to_thread.run_sync(self.api.delete, pod_id)
        except ApiError as exc:
            log.warning("%s", exc)
            return False
        self.mine.discard(pod_id)
        return gone

    async def list_owned(self) -> list[str]:
        self._start()
        spent = {pod.name for pod in self.pods.values() if pod.spent}
        return sorted(self.mine | spent)

    def summary(self) -> str:
        usable = sum(pod.usable for pod in self.pods.values())
        return (
            f"{len(self.pods)} pods match {self.api.selector!r} in namespace "
            f"{self.api.namespace!r}, {usable} ready, {len(self.mine)} claimed here"
            + (f"; API: {self.problem}" if self.problem else "")
        )

    async def health(self) -> BackendHealth:
        self._start()
        if not self.synced:
            if self.problem is None:
                await self._changes(5.0)  # the first list is under way
            if not self.synced:
                why = self.problem or "no answer from the Kubernetes API yet"
                return BackendHealth(up=False, problem=why)
        details = {"pods": len(self.pods), "pods_claimed": len(self.mine)}
        if not self.pods:
            return BackendHealth(up=True, problem=self.summary(), details=details)
        return BackendHealth(up=True, details=details)

    async def close(self) -> None:
        self._stop.set()


def kubernetes_backend(settings: Settings, *, reuse: bool) -> PodBackend:
    """The pod backend over the cluster the service runs in (or the local kubeconfig's)."""
    load_config()
    api = PodApi(settings.pod_namespace or own_namespace(), settings.pod_selector)
    claimer = os.environ.get("HOSTNAME") or settings.instance_label
    source = KubernetesPods(settings, api, reuse=reuse, claimer=claimer)
    return PodBackend(settings, source, reuse=reuse)
