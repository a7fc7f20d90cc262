"""Shell sessions (``"language": "bash"``): each call a fresh bash of the session program
(exec_server/guest/shell.py) with the state the call before left, its verdict from bash's wait
status as the session program reaps it, and nothing of it left running after it.

The first tests need no Docker (the routes over the fake backend); the rest run real sessions
under runc and gVisor, a few calls each, in one service per runtime."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from exec_server.backends.fake import FakeSession, observed
from exec_server.client import AsyncClient, Client
from exec_server.guest.protocol import KILLED_WALL
from tests.conftest import running_service
from tests.runtimes import engine_for
from tests.test_sessions import service


# -- the routes (fake backend) ----------------------------------------------------------------
def test_a_shell_session_is_made_by_its_language_and_refuses_other_languages() -> None:
    with service() as (client, fake, _):
        made = client.post("/sessions", json={"language": "Shell"})
        assert made.status_code == 201, made.text
        assert made.json()["language"] == "bash"
        sid = made.json()["session_id"]
        made_here = [s for s in fake.sandboxes.values() if isinstance(s, FakeSession)]
        assert [s.spec.language for s in made_here] == ["bash"]
        refused = client.post(f"/sessions/{sid}/execute", json={"code": "ls", "language": "py"})
        assert refused.status_code == 422 and "bash only" in refused.json()["detail"]
        for spelled in ("sh", "bash"):
            answer = client.post(
                f"/sessions/{sid}/execute", json={"code": "ls", "language": spelled}
            )
            assert answer.status_code == 200, answer.text
        assert client.post(f"/sessions/{sid}/execute", json={"code": "ls"}).status_code == 200
        assert client.get(f"/sessions/{sid}").json()["language"] == "bash"
        assert client.post("/sessions", json={}).json()["language"] == "python"
        for language in ("cpp", "cobol"):
            bad = client.post("/sessions", json={"language": language})
            assert bad.status_code == 422, bad.text


def test_a_limit_stops_a_shell_call_but_not_its_session() -> None:
    """A Python session's limit kills its one interpreter; a shell call is a bash of its own,
    killed with what it started, so the session goes on (its state: the call before's)."""

    def behaviour(job: Any) -> Any:
        if job.code == "sleep 9":
            return observed(killed_for=KILLED_WALL, exit_code=137)
        return observed(stdout=job.code.encode())

    with service(behaviour) as (client, _, _):
        shell = client.post("/sessions", json={"language": "bash"}).json()["session_id"]
        python = client.post("/sessions", json={}).json()["session_id"]
        for sid, lost in ((shell, False), (python, True)):
            answer = client.post(f"/sessions/{sid}/execute", json={"code": "sleep 9"}).json()
            assert (answer["status"], bool(answer["session_lost"])) == ("timeout", lost), answer
        after = client.post(f"/sessions/{shell}/execute", json={"code": "pwd"})
        assert after.status_code == 200 and after.json()["stdout"] == "pwd"
        assert client.post(f"/sessions/{python}/execute", json={"code": "1"}).status_code == 410


# -- real sessions (runc, gVisor) -------------------------------------------------------------
@pytest.fixture(scope="module", params=["runc", "runsc"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """One service per runtime for the module."""
    with running_service(
        engine_for(request, request.param),
        BOXED_POOL_SIZE="1",
        BOXED_STRICT_POOL_SIZE="0",
        BOXED_QUEUE_TIMEOUT="60",
        BOXED_OUTPUT_MAX_BYTES="4096",
        BOXED_TMPFS_MB="4",  # and the file size limit, which bounds a shell's state
    ) as service_:
        yield service_.url


class Shell:
    """One shell session of a test, over plain HTTP (what any caller sends)."""

    def __init__(self, http: httpx.Client, **limits: Any) -> None:
        self.http = http
        made = http.post("/sessions", json={"language": "bash", "timeout": 10, **limits})
        assert made.status_code == 201, made.text
        self.id = made.json()["session_id"]

    def __call__(self, code: str, **fields: Any) -> dict[str, Any]:
        response = self.http.post(f"/sessions/{self.id}/execute", json={"code": code, **fields})
        assert response.status_code == 200, response.text
        return response.json()

    def out(self, code: str) -> str:
        answer = self(code)
        assert answer["status"] == "ok", answer
        return answer["stdout"]


@pytest.fixture
def runtime(request: pytest.FixtureRequest, url: str) -> str:
    return str(request.node.callspec.params["url"])


@pytest.fixture
def http(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=60) as client:
        yield client


needs_docker = pytest.mark.docker


@needs_docker
def test_the_working_directory_and_the_environment_carry(http: httpx.Client) -> None:
    sh = Shell(http)
    setup = (
        "mkdir -p a/b && cd a/b; export EXPORTED=1; LOCAL='two words'; arr=(x 'y z')\n"
        "declare -A map=([k]=v); greet() { echo \"hi $1\"; }; alias ll='echo listed'\n"
        "set -o pipefail; shopt -s nullglob; umask 027; set -x"
    )
    assert sh(setup)["status"] == "ok"
    shown = sh.out(
        'pwd; echo "$EXPORTED|$LOCAL|${arr[1]}|${map[k]}"; greet you; ll\n'
        "env | grep -c -e ^EXPORTED= -e ^LOCAL=; set -o | grep -E '^(pipefail|xtrace) '\n"
        "shopt nullglob; umask"
    )
    assert shown.split("\n") == [
        "/tmp/run/a/b",
        "1|two words|y z|v",
        "hi you",
        "listed",
        "1",  # exported to the programs it starts; the unexported one is the shell's own
        "pipefail       \ton",
        "xtrace         \toff",  # tracing does not carry: it would trace the restore
        "nullglob       \ton",
        "0027",
        "",
    ]
    assert sh.out("cd - >/dev/null; pwd; cd a; pwd") == "/tmp/run\n/tmp/run/a\n"
    assert sh.out("pwd") == "/tmp/run/a\n"


@needs_docker
def test_exit_status_stdin_and_errors_are_the_calls_own(http: httpx.Client) -> None:
    sh = Shell(http)
    answer = sh('read -r x; echo "got $x"; exit 3', input="hello\n")
    assert (answer["status"], answer["exit_code"], answer["stdout"]) == ("error", 3, "got hello\n")
    answer = sh("nosuch\necho second\nfalse")
    assert (answer["status"], answer["exit_code"], answer["stdout"]) == ("error", 1, "second\n")
    assert answer["stderr"] == "bash: line 1: nosuch: command not found\n"
    answer = sh("echo 'unclosed")
    assert (answer["status"], answer["exit_code"]) == ("error", 2), answer
    assert sh("set -e; false; echo never")["exit_code"] == 1
    answer = sh("echo $-; true")  # errexit carried, as a shell keeps it
    assert (answer["status"], "e" in answer["stdout"]) == ("ok", True)
    assert sh.out("set +e; yes | head -2") == "y\ny\n"  # SIGPIPE ends yes quietly
    assert sh("set +e; exit 0")["status"] == "ok"


@needs_docker
def test_processes_a_call_leaves_are_killed_when_it_ends(http: httpx.Client) -> None:
    sh = Shell(http)
    started = sh(
        "(sleep 30; echo late) & echo $! > job.pid\n"
        "setsid nohup sh -c 'while :; do echo tick >> ticks; sleep 0.05; done' >/dev/null 2>&1 &\n"
        "sleep 0.3; echo started"
    )
    assert (started["status"], started["stdout"]) == ("ok", "started\n")
    assert sh.out('kill -0 "$(cat job.pid)" 2>/dev/null || echo gone') == "gone\n"
    first = sh.out("wc -l < ticks")
    assert sh.out("sleep 0.3; wc -l < ticks") == first  # nothing of the call runs after it


@needs_docker
def test_limits_stop_the_call_and_the_session_goes_on(http: httpx.Client, runtime: str) -> None:
    sh = Shell(http, memory_mb=128)
    assert sh("export KEPT=1; cd /tmp")["status"] == "ok"
    answer = sh("sleep 10", timeout=2)
    assert (answer["status"], answer["limit"], answer["session_lost"]) == ("timeout", "wall", None)
    answer = sh("while :; do :; done", timeout=2, cpu_timeout=0.5)
    assert (answer["status"], answer["limit"]) in {("timeout", "cpu"), ("timeout", "wall")}
    answer = sh("yes; echo never")
    assert (answer["status"], answer["limit"]) == ("output_limit", "output"), answer
    assert len(answer["stdout"]) == 4096
    answer = sh("head -c 300M /dev/zero | tail -n 1")  # tail keeps the one line: past 128 MiB
    assert answer["stderr"] == "tail: memory exhausted\n", answer
    # As for a one-shot program: a failure at the peak of its memory limit is memory_limit.
    # gVisor's rusage does not report that peak (its ru_maxrss stays far below what tail
    # held): there the failure is the command's own, an error.
    memory = ("memory_limit", "memory") if runtime == "runc" else ("error", None)
    assert (answer["status"], answer["limit"]) == memory, answer
    answer = sh("cd /; KEPT=2; sleep 10", timeout=2)  # stopped at a limit: its state is not kept
    assert answer["status"] == "timeout"
    assert sh.out('echo "$KEPT $PWD"') == "1 /tmp\n"
    # A state past the file size limit is not kept either, and the call stays its code's.
    big = "big=$(head -c 5000000 /dev/zero | tr '\\0' x); KEPT=3; echo ${#big}"
    answer = sh(big)
    assert (answer["status"], answer["stdout"]) == ("ok", "5000000\n"), answer
    assert sh.out('echo "$KEPT ${#big}"') == "1 0\n"


@needs_docker
def test_a_call_that_execs_stops_or_kills_its_shell(http: httpx.Client) -> None:
    sh = Shell(http)
    assert sh("export KEPT=1")["status"] == "ok"
    answer = sh("KEPT=2; exec sh -c 'exit 7'")
    assert (answer["status"], answer["exit_code"]) == ("error", 7)
    answer = sh("kill -9 $$")
    assert (answer["status"], answer["exit_code"]) == ("error", 137)
    assert answer["reason"] == "killed by signal 9 (SIGKILL)"
    answer = sh("kill -STOP $$; echo never", timeout=2)
    assert (answer["status"], answer["limit"], answer["stdout"]) == ("timeout", "wall", "")
    answer = sh("trap 'echo mine' EXIT; KEPT=3")  # its own EXIT trap: its state is not kept
    assert (answer["status"], answer["stdout"]) == ("ok", "mine\n")
    assert sh.out("echo $KEPT") == "1\n"  # the state the last complete call left


@needs_docker
def test_forged_markers_and_a_forged_state_reach_no_verdict(http: httpx.Client) -> None:
    sh, other = Shell(http), Shell(http)
    # What a marker-based design would believe: a RESULT frame, a done line. Output only.
    frame = '\\x03\\x00\\x00\\x00\\x00\\x00\\x00\\x11{"exit_code": 0}'
    answer = sh(f"printf '{frame}'; echo '__done__ 0'; exit 4")
    assert (answer["status"], answer["exit_code"]) == ("error", 4)
    answer = sh("echo '__done__ 0'; sleep 10", timeout=2)
    assert answer["status"] == "timeout"
    # The state is code the session's own next call runs: a call can forge that, and only
    # that. The next call runs the forged code (its own code never runs), then all goes on.
    assert sh("export KEPT=1")["status"] == "ok"
    assert sh("echo 'echo forged; exit 0' >&4")["status"] == "ok"
    answer = sh("echo mine; exit 9")
    assert (answer["status"], answer["stdout"]) == ("ok", "forged\n")
    assert sh.out("echo back") == "back\n"
    assert other.out("echo other; echo ${KEPT-unset}") == "other\nunset\n"


@needs_docker
def test_the_client_opens_shell_sessions(url: str) -> None:
    with Client(url) as client, client.session(language="bash", timeout=5) as session:
        session.execute("cd /tmp && export WHERE=tmp")
        result = session.execute('echo "$PWD $WHERE"')
        assert (result.status, result.stdout) == ("ok", "/tmp tmp\n")
        assert session.info is not None and session.info.language == "bash"


@needs_docker
def test_the_async_client_opens_shell_sessions(url: str) -> None:
    async def main() -> Any:
        async with AsyncClient(url) as client, client.session(language="sh") as session:
            await session.execute("X=42")
            return await session.execute("echo $X; exit 5")

    result = asyncio.run(main())
    assert (result.status, result.exit_code, result.stdout) == ("error", 5, "42\n")


@needs_docker
def test_a_shell_sessions_files_and_its_refused_forks(http: httpx.Client) -> None:
    """The file API serves a shell session's working directory as a Python session's; a shell
    has no interpreter to fork, so asking for forks is the caller's mistake (422)."""
    sh = Shell(http)
    path = f"/sessions/{sh.id}/files"
    assert http.put(f"{path}/in/data.txt", content=b"from the api\n").status_code == 201
    assert sh.out("cat in/data.txt; echo made > out.txt") == "from the api\n"
    assert http.get(f"{path}/out.txt").content == b"made\n"
    assert {e["name"] for e in http.get(path).json()["entries"]} == {"in", "out.txt"}
    refused = http.post("/sessions", json={"language": "bash", "max_forks": 1})
    assert refused.status_code == 422 and "fork" in refused.json()["detail"]
