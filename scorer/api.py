"""What the service's ``POST /score`` and ``POST /score/batch`` routes call: dict in, dict out.

Both are blocking (the equivalence check may take up to ``timeout`` seconds per answer), so the
route runs them off the event loop. A caller mistake raises :class:`ScoreInputError` (a
``ValueError``) with a message fit for a 4xx answer; anything about one item of a batch becomes
that item's ``error`` row instead, so one bad item never fails the others. Result rows are CLI
output rows (the one row schema, :class:`scorer.row.GradedRow`); ``file`` is always ``None``
and ``line`` is the item's 1-based position in a batch (``None`` for ``/score``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scorer.grading import (
    GradeOptions,
    error_row,
    grade_record,
    grade_trajectory,
    summarize,
)
from scorer.outcome import Failure, FailureCode
from scorer.rewards import RewardConfig, reward_config
from scorer.row import GradedRow
from scorer.trajectories import parse_record
from scorer.verdict import DEFAULT_TIMEOUT, Reason

MAX_TIMEOUT = 30.0
MAX_BATCH_ITEMS = 1000
_OPTION_KEYS = ("preset", "timeout", "rewards")


class ScoreInputError(ValueError):
    """The caller's mistake (the service answers 422). Any other exception out of grading is
    a bug, not the caller's fault (the service answers 500)."""


ScoreRow = GradedRow  # the name this module gave the row before scorer.row held it


class ScoreBatchRequest(BaseModel):
    """Body of ``POST /score/batch``; each item is one trajectory record in any supported
    format, with its gold inside, and may carry its own ``preset``."""

    model_config = ConfigDict(extra="forbid")

    items: list[dict[str, Any]] = Field(max_length=MAX_BATCH_ITEMS)
    preset: str | None = Field(default=None, description="'binary' (default) or 'interleaved'")
    timeout: float | None = Field(default=None, description="Seconds per answer check.")
    rewards: dict[str, float | None] | None = Field(
        default=None,
        description="Overrides: correct_reward, wrong_reward, format_reward, tool_bonus, "
        "timeout_reward (null or absent: a grader timeout has no reward).",
    )


class ScoreBatchResponse(BaseModel):
    results: list[GradedRow]
    summary: dict[str, Any]


def _options(body: Mapping[str, Any], *, default_preset: str | None = None) -> GradeOptions:
    """Grading options from the ``preset``/``timeout``/``rewards`` keys; ``ValueError`` when
    one is invalid."""
    preset = body.get("preset", default_preset) or "binary"
    if not isinstance(preset, str):
        raise ScoreInputError("'preset' must be a string: 'binary' or 'interleaved'")
    rewards = body.get("rewards") or {}
    if isinstance(rewards, list):
        rewards = {}  # a trace's own per-step rewards, not reward settings
    if not isinstance(rewards, Mapping):
        raise ScoreInputError("'rewards' must be an object of reward values")
    try:
        cfg: RewardConfig = reward_config(preset, **dict(rewards))
    except ValueError as e:
        raise ScoreInputError(str(e)) from None
    timeout = body.get("timeout")
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        raise ScoreInputError(f"'timeout' must be a number of seconds in (0, {MAX_TIMEOUT:g}]")
    return GradeOptions(rewards=cfg, timeout=float(timeout))


def score(body: Any) -> dict[str, Any]:
    """Grade one trajectory: any supported record with its gold inside, e.g.
    ``{"response": "...\\boxed{42}", "answer": 42, "preset": "interleaved"}``.

    Returns one result row. Raises :class:`ScoreInputError` (-> 422) for a body that is not an
    object, an unknown preset or reward setting, a bad timeout, a record in no known format, a
    record without gold, or an Atropos group (several rollouts: send it to :func:`score_batch`).
    A verify timeout is a row with status ``timeout``, not an exception.
    """
    if not isinstance(body, Mapping):
        raise ScoreInputError("the body must be a JSON object holding one trajectory")
    options = _options(body)
    try:
        traj = parse_record(body)
    except ValueError as e:
        raise ScoreInputError(str(e)) from None
    if traj.group:
        raise ScoreInputError(
            f"this is an Atropos group of {len(traj.rollouts)} rollouts: "
            "send it as one item of POST /score/batch"
        )
    if traj.gold is None:
        raise ScoreInputError(
            "no gold answer: add 'answer' (or expected_answer, gold, ground_truth, solution, "
            "label, reward_model.ground_truth)"
        )
    return grade_trajectory(traj, options)[0]


def score_batch(body: Any) -> dict[str, Any]:
    """Grade many trajectories: ``{"items": [...], "preset"?, "timeout"?, "rewards"?}`` ->
    ``{"results": [row, ...], "summary": {...}}``, rows in item order (an Atropos group item
    gives one row per rollout).

    Raises :class:`ScoreInputError` (-> 422) only for the envelope: not an object, ``items`` not a
    list or longer than :data:`MAX_BATCH_ITEMS`, unknown top-level keys, or invalid batch-level
    options. A bad item (not an object, unknown format, no gold, bad per-item ``preset``)
    becomes an ``error`` row with a message.
    """
    options = batch_options(body)
    rows: list[dict[str, Any]] = []
    for n, item in enumerate(body["items"], 1):
        rows.extend(score_item(body, options, item, n))
    return {"results": rows, "summary": summarize(rows, options.rewards)}


def batch_options(body: Any) -> GradeOptions:
    """The batch-level options of a ``score_batch`` body, after checking its envelope (cheap:
    no item is read). Raises :class:`ScoreInputError` as :func:`score_batch` does."""
    if not isinstance(body, Mapping):
        raise ScoreInputError('the body must be a JSON object: {"items": [...]}')
    unknown = sorted(set(body) - {"items", *_OPTION_KEYS})
    if unknown:
        raise ScoreInputError(f"unknown keys {unknown}: expected items, preset, timeout, rewards")
    items = body.get("items")
    if not isinstance(items, list):
        raise ScoreInputError("'items' must be a list of trajectory records")
    if len(items) > MAX_BATCH_ITEMS:
        raise ScoreInputError(f"at most {MAX_BATCH_ITEMS} items per batch, got {len(items)}")
    return _options(body)


def score_item(
    body: Mapping[str, Any], options: GradeOptions, item: Any, n: int
) -> list[dict[str, Any]]:
    """The rows of item ``n`` (1-based) of a batch ``body`` whose options are ``options``: one
    item is the unit the service grades under one deadline."""
    item_options = options
    if isinstance(item, Mapping) and item.get("preset") not in (None, options.rewards.preset):
        try:
            item_options = _options(
                {**body, "preset": item["preset"]}, default_preset=options.rewards.preset
            )
        except ValueError as e:
            return [_item_error(str(e), item, n)]
    return grade_record(item, item_options, line=n)


def score_item_packed(args: tuple[Mapping[str, Any], GradeOptions, Any, int]) -> list[dict]:
    """:func:`score_item` with its arguments in one tuple (what a worker pool hands over)."""
    return score_item(*args)


def deadline_row(item: Any, n: int | None, seconds: float) -> dict[str, Any]:
    """The row of an item whose grading ran past the service's deadline of ``seconds``: a
    grader timeout (status ``timeout``, no reward), never a wrong answer."""
    rid = item.get("id") if isinstance(item, Mapping) else None
    rid = rid if isinstance(rid, str | int) and not isinstance(rid, bool) else n
    row = error_row(
        f"grading took more than {seconds:g} s",
        id=rid,
        line=n,
        failure=Failure.of(FailureCode.GRADER_TIMEOUT),
    )
    row.update(status="timeout", reasons=[Reason.TIMEOUT])
    return row


def _item_error(message: str, item: Any, n: int) -> dict[str, Any]:
    rid = item.get("id") if isinstance(item, Mapping) else None
    rid = rid if isinstance(rid, str | int) and not isinstance(rid, bool) else n
    return error_row(message, id=rid, line=n)
