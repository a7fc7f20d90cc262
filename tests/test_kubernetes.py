"""The Kubernetes part of the pod backend, without a cluster (none is reachable here).

``kube_api`` runs against the official ``kubernetes`` client talking HTTP to a loopback server
that answers with responses in the API's wire format (tests/data/kubernetes/: a pod list, a
watch stream, an expired watch, deletions, a patch; written from the API reference in the shape
a cluster sends, not captured from one). The claim logic of ``kubernetes.py`` runs against a
scripted ``PodApi`` and real TCP listeners on 127.0.0.1 standing in for pods. The hand-shake
is the real listener's (``guest/listener.py``) against the service's side (``pods.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

kubernetes = pytest.importorskip("kubernetes", reason="the 'kubernetes' extra is not installed")

from exec_server.backends import create_backend  # noqa: E402
from exec_server.backends.kube_api import (  # noqa: E402
    CLAIMED_BY,
    DELETION_COST,
    ApiError,
    PodApi,
    PodState,
)
from exec_server.backends.kubernetes import KubernetesPods  # noqa: E402
from exec_server.backends.pods import (  # noqa: E402
    HandshakeFailed,
    PodBackend,
    SocketStream,
    open_session,
)
from exec_server.guest import listener  # noqa: E402
from exec_server.settings import Settings  # noqa: E402

DATA = Path(__file__).parent / "data" / "kubernetes"
NAMESPACE = "boxed"
SELECTOR = "app.kubernetes.io/name=boxed-sandbox"


# -- a loopback API server answering with the recorded responses -----------------------------
class FakeApiServer:
    """Answers each (method, path, watch?) with a recorded body and status; logs requests."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str, bool], tuple[int, bytes]] = {}
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                server.requests.append(
                    {
                        "method": self.command,
                        "path": url.path,
                        "query": query,
                        "body": body,
                        "content_type": self.headers.get("content-type"),
                    }
                )
                key = (self.command, url.path, query.get("watch") == ["true"])
                status, payload = server.routes.get(key, (404, b'{"kind":"Status","code":404}'))
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_DELETE = do_PATCH = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def route(self, method: str, path: str, file: str, status: int = 200, watch: bool = False):
        self.routes[(method, path, watch)] = (status, (DATA / file).read_bytes())


@pytest.fixture
def api_server() -> Iterator[FakeApiServer]:
    server = FakeApiServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def pod_api(api_server: FakeApiServer) -> PodApi:
    configuration = kubernetes.client.Configuration()
    configuration.host = api_server.url
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
    return PodApi(NAMESPACE, SELECTOR, core)


PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"


def test_list_reads_every_pod_state(api_server: FakeApiServer, pod_api: PodApi) -> None:
    api_server.route("GET", PODS, "pods_list.json")
    pods, version = pod_api.list()
    assert version == "1234"
    by_name = {p.name.rsplit("-", 1)[1]: p for p in pods}
    ready, pending, restarted, deleting = (by_name[k] for k in ("a1b2c", "d3e4f", "g5h6i", "j7k8l"))
    assert ready.usable and ready.ip == "10.244.1.7" and not ready.spent
    assert not pending.usable and pending.ip is None and pending.phase == "Pending"
    assert restarted.restarts == 1 and restarted.oom_killed and restarted.spent
    assert not restarted.usable
    assert deleting.deleting and not deleting.usable and not deleting.spent
    assert deleting.claimed_by == "boxed-6c7b9d8f4-xk2lp"
    (request,) = api_server.requests
    assert request["query"]["labelSelector"] == [SELECTOR]


def test_watch_yields_changes_and_skips_bookmarks(
    api_server: FakeApiServer, pod_api: PodApi
) -> None:
    api_server.route("GET", PODS, "pods_watch.jsonl", watch=True)
    events = list(pod_api.watch("1234", 5))
    assert [(kind, pod.name[-5:], pod.usable) for kind, pod in events] == [
        ("ADDED", "m9n0p", False),
        ("MODIFIED", "m9n0p", True),
        ("DELETED", "j7k8l", False),
    ]
    first = api_server.requests[0]["query"]
    assert first["watch"] == ["true"] and first["resourceVersion"] == ["1234"]
    assert first["labelSelector"] == [SELECTOR] and first["timeoutSeconds"] == ["5"]


def test_expired_watch_says_list_again(api_server: FakeApiServer, pod_api: PodApi) -> None:
    api_server.route("GET", PODS, "pods_watch_gone.jsonl", watch=True)
    with pytest.raises(ApiError) as caught:
        list(pod_api.watch("1234", 5))
    assert caught.value.gone  # type: ignore[attr-defined]


def test_delete_is_immediate_and_missing_counts_as_gone(
    api_server: FakeApiServer, pod_api: PodApi
) -> None:
    api_server.route("DELETE", f"{PODS}/boxed-sandbox-7d9f8b6c5d-a1b2c", "delete_ok.json")
    api_server.route("DELETE", f"{PODS}/gone", "delete_not_found.json", status=404)
    api_server.route("DELETE", f"{PODS}/other", "delete_forbidden.json", status=403)
    assert pod_api.delete("boxed-sandbox-7d9f8b6c5d-a1b2c") is True
    assert api_server.requests[0]["query"]["gracePeriodSeconds"] == ["0"]
    assert pod_api.delete("gone") is True
    with pytest.raises(ApiError, match="403"):
        pod_api.delete("other")


def test_claim_mark_labels_and_sets_deletion_cost(
    api_server: FakeApiServer, pod_api: PodApi
) -> None:
    api_server.route("PATCH", f"{PODS}/boxed-sandbox-7d9f8b6c5d-a1b2c", "patch_ok.json")
    pod_api.mark_claimed("boxed-sandbox-7d9f8b6c5d-a1b2c", "boxed-6c7b9d8f4-xk2lp")
    (request,) = api_server.requests
    body = json.loads(request["body"])
    assert body["metadata"]["labels"] == {CLAIMED_BY: "boxed-6c7b9d8f4-xk2lp"}
    assert body["metadata"]["annotations"] == {DELETION_COST: "1000"}
    assert "patch" in request["content_type"]


def test_unreachable_api_is_an_api_error() -> None:
    configuration = kubernetes.client.Configuration()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        configuration.host = f"http://127.0.0.1:{sock.getsockname()[1]}"  # nobody listens
    configuration.retries = 0
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
    with pytest.raises(ApiError, match="cannot list"):
        PodApi(NAMESPACE, SELECTOR, core).list()


# -- the claim logic against a scripted API and loopback "pods" ------------------------------
def state(name: str, ip: str | None = "127.0.0.1", **changes: Any) -> PodState:
    fields: dict[str, Any] = dict(
        name=name,
        ip=ip,
        phase="Running",
        ready=True,
        deleting=False,
        restarts=0,
        oom_killed=False,
        claimed_by=None,
    )
    return PodState(**{**fields, **changes})


class ScriptedApi:
    """A ``PodApi`` whose list is fixed and whose watch replays queued events."""

    namespace, selector = NAMESPACE, SELECTOR

    def __init__(self, pods: list[PodState]) -> None:
        self.pods = pods
        self.events: list[tuple[str, PodState]] = []
        self.more = threading.Event()
        self.deleted: list[str] = []
        self.marked: list[tuple[str, str]] = []

    def list(self) -> tuple[list[PodState], str]:
        return list(self.pods), "1"

    def watch(self, version: str, seconds: int) -> Iterator[tuple[str, PodState]]:
        while True:
            self.more.wait(0.05)
            self.more.clear()
            while self.events:
                yield self.events.pop(0)

    def send(self, kind: str, pod: PodState) -> None:
        self.events.append((kind, pod))
        self.more.set()

    def delete(self, name: str) -> bool:
        self.deleted.append(name)
        return True

    def mark_claimed(self, name: str, claimer: str) -> None:
        self.marked.append((name, claimer))


def listening() -> socket.socket:
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    return server


def settings_for(port: int) -> Settings:
    return Settings(pod_port=port)


async def settle_picture(source: KubernetesPods) -> None:
    for _ in range(100):
        if source.synced:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the pod picture never synced")


def test_connect_claims_a_ready_pod_and_skips_the_others() -> None:
    async def scenario() -> None:
        server = listening()
        port = server.getsockname()[1]
        api = ScriptedApi(
            [
                state("pending", ip=None, phase="Pending", ready=False),
                state("restarted", restarts=1),
                state("leaving", deleting=True),
                state("fresh"),
            ]
        )
        source = KubernetesPods(settings_for(port), api, reuse=True, claimer="svc-1")  # type: ignore[arg-type]
        await source.health()
        await settle_picture(source)
        loop = asyncio.get_running_loop()
        name, sock = await source.connect(loop.time() + 2)
        assert name == "fresh" and "fresh" in source.pending
        sock.close()
        source.claimed(name)
        await asyncio.sleep(0.1)
        assert api.marked == [("fresh", "svc-1")] and source.mine == {"fresh"}
        # claimed here: not offered again; nothing else is usable
        with pytest.raises(Exception, match="no sandbox pod to claim: 4 pods"):
            await source.connect(loop.time() + 0.3)
        # the spent pod and ours are owned (reaped when nobody holds them)
        assert await source.list_owned() == ["fresh", "restarted"]
        assert not source.retiring("fresh")
        api.send("MODIFIED", state("fresh", deleting=True))
        await asyncio.sleep(0.2)
        assert source.retiring("fresh")
        assert await source.delete("fresh") and api.deleted == ["fresh"]
        assert source.mine == set()
        server.close()
        await source.close()

    asyncio.run(scenario())


def test_a_pod_that_refuses_is_skipped_for_a_while() -> None:
    async def scenario() -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            closed_port = probe.getsockname()[1]  # nothing listens here: refused
        api = ScriptedApi([state("taken")])
        source = KubernetesPods(settings_for(closed_port), api, reuse=True, claimer="svc")  # type: ignore[arg-type]
        await source.health()
        await settle_picture(source)
        loop = asyncio.get_running_loop()
        with pytest.raises(Exception, match="1 ready, 0 claimed here"):
            await source.connect(loop.time() + 0.3)
        assert "taken" in source.refused_at and source.candidates(loop.time()) == []
        await source.close()

    asyncio.run(scenario())


def test_health_needs_pods_and_an_answering_api() -> None:
    async def scenario() -> None:
        empty = KubernetesPods(Settings(), ScriptedApi([]), reuse=True, claimer="svc")  # type: ignore[arg-type]
        health = await empty.health()
        assert health.up and not health.ok and "0 pods match" in str(health.problem)
        await empty.close()

        class Down(ScriptedApi):
            def list(self) -> tuple[list[PodState], str]:
                raise ApiError("cannot list sandbox pods: 403 Forbidden")

        down = KubernetesPods(Settings(), Down([]), reuse=True, claimer="svc")  # type: ignore[arg-type]
        await down.health()
        await asyncio.sleep(0.1)
        health = await down.health()
        assert not health.up and "403 Forbidden" in str(health.problem)
        await down.close()

    asyncio.run(scenario())


def test_oom_kill_is_read_from_the_pod_status() -> None:
    async def scenario() -> None:
        api = ScriptedApi([state("victim")])
        source = KubernetesPods(Settings(), api, reuse=True, claimer="svc")  # type: ignore[arg-type]
        await source.health()
        await settle_picture(source)
        waiting = asyncio.ensure_future(source.oom_killed("victim"))
        await asyncio.sleep(0.1)
        api.send("MODIFIED", state("victim", restarts=1, oom_killed=True))
        assert await asyncio.wait_for(waiting, 5)
        api.send("MODIFIED", state("other", restarts=1))
        await asyncio.sleep(0.2)
        assert not await source.oom_killed("other")  # it ended for another reason
        await source.close()

    asyncio.run(scenario())


# -- the hand-shake: the real listener's side against the service's ---------------------------
def key_file(tmp_path: Path, name: str, key: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(key)
    return str(path)


BOOTSTRAP = b'{"modules": {}}'


def handshake(tmp_path: Path, service_key: bytes, pod_key: bytes) -> tuple[Any, Any]:
    """Run both sides over a socket pair: (the service's outcome, the bootstrap the pod got,
    None when it refused)."""
    ours, theirs = socket.socketpair()
    pod_keys = key_file(tmp_path, "pod", pod_key)
    got: dict[str, Any] = {"bootstrap": None}

    def pod() -> None:
        try:
            if listener._answer_challenge(theirs, pod_keys):
                size = int.from_bytes(listener.receive_exact(theirs, 4), "big")
                got["bootstrap"] = listener.receive_exact(theirs, size)
        except ConnectionError:
            pass
        theirs.close()

    thread = threading.Thread(target=pod)
    thread.start()

    async def service() -> Any:
        stream = SocketStream(ours)
        try:
            await open_session(stream, service_key, BOOTSTRAP)
            return "sent"
        except HandshakeFailed as exc:
            return exc
        finally:
            stream.close()

    outcome = asyncio.run(service())
    thread.join(5)
    return outcome, got["bootstrap"]


def test_handshake_with_the_same_secret(tmp_path: Path) -> None:
    key = os.urandom(32).hex().encode()
    assert handshake(tmp_path, key, key) == ("sent", BOOTSTRAP)


def test_handshake_with_another_secret_fails_on_both_sides(tmp_path: Path) -> None:
    outcome, bootstrap = handshake(tmp_path, b"s" * 32, b"p" * 32)
    assert bootstrap is None
    assert isinstance(outcome, HandshakeFailed) and "same shared secret" in str(outcome)


def test_listener_refuses_strangers_then_serves_the_service(tmp_path: Path) -> None:
    """accept_service drops a probe and a client with the wrong key; the right one passes."""
    key = os.urandom(32).hex().encode()
    keys = key_file(tmp_path, "key", key)
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    result: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: result.update(conn=listener.accept_service(server, keys))
    )
    thread.start()
    socket.create_connection(("127.0.0.1", port)).close()  # a TCP probe

    async def client(k: bytes) -> Any:
        sock = socket.create_connection(("127.0.0.1", port))
        stream = SocketStream(sock)
        try:
            await open_session(stream, k, b"{}")
            return True
        except HandshakeFailed as exc:
            return exc
        finally:
            stream.close()

    assert isinstance(asyncio.run(client(b"w" * 32)), HandshakeFailed)
    assert asyncio.run(client(key)) is True
    thread.join(10)
    assert "conn" in result
    result["conn"].close()
    server.close()


SERVE_ONE = """
import socket, sys
from exec_server.guest import listener
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
conn = listener.accept_service(server, sys.argv[1])
print("claimed", flush=True)
sys.stdin.read()
"""


def readable_memory(pid: int) -> bytes:
    """Everything readable in the address space of ``pid`` (root reads /proc/<pid>/mem)."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if "r" not in perms or line.rstrip().endswith("[vsyscall]"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except (OSError, ValueError, OverflowError):
                continue
    return b"".join(chunks)


@pytest.mark.skipif(os.geteuid() != 0, reason="reading another process's memory needs root")
def test_the_serving_process_never_holds_the_secret(tmp_path: Path) -> None:
    """The listener process (the future supervisor, every snippet's ancestor) leaves reading
    the key to a forked helper: after a hand-shake, no copy of the key is in its memory."""
    key = os.urandom(32).hex().encode()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_ONE, key_file(tmp_path, "key", key)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())

        async def claim() -> None:
            stream = SocketStream(socket.create_connection(("127.0.0.1", port)))
            await open_session(stream, key, b"{}")
            stream.close()

        asyncio.run(claim())
        assert proc.stdout.readline() == b"claimed\n"
        memory = readable_memory(proc.pid)
        assert len(memory) > 1_000_000  # the interpreter's heap was read
        assert key not in memory and key[:16] not in memory
    finally:
        proc.kill()
        proc.wait()


def test_a_listener_that_served_refuses_to_serve_again(tmp_path: Path) -> None:
    (tmp_path / listener.MARKER).write_text("1")
    with pytest.raises(SystemExit, match="served before"):
        listener.serve(0, str(tmp_path / "key"), str(tmp_path))


def test_short_secrets_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shorter than 16"):
        listener.read_key(key_file(tmp_path, "short", b"tiny\n"))


def test_backends_are_registered_and_need_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="BOXED_POD_KEY_FILE"):
        PodBackend(
            Settings(),
            KubernetesPods(Settings(), ScriptedApi([]), reuse=True, claimer="x"),
            reuse=True,
        )  # type: ignore[arg-type]
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(kubernetes.config.ConfigException):
        # no cluster and no kubeconfig here: the factory says so instead of guessing
        create_backend("kubernetes", Settings(pod_key_file=key_file(tmp_path, "k", b"k" * 32)))


def test_a_fake_sandbox_that_cannot_prove_the_secret_is_refused() -> None:
    """Something that listens on a pod's port without the secret (not a boxed listener, or a
    snippet that bound it) never gets snippets: the service wants the pod's proof first."""
    ours, theirs = socket.socketpair()

    def impostor() -> None:
        theirs.sendall(listener.GREETING + os.urandom(listener.NONCE_SIZE))
        listener.receive_exact(theirs, listener.NONCE_SIZE + listener.PROOF_SIZE)
        theirs.sendall(os.urandom(listener.PROOF_SIZE))
        theirs.close()

    thread = threading.Thread(target=impostor)
    thread.start()

    async def service() -> None:
        stream = SocketStream(ours)
        with pytest.raises(HandshakeFailed, match="could not prove"):
            await open_session(stream, b"k" * 32, BOOTSTRAP)
        stream.close()

    asyncio.run(service())
    thread.join(5)


def test_private_dirs_become_roots_only(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir(mode=0o777)
    box.chmod(0o777)  # as the kubelet makes an emptyDir
    (tmp_path / listener.MARKER).write_text("1")  # stop before serving: the mode is set first
    with pytest.raises(SystemExit):
        listener.serve(0, str(tmp_path / "key"), str(tmp_path), private_dirs=[str(box)])
    assert box.stat().st_mode & 0o777 == 0o777  # a served pod changes nothing
    (tmp_path / listener.MARKER).unlink()
    with socket.create_server(("0.0.0.0", 0)) as taken:  # the port is taken: it stops there
        with pytest.raises(OSError):
            port = taken.getsockname()[1]
            listener.serve(port, str(tmp_path / "k"), str(tmp_path), "0.0.0.0", [str(box)])
    assert box.stat().st_mode & 0o777 == 0o755
