"""The asyncio client (:class:`AsyncClient`) and its sessions (:class:`AsyncSession`)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterable, Mapping, Sequence
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
from boxed_client.session_files import AsyncSessionFiles
from boxed_client.sessions import SessionBase


class AsyncClient(ClientBase):
    """Asyncio client with the same methods as :class:`Client`, as coroutines.

    It belongs to the event loop it is first used in (its connections do); make one per loop.
    """

    def _open(self) -> None:
        self._slot = asyncio.Semaphore(self.max_concurrency)
        self._clients = [
            httpx.AsyncClient(headers=self._headers, limits=self._limits)
            for _ in range(self._pools)
        ]
        self._turns = itertools.cycle(self._clients)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await asyncio.gather(*(http.aclose() for http in self._clients))

    def _check_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise BoxedError(
                "this AsyncClient was first used in another event loop; create one per loop"
            )

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        read_timeout: float | None = None,
        code_time: float = 0.0,
    ) -> Any:
        read = read_timeout or self.read_timeout
        return await self._send(Attempts(self, method, path, read, code_time=code_time), body)

    async def _send(self, attempts: Attempts, body: Any = None) -> Any:
        """The answer to ``attempts``' request, retried as its policy says."""
        self._check_loop()
        while True:
            url, timeout = attempts.next()
            try:
                response = await self._attempt(attempts, url, timeout, body)
            except httpx.TransportError as exc:
                delay = attempts.failed(exc)
            else:
                delay = attempts.answered(response)
                if delay is None:
                    return attempts.answer
            if delay:
                await asyncio.sleep(delay)

    async def _attempt(
        self, attempts: Attempts, url: str, timeout: httpx.Timeout, body: Any
    ) -> httpx.Response:
        """One HTTP request, once this client has a free slot (waited for until the
        deadline)."""
        left = attempts.left()
        try:
            await asyncio.wait_for(self._slot.acquire(), None if left is None else max(0.0, left))
        except TimeoutError:
            raise attempts.out_of_time("waiting for a free slot of this client") from None
        try:
            return await next(self._turns).request(
                attempts.method,
                url,
                **request_body(body),
                timeout=timeout,
                headers=attempts.headers,
            )
        finally:
            self._slot.release()

    async def execute(
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
        """Run one snippet; see :meth:`Client.execute`."""
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
        return await self._execute_body(body)

    async def _execute_body(self, body: dict[str, Any]) -> ExecuteResult:
        read, code_time = self._exec_read_timeout(body), self._exec_code_time(body)
        data = await self._request("POST", "/execute", body, read, code_time)
        return ExecuteResult.model_validate(data)

    async def judge(
        self,
        code: str,
        tests: Sequence[Mapping[str, Any]] | None = None,
        *,
        language: str = "python",
        **options: Any,
    ) -> JudgeResult:
        """Judge a submission against its tests; see :meth:`Client.judge`."""
        body = judge_body(code, tests, {"language": language, **options})
        read, code_time = self._judge_read_timeout(body), self._judge_code_time(body)
        data = await self._request("POST", "/judge", body, read, code_time)
        return JudgeResult.model_validate(data)

    @overload
    async def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: Literal[False] = False
    ) -> list[ExecuteResult]: ...

    @overload
    async def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: bool
    ) -> list[ExecuteResult | BoxedError]: ...

    async def execute_many(
        self, items: Iterable[ExecuteItem], *, return_exceptions: bool = False
    ) -> list[ExecuteResult] | list[ExecuteResult | BoxedError]:
        """Run many snippets concurrently (up to ``max_concurrency``), results in input order.
        Failures as in :meth:`Client.execute_many`."""
        bodies = [execute_body(item) for item in items]

        async def one(body: dict[str, Any]) -> ExecuteResult | BoxedError:
            try:
                return await self._execute_body(body)
            except BoxedError as exc:
                return exc

        return collect(await asyncio.gather(*(one(b) for b in bodies)), return_exceptions)

    async def calculate(self, expr: str) -> CalculateResult:
        """Evaluate an arithmetic expression in the server's safe evaluator."""
        data = await self._request("POST", "/calculate", {"expr": expr})
        return CalculateResult.model_validate(data)

    async def score(
        self,
        record: Mapping[str, Any] | None = None,
        *,
        response: str | None = None,
        answer: Any = None,
        preset: str | None = None,
        rewards: Mapping[str, float] | None = None,
        timeout: float | None = None,
    ) -> ScoreResult:
        """Grade one trajectory; see :meth:`Client.score`."""
        body = score_options(score_body(record, response, answer), preset, rewards, timeout)
        data = await self._request("POST", "/score", body, self._score_read_timeout(body, 1))
        return ScoreResult.model_validate(data)

    async def score_many(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        preset: str | None = None,
        rewards: Mapping[str, float] | None = None,
        timeout: float | None = None,
    ) -> ScoreBatch:
        """Grade many records in one request; see :meth:`Client.score_many`."""
        records = [dict(item) for item in items]
        body = score_options({"items": records}, preset, rewards, timeout)
        read_timeout = self._score_read_timeout(body, len(records))
        data = await self._request("POST", "/score/batch", body, read_timeout)
        return ScoreBatch.model_validate(data)

    async def health(self) -> dict[str, Any]:
        """``GET /healthz`` of one server (with failover): is the service process alive."""
        return await self._request("GET", "/healthz")

    async def wait_until_ready(
        self, timeout: float = 60.0, *, interval: float = 0.25, all_urls: bool = False
    ) -> list[str]:
        """Poll ``GET /readyz`` until one URL (every URL with ``all_urls``) answers 200; returns
        the ready URLs. Raises :class:`BoxedUnavailable` after ``timeout`` seconds."""
        self._check_loop()
        end = time.monotonic() + timeout
        while True:
            probes = await asyncio.gather(*(self._probe(url, end) for url in self.urls))
            reasons = dict(zip(self.urls, probes, strict=True))
            ready = self._note_ready(reasons)
            if ready and (not all_urls or len(ready) == len(self.urls)):
                return ready
            if time.monotonic() + interval > end:
                raise not_ready(timeout, reasons)
            await asyncio.sleep(interval)

    async def _probe(self, url: str, end: float) -> str | None:
        try:
            http = next(self._turns)
            response = await http.get(url + "/readyz", timeout=probe_timeout(self, end))
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
    ) -> AsyncSession:
        """A session, opened by ``async with`` (or ``await open()``); see
        :meth:`Client.session`."""
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
        return AsyncSession(self, {k: v for k, v in limits.items() if v is not None})


class AsyncSession(SessionBase):
    """One session of an :class:`AsyncClient`; the methods of :class:`Session`, awaited."""

    client: AsyncClient

    async def open(self) -> AsyncSession:
        if self.id is None:
            attempts = Attempts(self.client, "POST", "/sessions", self.client.read_timeout)
            attempts.replay = False
            self._opened(attempts, await self.client._send(attempts, self.limits))
        return self

    async def execute(
        self, code: str, input: str = "", timeout: float | None = None
    ) -> SessionResult:
        """Run one call in the session (its globals, imports and files are kept)."""
        attempts, body = self._call(code, input, timeout)
        return SessionResult.model_validate(await self.client._send(attempts, body))

    async def fork(self) -> AsyncSession:
        """A new session with a copy of this one's state; see :meth:`Session.fork`."""
        return self._forked(await self.client._send(self._fork_attempts()))

    async def refresh(self) -> SessionInfo:
        attempts = self._attempts("GET", self._path())
        self.info = SessionInfo.model_validate(await self.client._send(attempts))
        return self.info

    @property
    def files(self) -> AsyncSessionFiles:
        """The session's files: the methods of :attr:`Session.files`, awaited."""
        return AsyncSessionFiles(self)

    async def close(self) -> None:
        if self._forget_unreachable():
            return
        attempts = self._attempts("DELETE", self._path())
        try:
            await self.client._send(attempts)
        except BoxedHTTPError as exc:
            if exc.status_code != 404:
                raise
        self.id = None

    async def __aenter__(self) -> AsyncSession:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
