"""The HTTP edge (issue #28, class 7), on a real uvicorn configured as ``python -m exec_server``
configures it (:func:`exec_server.http_edge.server_config`), over the fake executor: header
caps answered 431 without reading the header whole, idle and half-open connections that cannot
starve the probes, and the Host allow-list of a service bound to loopback."""

from __future__ import annotations

import resource
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn

from exec_server.app import create_app
from exec_server.http_edge import server_config
from exec_server.settings import Settings
from tests.fakes import FakeExecutor
from tests.service import free_port


@contextmanager
def edge_serving(**settings: Any) -> Iterator[tuple[str, int]]:
    """The app served as the service serves it, in a thread; yields (url, port)."""
    port = free_port()
    config = Settings(instance="edge", port=port, **settings)
    server = uvicorn.Server(
        server_config(create_app(config, executor=FakeExecutor()), config, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}", port
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def edge() -> Iterator[tuple[str, int]]:
    with edge_serving(
        max_header_bytes=16 * 1024,
        max_headers=20,
        header_timeout=1.0,
        max_connections=200,
        allowed_hosts="boxed.internal",
    ) as served:
        yield served


def _raw(port: int, head: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head)
        return _read_all(sock)


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except (ConnectionResetError, TimeoutError):
        pass
    return b"".join(chunks)


def test_huge_header_is_431_before_it_is_read(edge: tuple[str, int]) -> None:
    _, port = edge
    sent = 0
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ")
        chunk = b"a" * 65536
        try:
            while sent < 64 * 1024 * 1024:  # a 64 MB header
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert b"exceed 16384 bytes" in answer
    assert sent < 8 * 1024 * 1024, f"{sent} bytes were accepted before the refusal"
    assert time.monotonic() - started < 5


def test_too_many_headers_is_431(edge: tuple[str, int]) -> None:
    _, port = edge
    headers = b"".join(b"X-H%d: 1\r\n" % i for i in range(30))
    answer = _raw(port, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + headers + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 431") and b"more than 20 headers" in answer


def test_headers_within_the_caps_pass(edge: tuple[str, int]) -> None:
    url, _ = edge
    headers = {f"x-h{i}": "v" * 500 for i in range(15)}
    assert httpx.get(f"{url}/healthz", headers=headers).status_code == 200


def test_slow_head_is_closed(edge: tuple[str, int]) -> None:
    _, port = edge
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # and never the rest
        started = time.monotonic()
        assert _read_all(sock) == b""  # closed without an answer
        assert time.monotonic() - started < 3


@pytest.mark.parametrize("host", ["localhost", "localhost:80", "127.0.0.1:5002", "[::1]:1"])
def test_loopback_names_are_allowed(edge: tuple[str, int], host: str) -> None:
    url, _ = edge
    assert httpx.get(f"{url}/healthz", headers={"Host": host}).status_code == 200


def test_configured_name_is_allowed(edge: tuple[str, int]) -> None:
    url, _ = edge
    assert httpx.get(f"{url}/healthz", headers={"Host": "boxed.internal:5002"}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:5002", "127.0.0.2", "[::2]"])
def test_foreign_host_is_421(edge: tuple[str, int], host: str) -> None:
    url, _ = edge
    response = httpx.post(f"{url}/execute", headers={"Host": host}, json={"code": "1"})
    assert response.status_code == 421
    assert response.json()["detail"].startswith("unknown Host: this service answers only to")


def test_not_bound_to_loopback_any_host_is_answered() -> None:
    from exec_server.http_edge import allowed_hosts

    assert allowed_hosts(Settings(host="0.0.0.0")) is None
    assert allowed_hosts(Settings(host="0.0.0.0", allowed_hosts="a.b")) == {"a.b"}
    assert allowed_hosts(Settings(host="::1")) == {"localhost", "127.0.0.1", "::1"}


def test_probes_answer_under_a_flood_of_idle_connections() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    flood = 2000
    if soft < 2 * flood + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2 * flood + 256), hard))
    # a long head deadline: only the connection cap keeps the probes answering here
    with edge_serving(header_timeout=300.0, max_connections=500) as (url, port):
        sockets = []
        try:
            for _ in range(flood):
                sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            for _ in range(5):
                started = time.monotonic()
                response = httpx.get(f"{url}/healthz", timeout=5)
                assert response.status_code == 200
                assert time.monotonic() - started < 1.0
            closed = sum(_closed_by_server(sock) for sock in sockets)
            assert closed >= flood - 500, f"only {closed} idle connections were closed"
        finally:
            for sock in sockets:
                sock.close()


def _closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(0.001)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_settings_have_server_maxima() -> None:
    with pytest.raises(ValueError):
        Settings(max_header_bytes=2 * 1024 * 1024)
    with pytest.raises(ValueError):
        Settings(max_connections=10**6)
    with pytest.raises(ValueError):
        Settings(header_timeout=1000)
