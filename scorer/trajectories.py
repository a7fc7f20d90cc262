"""Read one trajectory record, whatever tool wrote it, into the text the assistant wrote.

Formats are told apart per record, so one JSONL file may mix them:

- ``atropos_group``: ``messages`` is a list of N conversations (one line = N rollouts), with
  optional ``scores``;
- ``chat``: OpenAI ``messages`` (assistant ``tool_calls``, ``tool`` role messages);
- ``sharegpt``: Hermes/ShareGPT ``conversations`` of ``{"from", "value"}``;
- ``verifiers``: ``completion`` is a list of messages (``prompt``, ``answer``, ``reward``);
- ``flat``: ``response`` or ``completion`` is a string.

The assistant text is the concatenation of the assistant messages after the last user message.
Tool results never count as answer text: a structured tool call becomes an empty
``<tool_call></tool_call>`` in that text and a tool message an empty
``<tool_response></tool_response>``, so counting tool use and the ``interleaved`` format rules
work the same whether tools were spliced into the text or sent as separate messages.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scorer.extract import count_tool_calls, find_boxes, last_boxed_or_text
from scorer.verdict import Gold

FORMATS: tuple[str, ...] = ("flat", "chat", "sharegpt", "atropos_group", "verifiers")
GOLD_KEYS: tuple[str, ...] = (
    "answer",
    "expected_answer",
    "gold",
    "ground_truth",
    "solution",
    "label",
)
ID_KEYS: tuple[str, ...] = ("id", "example_id")

TOOL_CALL_TAG = "<tool_call></tool_call>"
TOOL_RESPONSE_TAG = "<tool_response></tool_response>"

_CHAT_ASSISTANT = {"assistant"}
_CHAT_USER = {"user"}
_CHAT_TOOL = {"tool", "function", "ipython"}
_SHAREGPT_ASSISTANT = {"gpt", "assistant", "model"}
_SHAREGPT_USER = {"human", "user"}
_SHAREGPT_TOOL = {"tool", "observation", "function_response", "ipython"}
_SHAREGPT_CALL = {"function_call", "tool_call"}


@dataclass
class Rollout:
    """One assistant attempt: its text (see module doc), tool calls made, and the reward the
    environment gave it when the trace carries one."""

    text: str
    tool_calls: int
    index: int | None = None
    env_reward: float | None = None


@dataclass
class Trajectory:
    """One JSONL record: its id, format, gold (``None`` when it carries none) and rollouts
    (several for an Atropos group)."""

    id: str | int | None
    format: str
    rollouts: list[Rollout]
    gold: Gold | list[Gold] | None = None
    group: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    question: str | None = None  # the record's ``question``: the form it asks for is enforced


def _content_text(content: Any) -> str:
    """Text of a message ``content``: a string, ``None``, or a list of parts
    (``{"type": "text", "text": ...}`` or plain strings); non-text parts are skipped."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    raise ValueError(f"message content must be a string or a list of parts, not {_kind(content)}")


def _kind(value: Any) -> str:
    return type(value).__name__


def _chat_text(messages: Sequence[Any], *, where: str = "messages") -> str:
    """Assistant text of an OpenAI-style conversation (see module doc)."""
    if not isinstance(messages, list):
        raise ValueError(f"{where} must be a list of messages, not {_kind(messages)}")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise ValueError(f"{where}[{i}] is not a message with a string 'role'")
    start = 0
    for i, m in enumerate(messages):
        if m["role"] in _CHAT_USER:
            start = i + 1
    pieces: list[str] = []
    for m in messages[start:]:
        role = m["role"]
        if role in _CHAT_ASSISTANT:
            content = _content_text(m.get("content"))
            reasoning = m.get("reasoning_content") or m.get("reasoning")
            if isinstance(reasoning, str) and reasoning and "</think>" not in content:
                content = f"<think>{reasoning}</think>{content}"
            calls = m.get("tool_calls") or []
            if not isinstance(calls, list):
                raise ValueError(f"{where}: assistant 'tool_calls' must be a list")
            n_calls = len(calls) + (1 if m.get("function_call") else 0)
            pieces.append(content + TOOL_CALL_TAG * n_calls)
        elif role in _CHAT_TOOL:
            pieces.append(TOOL_RESPONSE_TAG)
    return "\n".join(pieces)


def _sharegpt_text(turns: Sequence[Any]) -> str:
    """Assistant text of a ShareGPT/Hermes conversation (see module doc)."""
    if not isinstance(turns, list):
        raise ValueError(f"conversations must be a list, not {_kind(turns)}")
    for i, t in enumerate(turns):
        if not isinstance(t, Mapping) or not isinstance(t.get("from"), str):
            raise ValueError(f"conversations[{i}] is not a turn with a string 'from'")
    start = 0
    for i, t in enumerate(turns):
        if t["from"] in _SHAREGPT_USER:
            start = i + 1
    pieces: list[str] = []
    for t in turns[start:]:
        who = t["from"]
        if who in _SHAREGPT_ASSISTANT:
            pieces.append(_content_text(t.get("value")))
        elif who in _SHAREGPT_CALL:
            pieces.append(TOOL_CALL_TAG)
        elif who in _SHAREGPT_TOOL:
            pieces.append(TOOL_RESPONSE_TAG)
    return "\n".join(pieces)


def _rollout(text: str, *, index: int | None = None, env_reward: Any = None) -> Rollout:
    reward = env_reward if _is_number(env_reward) else None
    return Rollout(text, count_tool_calls(text), index, reward)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def detect_format(record: Mapping[str, Any]) -> str:
    """The record's format name; ``ValueError`` when it matches none."""
    messages = record.get("messages")
    if isinstance(messages, list) and messages and all(isinstance(c, list) for c in messages):
        return "atropos_group"
    if isinstance(messages, list):
        return "chat"
    if "conversations" in record:
        return "sharegpt"
    completion = record.get("completion")
    if isinstance(completion, list):
        return "verifiers"
    if isinstance(record.get("response"), str) or isinstance(completion, str):
        return "flat"
    keys = ", ".join(sorted(map(str, record))) or "none"
    raise ValueError(
        "unknown trace format: expected 'messages', 'conversations', 'response' or "
        f"'completion' (keys: {keys})"
    )


def record_id(record: Mapping[str, Any]) -> str | int | None:
    """The record's own id (``id``, else ``example_id``), or ``None``."""
    for key in ID_KEYS:
        value = record.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return value
    return None


def clean_gold(value: Any, *, solution: bool = False) -> Gold | list[Gold] | None:
    """Normalise one gold value; ``None`` when it is absent or empty.

    A reference ``solution`` yields its last box (or the part after ``####``). Another string
    that holds exactly one box, or a GSM8K ``... #### 72`` answer, yields the boxed / final
    part, since comparing a whole worked solution with a short answer is always wrong.
    Numbers stay numbers; a list means "any of these". Raises ``ValueError`` for other types.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"gold must be a string or a number, not a boolean ({value})")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"gold must be finite, got {value}")
        return value
    if isinstance(value, str):
        if solution:
            cleaned = last_boxed_or_text(value)
        else:
            boxes = [b for b in find_boxes(value) if b is not None]
            if len(boxes) == 1:
                cleaned = boxes[0]
            elif "####" in value and not boxes:
                cleaned = value.rsplit("####", 1)[1].strip()
            else:
                cleaned = value.strip()
        return cleaned or None
    if isinstance(value, list):
        golds: list[Gold] = []
        for item in value:
            g = clean_gold(item, solution=solution)
            if isinstance(g, list):
                raise ValueError("gold lists must not be nested")
            if g is not None:
                golds.append(g)
        return golds or None
    raise ValueError(f"gold must be a string, a number or a list of them, not {_kind(value)}")


def find_gold(record: Mapping[str, Any]) -> Gold | list[Gold] | None:
    """The gold answer carried by the record: the first non-empty of ``answer``,
    ``expected_answer``, ``gold``, ``ground_truth``, ``solution``, ``label``,
    ``reward_model.ground_truth`` (verl)."""
    for key in GOLD_KEYS:
        gold = clean_gold(record.get(key), solution=key == "solution")
        if gold is not None:
            return gold
    reward_model = record.get("reward_model")
    if isinstance(reward_model, Mapping):
        return clean_gold(reward_model.get("ground_truth"))
    return None


def parse_record(
    record: Any,
    *,
    answers: Mapping[str, Any] | None = None,
    default_id: str | int | None = None,
) -> Trajectory:
    """Read one decoded JSON line. Its id is its own ``id`` else ``default_id`` (the CLI passes
    the line number). The gold comes from ``answers`` (keyed by ``str(id)``) when it has that
    id, else from the record. Raises ``ValueError`` for a record that is not a trajectory (the
    caller reports it as an ``error`` row)."""
    if not isinstance(record, Mapping):
        raise ValueError(f"a trajectory must be a JSON object, not {_kind(record)}")
    fmt = detect_format(record)
    rid = record_id(record)
    if rid is None:
        rid = default_id
    if fmt == "atropos_group":
        scores = record.get("scores")
        scores = scores if isinstance(scores, list) else []
        rollouts = [
            _rollout(
                _chat_text(conv, where=f"messages[{i}]"),
                index=i,
                env_reward=scores[i] if i < len(scores) else None,
            )
            for i, conv in enumerate(record["messages"])
        ]
    elif fmt == "chat":
        if not record["messages"]:
            raise ValueError("messages is empty")
        rollouts = [_rollout(_chat_text(record["messages"]), env_reward=record.get("reward"))]
    elif fmt == "sharegpt":
        rollouts = [_rollout(_sharegpt_text(record["conversations"]))]
    elif fmt == "verifiers":
        text = _chat_text(record["completion"], where="completion")
        rollouts = [_rollout(text, env_reward=record.get("reward"))]
    else:
        text = record.get("response")
        if not isinstance(text, str):
            text = record["completion"]
        rollouts = [_rollout(text, env_reward=record.get("reward"))]
    gold: Gold | list[Gold] | None = None
    if answers is not None and rid is not None and str(rid) in answers:
        gold = clean_gold(answers[str(rid)])
    if gold is None:
        gold = find_gold(record)
    question = record.get("question")
    question = question if isinstance(question, str) and question.strip() else None
    return Trajectory(rid, fmt, rollouts, gold, group=fmt == "atropos_group", question=question)


def load_answers(lines: Iterable[str], *, source: str = "answers") -> dict[str, Any]:
    """Gold answers from JSONL lines of ``{"id": ..., "answer": ...}`` (any gold key works in
    place of ``answer``). Raises ``ValueError`` naming the line for a bad line, a missing id or
    gold, or two different answers for one id: a wrong answer key corrupts every reward."""
    answers: dict[str, Any] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{source}:{n}: not JSON ({e.msg})") from None
        if not isinstance(obj, Mapping):
            raise ValueError(f"{source}:{n}: expected a JSON object")
        rid = record_id(obj)
        if rid is None:
            raise ValueError(f"{source}:{n}: no 'id'")
        gold = find_gold(obj)
        if gold is None:
            raise ValueError(f"{source}:{n}: no answer for id {rid!r}")
        key = str(rid)
        if key in answers and answers[key] != gold:
            raise ValueError(f"{source}:{n}: id {rid!r} has two different answers")
        answers[key] = gold
    return answers


def load_answers_file(path: str | Path) -> dict[str, Any]:
    """:func:`load_answers` on a file (``OSError`` when it cannot be read)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return load_answers(f, source=str(path))
