"""Stateful sessions: a persistent interpreter in a sandbox of its own per session.

A session is made through the backend interface (``create_session``) with the hardening of a
one-shot snippet's sandbox, and holds that sandbox (never a running slot) until it is deleted
or expires. Each call holds a running slot like any snippet (admission), runs under the same
limits and gets its verdict from ``verdict.decide``. One call at a time per session: a second
waits up to ``session_call_wait`` seconds, then is refused (409).

A call that ends the interpreter (``sys.exit``, ``os._exit``, a crash) or hits a limit answers
that verdict and the session is *lost*: its sandbox is removed, and every later request for it
answers 410 with the reason, never a fresh interpreter that would make the next step fail in a
confusing way. An expired session answers 410 the same way; a deleted one is forgotten (404).

Sessions open at once are bounded for the service (``max_sessions``) and per tenant
(``sessions_per_tenant``): one tenant holding its quota leaves room for the others. A session
belongs to the caller that made it (its scope: key and tenant, ``exec_server.tenancy``): to any
other caller it does not exist (404), whatever it knows of its id.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from scorer.outcome import Failure, FailureCode

from . import metrics, session_forks
from .admission import Overloaded, current_tenant
from .answers import to_response
from .backends.base import (
    Job,
    SandboxError,
    SessionSandbox,
    SessionSpec,
)
from .engine import Engine
from .images import OperatorImage
from .limits import resolve_limits
from .models import ExecuteRequest, SessionCreateRequest, SessionExecuteResponse, SessionInfo
from .request_errors import RequestError, ServiceUnavailable
from .session_pool import SessionPool
from .settings import MIN_MEMORY_MB, Settings
from .verdict import NotAVerdict, SnippetResult, Status, decide, out_of_memory

log = logging.getLogger("boxed.sessions")
GONE_KEPT = 10_000  # lost and expired sessions remembered, to answer 410 rather than 404
LIVE = (Status.OK, Status.ERROR)


class SessionNotFound(Exception):
    """No such session (never made, or deleted): 404."""


class SessionBusy(Exception):
    """A call of the session is still running: 409."""


class SessionGone(Exception):
    """The session is lost or expired: 410 with the reason. ``failure`` says whose doing it
    was: ``session_lost`` (its sandbox failed), ``session_expired``, or ``None`` when the
    session's own code ended it (``sys.exit``, a limit: the code's verdict was answered)."""

    def __init__(self, detail: str, failure: Failure | None) -> None:
        super().__init__(detail)
        self.failure = failure


@dataclass(frozen=True)
class SessionLimits:
    """A session's limits, fixed when it is made."""

    memory_mb: int
    timeout: float
    cpu_timeout: float | None
    idle_timeout: float
    max_lifetime: float
    max_forks: int = 0


def sandbox_spec(
    memory_mb: int,
    max_lifetime: float,
    settings: Settings,
    session_id: str,
    max_forks: int = 0,
    language: str = "python",
) -> SessionSpec:
    """What a session's sandbox is started with: its memory limit, a CPU budget for its
    whole life (a backstop: its lifetime at every CPU it may use), the forks it may hold and
    its language (a warm sandbox serves only a create asking for all of these)."""
    return SessionSpec(
        memory_mb=memory_mb,
        cpu_budget=max_lifetime * settings.cpus,
        session_id=session_id,
        max_forks=max_forks,
        language=language,
    )


def resolve_session_limits(req: SessionCreateRequest, settings: Settings) -> SessionLimits:
    """The request's limits with the server defaults, refused (422) above the maxima."""
    s = settings
    memory = req.memory_mb if req.memory_mb is not None else s.memory_mb_default
    timeout = req.timeout if req.timeout is not None else s.timeout_default
    cpu = req.cpu_timeout if req.cpu_timeout is not None else s.cpu_timeout_default
    idle = req.idle_timeout if req.idle_timeout is not None else s.session_idle_timeout_default
    life = req.max_lifetime if req.max_lifetime is not None else s.session_lifetime_default
    gvisor = s.runtime == "runsc"  # no setns into a user namespace there: forks cannot nest
    shell = req.language != "python"  # a shell session has no interpreter to fork
    forks = s.session_forks_default if not (gvisor or shell) else 0
    forks = req.max_forks if req.max_forks is not None else forks
    if forks and gvisor:
        raise RequestError(
            422, "sessions cannot fork under gVisor (docs/sessions.md#forks)", "max_forks"
        )
    if forks and shell:
        raise RequestError(
            422, "only Python sessions can fork (docs/sessions.md#forks)", "max_forks"
        )
    for name, value, maximum in (
        ("max_forks", forks, s.session_forks_max),
        ("memory_mb", memory, s.memory_mb_max),
        ("timeout", timeout, s.timeout_max),
        ("cpu_timeout", cpu or 0, s.timeout_max),
        ("idle_timeout", idle, s.session_idle_timeout_max),
        ("max_lifetime", life, s.session_lifetime_max),
    ):
        if value > maximum:
            raise RequestError(422, f"{name} {value:g} exceeds the maximum {maximum:g}", name)
    if memory < MIN_MEMORY_MB:
        raise RequestError(422, f"memory_mb must be at least {MIN_MEMORY_MB}", "memory_mb")
    return SessionLimits(memory, timeout, cpu, idle, life, forks)


@dataclass
class _Session:
    id: str
    sandbox: SessionSandbox
    limits: SessionLimits
    created: float  # monotonic
    created_at: float  # unix time
    last_used: float  # monotonic
    tenant: str
    owner: str  # the scope of the caller that made it
    image: str = "default"  # the name of its operator image (exec_server.images)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    calls: int = 0
    forked_from: str | None = None  # the session it is a fork of
    language: str = "python"  # "bash": each call a fresh shell (guest/shell.py)

    def lifetime_left(self, now: float) -> float:
        return max(self.created + self.limits.max_lifetime - now, 0.0)

    def expires_in(self, now: float) -> float:
        idle_left = self.last_used + self.limits.idle_timeout - now
        return max(min(idle_left, self.lifetime_left(now)), 0.0)

    def expiry(self, now: float) -> str | None:
        """Why it has expired by ``now``, or None."""
        if self.lifetime_left(now) <= 0:
            return f"reached its maximum lifetime of {self.limits.max_lifetime:g} s"
        if now - self.last_used >= self.limits.idle_timeout:
            return f"idle for more than {self.limits.idle_timeout:g} s"
        return None

    def info(self, now: float) -> SessionInfo:
        lim = self.limits
        return SessionInfo(
            session_id=self.id,
            language=self.language,
            state="busy" if self.lock.locked() else "idle",
            image=self.image,
            memory_mb=lim.memory_mb,
            timeout=lim.timeout,
            cpu_timeout=lim.cpu_timeout,
            idle_timeout=lim.idle_timeout,
            max_lifetime=lim.max_lifetime,
            calls=self.calls,
            created_at=self.created_at,
            expires_in=round(self.expires_in(now), 3),
            lifetime_left=round(self.lifetime_left(now), 3),
            forked_from=self.forked_from,
        )


def ends_interpreter(result: SnippetResult, language: str) -> bool:
    """Whether a call's verdict ends its session: a limit kills a Python session's one
    interpreter, but a shell session's call is a bash of its own (guest/shell.py), killed with
    whatever it started, and the next call starts from the state the last call left."""
    return result.status not in LIVE and language == "python"


def lost_reason(result: SnippetResult) -> str:
    """Why a call's verdict ends its session."""
    if result.reason:
        return result.reason
    return f"the interpreter exited with code {result.exit_code}"


LANGUAGE_NAMES = {"python": "Python", "bash": "bash"}


def refuse_other_language(req: ExecuteRequest, language: str) -> None:
    """A call in another language than its session's is a 422 (C code is never run as Python,
    Python never as bash); a call that names none runs in the session's."""
    if "language" in req.model_fields_set and req.language != language:
        raise RequestError(
            422, f"this session runs {LANGUAGE_NAMES[language]} only, not {req.language!r}"
        )


def refuse_one_shot_fields(req: ExecuteRequest) -> None:
    """Fields that only a one-shot run can honour are a 422 in a session, never silently
    ignored (files that never arrive, a stateful call answered from a cache)."""
    unusable = [
        name
        for name, given in (
            ("files", bool(req.files)),
            ("fetch_files", bool(req.fetch_files)),
            ("cache", req.cache),
            ("compile_timeout", req.compile_timeout is not None),
            ("isolation", req.isolation is not None),
            ("image", req.image is not None),
        )
        if given
    ]
    if unusable:
        raise RequestError(422, f"not accepted in a session: {', '.join(unusable)}")


class SessionIds:
    """Session ids that say where they were made: 32 hex digits, the first 6 naming the
    service instance, the next 6 this run of it, the rest random (80 bits). An id of this
    instance but of an earlier run is a session a restart lost (410 ``session_lost``, no
    reward), never a 404 that would read as the caller's mistake; an id of another instance
    (a call sent to the wrong node) stays a 404."""

    def __init__(self, instance: str) -> None:
        self.instance = hashlib.sha256(instance.encode()).hexdigest()[:6]
        self.run = secrets.token_hex(3)

    def new(self) -> str:
        return self.instance + self.run + secrets.token_hex(10)

    def of_an_earlier_run(self, session_id: str) -> bool:
        return (
            len(session_id) == 32
            and session_id.startswith(self.instance)
            and not session_id.startswith(self.instance + self.run)
            and all(c in "0123456789abcdef" for c in session_id)
        )


class SessionManager:
    """Every open session of the service, its limits and its expiry.

    Sessions run on the engine: each in a sandbox of its own from the primary backend, each
    call in a running slot of its admission, none made while its backend is down. The engine
    keeps them (``Engine.attach``): spared by its reaper, expired by ``run_upkeep``, closed at
    its stop."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.settings = engine.settings
        self.backend = engine.backend
        self.admission = engine.admission
        self._open: dict[str, _Session] = {}
        self._creating: Counter[str] = Counter()  # per tenant: sessions being made
        # id -> (why, whose failure, owner) of lost and expired sessions
        self._gone: OrderedDict[str, tuple[str, Failure | None, str]] = OrderedDict()
        self._removing: dict[str, SessionSandbox] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.ids = SessionIds(engine.settings.instance_label)
        self.pools = self._warm_pools()

    def _warm_pools(self) -> dict[str, SessionPool]:
        """The warm pools by image name: each image's ``session_pool_size``, the default
        image first, at most ``max_sessions`` warm in all (an image given none has no pool)."""
        s = self.settings
        left = s.max_sessions
        pools: dict[str, SessionPool] = {}
        for image in self.engine.images:
            size = min(image.session_pool_size, left)
            if size == 0:
                continue
            left -= size
            pools[image.name] = self._pool(image, size)
        return pools

    def _pool(self, image: OperatorImage, size: int) -> SessionPool:
        """A warm pool of ``image``: its sandboxes made with its default limits."""
        limits = image.settings
        template = sandbox_spec(
            limits.memory_mb_default, limits.session_lifetime_default, self.settings, ""
        )
        return SessionPool(
            self.engine.backend_for(image),
            template,
            size,
            image=image.name,
            new_id=self.ids.new,
            # as the engine pauses its pools: the backend down, or the image not checked
            can_make=lambda: self.engine.health.ok and image.serving,
            parallel=self.settings.warmup_parallelism,
        )

    # -- bookkeeping ---------------------------------------------------------------------
    @property
    def open_count(self) -> int:
        return len(self._open)

    def readiness(self) -> dict[str, Any]:
        """Its part of ``/readyz``."""
        return {
            "sessions_open": self.open_count,
            "session_pool_ready": {name: p.ready_count for name, p in self.pools.items()},
            "session_pool_size": {name: p.size for name, p in self.pools.items()},
        }

    def sandbox_ids(self) -> set[str]:
        """Sandboxes the sessions hold (open ones and those being removed): not orphans."""
        warm = set().union(*(pool.sandbox_ids() for pool in self.pools.values()))
        return {s.sandbox.id for s in self._open.values()} | set(self._removing) | warm

    def _count(self) -> None:
        metrics.SESSIONS_OPEN.set(len(self._open))

    def _find(self, session_id: str, owner: str) -> _Session:
        """``owner``'s open session ``session_id``; SessionGone, SessionNotFound (also for a
        session another caller owns)."""
        session = self._open.get(session_id)
        if session is not None and session.owner == owner:
            return session
        gone = self._gone.get(session_id)
        if gone is not None and gone[2] == owner:
            why, failure, _owner = gone
            raise SessionGone(f"session {session_id} {why}", failure)
        if self.ids.of_an_earlier_run(session_id):
            restarted = "is lost: the service restarted since it was made"
            raise SessionGone(
                f"session {session_id} {restarted}", Failure.of(FailureCode.SESSION_LOST)
            )
        raise SessionNotFound(f"no session {session_id!r} (never made, or deleted)")

    def _forget(
        self, session: _Session, why: str | None, failure: Failure | None = None
    ) -> asyncio.Task[None] | None:
        """Close ``session`` now (``why`` and ``failure``: remembered for 410 answers) and
        remove its sandbox in the background; the removal's task."""
        if self._open.pop(session.id, None) is None:
            return None
        if why is not None:
            self._gone[session.id] = (why, failure, session.owner)
            while len(self._gone) > GONE_KEPT:
                self._gone.popitem(last=False)
        self._count()
        self._removing[session.sandbox.id] = session.sandbox
        task = asyncio.ensure_future(self._remove(session.sandbox))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _remove(self, sandbox: SessionSandbox) -> None:
        try:
            await sandbox.discard()
        except Exception:  # the reaper removes what is left
            log.exception("removing session sandbox %s failed", sandbox.id[:12])
        finally:
            self._removing.pop(sandbox.id, None)

    async def drain(self) -> None:
        """Wait for every removal under way."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- the API -------------------------------------------------------------------------
    async def create(self, req: SessionCreateRequest, owner: str) -> SessionInfo:
        """A new session of ``owner`` (a caller's scope), counted in its tenant's quota."""
        image = self.engine.image(req.image)
        limits = resolve_session_limits(req, image.settings)
        tenant = current_tenant.get()
        self._admit(tenant)
        self.engine.check_available(image)
        # The id is made first, so the sandbox carries it (a container label) from the start;
        # a warm sandbox was made with the id of the session it serves.
        spec = sandbox_spec(
            limits.memory_mb,
            limits.max_lifetime,
            self.settings,
            self.ids.new(),
            limits.max_forks,
            req.language,
        )
        pool = self.pools.get(image.name)
        warm = pool.take(spec) if pool is not None else None
        if warm is not None:
            session_id, sandbox = warm.session_id, warm.sandbox
            metrics.SESSION_SANDBOXES.labels("warm").inc()
        else:
            session_id = spec.session_id
            self._creating[tenant] += 1
            try:
                sandbox = await self.engine.backend_for(image).create_session(spec)
            except SandboxError as exc:
                raise ServiceUnavailable(f"cannot start a session: {exc}") from exc
            finally:
                self._creating[tenant] -= 1
            metrics.SESSION_SANDBOXES.labels("cold").inc()
        now = time.monotonic()
        session = _Session(
            session_id, sandbox, limits, now, time.time(), now, tenant, owner, image.name
        )
        session.language = req.language
        self._open[session.id] = session
        metrics.SESSIONS_CREATED.inc()
        self._count()
        return session.info(now)

    def _admit(self, tenant: str) -> None:
        """Refuse a new session (429) past the service's or ``tenant``'s quota."""
        if len(self._open) + self._creating.total() >= self.settings.max_sessions:
            raise Overloaded(f"{self.settings.max_sessions} sessions open: the maximum")
        held = self._creating[tenant] + sum(s.tenant == tenant for s in self._open.values())
        if held >= self.settings.sessions_per_tenant:
            raise Overloaded(f"this tenant holds {held} sessions: its quota")

    async def fork(self, session_id: str, owner: str) -> SessionInfo:
        """A new session of ``owner``: a copy of its session ``session_id``'s interpreter
        and files (``session_forks``), with its own limits' clocks, counted like a new one."""
        parent = self._find(session_id, owner)
        self._admit(parent.tenant)
        await self._take_turn(parent)
        try:
            self._find(session_id, owner)
            self._expire_if_due(parent)
            if parent.limits.max_forks == 0:
                raise RequestError(409, f"session {parent.id} was made with max_forks 0")
            self._creating[parent.tenant] += 1
            try:
                async with self.admission.slot():
                    parent.sandbox, sandbox = await session_forks.fork(parent.sandbox)
            except session_forks.ForkRefused as exc:
                raise RequestError(409, str(exc)) from None
            except SandboxError as exc:
                failure = Failure.of(FailureCode.SESSION_LOST)
                self._lose(parent, f"its sandbox failed: {exc}", "sandbox_error", failure)
                self._find(session_id, owner)  # raises SessionGone
                raise
            finally:
                self._creating[parent.tenant] -= 1
        finally:
            parent.lock.release()
        now = time.monotonic()
        fork = _Session(
            self.ids.new(),
            sandbox,
            parent.limits,
            now,
            time.time(),
            now,
            parent.tenant,
            owner,
            parent.image,
        )
        fork.forked_from = parent.id
        self._open[fork.id] = fork
        metrics.SESSIONS_CREATED.inc()
        self._count()
        return fork.info(now)

    def info(self, session_id: str, owner: str) -> SessionInfo:
        session = self._find(session_id, owner)
        self._expire_if_due(session)
        return session.info(time.monotonic())

    async def delete(self, session_id: str, owner: str) -> None:
        """Remove the session and wait until its sandbox is gone (a lost or expired one is
        forgotten)."""
        gone = self._gone.get(session_id)
        if gone is not None and gone[2] == owner:
            del self._gone[session_id]
            return
        removal = self._forget(self._find(session_id, owner), None)
        if removal is not None:
            await asyncio.shield(removal)  # a caller that goes away does not stop the removal

    async def execute(
        self, session_id: str, req: ExecuteRequest, request_id: str, owner: str
    ) -> SessionExecuteResponse:
        refuse_one_shot_fields(req)
        session = self._find(session_id, owner)
        refuse_other_language(req, session.language)
        await self._take_turn(session)
        try:
            self._find(session_id, owner)  # deleted, lost or expired while this call waited
            self._expire_if_due(session)
            return await self._call(session, req, request_id)
        finally:
            session.lock.release()

    @asynccontextmanager
    async def turn(self, session_id: str, owner: str) -> AsyncIterator[_Session]:
        """``owner``'s session, held between calls as a call holds it (409 while one runs,
        404 and 410 as for a call), for work that runs no code (its files); a sandbox that
        fails meanwhile, or work abandoned half done, loses the session (410 ``session_lost``)."""
        session = self._find(session_id, owner)
        await self._take_turn(session)
        try:
            self._find(session_id, owner)  # deleted, lost or expired while this waited
            self._expire_if_due(session)
            lost = Failure.of(FailureCode.SESSION_LOST)
            try:
                yield session
            except SandboxError as exc:
                metrics.SANDBOX_ERRORS.inc()
                self._lose(session, f"its sandbox failed: {exc}", "sandbox_error", lost)
                self._find(session.id, session.owner)  # raises SessionGone
            except asyncio.CancelledError:
                self._lose(session, "a file request was abandoned while it ran", "abandoned", lost)
                raise
            session.last_used = time.monotonic()
        finally:
            session.lock.release()

    async def _take_turn(self, session: _Session) -> None:
        """Hold the session's lock: at once, or within ``session_call_wait``; else 409."""
        wait = self.settings.session_call_wait
        if not session.lock.locked():
            await session.lock.acquire()
            return
        busy = f"session {session.id} is running another call"
        if wait <= 0:
            raise SessionBusy(busy)
        try:
            await asyncio.wait_for(session.lock.acquire(), wait)
        except TimeoutError:
            raise SessionBusy(f"{busy} (waited {wait:g} s)") from None

    def _expire_if_due(self, session: _Session) -> None:
        why = session.expiry(time.monotonic())
        if why is not None:
            self._expire(session, why)
            self._find(session.id, session.owner)  # raises SessionGone

    def _expire(self, session: _Session, why: str) -> None:
        metrics.SESSIONS_EXPIRED.labels("lifetime" if "lifetime" in why else "idle").inc()
        log.info("session %s expired: %s", session.id, why)
        self._forget(session, f"expired: {why}", Failure.of(FailureCode.SESSION_EXPIRED))

    async def _call(
        self, session: _Session, req: ExecuteRequest, request_id: str
    ) -> SessionExecuteResponse:
        lim = session.limits
        if req.memory_mb is not None and req.memory_mb != lim.memory_mb:
            raise RequestError(
                422,
                f"memory_mb is fixed per session ({lim.memory_mb} MiB); "
                "give it when creating the session",
            )
        defaults = {
            "timeout": req.timeout if req.timeout is not None else lim.timeout,
            "cpu_timeout": req.cpu_timeout if req.cpu_timeout is not None else lim.cpu_timeout,
            "memory_mb": lim.memory_mb,
        }
        image_settings = self.engine.image(session.image).settings  # its image's maxima
        limits = resolve_limits(req.model_copy(update=defaults), image_settings)
        job = Job(code=req.code, stdin=req.input, limits=limits)
        result: SnippetResult | None = None
        async with self.admission.slot():
            try:
                observation = await session.sandbox.run(job)
                if session.language == "bash":  # an exec'd program, as in a one-shot run
                    observation = out_of_memory(observation, limits)
                result = decide(observation, limits)
            except (SandboxError, NotAVerdict) as exc:
                # Never retried: the interpreter's state is gone with its sandbox. The call and
                # every later one answer 410 session_lost (infrastructure: no reward).
                metrics.SANDBOX_ERRORS.inc()
                why = f"its sandbox failed: {exc}"
                self._lose(session, why, "sandbox_error", Failure.of(FailureCode.SESSION_LOST))
                self._find(session.id, session.owner)  # raises SessionGone
            finally:
                if result is None and session.id in self._open:  # cancelled mid-call
                    self._lose(
                        session,
                        "a call was abandoned while it ran",
                        "abandoned",
                        Failure.of(FailureCode.SESSION_LOST),
                    )
        now = time.monotonic()
        session.calls += 1
        session.last_used = now
        lost = None
        if session.sandbox.ended or ends_interpreter(result, session.language):
            lost = lost_reason(result)
            self._lose(session, lost, result.status.value)
        metrics.observe_run(result)
        answer = to_response(result, request_id)
        return SessionExecuteResponse(
            **answer.model_dump(),
            session_id=session.id,
            expires_in=0.0 if lost else round(session.expires_in(now), 3),
            lifetime_left=0.0 if lost else round(session.lifetime_left(now), 3),
            session_lost=lost,
        )

    def _lose(
        self, session: _Session, why: str, status: str, failure: Failure | None = None
    ) -> None:
        """Lose ``session``: by its code's own act (``failure`` None, logged at INFO like any
        verdict) or through the infrastructure (a WARNING with the cause)."""
        if session.id not in self._open:
            return
        metrics.SESSIONS_LOST.labels(status).inc()
        if failure is None:
            log.info("session %s lost: %s", session.id, why)
        else:
            log.warning("session %s lost (%s): %s", session.id, failure.code, why)
        self._forget(session, f"is lost: {why}", failure)

    # -- upkeep --------------------------------------------------------------------------
    def expire_due(self) -> int:
        """Expire every idle session past its idle time or lifetime; how many."""
        now = time.monotonic()
        due = [
            (s, why)
            for s in list(self._open.values())
            if not s.lock.locked() and (why := s.expiry(now)) is not None
        ]
        for session, why in due:
            self._expire(session, why)
        return len(due)

    async def run_upkeep(self) -> None:
        """Keep the warm pools filled, and expire due sessions every
        ``session_check_interval`` seconds, until cancelled."""
        await asyncio.gather(self._expire_loop(), *(p.run() for p in self.pools.values()))

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.session_check_interval)
            try:
                self.expire_due()
            except Exception:  # upkeep must survive anything
                log.exception("session expiry failed")

    async def close_all(self) -> None:
        """Remove every session and warm sandbox (service stop) and wait until their
        sandboxes are gone."""
        for pool in self.pools.values():
            await pool.stop()
        stopped = Failure.of(FailureCode.SESSION_LOST)
        for session in list(self._open.values()):
            self._forget(session, "is lost: the service stopped", stopped)
        await self.drain()
