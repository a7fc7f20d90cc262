"""POST /execute against a real service and a real Docker engine (the issue's checklist)."""

from __future__ import annotations

import concurrent.futures
import time

import httpx
import pytest

from tests.conftest import ServiceProcess, running_service

pytestmark = pytest.mark.docker


def run(url: str, code: str, **fields: object) -> dict:
    r = httpx.post(f"{url}/execute", json={"code": code, **fields}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_seed_payload_unchanged(boxed_service: str) -> None:
    # Exactly what environments send today, and the key they read.
    r = httpx.post(f"{boxed_service}/execute", json={"code": "print(6*7)", "input": ""}, timeout=30)
    assert r.status_code == 200
    data = r.json()
    assert data["output"] == "42\n"
    assert data["error"] == ""
    assert data["status"] == "ok" and data["exit_code"] == 0
    assert data["stdout"] == data["output"]


def test_stdin_is_fed_and_alias_accepted(boxed_service: str) -> None:
    code = "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))"
    assert run(boxed_service, code, input="1 2 3\n4")["stdout"] == "10\n"
    assert run(boxed_service, code, stdin="5 5")["stdout"] == "10\n"


def test_empty_stdin_read_returns_at_once(boxed_service: str) -> None:
    data = run(boxed_service, "import sys\nprint(repr(sys.stdin.read()))", timeout=3)
    assert data["status"] == "ok" and data["stdout"] == "''\n"


def test_error_is_a_200_with_traceback(boxed_service: str) -> None:
    data = run(boxed_service, "print('before')\n1/0")
    assert data["status"] == "error" and data["exit_code"] == 1
    assert data["stdout"] == "before\n"
    assert data["stderr"].endswith("ZeroDivisionError: division by zero\n")
    assert 'File "<string>", line 2' in data["stderr"]


def test_sys_exit_code_kept(boxed_service: str) -> None:
    assert run(boxed_service, "import sys; sys.exit(3)")["exit_code"] == 3
    data = run(boxed_service, "raise SystemExit('bye')")
    assert data["exit_code"] == 1 and data["stderr"] == "bye\n"


def test_a_death_by_signal_says_which_and_an_exit_code_cannot_forge_it(
    boxed_service: str,
) -> None:
    """The signal comes from the kernel's wait status, so ``sys.exit(139)`` (the same exit
    code a shell shows for SIGSEGV) gets no signal reason: only the real death does."""
    died = run(boxed_service, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert (died["status"], died["exit_code"], died["outcome"]) == ("error", 139, "code")
    assert died["reason"] == "killed by signal 11 (SIGSEGV)", died
    assert died["error"].endswith("boxed: killed by signal 11 (SIGSEGV)"), died
    forged = run(boxed_service, "import sys; sys.exit(139)")
    assert (forged["status"], forged["exit_code"], forged["reason"]) == ("error", 139, None)


def wait_for_a_full_pool(url: str, seconds: float = 30.0) -> None:
    """Until every warm sandbox is ready: a timing that follows other tests (container mode
    spends a container per snippet) must not count the start of a new one."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready = httpx.get(f"{url}/readyz", timeout=5).json()
        if ready["pool_ready"] >= ready["pool_size"]:
            return
        time.sleep(0.1)


def test_timeout_keeps_partial_output_and_kills_quickly(boxed_service: str) -> None:
    code = "import time\nprint('partial', flush=True)\nprint('no newline', end='')\ntime.sleep(60)"
    wait_for_a_full_pool(boxed_service)
    started = time.monotonic()
    data = run(boxed_service, code, timeout=1.5)
    elapsed = time.monotonic() - started
    assert data["status"] == "timeout" and data["exit_code"] is None
    assert data["stdout"] == "partial\nno newline"
    assert 1.5 <= data["duration_ms"] / 1000 < 2.5
    assert elapsed < 1.5 + 1.0, f"answered {elapsed:.2f} s after a 1.5 s limit"


def test_memory_bomb_is_memory_limit(boxed_service: str) -> None:
    data = run(boxed_service, "x = bytearray(2 * 1024**3)\nprint(len(x))", memory_mb=128)
    assert data["status"] == "memory_limit"
    grow = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 * 1024**2))"
    assert run(boxed_service, grow, memory_mb=128)["status"] == "memory_limit"


def test_interpreter_memory_error_is_memory_limit(boxed_service: str) -> None:
    data = run(boxed_service, "x = [0] * (10**12)")
    assert data["status"] == "memory_limit"
    assert "MemoryError" in data["stderr"]


def test_only_loopback_interface(boxed_service: str) -> None:
    data = run(boxed_service, "import os; print(sorted(os.listdir('/sys/class/net')))")
    assert data["stdout"] == "['lo']\n"
    code = (
        "import socket\ns = socket.socket()\ns.settimeout(1)\n"
        "try:\n    s.connect(('1.1.1.1', 53))\n    print('connected')\n"
        "except OSError as e:\n    print('refused', e.errno)"
    )
    assert run(boxed_service, code)["stdout"].startswith("refused")


def test_fork_bomb_contained(boxed_service: str) -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    data = run(boxed_service, code, timeout=2)
    assert data["status"] in ("timeout", "error")
    assert run(boxed_service, "print('still fine')")["stdout"] == "still fine\n"


def test_stdout_flood_is_output_limit(boxed_service: str) -> None:
    data = run(boxed_service, "while True:\n    print('x' * 1000)")
    assert data["status"] == "output_limit"
    assert data["truncated"] == {"stdout": True, "stderr": False}
    assert len(data["stdout"]) == 64 * 1024
    err = run(boxed_service, "import sys\nwhile True:\n    sys.stderr.write('e' * 1000)")
    assert err["status"] == "output_limit" and err["truncated"]["stderr"] is True


def test_readonly_root_and_non_root_user(boxed_service: str) -> None:
    code = (
        "import os\nprint(os.getuid(), os.getgid())\n"
        "try:\n    open('/etc/owned', 'w')\n"
        "except OSError as e:\n    print(type(e).__name__, e.errno)"
    )
    lines = run(boxed_service, code)["stdout"].splitlines()
    assert lines[0] != "0 0" and not lines[0].startswith("0 ")
    assert lines[1] in ("OSError 30", "PermissionError 13")


def test_tmp_is_writable_but_not_executable(boxed_service: str) -> None:
    code = (
        "import os, subprocess\nopen('/tmp/x.sh', 'w').write('#!/bin/sh\\necho hi')\n"
        "os.chmod('/tmp/x.sh', 0o755)\n"
        "try:\n    subprocess.run(['/tmp/x.sh'])\nexcept PermissionError:\n    print('noexec')"
    )
    assert run(boxed_service, code)["stdout"] == "noexec\n"


def test_no_persistence_between_snippets(boxed_service: str) -> None:
    run(boxed_service, "open('/tmp/marker', 'w').write('secret')")
    code = "import os\nprint(os.path.exists('/tmp/marker'))"
    assert run(boxed_service, code)["stdout"] == "False\n"


def test_popular_modules_are_preloaded(boxed_service: str) -> None:
    # Already imported before the snippet's first line: its `import sympy` is a dict lookup
    # (the cost difference is measured in bench/bench_execute.py, not asserted here).
    code = "import sys\nprint('sympy' in sys.modules, 'numpy' in sys.modules)\nimport sympy"
    assert run(boxed_service, code)["stdout"] == "True True\n"
    data = run(boxed_service, "import sympy, numpy\nprint(sympy.sqrt(8))")
    assert data["status"] == "ok" and data["stdout"] == "2*sqrt(2)\n"


def test_scrubbed_environment(boxed_service: str) -> None:
    data = run(boxed_service, "import os; print(sorted(os.environ))")
    names = eval(data["stdout"])  # the test's own output: a list literal of names
    assert not [n for n in names if "KEY" in n or "TOKEN" in n or n.startswith("BOXED")]


def test_request_id_echoed(boxed_service: str) -> None:
    r = httpx.post(
        f"{boxed_service}/execute",
        json={"code": "print(1)"},
        headers={"X-Request-ID": "abc-123"},
        timeout=30,
    )
    assert r.json()["request_id"] == "abc-123" and r.headers["x-request-id"] == "abc-123"
    assert len(run(boxed_service, "print(1)")["request_id"]) == 32


def test_32_parallel_requests_all_answered(boxed_service: str) -> None:
    def one(i: int) -> str:
        return run(boxed_service, f"print({i} * 2)")["stdout"]

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        outputs = list(pool.map(one, range(32)))
    assert outputs == [f"{i * 2}\n" for i in range(32)]


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"code": ""}, 422, "code"),
        ({"input": "x"}, 422, "code"),
        ({"code": "print(1)", "timeout": 3600}, 422, "maximum"),
        ({"code": "print(1)", "timeout": -1}, 422, "timeout"),
        ({"code": "print(1)", "memory_mb": 10**6}, 422, "maximum"),
        ({"code": "print(1)", "language": "ruby"}, 422, "supported"),
        ({"code": "x" * (300 * 1024)}, 413, "maximum"),
    ],
)
def test_bad_requests_are_4xx(boxed_service: str, body: dict, status: int, fragment: str) -> None:
    r = httpx.post(f"{boxed_service}/execute", json=body, timeout=30)
    assert r.status_code == status, r.text
    assert fragment in r.text
    assert run(boxed_service, "print('ok')")["stdout"] == "ok\n"


def test_malformed_bodies_are_4xx(boxed_service: str) -> None:
    headers = {"content-type": "application/json"}
    cases = [(b"{not json", 422), (b'{"code": "\xff\xfe"}', 400), (b"[1, 2]", 422)]
    for content, status in cases:
        r = httpx.post(f"{boxed_service}/execute", content=content, headers=headers, timeout=30)
        assert r.status_code == status, (content, r.status_code)
    huge = b'{"code": "' + b"1" * (9 * 1024 * 1024) + b'"}'
    r = httpx.post(f"{boxed_service}/execute", content=huge, headers=headers, timeout=30)
    assert r.status_code == 413
    assert run(boxed_service, "print('alive')")["stdout"] == "alive\n"


def test_probes_and_metrics(boxed_service: str) -> None:
    assert httpx.get(f"{boxed_service}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{boxed_service}/readyz").json()
    assert ready["ready"] and ready["backend_up"] and ready["image_present"]
    backends = ("docker-process", "docker-container", "docker-pods")
    assert ready["backend"] in backends and ready["problem"] is None
    run(boxed_service, "print(1)")
    text = httpx.get(f"{boxed_service}/metrics").text
    for name in (
        "boxed_requests_total",
        "boxed_queue_seconds_bucket",
        "boxed_run_seconds_bucket",
        "boxed_request_seconds_bucket",
        "boxed_in_flight",
        "boxed_pool_ready",
        "boxed_sandboxes_created_total",
        "boxed_sandboxes_removed_total",
        "boxed_oom_kills_total",
        "boxed_timeouts_total",
        "boxed_cpu_seconds_bucket",
        "boxed_backend_up",
    ):
        assert name in text, name


def test_overload_answers_429_and_api_key_guards_routes() -> None:
    auth = {"Authorization": "Bearer s3cret"}
    with running_service(
        BOXED_API_KEY="s3cret",
        BOXED_MAX_CONCURRENCY="1",
        BOXED_MAX_QUEUE="0",
        BOXED_POOL_SIZE="1",
    ) as service:
        url = service.url
        assert httpx.post(f"{url}/execute", json={"code": "print(1)"}).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert httpx.post(f"{url}/execute", json={"code": "1"}, headers=wrong).status_code == 401
        assert httpx.get(f"{url}/metrics").status_code == 401
        assert httpx.get(f"{url}/healthz").status_code == 200  # probes stay open
        assert httpx.get(f"{url}/readyz").status_code == 200

        def slow(_: int) -> httpx.Response:
            body = {"code": "import time; time.sleep(2)", "timeout": 5}
            return httpx.post(f"{url}/execute", json=body, headers=auth, timeout=30)

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(slow, range(3)))
        codes = sorted(r.status_code for r in answers)
        assert codes.count(200) >= 1 and 429 in codes, codes
        refused = next(r for r in answers if r.status_code == 429)
        assert int(refused.headers["retry-after"]) >= 1
        assert "overloaded" in refused.json()["detail"]
        ok = httpx.post(f"{url}/execute", json={"code": "print(2)"}, headers=auth, timeout=30)
        assert ok.json()["stdout"] == "2\n"


def test_docker_unreachable_is_503_not_a_verdict() -> None:
    service = ServiceProcess(DOCKER_HOST="unix:///nonexistent/docker.sock")
    service.start(ready_timeout=30, probe="/healthz")
    try:
        assert httpx.get(f"{service.url}/readyz").status_code == 503
        r = httpx.post(f"{service.url}/execute", json={"code": "print(1)"}, timeout=30)
        assert r.status_code == 503
        assert int(r.headers["retry-after"]) >= 1
        assert "status" not in r.json() and "unavailable" in r.json()["detail"]
    finally:
        service.stop()


def test_verdict_never_inferred_from_output_text(boxed_service: str) -> None:
    # Regressions B6-4 and B6-5: stderr text cannot fake a memory verdict, and the service's
    # own markers printed by the snippet come back untouched.
    fake = run(boxed_service, "import sys\nsys.stderr.write('MemoryError\\n')\nsys.exit(1)")
    assert fake["status"] == "error" and fake["exit_code"] == 1
    spoof = "import sys\nsys.stdout.write('\\x00boxed-ready\\x00\\n')\nprint('after')"
    assert run(boxed_service, spoof)["stdout"] == "\x00boxed-ready\x00\nafter\n"
    trailer = "import sys\nsys.stdout.write('\\x00boxed-exit:abc:0:0\\n')\nsys.exit(3)"
    forged = run(boxed_service, trailer)
    assert forged["exit_code"] == 3 and forged["stdout"] == "\x00boxed-exit:abc:0:0\n"


def test_finished_snippet_is_not_a_timeout_when_init_is_stopped(boxed_service: str) -> None:
    # Regression B6-3: attaching to PID 1 used to keep the container alive past the snippet.
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.ptrace(16, 1, 0, 0)\nprint('done')"
    )
    data = run(boxed_service, code, timeout=3)
    assert data["status"] == "ok" and data["stdout"] == "done\n"
