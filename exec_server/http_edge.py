"""The HTTP edge: what a connection may cost before the app (and its API key check) sees it.

uvicorn leaves these open: with httptools a header of any size is buffered whole, a connection
that never sends a byte is kept forever, and its ``limit_concurrency`` answers 503 to every
request past the limit, probes included. So the service runs uvicorn with :class:`EdgeProtocol`
(httptools' protocol with caps) and the app behind :class:`HostAllowList`; :func:`server_config`
is the one place that puts them together, for ``python -m exec_server`` and the tests alike.

* a request head (request line and headers) over ``BOXED_MAX_HEADER_BYTES``, or with more than
  ``BOXED_MAX_HEADERS`` headers: 431, counted as it arrives, so a 64 MB header costs 64 kB;
* a head not complete ``BOXED_HEADER_TIMEOUT`` seconds after the connection opened (or after
  the previous request ended): the connection is closed (slowloris, half-open floods);
* more than ``BOXED_MAX_CONNECTIONS`` connections: the one waiting longest for a request head
  is closed to make room, so probes keep answering under a flood of idle sockets;
* bound to loopback, a ``Host`` outside ``localhost``, ``127.0.0.1``, ``[::1]`` (any port) and
  ``BOXED_ALLOWED_HOSTS``: 421 (DNS rebinding: a web page's requests carry its own name).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .http_limits import error_body, send_refusal
from .settings import Settings

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_HEAD_END = b"\r\n\r\n"


def _error_body(status: int, detail: str) -> bytes:
    """A raw HTTP answer in the service's one error shape, closing the connection."""
    reason = {421: "Misdirected Request", 431: "Request Header Fields Too Large"}[status]
    body = error_body(detail)
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class EdgeLimits:
    """The caps one server applies, and its connections waiting for a request head (oldest
    first: a dict keeps insertion order)."""

    max_header_bytes: int
    max_headers: int
    header_timeout: float
    max_connections: int
    waiting: dict[EdgeProtocol, None] = field(default_factory=dict)


class EdgeProtocol(HttpToolsProtocol):
    """httptools' protocol with the caps of :class:`EdgeLimits` (set on a subclass per server
    by :func:`server_config`)."""

    limits: EdgeLimits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._head_tail = b""
        self._header_count = 0
        self._reading_head = True
        self._head_timer: asyncio.TimerHandle | None = None

    # --- connections and the head deadline ---

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()
        limits = self.limits
        while len(self.connections) > limits.max_connections:
            oldest = next((c for c in limits.waiting if c is not self), None)
            if oldest is None:
                self.transport.close()  # every other connection is busy with a request
                return
            oldest._close("connection limit reached; closing the longest-idle connection")

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _await_head(self, *, timed: bool = True) -> None:
        """Wait for a request head: timed from now, or (between keep-alive requests, which
        uvicorn's keep-alive timeout bounds) from its first byte."""
        self._head_bytes, self._head_tail, self._header_count = 0, b"", 0
        self._reading_head = True
        self.limits.waiting[self] = None
        if timed:
            self._start_head_timer()

    def _start_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_late)

    def _stop_waiting(self) -> None:
        self._reading_head = False
        self.limits.waiting.pop(self, None)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._close(f"no complete request head within {self.limits.header_timeout:g} s")

    def _close(self, why: str) -> None:
        self._stop_waiting()
        log.debug("closing %s: %s", self.client, why)
        self.transport.close()

    def _refuse(self, status: int, detail: str) -> None:
        self._stop_waiting()
        self.transport.write(_error_body(status, detail))
        self.transport.close()

    # --- counting the head as it arrives ---

    def data_received(self, data: bytes) -> None:
        if self._reading_head:
            if self._head_timer is None:
                self._start_head_timer()
            seen = self._head_tail + data
            end = seen.find(_HEAD_END)
            if end < 0:
                self._head_bytes += len(data)
                self._head_tail = seen[-3:]
            else:
                self._head_bytes += end + len(_HEAD_END) - len(self._head_tail)
            if self._head_bytes > self.limits.max_header_bytes:
                limit = self.limits.max_header_bytes
                self._refuse(431, f"request line and headers exceed {limit} bytes")
                return
        if not self.transport.is_closing():
            super().data_received(data)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count <= self.limits.max_headers:
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._stop_waiting()
        if self._header_count > self.limits.max_headers:
            self._refuse(431, f"more than {self.limits.max_headers} headers")
            self.cycle = None  # type: ignore[assignment]  # no request: body and end ignored
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self.cycle is not None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self.cycle is not None:
            super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head(timed=False)  # the next head's deadline runs from its first byte


class HostAllowList:
    """421 for a request whose ``Host`` is not an allowed name (any port); a request without
    ``Host`` (HTTP/1.0) passes: a browser always sends one."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope["headers"]).get(b"host")
            if host is not None and _host_name(host) not in self.allowed:
                await self._refuse(send)
                return
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send) -> None:
        names = ", ".join(sorted(self.allowed))
        await send_refusal(send, 421, f"unknown Host: this service answers only to {names}")


def _host_name(host: bytes) -> str:
    """``Host`` without its port, lower case: ``[::1]:5002`` -> ``::1``."""
    text = host.decode("latin-1").strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def is_loopback(host: str) -> bool:
    """Whether a bind address only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The names ``Host`` may carry, or ``None`` (any): bound to loopback the loopback names,
    plus ``BOXED_ALLOWED_HOSTS`` wherever it is set."""
    names = (settings.allowed_hosts or "").split(",")
    extra = {name.strip().lower() for name in names if name.strip()}
    if is_loopback(settings.host):
        return LOOPBACK_NAMES | extra
    return frozenset(extra) if extra else None


def edge_app(app: ASGIApp, settings: Settings) -> ASGIApp:
    """``app`` behind the Host allow-list, when there is one."""
    allowed = allowed_hosts(settings)
    return app if allowed is None else HostAllowList(app, allowed)


def raise_fd_limit(settings: Settings) -> None:
    """Room for every allowed connection besides the sandboxes' descriptors: the soft limit is
    raised towards the hard one, else accept() fails (EMFILE) before the connection cap acts."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = settings.max_connections + 1024
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < wanted:
        log.warning(
            "open files limited to %d: BOXED_MAX_CONNECTIONS=%d needs about %d",
            target,
            settings.max_connections,
            wanted,
        )


def server_config(app: ASGIApp, settings: Settings, **options: Any) -> uvicorn.Config:
    """uvicorn's config for ``app`` with every edge limit of ``settings``; ``options`` are
    passed on (log settings, shutdown timeout)."""
    limits = EdgeLimits(
        max_header_bytes=settings.max_header_bytes,
        max_headers=settings.max_headers,
        header_timeout=settings.header_timeout,
        max_connections=settings.max_connections,
    )
    protocol = type("ServiceEdgeProtocol", (EdgeProtocol,), {"limits": limits})
    raise_fd_limit(settings)
    return uvicorn.Config(
        edge_app(app, settings),
        host=settings.host,
        port=settings.port,
        http=protocol,
        timeout_keep_alive=settings.keep_alive_timeout,
        **options,
    )
