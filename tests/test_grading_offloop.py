"""Grading and ``/calculate`` run in worker processes, off the event loop, under a deadline
(issue #28, classes 6 and 10): a crafted slow ``/score`` must not stall ``/healthz``, and an
item past ``BOXED_SCORE_DEADLINE`` is a grader failure without reward, never a wrong answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.fakes import serving

# ~2.5 MB of boxes: seconds of parsing and extraction, in time linear in the text.
SLOW_ITEM = {"response": "\\boxed{1} " * 250_000, "answer": "2"}
GRADER_TIMEOUT = {"code": "grader_timeout", "retryable": False}
PROBE_BUDGET = 0.5  # seconds /healthz may take while the slow work runs


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(score_deadline=0.5, calculate_deadline=0.5, grading_workers=2) as base:
        httpx.post(f"{base}/calculate", json={"expr": "1+1"}, timeout=60)  # workers started
        yield base


def _probe_while(work: Callable[[], Any], url: str) -> tuple[Any, float]:
    """Run ``work`` in a thread and probe ``/healthz`` until it ends: its result and the
    slowest probe."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(work()))
    thread.start()
    slowest = 0.0
    with httpx.Client(timeout=10) as client:
        time.sleep(0.1)  # the work is under way
        while thread.is_alive():
            started = time.perf_counter()
            assert client.get(f"{url}/healthz").status_code == 200
            slowest = max(slowest, time.perf_counter() - started)
            time.sleep(0.02)
    thread.join()
    return result[0], slowest


def test_slow_score_is_a_grader_timeout_and_healthz_answers(url: str) -> None:
    response, slowest = _probe_while(
        lambda: httpx.post(f"{url}/score", json=SLOW_ITEM, timeout=60), url
    )
    assert response.status_code == 200, response.text
    row = response.json()
    assert (row["status"], row["reward"], row["outcome"]) == ("timeout", None, "grader")
    assert row["failure"] == GRADER_TIMEOUT
    assert slowest < PROBE_BUDGET, f"/healthz took {slowest:.2f} s during a slow /score"


def test_batch_deadline_is_per_item(url: str) -> None:
    fast = {"response": "\\boxed{2}", "answer": "2", "id": "fast"}
    body = {"items": [SLOW_ITEM, fast, SLOW_ITEM]}
    response, slowest = _probe_while(
        lambda: httpx.post(f"{url}/score/batch", json=body, timeout=60), url
    )
    assert response.status_code == 200, response.text
    out = response.json()
    rows = out["results"]
    assert [r["status"] for r in rows] == ["timeout", "correct", "timeout"]
    assert [r["line"] for r in rows] == [1, 2, 3]
    assert rows[1]["id"] == "fast" and rows[1]["reward"] == 1.0
    assert all(r["reward"] is None and r["failure"] == GRADER_TIMEOUT for r in rows[::2])
    assert out["summary"]["timeouts"] == 2 and out["summary"]["masked"] == 2
    assert slowest < PROBE_BUDGET


def test_batch_rows_match_the_library(url: str) -> None:
    from scorer.api import score_batch

    body = {
        "items": [
            {"response": "\\boxed{3}", "answer": "3"},
            {"response": "no box", "answer": "3", "id": "x"},
            {"nothing": 1},
            {"response": "\\boxed{4}", "answer": "3", "preset": "nope"},
        ]
    }
    response = httpx.post(f"{url}/score/batch", json=body, timeout=60)
    assert response.status_code == 200, response.text
    assert response.json() == score_batch(body)


def test_score_input_error_is_still_422(url: str) -> None:
    response = httpx.post(f"{url}/score", json={"response": "\\boxed{1}"}, timeout=60)
    assert response.status_code == 422
    assert "gold" in response.json()["detail"]


def test_expensive_calculate_does_not_stall_healthz(url: str) -> None:
    # near the cost caps: four cap-sized combinatorial results and a long product chain
    expr = "comb(14280, 7140) % 7 + comb(14280, 7141) % 7 + factorial(1500) % 7 + 9**4000 % 7"

    def burst() -> list[httpx.Response]:
        with httpx.Client(timeout=60) as client:
            return [client.post(f"{url}/calculate", json={"expr": expr}) for _ in range(20)]

    responses, slowest = _probe_while(burst, url)
    assert all(r.status_code == 200 for r in responses)
    assert {(r.json()["error"] is None) for r in responses} == {True}, responses[0].text
    assert slowest < PROBE_BUDGET
