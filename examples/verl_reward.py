"""A verl custom reward function over boxed's ``POST /judge`` that never pays 0 for a failure.

    reward.custom_reward_function.path=examples/verl_reward.py
    reward.custom_reward_function.name=compute_score

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` per sample and
writes the number it returns into a float reward tensor: a verl reward manager has no way to
mask one sample. So a failure that is not the code's cannot become "no reward" there; this
function does the next best thing: the boxed client retries it until ``BOXED_REWARD_DEADLINE``
seconds (default 600), and if the service is still failing then, it raises
:class:`RewardUnavailable`, which stops the training step loudly (resume from the last
checkpoint) instead of teaching the model that its right programs were wrong. Leave verl's
``compute_score_timeout`` unset, or above the deadline: verl pays 0.0 for a score that times
out. docs/verl.md has the whole recipe.

``ground_truth`` holds the tests as verl's SandboxFusion data does (``{"inputs": [...],
"outputs": [...]}``, as JSON or a dict) or as boxed's ``[{"input", "expected_output"}]``.
The score is the share of tests passed; the returned dict also carries boxed's verdict.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from typing import Any

from boxed_client import BoxedError, Client
from examples.code_reward import extract_code


class RewardUnavailable(RuntimeError):
    """boxed could not judge the sample before the deadline: no reward exists for it."""


def as_tests(ground_truth: Any) -> list[dict[str, str]]:
    """boxed's stdin/stdout tests from verl's ``{"inputs", "outputs"}`` or boxed's own list."""
    data = json.loads(ground_truth) if isinstance(ground_truth, str | bytes) else ground_truth
    if isinstance(data, Mapping):
        pairs = zip(data["inputs"], data["outputs"], strict=True)
        return [{"input": str(i), "expected_output": str(o)} for i, o in pairs]
    return [{"input": t["input"], "expected_output": t["expected_output"]} for t in data]


@cache
def _client() -> Client:
    deadline = float(os.environ.get("BOXED_REWARD_DEADLINE", "600"))
    return Client(deadline=deadline)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    client: Client | None = None,
) -> dict[str, Any]:
    """``{"score": passed / total, "verdict": ..., "outcome": "code"}``; raises
    :class:`RewardUnavailable` when no verdict of the code's could be had."""
    language = (extra_info or {}).get("language", "python")
    try:
        result = (client or _client()).judge(
            extract_code(solution_str), as_tests(ground_truth), language=language, cache=True
        )
    except BoxedError as exc:
        raise RewardUnavailable(f"boxed could not judge a {data_source} sample: {exc}") from exc
    if result.outcome != "code":  # no answer of the code's: never a number
        raise RewardUnavailable(f"boxed answered {result.outcome}: {result.failure}")
    return {"score": result.pass_rate, "verdict": result.verdict, "outcome": result.outcome}
