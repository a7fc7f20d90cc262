"""What a snippet can read of the root processes' ``/proc`` entries (issue #28, class 10), in
a one-shot run and in a session call, in both isolation modes, on the pod backend's stand-in,
and under gVisor (the ``boxed_service`` fixture's variants).

The root processes are the supervisor (PID 1), the zygotes, a session's program and a pod's
listener. On runc, every entry that shows their memory, environment, open files or
directories is closed to the snippet (another uid, no capability: the ptrace access check).
gVisor before ``release-20251215.0`` has no such check on ``environ``, ``auxv``, ``maps``,
``smaps`` and the ``fd`` listing (mode 0444, whoever the owner): there the root processes'
environment is empty (they run with none: ``guest/bootstrap.py``), and the other four are the
documented gap (docs/process-mode.md, "Under gVisor"), checked here to be exactly that.
"""

from __future__ import annotations

import json
import re
import subprocess
from functools import cache
from typing import Any

import httpx
import pytest

from exec_server.backends.docker import DockerBackend
from exec_server.backends.supervised import SANDBOX_ENV
from exec_server.settings import Settings
from tests.private_docker import RUNSC

# Entries that show a process's memory, environment, descriptors or directories: closed to a
# snippet on runc (and on gVisor from the release that checks them).
FILES = ("environ", "auxv", "maps", "smaps", "mem")
LINKS = ("cwd", "root", "exe")
# What every uid reads of any process, on Linux and gVisor alike (none holds a secret:
# tests/test_sandbox_reach.py searches cmdline).
SHOWN = ("cmdline", "stat", "status", "comm")
# What gVisor before FIXED_GVISOR lets another uid read (mode 0444, no ptrace check).
OLD_GVISOR_OPEN = {"auxv", "maps", "smaps", "fd"}
FIXED_GVISOR = 20251215  # release-20251215.0: "proc: fix security checks on /proc/pid files"

# One snippet probes every root process: each entry's content (environ), "read", or the error.
PROBE = """\
import json, os, subprocess
def opened(path):
    modes = ""
    for mode, flag in (("r", os.O_RDONLY), ("w", os.O_WRONLY)):
        try:
            os.close(os.open(path, flag | os.O_NONBLOCK | os.O_NOCTTY))
            modes += mode
        except OSError:
            pass
    return modes
def probe(pid):
    row = {}
    for name in FILES + SHOWN:
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:  # mem: opening is the access check
                data = f.read(0 if name == "mem" else 1 << 20)
            row[name] = data.decode("latin-1") if name == "environ" else "read"
        except OSError as exc:
            row[name] = type(exc).__name__
    for name in LINKS:
        try:
            row[name] = "read: " + os.readlink(f"/proc/{pid}/{name}")
        except OSError as exc:
            row[name] = type(exc).__name__
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        row["fd"] = "read"
    except OSError as exc:
        fds, row["fd"] = [], type(exc).__name__
    row["open fds"] = {}
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if modes := opened(f"/proc/{pid}/fd/{fd}"):
            row["open fds"][link] = modes
    return row
roots = {}
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        if os.stat(f"/proc/{pid}").st_uid == 0:
            roots[pid] = probe(pid)
    except OSError:
        pass  # gone
execd = subprocess.run(["env", "-0"], capture_output=True).stdout.decode()
print(json.dumps({
    "roots": roots,
    "own": probe("self"),
    "environment": dict(os.environ),
    "exec'd": dict(item.split("=", 1) for item in execd.split("\\0") if item),
}))
"""
for _name, _value in (("FILES", FILES), ("LINKS", LINKS), ("SHOWN", SHOWN)):
    PROBE = PROBE.replace(_name, repr(_value))

# What gVisor opens to another uid among a root process's descriptors: world-readable
# counters, /dev/null, the children's report page, which every snippet's process maps anyway
# (guest/protocol.py), and a session call's body, which the session program hands to the
# interpreter it runs in. Never the host's channel (stdin, stdout, sockets, pipes).
GVISOR_OPEN_FDS = re.compile(r"/dev/null|/memfd:boxed-(report|call) \(deleted\)|/proc/\d+/net/\w+")


@cache
def runsc_release() -> int:
    """The installed runsc's release date as a number (``runsc version 0.0~20221219.0``, or
    ``release-20251215.0``), which the private engine runs."""
    out = subprocess.run([RUNSC, "--version"], capture_output=True, text=True, check=True)
    return int(re.search(r"(?:~|release-)(\d{8})", out.stdout).group(1))


def expected_open(runtime: str) -> set[str]:
    """The entries of a root process this runtime lets a snippet read (beyond cmdline, stat
    and status, which Linux shows every user too)."""
    if runtime == "runsc" and runsc_release() < FIXED_GVISOR:
        return OLD_GVISOR_OPEN
    return set()


def check(seen: dict[str, Any], runtime: str) -> None:
    """The probe's findings hold what this runtime promises (module docstring)."""
    roots = seen["roots"]
    assert "1" in roots, roots  # PID 1, the supervisor (or the session program, the listener)
    gap = expected_open(runtime)
    for pid, row in roots.items():
        for name in (*FILES[1:], *LINKS, "fd"):
            readable = row[name] == "read" or row[name].startswith("read: ")
            assert readable == (name in gap), f"/proc/{pid}/{name} of root: {row[name]!r}"
        shown = {name: row[name] for name in SHOWN}
        assert set(shown.values()) == {"read"}, f"/proc/{pid}: {shown}"
        # closed, or open and empty: a root process holds no environment
        assert row["environ"] in ("PermissionError", ""), f"/proc/{pid}/environ: {row}"
        for link, modes in row["open fds"].items():
            assert GVISOR_OPEN_FDS.fullmatch(link), f"root's {link} opens ({modes}): {row}"
            assert "w" not in modes or not link.startswith("/proc/"), row
    own = seen["own"]  # the probe reaches what it can: its own entries
    assert all(own[name] != "PermissionError" for name in (*FILES, *LINKS, "fd")), own
    # the snippet's environment is the service's, and so is what it execs
    assert seen["environment"] == seen["exec'd"] == SANDBOX_ENV, seen


def variant_runtime(request: pytest.FixtureRequest) -> str:
    return request.node.callspec.params["boxed_service"].runtime


@pytest.mark.docker
def test_a_snippet_reads_nothing_of_the_root_processes(
    boxed_service: str, request: pytest.FixtureRequest
) -> None:
    """A one-shot run (the variant's isolation mode) probes every root process."""
    r = httpx.post(f"{boxed_service}/execute", json={"code": PROBE, "timeout": 20}, timeout=120)
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["status"] == "ok", data["stderr"]
    check(json.loads(data["stdout"]), variant_runtime(request))


@pytest.mark.docker
def test_a_session_call_reads_nothing_of_the_root_processes(
    boxed_service: str, request: pytest.FixtureRequest
) -> None:
    """A session call probes the session program and any other root process."""
    with httpx.Client(base_url=boxed_service, timeout=120) as http:
        made = http.post("/sessions", json={"timeout": 20})
        assert made.status_code == 201, made.text
        sid = made.json()["session_id"]
        try:
            called = http.post(f"/sessions/{sid}/execute", json={"code": PROBE})
            assert called.status_code == 200, called.text
            data = called.json()
        finally:
            http.delete(f"/sessions/{sid}")
    assert data["status"] == "ok", data["stderr"]
    check(json.loads(data["stdout"]), variant_runtime(request))


class InspectOnly:
    """An engine API that answers only ``inspect_image``, with an image's ``ENV``."""

    def __init__(self, env: list[str]) -> None:
        self.env, self.inspected = env, []

    def inspect_image(self, image: str) -> dict[str, Any]:
        self.inspected.append(image)
        return {"Id": image, "Config": {"Env": self.env}}


def test_an_images_env_reaches_snippets_under_the_services_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guest has no environment of its own, so the backend puts in the configuration what
    the engine's merge gave before: the image's ENV (an operator image's own variables), with
    the service's over it; each image is inspected once, the pinned one when there is one."""
    api = InspectOnly(["PATH=/opt/tool/bin", "JAVA_HOME=/opt/jdk", "LANG=fr_FR", "BROKEN"])
    monkeypatch.setattr(DockerBackend, "api", property(lambda self: api))
    backend = DockerBackend(Settings(sandbox_image="operator:1"), reuse=True)
    env = dict(entry.split("=", 1) for entry in backend.snippet_env())
    assert env == {**SANDBOX_ENV, "JAVA_HOME": "/opt/jdk"}
    backend.pinned_image = "sha256:checked"
    assert backend.snippet_env() == backend.snippet_env()
    assert api.inspected == ["operator:1", "sha256:checked"]
