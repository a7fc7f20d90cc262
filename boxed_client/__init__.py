"""Python client for the boxed service, sync (:class:`Client`) and async (:class:`AsyncClient`).

Built for RL environments that call the service thousands of times a minute:

* pooled ``httpx`` clients per :class:`Client` for its whole life (no connection per call),
  at most 16 connections each, taken in turn: httpcore does work in proportion to a pool's
  busy connections on every request, so one pool of 64 cost the client 11-19 ms of CPU per
  request here against about 2 ms for four pools of 16 (``bench/bench_client.py``);
* a client-side concurrency cap, so a burst of rollouts queues here instead of flooding the server;
* retries with jittered exponential backoff on transport errors, on 429/502/503/504 and on any
  answer whose ``failure.retryable`` is true, honouring ``Retry-After``, until the call's
  deadline and never past it (but for a run's own time limit) -- never on the code's own
  failures (a 200 with ``status="error"`` is a result) and never on other 4xx (a caller
  mistake: :class:`BoxedHTTPError` with the detail);
* every error carries ``failure`` and ``outcome`` (:mod:`boxed_client.outcome`), so a trainer
  can tell an infrastructure failure (no reward) from the code's own verdict:
  :func:`reward_or_none`;
* several server URLs, used round-robin (``routing="spread"``) or first healthy first
  (``routing="ordered"``: a node's own service, then the others); a URL that fails with a
  transport error is set aside for a cool-off period and the request moves to another URL at
  once. A session stays on the server that made it: when that server does not answer, its
  calls fail within ``session_timeout`` (:class:`SessionUnreachable`), never moved elsewhere.

Only ``httpx`` and ``pydantic`` are needed. The names below are loaded on first use, so that
the stdlib-only modules of the wire (:mod:`boxed_client.outcome`, :mod:`boxed_client.status`,
:mod:`boxed_client.defaults`), which the server and the scorer import, do not import httpx.

Modules: ``sync`` and ``aio`` (the clients and their sessions), ``attempts`` (the retry
policy), ``base`` (configuration, URL choice, time budgets), ``answers`` (reading an HTTP
answer), ``errors``, ``results``, ``bodies`` (request bodies), ``models`` (the wire).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"  # the one place it is written: both distributions and the server read it

if TYPE_CHECKING:
    from boxed_client.aio import AsyncClient, AsyncSession
    from boxed_client.errors import (
        BoxedBatchError,
        BoxedError,
        BoxedHTTPError,
        BoxedUnavailable,
        SessionLost,
        SessionUnreachable,
    )
    from boxed_client.models import ExecuteRequest, JudgeRequest, SessionInfo
    from boxed_client.outcome import Failure, FailureCode, OutcomeKind
    from boxed_client.results import (
        CalculateResult,
        ExecuteItem,
        ExecuteResult,
        JudgeResult,
        ScoreBatch,
        ScoreResult,
        SessionResult,
        reward_or_none,
    )
    from boxed_client.sync import Client, Session

# Public name -> the module that defines it.
_HOMES = {
    "AsyncClient": "aio",
    "AsyncSession": "aio",
    "BoxedBatchError": "errors",
    "BoxedError": "errors",
    "BoxedHTTPError": "errors",
    "BoxedUnavailable": "errors",
    "CalculateResult": "results",
    "Client": "sync",
    "ExecuteItem": "results",
    "ExecuteRequest": "models",
    "ExecuteResult": "results",
    "Failure": "outcome",
    "FailureCode": "outcome",
    "JudgeRequest": "models",
    "JudgeResult": "results",
    "OutcomeKind": "outcome",
    "ScoreBatch": "results",
    "ScoreResult": "results",
    "Session": "sync",
    "SessionInfo": "models",
    "SessionLost": "errors",
    "SessionResult": "results",
    "SessionUnreachable": "errors",
    "reward_or_none": "results",
}

__all__ = [
    "AsyncClient",
    "AsyncSession",
    "BoxedBatchError",
    "BoxedError",
    "BoxedHTTPError",
    "BoxedUnavailable",
    "CalculateResult",
    "Client",
    "ExecuteItem",
    "ExecuteRequest",
    "ExecuteResult",
    "Failure",
    "FailureCode",
    "JudgeRequest",
    "JudgeResult",
    "OutcomeKind",
    "ScoreBatch",
    "ScoreResult",
    "Session",
    "SessionInfo",
    "SessionLost",
    "SessionResult",
    "SessionUnreachable",
    "reward_or_none",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'boxed_client' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"boxed_client.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
