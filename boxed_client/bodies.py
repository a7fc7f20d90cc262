"""Request bodies as JSON dicts, built from a call's arguments.

Validation is left to the server, so every caller mistake comes back the same way: a 422 with
the server's detail. Fields left ``None`` are left out, so the server's defaults apply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from boxed_client.models import ExecuteRequest
from boxed_client.results import ExecuteItem


def judge_body(
    code: str, tests: Sequence[Mapping[str, Any]] | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    """``POST /judge``'s body: the code, its tests, and the options that are not ``None``."""
    body: dict[str, Any] = {"code": code, "tests": [dict(t) for t in tests or []]}
    body.update((k, v) for k, v in options.items() if v is not None)
    return body


def execute_body(item: ExecuteItem) -> dict[str, Any]:
    """JSON body of one item. Validation is left to the server so that every caller mistake comes
    back the same way: a 422 with the server's detail."""
    if isinstance(item, str):
        return {"code": item, "input": ""}
    if isinstance(item, ExecuteRequest):
        return item.model_dump(exclude_none=True)
    if isinstance(item, Mapping):
        return {k: v for k, v in item.items() if v is not None}
    raise TypeError(f"execute_many items are str, dict or ExecuteRequest, not {type(item)!r}")


def score_options(
    body: dict[str, Any],
    preset: str | None,
    rewards: Mapping[str, float] | None,
    timeout: float | None,
) -> dict[str, Any]:
    """``body`` with the grading options that are not ``None`` added."""
    for name, value in (("preset", preset), ("rewards", rewards), ("timeout", timeout)):
        if value is not None:
            body[name] = dict(value) if isinstance(value, Mapping) else value
    return body


def score_body(
    record: Mapping[str, Any] | None, response: str | None, answer: Any
) -> dict[str, Any]:
    """``POST /score``'s record: as given, or built from ``response`` and ``answer``."""
    if record is not None:
        return dict(record)
    if response is not None:
        return {"response": response, "answer": answer}
    raise TypeError("score() needs a record, or response= and answer=")


def request_body(body: Any) -> dict[str, Any]:
    """httpx's keyword for ``body``: bytes as they are (a session's file), anything else JSON."""
    return {"content": body} if isinstance(body, bytes) else {"json": body}
