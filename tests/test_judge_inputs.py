"""No input makes ``/judge`` answer 500 (issue #28, class 8, its inputs): a ``fn_name`` that is
not a plain identifier is 422, and whatever a call-based submission returns (nested thousands
deep, huge, not JSON at all) is the code's verdict. The submission's return value is played by
the fake backend, which answers each run with the driver's marker and a chosen payload."""

from __future__ import annotations

import asyncio
import json
import keyword
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from exec_server.app import Executor, create_app
from exec_server.backends.base import Job
from exec_server.backends.fake import FakeBackend, observed
from exec_server.models import JudgeRequest
from exec_server.output_compare import values_agree
from exec_server.settings import Settings
from exec_server.verdict import Observation
from tests.fakes import FakeExecutor

MARKER = re.compile(r"\\x1eboxed-([0-9a-f]{24}):")  # as the driver's source spells it
DEEP = 20_000  # past the recursion limit, within the output cap as JSON


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(instance="judge-inputs"), FakeExecutor())) as c:
        yield c


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("a b", "not a Python identifier"),
        ("f(); import os", "not a Python identifier"),
        ("1f", "not a Python identifier"),
        ("", "not a Python identifier"),
        ("ｆ", "not a Python identifier"),  # fullwidth: NFKC-normalised to 'f' by Python
        ("class", "keyword"),
        ("__import__", "__dunder__"),
        ("__class__", "__dunder__"),
    ],
)
def test_a_bad_fn_name_is_422(client: TestClient, name: str, why: str) -> None:
    body = {"code": "def f(): pass", "fn_name": name, "tests": [{"args": [], "expected": 1}]}
    response = client.post("/judge", json=body)
    assert response.status_code == 422, response.text
    assert why in response.json()["detail"]


def test_a_bad_entry_point_is_422(client: TestClient) -> None:
    body = {"code": "x", "test_script": "def check(c): pass", "entry_point": "__builtins__"}
    assert client.post("/judge", json=body).status_code == 422


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.text(max_size=30))
def test_fn_name_is_accepted_exactly_when_it_is_a_plain_identifier(name: str) -> None:
    plain = (
        name.isidentifier()
        and name.isascii()
        and not keyword.iskeyword(name)
        and not (name.startswith("__") and name.endswith("__"))
    )
    try:
        JudgeRequest(code="x", fn_name=name, tests=[{"args": [], "expected": 1}])
    except ValidationError:
        assert not plain
    else:
        assert plain


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def test_values_agree_on_values_nested_past_the_recursion_limit() -> None:
    assert values_agree(_nested(DEEP, 1), _nested(DEEP, 1), None)
    assert not values_agree(_nested(DEEP, 1), _nested(DEEP, 2), None)
    assert not values_agree(_nested(DEEP, 1), _nested(DEEP - 1, 1), None)
    assert values_agree({"a": _nested(DEEP, 1.0)}, {"a": _nested(DEEP, 1.0 + 1e-9)}, 1e-6)


def _returning(payload: str) -> FakeBackend:
    """A backend whose every run prints the driver's marker and then ``payload``."""

    def behaviour(job: Job) -> Observation:
        found = MARKER.search(job.code)
        assert found is not None, "the driver carries no marker"
        marker = f"\x1eboxed-{found.group(1)}:"
        return observed(stdout=f"\n{marker}{payload}\n".encode())

    return FakeBackend(behaviour)


def _judge(payload: str, expected: Any = 1) -> Any:
    async def scenario() -> Any:
        settings = Settings(pool_size=1, isolation="container", instance="judge-inputs")
        executor = Executor(settings, backends={"container": _returning(payload)})
        await executor.start()
        try:
            req = JudgeRequest(
                code="def f(): pass", fn_name="f", tests=[{"args": [], "expected": expected}]
            )
            return await executor.judge(req, "r")
        finally:
            await executor.stop()

    return asyncio.run(scenario())


@pytest.mark.parametrize(
    "payload",
    [
        "[" * DEEP + "]" * DEEP,  # json.loads: RecursionError
        "[" * 5_000,  # cut off
        "9" * 10_000,  # past the int digits limit
        "NaN",
        "not json",
        json.dumps(_nested(500, {"k": [1, 2, {"z": None}]})),
    ],
    ids=["deep", "cut", "huge-int", "nan", "garbage", "nested-500"],
)
def test_any_return_value_is_the_codes_verdict(payload: str) -> None:
    answer = _judge(payload)
    assert answer.outcome == "code" and answer.failure is None
    assert answer.verdict == "wrong_answer", answer
    assert answer.tests[0].status == "wrong_answer"


def test_a_deep_value_equal_to_the_expected_is_accepted() -> None:
    value = _nested(900, 7)
    assert _judge(json.dumps(value), expected=value).verdict == "accepted"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=20,
)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.one_of(_JSON.map(json.dumps), st.text(max_size=50)), _JSON)
def test_fuzzed_return_values_never_fail_the_service(payload: str, expected: Any) -> None:
    answer = _judge(payload, expected)
    assert answer.verdict in ("accepted", "wrong_answer")
    assert answer.outcome == "code"
