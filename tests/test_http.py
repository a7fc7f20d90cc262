"""The HTTP layer alone: the real app over a fake executor (tests/fakes.py), no Docker.

What is checked here is what the routes add to the engine: how a body is read, unknown fields,
language aliases, the one error shape and the one exception table (a batch item and a single
request agree), the API key with its challenge, scoring through admission and the settings,
and the typed schema.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import boxed_client
import exec_server
from exec_server.app import create_app
from exec_server.settings import Settings
from tests.fakes import FAILURES, FakeExecutor, serving

REPO = Path(__file__).resolve().parent.parent
FORM = {"content-type": "application/x-www-form-urlencoded"}  # what `curl -d` sends
JSON = {"content-type": "application/json"}


def make(**settings: Any) -> tuple[TestClient, FakeExecutor]:
    fake = FakeExecutor(**settings.pop("fake", {}))
    app = create_app(Settings(instance="http-test", **settings), executor=fake)
    return TestClient(app, raise_server_exceptions=False), fake


@pytest.fixture
def app() -> Iterator[tuple[TestClient, FakeExecutor]]:
    client, fake = make()
    with client:
        yield client, fake


def assert_error_shape(r: httpx.Response) -> dict[str, Any]:
    """Every error answer: a one-line human ``detail``, the ``errors`` list, and whose failure
    it is (``outcome``/``failure``: null for the caller's mistake, a code for the service's)."""
    body = r.json()
    assert set(body) == {"detail", "errors", "outcome", "failure"}, body
    if r.status_code < 500 and r.status_code not in (410, 429):
        assert body["outcome"] is None and body["failure"] is None, body
    else:
        assert body["outcome"] in ("infrastructure", "code"), body
    assert isinstance(body["detail"], str) and body["detail"] and "\n" not in body["detail"]
    assert isinstance(body["errors"], list)
    for e in body["errors"]:
        assert set(e) == {"loc", "msg", "type"} and isinstance(e["msg"], str), e
    assert "('" not in body["detail"]  # no Python tuple reprs
    return body


# ------------------------------------------------------------------------------ reading a body


def test_lifespan_starts_and_stops_the_executor() -> None:
    client, fake = make()
    with client:
        assert fake.started and not fake.stopped
    assert fake.stopped


def test_every_answer_names_the_instance_that_served_it(
    app: tuple[TestClient, FakeExecutor],
) -> None:
    client, _ = app
    answers = [
        client.post("/execute", json={"code": "ok"}),
        client.get("/readyz"),
        client.post("/execute", json={"code": 1}),  # 422
        client.get("/no-such-route"),  # 404
        client.post("/execute", content=b"x" * (9 * 1024 * 1024), headers=JSON),  # 413
    ]
    assert [a.status_code for a in answers] == [200, 200, 422, 404, 413]
    assert {a.headers["X-Boxed-Instance"] for a in answers} == {"http-test"}


@pytest.mark.parametrize("headers", [FORM, {}, JSON, {"content-type": "application/json; x=1"}])
def test_a_json_body_is_read_whatever_its_content_type(
    app: tuple[TestClient, FakeExecutor], headers: dict[str, str]
) -> None:
    client, fake = app
    r = client.post("/execute", content=b'{"code": "print(6*7)"}', headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["stdout"] == "print(6*7)" and fake.ran[-1][0].code == "print(6*7)"
    r = client.post("/calculate", content=b'{"expr": "6*7"}', headers=headers)
    assert r.json() == {"value": 42, "error": None}


def test_the_readme_curl_line_works_as_pasted() -> None:
    """The exact command of the docs, with the real curl, against the app over uvicorn."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    with serving() as url:
        port = url.rsplit(":", 1)[1]
        line = f'curl -s localhost:{port}/execute -d \'{{"code": "print(6*7)"}}\''
        out = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=30)
    assert json.loads(out.stdout)["stdout"] == "print(6*7)", out


def test_a_browser_form_post_is_refused(app: tuple[TestClient, FakeExecutor]) -> None:
    """A web page may post a form to localhost without asking: it must not run code."""
    client, fake = app
    for headers in (FORM, {}):
        r = client.post(
            "/execute",
            content=b'{"code": "print(1)"}',
            headers={**headers, "origin": "https://example.com"},
        )
        assert r.status_code == 415
        assert "Content-Type: application/json" in assert_error_shape(r)["detail"]
    assert fake.ran == []


@pytest.mark.parametrize("content_type", ["text/plain", "multipart/form-data; boundary=x"])
def test_other_content_types_are_415_naming_the_header(
    app: tuple[TestClient, FakeExecutor], content_type: str
) -> None:
    client, fake = app
    r = client.post(
        "/execute", content=b'{"code": "print(1)"}', headers={"content-type": content_type}
    )
    assert r.status_code == 415
    detail = assert_error_shape(r)["detail"]
    assert "Content-Type: application/json" in detail and content_type in detail
    assert fake.ran == []


def test_a_body_that_is_not_json_says_how_it_was_sent(app: tuple[TestClient, FakeExecutor]) -> None:
    client, _ = app
    r = client.post("/execute", content=b"code=print(1)", headers=FORM)
    assert r.status_code == 422
    body = assert_error_shape(r)
    assert "not valid JSON" in body["detail"]
    assert "Content-Type: application/x-www-form-urlencoded" in body["detail"]
    assert body["errors"][0]["type"] == "json_invalid"
    for content, fragment in ((b"", "the body is empty"), (b"[1, 2]", "JSON object")):
        r = client.post("/execute", content=content, headers=JSON)
        assert r.status_code == 422 and fragment in assert_error_shape(r)["detail"]


# ---------------------------------------------------------------------------- unknown fields


def test_an_unknown_field_is_422_naming_it_and_the_accepted_ones(
    app: tuple[TestClient, FakeExecutor],
) -> None:
    client, fake = app
    r = client.post("/execute", json={"code": "print(1)", "timout": 10})
    assert r.status_code == 422
    body = assert_error_shape(r)
    assert body["detail"].startswith("timout: unknown field; did you mean 'timeout'?")
    for name in ("code", "input (or stdin)", "language", "timeout", "memory_mb", "isolation"):
        assert name in body["detail"]
    assert body["errors"] == [
        {
            "loc": ["body", "timout"],
            "msg": body["detail"][len("timout: ") :],
            "type": "extra_forbidden",
        }
    ]
    assert fake.ran == []
    # every own route, the envelopes of the batches included
    for path, payload, name in [
        ("/calculate", {"expr": "1", "precision": 3}, "precision"),
        ("/execute/batch", {"items": [], "parallel": True}, "parallel"),
        ("/score/batch", {"items": [], "presett": "binary"}, "presett"),
    ]:
        r = client.post(path, json=payload)
        assert r.status_code == 422 and f"{name}: unknown field" in assert_error_shape(r)["detail"]


def test_stdin_alias_and_every_problem_listed(app: tuple[TestClient, FakeExecutor]) -> None:
    client, fake = app
    assert client.post("/execute", json={"code": "1", "stdin": "x"}).status_code == 200
    assert fake.ran[-1][0].input == "x"
    r = client.post("/execute", json={"code": "", "memory_mb": -1, "colour": "red"})
    body = assert_error_shape(r)
    assert [e["loc"] for e in body["errors"]] == [
        ["body", "code"],
        ["body", "memory_mb"],
        ["body", "colour"],
    ]
    assert body["detail"].count("; ") >= 2  # all three in the one line too


def test_run_code_accepts_what_sandbox_fusion_callers_send(
    app: tuple[TestClient, FakeExecutor],
) -> None:
    client, fake = app
    body = {
        "code": "print(1)",
        "language": "python3",
        "compile_timeout": 10,
        "run_timeout": 3,
        "memory_limit_MB": -1,
        "files": {},
        "fetch_files": [],
        "stdin": "",
    }
    r = client.post("/run_code", json=body)
    assert r.status_code == 200 and r.json()["status"] == "Success", r.text
    req = fake.ran[-1][0]
    assert (req.language, req.timeout, req.memory_mb) == ("python", 3, None)
    # files and fetch_files reach the engine (which writes and returns them in the sandbox)
    r = client.post("/run_code", json={**body, "files": {"a.txt": "eA=="}, "fetch_files": ["o"]})
    assert r.status_code == 200
    assert (fake.ran[-1][0].files, fake.ran[-1][0].fetch_files) == ({"a.txt": "eA=="}, ["o"])


@pytest.mark.parametrize("spelling", ["python", "Python", "python3", "PY", " py "])
def test_language_aliases_reach_the_engine_as_python(
    app: tuple[TestClient, FakeExecutor], spelling: str
) -> None:
    client, fake = app
    r = client.post("/execute", json={"code": "1", "language": spelling})
    assert r.status_code == 200 and fake.ran[-1][0].language == "python"


def test_an_unsupported_language_names_what_is(app: tuple[TestClient, FakeExecutor]) -> None:
    client, fake = app
    for path, body in (
        ("/execute", {"code": "1", "language": "cobol"}),
        ("/run_code", {"code": "1", "language": "cobol"}),
    ):
        r = client.post(path, json=body)
        assert r.status_code == 422
        detail = assert_error_shape(r)["detail"]
        assert detail.startswith(
            "language: 'cobol' is not supported; supported: bash, c, cpp, python"
        )
        assert "python3, py" in detail
    assert fake.ran == []


# ------------------------------------------------------------------ one error shape, one table


def test_every_error_answer_has_one_shape() -> None:
    client, _ = make(api_key="k", max_body_bytes=1024)
    auth = {"authorization": "Bearer k"}
    with client:
        answers = {
            401: client.post("/execute", json={"code": "1"}),
            404: client.get("/nope", headers=auth),
            405: client.get("/execute", headers=auth),
            400: client.post("/execute", content=b'{"code": "\xff"}', headers={**JSON, **auth}),
            413: client.post("/execute", json={"code": "1" * 2000}, headers=auth),
            415: client.post(
                "/execute", content=b"{}", headers={"content-type": "text/csv", **auth}
            ),
            422: client.post("/execute", json={"code": 1}, headers=auth),
            429: client.post("/execute", json={"code": "raise:Overloaded"}, headers=auth),
            503: client.post("/execute", json={"code": "raise:ServiceUnavailable"}, headers=auth),
            500: client.post("/execute", json={"code": "raise:Bug"}, headers=auth),
        }
    for status, r in answers.items():
        assert r.status_code == status, (status, r.text)
        assert_error_shape(r)
    for status in (429, 503):
        assert int(answers[status].headers["retry-after"]) >= 1


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_batch_item_is_answered_as_the_single_request(
    app: tuple[TestClient, FakeExecutor], failure: str
) -> None:
    """One exception table: the item carries the status and body /execute answers."""
    client, _ = app
    single = client.post("/execute", json={"code": f"raise:{failure}"})
    batch = client.post(
        "/execute/batch",
        json={"items": [{"code": "a"}, {"code": f"raise:{failure}"}, {"code": "b"}]},
    )
    assert batch.status_code == 200, batch.text
    first, item, last = batch.json()["results"]
    assert first["stdout"] == "a" and last["stdout"] == "b"  # the batch is never lost
    assert item["error"]["status_code"] == single.status_code
    fields = ("detail", "errors", "outcome", "failure")
    assert {k: item["error"][k] for k in fields} == assert_error_shape(single)


def test_a_validation_error_of_an_item_is_the_single_request_one(
    app: tuple[TestClient, FakeExecutor],
) -> None:
    client, _ = app
    bad = {"code": "print(1)", "timout": 3, "language": "cpp"}
    single = assert_error_shape(client.post("/execute", json=bad))
    item = client.post("/execute/batch", json={"items": [bad]}).json()["results"][0]["error"]
    assert item["status_code"] == 422 and item["detail"] == single["detail"]
    assert [e["loc"] for e in item["errors"]] == [e["loc"][1:] for e in single["errors"]]


def test_a_lone_surrogate_in_a_batch_item_is_that_item_s_422(
    app: tuple[TestClient, FakeExecutor],
) -> None:
    """Issue 13 point 5: this exact body was a 500 after the good item had run."""
    client, fake = app
    raw = b'{"items":[{"code":"print(123)"},{"code":"x=\\"\\ud800\\""},{"code":"1","\\udfff":1}]}'
    r = client.post("/execute/batch", content=raw, headers=JSON)
    assert r.status_code == 200, r.text
    text = r.content.decode("utf-8")  # strict: the answer is valid UTF-8
    assert "\ud800" not in text and "\udfff" not in text
    ok, surrogate, key = r.json()["results"]
    assert ok["stdout"] == "print(123)" and [req.code for req, _ in fake.ran] == ["print(123)"]
    assert surrogate["error"]["status_code"] == 422
    assert surrogate["error"]["errors"][0]["loc"] == ["code"]
    assert "lone surrogate" in surrogate["error"]["detail"]
    assert key["error"]["status_code"] == 422
    single = client.post("/execute", content=b'{"code": "x=\\"\\ud800\\""}', headers=JSON)
    assert single.status_code == 422 and "lone surrogate" in assert_error_shape(single)["detail"]


def test_too_many_batch_items_is_422_naming_the_setting() -> None:
    client, fake = make(max_batch_items=2)
    with client:
        r = client.post("/execute/batch", json={"items": [{"code": "1"}] * 3})
    assert r.status_code == 422 and assert_error_shape(r)["detail"] == "3 items; the maximum is 2"
    assert fake.ran == []


def test_an_unexpected_exception_is_a_logged_500(
    app: tuple[TestClient, FakeExecutor], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = app
    with caplog.at_level(logging.ERROR, logger="boxed.http"):
        r = client.post("/execute", json={"code": "raise:Bug"}, headers={"x-request-id": "r-1"})
        batch = client.post("/execute/batch", json={"items": [{"code": "raise:Bug"}]})
    assert r.status_code == 500 and "a bug in the engine" not in r.text  # no internals
    assert batch.json()["results"][0]["error"]["status_code"] == 500
    messages = [rec.getMessage() for rec in caplog.records]
    assert any("r-1" in m and "ValueError: a bug in the engine" in m for m in messages), messages
    assert any(rec.exc_info for rec in caplog.records if "batch" in rec.getMessage())


# -------------------------------------------------------------------------------------- auth


def test_the_key_guards_every_route_but_the_probes_with_a_bearer_challenge() -> None:
    client, _ = make(api_key="s3cret")
    with client:
        for method, path in [
            ("POST", "/execute"),
            ("POST", "/score"),
            ("GET", "/metrics"),
            ("GET", "/openapi.json"),
            ("GET", "/docs"),
            ("GET", "/redoc"),
        ]:
            for headers in ({}, {"authorization": "Bearer nope"}, {"authorization": "s3cret"}):
                r = client.request(method, path, headers=headers, json={"code": "1"})
                assert r.status_code == 401, (path, headers)
                assert r.headers["www-authenticate"].startswith("Bearer")
                assert "Authorization: Bearer" in assert_error_shape(r)["detail"]
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200
        # a header that is not ASCII is a wrong key, not a crash
        weird = client.get(
            "/metrics", headers={"authorization": "Bearer s3cr\xe9t".encode("latin-1")}
        )
        assert weird.status_code == 401
        for scheme in ("Bearer", "bearer"):
            auth = {"authorization": f"{scheme} s3cret"}
            assert client.get("/openapi.json", headers=auth).status_code == 200
            assert client.get("/docs", headers=auth).status_code == 200
            assert client.get("/redoc", headers=auth).status_code == 200
            assert client.post("/execute", json={"code": "1"}, headers=auth).status_code == 200


def test_without_a_key_the_docs_are_open(app: tuple[TestClient, FakeExecutor]) -> None:
    client, _ = app
    assert client.get("/openapi.json").json()["info"]["title"] == "boxed"
    assert "swagger" in client.get("/docs").text.lower()
    assert "redoc" in client.get("/redoc").text.lower()


# ------------------------------------------------------------------------------------ scoring


def test_score_answers_typed_rows(app: tuple[TestClient, FakeExecutor]) -> None:
    client, _ = app
    r = client.post("/score", json={"response": "\\boxed{4}", "answer": 4, "preset": "binary"})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "correct" and r.json()["reward"] == 1.0
    batch = client.post(
        "/score/batch", json={"items": [{"response": "\\boxed{5}", "answer": 4}, 7]}
    )
    assert [row["status"] for row in batch.json()["results"]] == ["incorrect", "error"]
    assert batch.json()["summary"]["count"] == 2


def grader_bug(body: Any) -> dict[str, Any]:
    """Stands in for the scorer in a worker process: a bug in the grader."""
    raise ValueError("a bug in the grader")


def slow_score(body: Any) -> dict[str, Any]:
    """Stands in for the scorer in a worker process: holds the request's slot a while."""
    from scorer.api import score

    time.sleep(2)
    return score(body)


def test_score_caller_mistakes_are_422_and_grader_failures_500(
    app: tuple[TestClient, FakeExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _ = app
    for body, fragment in [
        ({"response": "\\boxed{1}"}, "no gold answer"),
        ({"response": "\\boxed{1}", "answer": 1, "preset": "nope"}, "unknown preset"),
        ({"text": "\\boxed{1}", "answer": 1}, "unknown trace format"),
        ({"response": "\\boxed{1}", "answer": 1, "timeout": 0}, "timeout"),
    ]:
        r = client.post("/score", json=body)
        assert r.status_code == 422 and fragment in assert_error_shape(r)["detail"], r.text
    import scorer.api

    # graded in a worker process: the stand-in must be importable there, so module-level
    monkeypatch.setattr(scorer.api, "score", grader_bug)
    r = client.post("/score", json={"response": "\\boxed{1}", "answer": 1})
    assert r.status_code == 500 and "bug" not in assert_error_shape(r)["detail"]


def test_score_limits_are_the_settings() -> None:
    client, _ = make(max_batch_items=2, timeout_default=1, timeout_max=3)
    with client:
        item = {"response": "\\boxed{1}", "answer": 1}
        r = client.post("/score/batch", json={"items": [item] * 3})
        assert r.status_code == 422 and "maximum is 2" in assert_error_shape(r)["detail"]
        for path, body in (
            ("/score", {**item, "timeout": 4}),
            ("/score/batch", {"items": [item], "timeout": 4}),
        ):
            r = client.post(path, json=body)
            assert r.status_code == 422 and "maximum 3 s" in assert_error_shape(r)["detail"]
        assert client.post("/score", json={**item, "timeout": 3}).status_code == 200


def test_scoring_holds_an_admission_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under load /score is a 429 with Retry-After, like /execute; it never queues unbounded."""
    import scorer.api

    monkeypatch.setattr(scorer.api, "score", slow_score)  # graded in a worker: module-level
    client, fake = make(fake={"max_running": 1, "max_queue": 0})
    item = {"response": "\\boxed{1}", "answer": 1}
    with client:
        first: list[httpx.Response] = []
        thread = threading.Thread(target=lambda: first.append(client.post("/score", json=item)))
        thread.start()
        deadline = time.monotonic() + 10
        while fake.admission.running == 0:
            assert time.monotonic() < deadline, "the first /score never took a slot"
            time.sleep(0.01)
        refused = client.post("/score", json=item)
        busy = client.post("/execute", json={"code": "1"})
        thread.join(10)
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert "overloaded" in assert_error_shape(refused)["detail"]
    assert first[0].status_code == 200 and fake.admission.running == 0
    assert busy.status_code == 429  # code runs and grading share the one bound


# ------------------------------------------------------------------------------- the schema


def test_every_route_is_typed_in_the_schema(app: tuple[TestClient, FakeExecutor]) -> None:
    client, _ = app
    spec = client.get("/openapi.json").json()
    assert spec["info"]["version"] == exec_server.__version__
    schemas = spec["components"]["schemas"]
    expected = {
        ("post", "/execute"): ("ExecuteRequest", "ExecuteResponse"),
        ("post", "/execute/batch"): ("ExecuteBatchRequest", "ExecuteBatchResponse"),
        ("post", "/run_code"): ("RunCodeRequest", "RunCodeResponse"),
        ("post", "/score"): ("ScoreRequest", "GradedRow"),
        ("post", "/score/batch"): ("ScoreBatchRequest", "ScoreBatchResponse"),
        ("post", "/calculate"): ("CalculateRequest", "CalculateResponse"),
        ("get", "/healthz"): (None, "Health"),
        ("get", "/readyz"): (None, "Readiness"),
    }
    for (method, path), (request, response) in expected.items():
        op = spec["paths"][path][method]
        if request:
            ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert ref == f"#/components/schemas/{request}"
        ok = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        assert ok == f"#/components/schemas/{response}" and response in schemas
        error = op["responses"]["422"]["content"]["application/json"]["schema"]["$ref"]
        assert error == "#/components/schemas/ErrorResponse"
    assert "text/plain" in spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert set(schemas["GradedRow"]["properties"]) >= {"reward", "status", "reasons", "error"}
    assert "bearer" in json.dumps(spec["components"]["securitySchemes"]).lower()


def test_one_version_source() -> None:
    """pyproject reads the version from the client's package (the server shares it); nothing
    else writes it."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "boxed_client.__version__"
    assert create_app(Settings()).version == exec_server.__version__ == boxed_client.__version__
    written = [
        str(path.relative_to(REPO))
        for package in ("boxed_client", "exec_server")
        for path in (REPO / package).rglob("*.py")
        if f'"{exec_server.__version__}"' in path.read_text()
    ]
    assert written == ["boxed_client/__init__.py"]


def test_readyz_reports_the_engine_state(app: tuple[TestClient, FakeExecutor]) -> None:
    client, fake = app
    assert client.get("/readyz").json()["ready"] is True
    fake.ready = False
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["ready"] is False and r.json()["docker"] is False
    assert client.get("/healthz").json() == {"status": "ok"}
    assert "boxed_requests_total" in client.get("/metrics").text


def test_error_metrics_are_labelled_by_route_not_by_any_path(
    app: tuple[TestClient, FakeExecutor],
) -> None:
    client, _ = app
    for n in range(3):
        assert client.get(f"/no/such/path/{n}").status_code == 404
    client.post("/execute", json={"code": "raise:Overloaded"})
    text = client.get("/metrics").text
    assert "/no/such/path" not in text
    assert 'boxed_requests_total{route="unmatched",status="404"}' in text
    assert 'boxed_requests_total{route="/execute",status="429"}' in text
