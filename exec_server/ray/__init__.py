"""boxed on every node of a Ray cluster, reached node-locally (docs/ray.md; extra ``boxed[ray]``).

One named, detached actor per alive node (:class:`~exec_server.ray.node_service.NodeService`),
pinned to its node and restarted by Ray when it crashes, runs the node's service on a fixed
port. The actors are the registry: their names carry their node ids, so any driver, task or
the CLI (``python -m exec_server.ray``) finds them, and a node that leaves takes its entry with
it at the next :func:`reconcile`. Each service's URL is also kept in the cluster's key-value
store, so :func:`urls` never waits on an actor: the worker set-up hook runs in every worker,
the actors' own included, and must not wait for actors that are still starting.

Clients prefer their own node's service and fail over to the others (``routing="ordered"``):
code runs next to the rollout that sent it, and a lost node costs a failover, not an error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

try:
    import ray
    from ray.exceptions import RayActorError
    from ray.experimental import internal_kv
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError("exec_server.ray needs Ray: pip install 'boxed[ray]'") from exc

from boxed_client import AsyncClient, Client
from exec_server.ray.node_service import NodeService, ServiceSpec

__all__ = [
    "async_client",
    "client",
    "deploy",
    "local_url",
    "ordered_urls",
    "reconcile",
    "shutdown",
    "status",
    "urls",
    "use_node_local_service",
]

NAMESPACE = "boxed"
PREFIX = "boxed-node-"
DEFAULT_PORT = 5002
CALL_TIMEOUT = 30.0  # seconds one actor call may take (a stop waits for its own timeout too)
READY_TIMEOUT = 300.0

_Actor = ray.remote(NodeService)


def _ensure_ray() -> None:
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace=NAMESPACE)


def _alive_nodes() -> dict[str, str]:
    """Node id -> node IP of every alive node."""
    return {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}


def _actors() -> dict[str, Any]:
    """Node id -> handle of every service actor registered (alive node or not)."""
    handles = {}
    for node in _actor_nodes():
        try:
            handles[node] = ray.get_actor(PREFIX + node, namespace=NAMESPACE)
        except ValueError:  # gone between the listing and now
            pass
    return handles


def _publish(node: str, url: str | None) -> None:
    """Record (or with ``None`` forget) the URL of ``node``'s service."""
    if url is None:
        internal_kv._internal_kv_del(node, namespace=NAMESPACE)
    else:
        internal_kv._internal_kv_put(node, url, overwrite=True, namespace=NAMESPACE)


def _published() -> set[str]:
    """Node ids whose service URL is recorded (a node that died keeps its entry until
    :func:`reconcile`; its actor may already be gone: Ray cannot restart it elsewhere)."""
    return {key.decode() for key in internal_kv._internal_kv_list("", namespace=NAMESPACE)}


def _start(spec: ServiceSpec) -> Any:
    """The node's actor, created if it does not exist (``get_if_exists``: idempotent), and
    its URL published (an existing actor's own, which may differ from ``spec``'s)."""
    handle = _Actor.options(
        name=PREFIX + spec.node_id,
        namespace=NAMESPACE,
        get_if_exists=True,
        lifetime="detached",
        max_restarts=-1,  # a crashed actor comes back on its node, on the same port
        max_concurrency=8,  # status calls are answered while a readiness wait runs
        num_cpus=spec.num_cpus,
        scheduling_strategy=NodeAffinitySchedulingStrategy(spec.node_id, soft=False),
    ).remote(spec)
    _publish(spec.node_id, ray.get(handle.info.remote(), timeout=CALL_TIMEOUT)["url"])
    return handle


def _wait_ready(handles: Mapping[str, Any], timeout: float) -> None:
    if not handles:
        return
    ready = ray.get(
        [h.wait_ready.remote(timeout) for h in handles.values()], timeout=timeout + CALL_TIMEOUT
    )
    late = [node for node, ok in zip(handles, ready, strict=True) if not ok]
    if late:
        raise TimeoutError(f"boxed not ready within {timeout:g} s on nodes {late}")


def deploy(
    port: int = DEFAULT_PORT,
    env: Mapping[str, str] | None = None,
    num_cpus: float = 0,
    ports: Mapping[str, int] | None = None,
    wait: bool = True,
    timeout: float = READY_TIMEOUT,
) -> dict[str, str]:
    """Start boxed on every alive node (nodes that already have it keep theirs: stop first to
    change the settings) and return node id -> URL.

    Args:
        port: the port of every node's service.
        env: ``BOXED_*`` settings of every service (the actor's environment is inherited).
        num_cpus: CPUs each actor reserves in Ray's accounting (it bounds nothing: docs/ray.md).
        ports: a port per node id, overriding ``port`` (several nodes on one host, as in tests).
        wait: return only when every service answers ``/readyz`` (else ``TimeoutError``).
    """
    _ensure_ray()
    ports = dict(ports or {})
    handles = {
        node: _start(
            ServiceSpec(
                node_id=node,
                host=ip,
                port=ports.get(node, port),
                default_port=port,
                env=dict(env or {}),
                num_cpus=num_cpus,
            )
        )
        for node, ip in _alive_nodes().items()
    }
    if wait:
        _wait_ready(handles, timeout)
    return urls()


def _call_each(
    handles: Mapping[str, Any], method: str, *args: Any, timeout: float = CALL_TIMEOUT
) -> dict[str, Any]:
    """Node id -> what ``method`` returned, called on every actor at once. An actor Ray reports
    lost (its node dying but not yet marked dead, or the actor restarting) is left out; one that
    does not answer within ``timeout`` raises ``GetTimeoutError``: a hang is not a loss."""
    refs = {node: getattr(h, method).remote(*args) for node, h in handles.items()}
    end = time.monotonic() + timeout
    answers: dict[str, Any] = {}
    for node, ref in refs.items():
        try:
            answers[node] = ray.get(ref, timeout=max(0.0, end - time.monotonic()))
        except RayActorError:
            continue
    return answers


def _actor_nodes() -> set[str]:
    """Node ids of the registered service actors (a listing: no call to any actor)."""
    return {
        a["name"][len(PREFIX) :]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == NAMESPACE and a["name"].startswith(PREFIX)
    }


def urls() -> dict[str, str]:
    """Node id -> URL of the service of every alive node that has one."""
    _ensure_ray()
    nodes = _alive_nodes().keys() & _actor_nodes()
    found = {node: internal_kv._internal_kv_get(node, namespace=NAMESPACE) for node in nodes}
    return {node: url.decode() for node, url in sorted(found.items()) if url}


def ordered_urls(node_id: str | None = None) -> list[str]:
    """Every service's URL, the given node's (default: this one's) first, then the others
    in node-id order from there on: nodes that lose their own service fail over to
    different services rather than all to the same one."""
    by_node = urls()
    node_id = node_id or ray.get_runtime_context().get_node_id()
    nodes = sorted(by_node)
    if node_id in by_node:
        start = nodes.index(node_id)
        nodes = nodes[start:] + nodes[:start]
    return [by_node[node] for node in nodes]


def local_url() -> str | None:
    """This node's service URL, or None when it has none."""
    return urls().get(ray.get_runtime_context().get_node_id())


def status() -> dict[str, dict[str, Any]]:
    """Per node id: ``url``, ``pid`` (the service process), ``instance``, ``ready`` and
    ``starts``; a registered service whose node is dead is listed with ``alive: False``, one
    whose actor Ray reports lost (its node dying, or the actor restarting) with ``url: None``
    and ``ready: False``."""
    _ensure_ray()
    alive = _alive_nodes()
    actors = _actors()
    live = {node: h for node, h in actors.items() if node in alive}
    infos = _call_each(live, "info")
    ready = _call_each(live, "ready")
    out: dict[str, dict[str, Any]] = {}
    for node in actors.keys() | _published():
        if node in infos and node in ready:
            out[node] = {k: infos[node][k] for k in ("url", "pid", "instance", "starts")}
            out[node].update(ready=ready[node], alive=True)
        else:  # a dead node, or one whose actor Ray reports lost
            out[node] = {"url": None, "pid": None, "instance": None, "ready": False}
            out[node]["alive"] = node in alive
    return dict(sorted(out.items()))


def reconcile(
    ports: Mapping[str, int] | None = None, wait: bool = True, timeout: float = READY_TIMEOUT
) -> dict[str, list[str]]:
    """Nodes that joined get a service (the settings of an existing one), services of dead
    nodes leave the registry. Returns the node ids ``added`` and ``removed``."""
    _ensure_ray()
    alive = _alive_nodes()
    actors = _actors()
    removed = sorted((actors.keys() | _published()) - alive.keys())
    for node in removed:
        if node in actors:
            ray.kill(actors[node], no_restart=True)
        _publish(node, None)
    joined = sorted(alive.keys() - actors.keys())
    handles: dict[str, Any] = {}
    if joined:
        existing = [h for node, h in actors.items() if node in alive]
        if not existing:
            raise RuntimeError("no boxed service to copy the settings from: deploy() first")
        template = ServiceSpec(**ray.get(existing[0].info.remote(), timeout=CALL_TIMEOUT)["spec"])
        ports = dict(ports or {})
        for node in joined:
            spec = ServiceSpec(
                node_id=node,
                host=alive[node],
                port=ports.get(node, template.default_port),
                default_port=template.default_port,
                env=template.env,
                num_cpus=template.num_cpus,
            )
            handles[node] = _start(spec)
        if wait:
            _wait_ready(handles, timeout)
    return {"added": joined, "removed": removed}


def shutdown(timeout: float = 60.0) -> list[str]:
    """Stop every service (each removes its sandboxes as it stops) and remove every actor.
    Returns the node ids whose services were stopped; a node dying meanwhile is not among
    them (its service ends with its actor's worker, :mod:`exec_server.ray.child`)."""
    _ensure_ray()
    alive = _alive_nodes()
    actors = _actors()
    live = {node: h for node, h in actors.items() if node in alive}
    stopped = _call_each(live, "stop", timeout, timeout=timeout + CALL_TIMEOUT)
    for handle in actors.values():
        ray.kill(handle, no_restart=True)
    for node in _published():
        _publish(node, None)
    return sorted(stopped)


def client(**kw: Any) -> Client:
    """A :class:`~boxed_client.Client` whose URLs are this node's service first, then
    the others (``routing="ordered"``); ``kw`` as the client's own arguments."""
    return Client(ordered_urls(), **{"routing": "ordered", **kw})


def async_client(**kw: Any) -> AsyncClient:
    """:func:`client`'s asyncio counterpart."""
    return AsyncClient(ordered_urls(), **{"routing": "ordered", **kw})


def use_node_local_service() -> None:
    """Worker set-up hook: ``BOXED_URL`` becomes this node's service first, then the others,
    and ``BOXED_ROUTING`` ``ordered``, so trainer code that builds ``Client()`` from the
    environment goes node-local unchanged. Give it to Ray as
    ``ray.init(runtime_env={"worker_process_setup_hook":
    "exec_server.ray.use_node_local_service"})`` (Ray runs a job's hook only, not a task's).
    Workers read the URLs when they start: a node that joins later is used by new workers."""
    found = ordered_urls()
    if found:  # none deployed (yet): the environment stays as it was
        os.environ["BOXED_URL"] = ",".join(found)
        os.environ["BOXED_ROUTING"] = "ordered"
