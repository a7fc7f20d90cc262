"""Reward presets: turn one assistant text and a gold answer into a reward and a status.

A preset fixes which box is the answer and what the format rules are; the reward values are
overridable. Statuses are exact so a training run can tell a wrong answer from a grader
problem: ``timeout`` (the equivalence check ran out of time) is never reported as
``incorrect``, and a grader failure (``timeout``, ``error``) is no reward (``None``, a mask)
unless the caller explicitly set ``timeout_reward``: a 0 there would teach a model that a right
answer the grader could not check was wrong. Each result says whose it is with the outcome
taxonomy of :mod:`scorer.outcome` (``outcome``/``failure``).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from scorer.answer import Found, find_answer
from scorer.extract import THINK_CLOSE, TOOL_CALL_OPEN, TOOL_RESPONSE_OPEN, mask_tool_blocks
from scorer.outcome import Failure, FailureCode, OutcomeKind, outcome_fields
from scorer.verdict import DEFAULT_TIMEOUT, Gold, Reason, Verdict

Preset = Literal["binary", "interleaved"]
PRESETS: tuple[str, ...] = ("binary", "interleaved")
Status = Literal["correct", "incorrect", "no_answer", "format_error", "timeout", "error"]
STATUSES: tuple[str, ...] = typing.get_args(Status)

VerifyFn = Callable[..., Verdict]


@dataclass(frozen=True)
class RewardConfig:
    """Reward values of one preset. ``timeout_reward`` is paid when the equivalence check
    timed out (status ``timeout``); by default it is ``None``: no reward, the sample is
    masked, because the grader failed, not the model."""

    preset: Preset = "binary"
    correct_reward: float = 1.0
    wrong_reward: float = 0.0
    format_reward: float = 0.0
    tool_bonus: float = 0.0
    timeout_reward: float | None = None
    # Without a box, read a final-answer phrase or the last math expression (scorer.answer).
    answer_fallback: bool = True

    @property
    def timeout_value(self) -> float | None:
        """The reward of a grader timeout: ``timeout_reward`` (``None`` unless set)."""
        return self.timeout_reward


_DEFAULTS: dict[str, RewardConfig] = {
    "binary": RewardConfig("binary", 1.0, 0.0, 0.0, 0.0),
    "interleaved": RewardConfig("interleaved", 1.0, -1.0, -1.0, 0.2, answer_fallback=False),
}


def reward_config(
    preset: str = "binary", *, answer_fallback: bool | None = None, **overrides: float | None
) -> RewardConfig:
    """The preset's default rewards with the non-``None`` ``overrides`` applied;
    ``answer_fallback`` (when given) turns the no-box fallback of :mod:`scorer.answer` on or
    off (default: on for ``binary``, off for ``interleaved``).

    Raises ``ValueError`` for an unknown preset or override name, or a non-finite value.
    """
    if preset not in _DEFAULTS:
        raise ValueError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    allowed = {"correct_reward", "wrong_reward", "format_reward", "tool_bonus", "timeout_reward"}
    changes: dict[str, float] = {}
    for name, value in overrides.items():
        if name not in allowed:
            raise ValueError(f"unknown reward setting {name!r}: choose from {sorted(allowed)}")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        changes[name] = float(value)
    cfg = replace(_DEFAULTS[preset], **changes)
    return cfg if answer_fallback is None else replace(cfg, answer_fallback=bool(answer_fallback))


@dataclass
class RewardOutcome:
    """What one trajectory earned. ``reasons`` are stable codes, audit-friendly; ``failure`` is
    set when the grader, not the model, decided the result (a timeout, a crashed checker)."""

    reward: float | None
    status: Status
    pred: str | None
    correct: bool
    reasons: list[str] = field(default_factory=list)
    error: str | None = None
    failure: Failure | None = None

    @property
    def outcome(self) -> OutcomeKind:
        """Whose result this is (the wire field ``outcome``)."""
        return OutcomeKind.CODE if self.failure is None else self.failure.outcome

    def outcome_fields(self) -> dict[str, Any]:
        """The wire fields ``outcome`` and ``failure`` of this result."""
        return outcome_fields(self.failure)


Outcome = RewardOutcome
"""The name this result had before :mod:`scorer.outcome` (whose kinds are ``OutcomeKind``)."""


def _answered_call(masked: str) -> bool:
    """Whether some ``<tool_call`` in ``masked`` is followed by a ``<tool_response``."""
    call = TOOL_CALL_OPEN.search(masked)
    return call is not None and TOOL_RESPONSE_OPEN.search(masked, call.end()) is not None


def _check(
    pred: str,
    gold: Gold | Sequence[Gold],
    verify: VerifyFn,
    timeout: float,
    question: str | None = None,
) -> Verdict:
    """Compare ``pred`` with the gold, or with each acceptable gold in turn (any match wins;
    a timeout is reported only when no gold matched)."""
    golds = list(gold) if isinstance(gold, list | tuple) else [gold]
    timed_out: Verdict | None = None
    last: Verdict | None = None
    for g in golds:
        if question is None:
            verdict = verify(pred, g, timeout=timeout)
        else:
            verdict = verify(pred, g, timeout=timeout, question=question)
        if verdict.correct:
            return verdict
        if verdict.timed_out and timed_out is None:
            timed_out = verdict
        last = verdict
    if timed_out is not None:
        return timed_out
    assert last is not None
    return last


def _judge(
    found: Found,
    gold: Gold | Sequence[Gold],
    cfg: RewardConfig,
    verify: VerifyFn,
    timeout: float,
    bonus: bool,
    question: str | None = None,
) -> RewardOutcome:
    from scorer.equivalence import hedged

    pred = found.as_pred()
    if found.hedge is not None or hedged(found, gold):
        return RewardOutcome(cfg.wrong_reward, "incorrect", found.shown(), False, [Reason.HEDGED])
    if pred is None:
        return RewardOutcome(cfg.wrong_reward, "no_answer", None, False, [Reason.NO_BOX])
    verdict = _check(pred, gold, verify, timeout, question)
    pred = found.shown() or pred
    reasons = [verdict.reason]
    if verdict.correct:
        reward = cfg.correct_reward
        if bonus and cfg.tool_bonus:
            reward += cfg.tool_bonus
            reasons.append(Reason.TOOL_BONUS)
        return RewardOutcome(reward, "correct", pred, True, reasons)
    if verdict.timed_out:
        # No verdict on the model: no reward, unless the caller chose a number for this case.
        failure = Failure.of(FailureCode.GRADER_TIMEOUT)
        detail = verdict.detail or None
        return RewardOutcome(cfg.timeout_reward, "timeout", pred, False, reasons, detail, failure)
    if verdict.reason == Reason.ERROR:
        # The checker itself failed (crashed worker): no verdict on the model, so no reward.
        detail = verdict.detail or "verify failed"
        crashed = Failure.of(FailureCode.GRADER_ERROR)
        return RewardOutcome(None, "error", pred, False, reasons, detail, crashed)
    if verdict.reason == Reason.EMPTY:
        # A box with nothing in it once normalised (``\boxed{\quad}``) is no answer.
        return RewardOutcome(cfg.wrong_reward, "no_answer", pred, False, reasons)
    return RewardOutcome(cfg.wrong_reward, "incorrect", pred, False, reasons)


def score_binary(
    text: str,
    gold: Gold | Sequence[Gold],
    cfg: RewardConfig,
    *,
    verify: VerifyFn,
    timeout: float = DEFAULT_TIMEOUT,
    question: str | None = None,
) -> RewardOutcome:
    """``binary``: the last run of boxes of the answer region (after the last ``</think>``;
    the whole text when it has no think tag; see :mod:`scorer.answer`), else, unless
    ``answer_fallback`` is off, a final-answer phrase or the last math expression; right ->
    ``correct_reward``, anything else -> ``wrong_reward``. ``tool_bonus`` (0 by default) is
    added to a right answer when a tool call anywhere was answered."""
    found = find_answer(text, fallback=cfg.answer_fallback)
    bonus = _answered_call(mask_tool_blocks(text))
    return _judge(found, gold, cfg, verify, timeout, bonus, question)


def score_interleaved(
    text: str,
    gold: Gold | Sequence[Gold],
    cfg: RewardConfig,
    *,
    verify: VerifyFn,
    timeout: float = DEFAULT_TIMEOUT,
    question: str | None = None,
) -> RewardOutcome:
    """``interleaved``: the seed environment's rules, in order.

    1. No ``</think>`` -> ``format_reward`` (``missing_think_close``).
    2. ``<tool_call`` or ``<tool_response`` after the (first) ``</think>`` -> ``format_reward``.
    3. Answer = the FIRST run of boxes of the answer region (:mod:`scorer.answer`: after the
       last ``</think>``, tool output and reopened think blocks masked); none ->
       ``wrong_reward`` (``no_answer``); a hedge -> ``wrong_reward`` (``hedged``).
    4. Right -> ``correct_reward``, plus ``tool_bonus`` when a ``<tool_call>`` inside the think
       block was followed by a ``<tool_response>``; wrong -> ``wrong_reward``.

    Like the seed, the split is at the first ``</think>``. Tool block contents are masked first,
    so a ``</think>`` printed by a tool or written inside tool-call code does not count.
    """
    masked = mask_tool_blocks(text)
    end = masked.find(THINK_CLOSE)
    if end < 0:
        return RewardOutcome(
            cfg.format_reward, "format_error", None, False, [Reason.MISSING_THINK_CLOSE]
        )
    head, tail = masked[:end], masked[end + len(THINK_CLOSE) :]
    if TOOL_CALL_OPEN.search(tail) or TOOL_RESPONSE_OPEN.search(tail):
        return RewardOutcome(
            cfg.format_reward, "format_error", None, False, [Reason.TOOL_TAG_AFTER_THINK]
        )
    found = find_answer(text, first=True, fallback=cfg.answer_fallback)
    return _judge(found, gold, cfg, verify, timeout, _answered_call(head), question)


def score_text(
    text: str,
    gold: Gold | Sequence[Gold],
    cfg: RewardConfig | None = None,
    *,
    verify: VerifyFn | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    question: str | None = None,
) -> RewardOutcome:
    """Apply ``cfg``'s preset to one assistant text. ``verify`` defaults to
    :func:`scorer.equivalence.verify` (imported on first use: it pulls in sympy).
    ``question``, when given, is passed on to ``verify`` (the form it asks for is enforced)."""
    cfg = cfg or _DEFAULTS["binary"]
    if verify is None:
        from scorer.equivalence import verify as real_verify

        verify = real_verify
    scorer = score_interleaved if cfg.preset == "interleaved" else score_binary
    return scorer(text, gold, cfg, verify=verify, timeout=timeout, question=question)


def describe(cfg: RewardConfig) -> dict[str, Any]:
    """The effective reward settings, for summaries and logs."""
    return {
        "preset": cfg.preset,
        "correct_reward": cfg.correct_reward,
        "wrong_reward": cfg.wrong_reward,
        "format_reward": cfg.format_reward,
        "tool_bonus": cfg.tool_bonus,
        "timeout_reward": cfg.timeout_reward,
        "answer_fallback": cfg.answer_fallback,
    }
