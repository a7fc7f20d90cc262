"""The blocking client (:class:`Client`) and its sessions (:class:`Session`)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, overload

import httpx

from boxed_client.attempts import Attempts
from boxed_client.base import ClientBase, not_ready, probe_timeout
from boxed_client.bodies import (
    execute_body,
    judge_body,
    request_body,
    score_body,
    score_options,
)
from boxed_client.errors import BoxedError, BoxedHTTPError
from boxed_client.models import SessionInfo
from boxed_client.results import (
    CalculateResult,
    ExecuteItem,
    ExecuteResult,
    JudgeResult,
    ScoreBatch,
    ScoreResult,
    SessionResult,
    collect,
)
from boxed_client.session_files import SessionFiles
from boxed_client.sessions import SessionBase


class Client(ClientBase):
    """Blocking client; safe to share between threads. Use as a context manager or ``close()``.

    Arguments: see :meth:`ClientBase.__init__` (URLs, API key, concurrency cap, timeouts, retries).
    """

    def _open(self) -> None:
        self._slot = threading.BoundedSemaphore(self.max_concurrency)
        self._clients = [
            httpx.Client(headers=self._headers, limits=self._limits) for _ in range(self._pools)
        ]
        self._turns = itertools.cycle(self._clients)  # next() holds the GIL: thread-safe

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        for http in self._clients:
            http.close()

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        read_timeout: float | None = None,
        code_time: float = 0.0,
    ) -> Any:
        read = read_timeout or self.read_timeout
        return self._send(Attempts(self, method, path, read, code_time=code_time), body)

    def _send(self, attempts: Attempts, body: Any = None) -> Any:
        """The answer to ``attempts``' request, retried as its policy says."""
        while True:
            url, timeout = attempts.next()
            try:
                response = self._attempt(attempts, url, timeout, body)
            except httpx.TransportError as exc:
                delay = attempts.failed(exc)
            else:
                delay = attempts.answered(response)
                if delay is None:
                    return attempts.answer
            if delay:
                time.sleep(delay)

    def _attempt(
        self, attempts: Attempts, url: str, timeout: httpx.Timeout, body: Any
    ) -> httpx.Response:
        """One HTTP request, once this client has a free slot (waited for until the
        deadline: a queue of this client's own is no excuse to run past it)."""
        left = attempts.left()
        if not self._slot.acquire(timeout=None if left is None else max(0.0, left)):
            raise attempts.out_of_time("waiting for a free slot of this client")
        try:
            return next(self._turns).request(
                attempts.method,
                url,
                **request_body(body),
                timeout=timeout,
                headers=attempts.headers,
            )
        finally:
            self._slot.release()

    def execute(
        self,
        code: str,
        input: str = "",
        timeout: float | None = None,
        memory_mb: int | None = None,
        *,
        language: str | None = None,
        cache: bool | None = None,
        image: str | None = None,
    ) -> ExecuteResult:
        """Run one snippet (``language``: python, c, cpp, bash; ``image``: one of the server's
        images, ``GET /images``). Limits left as ``None`` take the server's defaults."""
        body = execute_body(
            {
                "code": code,
                "input": input,
                "timeout": timeout,
                "memory_mb": memory_mb,
                "language": language,
                "cache": cache,
                "image": image,
            }
        )
        return self._execute_body(body)

    def _execute_body(self, body: dict[str, Any]) -> ExecuteResult:
        read, code_time = self._exec_read_timeout(body), self._exec_code_time(body)
        data = self._request("POST", "/execute", body, read, code_time)
        return ExecuteResult.model_validate(data)

    def judge(
        self,
        code: str,
        tests: Sequence[Mapping[str, Any]] | None = None,
        *,
        language: str = "python",
        **options: Any,
    ) -> JudgeResult:
        """Judge a submission against its tests (``POST /judge``; docs/judging.md): ``tests``
        as ``[{"input", "expected_output"}]``, or ``[{"args", "expected"}]`` with
        ``fn_name=``, or none with ``test_script=``. ``options`` are the request's other
        fields (``comparison``, ``checker``, ``timeout``, ``stop_on_first_failure``,
        ``cache``...); ``None`` ones are left out. Retries (same ``X-Request-ID``) join the
        run in flight or get its stored answer instead of judging again."""
        body = judge_body(code, tests, {"language": language, **options})
        read, code_time = self._judge_read_timeout(body), self._judge_code_time(body)
        data = self._request("POST", "/judge", body, read, code_time)
        return JudgeResult.model_validate(data)

    @overload
    def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: Literal[False] = False
    ) -> list[ExecuteResult]: ...

    @overload
    def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: bool
    ) -> list[ExecuteResult | BoxedError]: ...

    def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: bool = False
    ) -> list[ExecuteResult] | list[ExecuteResult | BoxedError]:
        """Run many snippets concurrently (up to ``max_concurrency``), results in input order.

        Every item is attempted. If any failed, :class:`BoxedBatchError` is raised after all
        are done, carrying every result; with ``return_exceptions=True`` the errors are returned
        in place instead, like ``asyncio.gather``.
        """
        bodies = [execute_body(item) for item in items]
        if not bodies:
            return []

        def one(body: dict[str, Any]) -> ExecuteResult | BoxedError:
            try:
                return self._execute_body(body)
            except BoxedError as exc:
                return exc

        with ThreadPoolExecutor(min(self.max_concurrency, len(bodies))) as pool:
            return collect(list(pool.map(one, bodies)), return_exceptions)

    def calculate(self, expr: str) -> CalculateResult:
        """Evaluate an arithmetic expression in the server's safe evaluator."""
        return CalculateResult.model_validate(self._request("POST", "/calculate", {"expr": expr}))

    def score(
        self,
        record: Mapping[str, Any] | None = None,
        *,
        response: str | None = None,
        answer: Any = None,
        preset: str | None = None,
        rewards: Mapping[str, float] | None = None,
        timeout: float | None = None,
    ) -> ScoreResult:
        """Grade a trajectory ``record`` (any format the server reads, gold inside), or
        ``response`` against ``answer``. ``preset`` (``"binary"``, ``"interleaved"``),
        ``rewards`` (overrides such as ``wrong_reward``) and ``timeout`` (seconds per answer
        check) take the server defaults when ``None``."""
        body = score_options(score_body(record, response, answer), preset, rewards, timeout)
        data = self._request("POST", "/score", body, self._score_read_timeout(body, 1))
        return ScoreResult.model_validate(data)

    def score_many(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        preset: str | None = None,
        rewards: Mapping[str, float] | None = None,
        timeout: float | None = None,
    ) -> ScoreBatch:
        """Grade many records in one request (a group of rollouts, say). A bad item does
        not fail the others: it comes back as a row with status ``error`` and ``error`` set."""
        records = [dict(item) for item in items]
        body = score_options({"items": records}, preset, rewards, timeout)
        read_timeout = self._score_read_timeout(body, len(records))
        data = self._request("POST", "/score/batch", body, read_timeout)
        return ScoreBatch.model_validate(data)

    def health(self) -> dict[str, Any]:
        """``GET /healthz`` of one server (with failover): is the service process alive."""
        return self._request("GET", "/healthz")

    def wait_until_ready(
        self, timeout: float = 60.0, *, interval: float = 0.25, all_urls: bool = False
    ) -> list[str]:
        """Poll ``GET /readyz`` until one URL (every URL with ``all_urls``) answers 200; returns
        the ready URLs. Raises :class:`BoxedUnavailable` after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        while True:
            reasons = {url: self._probe(url, end) for url in self.urls}
            ready = self._note_ready(reasons)
            if ready and (not all_urls or len(ready) == len(self.urls)):
                return ready
            if time.monotonic() + interval > end:
                raise not_ready(timeout, reasons)
            time.sleep(interval)

    def _probe(self, url: str, end: float) -> str | None:
        try:
            response = next(self._turns).get(url + "/readyz", timeout=probe_timeout(self, end))
        except httpx.TransportError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None if response.status_code == 200 else f"{response.status_code}: {response.text}"

    def session(
        self,
        *,
        language: str | None = None,
        memory_mb: int | None = None,
        timeout: float | None = None,
        cpu_timeout: float | None = None,
        idle_timeout: float | None = None,
        max_lifetime: float | None = None,
        image: str | None = None,
        max_forks: int | None = None,
    ) -> Session:
        """A session (one persistent interpreter on one server), opened by ``with`` (or
        ``open()``) and deleted at the end of the block, in the server's image ``image``
        (None: its default). ``language="bash"``: a shell session (each call a fresh bash in
        the working directory and environment the call before left). Limits left ``None``
        take the server's defaults."""
        limits = {
            "language": language,
            "memory_mb": memory_mb,
            "timeout": timeout,
            "cpu_timeout": cpu_timeout,
            "idle_timeout": idle_timeout,
            "max_lifetime": max_lifetime,
            "image": image,
            "max_forks": max_forks,
        }
        return Session(self, {k: v for k, v in limits.items() if v is not None})


class Session(SessionBase):
    """One session of a :class:`Client`. Every call goes to the server that holds it and is
    never sent twice (it would change the session's state twice): a call whose answer was
    lost, or whose server did not answer within ``session_timeout``, raises
    :class:`SessionUnreachable`. A session the infrastructure lost answers 410
    (:class:`SessionLost`, with the failure); one its own code ended, 410
    (:class:`BoxedHTTPError` with ``outcome == "code"``)."""

    client: Client

    def open(self) -> Session:
        if self.id is None:
            attempts = Attempts(self.client, "POST", "/sessions", self.client.read_timeout)
            attempts.replay = False  # a retried creation could leave a session behind
            self._opened(attempts, self.client._send(attempts, self.limits))
        return self

    def execute(self, code: str, input: str = "", timeout: float | None = None) -> SessionResult:
        """Run one call in the session (its globals, imports and files are kept)."""
        attempts, body = self._call(code, input, timeout)
        return SessionResult.model_validate(self.client._send(attempts, body))

    def fork(self) -> Session:
        """``POST /sessions/{id}/fork``: a new session, open on the same server, with a copy
        of this one's interpreter (globals, imports, open files) and working directory,
        independent from then on; close it (or use it in a ``with`` block) like this one. The
        session must have been made with ``max_forks`` (or the server's default) above 0."""
        return self._forked(self.client._send(self._fork_attempts()))

    def refresh(self) -> SessionInfo:
        """``GET /sessions/{id}``: its limits and time left."""
        attempts = self._attempts("GET", self._path())
        self.info = SessionInfo.model_validate(self.client._send(attempts))
        return self.info

    @property
    def files(self) -> SessionFiles:
        """The session's files: ``write``, ``read``, ``list``, ``delete`` (docs/client.md)."""
        return SessionFiles(self)

    def close(self) -> None:
        """Delete the session (a session already gone is fine; one whose server did not
        answer its last call is forgotten without asking that server again)."""
        if self._forget_unreachable():
            return
        attempts = self._attempts("DELETE", self._path())
        try:
            self.client._send(attempts)
        except BoxedHTTPError as exc:
            if exc.status_code != 404:
                raise
        self.id = None

    def __enter__(self) -> Session:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
