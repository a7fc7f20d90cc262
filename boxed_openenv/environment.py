"""The environment: one boxed session per episode, reward from the scorer.

A reward is only ever the code's own result. A step whose session the infrastructure lost
(its sandbox died, it expired) or whose grading failed ends the episode with ``reward=None``
and the failure in the observation (``outcome``, ``failure``); when boxed cannot be reached
or is overloaded, ``reset`` and ``step`` raise :class:`EnvUnavailable` instead.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from boxed_client import BoxedError, BoxedHTTPError, BoxedUnavailable, Client, Session
from exec_server.models import FailureInfo
from scorer.equivalence import verify
from scorer.outcome import Failure, FailureCode, OutcomeKind
from scorer.verdict import DEFAULT_TIMEOUT

from . import frames
from .failures import EnvUnavailable, failure_of, grader_failure, retry_after_of
from .models import CodeAction, CodeObservation, CodeState, Task
from .snapshots import Snapshots

log = logging.getLogger("boxed.openenv")

# Answers to a session call that say it did not run (boxed was overloaded): the session is
# intact, and the step may be sent again.
_NOT_RUN = frozenset({429, 503})
# A fork refused by the session's own state (every fork taken, threads left running).
_FORK_REFUSED = 409


def failed(failure: Failure, error: str, status: str = "lost") -> CodeObservation:
    """The observation of a step that is not the code's doing: no reward, the episode over."""
    return CodeObservation(
        status=status,
        error=error,
        done=True,
        reward=None,
        outcome=failure.outcome,
        failure=FailureInfo(code=failure.code, retryable=failure.retryable),
    )


class BoxedCodeEnvironment(Environment[CodeAction, CodeObservation, CodeState]):
    """Runs each step's code in the episode's boxed session (state kept between steps, OS
    isolation from boxed), and grades a final answer against the task's gold.

    ``openenv-core`` makes one per WebSocket (an episode per socket), and one per HTTP
    ``/reset`` or ``/step`` request: a ``step()`` without ``reset()`` opens a session of its
    own, which ``close()`` deletes. ``executor``: where the server runs the blocking calls to
    boxed (default: the event loop's); ``grade_timeout``: seconds one answer check may take
    (the scorer's; past it the grade is no reward, ``grader_timeout``); ``snapshots``: the
    server's snapshots, shared by its episodes (a snapshot step keeps one, ``reset(snapshot=
    id)`` forks the episode's session from one; sessions need ``max_forks``)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        client: Client | None = None,
        executor: Executor | None = None,
        *,
        grade_timeout: float = DEFAULT_TIMEOUT,
        snapshots: Snapshots | None = None,
        **session_limits: Any,
    ) -> None:
        super().__init__()
        self._client = client or Client()
        self._owns_client = client is None
        self._executor = executor
        self._grade_timeout = grade_timeout
        self._limits = session_limits
        self._snapshots = snapshots if snapshots is not None else Snapshots()
        self._session: Session | None = None
        self._shell: Session | None = None
        self._calling: Session | None = None  # the session of the step's call
        self._task: Task | None = None
        self._state = CodeState()
        self._end: CodeObservation | None = None  # the step that ended the episode

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
        snapshot: str | None = None,
        **kwargs: Any,
    ) -> CodeObservation:
        """A new episode: a new session, or (``snapshot``: an id a snapshot step answered) a
        fork of that snapshot's, with its state. :class:`SnapshotNotFound` for an unknown
        one."""
        self._close_session()
        self._task = Task.model_validate(task) if task is not None else None
        self._end = None
        self._state = CodeState(
            episode_id=episode_id or uuid.uuid4().hex,
            task_id=self._task.id if self._task else None,
            snapshot=snapshot,
        )
        self._open(snapshot)
        return CodeObservation(prompt=self._task.prompt if self._task else None)

    def step(
        self, action: CodeAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CodeObservation:
        if self._state.done:
            return self._after_end()
        session = self._session or self._open()
        self._state.step_count += 1
        if action.snapshot:
            self._calling = session
            obs = self._snapshot(session)
            if obs.done:
                self._finish(obs)
            return obs
        if not action.code and not action.shell and action.answer is None:
            return CodeObservation(status="ready", reward=0.0, error="no code and no answer")
        obs = CodeObservation(status="answered", reward=0.0)
        if action.code:
            obs = self._run(session, action.code, action.timeout or timeout_s)
        elif action.shell:
            obs = self._run(
                self._shell or self._open_shell(), action.shell, action.timeout or timeout_s
            )
        if action.answer is not None and obs.outcome == OutcomeKind.CODE and obs.status != "lost":
            obs = self._graded(obs, action.answer)
        if obs.done:
            self._finish(obs)
        return obs

    # -- async entry points: openenv-core's server calls these on its event loop ---------------
    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task: dict[str, Any] | None = None,
        snapshot: str | None = None,
        **kwargs: Any,
    ) -> CodeObservation:
        return await self._off_loop(
            partial(
                self.reset, seed=seed, episode_id=episode_id, task=task, snapshot=snapshot, **kwargs
            )
        )

    async def step_async(
        self, action: CodeAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CodeObservation:
        return await self._off_loop(partial(self.step, action, timeout_s=timeout_s, **kwargs))

    async def _off_loop(self, call: Callable[[], CodeObservation]) -> CodeObservation:
        """``call`` in a thread (it blocks on boxed); an :class:`EnvUnavailable` it raises is
        noted for the WebSocket's error message, in this connection's context."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)
        except EnvUnavailable as exc:
            log.warning("boxed could not act (%s): %s", exc.failure.code, exc.detail)
            frames.note(exc)
            raise

    # -- the steps -------------------------------------------------------------------------
    def _run(self, session: Session, code: str, timeout: float | None) -> CodeObservation:
        self._calling = session
        try:
            result = session.execute(code, timeout=timeout)
        except BoxedError as exc:
            return self._call_failed(exc)
        failure = None if result.failure is None else Failure.of(result.failure.code)
        if result.outcome != OutcomeKind.CODE and failure is not None:
            return failed(failure, result.session_lost or result.reason or "the call failed")
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

    def _snapshot(self, session: Session) -> CodeObservation:
        """A snapshot step: the session forked and kept (``snapshot_id``). A fork the
        session's own state refuses (every fork taken, threads left running, no ``max_forks``)
        is an error of the step, the episode going on; boxed failing is a failed call."""
        try:
            snapshot_id = self._snapshots.take(session)
        except BoxedHTTPError as exc:
            if exc.status_code != _FORK_REFUSED:
                return self._call_failed(exc)
            return CodeObservation(status="refused", error=exc.message, reward=0.0)
        except BoxedError as exc:
            return self._call_failed(exc)
        return CodeObservation(status="ok", snapshot_id=snapshot_id, reward=0.0)

    def _call_failed(self, exc: BoxedError) -> CodeObservation:
        """The step of a session call boxed did not answer with a result. A 410 (the session
        is gone) ends the episode; a refusal before the call ran (overload) keeps the session
        and raises; no answer at all (the call may have run) ends it and raises."""
        failure = failure_of(exc)
        detail = exc.message if isinstance(exc, BoxedHTTPError) else str(exc)
        if failure is None:  # the session's own code ended it, in an answer we never saw
            return CodeObservation(status="lost", error=detail, done=True, reward=0.0)
        if isinstance(exc, BoxedHTTPError) and exc.status_code in _NOT_RUN:
            raise EnvUnavailable(detail, failure, retry_after_of(exc)) from exc
        if isinstance(exc, BoxedUnavailable) or failure.code == FailureCode.SERVICE_UNREACHABLE:
            self._finish(failed(failure, detail))
            raise EnvUnavailable(detail, failure, retry_after_of(exc)) from exc
        return failed(failure, detail)

    def _graded(self, obs: CodeObservation, answer: str) -> CodeObservation:
        """``obs`` with the final answer's grade: the reward, or no reward when the grading
        failed (the grader could not decide, or boxed could not run the tests)."""
        try:
            correct, failure = self._grade(answer)
        except BoxedError as exc:
            correct, failure = None, failure_of(exc) or Failure.of(FailureCode.INTERNAL_ERROR)
        if failure is not None:
            return failed(failure, f"the answer could not be graded ({failure.code})", obs.status)
        obs.correct, obs.reward, obs.done = correct, 1.0 if correct else 0.0, True
        return obs

    def _grade(self, answer: str) -> tuple[bool | None, Failure | None]:
        """(correct, failure) of a final answer: the scorer against the gold, or the task's
        tests run after it in a fresh sandbox. No task: nothing to grade against (wrong)."""
        task = self._task
        if task is None or (task.answer is None and task.tests is None):
            return False, None
        if task.answer is not None:
            verdict = verify(answer, task.answer, timeout=self._grade_timeout)
            failure = grader_failure(verdict)
            return (None, failure) if failure is not None else (verdict.correct, None)
        # The verdict is /judge's (a test script): never text the program could print, so an
        # answer that reads the program's text or its frames finds nothing to forge.
        result = self._client.judge(answer, test_script=task.tests)
        if result.outcome != OutcomeKind.CODE and result.failure is not None:
            return None, Failure.of(result.failure.code)
        return result.verdict == "accepted", None

    def _finish(self, obs: CodeObservation) -> None:
        """End the episode with ``obs``. A session the infrastructure lost is forgotten, not
        deleted: boxed has let it go already, or cannot be reached to (it expires it)."""
        self._state.done = True
        self._end = obs
        if obs.outcome == OutcomeKind.INFRASTRUCTURE and obs.status == "lost":
            if self._shell is not None and self._calling is self._shell:
                self._shell = None
            else:
                self._session = None

    def _after_end(self) -> CodeObservation:
        """A step after the episode ended: nothing runs. No reward again when the episode
        ended as a failure that was not the code's; else 0."""
        end = self._end
        error = "episode is over"
        if end is None or end.outcome == OutcomeKind.CODE or end.failure is None:
            return CodeObservation(status="lost", done=True, reward=0.0, error=error)
        failure = Failure(end.failure.code, end.failure.retryable)
        return failed(failure, f"{error}: {end.error}" if end.error else error)

    # -- the session -----------------------------------------------------------------------
    @property
    def state(self) -> CodeState:
        return self._state

    def _open(self, snapshot: str | None = None) -> Session:
        """A new session for the episode (a fork of ``snapshot``'s, when named);
        :class:`EnvUnavailable` when boxed cannot give one (unreachable, overloaded, no
        sandbox, every fork of the snapshot taken)."""
        session = self._boxed_session(snapshot)
        self._session = session
        self._state.session_id = session.id
        return session

    def _open_shell(self) -> Session:
        """The episode's shell session, opened on its first shell step."""
        limits = {k: v for k, v in self._limits.items() if k != "max_forks"}
        self._shell = self._boxed_session(None, language="bash", **limits)
        self._state.shell_session_id = self._shell.id
        return self._shell

    def _boxed_session(self, snapshot: str | None, **limits: Any) -> Session:
        """An open boxed session: a fork of the snapshot's, or a new one with ``limits`` (the
        environment's by default)."""
        try:
            if snapshot is not None:
                return self._snapshots.fork(snapshot)
            return self._client.session(**(limits or self._limits)).open()
        except BoxedError as exc:
            failure = failure_of(exc) or Failure.of(FailureCode.INTERNAL_ERROR)
            detail = exc.message if isinstance(exc, BoxedHTTPError) else str(exc)
            raise EnvUnavailable(
                f"boxed gave no session: {detail}", failure, retry_after_of(exc)
            ) from exc

    def _close_session(self) -> None:
        for session in (self._session, self._shell):
            if session is not None:
                try:
                    session.close()
                except BoxedError:
                    pass  # gone already; the service expires what it cannot reach
        self._session = self._shell = None

    def close(self) -> None:
        self._close_session()
        if self._owns_client:
            self._client.close()
