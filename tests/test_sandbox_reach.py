"""What a snippet can reach inside its sandbox, against a real service on runc and gVisor in
both isolation modes (docs/process-mode.md, "Threat model"): no API key, service setting or host
path is readable anywhere it can look, and boxed's own code writes nothing into a correct
submission's stderr, while the submission's own warnings still reach it. What it can read of
the root processes' /proc entries is tests/test_root_proc.py's."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest

from boxed_client import Client
from tests.conftest import REPO, running_service
from tests.runtimes import engine_for

pytestmark = pytest.mark.docker

KEY = f"sk-reach-{secrets.token_hex(12)}"  # a fresh key per test run: found only if leaked

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
