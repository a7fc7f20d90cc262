"""The one schema of a graded row: what ``boxed-scorer grade`` prints per trajectory (per rollout
of an Atropos group), what ``POST /score`` answers and ``POST /score/batch`` lists, and what the
client reads back.

The grader builds rows as plain dicts with exactly :data:`ROW_KEYS`, in this order (the CLI
writes them as JSON lines without a validation pass); the HTTP layer and the client use
:class:`GradedRow` itself, and docs/scorer-cli.md's "Output rows" table is checked against it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

# Why a row carries no verdict of the model's answer: the wire's ``{code, retryable}``, whose one
# home is the client's package (stdlib and pydantic only, no httpx), so client and scorer agree.
from boxed_client.models import FailureInfo as RowFailure
from scorer.outcome import OutcomeKind


class GradedRow(BaseModel):
    """One graded trajectory (one rollout of an Atropos group)."""

    id: str | int | None = Field(description="the record's id, else its line number")
    group: str | int | None = Field(description="for an Atropos group: the group's id; else null")
    index: int | None = Field(
        description="for an Atropos group: the rollout's 0-based position; else null"
    )
    file: str | None = Field(description="where the record was read ('-' for stdin); else null")
    line: int | None = Field(description="1-based line of the record (item number in a batch)")
    format: str | None = Field(description="detected format (null when undetectable)")
    reward: float | None = Field(
        description="the preset's reward; null when the grader failed (timeout, error): no reward"
    )
    correct: bool = Field(description="true only when the answer was checked and right")
    pred: str | None = Field(
        description="the extracted answer (null when none, or on a format error)"
    )
    gold: Any = Field(description="the gold used (string, number, or list of them)")
    status: str = Field(
        description="correct, incorrect, no_answer, format_error, timeout or error "
        "(scorer.rewards.STATUSES)"
    )
    reasons: list[str] = Field(description="stable codes from scorer.verdict.Reason")
    tool_calls: int = Field(description="number of tool calls the assistant made")
    env_reward: float | None = Field(description="the reward the environment logged, when present")
    error: str | None = Field(
        description="message of an error row, or a timeout's detail; else null"
    )
    outcome: OutcomeKind = Field(
        description="'code': the answer's own verdict; 'grader': the grader failed (no reward)"
    )
    failure: RowFailure | None = Field(
        description="why the outcome is not the answer's ({code, retryable}); else null"
    )


ROW_KEYS: tuple[str, ...] = tuple(GradedRow.model_fields)
"""The keys of every row, in output order."""
