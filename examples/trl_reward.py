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

A completion that cannot be graded (say, an unreadable message list) gets ``None``, which TRL
treats as "no reward for this sample" instead of a made-up number.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from scorer import GradeOptions, grade_record, reward_config
from scorer.verdict import DEFAULT_TIMEOUT

RewardFunc = Callable[..., list[float | None]]


def make_reward(
    preset: str = "binary", *, timeout: float = DEFAULT_TIMEOUT, **overrides: float
) -> RewardFunc:
    """A reward function for ``preset``: ``"binary"`` (1/0 on the last box after the last
    ``</think>``, or in the whole text when there is none: for any model) or ``"interleaved"``
    (the seed environment's rules, for thinking models: -1 on format errors, including a
    right answer without ``</think>``, and +0.2 for an answered tool call). ``overrides``
    change reward values, e.g. ``wrong_reward=-1.0``; ``timeout`` bounds each equivalence
    check, in seconds."""
    options = GradeOptions(rewards=reward_config(preset, **overrides), timeout=timeout)

    def reward(
        completions: Sequence[str | list[dict[str, Any]]],
        answer: Sequence[Any],
        **kwargs: Any,
    ) -> list[float | None]:
        rows = [
            grade_record({"completion": completion, "answer": gold}, options)[0]
            for completion, gold in zip(completions, answer, strict=True)
        ]
        return [row["reward"] for row in rows]

    # TRL logs each reward function under its __name__.
    reward.__name__ = f"boxed_{preset}_reward"
    return reward


reward = make_reward("binary")
"""Binary reward: 1.0 for a right boxed answer, 0.0 otherwise."""


if __name__ == "__main__":
    # Two right answers to "2+2", from a thinking model and from one that does not think.
    completions = [
        "<think>2+2 is 4.</think> The answer is \\boxed{4}.",
        "The answer is \\boxed{4}.",
    ]
    for preset in ("binary", "interleaved"):
        rewards = make_reward(preset)(completions=completions, answer=["4", "4"])
        print(f"{preset:<12} with </think>: {rewards[0]:+.1f}   without: {rewards[1]:+.1f}")
