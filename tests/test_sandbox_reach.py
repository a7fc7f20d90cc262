"""What a snippet can reach inside its sandbox, against a real service on runc and gVisor in
both isolation modes (docs/process-mode.md, "Threat model"): the root processes' /proc entries
(environment, memory, maps, open files) are closed to it; no API key, service setting or host
path is readable anywhere it can look; and boxed's own code writes nothing into a correct
submission's stderr, while the submission's own warnings still reach it."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator

import httpx
import pytest

from boxed_client import Client
from tests.conftest import REPO, running_service
from tests.runtimes import engine_for

pytestmark = pytest.mark.docker

KEY = f"sk-reach-{secrets.token_hex(12)}"  # a fresh key per test run: found only if leaked

PROC_ENTRIES = ("environ", "maps", "mem", "fd", "cmdline", "status")
PROC_PROBE = """import json, os
me, seen = os.getpid(), {}
def opened(path):
    modes = []
    for mode, flag in (("r", os.O_RDONLY), ("w", os.O_WRONLY)):
        try:
            os.close(os.open(path, flag | os.O_NONBLOCK | os.O_NOCTTY))
            modes.append(mode)
        except OSError:
            pass
    return "".join(modes)
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        continue  # gone
    row = {"owner": owner, "self": int(pid) == me, "open fds": {}}
    for name in ENTRIES:
        path = f"/proc/{pid}/{name}"
        try:
            if name == "fd":
                for fd in os.listdir(path):
                    if (modes := opened(f"{path}/{fd}")) and int(pid) != me:
                        row["open fds"][os.readlink(f"{path}/{fd}")] = modes
            else:
                with open(path, "rb") as f:  # mem: opening is the access check
                    f.read(0 if name == "mem" else 1)
            row[name] = "read"
        except OSError as exc:
            row[name] = type(exc).__name__
    seen[pid] = row
print(json.dumps(seen))
""".replace("ENTRIES", repr(PROC_ENTRIES))

# Everything a snippet can read that the service could have written into: the environment,
# every process's environ and cmdline, and the files outside the image's own software (/usr and
# /lib* were built before any service ran, so they cannot hold its key). Prints each place one
# of the NEEDLES appears.
SECRET_PROBE = """import os, sys
needles = [n.encode() for n in NEEDLES]
found = []
def look(where, data):
    found.extend(f"{where}: {n.decode()}" for n in needles if n in data)
look("os.environ", repr(dict(os.environ)).encode())
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                look(f"/proc/{pid}/{name}", f.read())
        except OSError:
            pass
skip = ("/proc", "/sys", "/dev", "/usr", "/lib", "/lib64", "/bin", "/sbin")
for top in sorted(os.listdir("/")):
    if "/" + top in skip:
        continue
    for root, dirs, files in os.walk("/" + top):
        for name in files:
            path = os.path.join(root, name)
            try:
                if os.path.isfile(path) and os.path.getsize(path) <= 1 << 20:
                    with open(path, "rb") as f:
                        look(path, f.read())
            except OSError:
                pass
print("found:", found)
"""


@pytest.fixture(scope="module", params=["runc", "runsc"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A service with an API key, on each runtime (gVisor: a private engine)."""
    engine = engine_for(request, request.param)
    with running_service(
        engine, BOXED_POOL_SIZE="2", BOXED_QUEUE_TIMEOUT="60", BOXED_API_KEY=KEY
    ) as service:
        yield service.url


def post(url: str, route: str, body: dict) -> dict:
    r = httpx.post(
        f"{url}{route}", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=120
    )
    assert r.status_code == 200, r.text
    return r.json()


# What gVisor's /proc opens to another uid in a root process's fd directory: world-readable
# counters, /dev/null, and the children's report page, which every snippet's process maps
# anyway (guest/protocol.py). Never the host's channel (stdin, stdout, sockets, pipes).
GVISOR_OPEN_FDS = re.compile(r"/dev/null|/memfd:boxed-report \(deleted\)|/proc/\d+/net/\w+")


@pytest.mark.parametrize("isolation", ["process", "container"])
def test_the_root_processes_proc_entries_are_closed_to_a_snippet(
    url: str, isolation: str, request: pytest.FixtureRequest
) -> None:
    """Memory of every root process (the supervisor, the zygotes) is closed to a snippet, and
    on runc its environment, maps and open files too. gVisor's /proc shows the environment,
    maps and fd list of any process (it has no ptrace check there, and hidepid is not
    supported): there nothing in them is secret (the next test), and no descriptor of the
    host's channel can be opened. The snippet's own entries are readable (the probe works)."""
    data = post(url, "/execute", {"code": PROC_PROBE, "isolation": isolation, "timeout": 20})
    assert data["status"] == "ok", data["stderr"]
    seen = json.loads(data["stdout"])
    roots = {pid: row for pid, row in seen.items() if row["owner"] == 0}
    assert roots, seen  # the supervisor is there, and root's
    gvisor = request.node.callspec.params["url"] == "runsc"
    for pid, row in roots.items():
        closed = ("mem",) if gvisor else ("environ", "maps", "mem", "fd")
        for name in closed:
            assert row[name] != "read", f"/proc/{pid}/{name} of root is readable: {row}"
        for link, modes in row["open fds"].items():
            assert GVISOR_OPEN_FDS.fullmatch(link), f"root's {link} opens ({modes}): {row}"
            assert "w" not in modes or not link.startswith("/proc/"), row
    (own,) = (row for row in seen.values() if row["self"])
    assert all(own[name] == "read" for name in PROC_ENTRIES), own


@pytest.mark.parametrize("isolation", ["process", "container"])
def test_no_key_setting_or_host_path_is_readable_in_the_sandbox(url: str, isolation: str) -> None:
    """The service's API key, its setting names and the host's checkout path appear nowhere a
    snippet can read (its environment, any process's environ or cmdline, any file)."""
    needles = [KEY, "BOXED_", str(REPO)]
    code = SECRET_PROBE.replace("NEEDLES", repr(needles))
    data = post(url, "/execute", {"code": code, "isolation": isolation, "timeout": 30})
    assert data["status"] == "ok", data["stderr"]
    assert data["stdout"] == "found: []\n"


def test_no_key_setting_or_host_path_is_readable_in_a_session(url: str) -> None:
    """The same search from a session's code (a container of its own, the session program)."""
    code = SECRET_PROBE.replace("NEEDLES", repr([KEY, "BOXED_", str(REPO)]))
    with Client(url, api_key=KEY).session() as session:
        called = session.execute(code, timeout=30)
        assert (called.status, called.stdout) == ("ok", "found: []\n"), called.stderr


CORRECT = "def f(x):\n    return x + 1\n\nprint(f(1))\n"
WARNS = "import warnings\nwarnings.warn('mine', UserWarning)\n" + CORRECT


@pytest.mark.parametrize("isolation", ["process", "container"])
@pytest.mark.parametrize("preload", ["", "import numpy\n"], ids=["light", "heavy"])
def test_boxed_writes_nothing_into_a_correct_submissions_stderr(
    url: str, isolation: str, preload: str
) -> None:
    """Through /execute, /judge (call-based and test script) and a session, a correct
    submission's stderr is empty (light and heavy zygote), and its own warning reaches it."""
    code = preload + CORRECT
    mine = f"<string>:{2 + preload.count(chr(10))}: UserWarning: mine\n"
    ran = post(url, "/execute", {"code": code, "isolation": isolation})
    assert (ran["status"], ran["stderr"]) == ("ok", "")
    calls = {"fn_name": "f", "tests": [{"args": [1], "expected": 2}]}
    script = {"test_script": "assert f(1) == 2"}
    for tests in (calls, script):
        judged = post(url, "/judge", {"code": code, "isolation": isolation, **tests})
        assert judged["verdict"] == "accepted"
        assert [t["stderr"] for t in judged["tests"]] == [""]
    with Client(url, api_key=KEY).session() as session:
        called = session.execute(code)
        assert (called.status, called.stderr) == ("ok", "")
        warned = session.execute(preload + WARNS)
        assert warned.stderr == mine
    own = post(url, "/execute", {"code": preload + WARNS, "isolation": isolation})
    assert own["stderr"] == mine
