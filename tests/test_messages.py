"""Every message a person reads is exact (the second ten minutes): the body of each refusal
names the field it is about, in the words a person needs, over the real app and engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.test_sessions import service


def test_input_and_stdin_together_say_so() -> None:
    with service() as (client, fake, _):
        r = client.post("/execute", json={"code": "1", "input": "a", "stdin": "b"})
    assert r.status_code == 422
    assert r.json()["detail"] == "stdin: give input or stdin (the same field), not both"
    assert r.json()["errors"][0]["loc"] == ["body", "stdin"]
    assert fake.jobs == []


def test_a_null_input_is_no_input_as_the_old_server_took_it() -> None:
    with service() as (client, fake, _):
        r = client.post("/execute", json={"code": "1", "input": None})
    assert r.status_code == 200 and fake.jobs[0].stdin == ""


@pytest.mark.parametrize(
    ("body", "field", "detail"),
    [
        ({"timeout": 1000}, "timeout", "timeout 1000 s exceeds the maximum 30 s"),
        ({"cpu_timeout": 31}, "cpu_timeout", "cpu_timeout 31 s exceeds the maximum 30 s"),
        ({"memory_mb": 10}, "memory_mb", "memory_mb must be at least 64"),
        ({"memory_mb": 4096}, "memory_mb", "memory_mb 4096 exceeds the maximum 2048"),
    ],
)
def test_a_limit_out_of_range_is_listed_under_its_field(
    body: dict[str, Any], field: str, detail: str
) -> None:
    with service(timeout_max=30) as (client, fake, _):
        r = client.post("/execute", json={"code": "1", **body})
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == detail
    assert r.json()["errors"] == [{"loc": ["body", field], "msg": detail, "type": "limit"}]
    assert fake.jobs == []


def test_an_unknown_field_with_no_close_match_reads_as_a_sentence() -> None:
    with service() as (client, _, _):
        r = client.post("/execute", json={"code": "1", "zzz": 1})
        calc = client.post("/calculate", json={"expression": "1+1"})
    assert r.json()["detail"].startswith("zzz: unknown field. Accepted fields: code, input")
    assert calc.json()["detail"] == (
        "expr: field required; expression: unknown field; did you mean 'expr'? "
        "Accepted fields: expr"
    )


@pytest.mark.parametrize("where", ["before", "after"])
def test_healthcheck_probes_the_port_it_is_given(where: str) -> None:
    """``python -m exec_server --port N healthcheck`` (and ``healthcheck --port N``) probe N."""
    import http.server
    import subprocess
    import sys
    import threading

    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200 if self.path == "/readyz" else 404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = str(server.server_address[1])
    args = ["--port", port, "healthcheck"] if where == "before" else ["healthcheck", "--port", port]
    try:
        ok = subprocess.run([sys.executable, "-m", "exec_server", *args], capture_output=True)
    finally:
        server.shutdown()
    down = subprocess.run(
        [sys.executable, "-m", "exec_server", *args], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert down.returncode == 1 and f"127.0.0.1:{port}/readyz" in down.stderr, down.stderr


def test_the_docs_pages_load_every_asset_from_boxed_itself() -> None:
    """No CDN: /docs and /redoc render offline, the machine boxed is made for."""
    import re

    with service() as (client, _, _):
        for page in ("/docs", "/redoc"):
            html = client.get(page).text
            refs = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ?["']([^"']+)["']""", html)
            urls = [a or b for a, b in refs]
            assert urls and not [u for u in urls if "//" in u], (page, urls)
            for url in urls:
                assert client.get(url).status_code == 200, url
        assert client.get("/docs-assets/core.py").status_code == 404  # only the assets


def test_judge_times_are_rounded_like_every_other() -> None:
    body = {"code": "1", "tests": [{"input": "", "expected_output": "1"}]}
    with service() as (client, _, _):
        answer = client.post("/judge", json=body).json()
    for ms in (answer["duration_ms"], answer["tests"][0]["duration_ms"]):
        assert ms == round(ms, 2), answer


def test_the_openenv_server_without_its_extra_says_which_to_install() -> None:
    import subprocess
    import sys

    blocked = "import sys, runpy; sys.modules['openenv'] = None; sys.argv = ['boxed-openenv']\n"
    run = blocked + "runpy.run_module('boxed_openenv', run_name='__main__')"
    answer = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True)
    assert answer.returncode == 1 and "Traceback" not in answer.stderr, answer.stderr
    assert "pip install 'boxed[openenv]'" in answer.stderr


def test_the_openenv_episodes_help_is_whole_and_gives_the_default() -> None:
    import subprocess
    import sys

    help_text = subprocess.run(
        [sys.executable, str(Path(__file__).parents[1] / "examples/openenv_episodes.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    flat = " ".join(help_text.split())
    assert "script prints." in flat and "(default: http://127.0.0.1:8001)" in flat, help_text


def test_the_client_docs_give_session_executes_real_parameters() -> None:
    import inspect

    from exec_server.client import Session

    params = list(inspect.signature(Session.execute).parameters.values())[1:]
    shown = ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in params)
    shown = shown.replace("'", '"')
    docs = (Path(__file__).parents[1] / "docs" / "client.md").read_text()
    assert f"`execute({shown})`" in docs, shown
