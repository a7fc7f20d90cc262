"""Forks of a session (POST /sessions/{id}/fork) on real sandboxes: the state a fork carries,
independence both ways, isolation between parent and fork (uids, signals, ptrace, memory,
files), forks of forks, the tenant's quota, a fork's own verdicts and refusals."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from boxed_client import Client
from exec_server.backends.session_seccomp import CLONE_NEWUSER, SANDBOX_PROFILE, session_profile
from exec_server.guest import forks
from tests.conftest import running_service
from tests.runtimes import engine_for
from tests.test_session_verdicts import FORGE

pytestmark = pytest.mark.docker

SETUP = "\n".join(
    [
        "import json, os, signal, ctypes",
        "x = 41",
        "open('notes.txt', 'w').write('0123456789')",
        "os.mkdir('sub')",
        "open('sub/inner.txt', 'w').write('inner')",
        "held = open('notes.txt')",
        "held.read(4)",
    ]
)
# What one member can do to another (its pid and working directory as arguments).
REACH = "\n".join(
    [
        "def reach(pid, cwd):",
        "    done = []",
        "    for name, act in (",
        "        ('signal', lambda: os.kill(pid, signal.SIGCONT)),",
        "        ('memory', lambda: open(f'/proc/{pid}/mem', 'rb').close()),",
        "        ('files', lambda: open(os.path.join(cwd, 'notes.txt')).read()),",
        "        ('ptrace', lambda: ptrace(pid)),",
        "    ):",
        "        try:",
        "            act()",
        "            done.append(name)",
        "        except PermissionError:",
        "            pass",
        "    return done",
        "def ptrace(pid):",
        "    libc = ctypes.CDLL(None, use_errno=True)",
        "    if libc.ptrace(16, pid, None, None) != 0:",  # PTRACE_ATTACH
        "        raise PermissionError(ctypes.get_errno(), 'ptrace')",
        "    libc.ptrace(17, pid, None, None)",  # PTRACE_DETACH
    ]
)
WHO = "print(json.dumps([os.getpid(), os.getuid(), os.getcwd()]))"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_service(
        BOXED_POOL_SIZE="0",
        BOXED_STRICT_POOL_SIZE="0",
        BOXED_SESSION_FORKS_DEFAULT="3",
        BOXED_MAX_SESSIONS="12",
        BOXED_MAX_SESSIONS_PER_TENANT="4",
    ) as service:
        yield service.url


@pytest.fixture
def http(url: str, request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """A client of its own tenant per test: quotas do not meet between tests."""
    headers = {"X-Boxed-Tenant": request.node.name[:60]}
    with httpx.Client(base_url=url, timeout=60, headers=headers) as client:
        yield client


def run(http: httpx.Client, sid: str, code: str, **fields: object) -> dict:
    answer = http.post(f"/sessions/{sid}/execute", json={"code": code, **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()


def new_session(http: httpx.Client, **limits: object) -> str:
    answer = http.post("/sessions", json=limits)
    assert answer.status_code == 201, answer.text
    return answer.json()["session_id"]


def fork(http: httpx.Client, sid: str) -> str:
    answer = http.post(f"/sessions/{sid}/fork")
    assert answer.status_code == 201, answer.text
    info = answer.json()
    assert info["forked_from"] == sid and info["session_id"] != sid
    return info["session_id"]


def who(http: httpx.Client, sid: str) -> tuple[int, int, str]:
    pid, uid, cwd = json.loads(run(http, sid, WHO)["stdout"])
    return pid, uid, cwd


def test_a_fork_carries_the_state_and_goes_its_own_way(http: httpx.Client) -> None:
    parent = new_session(http)
    assert run(http, parent, SETUP)["status"] == "ok"
    child = fork(http, parent)
    carried = (
        "print(json.dumps([x, held.read(3), open('sub/inner.txt').read(), sorted(os.listdir())]))"
    )
    for sid in (parent, child):
        # globals, an import, an open file at its offset (each reads its own copy), the files
        assert json.loads(run(http, sid, carried)["stdout"]) == [
            41,
            "456",
            "inner",
            ["notes.txt", "sub"],
        ]
    run(http, child, "x = 1000\nopen('only-in-fork', 'w').write('f')\nimport decimal")
    run(http, parent, "x = -1\nopen('notes.txt', 'w').write('changed')")
    assert run(http, parent, "print(x, os.path.exists('only-in-fork'))")["stdout"] == "-1 False\n"
    answer = run(http, child, "print(x, open('notes.txt').read(), 'decimal' in globals())")
    assert answer["stdout"] == "1000 0123456789 True\n"
    assert http.get(f"/sessions/{child}").json()["calls"] == 3  # its own count from the fork


def test_a_forks_file_api_reaches_its_own_directory_only(http: httpx.Client) -> None:
    """The file API of a fork serves the fork's copy of the working directory with the fork's
    uid: never the parent's directory, and the parent's API never the fork's."""
    parent = new_session(http)
    assert run(http, parent, "import json, os")["status"] == "ok"
    assert http.put(f"/sessions/{parent}/files/shared.txt", content=b"before").status_code == 201
    child = fork(http, parent)
    assert http.get(f"/sessions/{child}/files/shared.txt").content == b"before"  # the copy
    assert http.put(f"/sessions/{child}/files/shared.txt", content=b"fork").status_code == 204
    assert http.put(f"/sessions/{child}/files/mine.txt", content=b"m").status_code == 201
    assert http.get(f"/sessions/{parent}/files/shared.txt").content == b"before"
    assert http.get(f"/sessions/{parent}/files/mine.txt").status_code == 404
    assert (
        run(http, child, "print(open('shared.txt').read(), open('mine.txt').read())")["stdout"]
        == "fork m\n"
    )
    _, child_uid, _ = who(http, child)
    made = run(http, child, "print(os.stat('mine.txt').st_uid)")["stdout"]
    assert int(made) == child_uid  # written with the fork's own uid
    names = {e["name"] for e in http.get(f"/sessions/{child}/files").json()["entries"]}
    assert {"shared.txt", "mine.txt"} <= names
    for sid in (child, parent):
        assert http.delete(f"/sessions/{sid}").status_code == 204


def test_parent_and_fork_cannot_reach_each_other(http: httpx.Client) -> None:
    parent = new_session(http)
    run(http, parent, SETUP + "\n" + REACH)
    child = fork(http, parent)
    grandchild = fork(http, child)  # a fork of a fork: two namespaces deeper
    second = fork(http, parent)  # the parent's second fork
    members = {sid: who(http, sid) for sid in (parent, child, grandchild, second)}
    uids = [uid for _, uid, _ in members.values()]
    assert len(set(uids)) == 4, uids  # a host uid of its own each
    for sid, (_, _, cwd) in members.items():
        assert cwd == "/tmp/run" if sid == parent else cwd.startswith("/tmp/fork-")
    for sid in members:
        for other, (pid, _, cwd) in members.items():
            if other != sid:
                got = run(http, sid, f"print(json.dumps(reach({pid}, {cwd!r})))")
                assert json.loads(got["stdout"]) == [], (sid, other, got)
    # nor the readers of the forks' system calls (root helpers of PID 1, one per fork)
    pids = sorted(pid for pid, _, _ in members.values())
    readers = (
        "import glob\n"
        "kids = [int(p.split('/')[2]) for p in glob.glob('/proc/[0-9]*/status')\n"
        "        if '\\nPPid:\\t1\\n' in open(p).read()]\n"
        f"roots = [pid for pid in kids if pid not in {pids}]\n"
        "print(json.dumps([len(roots), sum((reach(p, f'/proc/{p}/cwd') for p in roots), [])]))"
    )
    for sid in members:
        found, reached = json.loads(run(http, sid, readers)["stdout"])
        assert (found, reached) == (3, []), (sid, found, reached)
    # and no capability or way back to one, in any of them
    status = "print(open('/proc/self/status').read())"
    for sid in members:
        fields = dict(
            line.split(":", 1) for line in run(http, sid, status)["stdout"].splitlines() if line
        )
        for key in ("CapInh", "CapPrm", "CapEff", "CapBnd"):
            assert int(fields[key], 16) == 0, (sid, key, fields[key])
        assert fields["NoNewPrivs"].strip() == "1"


def test_a_forks_verdicts_are_its_own(http: httpx.Client) -> None:
    parent = new_session(http, memory_mb=128)
    run(http, parent, "x = 1")
    sleeper, hog, survivor = fork(http, parent), fork(http, parent), fork(http, parent)
    timed_out = run(http, sleeper, "while True: pass", timeout=1)
    assert (timed_out["status"], timed_out["limit"]) == ("timeout", "wall")
    assert timed_out["session_lost"]
    assert http.post(f"/sessions/{sleeper}/execute", json={"code": "1"}).status_code == 410
    memory = run(http, hog, "b = bytearray(512 << 20)")
    assert memory["status"] == "memory_limit", memory
    assert http.delete(f"/sessions/{parent}").status_code == 204
    # the parent's and its siblings' ends leave the fork as it was
    assert run(http, survivor, "print(x)")["stdout"] == "1\n"
    exited = run(http, survivor, "import sys\nsys.exit(3)")
    assert (exited["status"], exited["exit_code"]) == ("error", 3) and exited["session_lost"]


def test_forks_count_and_are_refused_past_the_limits(http: httpx.Client) -> None:
    none = new_session(http, max_forks=0)
    refused = http.post(f"/sessions/{none}/fork")
    assert refused.status_code == 409 and "max_forks 0" in refused.json()["detail"]
    assert http.post("/sessions", json={"max_forks": 99}).status_code == 422
    parent = new_session(http, max_forks=1)  # two of the tenant's quota of 4
    child = fork(http, parent)  # three
    full = http.post(f"/sessions/{child}/fork")  # the container holds no fourth interpreter
    assert full.status_code == 409 and "no fork left" in full.json()["detail"]
    new_session(http)  # four: the quota
    over = http.post(f"/sessions/{parent}/fork")
    assert over.status_code == 429, over.text
    assert http.delete(f"/sessions/{child}").status_code == 204
    assert http.delete(f"/sessions/{none}").status_code == 204
    fork(http, parent)  # the fork's uid and the quota are free again


def test_the_client_forks_a_session(url: str) -> None:
    with Client(url) as client, client.session(max_forks=1) as session:
        session.execute("import math\nx = math.pi")
        with session.fork() as branch:
            assert branch.id != session.id
            branch.execute("x = 2")
            assert branch.execute("print(x)").stdout == "2\n"
        assert session.execute("print(round(x, 2))").stdout == "3.14\n"


def test_gvisor_sessions_cannot_fork(request: pytest.FixtureRequest) -> None:
    """gVisor refuses setns into a user namespace and id maps of more than one range, which
    forks need: there a session asking for forks is refused, and none is made forkable."""
    with (
        running_service(
            engine_for(request, "runsc"),
            BOXED_POOL_SIZE="0",
            BOXED_STRICT_POOL_SIZE="0",
            BOXED_SESSION_FORKS_DEFAULT="3",
        ) as service,
        httpx.Client(base_url=service.url, timeout=60) as http,
    ):
        refused = http.post("/sessions", json={"max_forks": 1})
        assert refused.status_code == 422 and "gVisor" in refused.text
        sid = new_session(http)
        assert run(http, sid, "x = 1")["status"] == "ok"
        assert http.post(f"/sessions/{sid}/fork").status_code == 409


def test_the_forkable_profile_adds_user_namespaces_and_nothing_else() -> None:
    sandbox = json.loads(SANDBOX_PROFILE.read_text())
    forkable = json.loads(session_profile())
    added = [rule for rule in forkable["syscalls"] if rule not in sandbox["syscalls"]]
    assert forkable["defaultAction"] == sandbox["defaultAction"]
    assert len(forkable["syscalls"]) == len(sandbox["syscalls"]) + 2
    assert [(r["names"], r["args"]) for r in added] == [
        (["unshare"], [{"index": 0, "value": CLONE_NEWUSER, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]),
        (["setns"], [{"index": 1, "value": CLONE_NEWUSER, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]),
    ]


def test_an_id_map_has_a_line_per_run_of_consecutive_ids() -> None:
    assert forks.uid_map([7, 3, 4, 5, 9, 4]) == "3 3 3\n7 7 1\n9 9 1\n"


def test_parent_and_forks_are_each_seen_waiting_in_their_own_serve_loop(
    http: httpx.Client,
) -> None:
    """After forks (a fork of a fork too), a report forged early and then a sleep is a timeout
    in the parent and in every fork: PID 1 sees the parent's wait itself, and a fork's through
    a reader in the fork's user namespace (docs/sessions.md)."""
    parent = new_session(http, timeout=2)
    run(http, parent, "x = 1")
    child = fork(http, parent)
    grandchild = fork(http, child)
    sleep = FORGE + "import time\ntime.sleep(30)\nprint('slept')\n"
    for sid in (grandchild, child, parent):
        data = run(http, sid, sleep)
        assert (data["status"], data["limit"], data["stdout"]) == ("timeout", "wall", ""), data
