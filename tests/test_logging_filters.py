"""The quiet healthcheck: successful probes leave the access log, everything else stays, with
real log records and a real uvicorn server."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from exec_server import __main__ as cli
from exec_server.logging_filters import QuietProbes, uvicorn_log_config
from tests.service import REPO, free_port


def access_record(path: str, status: int, method: str = "GET") -> logging.LogRecord:
    """A record as uvicorn's HTTP protocols log one request."""
    logger = logging.getLogger("uvicorn.access")
    args = ("127.0.0.1:50000", method, path, "1.1", status)
    return logger.makeRecord(
        logger.name, logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None
    )


@pytest.mark.parametrize(
    ("path", "status", "kept"),
    [
        ("/readyz", 200, False),
        ("/healthz", 200, False),
        ("/readyz?verbose=1", 200, False),
        ("/readyz", 503, True),  # a failing probe is news
        ("/healthz", 500, True),
        ("/execute", 200, True),
        ("/readyzz", 200, True),
        ("/v1/readyz", 200, True),
    ],
)
def test_filter_drops_only_successful_probes(path: str, status: int, kept: bool) -> None:
    record = access_record(path, status)
    assert record.getMessage() == f'127.0.0.1:50000 - "GET {path} HTTP/1.1" {status}'
    assert QuietProbes().filter(record) is kept


@pytest.mark.parametrize(
    ("path", "status", "kept"),
    [
        ("/execute", 200, False),
        ("/score", 204, False),
        ("/readyz", 200, False),
        ("/execute", 400, True),  # what the caller got wrong
        ("/execute", 422, True),
        ("/execute", 429, True),  # overloaded
        ("/execute", 500, True),  # what the service got wrong
        ("/readyz", 503, True),
    ],
)
def test_errors_only_keeps_answers_of_400_and_above(path: str, status: int, kept: bool) -> None:
    assert QuietProbes(errors_only=True).filter(access_record(path, status, "POST")) is kept


def test_filter_passes_other_records() -> None:
    logger = logging.getLogger("uvicorn.access")
    plain = logger.makeRecord(logger.name, logging.INFO, __file__, 1, "hello", None, None)
    odd = logger.makeRecord(logger.name, logging.INFO, __file__, 1, "%s %s", ("a", "b"), None)
    for quiet in (QuietProbes(), QuietProbes(errors_only=True)):
        assert quiet.filter(plain) and quiet.filter(odd)


SERVER = """
import sys, uvicorn
from exec_server.logging_filters import uvicorn_log_config

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    status = 503 if scope["query_string"] == b"fail" else 200
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})

access = sys.argv[2]
uvicorn.run(
    app,
    host="127.0.0.1",
    port=int(sys.argv[1]),
    log_config=uvicorn_log_config(access),
    access_log=access != "off",
)
"""


@pytest.mark.parametrize(
    ("access", "logged"),
    [
        ("all", ["GET /execute HTTP/1.1", "GET /readyz?fail HTTP/1.1", "GET /score HTTP/1.1"]),
        ("errors", ["GET /readyz?fail HTTP/1.1"]),
        ("off", []),
    ],
)
def test_uvicorn_with_the_config_logs_no_successful_probe(access: str, logged: list[str]) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), access],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/execute", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        for path in ("/readyz", "/healthz", "/readyz", "/readyz?fail", "/score"):
            httpx.get(url + path, timeout=5)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    lines = [line for line in out.splitlines() if "HTTP/1.1" in line]
    assert [line.split('"')[1] for line in lines] == logged
    assert all(line.endswith(" 503 Service Unavailable") for line in lines if "fail" in line)
    assert "Uvicorn running on" in out  # the server's own log stays, whatever the access log


def test_serve_passes_the_quiet_config_to_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    import exec_server.app
    from exec_server.http_edge import EdgeProtocol, HostAllowList

    seen: dict[str, Any] = {}
    monkeypatch.setattr(exec_server.app, "create_app", lambda settings: "the app")
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets=None: seen.update(c=self.config)
    )
    assert cli.main(["serve", "--port", "5999"]) == 0
    config = seen["c"]
    # bound to loopback: the app sits behind the Host allow-list, served with the edge's caps
    assert isinstance(config.app, HostAllowList) and config.app.app == "the app"
    assert config.port == 5999 and issubclass(config.http, EdgeProtocol)
    assert config.log_config == uvicorn_log_config()
    assert config.log_config["loggers"]["uvicorn.access"]["filters"] == ["quiet_probes"]
    assert config.access_log and not config.log_config["filters"]["quiet_probes"]["errors_only"]


@pytest.mark.parametrize(
    ("access", "records", "errors_only"), [("errors", True, True), ("off", False, False)]
)
def test_serve_passes_the_access_log_setting_to_uvicorn(
    monkeypatch: pytest.MonkeyPatch, access: str, records: bool, errors_only: bool
) -> None:
    import uvicorn

    import exec_server.app

    seen: dict[str, Any] = {}
    monkeypatch.setenv("BOXED_ACCESS_LOG", access)
    monkeypatch.setattr(exec_server.app, "create_app", lambda settings: "the app")
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets=None: seen.update(c=self.config)
    )
    assert cli.main(["serve", "--port", "5999"]) == 0
    config = seen["c"]
    assert config.access_log is records
    assert config.log_config["filters"]["quiet_probes"]["errors_only"] is errors_only
