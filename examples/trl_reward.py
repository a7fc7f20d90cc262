"""Reward functions for TRL-style trainers (``GRPOTrainer(reward_funcs=[...])``), on the scorer.

TRL calls ``reward(prompts=..., completions=..., **dataset_columns)``: ``completions`` are
strings, or (conversational datasets) lists of messages; ``answer`` is the dataset's gold column.
Grading runs in this process with the scorer library (no service needed); the gold may be a
number, a string (a ``\\boxed{}`` or GSM8K ``#### 72`` answer is reduced to its final part) or a
list of acceptable answers.

    from trl import GRPOTrainer
    from examples.trl_reward import make_reward

    trainer = GRPOTrainer(..., reward_funcs=[make_reward("interleaved")])  # thinking models
    trainer = GRPOTrainer(..., reward_funcs=[make_reward("binary")])  # any other model

Pick the preset for the model you train. ``"interleaved"`` is the seed environment's rules,
written for models that think in ``<think>...</think>``: a completion WITHOUT ``</think>`` is a
format error and gets -1.0 EVEN WHEN ITS ANSWER IS RIGHT (``\\boxed{4}`` alone for "2+2"
earns -1.0). A model that does not emit ``</think>`` (an instruct model, a chat model without
a reasoning template) would be punished on every sample, so give it ``"binary"``: 1.0 for a
right boxed answer, 0.0 otherwise, no format rules. ``python examples/trl_reward.py`` shows
both on two completions.

A completion the grader could not decide (the equivalence check timed out, the checker
crashed, an unreadable message list) gets ``None``, never a number: the row's ``outcome`` is
not ``"code"``. TRL >= 1.6.0 drops such a sample from its group's baseline and gives it a zero
advantage; older TRL turns ``None`` into 0.0 when no other reward function scored the sample,
so this module warns when it finds one installed (docs/trl.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any

from scorer import GradeOptions, grade_record, reward_config
from scorer.verdict import DEFAULT_TIMEOUT

RewardFunc = Callable[..., list[float | None]]

TRL_MASKS_NONE = "1.6.0"
"""The first TRL release whose GRPOTrainer leaves a sample every reward function answered
``None`` out of the group baseline (huggingface/trl#5902); before it the sample's reward was
``nansum`` of NaNs: 0.0."""


def trl_drops_none(version: str | None = None) -> bool | None:
    """Whether the installed TRL (or ``version``) ignores a ``None`` reward instead of paying
    0.0 for it; ``None`` when TRL is not installed."""
    if version is None:
        try:
            version = metadata.version("trl")
        except metadata.PackageNotFoundError:
            return None
    from packaging.version import Version  # a dependency of TRL itself

    return Version(version) >= Version(TRL_MASKS_NONE)


def row_reward(row: Mapping[str, Any]) -> float | None:
    """The reward of a graded row: its number, ``None`` (no reward) when it has none. A grader
    failure has none unless the caller set ``timeout_reward`` explicitly."""
    reward = row["reward"]
    return None if reward is None else float(reward)


def make_reward(
    preset: str = "binary", *, timeout: float = DEFAULT_TIMEOUT, **overrides: float | None
) -> RewardFunc:
    """A reward function for ``preset``: ``"binary"`` (1/0 on the last box after the last
    ``</think>``, or in the whole text when there is none: for any model) or ``"interleaved"``
    (the seed environment's rules, for thinking models: -1 on format errors, including a
    right answer without ``</think>``, and +0.2 for an answered tool call). ``overrides``
    change reward values, e.g. ``wrong_reward=-1.0``; ``timeout`` bounds each equivalence
    check, in seconds. A check that times out earns ``None`` (masked) unless
    ``timeout_reward`` is given a number."""
    options = GradeOptions(rewards=reward_config(preset, **overrides), timeout=timeout)
    if trl_drops_none() is False:
        warnings.warn(
            f"TRL older than {TRL_MASKS_NONE} scores a sample whose rewards are all None as "
            "0.0: a grader timeout would be paid as a wrong answer. Upgrade TRL (docs/trl.md).",
            stacklevel=2,
        )

    def reward(
        completions: Sequence[str | list[dict[str, Any]]],
        answer: Sequence[Any],
        **kwargs: Any,
    ) -> list[float | None]:
        rows = [
            grade_record({"completion": completion, "answer": gold}, options)[0]
            for completion, gold in zip(completions, answer, strict=True)
        ]
        return [row_reward(row) for row in rows]

    # TRL logs each reward function under its __name__.
    reward.__name__ = f"boxed_{preset}_reward"
    return reward


def masked_sum(primary: RewardFunc, *others: RewardFunc) -> RewardFunc:
    """One reward function: ``primary`` plus ``others`` per sample, and ``None`` wherever
    ``primary`` is ``None``. TRL masks a sample only when EVERY reward function returns
    ``None`` for it (with one number left, the missing reward counts as 0.0 in TRL's
    ``nansum``), so a format reward next to boxed's would turn a grader failure back into a
    wrong answer; summed here, the sample stays masked."""

    def summed(*args: Any, **kwargs: Any) -> list[float | None]:
        base = primary(*args, **kwargs)
        extra = [other(*args, **kwargs) for other in others]
        out: list[float | None] = []
        for i, value in enumerate(base):
            parts = [value, *(rewards[i] for rewards in extra)]
            out.append(None if value is None else sum(p for p in parts if p is not None))
        return out

    summed.__name__ = "+".join(f.__name__ for f in (primary, *others))
    return summed


reward = make_reward("binary")
"""Binary reward: 1.0 for a right boxed answer, 0.0 for a wrong one, None when ungradable."""


if __name__ == "__main__":
    # Two right answers to "2+2", from a thinking model and from one that does not think.
    completions = [
        "<think>2+2 is 4.</think> The answer is \\boxed{4}.",
        "The answer is \\boxed{4}.",
    ]
    for preset in ("binary", "interleaved"):
        rewards = make_reward(preset)(completions=completions, answer=["4", "4"])
        print(f"{preset:<12} with </think>: {rewards[0]:+.1f}   without: {rewards[1]:+.1f}")
