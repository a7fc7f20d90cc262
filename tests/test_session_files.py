"""A session's file API on real sandboxes, under runc and gVisor: files round-trip and are the
code's own (its uid, sane modes), paths stay in the working directory whatever links the code
made, the caps answer 413, a running call makes it 409, and another tenant sees nothing."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Iterator

import httpx
import pytest
from pydantic import ValidationError

from boxed_client import AsyncClient, BoxedHTTPError, Client
from exec_server.backends.base import SandboxError
from exec_server.guest.protocol import FileReport, FileRequest
from exec_server.request_errors import RequestError
from exec_server.session_files import check_path
from exec_server.settings import SESSION_FILE_MAX_BYTES, SESSION_LIST_MAX_ENTRIES, Settings
from tests.conftest import running_service
from tests.runtimes import PODS, engine_for
from tests.test_sessions import service, sessions_alive

FILE_CAP = 2 * 1024 * 1024  # BOXED_SESSION_FILE_MAX_BYTES of the service under test
LIST_CAP = 5  # BOXED_SESSION_LIST_MAX_ENTRIES
TMPFS_MB = 8  # BOXED_TMPFS_MB: a session's /tmp, filled by a few files


@pytest.fixture(scope="module", params=["runc", "runsc", "pods"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A service per runtime, and one over the pod backend's stand-in (its session program
    speaks over a socket the pod's listener hands it)."""
    pods = request.param == "pods"
    engine = engine_for(request, "runc" if pods else request.param)
    with running_service(
        engine,
        **(PODS.env if pods else {}),
        BOXED_POOL_SIZE="1",
        BOXED_STRICT_POOL_SIZE="0",
        BOXED_SESSION_FILE_MAX_BYTES=str(FILE_CAP),
        BOXED_SESSION_LIST_MAX_ENTRIES=str(LIST_CAP),
        BOXED_TMPFS_MB=str(TMPFS_MB),
        BOXED_QUEUE_TIMEOUT="60",
    ) as service:
        yield service.url


@pytest.fixture
def http(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=60) as client:
        yield client


@pytest.fixture
def sid(http: httpx.Client) -> Iterator[str]:
    created = http.post("/sessions", json={})
    assert created.status_code == 201, created.text
    session_id = created.json()["session_id"]
    yield session_id
    http.delete(f"/sessions/{session_id}")


def run(http: httpx.Client, sid: str, code: str) -> str:
    answer = http.post(f"/sessions/{sid}/execute", json={"code": code})
    assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    return answer.json()["stdout"]


def raw(http: httpx.Client, method: str, path: str, content: bytes = b"") -> httpx.Response:
    """A request whose path is sent as written: no client folds its ``..`` segments away."""
    request = http.build_request(method, "/", content=content or None)
    request.url = request.url.copy_with(raw_path=path.encode())
    return http.send(request)


@pytest.mark.docker
def test_a_file_round_trips_its_parents_made_owned_by_the_code(
    http: httpx.Client, sid: str
) -> None:
    data = os.urandom(1024 * 1024)
    put = http.put(f"/sessions/{sid}/files/deep/er/data.bin", content=data)
    assert put.status_code == 201, put.text
    got = http.get(f"/sessions/{sid}/files/deep/er/data.bin")
    assert got.status_code == 200 and got.content == data
    assert got.headers["content-type"] == "application/octet-stream"
    seen = run(
        http,
        sid,
        "import os, hashlib\n"
        "st, d = os.stat('deep/er/data.bin'), os.stat('deep/er')\n"
        "print(st.st_uid == os.getuid(), oct(st.st_mode & 0o777), oct(d.st_mode & 0o777),"
        " d.st_uid == os.getuid(),\n"
        "      hashlib.sha256(open('deep/er/data.bin','rb').read()).hexdigest())\n"
        "open('deep/er/data.bin', 'ab').write(b'more')\n"
        "open('made-by-code.txt', 'w').write('hello')",
    )
    assert seen.split() == ["True", "0o644", "0o755", "True", hashlib.sha256(data).hexdigest()]
    assert http.get(f"/sessions/{sid}/files/deep/er/data.bin").content == data + b"more"
    assert http.get(f"/sessions/{sid}/files/made-by-code.txt").content == b"hello"
    again = http.put(f"/sessions/{sid}/files/made-by-code.txt", content=b"replaced")
    assert again.status_code == 204
    assert run(http, sid, "print(open('made-by-code.txt').read())") == "replaced\n"
    empty = http.put(f"/sessions/{sid}/files/empty", content=b"")
    assert empty.status_code == 201 and http.get(f"/sessions/{sid}/files/empty").content == b""


@pytest.mark.docker
def test_missing_files_and_directories_are_404_and_a_directory_is_no_file(
    http: httpx.Client, sid: str
) -> None:
    missing = http.get(f"/sessions/{sid}/files/nope.txt")
    assert missing.status_code == 404 and "nope.txt" in missing.json()["detail"]
    assert missing.json()["outcome"] is None  # the caller's mistake: no result
    assert http.get(f"/sessions/{sid}/files", params={"dir": "nowhere"}).status_code == 404
    assert http.delete(f"/sessions/{sid}/files/nope.txt").status_code == 404
    run(http, sid, "import os\nos.makedirs('a/b')\nopen('a/f', 'w').write('x')")
    directory = http.get(f"/sessions/{sid}/files/a")
    assert directory.status_code == 422 and "not a regular file" in directory.json()["detail"]
    onto_dir = http.put(f"/sessions/{sid}/files/a/b", content=b"x")
    assert onto_dir.status_code == 422 and "a directory" in onto_dir.json()["detail"]
    under_file = http.put(f"/sessions/{sid}/files/a/f/g", content=b"x")
    assert under_file.status_code == 422 and "not a directory" in under_file.json()["detail"]
    assert http.get(f"/sessions/{sid}/files", params={"dir": "a/f"}).status_code == 422
    assert http.delete(f"/sessions/{sid}/files/a").status_code == 422  # not empty
    assert http.delete(f"/sessions/{sid}/files/a/f").status_code == 204
    assert http.delete(f"/sessions/{sid}/files/a/b").status_code == 204
    assert run(http, sid, "import os\nprint(os.listdir('a'))") == "[]\n"
    assert http.get(f"/sessions/{sid}/files/nope/missing").status_code == 404


@pytest.mark.docker
def test_listing_names_kinds_and_sizes_without_following_links(
    http: httpx.Client, sid: str
) -> None:
    run(
        http,
        sid,
        "import os\nos.mkdir('sub')\nopen('sub/f', 'wb').write(b'12345')\n"
        "os.symlink('/etc/passwd', 'sub/link')\nos.mkfifo('sub/pipe')\nos.mkdir('sub/dir')",
    )
    listing = http.get(f"/sessions/{sid}/files", params={"dir": "sub"})
    assert listing.status_code == 200, listing.text
    assert listing.json() == {
        "dir": "sub",
        "entries": [
            {"name": "dir", "kind": "dir", "size": 0},
            {"name": "f", "kind": "file", "size": 5},
            {"name": "link", "kind": "link", "size": 0},
            {"name": "pipe", "kind": "other", "size": 0},
        ],
        "truncated": False,
    }
    top = http.get(f"/sessions/{sid}/files").json()
    assert [e["name"] for e in top["entries"]] == ["sub"] and top["dir"] == ""
    assert http.get(f"/sessions/{sid}/files/sub/pipe").status_code == 422  # a FIFO: no wait


@pytest.mark.docker
def test_paths_stay_in_the_working_directory(http: httpx.Client, sid: str) -> None:
    run(
        http,
        sid,
        "import os\nos.symlink('/etc/passwd', 'passwd')\nos.symlink('/proc/1/environ', 'env')\n"
        "os.symlink('/etc', 'etc')\nos.symlink('/proc/1', 'proc1')\nos.symlink('.', 'here')",
    )
    for path in ("passwd", "env", "etc/passwd", "proc1/environ", "here/passwd"):
        refused = http.get(f"/sessions/{sid}/files/{path}")
        assert refused.status_code == 403, (path, refused.text)
        assert "symbolic link" in refused.json()["detail"]
        assert b"root:" not in refused.content
    for path in ("etc/boxed-new", "proc1/x"):  # a write through a linked parent
        assert http.put(f"/sessions/{sid}/files/{path}", content=b"x").status_code == 403
    assert http.get(f"/sessions/{sid}/files", params={"dir": "etc"}).status_code == 403
    # a PUT over a link replaces the link itself; its target is untouched
    assert http.put(f"/sessions/{sid}/files/passwd", content=b"mine").status_code == 204
    assert run(http, sid, "import os\nprint(os.path.islink('passwd'), open('passwd').read())") == (
        "False mine\n"
    )
    assert http.delete(f"/sessions/{sid}/files/env").status_code == 204  # the link only
    for path in ("%2E%2E/%2E%2E/etc/passwd", "..%2Fx", "a/%2E/b", "/etc/passwd", "a//b"):
        refused = raw(http, "GET", f"/sessions/{sid}/files/{path}")
        assert refused.status_code == 422, (path, refused.text)
    outside = raw(http, "PUT", f"/sessions/{sid}/files/%2E%2E/escaped", b"x")
    assert outside.status_code == 422
    assert run(http, sid, "import os\nprint(os.path.exists('/tmp/escaped'))") == "False\n"
    dot = http.get(f"/sessions/{sid}/files", params={"dir": ".."})
    assert dot.status_code == 422


@pytest.mark.docker
def test_caps_answer_413_with_the_setting_named(http: httpx.Client, sid: str) -> None:
    over = http.put(f"/sessions/{sid}/files/big", content=b"x" * (FILE_CAP + 1))
    assert over.status_code == 413
    assert "BOXED_SESSION_FILE_MAX_BYTES" in over.json()["detail"]
    streamed = http.put(f"/sessions/{sid}/files/big", content=iter([b"x" * FILE_CAP, b"y"]))
    assert streamed.status_code == 413  # no Content-Length: counted as it arrives
    assert http.get(f"/sessions/{sid}/files/big").status_code == 404  # nothing was written
    at_cap = http.put(f"/sessions/{sid}/files/big", content=b"x" * FILE_CAP)
    assert at_cap.status_code == 201  # above BOXED_MAX_BODY_BYTES' share is fine: its own cap
    run(http, sid, f"open('bigger', 'wb').write(b'x' * {FILE_CAP + 1})")
    too_big = http.get(f"/sessions/{sid}/files/bigger")
    assert too_big.status_code == 413 and "BOXED_SESSION_FILE_MAX_BYTES" in too_big.text
    run(http, sid, "import os\nos.mkdir('many')\nfor i in range(7): open(f'many/{i}', 'w')")
    listing = http.get(f"/sessions/{sid}/files", params={"dir": "many"}).json()
    assert listing["truncated"] is True and len(listing["entries"]) == LIST_CAP


@pytest.mark.docker
def test_a_full_tmp_is_507_and_a_failed_put_leaves_the_old_file(
    http: httpx.Client, sid: str
) -> None:
    kept = os.urandom(FILE_CAP)
    assert http.put(f"/sessions/{sid}/files/kept", content=kept).status_code == 201
    statuses = []
    for i in range(TMPFS_MB * 1024 * 1024 // FILE_CAP + 1):
        statuses.append(http.put(f"/sessions/{sid}/files/fill{i}", content=b"x" * FILE_CAP))
        if statuses[-1].status_code != 201:
            break
    full = statuses[-1]
    assert full.status_code == 507 and "is full" in full.json()["detail"], full.text
    assert len(statuses) > 1  # the first files fitted
    # a replacement is written beside the old file, then renamed over it: none fits, none lost
    assert http.put(f"/sessions/{sid}/files/kept", content=b"y" * FILE_CAP).status_code == 507
    assert http.get(f"/sessions/{sid}/files/kept").content == kept
    names = [e["name"] for e in http.get(f"/sessions/{sid}/files").json()["entries"]]
    assert not [n for n in names if n.startswith(".boxed-put-")]  # no half-written file left
    assert "kept" in names and f"fill{len(statuses) - 1}" not in names


@pytest.mark.docker
def test_a_running_call_makes_it_409_and_gone_sessions_404_or_410(
    url: str, http: httpx.Client, sid: str
) -> None:
    def slow_call() -> None:
        # a file request holds the session as a call does: the call itself may meet a 409
        with httpx.Client(base_url=url, timeout=60) as other:
            code = {"code": "import time; time.sleep(2)"}
            while other.post(f"/sessions/{sid}/execute", json=code).status_code == 409:
                pass

    caller = threading.Thread(target=slow_call)
    caller.start()
    busy = None
    while caller.is_alive():  # until the call holds the session
        busy = http.get(f"/sessions/{sid}/files")
        if busy.status_code == 409:
            break
    caller.join()
    assert busy is not None and busy.status_code == 409, busy.text
    assert http.get(f"/sessions/{sid}/files").status_code == 200  # free again
    other_tenant = http.get(f"/sessions/{sid}/files", headers={"X-Boxed-Tenant": "someone"})
    assert other_tenant.status_code == 404
    assert (
        http.put(
            f"/sessions/{sid}/files/x", content=b"1", headers={"X-Boxed-Tenant": "someone"}
        ).status_code
        == 404
    )
    lost = http.post(f"/sessions/{sid}/execute", json={"code": "import sys; sys.exit(3)"})
    assert lost.json()["session_lost"]
    assert http.get(f"/sessions/{sid}/files/x").status_code == 410
    assert http.get("/sessions/00ff/files").status_code == 404


@pytest.mark.docker
def test_the_clients_session_files(url: str) -> None:
    with Client(url) as client, client.session() as session:
        session.files.write("in/data.txt", "a text, as UTF-8: é")
        assert (
            session.execute("print(open('in/data.txt').read())").stdout == "a text, as UTF-8: é\n"
        )
        session.execute("open('in/out.bin', 'wb').write(bytes(range(256)))")
        assert session.files.read("in/out.bin") == bytes(range(256))
        listing = session.files.list("in")
        assert [(e.name, e.kind, e.size) for e in listing.entries] == [
            ("data.txt", "file", len("a text, as UTF-8: é".encode())),
            ("out.bin", "file", 256),
        ]
        session.files.delete("in/data.txt")
        for path, status in (("in/data.txt", 404), ("../etc/passwd", 422), ("in/./x", 422)):
            with pytest.raises(BoxedHTTPError) as refused:
                session.files.read(path)
            assert refused.value.status_code == status, path

    async def in_async() -> None:
        async with AsyncClient(url) as client, client.session() as session:
            await session.files.write("a b/ü?#%.txt", b"\x00\xff")
            assert await session.files.read("a b/ü?#%.txt") == b"\x00\xff"
            assert [e.name for e in (await session.files.list("a b")).entries] == ["ü?#%.txt"]
            await session.files.delete("a b/ü?#%.txt")
            assert (await session.files.list("a b")).entries == []

    asyncio.run(in_async())


@pytest.mark.parametrize(
    "path", ["", "/abs", "a/../b", "..", ".", "a//b", "a/", "x\0y", "a" * 256, "\udc80"]
)
def test_check_path_refuses_what_is_not_plain_components(path: str) -> None:
    with pytest.raises(RequestError) as refused:
        check_path(path)
    assert refused.value.status_code == 422


def test_check_path_takes_plain_relative_paths() -> None:
    for path in ("a", ".hidden/x", "dir/sub/file.txt", "é/名前", "a..b", "..."):
        assert check_path(path) == path
    assert check_path("", directory=True) == ""


def test_the_caps_have_defaults_and_server_maxima() -> None:
    settings = Settings()
    assert settings.session_file_max_bytes == 16 * 1024 * 1024
    assert settings.session_list_max_entries == 1000
    assert Settings(session_file_max_bytes=SESSION_FILE_MAX_BYTES).session_file_max_bytes
    for field, over in (
        ("session_file_max_bytes", SESSION_FILE_MAX_BYTES + 1),
        ("session_list_max_entries", SESSION_LIST_MAX_ENTRIES + 1),
        ("session_file_max_bytes", 0),
    ):
        with pytest.raises(ValidationError, match=field):
            Settings(**{field: over})


def test_a_sandbox_failing_in_a_file_request_loses_the_session_as_infrastructure() -> None:
    with service() as (client, fake, _):
        sid = client.post("/sessions").json()["session_id"]
        assert client.put(f"/sessions/{sid}/files/a", content=b"1").status_code == 201
        (sandbox_id,) = sessions_alive(fake)

        async def broken(request: FileRequest, data: bytes = b"") -> tuple[FileReport, bytes]:
            raise SandboxError("the session program's stream ended")

        fake.sandboxes[sandbox_id].file_request = broken  # type: ignore[union-attr]
        for answer in (client.get(f"/sessions/{sid}/files/a"), client.get(f"/sessions/{sid}")):
            assert answer.status_code == 410, answer.text
            assert answer.json()["outcome"] == "infrastructure"
            assert answer.json()["failure"] == {"code": "session_lost", "retryable": False}
        assert sandbox_id in fake.removed


def test_a_files_body_has_its_own_cap_not_the_body_limit() -> None:
    with service(max_body_bytes=1024, session_file_max_bytes=4096) as (client, fake, _):
        sid = client.post("/sessions").json()["session_id"]
        big = b"x" * 3000  # over BOXED_MAX_BODY_BYTES, within BOXED_SESSION_FILE_MAX_BYTES
        assert client.put(f"/sessions/{sid}/files/a", content=big).status_code == 201
        assert client.get(f"/sessions/{sid}/files/a").content == big
        over = client.put(f"/sessions/{sid}/files/a", content=b"x" * 4097)
        assert over.status_code == 413 and over.headers["connection"] == "close"
        assert "BOXED_SESSION_FILE_MAX_BYTES" in over.json()["detail"]
        assert client.post("/execute", json={"code": "x" * 2000}).status_code == 413
        assert client.put("/sessions/x/other", content=big).status_code == 413  # not a file's
        (sandbox_id,) = sessions_alive(fake)
        assert [r.op for r in fake.sandboxes[sandbox_id].file_requests] == ["put", "get"]
