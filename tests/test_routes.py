"""The routes beside /execute: /calculate, /execute/batch, /run_code, /score."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from exec_server.app import create_app
from exec_server.settings import Settings

CALC_CASES = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "calc_hostile.jsonl").read_text().splitlines()
    if line.strip()
]


def _expression(case: dict) -> str:
    if case.get("generator"):
        # trusted test data: a Python expression that builds the (huge) input string
        return eval(case["code"], {"__builtins__": {}})
    return case["code"]


@pytest.fixture(scope="module")
def app_client() -> Iterator[TestClient]:
    """The real app in-process, without a warm pool: /calculate needs no sandbox."""
    settings = Settings(pool_size=0, instance="routes-test")
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.mark.parametrize("case", CALC_CASES, ids=[c["id"] for c in CALC_CASES])
def test_calculate_catalogue_over_http(app_client: TestClient, case: dict) -> None:
    expr = _expression(case)
    started = time.perf_counter()
    r = app_client.post("/calculate", json={"expr": expr})
    elapsed = time.perf_counter() - started
    if case["category"] == "api":
        assert r.status_code == 413  # the body limit answers before the body is read whole
    elif case["id"] == "ok_control":
        assert r.status_code == 200 and r.json() == {"value": 96.0, "error": None}
    else:
        body = r.json()
        assert r.status_code == 200 and body["value"] is None and body["error"], body
        assert elapsed < 1.0
    control = app_client.post("/calculate", json={"expr": "2*(3+4)**2 - sqrt(16)/2"})
    assert control.json()["value"] == 96.0


def test_calculate_caller_mistakes_are_4xx(app_client: TestClient) -> None:
    assert app_client.post("/calculate", json={}).status_code == 422
    r = app_client.post("/calculate", content=b"nope", headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert app_client.post("/calculate", json={"expr": "math.sqrt(16) + 10**20"}).json() == {
        "value": 4.0 + 10**20,
        "error": None,
    }
    assert app_client.post("/calculate", json={"expr": "10**20"}).json()["value"] == 10**20


@pytest.mark.docker
def test_execute_batch_keeps_order_and_isolates_bad_items(boxed_service: str) -> None:
    items = [
        {"code": "print('a')"},
        {"code": ""},
        {"code": "import sys; print(sys.stdin.read())", "input": "b"},
        {"code": "print(1)", "timeout": 10**6},
        {"code": "1/0"},
    ]
    r = httpx.post(f"{boxed_service}/execute/batch", json={"items": items}, timeout=60)
    assert r.status_code == 200
    results = r.json()["results"]
    assert [x.get("stdout") for x in results] == ["a\n", None, "b\n", None, ""]
    assert results[1]["error"]["status_code"] == 422
    assert results[3]["error"]["status_code"] == 422 and "maximum" in results[3]["error"]["detail"]
    assert results[4]["status"] == "error"
    too_many = {"items": [{"code": "1"}] * 1000}
    assert httpx.post(f"{boxed_service}/execute/batch", json=too_many).status_code == 422


@pytest.mark.docker
def test_run_code_speaks_sandbox_fusion(boxed_service: str) -> None:
    def run_code(**body: object) -> dict:
        r = httpx.post(f"{boxed_service}/run_code", json=body, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()

    ok = run_code(code="print(input())", language="python", stdin="hi", memory_limit_MB=-1)
    assert ok["status"] == "Success" and ok["run_result"]["status"] == "Finished"
    assert ok["run_result"]["stdout"] == "hi\n" and ok["run_result"]["return_code"] == 0
    assert ok["run_result"]["execution_time"] > 0
    failed = run_code(code="raise ValueError('x')", language="python")
    assert failed["status"] == "Failed" and failed["run_result"]["return_code"] == 1
    assert "ValueError: x" in failed["run_result"]["stderr"]
    slow = run_code(code="import time; time.sleep(5)", language="python", run_timeout=1)
    assert slow["run_result"]["status"] == "TimeLimitExceeded" and slow["boxed_status"] == "timeout"
    broken = run_code(code="int main() { return x; }", language="cpp")
    assert broken["status"] == "Failed" and broken["boxed_status"] == "compile_error"
    assert broken["compile_result"]["return_code"] != 0 and broken["run_result"] is None
    assert "x" in broken["compile_result"]["stderr"]
    r = httpx.post(f"{boxed_service}/run_code", json={"code": "1", "language": "cobol"})
    assert r.status_code == 422


@pytest.mark.docker
def test_score_routes(boxed_service: str) -> None:
    one = {"response": "<think>2+2</think> The answer is \\boxed{4}.", "answer": 4}
    r = httpx.post(f"{boxed_service}/score", json={**one, "preset": "interleaved"}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["reward"] == 1.0 and r.json()["status"] == "correct"
    wrong = {"response": "\\boxed{5}", "answer": "4"}
    batch = {"items": [one, wrong, "not a record"], "preset": "binary"}
    r = httpx.post(f"{boxed_service}/score/batch", json=batch, timeout=60)
    assert r.status_code == 200, r.text
    rows = r.json()["results"]
    assert [row["status"] for row in rows] == ["correct", "incorrect", "error"]
    assert [row["reward"] for row in rows[:2]] == [1.0, 0.0]
    bad = httpx.post(f"{boxed_service}/score", json={"response": "\\boxed{1}"}, timeout=30)
    assert bad.status_code == 422 and "gold" in bad.json()["detail"]
    bad = httpx.post(f"{boxed_service}/score", json={**one, "preset": "nope"}, timeout=30)
    assert bad.status_code == 422


@pytest.mark.parametrize(
    "content",
    [
        b'{"code": "print(\\"\\ud800\\")"}',  # lone surrogate
        b'{"code": "print(1)", "timeout": NaN}',
        b'{"code": "print(1)", "memory_mb": 1e400}',  # infinity
    ],
)
def test_unrenderable_invalid_input_is_422_not_500(app_client: TestClient, content: bytes) -> None:
    # Regression (B6-1): the default handler echoed the input and crashed rendering it.
    r = app_client.post("/execute", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"][0] == "body" and isinstance(r.json()["detail"], str)


def test_oversized_chunked_body_is_413(app_client: TestClient) -> None:
    # Regression (B6-6): without Content-Length the limit used to surface as a 400 parse error.
    def chunks() -> Iterator[bytes]:
        yield b'{"expr": "'
        for _ in range(9):
            yield b"1" * (1024 * 1024)
        yield b'"}'

    r = app_client.post(
        "/calculate", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413 and "maximum" in r.json()["detail"]

    def small() -> Iterator[bytes]:
        yield b'{"expr": '
        yield b'"6*7"}'

    r = app_client.post("/calculate", content=small(), headers={"content-type": "application/json"})
    assert r.json() == {"value": 42, "error": None}
