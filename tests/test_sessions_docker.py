"""Sessions on real sandboxes, under runc and gVisor (runsc): state kept across calls, isolation
between sessions, the one-shot hardening, lost sessions, expiry, 32 sessions at once, and
nothing left behind after delete, expiry, a kill from outside and the service's stop."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest

from exec_server.client import BoxedHTTPError, Client
from exec_server.settings import Settings
from tests.conftest import running_service
from tests.runtimes import PODS, Engine, engine_for

pytestmark = pytest.mark.docker


@dataclass
class Service:
    url: str
    instance: str
    engine: Engine

    def session_containers(self) -> list[str]:
        out = subprocess.run(
            [
                *self.engine.docker,
                "ps",
                "-aq",
                "--filter",
                f"label=boxed.instance={self.instance}",
                "--filter",
                "name=-session-",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.split()

    def none_left(self, seconds: float = 60.0) -> bool:
        # (the engine removes up to 32 containers at once: on a loaded 2-core machine that once
        # took more than 20 s)
        deadline = time.monotonic() + seconds
        while self.session_containers():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True


@pytest.fixture(scope="module", params=["runc", "runsc", "pods"])
def svc(request: pytest.FixtureRequest) -> Iterator[Service]:
    """One service per runtime for the module, and one over the pod backend's stand-in (its
    stop must leave no container)."""
    pods = request.param == "pods"
    engine = engine_for(request, "runc" if pods else request.param)
    with running_service(
        engine,
        **(PODS.env if pods else {}),
        BOXED_POOL_SIZE="1",
        BOXED_STRICT_POOL_SIZE="0",
        BOXED_SESSION_POOL_SIZE="0",  # none_left() counts session containers: no warm ones
        BOXED_MAX_SESSIONS="40",
        BOXED_MAX_SESSIONS_PER_TENANT="40",  # the 32 sessions at once are one tenant's
        BOXED_SESSION_CHECK_INTERVAL="0.2",
        BOXED_QUEUE_TIMEOUT="60",
    ) as service:
        yield Service(service.url, service.instance, engine)


def call(http: httpx.Client, sid: str, code: str, **fields: object) -> httpx.Response:
    return http.post(f"/sessions/{sid}/execute", json={"code": code, **fields}, timeout=60)


def test_variables_imports_and_files_persist_across_calls(svc: Service) -> None:
    with Client(svc.url) as client, client.session() as session:
        assert session.execute("import math\nx = 41\nopen('notes.txt', 'w').write('kept')").ok
        answer = session.execute("x += 1\nprint(x, math.isqrt(17), open('notes.txt').read())")
        assert (answer.status, answer.stdout) == ("ok", "42 4 kept\n")
        answer = session.execute("import os\nprint(os.getcwd(), input())", input="per call")
        assert answer.stdout == "/tmp/run per call\n"
        assert answer.session_id == session.id and answer.expires_in > 0
        failed = session.execute("raise KeyError('k')")
        assert failed.status == "error" and failed.stderr.endswith("KeyError: 'k'\n")
        assert session.execute("print(x)").stdout == "42\n"  # an exception loses nothing
        sid = session.id
    assert svc.none_left()
    with httpx.Client(base_url=svc.url) as http:
        assert call(http, sid, "1").status_code == 404


def test_two_sessions_cannot_see_each_other(svc: Service) -> None:
    probe = (
        "import os\nprint(sorted(os.listdir('.')), 'secret' in globals(),"
        " sorted(p for p in os.listdir('/proc') if p.isdigit()))"
    )
    with Client(svc.url) as client, client.session() as a, client.session() as b:
        a.execute("secret = 1\nopen('a-file', 'w').write('a')\nimport subprocess")
        a.execute("p = subprocess.Popen(['sleep', '30'])")  # killed after the call, in a only
        seen_by_b = b.execute(probe).stdout
        assert seen_by_b.startswith("[] False ")
        assert a.execute(probe).stdout.startswith("['a-file'] True ")


def test_a_session_has_the_hardening_of_a_one_shot_snippet(svc: Service) -> None:
    probe = "\n".join(
        [
            "import json, os, resource, socket",
            "status = dict(l.split(':', 1) for l in open('/proc/self/status'))",
            "keys = ('Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'NoNewPrivs')",
            "names = ('NOFILE', 'FSIZE', 'CORE', 'NPROC')",
            "limits = [resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in names]",
            "try:",
            "    socket.create_connection(('1.1.1.1', 53), timeout=1); net = 'open'",
            "except OSError as e:",
            "    net = type(e).__name__",
            "print(json.dumps([{k: status.get(k, '').strip() for k in keys}, limits, net,",
            "      os.getcwd(), socket.gethostname(), os.listdir('/sys/class/net')]))",
        ]
    )
    with Client(svc.url) as client, client.session() as session:
        in_session = json.loads(session.execute(probe).stdout)
        one_shot = json.loads(client.execute(probe).stdout)
    uids = [int(probe[0].pop("Uid").split()[0]) for probe in (in_session, one_shot)]
    gids = [int(probe[0].pop("Gid").split()[0]) for probe in (in_session, one_shot)]
    assert in_session == one_shot
    assert uids == gids and uids[0] != uids[1]  # each sandbox its own uid (and gid)
    assert all(uid in Settings().sandbox_uid_range for uid in uids)
    assert in_session[0]["CapEff"] == "0" * 16
    assert in_session[2] != "open"


@pytest.mark.parametrize(
    ("code", "status", "reason"),
    [
        ("while True: pass", "timeout", "wall-clock limit of 2 s reached"),
        ("print('x' * 100000)", "output_limit", "output limit of 65536 bytes reached"),
        ("b = bytearray(400 * 2**20)", "memory_limit", "memory limit of 128 MiB reached"),
        ("import sys; sys.exit(3)", "error", "the interpreter exited with code 3"),
        ("import os; os._exit(0)", "ok", "the interpreter exited with code 0"),
    ],
)
def test_a_call_that_ends_the_interpreter_loses_the_session(
    svc: Service, code: str, status: str, reason: str
) -> None:
    with httpx.Client(base_url=svc.url, timeout=60) as http:
        made = http.post("/sessions", json={"timeout": 2, "memory_mb": 128}).json()
        sid = made["session_id"]
        assert call(http, sid, "x = 1").json()["status"] == "ok"
        answer = call(http, sid, code).json()
        assert (answer["status"], answer["session_lost"]) == (status, answer["session_lost"])
        assert reason in answer["session_lost"]
        later = call(http, sid, "print(x)")
        assert later.status_code == 410 and reason in later.json()["detail"]
        assert http.delete(f"/sessions/{sid}").status_code == 204
    assert svc.none_left()


def test_processes_left_by_a_call_are_killed_before_the_next(svc: Service) -> None:
    with Client(svc.url) as client, client.session() as session:
        first = session.execute("import subprocess\nsubprocess.Popen(['sleep', '60'])")
        assert first.ok
        # What is left of them is a zombie at most (the interpreter has not reaped it yet).
        alive = (
            "import os\nme = os.getuid()\n"
            "print([p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()"
            " and os.stat('/proc/' + p).st_uid == me"
            " and open(f'/proc/{p}/stat').read().rpartition(')')[2].split()[0] != 'Z'])"
        )
        assert session.execute(alive).stdout == "[]\n"


def test_a_session_expires_when_idle_and_at_its_lifetime(svc: Service) -> None:
    with httpx.Client(base_url=svc.url, timeout=60) as http:
        idle = http.post("/sessions", json={"idle_timeout": 1}).json()["session_id"]
        life = http.post("/sessions", json={"max_lifetime": 2}).json()["session_id"]
        deadline = time.monotonic() + 30
        while call(http, life, "1").status_code == 200:
            assert time.monotonic() < deadline
            time.sleep(0.3)
        assert "maximum lifetime of 2 s" in call(http, life, "1").json()["detail"]
        answer = call(http, idle, "1")
        assert answer.status_code == 410 and "idle for more than 1 s" in answer.json()["detail"]
    assert svc.none_left()


def test_a_session_killed_from_outside_is_lost_and_leaves_nothing(svc: Service) -> None:
    with httpx.Client(base_url=svc.url, timeout=60) as http:
        before = set(svc.session_containers())
        sid = http.post("/sessions").json()["session_id"]
        (container,) = set(svc.session_containers()) - before
        subprocess.run([*svc.engine.docker, "rm", "-f", container], check=True, capture_output=True)
        first = call(http, sid, "1")
        assert first.status_code in (503, 410)
        assert call(http, sid, "1").status_code == 410
    assert svc.none_left()


def test_32_sessions_open_at_once_each_used_concurrently(svc: Service) -> None:
    with Client(svc.url, max_concurrency=64, read_timeout=120) as client:
        sessions = [client.session(memory_mb=64, timeout=20) for _ in range(32)]
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(lambda s: s.open(), sessions))
            assert len(svc.session_containers()) >= 32

            def use(index: int) -> str:
                s = sessions[index]
                s.execute(f"value = {index}")
                return s.execute("print(value * 2)").stdout

            assert list(pool.map(use, range(32))) == [f"{2 * i}\n" for i in range(32)]
            list(pool.map(lambda s: s.close(), sessions))
    assert svc.none_left()


def test_x_session_id_on_execute_and_the_client_after_a_lost_session(svc: Service) -> None:
    with httpx.Client(base_url=svc.url, timeout=60) as http:
        sid = http.post("/sessions").json()["session_id"]
        http.post("/execute", json={"code": "y = 7"}, headers={"X-Session-ID": sid})
        answer = http.post("/execute", json={"code": "print(y)"}, headers={"X-Session-ID": sid})
        assert answer.json()["stdout"] == "7\n" and answer.headers["X-Session-ID"] == sid
        assert http.post("/execute", json={"code": "1"}, headers={"X-Session-ID": "x"}).is_error
        http.delete(f"/sessions/{sid}")
    with Client(svc.url) as client, client.session() as session:
        session.execute("import os; os._exit(1)")
        with pytest.raises(BoxedHTTPError) as lost:
            session.execute("1")
        assert lost.value.status_code == 410


def test_open_sessions_leave_nothing_after_the_service_stops() -> None:
    with running_service(BOXED_POOL_SIZE="1", BOXED_STRICT_POOL_SIZE="0") as service:
        with httpx.Client(base_url=service.url, timeout=60) as http:
            for _ in range(3):
                assert http.post("/sessions").status_code == 201
    # running_service asserts that no container of the instance is left
