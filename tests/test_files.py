"""SandboxFusion's ``files`` (written into the working directory first) and ``fetch_files``
(returned base64 after the run) on /execute, /run_code and /judge, with their caps, against a
real service and Docker engine."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import running_service
from tests.runtimes import engine_for

pytestmark = pytest.mark.docker


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture(scope="module", params=["runc", "runsc"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A service on each runtime (gVisor: a private engine, tests/runtimes.py)."""
    engine = engine_for(request, request.param)
    with running_service(engine, BOXED_POOL_SIZE="1", BOXED_QUEUE_TIMEOUT="60") as service:
        yield service.url


def post(url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=120)


def test_execute_reads_input_files_and_returns_output_files(url: str) -> None:
    code = (
        "data = open('in/numbers.txt').read().split()\n"
        "open('sum.txt', 'w').write(str(sum(map(int, data))))\n"
        "open('raw.bin', 'wb').write(bytes(range(256)))"
    )
    body = {
        "code": code,
        "files": {"in/numbers.txt": b64(b"1 2 3\n4")},
        "fetch_files": ["sum.txt", "raw.bin", "missing.txt"],
    }
    data = post(url, "/execute", body).json()
    assert data["status"] == "ok", data
    assert base64.b64decode(data["files"]["sum.txt"]) == b"10"
    assert base64.b64decode(data["files"]["raw.bin"]) == bytes(range(256))
    assert "missing.txt" not in data["files"]


def test_run_code_files_and_a_header_for_the_compiler(url: str) -> None:
    body = {
        "code": '#include "answer.h"\n#include <stdio.h>\n'
        'int main(){ FILE *f = fopen("out.txt", "w"); fprintf(f, "%d", ANSWER); return 0; }',
        "language": "c",
        "files": {"answer.h": b64(b"#define ANSWER 42\n")},
        "fetch_files": ["out.txt"],
    }
    data = post(url, "/run_code", body).json()
    assert data["status"] == "Success", data
    assert base64.b64decode(data["files"]["out.txt"]) == b"42"


def test_judge_files_per_test(url: str) -> None:
    body = {
        "code": "w = open('words.txt').read().split()\nprint(w[int(input())])\n"
        "open('seen.txt', 'w').write(input() if False else 'x')",
        "files": {"words.txt": b64(b"zero one two")},
        "fetch_files": ["seen.txt"],
        "tests": [
            {"input": "1", "expected_output": "one"},
            {"input": "2", "expected_output": "two"},
        ],
    }
    data = post(url, "/judge", body).json()
    assert data["verdict"] == "accepted", data
    assert [base64.b64decode(t["files"]["seen.txt"]) for t in data["tests"]] == [b"x", b"x"]


def test_a_link_or_a_folder_is_not_fetched(url: str) -> None:
    code = "import os\nos.symlink('/etc/passwd', 'link')\nos.mkdir('dir')"
    data = post(url, "/execute", {"code": code, "fetch_files": ["link", "dir"]}).json()
    assert data["status"] == "ok" and data["files"] == {}


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"files": {"../x": b64(b"1")}}, 422, "not a plain relative path"),
        ({"files": {"/etc/x": b64(b"1")}}, 422, "not a plain relative path"),
        ({"files": {".hidden": b64(b"1")}}, 422, "not a plain relative path"),
        ({"files": {"a.txt": "not base64!"}}, 422, "not valid base64"),
        ({"files": {f"f{i}": "" for i in range(40)}}, 413, "40 files"),
        ({"files": {"big": b64(b"x" * (5 * 1024 * 1024))}}, 413, "bytes"),
        ({"fetch_files": ["a/../b"]}, 422, "not a plain relative path"),
    ],
)
def test_caps_and_names(url: str, body: dict, status: int, says: str) -> None:
    r = post(url, "/execute", {"code": "print(1)", **body})
    assert r.status_code == status, r.text
    assert says in r.json()["detail"]
