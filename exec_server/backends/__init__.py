"""Sandbox backends behind one interface (``base``), found by name in ``BACKENDS``.

A backend is how sandboxes are made and reached; the isolation a request asks for maps to one
backend by the settings (``BOXED_PROCESS_BACKEND``, ``BOXED_CONTAINER_BACKEND``). A new backend
(another engine, a cluster) is a module here with a factory registered below.
"""

from __future__ import annotations

from collections.abc import Callable

from ..settings import Settings
from .base import BackendHealth, Job, Sandbox, SandboxBackend, SandboxError

__all__ = [
    "BACKENDS",
    "BackendHealth",
    "Job",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "create_backend",
]


def _docker_process(settings: Settings) -> SandboxBackend:
    from .docker import DockerBackend

    return DockerBackend(settings, reuse=True)


def _docker_container(settings: Settings) -> SandboxBackend:
    from .docker import DockerBackend

    return DockerBackend(settings, reuse=False)


def _kubernetes_process(settings: Settings) -> SandboxBackend:
    from .kubernetes import kubernetes_backend

    return kubernetes_backend(settings, reuse=True)


def _kubernetes_container(settings: Settings) -> SandboxBackend:
    from .kubernetes import kubernetes_backend

    return kubernetes_backend(settings, reuse=False)


def _docker_pods_process(settings: Settings) -> SandboxBackend:
    from .docker_pods import DockerPodBackend

    return DockerPodBackend(settings, reuse=True)


def _docker_pods_container(settings: Settings) -> SandboxBackend:
    from .docker_pods import DockerPodBackend

    return DockerPodBackend(settings, reuse=False)


def _fake(settings: Settings) -> SandboxBackend:
    from .fake import FakeBackend

    return FakeBackend()


BACKENDS: dict[str, Callable[[Settings], SandboxBackend]] = {
    "docker-process": _docker_process,
    "docker-container": _docker_container,
    # Sandbox pods (pods.py): in a cluster, and the Docker stand-in CI runs.
    "kubernetes": _kubernetes_process,
    "kubernetes-container": _kubernetes_container,
    "docker-pods": _docker_pods_process,
    "docker-pods-container": _docker_pods_container,
    "fake": _fake,
}


def create_backend(name: str, settings: Settings) -> SandboxBackend:
    """The backend registered as ``name``, made for ``settings``."""
    try:
        factory = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}") from None
    return factory(settings)
