"""Fair queueing between tenants in admission (no Docker): a flooding tenant delays another's
requests by one turn, not by its backlog; bounds, deadlines and cancellation still hold."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from exec_server.admission import Admission, Overloaded, current_tenant
from tests.fakes import FakeExecutor, serving


async def hold_slot(
    admission: Admission, tenant: str
) -> tuple[asyncio.Future[None], asyncio.Event]:
    """A task holding one slot of ``tenant`` (held once this returns) until the event is set."""
    release = asyncio.Event()

    async def holder() -> None:
        async with admission.slot(tenant):
            await release.wait()

    task = asyncio.ensure_future(holder())
    await asyncio.sleep(0)
    return task, release


async def drive(admission: Admission, arrivals: list[str], hold: float = 0.01) -> list[str]:
    """Queue every request of ``arrivals`` (tenant names, in arrival order) behind one held
    slot, then release it: the order in which they got their slots."""
    order: list[str] = []

    async def request(tenant: str) -> None:
        async with admission.slot(tenant):
            order.append(tenant)
            await asyncio.sleep(hold)

    first, release = await hold_slot(admission, "holder")
    tasks = [asyncio.ensure_future(request(t)) for t in arrivals]
    await asyncio.sleep(0.01)  # all queued now
    assert admission.waiting == len(arrivals)
    release.set()
    await asyncio.gather(first, *tasks)
    return order


def test_a_flood_does_not_starve_another_tenant() -> None:
    admission = Admission(max_running=1, max_queue=100, queue_timeout=10)
    arrivals = ["flood"] * 20 + ["small"] * 3
    order = asyncio.run(drive(admission, arrivals))
    # round robin over waiting tenants: the small job's requests interleave with the flood's
    assert order[:6] == ["flood", "small", "flood", "small", "flood", "small"]
    assert sorted(order) == sorted(arrivals)
    assert admission.running == 0 and admission.waiting == 0


def test_one_tenant_keeps_its_own_order() -> None:
    admission = Admission(max_running=1, max_queue=100, queue_timeout=10)
    seen: list[int] = []

    async def scenario() -> None:
        async def numbered(i: int) -> None:
            async with admission.slot("a"):
                seen.append(i)

        first, release = await hold_slot(admission, "a")
        tasks = [asyncio.ensure_future(numbered(i)) for i in range(10)]
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(first, *tasks)

    asyncio.run(scenario())
    assert seen == list(range(10))


def test_bound_and_deadline_are_shared_and_a_timed_out_waiter_leaves_no_trace() -> None:
    async def scenario() -> None:
        admission = Admission(max_running=1, max_queue=2, queue_timeout=0.1)
        first, release = await hold_slot(admission, "a")
        waiters = [asyncio.ensure_future(_enter(admission, t)) for t in ("a", "b")]
        await asyncio.sleep(0)
        with pytest.raises(Overloaded, match="queue full"):
            async with admission.slot("c"):
                pass
        outcomes = await asyncio.gather(*waiters, return_exceptions=True)
        assert all(isinstance(o, Overloaded) and "no slot within" in str(o) for o in outcomes)
        assert admission.waiting == 0 and admission.waiting_by_tenant() == {}
        release.set()
        await first
        async with admission.slot("b"):  # the slot is free again, at once
            assert admission.running == 1
        assert admission.running == 0

    asyncio.run(scenario())


async def _enter(admission: Admission, tenant: str) -> None:
    async with admission.slot(tenant):
        pass


def test_a_cancelled_waiter_passes_its_grant_on() -> None:
    async def scenario() -> None:
        admission = Admission(max_running=1, max_queue=10, queue_timeout=5)
        first, release = await hold_slot(admission, "a")
        doomed = asyncio.ensure_future(_enter(admission, "x"))
        later = asyncio.ensure_future(_enter(admission, "y"))
        await asyncio.sleep(0)
        release.set()  # grants x ...
        await asyncio.sleep(0)
        doomed.cancel()  # ... which is cancelled before it ran: y must still get a slot
        await asyncio.wait_for(later, 2)
        await first
        assert admission.running == 0 and admission.waiting == 0

    asyncio.run(scenario())


def test_the_tenant_comes_from_the_header() -> None:
    executor = FakeExecutor()
    seen: list[str] = []
    real = executor.execute

    async def execute(req, request_id):  # type: ignore[no-untyped-def]
        seen.append(current_tenant.get())
        return await real(req, request_id)

    executor.execute = execute  # type: ignore[method-assign]
    with serving(executor) as url:
        for headers in ({"X-Boxed-Tenant": "job-7"}, {}, {"X-Boxed-Tenant": "x" * 500}):
            r = httpx.post(f"{url}/execute", json={"code": "print(1)"}, headers=headers)
            assert r.status_code == 200, r.text
    assert seen == ["job-7", "", "x" * 64]


def test_the_client_names_its_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    from exec_server.client import Client

    executor = FakeExecutor()
    seen: list[str] = []
    real = executor.execute

    async def execute(req, request_id):  # type: ignore[no-untyped-def]
        seen.append(current_tenant.get())
        return await real(req, request_id)

    executor.execute = execute  # type: ignore[method-assign]
    monkeypatch.setenv("BOXED_TENANT", "from-env")
    with serving(executor) as url:
        with Client(url, tenant="job-a") as client:
            client.execute("print(1)")
        with Client(url) as client:
            client.execute("print(1)")
    assert seen == ["job-a", "from-env"]
