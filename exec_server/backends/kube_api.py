"""The few Kubernetes API calls the pod backend makes, through the official ``kubernetes`` client.

List and watch the sandbox pods (by label, in one namespace), delete one, mark one claimed.
That is all the RBAC the service needs (``deploy/kubernetes/base/rbac.yaml``): no Docker
socket, no privilege. Every call blocks; ``kubernetes.py`` runs them in threads. What the
backend needs of a pod is reduced to a ``PodState`` here, so nothing else imports the client.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3.exceptions
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
GONE = 410  # a watch's resource version is too old: list again
# The ReplicaSet deletes pods with a lower cost first when it scales down: claimed pods, which
# may be running a snippet, go last (idle ones first).
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
CLAIMED_BY = "boxed.dev/claimed-by"
CLAIMED_COST = "1000"


# The transport's failures (no route, refused, timed out): urllib3's own, or the socket's.
TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError)


class ApiError(RuntimeError):
    """The API server refused a call or could not be reached."""


@dataclass(frozen=True)
class PodState:
    """What the backend needs to know of one sandbox pod."""

    name: str
    ip: str | None
    phase: str
    ready: bool  # Ready condition: its containers run
    deleting: bool  # has a deletion timestamp: the controller or an operator is removing it
    restarts: int  # a container that ever exited: its pod must never serve (listener.py)
    oom_killed: bool  # a container's last termination was the OOM killer's
    claimed_by: str | None

    @property
    def usable(self) -> bool:
        """Ready for a claim: running, ready, fresh, not being deleted, with an address."""
        return (
            self.phase == "Running"
            and self.ready
            and not self.deleting
            and self.restarts == 0
            and bool(self.ip)
        )

    @property
    def spent(self) -> bool:
        """Dead weight anyone may delete: it served before, or stopped for good."""
        return not self.deleting and (self.restarts > 0 or self.phase in ("Failed", "Succeeded"))


def pod_state(pod: client.V1Pod) -> PodState:
    meta, status = pod.metadata, pod.status
    conditions = (status.conditions if status else None) or []
    containers = (status.container_statuses if status else None) or []
    terminations = [
        state.terminated
        for c in containers
        for state in (c.state, c.last_state)
        if state is not None and state.terminated is not None
    ]
    return PodState(
        name=meta.name,
        ip=status.pod_ip if status else None,
        phase=(status.phase if status else None) or "Unknown",
        ready=any(c.type == "Ready" and c.status == "True" for c in conditions),
        deleting=meta.deletion_timestamp is not None,
        restarts=sum(c.restart_count or 0 for c in containers),
        oom_killed=any(t.reason == "OOMKilled" for t in terminations),
        claimed_by=(meta.labels or {}).get(CLAIMED_BY),
    )


def load_config() -> None:
    """The service account's credentials in a pod, else the local kubeconfig."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()


def own_namespace(default: str = "default") -> str:
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or default
    except OSError:
        return default


class PodApi:
    """The sandbox pods of one namespace and label selector."""

    def __init__(self, namespace: str, selector: str, core: client.CoreV1Api | None = None):
        self.namespace = namespace
        self.selector = selector
        self.core = core or client.CoreV1Api()

    def list(self) -> tuple[list[PodState], str]:
        """Every sandbox pod now, and the resource version to watch from."""
        try:
            pods = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector)
        except (ApiException, *TRANSPORT_ERRORS) as exc:
            raise ApiError(f"cannot list sandbox pods: {_why(exc)}") from exc
        return [pod_state(p) for p in pods.items], pods.metadata.resource_version

    def watch(self, resource_version: str, seconds: int) -> Iterator[tuple[str, PodState]]:
        """Changes since ``resource_version`` for up to ``seconds``: (ADDED, MODIFIED or
        DELETED, the pod). Raises ``ApiError`` with ``gone`` when the version expired."""
        stream = watch.Watch().stream(
            self.core.list_namespaced_pod,
            self.namespace,
            label_selector=self.selector,
            resource_version=resource_version,
            timeout_seconds=seconds,
            _request_timeout=seconds + 10,
        )
        try:
            for event in stream:
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    yield event["type"], pod_state(event["object"])
        except ApiException as exc:
            error = ApiError(f"watching sandbox pods failed: {_why(exc)}")
            error.gone = exc.status == GONE  # type: ignore[attr-defined]
            raise error from exc
        except TRANSPORT_ERRORS as exc:
            raise ApiError(f"watching sandbox pods failed: {exc}") from exc

    def delete(self, name: str) -> bool:
        """Delete a pod at once (its run is over); True when it is gone or going."""
        try:
            self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise ApiError(f"cannot delete pod {name}: {_why(exc)}") from exc
        except TRANSPORT_ERRORS as exc:
            raise ApiError(f"cannot delete pod {name}: {exc}") from exc
        return True

    def mark_claimed(self, name: str, claimer: str) -> None:
        """Label a pod with its claimer (for operators) and make it the last one a scale-down
        deletes."""
        body: dict[str, Any] = {
            "metadata": {
                "labels": {CLAIMED_BY: claimer},
                "annotations": {DELETION_COST: CLAIMED_COST},
            }
        }
        try:
            self.core.patch_namespaced_pod(name, self.namespace, body)
        except (ApiException, *TRANSPORT_ERRORS) as exc:
            raise ApiError(f"cannot mark pod {name} claimed: {_why(exc)}") from exc


def _why(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}".strip()
    return str(exc)
