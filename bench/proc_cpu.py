"""CPU time by process class, read from /proc while a bench phase runs: who pays for a snippet.

A sampler thread scans every process's ``/proc/<pid>/stat`` (utime+stime, and cutime+cstime:
what its reaped children used) every ``interval`` seconds between ``start()`` and ``stop()``.
Each process is classified once, when first seen, by a caller-supplied rule (``Classes``).
A process's share is its growth over the window: its own time goes to its class, its reaped
children's time to its "children" class (the old server's children are the snippets). A process
seen alive and then gone was reaped by its parent, whose cutime then holds all of it: what was
already counted for it is taken off the parent, so nothing is counted twice. What a process
does after its last sighting, and processes reaped by a parent that is not sampled, are lost;
the machine-wide busy time of ``/proc/stat`` shows how much that is.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx

TICK = 1.0 / os.sysconf("SC_CLK_TCK")
CONTAINER_ID = re.compile(r"docker[-/]([0-9a-f]{64})")
ENGINE_PREFIXES = ("dockerd", "containerd", "runc")  # containerd-shim* included
# The system engine's paths; an engine process started with others is another (private) engine.
ENGINE_PATHS = ("/var/run/docker", "/run/docker", "/var/run/containerd", "/run/containerd",
                "/var/lib/docker", "/var/lib/containerd")  # fmt: skip
ENGINE_PATH_FLAGS = {"--config", "-address", "--address", "--containerd", "--exec-root",
                     "--data-root", "--root", "--host", "-H", "--pidfile"}  # fmt: skip
KERNEL_PREFIXES = ("kworker", "ksoftirqd")
KTHREADD = 2
DOCKER_ROOT = Path("/var/lib/docker/containers")
DOCKER_CPUACCT = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")  # cgroup v1, cgroupfs

# Classes that are this bench's figures; the others are reported as not attributed.
ATTRIBUTED = ("service", "sandbox side", "engine", "kernel", "load client")
OTHER_CONTAINERS = "containers of other instances"
OTHER_KTHREADS = "other kernel threads"
OTHER_ENGINES = "other engines (private dockerd, containerd)"
OTHER = "other processes"


@dataclass
class Stat:
    comm: str
    ppid: int
    start: int
    own: float  # utime + stime, seconds
    children: float  # cutime + cstime, seconds


def read_stat(pid: int) -> Stat | None:
    """One process's /proc/<pid>/stat, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    close = data.rindex(b")")
    comm = data[data.index(b"(") + 1 : close].decode(errors="replace")
    fields = data[close + 2 :].split()  # fields[0] is field 3 (state) of proc(5)
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return Stat(
        comm, int(fields[1]), int(fields[19]), (utime + stime) * TICK, (cutime + cstime) * TICK
    )


def foreign_engine(pid: int) -> bool:
    """An engine process given paths other than the system engine's: someone's private one."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag not in ENGINE_PATH_FLAGS:
            continue
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        path = value.removeprefix("unix://")
        if path.startswith("/") and not path.startswith(ENGINE_PATHS):
            return True
    return False


def machine_busy() -> float:
    """Seconds of CPU the whole machine spent not idle (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq + steal) * TICK


def docker_cgroups_cpu() -> float | None:
    """CPU of every Docker container, removed ones included (cgroup v1 cpuacct is hierarchical)."""
    try:
        return int(DOCKER_CPUACCT.read_text()) / 1e9
    except (OSError, ValueError):
        return None


class Classes:
    """Which class a process belongs to: (its own time's class, its reaped children's class).

    ``server`` is the server's pid; ``server_children`` the class of the processes it spawns
    (the old server's snippets are its children; boxed's service has no sandbox children);
    ``instance`` the boxed instance whose containers are the sandbox side (None: no containers
    are ours).
    """

    def __init__(self, server: int, server_children: str, instance: str | None) -> None:
        self.server, self.server_children, self.instance = server, server_children, instance
        self.client = os.getpid()
        self._ours: dict[str, bool] = {}
        self.unknown_containers: set[str] = set()

    def container_is_ours(self, cid: str) -> bool:
        if cid not in self._ours:
            labels = self._labels(cid)
            if labels is None:
                self.unknown_containers.add(cid)
            self._ours[cid] = self.instance is not None and self.instance in (labels or {}).values()
        return self._ours[cid]

    @staticmethod
    def _labels(cid: str) -> dict[str, str] | None:
        """A container's labels: from the engine's own file (costs the engine nothing), else API."""
        try:
            config = json.loads((DOCKER_ROOT / cid / "config.v2.json").read_text())
            return config["Config"].get("Labels") or {}
        except (OSError, ValueError, KeyError):
            pass
        try:
            transport = httpx.HTTPTransport(uds="/var/run/docker.sock")
            with httpx.Client(transport=transport, base_url="http://docker") as api:
                r = api.get(f"/containers/{cid}/json")
                return r.json()["Config"].get("Labels") or {} if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError, KeyError):
            return None

    def __call__(self, pid: int, stat: Stat, parents: dict[int, int]) -> tuple[str, str]:
        if pid == self.client:
            return "load client", "load client"
        try:
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            cgroup = ""
        if match := CONTAINER_ID.search(cgroup):
            cls = "sandbox side" if self.container_is_ours(match.group(1)) else OTHER_CONTAINERS
            return cls, cls
        if pid == self.server:
            return "service", self.server_children
        ancestor, hops = stat.ppid, 0
        while ancestor > 1 and hops < 64:  # a descendant of the server: what it spawned
            if ancestor == self.server:
                return self.server_children, self.server_children
            ancestor, hops = parents.get(ancestor, 0), hops + 1
        if stat.ppid == KTHREADD:
            cls = "kernel" if stat.comm.startswith(KERNEL_PREFIXES) else OTHER_KTHREADS
            return cls, cls
        if stat.comm.startswith(ENGINE_PREFIXES):
            cls = OTHER_ENGINES if foreign_engine(pid) else "engine"
            return cls, cls
        return OTHER, OTHER


@dataclass
class Seen:
    """One process (pid and start time) over the window."""

    pid: int
    ppid: int
    own_class: str
    children_class: str
    own_first: float
    children_first: float
    own_last: float
    children_last: float
    children_prev: float  # at the reading before the last: what the last reading added
    first_scan: int
    last_scan: int
    gone_at: int | None = None  # first scan that no longer found it


@dataclass
class Account:
    """The window's CPU seconds by class, with what the machine did meanwhile."""

    seconds: dict[str, float]
    machine_busy: float
    docker_cgroups: float | None
    sampler: float
    scans: int
    unknown_containers: int  # seen in a container gone before its labels could be read

    def unexplained(self) -> float:
        """Machine busy time no sampled process accounts for (lost tails, irq, unseen reapers)."""
        return self.machine_busy - sum(self.seconds.values()) - self.sampler


class CpuSampler:
    """Scan /proc in a thread between ``start()`` and ``stop()``; ``stop()`` returns the account."""

    def __init__(self, classes: Classes, interval: float = 0.1) -> None:
        self.classes, self.interval = classes, interval
        self._unknown0 = set(classes.unknown_containers)
        self.seen: dict[tuple[int, int], Seen] = {}
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="proc-cpu", daemon=True)
        self._sampler_cpu = 0.0

    def start(self) -> CpuSampler:
        self._busy0, self._docker0 = machine_busy(), docker_cgroups_cpu()
        self.scan()
        self._thread.start()
        return self

    def stop(self) -> Account:
        self._stop.set()
        self._thread.join()
        self.scan()
        busy, docker = machine_busy() - self._busy0, docker_cgroups_cpu()
        docker_delta = None if docker is None or self._docker0 is None else docker - self._docker0
        seconds = self._settle()
        seconds["load client"] = seconds.get("load client", 0.0) - self._sampler_cpu
        unknown = len(self.classes.unknown_containers - self._unknown0)
        return Account(seconds, busy, docker_delta, self._sampler_cpu, self.scans, unknown)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.scan()

    def scan(self) -> None:
        started = time.thread_time()
        stats: dict[int, Stat] = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (stat := read_stat(int(name))) is not None:
                stats[int(name)] = stat
        parents = {pid: s.ppid for pid, s in stats.items()}
        scan, alive = self.scans, set()
        for pid, s in stats.items():
            key = (pid, s.start)
            alive.add(key)
            seen = self.seen.get(key)
            if seen is None:
                own_class, children_class = self.classes(pid, s, parents)
                before = scan == 0  # there before the window: count only its growth
                self.seen[key] = Seen(
                    pid=pid,
                    ppid=s.ppid,
                    own_class=own_class,
                    children_class=children_class,
                    own_first=s.own if before else 0.0,
                    children_first=s.children if before else 0.0,
                    own_last=s.own,
                    children_last=s.children,
                    children_prev=s.children,
                    first_scan=scan,
                    last_scan=scan,
                )
            else:
                seen.children_prev = seen.children_last
                seen.ppid, seen.own_last, seen.children_last, seen.last_scan = (
                    s.ppid,
                    s.own,
                    s.children,
                    scan,
                )
        for key, seen in self.seen.items():
            if seen.gone_at is None and seen.last_scan < scan and key not in alive:
                seen.gone_at = scan
        self.scans += 1
        self._sampler_cpu += time.thread_time() - started

    def _settle(self) -> dict[str, float]:
        totals: Counter[str] = Counter()
        by_pid: dict[int, list[Seen]] = {}
        for seen in self.seen.values():
            by_pid.setdefault(seen.pid, []).append(seen)
        # What each holder's cutime grew by and no gone process has been taken off yet: a
        # process that exits by itself can be reaped by an unsampled one (orphans of a
        # container's init go to the host's subreaper), and its holder never held it.
        unclaimed = {id(s): s.children_last - s.children_first for s in self.seen.values()}
        for seen in self.seen.values():
            totals[seen.own_class] += seen.own_last - seen.own_first
            totals[seen.children_class] += seen.children_last - seen.children_first
            if seen.gone_at is not None and (holder := self._holder(seen, by_pid)) is not None:
                taken = min(seen.own_last + seen.children_last, unclaimed[id(holder)])
                unclaimed[id(holder)] -= taken
                totals[holder.children_class] -= taken
        return dict(totals)

    @staticmethod
    def _holder(gone: Seen, by_pid: dict[int, list[Seen]]) -> Seen | None:
        """The nearest ancestor whose last reading holds ``gone`` (in its cutime).

        Usually the parent. A reading from a later scan than the one that missed ``gone``
        holds it; one from that same scan may have been taken before the reaping, so it holds
        it only if its cutime grew by at least ``gone``'s total then. When the parent's last
        reading lacks it (a tree exiting together: the shim that reaps a container's init
        exits at once), the grandparent's holds both.
        """
        assert gone.gone_at is not None
        total, child = gone.own_last + gone.children_last, gone
        for _ in range(64):
            parent = next(
                (p for p in by_pid.get(child.ppid, []) if p.first_scan <= child.last_scan
                 <= p.last_scan),
                None,
            )  # fmt: skip
            if parent is None:
                return None
            if parent.last_scan > gone.gone_at:
                return parent
            grew = parent.children_last - parent.children_prev
            if parent.last_scan == gone.gone_at and grew >= total - TICK / 2:
                return parent
            child = parent
        return None


async def quiet(classes: Classes, limit: float, threshold: float = 0.05) -> float:
    """Wait (at most ``limit`` s) until the server and its sandboxes use < 5% of a core over a
    second: warm-ups, refills and clean-ups must not land in the next phase's figures. (Not the
    engine: other users of the machine's Docker keep it busy.) The seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit:
        sampler = CpuSampler(classes, interval=0.25).start()
        await asyncio.sleep(1.0)
        seconds = sampler.stop().seconds
        if seconds.get("service", 0.0) + seconds.get("sandbox side", 0.0) < threshold:
            break
    return time.perf_counter() - started
