"""What the sync and async sessions share: the id, the server it lives on, the bodies."""

from __future__ import annotations

from typing import Any, Self

from boxed_client.attempts import Attempts
from boxed_client.base import ClientBase
from boxed_client.bodies import execute_body
from boxed_client.errors import BoxedError
from boxed_client.models import SessionInfo


class SessionBase:
    """What the sync and async sessions share: the id, the server it lives on, the bodies."""

    def __init__(self, client: ClientBase, limits: dict[str, Any]) -> None:
        self.client = client
        self.limits = limits
        self.id: str | None = None
        self.info: SessionInfo | None = None  # as of the last answer about it
        self._pin: int | None = None
        # Its server did not answer the last call: close() forgets the session without waiting
        # for that server again (the server expires it, if it comes back).
        self.unreachable = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id or 'not open'})"

    def _path(self, tail: str = "") -> str:
        if self.id is None:
            raise BoxedError("the session is not open: use it in a with block, or open() it")
        return f"/sessions/{self.id}{tail}"

    def _opened(self, attempts: Attempts, data: Any) -> None:
        self.info = SessionInfo.model_validate(data)
        self.id = self.info.session_id
        self._pin = attempts.url_index

    def _fork_attempts(self) -> Attempts:
        """The attempts of ``POST /sessions/{id}/fork``: never replayed (a fork made twice
        would leave a session behind)."""
        return self._attempts("POST", self._path("/fork"), replay=False)

    def _forked(self, data: Any) -> Self:
        """The fork the server answered with: open, on this session's server."""
        fork = type(self)(self.client, dict(self.limits))
        fork.info = SessionInfo.model_validate(data)
        fork.id = fork.info.session_id
        fork._pin = self._pin
        return fork

    def _call(self, code: str, input: str, timeout: float | None) -> tuple[Attempts, dict]:
        body = execute_body({"code": code, "input": input, "timeout": timeout})
        # The call's limit: its own, else the session's (as asked, else as the server set it).
        limit = timeout or self.limits.get("timeout") or (self.info and self.info.timeout)
        read = self.client._exec_read_timeout({"timeout": limit}, rerun=False)
        code_time = self.client._exec_code_time({"timeout": limit})
        attempts = self._attempts("POST", self._path("/execute"), read, replay=False)
        attempts.code_time = code_time
        return attempts, body

    def _attempts(
        self, method: str, path: str, read: float | None = None, *, replay: bool = True
    ) -> Attempts:
        """The attempts of a call of this session: on its server only, never elsewhere."""
        read = read if read is not None else self.client.read_timeout
        return Attempts(self.client, method, path, read, pin=self._pin, replay=replay, session=self)

    def _forget_unreachable(self) -> bool:
        """Forget the session if its server did not answer its last call (see close())."""
        if self.unreachable:
            self.id = None
        return self.id is None
