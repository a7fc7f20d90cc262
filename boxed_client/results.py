"""What the client returns: the wire's answer models with the properties a trainer reads.

Each result is the server's own answer model (:mod:`boxed_client.models`) plus a property or
two (``ok``, ``accepted``, ``pass_rate``), so a field added to the wire shows up here at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from boxed_client.errors import BoxedBatchError, BoxedError
from boxed_client.models import (
    Attributed,
    CalculateResponse,
    ExecuteRequest,
    ExecuteResponse,
    FailureInfo,
    JudgeResponse,
    SessionExecuteResponse,
)
from boxed_client.outcome import OutcomeKind


class ExecuteResult(ExecuteResponse):
    """What one snippet did (the server's ``ExecuteResponse``). A non-``ok`` status is the
    code's own outcome, not a client error."""

    @property
    def ok(self) -> bool:
        """The snippet ran to completion without an error, timeout or limit."""
        return self.status == "ok"


class SessionResult(SessionExecuteResponse):
    """What one call of a session did, and the session's time left (``session_lost`` says
    why the session ended, when this call ended it)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class JudgeResult(JudgeResponse):
    """``POST /judge``'s answer, with the share of tests passed (the usual code-RL reward)."""

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    @property
    def pass_rate(self) -> float:
        """``passed / total`` (a compile error passes none)."""
        return self.passed / self.total if self.total else 0.0


class CalculateResult(CalculateResponse):
    """Value of an arithmetic expression, or why it has none."""

    @property
    def ok(self) -> bool:
        return self.error is None


class ScoreResult(BaseModel):
    """Grade of one trajectory: the fields of the scorer's one row schema
    (``scorer.row.GradedRow``) a client reads, each with a default so an older server's row
    still parses; the row's other fields are kept as extras (``model_extra``). ``reward`` is
    ``None`` only on an ``error`` row; ``reasons`` are stable codes."""

    model_config = ConfigDict(extra="allow")

    reward: float | None
    correct: bool = False
    pred: str | None = None
    gold: Any = None
    status: str = ""
    reasons: list[str] = Field(default_factory=list)
    tool_calls: int = 0
    error: str | None = None
    # "grader" (with its failure) when the grader could not decide: no reward.
    outcome: OutcomeKind = OutcomeKind.CODE
    failure: FailureInfo | None = None


class ScoreBatch(BaseModel):
    """Answer of ``score_many``: one row per trajectory (an Atropos group gives one per
    rollout), in item order, and the batch summary."""

    results: list[ScoreResult]
    summary: dict[str, Any]


def reward_or_none(
    answer: Attributed | ScoreResult | BoxedError, reward: Callable[[Any], float | None]
) -> float | None:
    """``reward(answer)`` when ``answer`` is the code's own verdict; ``None`` (no reward: mask
    the sample, never a 0) when the infrastructure or the grader failed, whether that came
    back as an answer or was raised. An error that is nobody's verdict (a caller mistake, a
    4xx; a session its own code ended) is raised again: masking it would hide a bug.

    ``reward_or_none(result_or_exc, lambda judged: judged.pass_rate)``;
    ``reward_or_none(row_or_exc, lambda row: row.reward)`` for a :class:`ScoreResult`.
    """
    if isinstance(answer, BoxedError):
        if answer.outcome in (OutcomeKind.INFRASTRUCTURE, OutcomeKind.GRADER):
            return None
        raise answer
    return reward(answer) if answer.outcome == OutcomeKind.CODE else None


ExecuteItem: TypeAlias = str | ExecuteRequest | Mapping[str, Any]
"""One item of ``execute_many``: code alone, an :class:`ExecuteRequest`, or its JSON as a dict."""


def collect(
    outcomes: Sequence[ExecuteResult | BoxedError], return_exceptions: bool
) -> list[ExecuteResult | BoxedError]:
    """A batch's results in order; :class:`BoxedBatchError` if any failed, unless the errors
    are to be returned in place."""
    results = list(outcomes)
    if not return_exceptions and any(isinstance(r, BoxedError) for r in results):
        raise BoxedBatchError(results)
    return results
