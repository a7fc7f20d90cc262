"""The environment's action, observation, state and task (openenv-core's base models)."""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, model_validator

from exec_server.models import OUTCOME_DOC, FailureInfo
from scorer.outcome import OutcomeKind


class CodeAction(Action):
    """One step: Python code or a shell command to run, and/or the final answer (graded,
    ends the episode); or a snapshot of the episode's Python session."""

    code: str = Field(default="", description="Python run in the episode's session.")
    shell: str = Field(
        default="",
        description="Bash run in the episode's shell session (opened on first use; its "
        "working directory and environment kept between steps; its own sandbox, apart from "
        "the Python session's).",
    )
    snapshot: bool = Field(
        default=False,
        description="Fork the episode's Python session and keep the fork: the observation's "
        "snapshot_id, which reset(snapshot=...) starts a later episode from (the server must "
        "run with --max-forks).",
    )
    answer: str | None = Field(
        default=None,
        description="The final answer, graded against the task's gold; ends the episode.",
    )
    timeout: float | None = Field(default=None, gt=0, description="Wall-clock limit (s).")

    @model_validator(mode="after")
    def _one_thing_to_run(self) -> CodeAction:
        if sum((bool(self.code), bool(self.shell), self.snapshot)) > 1:
            raise ValueError("a step runs code, a shell command or a snapshot: one of them")
        if self.snapshot and self.answer is not None:
            raise ValueError("a snapshot step takes no answer")
        return self


class CodeObservation(Observation):
    """What the step's code did (boxed's verdict), or the task at reset. ``reward`` is None
    (no reward: mask the sample) whenever ``outcome`` is not ``"code"``."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    status: str = Field(
        default="ready",
        description="boxed's verdict (ok, error, timeout, memory_limit, output_limit); "
        "'ready' after reset (and after a step with nothing to do), 'answered' after a final "
        "answer alone, 'lost' when the session is gone (see outcome and failure for whose "
        "doing) and for every step after the episode ended.",
    )
    reason: str | None = Field(default=None, description="Why a limit ended the run.")
    error: str | None = Field(default=None, description="What went wrong with the step.")
    prompt: str | None = Field(default=None, description="The task's prompt (at reset).")
    snapshot_id: str | None = Field(
        default=None, description="The snapshot a snapshot step took (for reset(snapshot=...))."
    )
    correct: bool | None = Field(
        default=None,
        description="The final answer's grade (None: not graded, or the grader could not decide).",
    )
    outcome: OutcomeKind = Field(default=OutcomeKind.CODE, description=OUTCOME_DOC)
    failure: FailureInfo | None = Field(
        default=None,
        description="Why the step is not the code's verdict (code and retryable); null when it is.",
    )


class CodeState(State):
    """The episode: its boxed session and task."""

    session_id: str | None = None
    shell_session_id: str | None = None
    snapshot: str | None = Field(default=None, description="The snapshot the episode forked.")
    task_id: str | None = None
    done: bool = False


class Task(BaseModel):
    """A task for ``reset(task=...)``: a gold ``answer`` (graded by the scorer) or ``tests``
    (Python run after the submitted answer, as code, in a fresh one-shot sandbox: the reward
    is 1 when they pass)."""

    model_config = ConfigDict(extra="forbid")

    id: str = "task"
    prompt: str = ""
    answer: str | int | float | None = None
    tests: str | None = None
