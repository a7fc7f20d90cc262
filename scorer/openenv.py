"""Read OpenEnv-style episode logs and summarise them per task.

An inference script prints, per episode::

    [START] task=easy env=code_review model=Qwen/Qwen2.5-7B-Instruct
    [STEP] step=1 action=read_file('a.py') reward=0.00 done=false error=null
    [END] success=true steps=1 score=0.850 rewards=0.00

Other lines (debug prints) are skipped. A step whose result is not the code's (boxed's OpenEnv
environment: a lost sandbox, an unreachable service, a grader that could not decide) logs
``reward=null`` and ``outcome=infrastructure`` (or ``grader``) with its ``failure`` code, and
its episode ``success=null score=null outcome=...``: such an episode is *masked*, counted apart
and never as a failure. Values may hold spaces (``action=fallback script``) and
``=`` (``action=EXTRACT:facts=3``): a line is split only at its tag's known keys, first
occurrence each. An episode without ``[END]`` is reported as incomplete, never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

_KEYS: dict[str, tuple[str, ...]] = {
    "START": ("task", "env", "model"),
    "STEP": ("step", "action", "reward", "done", "outcome", "failure", "error", "reasoning"),
    "END": ("success", "steps", "score", "rewards", "outcome"),
}
_MASKED = {"infrastructure", "grader"}  # outcomes that pay no reward (scorer.outcome)
_TAG = re.compile(r"^\s*\[(START|STEP|END)\]\s?(.*)$")
_NULLS = {"", "null", "none", "nil"}
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}
_SNIFF_LINES = 50


@dataclass
class Episode:
    """One ``[START]``..``[END]`` block. ``steps`` and ``rewards`` come from ``[END]`` when it
    has them, else from the ``[STEP]`` lines; ``errors`` counts steps whose ``error`` is set.
    ``outcome`` is the ``[END]``'s, else the last step's (None in logs that give none);
    ``failure`` the first failure code a step gave; a reward of None is no reward."""

    line: int
    task: str | None = None
    env: str | None = None
    model: str | None = None
    success: bool | None = None
    steps: int | None = None
    score: float | None = None
    rewards: list[float | None] = field(default_factory=list)
    errors: int = 0
    outcome: str | None = None
    failure: str | None = None
    error_messages: list[str] = field(default_factory=list)
    complete: bool = False
    step_lines: int = 0

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row.pop("step_lines")
        return row

    @property
    def masked(self) -> bool:
        """Its result is not the code's: no reward, neither a success nor a failure."""
        return self.outcome in _MASKED


def looks_like_openenv(head_lines: Iterable[str]) -> bool:
    """Whether the first lines of a file are an OpenEnv log rather than JSONL: a ``[START]``
    line comes before any line that starts with ``{``."""
    for n, line in enumerate(head_lines):
        if n >= _SNIFF_LINES:
            return False
        stripped = line.strip()
        if stripped.startswith("{"):
            return False
        if stripped.startswith("[START]"):
            return True
    return False


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse_fields(tag: str, rest: str) -> dict[str, str]:
    """``key=value`` pairs of one line body, split only at ``tag``'s known keys."""
    keys = _KEYS[tag]
    pattern = re.compile(r"(?:^|(?<=\s))(" + "|".join(keys) + r")=")
    starts: list[tuple[str, int, int]] = []
    seen: set[str] = set()
    for m in pattern.finditer(rest):
        if m.group(1) not in seen:
            seen.add(m.group(1))
            starts.append((m.group(1), m.start(), m.end()))
    out: dict[str, str] = {}
    for i, (key, _, value_start) in enumerate(starts):
        value_end = starts[i + 1][1] if i + 1 < len(starts) else len(rest)
        out[key] = _unquote(rest[value_start:value_end])
    return out


def _bool(value: str) -> bool | None:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    return None


def _is_null(value: str) -> bool:
    return value.strip().lower() in _NULLS


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        f = _float(value)
        return int(f) if f is not None and f.is_integer() else None


def parse_log(lines: Iterable[str]) -> tuple[list[Episode], list[tuple[int, str]]]:
    """Episodes in order, and ``(line number, problem)`` for every tagged line that could not
    be used (a ``[STEP]`` outside an episode, an unreadable value...)."""
    episodes: list[Episode] = []
    problems: list[tuple[int, str]] = []
    current: Episode | None = None
    for n, raw in enumerate(lines, 1):
        m = _TAG.match(raw.rstrip("\r\n"))
        if m is None:
            continue
        tag, rest = m.group(1), m.group(2)
        fields = parse_fields(tag, rest)
        if tag == "START":
            if current is not None:
                problems.append((current.line, "episode has no [END] line"))
            current = Episode(n, fields.get("task"), fields.get("env"), fields.get("model"))
            episodes.append(current)
            continue
        if current is None:
            problems.append((n, f"[{tag}] line outside an episode (no [START] before it)"))
            continue
        if tag == "STEP":
            current.step_lines += 1
            reward = _float(fields.get("reward", ""))
            if reward is None and not _is_null(fields.get("reward", "")):
                problems.append((n, f"[STEP] reward is not a number: {fields.get('reward')!r}"))
            elif "reward" in fields:
                current.rewards.append(reward)  # None: no reward (masked)
            if "outcome" in fields:
                current.outcome = fields["outcome"].strip().lower()
            failure = fields.get("failure", "null")
            if not _is_null(failure) and current.failure is None:
                current.failure = failure.strip()
            error = fields.get("error", "null")
            if error.strip().lower() not in _NULLS:
                current.errors += 1
                current.error_messages.append(error)
            continue
        # END
        current.complete = True
        if "outcome" in fields:
            current.outcome = fields["outcome"].strip().lower()
        success = _bool(fields.get("success", ""))
        if success is None and not (current.masked and _is_null(fields.get("success", ""))):
            problems.append((n, f"[END] success is not true/false: {fields.get('success')!r}"))
        current.success = success
        if "steps" in fields:
            current.steps = _int(fields["steps"])
        if "score" in fields:
            current.score = _float(fields["score"])
            if current.score is None and not _is_null(fields["score"]):
                problems.append((n, f"[END] score is not a number: {fields['score']!r}"))
        if "rewards" in fields and fields["rewards"].strip():
            values = [r for r in fields["rewards"].split(",") if r.strip()]
            parsed = [_float(r) for r in values]
            if all(p is not None or _is_null(r) for p, r in zip(parsed, values, strict=True)):
                current.rewards = parsed
            else:
                problems.append((n, f"[END] rewards are not numbers: {fields['rewards']!r}"))
        current = None
    if current is not None:
        problems.append((current.line, "episode has no [END] line"))
    for ep in episodes:
        if ep.steps is None:
            ep.steps = ep.step_lines
    return episodes, problems


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize_episodes(episodes: list[Episode]) -> dict[str, Any]:
    """Per task and overall: episodes, success rate (over complete episodes whose result is
    the code's), mean score (over episodes that logged one), mean steps, step errors,
    incomplete episodes, and masked ones (a failure that is not the code's: no reward)."""

    def stats(eps: list[Episode]) -> dict[str, Any]:
        complete = [e for e in eps if e.complete]
        judged = [e for e in complete if e.success is not None and not e.masked]
        return {
            "episodes": len(eps),
            "success_rate": _mean([1.0 if e.success else 0.0 for e in judged]),
            "mean_score": _mean([e.score for e in eps if e.score is not None]),
            "mean_steps": _mean([float(e.steps or 0) for e in eps]),
            "errors": sum(e.errors for e in eps),
            "incomplete": len(eps) - len(complete),
            "masked": sum(e.masked for e in eps),
        }

    tasks: dict[str, list[Episode]] = {}
    for ep in episodes:
        tasks.setdefault(ep.task or "?", []).append(ep)
    return {
        "format": "openenv",
        **stats(episodes),
        "tasks": {task: stats(eps) for task, eps in tasks.items()},
    }
