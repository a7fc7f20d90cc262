"""Shared fixtures. Docker tests use a real engine and a real service process.

Tests marked ``docker`` need the engine and the sandbox image. Without them they are skipped
on a developer machine, but fail loudly when ``CI`` is set: CI must never go green by skipping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from exec_server.testing import IMAGE, REPO, ServiceProcess, free_port, instance_containers

__all__ = ["IMAGE", "REPO", "ServiceProcess", "free_port", "instance_containers", "running_service"]


@contextmanager
def running_service(**env: str) -> Iterator[ServiceProcess]:
    """A real service started with ``env``, stopped at the end (also when its start failed);
    asserts it left no container behind."""
    service = ServiceProcess(**env)
    try:
        yield service.start()
    finally:
        if service.proc is not None:
            service.stop()
        leftover = instance_containers(service.instance)
        assert leftover == [], f"containers left behind: {leftover}"


def docker_problem() -> str | None:
    """Why Docker tests cannot run here, or None when they can."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:
        return f"Docker engine unreachable: {exc}"
    try:
        client.images.get(IMAGE)
    except Exception:
        return f"sandbox image {IMAGE} missing (python -m exec_server build-image --offline)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any("docker" in item.keywords for item in items):
        return
    problem = docker_problem()
    if problem is None:
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(f"CI is set and Docker tests cannot run: {problem}")
    skip = pytest.mark.skip(reason=problem)
    for item in items:
        if "docker" in item.keywords:
            item.add_marker(skip)


ISOLATION_MODES = ("container", "process")


@pytest.fixture(scope="session", params=ISOLATION_MODES)
def boxed_service(request: pytest.FixtureRequest) -> Iterator[str]:
    """Base URL of a real service backed by Docker, once per isolation mode (every test that
    uses it must hold in both); asserts no container is left after."""
    # A long queue deadline: these tests check verdicts, and a loaded 2-core CI machine may
    # take more than the default 10 s to churn 32 containers (overload has its own tests).
    with running_service(BOXED_ISOLATION=request.param, BOXED_QUEUE_TIMEOUT="60") as service:
        yield service.url
