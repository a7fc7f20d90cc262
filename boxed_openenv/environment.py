"""The environment: one boxed session per episode, reward from the scorer."""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from exec_server.client import BoxedError, BoxedHTTPError, Client, Session
from scorer.equivalence import verify

from .models import CodeAction, CodeObservation, CodeState, Task


class BoxedCodeEnvironment(Environment[CodeAction, CodeObservation, CodeState]):
    """Runs each step's code in the episode's boxed session (state kept between steps, OS
    isolation from boxed), and grades a final answer against the task's gold.

    ``openenv-core`` makes one per WebSocket (an episode per socket), and one per HTTP
    ``/reset`` or ``/step`` request: a ``step()`` without ``reset()`` opens a session of its
    own, which ``close()`` deletes."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, client: Client | None = None, **session_limits: Any) -> None:
        super().__init__()
        self._client = client or Client()
        self._owns_client = client is None
        self._limits = session_limits
        self._session: Session | None = None
        self._task: Task | None = None
        self._state = CodeState()

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="boxed_code",
            description="Python in a persistent boxed session per episode; the reward is the "
            "scorer's grade of the final answer.",
        )

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> CodeObservation:
        self._close_session()
        self._task = Task.model_validate(task) if task is not None else None
        session = self._open()
        self._state = CodeState(
            episode_id=episode_id or uuid.uuid4().hex,
            session_id=session.id,
            task_id=self._task.id if self._task else None,
        )
        return CodeObservation(prompt=self._task.prompt if self._task else None)

    def step(
        self, action: CodeAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CodeObservation:
        if self._state.done:
            return CodeObservation(status="lost", done=True, reward=0.0, error="episode is over")
        session = self._session or self._open()
        self._state.step_count += 1
        if not action.code and action.answer is None:
            return CodeObservation(status="ready", reward=0.0, error="no code and no answer")
        obs = CodeObservation(status="answered", reward=0.0)
        if action.code:
            obs = self._run(session, action.code, action.timeout or timeout_s)
        if action.answer is not None and obs.status != "lost":
            obs.correct, obs.reward = self._grade(action.answer)
            obs.done = True
        self._state.done = obs.done
        return obs

    def _run(self, session: Session, code: str, timeout: float | None) -> CodeObservation:
        try:
            result = session.execute(code, timeout=timeout)
        except BoxedHTTPError as exc:  # 410: the session is lost or expired
            return CodeObservation(status="lost", error=exc.message, done=True, reward=0.0)
        except BoxedError as exc:
            return CodeObservation(status="lost", error=str(exc), done=True, reward=0.0)
        return CodeObservation(
            stdout=result.stdout,
            stderr=result.stderr,
            exit_code=result.exit_code,
            status=result.status,
            reason=result.reason,
            error=result.session_lost,
            done=result.session_lost is not None,
            reward=0.0,
        )

    def _grade(self, answer: str) -> tuple[bool, float]:
        """(correct, reward) of a final answer: the scorer against the gold, or the task's
        tests run after it in a fresh sandbox. No task: nothing to grade against."""
        task = self._task
        if task is None or (task.answer is None and task.tests is None):
            return False, 0.0
        if task.answer is not None:
            correct = verify(answer, task.answer).correct
        else:
            # The tests passed only if the program got past them: its last line is a token
            # chosen now, which an answer that exits early (os._exit(0)) never prints.
            token = secrets.token_hex(16)
            program = f"{answer}\n\n{task.tests}\n\nprint({token!r})\n"
            result = self._client.execute(program)
            lines = result.stdout.splitlines()
            correct = result.status == "ok" and bool(lines) and lines[-1] == token
        return correct, 1.0 if correct else 0.0

    @property
    def state(self) -> CodeState:
        return self._state

    def _open(self) -> Session:
        self._session = self._client.session(**self._limits).open()
        self._state.session_id = self._session.id
        return self._session

    def _close_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            try:
                session.close()
            except BoxedError:
                pass  # gone already; the service expires what it cannot reach

    def close(self) -> None:
        self._close_session()
        if self._owns_client:
            self._client.close()
