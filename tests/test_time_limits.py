"""Time limits that do not depend on load: a CPU-time limit beside the wall-clock one, and a
default concurrency that never puts two CPU-bound snippets on one core.

The same CPU-bound snippet must get the same verdict on an idle service and on one whose every
other slot runs a CPU burner; the answer says which limit fired and how much CPU was used."""

from __future__ import annotations

import concurrent.futures
import os
import time

import httpx
import pytest

from tests.conftest import running_service

pytestmark = pytest.mark.docker

# Burns about 0.6 s of its own CPU time, whatever share of a core it gets.
MEASURED_WORK = (
    "import time\nstart = time.process_time()\n"
    "while time.process_time() - start < 0.6:\n    pass\nprint('done')"
)
FOREVER = "while True:\n    pass"
PROBES = [
    (MEASURED_WORK, {"timeout": 8, "cpu_timeout": 1.5}),
    (FOREVER, {"timeout": 8, "cpu_timeout": 1}),
]


def run(url: str, code: str, **fields: object) -> dict:
    r = httpx.post(f"{url}/execute", json={"code": code, **fields}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def verdict(answer: dict) -> tuple:
    return answer["status"], answer["limit"], answer["stdout"]


def test_cpu_bound_snippets_get_the_same_verdict_idle_and_under_full_load() -> None:
    slots = len(os.sched_getaffinity(0))  # the default concurrency
    with running_service(BOXED_POOL_SIZE=str(slots + 1)) as service:
        idle = [run(service.url, code, **fields) for code, fields in PROBES]
        with concurrent.futures.ThreadPoolExecutor(slots) as pool:
            burners = [
                pool.submit(run, service.url, FOREVER, timeout=30, cpu_timeout=5)
                for _ in range(slots - 1)
            ]
            deadline = time.monotonic() + 10
            while httpx.get(f"{service.url}/readyz").json()["running"] < slots - 1:
                assert time.monotonic() < deadline, "the burners did not start"
                time.sleep(0.05)
            loaded = [run(service.url, code, **fields) for code, fields in PROBES]
            busy = httpx.get(f"{service.url}/readyz").json()["running"]
            for burner in burners:
                assert burner.result()["limit"] == "cpu"
    assert busy == slots - 1, "the burners must still have held their slots"
    assert [verdict(a) for a in idle] == [verdict(a) for a in loaded]
    assert verdict(idle[0]) == ("ok", None, "done\n")
    assert verdict(idle[1]) == ("timeout", "cpu", "")
    for answer in idle + loaded:
        assert answer["cpu_ms"] >= 550, answer
    for answer in (idle[1], loaded[1]):
        assert 1000 <= answer["cpu_ms"] < 1300, answer  # stopped on time, not at a tick later
        assert answer["reason"] == "CPU-time limit of 1 s reached"
        assert answer["error"].endswith("boxed: CPU-time limit of 1 s reached")


def test_the_wall_clock_limit_still_stops_code_that_sleeps() -> None:
    with running_service() as service:
        answer = run(service.url, "import time\ntime.sleep(30)", timeout=1, cpu_timeout=1)
    assert verdict(answer) == ("timeout", "wall", "")
    assert answer["cpu_ms"] < 500 and 1000 <= answer["duration_ms"] < 2000, answer


# Four processes that each spin for 1.5 s of wall time: on one CPU's quota they share it.
SPINNERS = """
import os, time
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            pass
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
print("done")
"""


def test_more_busy_processes_than_cpus_use_at_most_the_quota(boxed_service: str) -> None:
    """gVisor counts the time a task waits for a host CPU as its own (these four spinners read
    as about 4 s there): every variant reports at most what the one-CPU quota allowed, so the
    same code gets the same CPU time, and CPU verdict, on runc and on gVisor."""
    answer = run(boxed_service, SPINNERS, timeout=10, cpu_timeout=5)
    assert (answer["status"], answer["stdout"]) == ("ok", "done\n"), answer
    assert 0.5 * answer["duration_ms"] <= answer["cpu_ms"] <= answer["duration_ms"] + 1, answer
