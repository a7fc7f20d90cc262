"""Process isolation (BOXED_ISOLATION=process): tampering, clean-up and container retirement.

The verdict checklist (ok, error, stdin, timeout with partial output, memory, output flood,
fork bomb, read-only root, no persistence, 32 in parallel) runs in both modes through the
parametrized ``boxed_service`` fixture of tests/test_execute.py. This module covers what only
process mode has: a supervisor and its later snippets that a snippet must not be able to reach.

Snippets that tamper and snippets that check must meet in the same container, or a check would
prove nothing: the ``single`` service has one pooled container and runs one snippet at a time,
and every such test asserts, from the snippets' own view of their cgroup, that they did meet.
"""

from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import json
import logging
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from unittest import mock

import httpx
import pytest

from exec_server.backends import docker as docker_backend
from exec_server.backends.base import Job, SandboxError
from exec_server.backends.docker import AttachStream, DirectStream, DockerBackend
from exec_server.backends.supervised import Preload, SupervisedSandbox
from exec_server.guest.protocol import (
    CLEANUP,
    ERRORS,
    OUTPUT,
    RESULT,
    VERSION,
    CleanupVerdict,
    GuestConfig,
    RunReport,
    frame,
)
from exec_server.guest.supervisor import ZYGOTE_MODULES
from exec_server.settings import Settings
from exec_server.verdict import NotAVerdict, RunLimits, decide
from tests.conftest import ServiceProcess, instance_containers, running_service
from tests.service import IMAGE

# gVisor shows a sandbox an empty /proc/self/cgroup: the container id WHERE reads is not there.
WHERE_IS_RUNC_ONLY = pytest.mark.runc_only(
    "tells containers apart by the /docker/<id> cgroup path, and /proc/self/cgroup is empty "
    "under gVisor"
)
WHERE = (
    "import re as _re\n"
    "print(_re.search(r'/docker/([0-9a-f]{64})', open('/proc/self/cgroup').read()).group(1))\n"
)


def run(url: str, code: str, **fields: object) -> dict:
    r = httpx.post(f"{url}/execute", json={"code": code, **fields}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def run_where(url: str, code: str, **fields: object) -> tuple[str, str, dict]:
    """Run ``code`` after a line that prints the container's id: (id, rest of stdout, answer)."""
    data = run(url, WHERE + code, **fields)
    container, _, rest = data["stdout"].partition("\n")
    assert len(container) == 64, data
    return container, rest, data


def tamper_then_check(
    url: str, attack: str, check: str, attack_fields: dict | None = None, **check_fields: object
) -> tuple[str, dict, str, dict]:
    """Run ``attack``, then ``check``, asserting that both met in the same container:
    (attack's stdout after the id line, its answer, the same for check)."""
    first, attack_out, attack_data = run_where(url, attack, **(attack_fields or {}))
    second, check_out, check_data = run_where(url, check, **check_fields)
    assert second == first, "the check must run in the container the attack ran in"
    return attack_out, attack_data, check_out, check_data


def single_container_service(**env: str) -> AbstractContextManager[ServiceProcess]:
    """A process-mode service with one container serving one snippet at a time; asserts no
    container is left after."""
    return running_service(
        BOXED_ISOLATION="process",
        BOXED_POOL_SIZE="1",
        BOXED_MAX_CONCURRENCY="1",
        BOXED_STRICT_POOL_SIZE="0",
        **env,
    )


@pytest.fixture(scope="module")
def single() -> Iterator[str]:
    with single_container_service() as service:
        yield service.url


# -- the supervisor is out of reach ------------------------------------------------------------
SIGNAL_AND_TRACE = """
import ctypes, os, signal
sup = os.getppid()
libc = ctypes.CDLL(None, use_errno=True)
out = []
for target in (sup, 1):
    for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM, 0):
        try:
            os.kill(target, sig)
            out.append('sent')
        except PermissionError:
            out.append('EPERM')
    for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
        out.append((libc.ptrace(request, target, 0, 0), ctypes.get_errno()))
try:
    os.killpg(os.getpgid(sup), signal.SIGKILL)
    out.append('group sent')
except PermissionError:
    out.append('group EPERM')
print(out)
status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())
sup_status = dict(l.split(':', 1) for l in open(f'/proc/{sup}/status').read().splitlines())
print(status['Uid'].split(), status['Groups'].split(), status['NoNewPrivs'].strip())
print([status[c].strip() for c in ('CapInh', 'CapPrm', 'CapEff', 'CapAmb')])
print(sup_status['Uid'].split()[0], sup_status['Name'].strip())
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_snippet_cannot_signal_or_trace_the_supervisor(single: str) -> None:
    out, data, after, checked = tamper_then_check(single, SIGNAL_AND_TRACE, LIST_PROCESSES)
    tried, ids, caps, supervisor_line = out.splitlines()
    eperm = (-1, 1)
    # The supervisor is PID 1 and leads process group 1: killpg(1) is kill(-1), which never
    # reaches init and which the kernel answers with success whomever it could not signal.
    assert eval(tried) == (["EPERM"] * 4 + [eperm, eperm]) * 2 + ["group sent"], data
    uids, _, rest = ids.partition("] ")
    uid = {int(u) for u in ast.literal_eval(uids + "]")}
    assert len(uid) == 1 and uid.pop() in Settings().sandbox_uid_range, ids  # its own uid
    assert rest == "[] 1"  # no groups, no_new_privs
    assert eval(caps) == ["0000000000000000"] * 4
    assert supervisor_line == "0 python3"  # a different uid: root, but out of the snippet's reach
    # the supervisor and its zygotes survived, and served the check
    assert after == "True True True\n", checked


READ_SUPERVISOR = """
import os
sup = os.getppid()
out = []
for path in ('mem', 'environ', 'fd/0', 'fd/1', 'maps', 'root/tmp', 'cwd'):
    for pid in (sup, 1):
        try:
            with open(f'/proc/{pid}/{path}', 'rb') as f:
                f.read(1)
            out.append('read')
        except IsADirectoryError:
            try:
                os.listdir(f'/proc/{pid}/{path}')
                out.append('listed')
            except PermissionError:
                out.append('EACCES')
        except PermissionError:
            out.append('EACCES')
try:
    os.listdir(f'/proc/{sup}/fd')
    out.append('listed fds')
except PermissionError:
    out.append('EACCES')
print(out)
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_snippet_cannot_read_supervisor_memory_environment_or_streams(single: str) -> None:
    _, out, data = run_where(single, READ_SUPERVISOR)
    assert eval(out) == ["EACCES"] * 15, data


FORGE_RESULT = """
import os, sys
fake = b'{"exit_code": 0, "killed_for": null, "oom_killed": false, "duration_ms": 1}'
sys.stdout.flush()
os.write(1, bytes([3, 0, 0, 0]) + len(fake).to_bytes(4, 'big') + fake)
try:
    open(f'/proc/{os.getppid()}/fd/1', 'wb').write(b'x')
except PermissionError:
    os.write(2, b'EACCES')
sys.exit(5)
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_forged_protocol_frames_stay_plain_output(single: str) -> None:
    _, out, data = run_where(single, FORGE_RESULT)
    assert data["status"] == "error" and data["exit_code"] == 5  # the verdict is not forged
    assert out.endswith('"duration_ms": 1}') and out.startswith("\x03\x00\x00\x00")
    assert data["stderr"] == "EACCES"


# -- how the host reaches the supervisor ---------------------------------------------------------
SOCKET_PROBE = """
import os, socket
for path in ('/run/boxed', '/proc/1/root/run/boxed'):
    try:
        print(os.listdir(path))
    except OSError as exc:
        print(type(exc).__name__)
for path in ('/run/boxed/host.sock', '/proc/1/root/run/boxed/host.sock'):
    try:
        socket.socket(socket.AF_UNIX).connect(path)
        print('connected')
    except OSError as exc:
        print(type(exc).__name__)
"""


# A unix socket bound to an abstract name, kept alive in flight (sent into itself): it outlives
# every process of the snippet.
KEEP_BOUND_IN_FLIGHT = (
    "import array, socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
    "s.bind('\\0boxed-kept')\n"
    "rights = array.array('i', [s.fileno()])\n"
    "s.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)], 0, '\\0boxed-kept')\n"
)


def backend_for_test(**settings: object) -> DockerBackend:
    return DockerBackend(
        Settings(sandbox_image=IMAGE, instance=f"t-{uuid.uuid4().hex[:8]}", **settings),
        reuse=True,
    )


async def run_twice(backend: DockerBackend, code: str) -> tuple[type, list[str]]:
    """Warm one sandbox of ``backend``, run ``code`` then ``print(6*7)`` in it, clean up
    between: (the stream type, the two stdouts)."""
    sandbox = await backend.create_warm()
    try:
        outputs = []
        for snippet in (code, "print(6*7)"):
            observation = await sandbox.run(_job(snippet))
            assert observation.exit_code == 0, observation
            assert await sandbox.settle()
            outputs.append(observation.stdout.decode())
        return type(sandbox.stream), outputs
    finally:
        await sandbox.discard()
        await backend.close()


@pytest.mark.docker
def test_the_supervisor_is_served_over_a_socket_no_snippet_can_reach() -> None:
    """The host connects to the supervisor's unix socket from outside the container; the path
    is gone, and its directory root's alone, before the first snippet runs."""
    backend = backend_for_test()
    seen: list[bool] = []
    connect = backend._connect_to_supervisor

    def connect_and_look(container_id: str, pid: int) -> object:
        sock = connect(container_id, pid)
        time.sleep(0.2)  # the supervisor has taken the connection and moved on
        seen.append(os.path.exists(f"/proc/{pid}/root{docker_backend.SOCKET_PATH}"))
        return sock

    backend._connect_to_supervisor = connect_and_look  # type: ignore[method-assign]
    stream, (probe, answer) = asyncio.run(run_twice(backend, SOCKET_PROBE))
    assert stream is DirectStream
    assert seen == [False], "the socket's path must be removed once the host is connected"
    assert probe.split() == ["PermissionError"] * 4, probe
    assert answer == "42\n"


@pytest.mark.docker
@pytest.mark.parametrize("why", ["turned off", "unreachable"])
def test_without_the_socket_the_supervisor_is_served_over_the_attach_stream(
    why: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Off by setting, or when this service cannot reach the socket (a service in a PID
    namespace of its own, not root, another runtime): the attach stream, same answers."""
    if why == "turned off":
        backend = backend_for_test(supervisor_socket=False)
        assert not backend.direct
    else:
        backend = backend_for_test()

        def unreachable(self: DockerBackend, container_id: str, pid: int) -> object:
            raise OSError(f"process {pid} is not visible here")

        monkeypatch.setattr(DockerBackend, "_connect_to_supervisor", unreachable)
        monkeypatch.setattr(docker_backend, "_told_attach", threading.Event())
        caplog.set_level(logging.INFO, logger="boxed.docker")
    stream, outputs = asyncio.run(run_twice(backend, "print('over the engine')"))
    assert stream is AttachStream
    assert outputs == ["over the engine\n", "42\n"]
    assert not backend.direct  # and the next containers do not try again
    if why == "unreachable":  # said once, at INFO: under compose it is the normal case
        told = [r for r in caplog.records if "is not visible here" in r.getMessage()]
        assert [r.levelno for r in told] == [logging.INFO], caplog.text


@pytest.mark.docker
@pytest.mark.parametrize("kind", ["light", "heavy"])
def test_a_snippets_interpreter_holds_none_of_the_supervisors_code(single: str, kind: str) -> None:
    """Both zygotes are fresh interpreters with only the guest modules they need: none of the
    supervisor's code (megabytes a fork would copy a page table entry for, and an exit tear
    down) is in the memory a child is forked from."""
    code = (
        "import sys\n"
        "guest = sorted(m for m in sys.modules if m.startswith('boxed_guest'))\n"
        "print('numpy' in sys.modules, guest)\n"  # numpy: preloaded, in the heavy zygote only
        + ("import numpy\n" if kind == "heavy" else "")
    )
    # the zygote's own modules: the runner, and the /judge harness its children may become
    own = ["protocol", "runner", "values", "harness", "zygote"]
    assert sorted(own) == sorted(ZYGOTE_MODULES)
    guest = sorted(["boxed_guest", *(f"boxed_guest.{name}" for name in own)])
    data = run(single, code)
    assert data["stdout"] == f"{kind == 'heavy'} {guest}\n", data


@pytest.mark.docker
def test_every_child_draws_its_own_randomness() -> None:
    """Children forked from one zygote (light, then heavy) do not share a random state: what
    a fresh ``python`` would draw differs from run to run here too."""
    draws = {
        "light": "import random, os, uuid\nprint(random.random(), os.urandom(8), uuid.uuid4())",
        "heavy": "import numpy, random\nprint(numpy.random.rand(), random.random())",
    }
    with single_container_service() as service:
        for kind, code in draws.items():
            outputs = [run_where(service.url, code) for _ in range(3)]
            assert len({where for where, _, _ in outputs}) == 1, kind  # one container, one zygote
            assert len({out for _, out, _ in outputs}) == 3, (kind, outputs)


@pytest.mark.docker
def test_a_batch_runs_each_job_fresh_and_stops_after_one_the_host_would_not_continue_after() -> (
    None
):
    """A batch (a judge's tests) goes from run to run without the host: each run is a fresh
    process in an emptied /tmp with nothing of the one before alive; a run that leaves a
    process behind, that a limit stops, or after which the clean-up proof fails (a socket kept
    bound in flight), ends the batch, and the rest come back None."""
    write = "import os\nopen('/tmp/mark', 'w').write('x')\nprint(os.getpid())"
    look = (
        "import os\nmine = [p for p in os.listdir('/proc') if p.isdigit()"
        " and os.stat(f'/proc/{p}').st_uid == os.getuid() and int(p) != os.getpid()]\n"
        "print(os.path.exists('/tmp/mark'), len(mine), os.getpid())"
    )
    leave = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint('left one')"

    async def scenario() -> None:
        backend = backend_for_test()
        try:
            sandbox = await backend.create_warm()
            try:
                first = await sandbox.run_batch([_job(write), _job(look), _job(leave), _job(look)])
                assert [o is None for o in first] == [False, False, False, True]
                assert all(o.exit_code == 0 for o in first[:3]), first  # type: ignore[union-attr]
                pid, seen, _ = (o.stdout.decode().split() for o in first[:3])  # type: ignore[union-attr]
                assert seen[:2] == ["False", "0"] and seen[2] != pid[0]
                assert first[2].stdout == b"left one\n"  # type: ignore[union-attr]
                assert await sandbox.settle()  # the clean-up's one verdict, after the batch
                again = await sandbox.run_batch([_job(look), _job(look)])
                assert [o.stdout.split()[:2] for o in again] == [[b"False", b"0"]] * 2  # type: ignore[union-attr]
                assert await sandbox.settle()
                kept = await sandbox.run_batch([_job(KEEP_BOUND_IN_FLIGHT), _job(look)])
                assert kept[0] is not None and kept[0].exit_code == 0 and kept[1] is None
                assert not await sandbox.settle()  # the proof failed: retired, as between requests
            finally:
                await sandbox.discard()
            sandbox = await backend.create_warm()
            try:
                stopped = await sandbox.run_batch([_job("while True: pass", wall=0.5), _job(look)])
                assert stopped[0] is not None and stopped[0].killed_for == "wall"
                assert stopped[1] is None
            finally:
                await sandbox.discard()
        finally:
            await backend.close()
        # A one-request container (container mode): its last run ends it without a verdict,
        # unless the batch stopped before it; the host then reads the verdict and goes on.
        settings = Settings(sandbox_image=IMAGE, instance=backend.settings.instance)
        backend = DockerBackend(settings, reuse=False)
        try:
            sandbox = await backend.create_warm()
            try:
                jobs = [replace(_job(leave), more=True), _job(look)]
                batch = await sandbox.run_batch(jobs)
                assert batch[0] is not None and batch[0].stdout == b"left one\n"
                assert batch[1] is None
                async with asyncio.timeout(5):
                    assert await sandbox.settle()
                again = await sandbox.run(_job(look))
                assert again.stdout.split()[:2] == [b"False", b"0"]
            finally:
                await sandbox.discard()
        finally:
            await backend.close()

    asyncio.run(scenario())


def test_only_sandboxes_reached_over_the_socket_get_its_directory() -> None:
    """The socket's tmpfs is mounted where the service will connect to it: process mode and
    sessions, not a container-mode container, which serves one snippet over the attach stream,
    nor a pod, which is reached over TCP."""
    backend = DockerBackend(Settings(), reuse=True)
    assert docker_backend.SOCKET_DIR in backend.host_options(256, socket=True)["tmpfs"]
    assert docker_backend.SOCKET_DIR not in backend.host_options(256)["tmpfs"]


def test_the_supervisor_holds_ptrace_only_under_gvisor() -> None:
    """gVisor's /proc shows no system call of a process, so a session's PID 1 stops its
    interpreter (ptrace) to see where it waits: CAP_SYS_PTRACE there, the sentry's; under runc
    PID 1 reads /proc and holds only what it needs to drop ids and kill."""
    for runtime, caps in (
        ("runc", ["SETUID", "SETGID", "KILL"]),
        ("runsc", ["SETUID", "SETGID", "KILL", "SYS_PTRACE"]),
    ):
        backend = DockerBackend(Settings(runtime=runtime), reuse=True)
        assert backend.host_options(256)["cap_add"] == caps
        assert backend.host_options(256)["cap_drop"] == ["ALL"]


@pytest.mark.docker
def test_a_container_mode_sandbox_has_no_socket_directory() -> None:
    """What the snippet sees: a mount at /run/boxed in a process-mode sandbox only."""
    mounted = "print(' /run/boxed ' in open('/proc/self/mountinfo').read())"
    with single_container_service() as service:
        assert run(service.url, mounted)["stdout"] == "True\n"
        assert run(service.url, mounted, isolation="container")["stdout"] == "False\n"


def test_gvisor_sandboxes_are_reached_over_the_attach_stream() -> None:
    """runsc keeps a container's files in its sentry: no host path leads to the socket."""
    assert not DockerBackend(Settings(runtime="runsc"), reuse=True).direct
    assert DockerBackend(Settings(), reuse=True).direct


@pytest.mark.docker
@pytest.mark.parametrize("how", ["socket", "socket, before it listens", "attach"])
def test_a_supervisors_last_words_reach_the_warm_up_error(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor's stderr comes through the engine either way: a supervisor that fails
    at start says why in the error (its configuration is of another protocol version, or it
    cannot bind its socket); one that dies before it listens is no reason to give the socket
    up."""
    real = docker_backend.supervisor_config

    def of_another_version(*args: object, **kwargs: object) -> GuestConfig:
        return replace(real(*args, **kwargs), version=VERSION + 1)  # type: ignore[arg-type]

    if how == "socket, before it listens":
        monkeypatch.setattr(docker_backend, "SOCKET_PATH", "/nowhere/host.sock")
        expected = "FileNotFoundError"
    else:
        monkeypatch.setattr(docker_backend, "supervisor_config", of_another_version)
        expected = f"ProtocolError: the host speaks protocol version {VERSION + 1}"
    backend = backend_for_test(supervisor_socket=how != "attach")
    with pytest.raises(SandboxError, match=f"(?s)exited during warm-up: .*{expected}"):
        asyncio.run(backend.create_warm())
    assert backend.direct == (how != "attach")
    asyncio.run(backend.close())


# -- nothing of a snippet reaches the next one -------------------------------------------------
PLANT = """
import os, sys
open('/tmp/boxed_planted.py', 'w').write('print("PLANTED")')
open('/tmp/sitecustomize.py', 'w').write('print("PLANTED")')
open('sitecustomize.py', 'w').write('print("PLANTED")')
open('usercustomize.py', 'w').write('print("PLANTED")')
os.makedirs('/tmp/deep/a/b', exist_ok=True)
open('/tmp/deep/a/b/f', 'w').write('x')
os.chmod('/tmp/deep/a', 0)
os.mkfifo('/tmp/fifo')
refused = 0
for entry in sys.path:
    try:
        open(os.path.join(entry, 'boxed_planted.py'), 'w').write('print("PLANTED")')
    except OSError:
        refused += 1
print(refused == len(sys.path), os.getcwd(), sorted(os.listdir('/tmp')))
"""
CHECK_PLANTED = """
import os
try:
    import boxed_planted
    print('imported')
except ModuleNotFoundError:
    print('not found')
print(sorted(os.listdir('/tmp')), os.listdir('.'), os.getcwd())
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_planted_files_and_modules_do_not_reach_the_next_snippet(single: str) -> None:
    out, data, after, checked = tamper_then_check(single, PLANT, CHECK_PLANTED)
    planted = ["boxed_planted.py", "deep", "fifo", "run", "sitecustomize.py"]
    assert out == f"True /tmp/run {planted}\n", data
    assert after == "not found\n['run'] [] /tmp/run\n", checked
    assert "PLANTED" not in checked["stdout"] + checked["stderr"]


WRITABLE_PLACES = """
import os
found = []
for root, dirs, _ in os.walk('/'):
    if root in ('/proc', '/sys', '/tmp'):
        dirs[:] = []
        continue
    probe = os.path.join(root, '.boxed-probe')
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        os.unlink(probe)
        found.append(root)
    except OSError:
        pass
print(found)
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_tmp_is_the_only_writable_place(single: str) -> None:
    _, out, data = run_where(single, WRITABLE_PLACES, timeout=20)
    assert out == "[]\n", data


IPC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
out = []
for call in (lambda: libc.shmget(0x5eed, 4096, 0o1600),
             lambda: libc.msgget(0x5eed, 0o1600),
             lambda: libc.semget(0x5eed, 1, 0o1600),
             lambda: libc.mq_open(b'/boxed', os.O_CREAT | os.O_RDWR, 0o600, None)):
    out.append(call() == -1 and ctypes.get_errno() != 0)
print(out)
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_ipc_objects_that_would_outlive_a_snippet_cannot_be_made(single: str) -> None:
    _, out, data = run_where(single, IPC)
    assert out == "[True, True, True, True]\n", data


MONKEYPATCH = """
import builtins, json, math, sys, sympy
sympy.sqrt = lambda x: 'patched'
json.dumps = lambda *a, **k: 'patched'
math.pi = 3
builtins.len = lambda x: -1
sys.modules['numpy'] = None
sys.path.insert(0, '/tmp')
print(sympy.sqrt(8))
"""
CHECK_MONKEYPATCH = """
import json, math, sys, numpy, sympy
print(sympy.sqrt(8), json.dumps([1]), math.pi, len('ab'), sys.path[0] != '/tmp', numpy.__name__)
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_monkeypatched_preloaded_modules_do_not_leak(single: str) -> None:
    out, _, after, checked = tamper_then_check(single, MONKEYPATCH, CHECK_MONKEYPATCH)
    assert out == "patched\n"
    assert after == "2*sqrt(2) [1] 3.141592653589793 2 True numpy\n", checked


DAEMON = """
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # daemonised: its parent is gone, it is in no group of the snippet's
        open('/tmp/daemon-was-here', 'w').write(str(os.getpid()))
        time.sleep(0.3)  # let this snippet end first; then attack whatever runs next
        while True:
            open('/tmp/daemon-was-here', 'w').write(str(os.getpid()))
            for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:
                if pid != os.getpid():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            time.sleep(0.01)
    os._exit(0)
while not os.path.exists('/tmp/daemon-was-here'):
    time.sleep(0.01)
print('daemon started')
"""
CHECK_DAEMON = """
import os, time
time.sleep(0.5)  # a surviving daemon would have killed us by now
others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()
          and os.stat(f'/proc/{p}').st_uid != 0]  # root's: the supervisor and its zygote
print(others, os.path.exists('/tmp/daemon-was-here'))
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_daemonised_leftover_process_is_killed_before_the_next_snippet(single: str) -> None:
    out, data, after, checked = tamper_then_check(single, DAEMON, CHECK_DAEMON)
    assert data["status"] == "ok" and out == "daemon started\n", data
    assert after == "[] False\n", checked


LIST_PROCESSES = """
import os
pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]
mine = [p for p in pids if os.stat(f'/proc/{p}').st_uid == os.getuid()]
roots = sorted(p for p in pids if os.stat(f'/proc/{p}').st_uid == 0)
# the supervisor (PID 1) and its zygotes (the light one, our parent, and the heavy one once a
# snippet needed it), all root's; of our uid only us
print(mine == [os.getpid()], os.getppid() in roots[1:], len(roots) in (2, 3) and roots[0] == 1)
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_snippet_shares_the_container_with_init_and_the_supervisor_only(single: str) -> None:
    # The child of the next snippet is forked ahead of time, but only once every process of
    # the one before is dead: no snippet ever meets another process of its own uid.
    for _ in range(3):  # the first child was forked at start-up, the later ones after clean-ups
        out, _, after, checked = tamper_then_check(single, DAEMON, LIST_PROCESSES)
        assert out == "daemon started\n" and after == "True True True\n", checked


OWN_LIMITS = """
import os, resource
names = ('AS', 'CPU', 'FSIZE', 'NOFILE', 'CORE', 'MSGQUEUE')
print({n: resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in names})
print(os.getcwd(), os.listdir('.'), os.getpriority(os.PRIO_PROCESS, 0))
"""


@pytest.mark.docker
def test_each_snippet_gets_its_own_limits_and_empty_directory(single: str) -> None:
    settings = Settings()
    for timeout, memory_mb in ((3, 128), (7.5, 300)):
        data = run(single, OWN_LIMITS, timeout=timeout, memory_mb=memory_mb)
        limits_line, where = data["stdout"].splitlines()
        limits = ast.literal_eval(limits_line)
        address_space = limits["AS"][0]
        # what its interpreter had mapped (no preload: this snippet imports only the
        # standard library) plus exactly its own memory_mb
        assert 10 << 20 < address_space - (memory_mb << 20) < 200 << 20, limits
        cpu = -(-timeout // 1) + 1
        assert limits["CPU"] == (cpu, cpu + 1), limits
        fsize = settings.tmpfs_mb << 20
        assert limits["FSIZE"] == (fsize, fsize), limits
        assert limits["NOFILE"] == (settings.nofile, settings.nofile), limits
        assert limits["CORE"] == (0, 0) and limits["MSGQUEUE"] == (0, 0), limits
        assert where == "/tmp/run [] 19", where


THREADS_AND_FDS = """
import os, socket, threading, time
def spin():
    while True:
        time.sleep(0.01)
threading.Thread(target=spin).start()  # not a daemon thread: python -c would wait for it
threading.Thread(target=spin, daemon=True).start()
kept = [open('/etc/hostname') for _ in range(20)] + [socket.socket() for _ in range(5)]
kept += list(os.pipe())
print(threading.active_count())
"""
CHECK_THREADS_AND_FDS = """
import os, threading
tasks, fds = os.listdir('/proc/self/task'), sorted(os.listdir('/proc/self/fd'))
print(threading.active_count(), len(tasks), fds)
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_leftover_threads_and_descriptors_die_with_the_snippet(single: str) -> None:
    out, _, after, checked = tamper_then_check(single, THREADS_AND_FDS, CHECK_THREADS_AND_FDS)
    assert out == "3\n"
    assert after == "1 1 ['0', '1', '2', '3']\n", checked  # 3: the descriptor listdir used


SCAN_OWN_MEMORY = """
import re
# Each secret is searched for as two halves joined in a pattern, never as one byte string
# that would itself sit in this snippet's memory.
patterns = [re.compile(re.escape(bytes.fromhex(a)) + b'(?:)' + re.escape(bytes.fromhex(b)))
            for a, b in {halves!r}]
found = set()
with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', 0) as mem:
    for line in maps:
        m = re.match(r'([0-9a-f]+)-([0-9a-f]+) r', line)
        if not m or line.rstrip().endswith(('[vvar]', '[vsyscall]')):
            continue
        start, end = int(m.group(1), 16), int(m.group(2), 16)
        for offset in range(start, end, 1 << 22):
            try:
                mem.seek(offset)
                block = mem.read(min(end, offset + (1 << 22) + 64) - offset)
            except OSError:
                break
            found |= {{i for i, p in enumerate(patterns) if p.search(block)}}
print(sorted(found))
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_no_trace_of_an_earlier_snippet_in_a_later_childs_memory(single: str) -> None:
    # A fork copies the supervisor's memory: it must hold nothing of earlier snippets.
    secrets = [f"boxed-{uuid.uuid4().hex}" for _ in range(3)]
    code_secret, input_secret, output_secret = secrets
    leaky = (
        f"# {code_secret}\nimport sys\nsys.stdin.read()\n"
        f"print('{output_secret[:10]}' + '{output_secret[10:]}')\nsys.exit(3)"
    )
    # The tails: a later chunk of output may overwrite the first bytes of a stale one.
    halves = [(s[8:20].encode().hex(), s[20:].encode().hex()) for s in secrets]
    scan = SCAN_OWN_MEMORY.format(halves=halves)
    out, data, after, checked = tamper_then_check(
        single, leaky, scan, attack_fields={"input": input_secret}, timeout=20
    )
    assert out == f"{output_secret}\n" and data["exit_code"] == 3
    assert after == "[]\n", checked


# -- retirement ----------------------------------------------------------------------------------
@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_container_retired_after_a_timeout_a_memory_kill_and_an_output_flood(single: str) -> None:
    for code, fields, status in [
        ("import time\ntime.sleep(30)", {"timeout": 1}, "timeout"),
        ("x = bytearray(2 * 1024**3)", {"memory_mb": 128}, "memory_limit"),
        ("while True:\n    print('x' * 1000)", {}, "output_limit"),
    ]:
        before, _, _ = run_where(single, "pass")
        during, _, data = run_where(single, code, **fields)
        assert data["status"] == status and during == before, data
        after, _, _ = run_where(single, "pass")
        assert after != during, f"container kept after {status}"


OOM_GRANDCHILD = (
    "import os\npids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
    "        block = bytearray(60 << 20)\n"
    "        for i in range(0, len(block), 4096): block[i] = 1\n"
    "        import time; time.sleep(3)\n        os._exit(0)\n    pids.append(pid)\n"
    "print(sorted(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids))\n"
)
LEFT_IN_FLIGHT = (
    "import array, os, socket\nfds = []\nfor _ in range(3):\n    fd = os.memfd_create('m')\n"
    "    for _ in range(60): os.write(fd, b'\\1' * (1 << 20))\n    fds.append(fd)\n"
    "a, b = socket.socketpair()\nrights = array.array('i', fds + [a.fileno(), b.fileno()])\n"
    "b.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])\n"
)


@pytest.mark.docker
def test_container_retired_after_what_no_process_holds(single: str) -> None:
    """Residue that outlives every process of a snippet retires its container: an OOM kill
    (the run itself ended ok), moved network counters (they cannot be reset), a socket bound
    in flight, memory charged in flight (unless the kernel's GC freed it before the check)."""
    cases = [
        (OOM_GRANDCHILD, {"memory_mb": 64, "timeout": 8}, True),
        ("import socket\nsocket.socket(2, 2).sendto(b'x', ('127.0.0.1', 9))", {}, True),
        (KEEP_BOUND_IN_FLIGHT, {}, True),
        (LEFT_IN_FLIGHT, {}, False),
    ]
    for code, fields, always in cases:
        before, _, _ = run_where(single, "pass")
        during, out, data = run_where(single, code, **fields)
        assert data["status"] == "ok" and during == before, data
        if code is OOM_GRANDCHILD:
            assert "-9" in out, out  # the OOM killer took a grandchild
        after, _, follow = run_where(single, "x = bytearray(200 << 20)\nprint('fits')")
        assert follow["stdout"].endswith("fits\n"), follow
        if always:
            assert after != during, f"container kept after {code[:60]!r}"


@pytest.mark.docker
def test_normal_runs_keep_their_container(single: str) -> None:
    """The residue checks must not retire a container after ordinary work: threads, numpy,
    a large allocation, files in /tmp, a MemoryError."""
    codes = [
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(32) as pool:\n    print(sum(pool.map(abs, range(64))))",
        "import numpy\nprint(int(numpy.ones((500, 500)).sum()))",
        "x = bytearray(200 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1",
        "open('/tmp/f', 'w').write('x' * 10**6)",
        "x = bytearray(2 * 1024**3)",
        "import sympy\nprint(sympy.factor(sympy.Symbol('x')**2 - 1))",
    ]
    first, _, _ = run_where(single, "pass")
    for code in codes:
        where, _, data = run_where(single, code, memory_mb=256)
        assert data["status"] in ("ok", "memory_limit"), data
        if data["status"] == "memory_limit":
            first, _, _ = run_where(single, "pass")  # retired by the memory verdict itself
            continue
        assert where == first, f"container retired after {code[:60]!r}"


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_container_retired_after_max_runs() -> None:
    with single_container_service(BOXED_PROCESS_MAX_RUNS="3") as service:
        ids = [run_where(service.url, "pass")[0] for _ in range(7)]
    assert len(set(ids[0:3])) == 1 and len(set(ids[3:6])) == 1, ids
    assert len({ids[0], ids[3], ids[6]}) == 3, ids


@pytest.mark.docker
def test_container_removed_mid_run_is_no_verdict_the_run_goes_again() -> None:
    """The removed container's run is retried on a fresh sandbox (docs/failures.md): the
    answer is the code's own complete run, never a verdict made of the kill."""
    with single_container_service() as service:
        run(service.url, "pass")
        code = "import time\nprint('started', flush=True)\ntime.sleep(3)\nprint('done')"
        body = {"code": code, "timeout": 25}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(httpx.post, f"{service.url}/execute", json=body, timeout=60)
            time.sleep(1.5)
            (running,) = instance_containers(service.instance)
            subprocess.run(["docker", "rm", "-f", running], check=True, capture_output=True)
            r = answer.result()
        assert r.status_code == 200, r.text
        data = r.json()
        assert (data["status"], data["outcome"]) == ("ok", "code"), data
        assert data["stdout"] == "started\ndone\n", data
        assert run(service.url, "print('healed')")["stdout"] == "healed\n"


def snippet_parent_on_the_host(container: str, timeout: float = 10.0) -> int:
    """The host pid of the zygote whose child, of the sandbox uid, runs a snippet now."""
    inspect = ["docker", "inspect", "-f", '{{.State.Pid}} {{index .Config.Labels "boxed.uid"}}']
    found = subprocess.run([*inspect, container], check=True, capture_output=True, text=True)
    supervisor, uid = (int(n) for n in found.stdout.split())
    deadline = time.monotonic() + timeout

    def children(pid: int) -> list[int]:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                return [int(child) for child in f.read().split()]
        except OSError:
            return []

    while time.monotonic() < deadline:
        for zygote in children(supervisor):
            for child in children(zygote):
                with open(f"/proc/{child}/status") as f:
                    if f"\nUid:\t{uid}\t" in f.read():
                        return zygote
        time.sleep(0.02)
    raise AssertionError("no snippet child of a zygote found")


COUNT_ROOTS = """
import os
print(sum(os.stat(f'/proc/{p}').st_uid == 0 for p in os.listdir('/proc') if p.isdigit()))
"""


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_the_heavy_zygote_starts_at_the_first_snippet_that_needs_it_then_with_each_container() -> (
    None
):
    """Until a snippet needs sympy or numpy a container has no heavy zygote (importing them is
    most of its start-up); the first such snippet starts it in its container, whose clean-up
    then counts the zygote's memory as the container's own; containers made while such
    snippets are recent (within one container's life of runs) start it, later ones do not."""
    with single_container_service(BOXED_PROCESS_MAX_RUNS="4") as service:
        first, roots, _ = run_where(service.url, COUNT_ROOTS)
        assert roots == "2\n"  # the supervisor and the light zygote
        same, out, data = run_where(service.url, "import sympy\nprint(sympy.Integer(2)**10)")
        assert (same, out, data["status"]) == (first, "1024\n", "ok"), data
        for _ in range(2):  # clean-ups proved since: not retired, the zygote's memory counted
            same, roots, _ = run_where(service.url, COUNT_ROOTS)
            assert (same, roots) == (first, "3\n")
        second, roots, _ = run_where(service.url, COUNT_ROOTS)  # after the first one's 4 runs
        assert second != first and roots == "3\n"
        for _ in range(3):  # a whole container's life (4 runs) with no snippet that needs it
            same, roots, _ = run_where(service.url, COUNT_ROOTS)
            assert (same, roots) == (second, "3\n")
        third, roots, _ = run_where(service.url, COUNT_ROOTS)
        assert third not in (first, second) and roots == "2\n"  # imported only when asked again


ZYGOTE_DIES_MID_RUN = """
import sys, time
print('started', flush=True)
time.sleep(1.5)
print('after')
sys.exit(3)
"""


@pytest.mark.runc_only("reads the container's processes in the host's /proc")
@pytest.mark.docker
def test_a_child_whose_zygote_dies_mid_run_gets_its_own_verdict() -> None:
    """The zygote reaps the child and reports its exit; if the zygote dies (the OOM killer may
    take it) the supervisor adopts the child and reaps it itself: the verdict is still the
    snippet's, and the container, one process short, is retired."""
    with single_container_service() as service:
        run(service.url, "pass")
        (container,) = instance_containers(service.instance)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(run, service.url, ZYGOTE_DIES_MID_RUN, timeout=10)
            os.kill(snippet_parent_on_the_host(container), signal.SIGKILL)
            data = answer.result()
        assert (data["status"], data["exit_code"]) == ("error", 3), data
        assert data["stdout"] == "started\nafter\n", data
        assert 1400 <= data["duration_ms"] < 5000, data
        deadline = time.monotonic() + 30
        while container in instance_containers(service.instance):  # retired: a zygote died
            assert time.monotonic() < deadline, "the container was not retired"
            time.sleep(0.1)
        assert run(service.url, "print('served')")["stdout"] == "served\n"


# -- choosing the mode per request -----------------------------------------------------------------
# Which backend served the snippet: the supervisor's configuration says (its command line).
PARENT = "print(b'\"reuse\": false' in open('/proc/1/cmdline', 'rb').read())"


# A pod's PID 1 is the listener and its configuration comes over the connection: there a
# sandbox is told by what names its container (the cgroup path: /docker/<id> under cgroup v1),
# with its network namespace and its PID 1's start time.
SANDBOX_IDENTITY = (
    "import os\n"
    "print(open('/proc/self/cgroup').read().split(), os.readlink('/proc/self/ns/net'),"
    " open('/proc/1/stat').read().rpartition(')')[2].split()[19])"
)


@pytest.mark.docker
def test_request_can_ask_for_the_stricter_mode(boxed_service: str) -> None:
    ready = httpx.get(f"{boxed_service}/readyz").json()
    server_mode = ready["isolation"]
    if not str(ready["backend"]).startswith("docker-pods"):
        default = run(boxed_service, PARENT)["stdout"]
        strict = run(boxed_service, PARENT, isolation="container")["stdout"]
        asked = run(boxed_service, PARENT, isolation="process")["stdout"]
        assert strict == "True\n"  # always honoured
        assert default == asked == ("False\n" if server_mode == "process" else "True\n")
        return

    def fresh_each_time(**fields: str) -> bool:
        started = [run(boxed_service, SANDBOX_IDENTITY, **fields)["stdout"] for _ in range(6)]
        return len(set(started)) == len(started)

    assert fresh_each_time(isolation="container")  # always honoured
    assert fresh_each_time() == fresh_each_time(isolation="process") == (server_mode != "process")


# -- host side, without Docker ---------------------------------------------------------------------
class _Stream:
    """A supervisor's stream played back from bytes: what ``receive`` hands out, cut anywhere."""

    def __init__(self, data: bytes, *, ends: bool) -> None:
        self.chunks = [data[:5], data[5:]] if data else []
        self.ends = ends
        self.sent: list[bytes] = []

    async def send(self, data: bytes) -> None:
        self.sent.append(data)

    async def receive(self) -> bytes:
        if self.chunks:
            return self.chunks.pop(0)
        if self.ends:
            return b""  # the supervisor exited
        await asyncio.sleep(3600)
        return b""

    def diagnostics(self) -> str:
        return "boom"

    def is_alive(self) -> bool:
        return True

    def close(self) -> None:
        pass


def _sandbox(*frames: bytes, ends: bool = False, max_runs: int = 5) -> SupervisedSandbox:
    stream = _Stream(b"".join(frames), ends=ends)
    return SupervisedSandbox(
        "f" * 64, stream, 256, reusable=True, max_runs=max_runs, preload=Preload(available=True)
    )


def _job(code: str = "print(1)", wall: float = 5) -> Job:
    return Job(code=code, stdin="", limits=RunLimits(wall, wall, 256, 65536))


REPORT = RunReport(
    exit_code=0,
    signal=None,
    killed_for=None,
    started=True,
    memory_error=False,
    oom_killed=False,
    duration_ms=3.5,
    cpu_ms=2.0,
    max_rss_kb=9000,
    strays=0,
).to_wire()
CLEAN = CleanupVerdict(clean=True, problems=[], memory_grown_kb=0).to_json()


def test_host_reads_output_and_result_then_cleanup_frames() -> None:
    sandbox = _sandbox(
        frame(OUTPUT, b"hel"),
        frame(ERRORS, b"warn\n"),
        frame(OUTPUT, b"lo\n"),
        frame(RESULT, json.dumps(REPORT).encode()),
        frame(CLEANUP, CLEAN),
        max_runs=2,
    )
    obs = asyncio.run(sandbox.run(_job("print('hello')")))
    result = decide(obs, _job().limits)
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        "ok",
        0,
        b"hello\n",
        b"warn\n",
    )
    assert result.duration_ms == 3.5 and result.cpu_ms == 2.0 and sandbox.runs == 1
    assert sandbox.can_reuse(result) and asyncio.run(sandbox.settle())
    sandbox.runs = 2
    assert not sandbox.can_reuse(result)  # the run limit retires it


def test_sandboxes_import_the_preload_at_start_while_snippets_that_need_it_are_recent() -> None:
    preload = Preload(available=True, window=3)
    assert not preload.at_start  # none has needed it yet
    preload.note(True)
    assert preload.at_start
    for expected in (True, True, False):  # three more runs, none of which needs it
        preload.note(False)
        assert preload.at_start is expected
    preload.note(True)
    assert preload.at_start
    unavailable = Preload(available=False, window=3)
    unavailable.note(True)
    assert not unavailable.at_start  # BOXED_PRELOAD is empty: nothing to import


def test_host_asks_for_the_preloaded_interpreter_only_when_the_code_needs_it() -> None:
    for code, heavy in [
        ("print(1)", False),
        ("import os, sys, json\nfrom collections import Counter", False),
        ("import sympy", True),
        ("from numpy.linalg import inv", True),
        ("x = __import__('math')", True),
        ("import importlib", True),
        ("# import numpy\nprint('numpy')", False),
        ("import numpy as np(", False),  # does not compile anyway
    ]:
        sandbox = _sandbox(frame(RESULT, json.dumps(REPORT).encode()))
        asyncio.run(sandbox.run(_job(code)))
        sent = sandbox.stream.sent[0]  # type: ignore[attr-defined]
        header = json.loads(sent[4 : 4 + int.from_bytes(sent[:4], "big")])
        assert header["heavy"] is heavy, code
        assert header["last"] is False and header["wall"] == header["cpu"] == 5


def test_host_asks_sandboxes_to_preload_after_their_clean_up_while_it_is_recent() -> None:
    """Every run's header says whether the sandbox should import the preload modules after its
    clean-up: yes from the first snippet that needs them on (that one included), for one
    container's life of runs, on every sandbox of the backend."""
    preload = Preload(available=True, window=2)

    def asked(code: str) -> bool:
        stream = _Stream(frame(RESULT, json.dumps(REPORT).encode()), ends=False)
        sandbox = SupervisedSandbox(
            "f" * 64, stream, 256, reusable=True, max_runs=5, preload=preload
        )
        asyncio.run(sandbox.run(_job(code)))
        sent = stream.sent[0]
        return json.loads(sent[4 : 4 + int.from_bytes(sent[:4], "big")])["preload"]

    runs = ["print(1)", "import sympy", "print(2)", "print(3)", "print(4)"]
    assert [asked(code) for code in runs] == [False, True, True, False, False]


@WHERE_IS_RUNC_ONLY
@pytest.mark.docker
def test_a_container_imports_the_preload_at_its_clean_up_once_another_needed_it() -> None:
    """A container that was warm before any snippet needed sympy imports it after its next
    clean-up once another container served such a snippet: the next one it serves finds the
    preloaded zygote there, and never pays the import on its own clock."""
    with running_service(
        BOXED_ISOLATION="process",
        BOXED_POOL_SIZE="2",
        BOXED_MAX_CONCURRENCY="2",
        BOXED_STRICT_POOL_SIZE="0",
    ) as service:

        def pair(code: str) -> list[tuple[str, str]]:
            with concurrent.futures.ThreadPoolExecutor(2) as pool:  # both in flight at once
                code = f"import time\ntime.sleep(0.3)\n{code}"
                runs = [pool.submit(run_where, service.url, code) for _ in range(2)]
                return [(r.result()[0], r.result()[1]) for r in runs]

        before: dict[str, str] = {}
        for _ in range(10):  # until both containers are warm and each served one
            before.update(pair(COUNT_ROOTS))
            if len(before) == 2:
                break
        assert len(before) == 2 and set(before.values()) == {"2\n"}, before  # no heavy zygote
        heavy, out, _ = run_where(service.url, "import sympy\nprint(sympy.Integer(2)**10)")
        assert out == "1024\n" and heavy in before
        (other,) = set(before) - {heavy}
        seen: dict[str, list[str]] = {}
        for _ in range(3):
            for container, loaded in pair(COUNT_ROOTS):
                seen.setdefault(container, []).append(loaded)
        # the supervisor and both zygotes, also where no sympy snippet ever ran
        assert other in seen and seen[other][-1] == "3\n", seen
        assert all(s[-1] == "3\n" for s in seen.values()), seen


@pytest.mark.parametrize(
    ("frames", "ends", "fragment"),
    [
        ((frame(OUTPUT, b"partial"),), True, "supervisor exited: boom"),
        ((frame(OUTPUT, b"partial"),), False, "did not report in time"),
        ((frame(RESULT, b'{"anomaly": "supervisor failed: OSError()"}'),), False, "failed"),
        ((frame(RESULT, b'{"exit_code": 0}'),), False, "malformed"),
        ((frame(9, b"?"),), False, "unexpected supervisor frame"),
    ],
)
def test_supervisor_failures_are_sandbox_errors_not_verdicts(
    frames: tuple[bytes, ...], ends: bool, fragment: str
) -> None:
    sandbox = _sandbox(*frames, ends=ends)
    with mock.patch("exec_server.backends.supervised.REPORT_GRACE", 0.2):
        with pytest.raises(SandboxError, match=fragment):
            asyncio.run(sandbox.run(_job(wall=0.1)))
    assert sandbox.broken and not sandbox.is_alive()


def test_a_child_that_never_reached_the_code_is_not_a_verdict() -> None:
    report = dict(REPORT, started=False, exit_code=126)
    obs = asyncio.run(_sandbox(frame(RESULT, json.dumps(report).encode())).run(_job()))
    with pytest.raises(NotAVerdict):
        decide(obs, _job().limits)


def test_dirty_or_silent_cleanup_retires_the_container() -> None:
    verdict = CleanupVerdict(clean=False, problems=["/tmp not empty"], memory_grown_kb=0)
    dirty = _sandbox(frame(CLEANUP, verdict.to_json()))
    assert asyncio.run(dirty.settle()) is False
    with mock.patch("exec_server.backends.supervised.SETTLE_TIMEOUT", 0.2):
        assert asyncio.run(_sandbox().settle()) is False


@pytest.mark.parametrize("user", ["nobody", "0:0", "10001:0", "0"])
def test_process_mode_refuses_a_root_or_named_sandbox_user(user: str) -> None:
    # The child must end up as an unprivileged numeric uid/gid; root would keep capabilities.
    with pytest.raises(ValueError, match="non-zero uid"):
        Settings(isolation="process", sandbox_user=user)
    with pytest.raises(ValueError, match="non-zero uid"):
        Settings(isolation="container", sandbox_user=user)  # both modes run the supervisor
