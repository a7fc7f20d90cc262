"""The OCI runtimes the Docker-backed tests run under: runc on the system daemon, and gVisor
(``runsc``) on a private dockerd of our own that has it registered.

A test that runs a real service takes a ``Variant`` (runtime x isolation mode) and starts its
service with ``Engine.env`` of that runtime: under runsc that is ``DOCKER_HOST`` of the private
daemon and ``BOXED_RUNTIME=runsc``. The system daemon is never reconfigured.

A test that by nature cannot hold under gVisor (it inspects the host side of a sandbox, which
under gVisor is the sentry, not the sandbox's processes) says so with
``@pytest.mark.runc_only("why")``: its runsc variants are reported as skipped with that reason,
and a marker without a reason is a usage error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.private_docker import RUNSC, PrivateDocker

ISOLATION_MODES = ("container", "process")
RUNTIMES = ("runc", "runsc")


@dataclass(frozen=True)
class Variant:
    """One combination a service-backed test runs under."""

    runtime: str
    isolation: str
    pods: bool = False  # sandbox pods on their Docker stand-in (exec_server/backends/pods.py)

    @property
    def id(self) -> str:
        """``container``/``process`` under runc (the ids the suite always had), else prefixed;
        ``pods``: process mode over the pod backend."""
        if self.pods:
            return "pods" if self.runtime == "runc" else f"{self.runtime}-pods"
        return self.isolation if self.runtime == "runc" else f"{self.runtime}-{self.isolation}"

    @property
    def env(self) -> dict[str, str]:
        """The service environment of this variant (``Engine.env`` adds where it runs)."""
        env = {"BOXED_ISOLATION": self.isolation}
        if self.pods:
            env["BOXED_PROCESS_BACKEND"] = "docker-pods"
            env["BOXED_CONTAINER_BACKEND"] = "docker-pods-container"
            # A pod's memory limit is fixed, sized for the largest request (as in the
            # manifests): memory outside a child's own address space (memfds, grandchildren)
            # meets that limit, so it is kept as small as the tests allow.
            env["BOXED_MEMORY_MB_MAX"] = "512"
            env["BOXED_COMPILE_MEMORY_MB"] = "512"  # within the maximum
        return env


# The pod backend runs under runc only: under gVisor it is the same supervisor over the same
# transport, and its stand-in's connection enters each sandbox's network namespace, which a
# runsc sandbox keeps inside its own kernel (netstack), out of the host's reach.
PODS = Variant("runc", "process", pods=True)
VARIANTS = (*(Variant(r, i) for r in RUNTIMES for i in ISOLATION_MODES), PODS)


def variant_params() -> list[object]:
    return [pytest.param(v, id=v.id) for v in VARIANTS]


@dataclass(frozen=True)
class Engine:
    """The Docker daemon a service's sandboxes run on, and how to reach it from a test."""

    runtime: str
    daemon: PrivateDocker | None = None  # None: the system daemon

    @property
    def env(self) -> dict[str, str]:
        """Service environment that puts its sandboxes on this engine."""
        if self.daemon is None:
            return {}
        return {"DOCKER_HOST": self.daemon.host, "BOXED_RUNTIME": self.runtime}

    @property
    def docker(self) -> list[str]:
        """The docker CLI command line for this engine."""
        return ["docker"] if self.daemon is None else ["docker", "-H", self.daemon.host]

    def containers(self, instance: str, full: bool = False) -> list[str]:
        """Ids of every container (running or not) labelled with ``instance``."""
        flags = ["--no-trunc"] if full else []
        label = f"label=boxed.instance={instance}"
        out = subprocess.run(
            [*self.docker, "ps", "-aq", *flags, "--filter", label],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.split()


SYSTEM = Engine("runc")


def runsc_problem() -> str | None:
    """Why gVisor tests cannot run here, or None when they can."""
    if not os.access(RUNSC, os.X_OK):
        return f"{RUNSC} missing (apt-get install runsc)"
    if shutil.which("dockerd") is None:
        return "dockerd missing: the runsc tests start a private one"
    if os.geteuid() != 0:
        return "a private dockerd needs root"
    return None


def item_variant(item: pytest.Item) -> Variant | None:
    """The variant a collected test runs under, if it is parametrized with one."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    return next((v for v in callspec.params.values() if isinstance(v, Variant)), None)


def apply_runc_only(items: list[pytest.Item]) -> None:
    """Skip, with its stated reason, every runsc variant of a ``runc_only`` test."""
    for item in items:
        marker = item.get_closest_marker("runc_only")
        if marker is None:
            continue
        reason = marker.kwargs.get("reason", marker.args[0] if marker.args else "")
        if not isinstance(reason, str) or not reason.strip():
            raise pytest.UsageError(f"{item.nodeid}: runc_only needs a reason")
        variant = item_variant(item)
        if variant is not None and variant.runtime != "runc":
            item.add_marker(pytest.mark.skip(reason=f"runc only: {reason}"))


def uses_runsc(item: pytest.Item) -> bool:
    variant = item_variant(item)
    return variant is not None and variant.runtime == "runsc"


def engine_for(request: pytest.FixtureRequest, runtime: str) -> Engine:
    """The engine of ``runtime``; the private gVisor daemon (the ``runsc_docker`` fixture of
    tests/conftest.py) is started on first use only."""
    if runtime == "runc":
        return SYSTEM
    return Engine(runtime, request.getfixturevalue("runsc_docker"))


def gvisor_root(daemon: PrivateDocker) -> Path:
    """State directory of this daemon's runsc sandboxes (``runsc --root``). Docker 20.10 starts
    every runtime through containerd's runc v2 shim, which passes it the runc root (seen in the
    sentry's command line here). Were it wrong, ``runsc ps`` would find nothing, which the
    hostile catalogue's at-rest check refuses."""
    return daemon.root / "exec" / "runtime-runc" / "moby"


@dataclass(frozen=True)
class GuestProcess:
    """A process inside a gVisor sandbox, as its sentry reports it (``runsc ps``)."""

    uid: int
    pid: int  # in the sandbox's own PID namespace: there is no host process for it
    command: str  # the process name (comm), not the full command line


def gvisor_processes(daemon: PrivateDocker, container: str) -> list[GuestProcess]:
    """The processes running in one gVisor sandbox of ``daemon`` (none once it is gone).

    ``docker top`` cannot be used: it maps the sandbox's own pids onto host processes."""
    out = subprocess.run(
        [RUNSC, "--root", str(gvisor_root(daemon)), "ps", container],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if out.returncode != 0:
        return []  # removed while we looked
    rows = [line.split(None, 7) for line in out.stdout.splitlines()[1:] if line.strip()]
    return [GuestProcess(int(r[0]), int(r[1]), r[7] if len(r) > 7 else "") for r in rows]


def gvisor_host_sandboxes(daemon: PrivateDocker) -> set[str]:
    """Container ids of the runsc processes (sentry, gofer) of ``daemon`` alive on the host."""
    marker = f"--root={gvisor_root(daemon)}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\x00")
        except OSError:
            continue  # not a process, or it exited while we looked
        if argv[0].startswith(b"runsc") and marker in argv:
            match = re.search(rb"/moby/([0-9a-f]{64})", b" ".join(argv))
            if match:
                found.add(match.group(1).decode())
    return found
