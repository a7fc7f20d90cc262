"""Shared fixtures. Docker tests use a real engine and a real service process.

Tests marked ``docker`` need the engine and the sandbox image; their runsc variants also need
gVisor (tests/runtimes.py). Without them they are skipped on a developer machine, but fail
loudly when ``CI`` is set: CI must never go green by skipping.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.private_docker import RUNSC_CONFIG, PrivateDocker, private_docker
from tests.runtimes import (
    ISOLATION_MODES,
    SYSTEM,
    Engine,
    Variant,
    apply_runc_only,
    engine_for,
    runsc_problem,
    uses_runsc,
    variant_params,
)
from tests.service import IMAGE, REPO, ServiceProcess, free_port, instance_containers

__all__ = [
    "IMAGE",
    "ISOLATION_MODES",
    "REPO",
    "ServiceProcess",
    "free_port",
    "instance_containers",
    "running_service",
]


@contextmanager
def running_service(engine: Engine = SYSTEM, /, **env: str) -> Iterator[ServiceProcess]:
    """A real service started with ``env`` on ``engine``, stopped at the end (also when its
    start failed); asserts it left no container behind."""
    service = ServiceProcess(**engine.env, **env)
    try:
        yield service.start()
    finally:
        if service.proc is not None:
            service.stop()
        leftover = engine.containers(service.instance)
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
        return f"sandbox image {IMAGE} missing (python -m tools.build_image --offline)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    apply_runc_only(items)
    docker_items = [item for item in items if "docker" in item.keywords]
    if not docker_items:
        return
    problem = docker_problem()
    gvisor = runsc_problem() if any(uses_runsc(item) for item in docker_items) else None
    if problem is None and gvisor is None:
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(f"CI is set and Docker tests cannot run: {problem or gvisor}")
    for item in docker_items:
        why = problem or (gvisor if uses_runsc(item) else None)
        if why is not None:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="session")
def runsc_docker() -> Iterator[PrivateDocker]:
    """A private dockerd with runsc registered and the sandbox image loaded, for the session."""
    with private_docker(IMAGE, RUNSC_CONFIG) as daemon:
        yield daemon


@pytest.fixture(scope="session", params=variant_params())
def boxed_service(request: pytest.FixtureRequest) -> Iterator[str]:
    """Base URL of a real service backed by Docker, once per runtime and isolation mode, and
    once over the pod backend's stand-in (every test that uses it must hold in all five);
    asserts no container is left after."""
    variant: Variant = request.param
    # A long queue deadline: these tests check verdicts, and a loaded 2-core CI machine may
    # take more than the default 10 s to churn 32 containers (overload has its own tests).
    with running_service(
        engine_for(request, variant.runtime), **variant.env, BOXED_QUEUE_TIMEOUT="60"
    ) as service:
        yield service.url


def top_level_imports(path: Path) -> set[str]:
    """The top-level packages a Python file imports (absolute imports only)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add((node.module or "").partition(".")[0])
    return names
