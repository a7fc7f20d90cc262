"""Chaos bench: rewards under faults. Episodes through OpenEnv, GRPO-shaped groups through
``/judge`` and ``/score``, while a fault injector kills sandbox containers and SIGKILLs and
restarts the service at random. Every sample's true reward is known in advance, so the bench
counts what matters to a trainer:

- **wrong numbers**: a reward that was a number but not the code's true reward (must be 0);
- **masked**: no reward (``None``): the sample is dropped, never scored 0;
- **recovered**: samples in flight during a fault that still got their true reward (the
  service's retry on a fresh sandbox, the client's retries across a restart);
- **lost twice**: ``/judge`` tests whose sandbox was lost twice under the same code, which the
  rule makes the code's ``error`` (docs/failures.md); listed apart, as the rule's price.

    python bench/bench_chaos.py --seconds 60            # needs Docker and the sandbox image
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from boxed_client import BoxedError, BoxedHTTPError, Client  # noqa: E402
from boxed_openenv import CodeAction  # noqa: E402
from boxed_openenv.client import BoxedEnvClient  # noqa: E402

ADD_TESTS = [{"input": f"{a} {b}\n", "expected_output": f"{a + b}\n"} for a, b in [(1, 2), (5, 7)]]
SLOW = "import time\ntime.sleep(0.2)\n"  # each test in flight long enough to be hit
PROGRAMS = {  # program -> its true pass rate on ADD_TESTS
    SLOW + "a, b = map(int, input().split())\nprint(a + b)\n": 1.0,
    SLOW + "a, b = map(int, input().split())\nprint(3 if a == 1 else 0)\n": 0.5,
    SLOW + "print(undefined)\n": 0.0,
}
ANSWERS = {"\\boxed{42}": 1.0, "\\boxed{41}": 0.0}  # against the gold 42


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Tally:
    """What the workers saw; one lock for all (the counts are small)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    samples: Counter[str] = field(default_factory=Counter)
    right: Counter[str] = field(default_factory=Counter)
    masked: Counter[str] = field(default_factory=Counter)
    wrong: Counter[str] = field(default_factory=Counter)
    recovered: Counter[str] = field(default_factory=Counter)
    lost_twice: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    fault_times: list[float] = field(default_factory=list)
    wrong_examples: list[str] = field(default_factory=list)

    def fault(self, kind: str) -> None:
        with self.lock:
            self.faults[kind] += 1
            self.fault_times.append(time.monotonic())

    def sample(self, path: str, started: float, got: float | None, truth: float) -> None:
        with self.lock:
            self.samples[path] += 1
            hit = any(started <= t <= time.monotonic() for t in self.fault_times)
            if got is None:
                self.masked[path] += 1
            elif abs(got - truth) > 1e-9:
                self.wrong[path] += 1
                self.wrong_examples.append(f"{path}: got {got}, true {truth}")
            else:
                self.right[path] += 1
                self.recovered[path] += hit


class Service:
    """``python -m exec_server`` on a fixed port and instance, restartable after a SIGKILL
    (the new process reaps what the old one left)."""

    def __init__(self, port: int, pool: int) -> None:
        self.port, self.instance = port, f"chaos-{uuid.uuid4().hex[:8]}"
        self.url = f"http://127.0.0.1:{port}"
        self.env = {**os.environ, "BOXED_INSTANCE": self.instance, "BOXED_POOL_SIZE": str(pool)}
        self.log = Path(f"/tmp/boxed-{self.instance}.log").open("ab")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, "-m", "exec_server", "--port", str(self.port)]
        self.proc = subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=self.log, stderr=self.log)
        wait_ready(f"{self.url}/readyz", 120)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(90)

    def containers(self) -> list[str]:
        label = f"label=boxed.instance={self.instance}"
        out = subprocess.run(
            ["docker", "ps", "-q", "--filter", label], capture_output=True, text=True
        ).stdout
        return out.split()


def wait_ready(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} not ready in {seconds} s")


def inject(service: Service, tally: Tally, stop: threading.Event, interval: float, restarts: float):  # noqa: ANN201
    """Kill a random container of the service, or (share ``restarts``) SIGKILL the service
    and start it again, every ``interval`` seconds on average."""
    rng = random.Random(7)
    while not stop.wait(rng.expovariate(1 / interval)):
        if rng.random() < restarts:
            service.kill()
            tally.fault("service restarted")
            service.start()
            continue
        victims = service.containers()
        if victims:
            subprocess.run(["docker", "kill", rng.choice(victims)], capture_output=True)
            tally.fault("sandbox killed")


def judge_group(client: Client, tally: Tally, rng: random.Random) -> None:
    """A GRPO group of four completions, each judged as ``examples/code_reward.py`` does."""
    group = [rng.choice(list(PROGRAMS)) for _ in range(4)]
    for program in group:
        started = time.monotonic()
        try:
            result = client.judge(program, ADD_TESTS, timeout=5)
            reward = result.pass_rate if result.outcome == "code" else None
            twice = sum("lost twice" in (t.message or "") for t in result.tests)
            if twice:
                with tally.lock:
                    tally.lost_twice += twice
                continue  # the rule's own verdict: counted apart
        except BoxedHTTPError as exc:
            if exc.status_code < 500 and exc.status_code not in (410, 429):
                raise
            reward = None
        except BoxedError:
            reward = None
        tally.sample("/judge", started, reward, PROGRAMS[program])


def score_group(client: Client, tally: Tally, rng: random.Random) -> None:
    """A group of eight answers graded in one ``/score/batch``."""
    texts = [rng.choice(list(ANSWERS)) for _ in range(8)]
    started = time.monotonic()
    try:
        rows = client.score_many([{"response": t, "answer": "42"} for t in texts]).results
        rewards = [row.reward for row in rows]
    except BoxedError:
        rewards = [None] * len(texts)
    for text, reward in zip(texts, rewards, strict=True):
        tally.sample("/score", started, reward, ANSWERS[text])


def episode(env_url: str, tally: Tally, rng: random.Random) -> None:
    """An OpenEnv episode: state over two steps, then a final answer."""
    right = rng.random() < 0.5
    task = {"id": "chaos", "prompt": "6 * 7?", "answer": "42"}
    started = time.monotonic()
    reward: float | None
    try:
        with BoxedEnvClient(base_url=env_url).sync() as env:
            env.reset(task=task)
            env.step(CodeAction(code="import time\nx = 6\ntime.sleep(0.3)"))
            result = env.step(CodeAction(code="print(x * 7)"))
            if result.done:  # the session was lost: the observation says whose fault
                reward = result.reward
            else:
                answer = result.observation.stdout.strip() if right else "41"
                reward = env.step(CodeAction(answer=answer)).reward
    except Exception:  # the environment or boxed unreachable: no reward
        reward = None
    tally.sample("OpenEnv", started, reward, 1.0 if right else 0.0)


def work(job: Callable[[random.Random], None], stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        job(rng)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--fault-interval", type=float, default=2.0, help="mean seconds")
    parser.add_argument("--restart-share", type=float, default=0.2)
    parser.add_argument("--pool", type=int, default=2)
    args = parser.parse_args()

    service = Service(free_port(), args.pool)
    service.start()
    env_port = free_port()
    env_proc = subprocess.Popen(
        [sys.executable, "-m", "boxed_openenv", "--port", str(env_port)],
        cwd=REPO,
        env={**os.environ, "BOXED_URL": service.url},
        stdout=service.log,
        stderr=service.log,
    )
    env_url = f"http://127.0.0.1:{env_port}"
    tally, stop = Tally(), threading.Event()
    try:
        wait_ready(f"{env_url}/health", 60)
        client = Client(service.url, deadline=60)
        jobs: list[Callable[[random.Random], None]] = [
            lambda rng: judge_group(client, tally, rng),
            lambda rng: judge_group(client, tally, rng),
            lambda rng: score_group(client, tally, rng),
            lambda rng: episode(env_url, tally, rng),
            lambda rng: episode(env_url, tally, rng),
        ]
        threads = [
            threading.Thread(target=work, args=(job, stop, n), daemon=True)
            for n, job in enumerate(jobs)
        ]
        injector = threading.Thread(
            target=inject,
            args=(service, tally, stop, args.fault_interval, args.restart_share),
            daemon=True,
        )
        for t in [*threads, injector]:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in [*threads, injector]:
            t.join(120)
    finally:
        env_proc.terminate()
        env_proc.wait(30)
        service.stop()
    report(tally, args)


def report(tally: Tally, args: argparse.Namespace) -> None:
    console = Console()
    faults = ", ".join(f"{n} {kind}" for kind, n in sorted(tally.faults.items())) or "none"
    console.print(f"{args.seconds:g} s, faults injected: {faults}")
    table = Table("path", "samples", "true reward", "masked", "wrong numbers", "recovered")
    for path in sorted(tally.samples):
        table.add_row(
            path,
            str(tally.samples[path]),
            str(tally.right[path]),
            str(tally.masked[path]),
            str(tally.wrong[path]),
            str(tally.recovered[path]),
        )
    console.print(table)
    console.print(
        f"judge tests lost twice under the same code (the code's error): {tally.lost_twice}"
    )
    for line in tally.wrong_examples[:10]:
        console.print(f"[red]wrong number[/red] {line}")
    total_wrong = sum(tally.wrong.values())
    console.print(f"rewards that were numbers although not the code's true reward: {total_wrong}")


if __name__ == "__main__":
    main()
