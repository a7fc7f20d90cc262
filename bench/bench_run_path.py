"""Where one process-mode run's time goes inside the sandbox, phase by phase (issue 33's profile).

    python bench/bench_run_path.py [--runs 400] [--code CODE] [--tree CHECKOUT]

The guest programs hold no timers of their own: this script copies ``exec_server`` of
``--tree`` (default: this checkout) into a temporary directory and adds probes to the copy's
guest modules, at fixed places of its source (``PROBES``; a place that is no longer there stops
the script and names it). Each probe writes ``CLOCK_MONOTONIC`` nanoseconds (and, in the child,
its minor page faults so far) into an unused part of the children's report page, which the
supervisor, the zygotes and the children share; the supervisor appends one line of its own and
the page's figures to the run's stderr, right before its result. The host side is the copy's
too: one warm container (``DockerBackend``, the supervisor's socket), ``--runs`` sequential runs
of ``--code``, each followed by its clean-up, as the service serves them one at a time.

It prints the median of each phase of the run's path (from the supervisor reading the request
to its result on the wire), the child's page faults in each of its phases, and the CPU per run
of the supervisor, the zygote and the children (``/proc``, the same runs). The probes cost a few
microseconds each (the fault counts a ``getrusage``); compare phases, and two checkouts with
``--tree``, rather than the total with an unprobed run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

import docker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from proc_cpu import read_stat  # noqa: E402

MARK = "\nBOXED-PATH "  # starts the probes' line in the run's stderr
# The page's slots: the child's checkpoints at 64 + 16 * i (nanoseconds, minor faults), the
# zygote's at 1024 (nanoseconds).
CHILD_SLOT, ZYGOTE_SLOT = 64, 1024
PROBE_HELPER = """

def _probe(page, slot):  # bench_run_path.py: a child's checkpoint
    import resource as _resource, time as _time
    page[64 + 16 * slot : 80 + 16 * slot] = _time.monotonic_ns().to_bytes(
        8, "little"
    ) + _resource.getrusage(0).ru_minflt.to_bytes(8, "little")
"""
SUPERVISOR_HELPER = """

_PATH = {"previous": 0}  # bench_run_path.py: the supervisor's checkpoints of the run


def _mark(name):
    _PATH[name] = time.monotonic_ns()


def _path_line():
    page = os.pread(_report_fd, 1040, 0)
    child = [
        (int.from_bytes(page[64 + 16 * i : 72 + 16 * i], "little"),
         int.from_bytes(page[72 + 16 * i : 80 + 16 * i], "little"))
        for i in range(7)
    ]
    reaped = int.from_bytes(page[1024:1032], "little")
    fields = [f"{k}={v}" for k, v in _PATH.items()]
    fields += [f"c{i}={ns},{faults}" for i, (ns, faults) in enumerate(child)]
    return ("\\nBOXED-PATH " + " ".join(fields) + f" reaped={reaped}\\n").encode()
"""


# (guest module, the source it must hold, what replaces it): each probe keeps the source it
# anchors on and adds its checkpoint before or after it.
def _before(module: str, anchor: str, added: str) -> tuple[str, str, str]:
    return module, anchor, added + anchor


def _after(module: str, anchor: str, added: str) -> tuple[str, str, str]:
    return module, anchor, anchor + added


CHILD_PUT = "        runner._probe(_report, {})\n"
PROBES: list[tuple[str, str, str]] = [
    _before("runner.py", "def read_exact(fd, n):", PROBE_HELPER.lstrip("\n") + "\n\n"),
    _before("zygote.py", "        os.setsid()\n", CHILD_PUT.format(0)),
    _after("zygote.py", "            enter_sandbox(config)\n", CHILD_PUT.format(1)),
    _after("zygote.py", "  # blocks until the snippet is in the memfd\n", CHILD_PUT.format(2)),
    _before(
        "zygote.py",
        "    except BaseException as exc:  # noqa: BLE001 - any set-up failure",
        CHILD_PUT.format(3),
    ),
    _after(
        "zygote.py",
        "  # a traced child's stops are let go\n",
        "            _report[1024:1032] = time.monotonic_ns().to_bytes(8, 'little')\n",
    ),
    _after("zygote.py", "import sys\n", "import time\n"),
    _after("runner.py", "  # fd 0 is the snippet's from here on\n", "    _probe(report, 4)\n"),
    _before(
        "runner.py", "    flush_std_streams()\n    if memory_error:", "    _probe(report, 5)\n"
    ),
    _before("runner.py", "    os._exit(status)", "    _probe(report, 6)\n"),
    _before("supervisor.py", "\n\ndef _report():", SUPERVISOR_HELPER),
    _before(
        "supervisor.py", "    receive_body(child.body_fd, header.size)\n", "    _mark('request')\n"
    ),
    _after(
        "supervisor.py", "    receive_body(child.body_fd, header.size)\n", "    _mark('body')\n"
    ),
    _before(
        "supervisor.py", "    child.hand_over(_handed_limits(header))\n", "    _mark('checks')\n"
    ),
    _after(
        "supervisor.py", "    child.hand_over(_handed_limits(header))\n", "    _mark('handed')\n"
    ),
    _after("supervisor.py", " = watch(clock, output, _ChildEnd(child))\n", "    _mark('ended')\n"),
    _after(
        "supervisor.py",
        " = _end_run(child, output, config, killed_for)\n",
        "    _mark('run_over')\n",
    ),
    _before(
        "supervisor.py",
        "    output.queue(frame(RESULT, result.to_json()))\n    output.flush()\n",
        "    _mark('report')\n    output.queue(frame(ERRORS_FRAME, _path_line()))\n"
        "    _started = time.monotonic_ns()\n",
    ),
    _after(
        "supervisor.py",
        "    output.queue(frame(RESULT, result.to_json()))\n    output.flush()\n",
        "    _PATH['previous'] = time.monotonic_ns() - _started\n",
    ),
    _after("supervisor.py", "import time\n", "from .protocol import ERRORS as ERRORS_FRAME\n"),
]


def probed_copy(tree: Path, into: Path) -> Path:
    """``tree``'s ``exec_server`` copied into ``into`` with the probes in its guest modules."""
    target = into / "exec_server"
    shutil.copytree(tree / "exec_server", target, ignore=shutil.ignore_patterns("__pycache__"))
    for module, anchor, replacement in PROBES:
        path = target / "guest" / module
        source = path.read_text()
        if source.count(anchor) != 1:
            raise SystemExit(f"{module}: the probe's place {anchor.strip()!r} is not there once")
        path.write_text(source.replace(anchor, replacement))
    return into


# The phases of the path, in order: (what it is, from, to); the names are the probes'.
PHASES = [
    ("the request's body spliced into the child's memfd", "request", "body"),
    ("the checks before the hand-over (OOM count, CPU ticks, clock)", "body", "checks"),
    ("the hand-over written", "checks", "handed"),
    ("the child wakes with its limits", "handed", "c2"),
    ("the child sets its request limits", "c2", "c3"),
    ("the runner reads the body, installs stdin", "c3", "c4"),
    ("the code compiles and runs", "c4", "c5"),
    ("the streams flushed", "c5", "c6"),
    ("the child's exit until its zygote's wait4 returns", "c6", "reaped"),
    ("the zygote's report until the supervisor sees the end", "reaped", "ended"),
    ("after the run: kill, reap, drain, the process list", "ended", "run_over"),
    ("fetch, OOM count, the report page", "run_over", "report"),
]
CHILD_FAULT_PHASES = [
    ("fork until the child's first line", None, 0),
    ("its set-up: session, descriptors, uid drop, /tmp/run", 0, 1),
    ("waiting for the hand-over", 1, 2),
    ("the request limits", 2, 3),
    ("the body and stdin", 3, 4),
    ("the code", 4, 5),
    ("the flush", 5, 6),
]


@dataclass
class Run:
    marks: dict[str, int]  # nanoseconds
    faults: list[int]  # the child's minor faults at each checkpoint

    @classmethod
    def parse(cls, stderr: bytes) -> Run:
        line = stderr.decode().rpartition(MARK.strip())[2].split()
        marks, faults = {}, []
        for field in line:
            key, _, value = field.partition("=")
            if key.startswith("c") and key[1:].isdigit():
                ns, count = value.split(",")
                marks[key] = int(ns)
                faults.append(int(count))
            else:
                marks[key] = int(value)
        return cls(marks, faults)


def container_processes(container_id: str) -> tuple[int, list[int]]:
    """The host pids of a container's PID 1 and of its children (the zygotes)."""
    pid1 = docker.from_env().api.inspect_container(container_id)["State"]["Pid"]
    zygotes = []
    for name in os.listdir("/proc"):
        stat = read_stat(int(name)) if name.isdigit() else None
        if stat is not None and stat.ppid == pid1:
            zygotes.append(int(name))
    return pid1, zygotes


def cpu_seconds(pid1: int, zygotes: list[int]) -> tuple[float, float, float]:
    """(the supervisor's own, the zygotes' own, their reaped children's) CPU seconds so far."""
    stats = [read_stat(pid) for pid in zygotes]
    supervisor = read_stat(pid1)
    assert supervisor is not None and all(stats), "a sandbox process is gone"
    return (
        supervisor.own,
        sum(s.own for s in stats if s),
        sum(s.children for s in stats if s),
    )


async def measure(runs: int, code: str) -> tuple[list[Run], list[float], tuple[float, ...]]:
    """The probed runs, the host's time per run (ms), and the CPU per run (ms) by process."""
    from exec_server.backends.base import Job
    from exec_server.backends.docker import DockerBackend
    from exec_server.settings import Settings
    from exec_server.verdict import RunLimits
    from tests.service import IMAGE

    settings = Settings(
        isolation="process", sandbox_image=IMAGE, instance="bench-path", process_max_runs=runs * 2
    )
    backend = DockerBackend(settings, reuse=True)
    job = Job(code=code, stdin="", limits=RunLimits(5, 5, 256, 65536))
    sandbox = await backend.create_warm(256)
    try:
        for _ in range(30):  # warm up
            await sandbox.run(job)
            assert await sandbox.settle()
        pid1, zygotes = container_processes(sandbox.id)
        before = cpu_seconds(pid1, zygotes)
        probed, host = [], []
        for _ in range(runs):
            started = time.perf_counter()
            observation = await sandbox.run(job)
            host.append((time.perf_counter() - started) * 1000)
            assert observation.exit_code == 0 and await sandbox.settle(), observation
            probed.append(Run.parse(observation.stderr))
        after = cpu_seconds(pid1, zygotes)
    finally:
        await sandbox.discard()
        await backend.close()
    return probed, host, tuple((b - a) * 1000 / runs for a, b in zip(before, after, strict=True))


def report(runs: list[Run], host: list[float], cpu: tuple[float, ...], code: str) -> None:
    console = Console()
    path = Table(title=f"one run's path in the sandbox, {code!r}, {len(runs)} runs (median µs)")
    path.add_column("phase")
    path.add_column("µs", justify="right")
    for name, start, end in PHASES:
        path.add_row(
            name, f"{statistics.median((r.marks[end] - r.marks[start]) / 1000 for r in runs):.0f}"
        )
    total = statistics.median((r.marks["report"] - r.marks["request"]) / 1000 for r in runs)
    path.add_row(
        "the result written (the previous run's)",
        f"{statistics.median(r.marks['previous'] / 1000 for r in runs):.0f}",
    )
    path.add_row("[b]request read until the report page read", f"[b]{total:.0f}")
    path.add_row(
        "the host: sending the request until the result", f"{statistics.median(host) * 1000:.0f}"
    )
    console.print(path)
    faults = Table(title="the child's minor page faults, by phase (median)")
    faults.add_column("phase")
    faults.add_column("faults", justify="right")
    for name, start, end in CHILD_FAULT_PHASES:
        values = [r.faults[end] - (r.faults[start] if start is not None else 0) for r in runs]
        faults.add_row(name, f"{statistics.median(values):.0f}")
    console.print(faults)
    split = Table(title="CPU per run, the same runs (ms, from /proc)")
    for column in ("supervisor", "zygotes", "children", "sandbox"):
        split.add_column(column, justify="right")
    split.add_row(*(f"{value:.3f}" for value in (*cpu, sum(cpu))))
    console.print(split)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--code", default="print(sum(range(100)))")
    parser.add_argument("--tree", type=Path, default=HERE.parent, help="the checkout to probe")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="boxed-path-") as scratch:
        sys.path.insert(0, str(probed_copy(args.tree.resolve(), Path(scratch))))
        sys.path.insert(1, str(HERE.parent))  # tests.service: the image's tag
        runs, host, cpu = asyncio.run(measure(args.runs, args.code))
    report(runs, host, cpu, args.code)


if __name__ == "__main__":
    main()
