"""Infrastructure faults against a real service: each must surface as a service error, never as a
verdict on the code, and the service must heal by itself.

The Docker daemon these tests break is a private one started here (its own socket, data root,
exec root and managed containerd), loaded with the sandbox image; the service under test talks
to it through DOCKER_HOST. The shared system daemon is never stopped or reconfigured.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import IMAGE, ServiceProcess
from tests.private_docker import PrivateDocker, private_docker
from tests.runtimes import PODS, Variant

pytestmark = pytest.mark.docker

FAST = {
    "BOXED_POOL_SIZE": "2",
    "BOXED_MAX_CONCURRENCY": "4",
    "BOXED_DOCKER_CHECK_INTERVAL": "0.5",
    "BOXED_REAP_INTERVAL": "2",
    "BOXED_SANDBOX_WAIT": "5",
}
SLOW_CODE = "import time\ntime.sleep({seconds})\nprint('done')"
# every service log line starts with its UTC time to the millisecond
TIMESTAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


@pytest.fixture(scope="module")
def docker_private() -> Iterator[PrivateDocker]:
    with private_docker(IMAGE) as daemon:
        yield daemon


@pytest.fixture
def engine(docker_private: PrivateDocker) -> PrivateDocker:
    """The private daemon, running: a test that failed mid-outage must not break the next one."""
    if docker_private.proc is None or docker_private.proc.poll() is not None:
        docker_private.start()
    return docker_private


def started(service: ServiceProcess) -> ServiceProcess:
    """Start it, and stop it again if it never became ready (no orphaned service)."""
    try:
        return service.start()
    except BaseException:
        if service.proc is not None:
            service.stop()
        raise


# Process mode over the Docker backend, and over the pod backend's stand-in: the same faults.
MODES = [
    pytest.param(Variant("runc", "process"), id="process"),
    pytest.param(PODS, id="pods"),
]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> Variant:
    return request.param


def service_on(daemon: PrivateDocker, mode: Variant, **env: str) -> ServiceProcess:
    return started(ServiceProcess(DOCKER_HOST=daemon.host, **{**FAST, **mode.env, **env}))


def post(url: str, code: str, **fields: Any) -> httpx.Response:
    return httpx.post(f"{url}/execute", json={"code": code, **fields}, timeout=90)


def in_background(
    pool: concurrent.futures.ThreadPoolExecutor, url: str, code: str, n: int, **fields: Any
) -> list[concurrent.futures.Future[httpx.Response | Exception]]:
    def one() -> httpx.Response | Exception:
        try:
            return post(url, code, **fields)
        except httpx.HTTPError as exc:  # a transport error is a clear error too; keep it
            return exc

    return [pool.submit(one) for _ in range(n)]


def assert_service_error(answer: httpx.Response | Exception, status: int = 503) -> None:
    """The infrastructure failed: a 503 with Retry-After (``/run_code``: 504, which verl
    retries) carrying a retryable infrastructure failure code, never a 200 verdict."""
    assert isinstance(answer, httpx.Response), answer
    assert answer.status_code == status, f"{answer.status_code}: {answer.text[:300]}"
    assert int(answer.headers["retry-after"]) >= 1
    body = answer.json()
    assert "status" not in body and body["outcome"] == "infrastructure", body
    assert body["failure"]["retryable"] is True, body


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def engine_seen(url: str) -> bool:
    return bool(httpx.get(f"{url}/readyz", timeout=5).json()["backend_up"])


def running_snippet_container(marker: str) -> str:
    """The container whose process tree runs ``sleep <marker>`` (cgroup v1: /docker/<id>)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\x00")
            cgroup = (entry / "cgroup").read_text()
        except OSError:
            continue
        if cmdline[:2] == [b"sleep", marker.encode()]:
            match = re.search(r"/docker/([0-9a-f]{64})", cgroup)
            if match:
                return match.group(1)
    raise LookupError(marker)


# The supervisor over its own socket (the default), over the engine's attach stream, in a pod.
DAEMON_MODES = [
    pytest.param(Variant("runc", "process"), {}, id="process"),
    pytest.param(
        Variant("runc", "process"), {"BOXED_SUPERVISOR_SOCKET": "false"}, id="process-attach"
    ),
    pytest.param(PODS, {}, id="pods"),
]


@pytest.mark.parametrize(("mode", "env"), DAEMON_MODES)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_daemon_stopped_mid_run_then_back(
    engine: PrivateDocker, sig: signal.Signals, mode: Variant, env: dict[str, str]
) -> None:
    """(a) Requests running when the engine dies get 503; new ones get 503 + Retry-After while
    it is down; when it comes back the service is ready again on its own.

    A SIGTERMed engine stops its containers gracefully (SIGTERM, which the sandbox's PID 1
    supervisor ignores, then SIGKILL after its stop timeout): a snippet that finishes before
    that ends with its own complete, true verdict; anything else is a service error. A
    supervisor reached without the engine (its own socket, a pod's connection) outlives a
    SIGKILLed engine too, and its snippet may end with its true verdict."""
    service = service_on(engine, mode, **env)
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            running = in_background(pool, service.url, SLOW_CODE.format(seconds=4), 3, timeout=10)
            wait_for(
                lambda: httpx.get(f"{service.url}/readyz").json()["running"] == 3, 20, "3 running"
            )
            time.sleep(0.5)
            engine.signal(sig)
            answers = [f.result(timeout=120) for f in running]
        without_engine = mode.pods or not env  # the socket or the pod's connection
        for answer in answers:
            # Over a stream the engine does not carry, an engine that dies leaves the
            # supervisor running, and its snippet may end with its verdict.
            if (sig == signal.SIGTERM or without_engine) and answer.status_code == 200:
                data = answer.json()  # ran to its end during the graceful stop
                assert (data["status"], data["exit_code"], data["stdout"]) == ("ok", 0, "done\n")
                continue
            assert_service_error(answer)

        wait_for(lambda: not engine_seen(service.url), 10, "/readyz to report the engine down")
        started = time.monotonic()
        refused = post(service.url, "print(1)")
        assert_service_error(refused)
        assert time.monotonic() - started < 2, "a known-dead engine must be answered at once"
        assert refused.json()["failure"]["code"] == "engine_unavailable"
        verl = httpx.post(f"{service.url}/run_code", json={"code": "print(1)"}, timeout=30)
        assert_service_error(verl, status=504)

        engine.start()
        back = time.monotonic()
        wait_for(lambda: ready(service.url), 90, "the service to recover")
        print(
            f"\n{sig.name}: in-flight {[a.status_code for a in answers]}, ready again "
            f"{time.monotonic() - back:.1f} s after the engine answered again"
        )
        after = post(service.url, "print('back')")
        assert after.status_code == 200 and after.json()["stdout"] == "back\n", after.text
    finally:
        service.stop()
    wait_for(lambda: engine.containers(service.instance) == [], 30, "no leftovers")


LOST_MARKER = "3.424242"  # the snippet's sleep: its container is found by this argument


def remove_containers_running_the_marker(engine: PrivateDocker, times: int) -> list[str]:
    """``docker rm -f`` the container running the marked snippet, ``times`` times in a row
    (each time the one its retry runs in); the containers removed."""
    removed: list[str] = []
    for _ in range(times):
        deadline = time.monotonic() + 20
        while True:
            try:
                victim = running_snippet_container(LOST_MARKER)
                if victim not in removed:
                    break
            except LookupError:
                pass
            assert time.monotonic() < deadline, "the snippet never started (again)"
            time.sleep(0.05)
        engine.cli("rm", "-f", victim)
        removed.append(victim)
    return removed


@pytest.mark.runc_only(
    "finds the snippet's container by scanning host /proc and its cgroup v1 path"
)
@pytest.mark.parametrize(
    ("route", "losses"),
    [("/execute", 1), ("/execute", 2), ("/judge", 1)],
    ids=["lost-once", "lost-twice", "judge-test-lost-once"],
)
def test_container_removed_mid_run_is_retried_once(
    engine: PrivateDocker, mode: Variant, route: str, losses: int
) -> None:
    """(b) `docker rm -f` of the container running a snippet is no verdict: the run goes
    again on a fresh sandbox, and its answer is the code's own (B6-7: it used to come back as
    200 `error` exit 137, later as 503). Lost a second time under the same code, the verdict is
    the code's `error` (reason: lost twice), so code that takes its sandbox down cannot escape
    its reward as a mask."""
    service = service_on(engine, mode)
    try:
        code = f"import subprocess\nsubprocess.run(['sleep', '{LOST_MARKER}'])\nprint('survived')"
        body = {"code": code, "timeout": 20}
        if route == "/judge":
            body["tests"] = [{"input": "", "expected_output": "survived\n"}]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(httpx.post, f"{service.url}{route}", json=body, timeout=60)
            remove_containers_running_the_marker(engine, losses)
            answer = future.result(timeout=60)
        assert answer.status_code == 200, answer.text
        data = answer.json()
        assert (data["outcome"], data["failure"]) == ("code", None), data
        if route == "/judge":
            assert (data["verdict"], data["passed"]) == ("accepted", 1), data
        elif losses == 1:
            assert (data["status"], data["stdout"]) == ("ok", "survived\n"), data
        else:
            assert data["status"] == "error" and "lost twice" in data["reason"], data
        assert post(service.url, "print('next')").json()["stdout"] == "next\n"
        metrics = httpx.get(f"{service.url}/metrics").text
        assert "boxed_sandbox_retries_total 1.0" in metrics  # one retry, whatever came of it
        warnings = [line for line in service.log.read_text().splitlines() if " WARNING " in line]
        assert any("sandbox lost under a run" in line for line in warnings), warnings
        assert all(TIMESTAMPED.match(line) for line in warnings), warnings
    finally:
        service.stop()
    assert engine.containers(service.instance) == []


def test_pool_containers_removed_from_outside(engine: PrivateDocker, mode: Variant) -> None:
    """(c) The warm pool wiped by someone else: it refills and the very next request works."""
    service = service_on(engine, mode)
    try:
        wait_for(lambda: len(engine.containers(service.instance)) >= 2, 30, "pool")
        doomed = engine.containers(service.instance)
        engine.cli("rm", "-f", *doomed)
        r = post(service.url, "print('after wipe')")
        assert r.status_code == 200 and r.json()["stdout"] == "after wipe\n", r.text
        wait_for(lambda: ready(service.url), 30, "ready again")
        wait_for(
            lambda: len(engine.containers(service.instance, running_only=True)) >= 2,
            30,
            "pool refilled",
        )
        assert not set(doomed) & set(engine.containers(service.instance))
    finally:
        service.stop()
    assert engine.containers(service.instance) == []


def test_sigterm_under_load_drains(engine: PrivateDocker, mode: Variant) -> None:
    """(d) SIGTERM with requests in flight: each finishes with its true verdict or gets a clear
    error; the service exits 0 and leaves no container behind."""
    service = service_on(engine, mode)
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            slow = in_background(pool, service.url, SLOW_CODE.format(seconds=2), 6, timeout=10)
            quick = in_background(pool, service.url, "print(7 * 6)", 2)
            wait_for(lambda: httpx.get(f"{service.url}/readyz").json()["running"] >= 3, 20, "load")
            assert service.proc is not None
            service.proc.send_signal(signal.SIGTERM)
            code = service.proc.wait(90)
            answers = [f.result(timeout=90) for f in slow + quick]
            log = service.log.read_text()  # the process has exited; stop() removes the log
    finally:
        service.stop()
    # uvicorn re-raises the SIGTERM it handled once shutdown is complete
    assert code in (0, -signal.SIGTERM) and "Application shutdown complete" in log, log[-2000:]
    finished = 0
    for answer, want in zip(answers, ["done\n"] * 6 + ["42\n"] * 2, strict=True):
        if isinstance(answer, Exception):
            continue  # refused at the door (connection closed): the client can tell and retry
        if answer.status_code == 200:
            assert (answer.json()["status"], answer.json()["stdout"]) == ("ok", want)
            finished += 1
        else:
            assert_service_error(answer)
    assert finished >= 3, "the requests already running must be allowed to finish"
    assert engine.containers(service.instance) == []


def test_sigkill_then_restart_reaps_orphans(engine: PrivateDocker, mode: Variant) -> None:
    """(e) SIGKILL leaves the pool and the running sandboxes behind; a restart with the same
    BOXED_INSTANCE removes them all before serving."""
    first = service_on(engine, mode)
    assert first.proc is not None
    try:
        sid = httpx.post(f"{first.url}/sessions", json={}, timeout=60).json()["session_id"]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            in_background(pool, first.url, SLOW_CODE.format(seconds=20), 2, timeout=25)
            wait_for(lambda: httpx.get(f"{first.url}/readyz").json()["running"] == 2, 20, "running")
            first.proc.kill()
            first.proc.wait()
    finally:
        first.stop()  # already killed (or the test failed first): no orphan service, no log
    orphans = engine.containers(first.instance)
    assert len(orphans) >= 3, orphans  # two running snippets and the warm pool (and a session)

    second = ServiceProcess(
        DOCKER_HOST=engine.host, **{**FAST, **mode.env, "BOXED_INSTANCE": first.instance}
    )
    second.instance = first.instance
    try:
        started(second)
        left = set(orphans) & set(engine.containers(first.instance))
        assert left == set(), f"orphans still there after start-up: {left}"
        r = post(second.url, "print('fresh')")
        assert r.status_code == 200 and r.json()["stdout"] == "fresh\n"
        # the session the killed run held: lost with it (no reward), not "never made" (404)
        old = httpx.post(f"{second.url}/sessions/{sid}/execute", json={"code": "1"}, timeout=30)
        assert old.status_code == 410 and old.json()["failure"]["code"] == "session_lost", old.text
        log = second.log.read_text()
    finally:
        second.stop()
    reaped = [line for line in log.splitlines() if "reaped" in line and "earlier run" in line]
    assert len(reaped) == 1 and TIMESTAMPED.match(reaped[0]), log[-2000:]
    assert " WARNING " in reaped[0] and f"reaped {len(orphans)} sandboxes" in reaped[0], reaped
    assert engine.containers(first.instance) == []


def test_private_daemon_is_really_private(engine: PrivateDocker) -> None:
    """The faults above hit our own engine only: it has its own root, not the system one."""
    ours = json.loads(engine.cli("info", "--format", "{{json .DockerRootDir}}"))
    assert ours.startswith(str(engine.root))
    system = subprocess.run(
        ["docker", "info", "--format", "{{json .DockerRootDir}}"], capture_output=True, text=True
    )
    assert system.returncode == 0 and json.loads(system.stdout) != ours
