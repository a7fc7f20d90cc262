"""boxed's answer scorer: extract a model's boxed answer, compare it with the gold answer, and
turn that into an RL reward.

``import scorer`` stays light: :func:`verify` (sympy, the equivalence engine) is imported on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scorer.extract import extract_answer, find_boxes, mask_tool_blocks
from scorer.grading import GradeOptions, grade_record, grade_trajectory, pass_at_k, summarize
from scorer.rewards import (
    PRESETS,
    STATUSES,
    Outcome,
    RewardConfig,
    RewardOutcome,
    reward_config,
    score_binary,
    score_interleaved,
    score_text,
)
from scorer.trajectories import Trajectory, detect_format, find_gold, parse_record
from scorer.verdict import Verdict

if TYPE_CHECKING:
    from scorer.equivalence import verify

__all__ = [
    "PRESETS",
    "STATUSES",
    "GradeOptions",
    "Outcome",
    "RewardConfig",
    "RewardOutcome",
    "Trajectory",
    "Verdict",
    "detect_format",
    "extract_answer",
    "find_boxes",
    "find_gold",
    "grade_record",
    "grade_trajectory",
    "mask_tool_blocks",
    "parse_record",
    "pass_at_k",
    "reward_config",
    "score_binary",
    "score_interleaved",
    "score_text",
    "summarize",
    "verify",
]


def __getattr__(name: str) -> Any:
    if name == "verify":
        from scorer.equivalence import verify

        return verify
    raise AttributeError(f"module 'scorer' has no attribute {name!r}")
