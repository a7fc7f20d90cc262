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


REQUEST_FETCH_TOTAL = 1024 * 1024  # a request's fetched bytes in all, on the service under test
ISOLATIONS = ("container", "process")  # per request: a process-mode server keeps both pools


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture(scope="module", params=["runc", "runsc"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A service on each runtime (gVisor: a private engine, tests/runtimes.py)."""
    engine = engine_for(request, request.param)
    with running_service(
        engine,
        BOXED_POOL_SIZE="1",
        BOXED_QUEUE_TIMEOUT="60",
        BOXED_MAX_REQUEST_FETCH_BYTES=str(REQUEST_FETCH_TOTAL),
    ) as service:
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


# What a snippet leaves in its working directory for the fetch to meet, and the status each
# name must get: nothing outside the run directory is ever read, nothing blocks or streams.
HOSTILE_RUN = """
import os
os.symlink('/proc/self', 'self')          # the reader's own /proc: the supervisor's
os.symlink('/proc/1', 'one')              # the sandbox's first process
os.symlink('/etc/passwd', 'passwd')
os.symlink('/etc', 'etc')
os.symlink('b', 'a'); os.symlink('c', 'b'); os.symlink('/', 'c')   # a chain out of the dir
os.symlink('/dev/zero', 'zero')
os.symlink('/dev', 'dev')
os.mkfifo('fifo')
os.mkdir('dir')
open('big', 'wb').write(b'x' * (5 * 1024 * 1024))
open('mine', 'w').write('kept')
open('closed', 'w').write('secret'); os.chmod('closed', 0)
open('dir/inner.txt', 'w').write('inner')
"""
HOSTILE_STATUS = {
    "self/maps": "refused: a link",
    "self/environ": "refused: a link",
    "one/maps": "refused: a link",
    "one/environ": "refused: a link",
    "passwd": "refused: a link",
    "etc/shadow": "refused: a link",
    "etc/passwd": "refused: a link",
    "a/etc/passwd": "refused: a link",
    "zero": "refused: a link",
    "dev/zero": "refused: a link",
    "fifo": "refused: not a regular file",
    "dir": "refused: not a regular file",
    "big": "refused: over the fetch cap",
    "closed": "refused: unreadable",
    "nothing": "missing",
    "mine": "ok",
    "dir/inner.txt": "ok",
}


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_fetches_stay_in_the_run_directory(url: str, isolation: str) -> None:
    """Links into /proc (the supervisor's memory map), /etc and /dev, a chain out of the
    directory, a FIFO, a device, a file over the cap, one the snippet cannot read: each is
    refused with its reason, without waiting or streaming; the snippet's own files come back."""
    body = {"code": HOSTILE_RUN, "fetch_files": list(HOSTILE_STATUS), "isolation": isolation}
    response = post(url, "/execute", body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["status"] == "ok", data
    files = {name: base64.b64decode(text) for name, text in data["files"].items()}
    assert files == {"mine": b"kept", "dir/inner.txt": b"inner"}
    assert data["fetch_status"] == HOSTILE_STATUS
    assert data["duration_ms"] < 10_000


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_cap_is_shared_by_the_names_in_order(url: str, isolation: str) -> None:
    """BOXED_MAX_FETCH_BYTES (4 MiB) for a run's files in all: the third 1.5 MiB file does not
    fit what the first two left and is refused whole; a small one after it still fits."""
    code = "for n in 'abc': open(n, 'wb').write(b'z' * (3 << 19))\nopen('d', 'wb').write(b'd')"
    body = {"code": code, "fetch_files": ["a", "b", "c", "d"], "isolation": isolation}
    data = post(url, "/execute", body).json()
    assert data["fetch_status"] == {
        "a": "ok",
        "b": "ok",
        "c": "refused: over the fetch cap",
        "d": "ok",
    }
    assert sorted(data["files"]) == ["a", "b", "d"]


def test_the_names_are_counted_before_anything_runs(url: str) -> None:
    code = "for i in range(32): open(f'f{i}', 'w').write(str(i))"
    names = [f"f{i}" for i in range(32)]
    data = post(url, "/execute", {"code": code, "fetch_files": names}).json()
    assert data["fetch_status"] == dict.fromkeys(names, "ok")
    assert [base64.b64decode(data["files"][n]) for n in names] == [
        str(i).encode() for i in range(32)
    ]
    r = post(url, "/execute", {"code": code, "fetch_files": [*names, "f32"]})
    assert r.status_code == 422 and "33 fetch_files" in r.json()["detail"]


@pytest.mark.parametrize(("isolation", "tests"), [("process", 512), ("container", 4)])
def test_a_judges_fetches_share_one_total(url: str, isolation: str, tests: int) -> None:
    """Each test may fetch BOXED_MAX_REQUEST_FETCH_BYTES / tests: the odd tests write a file just
    over that share and get it refused, the even ones just under and get it; the answer's files
    stay within the total whatever the number of tests."""
    share = REQUEST_FETCH_TOTAL // tests
    code = (
        "i = int(input())\n"
        f"open('out.bin', 'wb').write(b'o' * ({share} + 1 if i % 2 else {share} - 1))\n"
        "print(i)"
    )
    body = {
        "code": code,
        "fetch_files": ["out.bin"],
        "isolation": isolation,
        "timeout": 1,  # 512 tests' limits within BOXED_JUDGE_MAX_WORK_SECONDS
        "tests": [{"input": str(i), "expected_output": str(i)} for i in range(tests)],
    }
    response = httpx.post(f"{url}/judge", json=body, timeout=600)
    assert response.status_code == 200, response.text[:500]
    data = response.json()
    assert data["verdict"] == "accepted", data["tests"][:2]
    for test in data["tests"]:
        if test["index"] % 2:
            assert test["fetch_status"] == {"out.bin": "refused: over the fetch cap"}, test
            assert test["files"] == {}
        else:
            assert test["fetch_status"] == {"out.bin": "ok"}, test
            assert len(base64.b64decode(test["files"]["out.bin"])) == share - 1
    fetched = sum(len(base64.b64decode(t["files"].get("out.bin", ""))) for t in data["tests"])
    assert fetched == (tests // 2) * (share - 1) <= REQUEST_FETCH_TOTAL


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


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_batchs_items_share_one_total(url: str, isolation: str) -> None:
    """An /execute/batch's items share BOXED_MAX_REQUEST_FETCH_BYTES as a judge's tests do;
    an item cached by a lone /execute (its larger cap) is not answered to a batch item."""
    share = REQUEST_FETCH_TOTAL // 8
    sizes = [share - 1, share + 1] * 4

    def item(size: int) -> dict:
        code = f"open('out.bin', 'wb').write(b'o' * {size})"
        return {"code": code, "fetch_files": ["out.bin"], "isolation": isolation, "cache": True}

    alone = post(url, "/execute", item(share + 1)).json()
    assert alone["fetch_status"] == {"out.bin": "ok"}  # within BOXED_MAX_FETCH_BYTES alone
    response = post(url, "/execute/batch", {"items": [item(size) for size in sizes]})
    assert response.status_code == 200, response.text[:500]
    results = response.json()["results"]
    for size, result in zip(sizes, results, strict=True):
        if size > share:
            assert result["fetch_status"] == {"out.bin": "refused: over the fetch cap"}, result
            assert result["files"] == {}
        else:
            assert result["fetch_status"] == {"out.bin": "ok"}, result
            assert len(base64.b64decode(result["files"]["out.bin"])) == size
