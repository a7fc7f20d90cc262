"""Snapshots of episodes: a fork of an episode's boxed session kept under an unguessable id,
so that a later ``reset(snapshot=id)`` starts its episode from that saved state (its own fork
of it: the snapshot stays as it was, and many episodes may start from it).

The environment server has no caller identity of its own (every episode talks to boxed with
the server's one key), so a snapshot is scoped by its id: 128 random bits, told only to the
episode that took it. A snapshot is a boxed session: boxed counts it (``BOXED_MAX_SESSIONS``,
the container's ``max_forks``) and expires it when idle like any other; one gone is forgotten
on its next use.
"""

from __future__ import annotations

import secrets
import threading

from boxed_client import BoxedHTTPError, Session

# Answers about a snapshot's session that say it is no more (deleted, expired, lost).
_GONE = frozenset({404, 410})


class SnapshotNotFound(LookupError):
    """No snapshot has this id (never taken here, released, or its session is gone)."""


class _Held:
    """One snapshot: its session, and a lock (a session forks one request at a time)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.lock = threading.Lock()


class Snapshots:
    """The environment server's snapshots, shared by its episodes (thread-safe)."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def take(self, session: Session) -> str:
        """Fork ``session`` and keep the fork: its new snapshot id. Raises what
        :meth:`Session.fork` raises (409 when it cannot fork: made without ``max_forks``,
        every fork taken, threads left running)."""
        snapshot_id = secrets.token_urlsafe(16)
        fork = session.fork()
        with self._lock:
            self._held[snapshot_id] = _Held(fork)
        return snapshot_id

    def fork(self, snapshot_id: str) -> Session:
        """A new session forked from the snapshot (open; the caller closes it).
        :class:`SnapshotNotFound` when there is none, or its session is gone."""
        with self._lock:
            held = self._held.get(snapshot_id)
        if held is None:
            raise SnapshotNotFound(f"no snapshot {snapshot_id!r}")
        with held.lock:
            try:
                return held.session.fork()
            except BoxedHTTPError as exc:
                if exc.status_code not in _GONE:
                    raise
                self._forget(snapshot_id)
                raise SnapshotNotFound(f"snapshot {snapshot_id!r} is gone: {exc.message}") from exc

    def release(self, snapshot_id: str) -> bool:
        """Delete the snapshot's session; whether there was one."""
        held = self._forget(snapshot_id)
        if held is not None:
            _close(held.session)
        return held is not None

    def close(self) -> None:
        """Delete every snapshot's session (the server is stopping)."""
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for one in held:
            _close(one.session)

    def _forget(self, snapshot_id: str) -> _Held | None:
        with self._lock:
            return self._held.pop(snapshot_id, None)


def _close(session: Session) -> None:
    try:
        session.close()
    except Exception:  # noqa: BLE001 - gone already; boxed expires what it cannot reach
        pass
