"""The engine without Docker: the verdict rule, the pool, the executor and admission over the
in-memory fake backend, and the layering (only the Docker backend knows Docker)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from exec_server import languages
from exec_server.admission import Overloaded
from exec_server.app import Executor
from exec_server.backends import BACKENDS, SandboxBackend, create_backend
from exec_server.backends.base import Job, Sandbox, SandboxError
from exec_server.backends.fake import FakeBackend, observed
from exec_server.guest.protocol import KILLED_CPU, KILLED_OUTPUT, KILLED_WALL
from exec_server.limits import resolve_limits
from exec_server.models import ExecuteRequest
from exec_server.pool import WarmPool
from exec_server.request_errors import RequestError, ServiceUnavailable
from exec_server.runs import Run, Runs
from exec_server.settings import Settings
from exec_server.verdict import Limit, NotAVerdict, Observation, RunLimits, Status, decide
from tests.conftest import top_level_imports

LIMITS = RunLimits(wall_seconds=5, cpu_seconds=2, memory_mb=256, output_bytes=100)
PACKAGE = Path(__file__).resolve().parent.parent / "exec_server"


# -- the verdict rule ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "status", "limit", "exit_code"),
    [
        ({}, Status.OK, None, 0),
        ({"exit_code": 3}, Status.ERROR, None, 3),
        ({"exit_code": 137}, Status.ERROR, None, 137),  # killed itself: its own doing
        ({"exit_code": 137, "oom_killed": True}, Status.MEMORY_LIMIT, Limit.MEMORY, 137),
        ({"exit_code": 1, "memory_error": True}, Status.MEMORY_LIMIT, Limit.MEMORY, 1),
        # what the snippet can write never makes a clean exit anything else
        ({"exit_code": 0, "memory_error": True}, Status.OK, None, 0),
        # an OOM-killed grandchild does not fail a program that exited 0 (both modes agree)
        ({"exit_code": 0, "oom_killed": True}, Status.OK, None, 0),
        ({"exit_code": 1, "oom_killed": True}, Status.ERROR, None, 1),
        ({"killed_for": KILLED_WALL, "exit_code": 137}, Status.TIMEOUT, Limit.WALL, None),
        ({"killed_for": KILLED_CPU, "exit_code": 137}, Status.TIMEOUT, Limit.CPU, None),
        (
            {"killed_for": KILLED_OUTPUT, "truncated_stdout": True},
            Status.OUTPUT_LIMIT,
            Limit.OUTPUT,
            None,
        ),
        ({"truncated_stderr": True}, Status.OUTPUT_LIMIT, Limit.OUTPUT, None),
        # a kill reason outranks anything the snippet reported
        ({"killed_for": KILLED_WALL, "memory_error": True}, Status.TIMEOUT, Limit.WALL, None),
    ],
)
def test_verdict_rule(
    fields: dict, status: Status, limit: Limit | None, exit_code: int | None
) -> None:
    result = decide(observed(**fields), LIMITS)
    assert (result.status, result.limit, result.exit_code) == (status, limit, exit_code)
    assert (result.reason is None) == (limit is None)


def test_reason_lines_quote_the_limits() -> None:
    reasons = {
        kind: decide(observed(killed_for=kind, truncated_stderr=True), LIMITS).reason
        for kind in (KILLED_WALL, KILLED_CPU, KILLED_OUTPUT)
    }
    assert reasons == {
        KILLED_WALL: "wall-clock limit of 5 s reached",
        KILLED_CPU: "CPU-time limit of 2 s reached",
        KILLED_OUTPUT: "output limit of 100 bytes reached on stderr",
    }
    memory = decide(observed(exit_code=1, memory_error=True), LIMITS).reason
    assert memory == "memory limit of 256 MiB reached"


@pytest.mark.parametrize("fields", [{"started": False}, {"started": False, "exit_code": 126}])
def test_a_run_that_never_started_is_not_a_verdict(fields: dict) -> None:
    with pytest.raises(NotAVerdict):
        decide(observed(**fields), LIMITS)


def test_a_limit_shorter_than_a_start_is_still_a_timeout() -> None:
    result = decide(observed(started=False, killed_for=KILLED_WALL, exit_code=137), LIMITS)
    assert (result.status, result.limit) == (Status.TIMEOUT, Limit.WALL)


# -- limits ---------------------------------------------------------------------------------------
def test_cpu_limit_defaults_to_the_wall_limit_and_has_the_same_maximum() -> None:
    settings = Settings()
    limits = resolve_limits(ExecuteRequest(code="1", timeout=7), settings)
    assert (limits.wall_seconds, limits.cpu_seconds) == (7, 7)
    limits = resolve_limits(ExecuteRequest(code="1", timeout=7, cpu_timeout=2), settings)
    assert (limits.wall_seconds, limits.cpu_seconds, limits.memory_mb) == (7, 2, 256)
    with pytest.raises(RequestError, match="cpu_timeout 31 s exceeds the maximum 30 s"):
        resolve_limits(ExecuteRequest(code="1", cpu_timeout=31), settings)
    server_default = Settings(cpu_timeout_default=1.5)
    assert resolve_limits(ExecuteRequest(code="1"), server_default).cpu_seconds == 1.5


def test_settings_refuse_defaults_the_executor_would_refuse() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 64"):
        Settings(memory_mb_default=48)
    with pytest.raises(ValueError, match="CPU_TIMEOUT_DEFAULT exceeds"):
        Settings(cpu_timeout_default=60)


def test_default_concurrency_does_not_oversubscribe_the_cores() -> None:
    import os

    assert Settings().max_concurrency == len(os.sched_getaffinity(0))


def test_instance_label_is_unique_per_port_and_stable() -> None:
    assert Settings(port=5002).instance_label == Settings(port=5002).instance_label == "port-5002"
    assert Settings(port=5003).instance_label != Settings(port=5002).instance_label
    assert Settings(port=5002, instance="ours").instance_label == "ours"


# -- the registry and the layering ----------------------------------------------------------------
def test_registry_names_every_backend_and_refuses_unknown_ones() -> None:
    assert {"docker-process", "docker-container", "fake"} <= set(BACKENDS)
    fake = create_backend("fake", Settings())
    assert isinstance(fake, SandboxBackend)
    with pytest.raises(ValueError, match="unknown backend 'nope'; known: docker-process"):
        create_backend("nope", Settings())


def test_only_the_docker_backend_imports_docker() -> None:
    importers = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "docker" in top_level_imports(path)
    }
    assert importers == {"backends/docker.py"}


# -- the pool ----------------------------------------------------------------------------------
async def _until(condition, seconds: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.005)


def _job(code: str = "x") -> Job:
    return Job(code=code, stdin="hi", limits=LIMITS)


def test_pool_fills_reuses_after_settling_and_leaves_nothing_behind() -> None:
    async def scenario() -> None:
        backend = FakeBackend()
        pool = WarmPool(backend, size=2, memory_mb=256)
        pool.start()
        await _until(lambda: pool.ready_count == 2)
        sandbox = await pool.acquire(1)
        result = decide(await sandbox.run(_job()), LIMITS)
        pool.release(sandbox, result)
        await _until(lambda: pool.ready_count == 2)
        assert await pool.acquire(1) is sandbox  # the warmest one first
        pool.release(sandbox, None)  # a failed run: removed, and replaced
        await _until(lambda: sandbox.id in backend.removed and pool.ready_count == 2)
        await pool.stop()
        assert backend.sandboxes == {} and len(backend.removed) == len(backend.created)

    asyncio.run(scenario())


def test_pool_of_a_backend_without_reuse_discards_every_used_sandbox() -> None:
    async def scenario() -> None:
        backend = FakeBackend(reuse=False)
        pool = WarmPool(backend, size=1, memory_mb=256)
        pool.start()
        ids = []
        for _ in range(3):
            sandbox = await pool.acquire(5)
            ids.append(sandbox.id)
            pool.release(sandbox, decide(await sandbox.run(_job()), LIMITS))
        await pool.stop()
        assert len(set(ids)) == 3 and backend.sandboxes == {}

    asyncio.run(scenario())


def test_pool_reports_warm_up_failures_and_recovers() -> None:
    async def scenario() -> None:
        backend = FakeBackend(create_failures=3)
        pool = WarmPool(backend, size=1, memory_mb=256)
        pool.start()
        await _until(lambda: pool.last_error is not None)
        assert not pool.is_warm() and pool.last_error == "fake warm-up failed"
        sandbox = await pool.acquire(10)  # retried with back-off until one is made
        assert pool.last_error is None and sandbox.id == "fake-1"
        pool.release(sandbox, None)
        await pool.stop()
        assert backend.sandboxes == {}

    asyncio.run(scenario())


def test_dead_pooled_sandboxes_are_never_handed_out() -> None:
    async def scenario() -> None:
        backend = FakeBackend()
        pool = WarmPool(backend, size=2, memory_mb=256)
        pool.start()
        await _until(lambda: pool.ready_count == 2)
        for sandbox in list(backend.sandboxes.values()):
            sandbox.alive = False  # removed from outside
        fresh = await pool.acquire(5)
        assert fresh.is_alive() and fresh.id not in ("fake-1", "fake-2")
        pool.release(fresh, None)
        await pool.stop()

    asyncio.run(scenario())


# -- a request's runs ----------------------------------------------------------------------------
def _runs(backend: FakeBackend, language: str = "python") -> tuple[WarmPool, Runs]:
    pool = WarmPool(backend, size=1, memory_mb=256)
    pool.start()
    lang = languages.get(language)
    compile_limits = LIMITS if lang.compiled else None
    return pool, Runs(
        pool, set(), language=lang, code="x", compile_limits=compile_limits, sandbox_wait=5
    )


def test_a_requests_runs_go_in_batches_and_on_in_another_sandbox_after_a_timeout() -> None:
    async def scenario() -> None:
        timed_out = {"killed_for": KILLED_WALL, "exit_code": 137, "duration_ms": 5000.0}
        backend = FakeBackend(
            lambda job: observed(
                stdout=job.stdin.encode(), **(timed_out if job.stdin == "slow" else {})
            )
        )
        pool, runs = _runs(backend)
        bigger = RunLimits(wall_seconds=5, cpu_seconds=2, memory_mb=512, output_bytes=100)
        wanted = [Run("a", LIMITS), Run("slow", LIMITS), Run("b", LIMITS), Run("c", LIMITS)]
        async with runs:
            results = await runs.run_all([*wanted, Run("d", bigger)], more=False, heavy=False)
        await pool.stop()
        assert [r.stdout for r in results] == [b"a", b"slow", b"b", b"c", b"d"]
        assert [r.status for r in results] == ["ok", "timeout", "ok", "ok", "ok"]
        # the fake stops a batch after a killed run, as the supervisor does; the host gives
        # that sandbox up, sends the rest to another, and the other memory limit alone
        assert backend.batches == [4, 2]
        assert [j.stdin for j in backend.jobs] == ["a", "slow", "b", "c", "d"]
        assert [j.more for j in backend.jobs] == [True, True, True, True, False]
        assert backend.sandboxes == {}

    asyncio.run(scenario())


def test_a_compiled_program_is_installed_again_when_its_sandbox_fails_to_settle() -> None:
    """A run of the program in a sandbox that replaced an unclean one would find no program
    there: an infrastructure failure that looked like the submission's runtime error."""

    async def scenario() -> None:
        def behaviour(job: Job) -> Observation:
            backend.settle_clean = job.install is not None  # the run leaves it unclean
            return observed(installed=job.install is not None)

        backend = FakeBackend(behaviour)
        pool, runs = _runs(backend, "cpp")
        async with runs:
            for _ in range(2):
                result = await runs.run("", LIMITS, more=True)
                assert result.status == "ok"
        await pool.stop()
        steps = ["compile" if j.install else "run" for j in backend.jobs]
        assert steps == ["compile", "run", "compile", "run", "run"]  # the last: the closing no-op
        assert backend.sandboxes == {}

    asyncio.run(scenario())


# -- the executor and admission ------------------------------------------------------------------
def _executor(backend: FakeBackend, **overrides: object) -> Executor:
    settings = Settings(pool_size=2, isolation="container", **overrides)  # type: ignore[arg-type]
    return Executor(settings, backends={"container": backend})


def test_executor_answers_the_backends_observation_through_the_verdict_rule() -> None:
    async def scenario() -> None:
        backend = FakeBackend(
            lambda job: observed(stdout=b"out", stderr=b"err", exit_code=1, memory_error=True)
        )
        executor = _executor(backend)
        await executor.start()
        try:
            answer = await executor.execute(ExecuteRequest(code="x", memory_mb=128), "r1")
        finally:
            await executor.stop()
        assert (answer.status, answer.exit_code, answer.limit) == ("memory_limit", 1, "memory")
        assert (
            answer.stderr == "err" and answer.error == "err\nboxed: memory limit of 128 MiB reached"
        )
        assert answer.output == "out" and answer.request_id == "r1" and answer.cpu_ms == 1.0
        assert backend.jobs[0].limits.memory_mb == 128
        assert backend.sandboxes == {}

    asyncio.run(scenario())


def _lost_first(times: int):  # type: ignore[no-untyped-def]
    """A behaviour whose sandbox is lost under the first ``times`` runs, then runs normally."""
    calls = iter(range(1_000))

    def behave(job):  # type: ignore[no-untyped-def]
        if next(calls) < times:
            raise SandboxError("the supervisor exited: killed from outside")
        return observed(stdout=b"ran")

    return behave


def _execute_once(backend: FakeBackend) -> Any:
    """One ``x`` snippet through a started executor over ``backend``: its answer."""

    async def scenario() -> Any:
        executor = _executor(backend)
        await executor.start()
        try:
            return await executor.execute(ExecuteRequest(code="x"), "r")
        finally:
            await executor.stop()

    return asyncio.run(scenario())


def test_a_sandbox_lost_under_a_run_is_retried_once_on_a_fresh_one() -> None:
    backend = FakeBackend(_lost_first(1))
    answer = _execute_once(backend)
    assert (answer.status, answer.stdout, answer.outcome) == ("ok", "ran", "code")
    assert len(backend.jobs) == 2 and backend.sandboxes == {}


def test_code_that_loses_its_sandbox_twice_gets_the_codes_verdict_error() -> None:
    """Otherwise code that takes its sandbox down would escape its reward as a mask."""
    backend = FakeBackend(_lost_first(2))
    answer = _execute_once(backend)
    assert (answer.status, answer.outcome, answer.failure) == ("error", "code", None)
    assert answer.reason is not None and "lost twice" in answer.reason
    assert len(backend.jobs) == 2 and backend.sandboxes == {}


def _compiles_then_loses_its_sandbox_then_fails_to_compile(job: Job) -> Observation:
    """The first compile works, the first run loses its sandbox, the compile again in a fresh
    sandbox fails (as under load: a compile timeout)."""
    steps = _compiles_then_loses_its_sandbox_then_fails_to_compile.steps  # type: ignore[attr-defined]
    steps.append("compile" if job.install else "run")
    if steps == ["compile"]:
        return observed(installed=True)
    if steps == ["compile", "run"]:
        raise SandboxError("the supervisor exited: killed from outside")
    return observed(stderr=b"error: too slow", exit_code=1)


@pytest.mark.parametrize("route", ["execute", "judge"])
def test_a_compile_that_fails_again_in_a_fresh_sandbox_is_the_codes_compile_error(
    route: str,
) -> None:
    """It once escaped as a 500: the error passed through a context manager, which could not
    set the traceback of a frozen dataclass."""
    from exec_server.models import JudgeRequest

    _compiles_then_loses_its_sandbox_then_fails_to_compile.steps = []  # type: ignore[attr-defined]

    async def scenario() -> Any:
        executor = _executor(FakeBackend(_compiles_then_loses_its_sandbox_then_fails_to_compile))
        await executor.start()
        try:
            if route == "execute":
                return await executor.execute(ExecuteRequest(code="x", language="cpp"), "r")
            req = JudgeRequest(code="x", language="cpp", tests=[{"expected_output": ""}])
            return await executor.judge(req, "r")
        finally:
            await executor.stop()

    answer = asyncio.run(scenario())
    steps = _compiles_then_loses_its_sandbox_then_fails_to_compile.steps  # type: ignore[attr-defined]
    assert steps[:3] == ["compile", "run", "compile"]  # (a closing no-op run may follow)
    if route == "execute":
        assert (answer.status, answer.outcome) == ("compile_error", "code")
    else:
        assert answer.verdict == "compile_error" and answer.tests == []
    assert answer.compile is not None and "too slow" in answer.compile.stderr


def test_a_set_up_that_fails_twice_is_the_infrastructures_never_a_verdict() -> None:
    """The child died before the code ran: nothing the code did; a 503, retried once first."""

    async def scenario() -> None:
        backend = FakeBackend(lambda job: observed(started=False))
        executor = _executor(backend)
        await executor.start()
        try:
            with pytest.raises(ServiceUnavailable) as raised:
                await executor.execute(ExecuteRequest(code="x"), "r")
        finally:
            await executor.stop()
        assert raised.value.code == "sandbox_lost" and len(backend.jobs) == 2
        assert backend.sandboxes == {}

    asyncio.run(scenario())


def test_losses_while_the_engine_is_down_are_the_infrastructures() -> None:
    async def scenario() -> None:
        backend = FakeBackend()

        def lose(job):  # type: ignore[no-untyped-def]
            backend.up = False  # the engine went down under the run
            raise SandboxError("engine lost")

        backend.behaviour = lose
        executor = _executor(backend)
        await executor.start()
        try:
            with pytest.raises(ServiceUnavailable):
                await executor.execute(ExecuteRequest(code="x"), "r")
        finally:
            await executor.stop()

    asyncio.run(scenario())


def test_backend_down_is_a_503_with_its_reason_and_readiness_says_so() -> None:
    async def scenario() -> None:
        backend = FakeBackend()
        backend.up = False
        executor = _executor(backend)
        await executor.start()
        try:
            with pytest.raises(ServiceUnavailable, match="fake engine down"):
                await executor.execute(ExecuteRequest(code="x"), "r")
            state = executor.readiness()
            assert not executor.ready
            assert (state["backend"], state["backend_up"], state["problem"]) == (
                "fake",
                False,
                "fake engine down",
            )
        finally:
            await executor.stop()

    asyncio.run(scenario())


def test_a_missing_image_pauses_warm_ups_until_the_backend_can_make_sandboxes() -> None:
    async def scenario() -> None:
        backend = FakeBackend()
        backend.problem = "sandbox image x is missing; build it with `make x`"
        executor = _executor(backend)
        await executor.start()
        try:
            await asyncio.sleep(0.3)
            assert backend.created == []  # not retried in a loop while it cannot work
            with pytest.raises(ServiceUnavailable, match="build it with `make x`"):
                await executor.execute(ExecuteRequest(code="x"), "r")
            assert executor.readiness()["problem"] == backend.problem
            backend.problem = None
            await executor.engine.check_backend()
            await _until(lambda: executor.engine.pool.ready_count == 2)
            answer = await executor.execute(ExecuteRequest(code="x", input="back"), "r")
            assert answer.stdout == "back" and executor.ready
        finally:
            await executor.stop()

    asyncio.run(scenario())


def test_admission_bounds_running_snippets_and_refuses_past_the_queue() -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        running = []

        async def slow(job: Job):  # type: ignore[no-untyped-def]
            running.append(job)
            await release.wait()
            return observed()

        backend = FakeBackend(slow)
        executor = _executor(backend, max_concurrency=2, max_queue=1)
        await executor.start()
        try:
            calls = [
                asyncio.create_task(executor.execute(ExecuteRequest(code="x"), f"r{i}"))
                for i in range(3)
            ]
            await _until(lambda: len(running) == 2)
            with pytest.raises(Overloaded, match="queue full"):
                await executor.execute(ExecuteRequest(code="x"), "r4")
            assert executor.admission.running == 2 and executor.admission.waiting == 1
            release.set()
            answers = await asyncio.gather(*calls)
            assert [a.status for a in answers] == ["ok"] * 3
        finally:
            await executor.stop()
        assert backend.sandboxes == {}

    asyncio.run(scenario())


def test_reaper_removes_only_what_stays_unowned_twice() -> None:
    async def scenario() -> None:
        backend = FakeBackend()
        executor = _executor(backend)
        await executor.start()
        try:
            await _until(lambda: executor.engine.pool.ready_count == 2)
            orphan = await backend.create_warm(256)  # made by nobody this executor knows
            assert await executor.engine.reap() == 0  # seen once
            assert await executor.engine.reap() == 1 and orphan.id in backend.removed
            assert executor.engine.pool.ready_count == 2  # its own were spared
        finally:
            await executor.stop()

    asyncio.run(scenario())


def test_start_removes_what_a_killed_process_of_the_instance_left() -> None:
    """Before the pool fills, start-up removes every sandbox of the instance and waits until
    the engine lists none (even while its removals take a few listings), counting each as an
    orphan reaped."""
    from exec_server import metrics

    async def scenario() -> tuple[_SlowRemovals, set[str], float]:
        backend = _SlowRemovals(listings=3)
        left = {(await backend.create_warm(256)).id for _ in range(2)}
        before = metrics.ORPHANS_REMOVED._value.get()
        executor = _executor(backend)
        await executor.start()
        try:
            assert not left & set(await backend.list_owned())
            await _until(lambda: executor.engine.pool.ready_count == 2)
        finally:
            await executor.stop()
        return backend, left, metrics.ORPHANS_REMOVED._value.get() - before

    backend, left, counted = asyncio.run(scenario())
    assert left <= set(backend.removed) and counted == 2


def test_fake_sandboxes_implement_the_interface() -> None:
    async def scenario() -> Sandbox:
        return await FakeBackend().create_warm(256)

    assert isinstance(asyncio.run(scenario()), Sandbox)


class _SlowRemovals(FakeBackend):
    """An engine whose removals take a while: a sandbox stays listed for ``listings`` more
    listings after it was removed (Docker lists a container while it is being removed, and a
    second ``rm`` of it answers at once that removal is in progress)."""

    def __init__(self, listings: int) -> None:
        super().__init__()
        self.listings = listings
        self.going: dict[str, int] = {}

    async def list_owned(self) -> list[str]:
        for sandbox_id in list(self.going):
            self.going[sandbox_id] -= 1
            if self.going[sandbox_id] < 0:
                del self.going[sandbox_id]
        return list(self.sandboxes) + list(self.going)

    async def remove(self, sandbox_id: str) -> bool:
        if sandbox_id in self.sandboxes:
            await super().remove(sandbox_id)
            self.going[sandbox_id] = self.listings
        return sandbox_id not in self.going


def test_stop_waits_until_the_engine_lists_no_sandbox(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing is left after stop even when removals are slow: the service waits until its
    backends list none, and names what is left when the engine never finishes."""
    import exec_server.engine

    async def scenario(listings: int) -> _SlowRemovals:
        backend = _SlowRemovals(listings)
        executor = _executor(backend, session_pool_size=0)  # the one-shot pool's sandboxes only
        await executor.start()
        await _until(lambda: executor.engine.pool.ready_count == 2)
        await backend.create_warm(256)  # an orphan, and the two warm ones
        await executor.stop()
        return backend

    backend = asyncio.run(scenario(listings=3))
    assert backend.sandboxes == {} and backend.going == {} and len(backend.removed) == 3
    monkeypatch.setattr(exec_server.engine, "STOP_REMOVAL_SECONDS", 0.3)
    backend = asyncio.run(scenario(listings=10**6))
    assert backend.sandboxes == {} and len(backend.going) == 3
    assert "still listed after removal" in caplog.text
    assert all(sandbox_id in caplog.text for sandbox_id in backend.going)
