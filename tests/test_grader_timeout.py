"""Issue #27: a grader timeout is no reward (``None``/``null``, ``outcome: "grader"``), never the
wrong answer's 0, on every path a reward leaves the scorer by: the library, the CLI, ``/score``
and ``/score/batch``, and the TRL example. The timeouts here are real: a power tower sympy
cannot compare within a fraction of a second, graded by the real equivalence engine."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastapi.testclient import TestClient

from exec_server.app import create_app
from exec_server.settings import Settings
from scorer import reward_config, score_text
from scorer.equivalence import warm_up

ROOT = Path(__file__).resolve().parents[1]
TOWER = "2^{2^{2^{2^{2^{2}}}}}"  # 2^65536 is fine, 2^(2^65536) is not: sympy cannot finish
SLOW = {"response": f"The answer is \\boxed{{{TOWER}}}.", "answer": TOWER + "+1"}
TIMEOUT = 0.5
GRADER_TIMEOUT = {"code": "grader_timeout", "retryable": False}


@pytest.fixture(scope="module", autouse=True)
def _workers() -> None:
    warm_up()


def _masked(row: dict[str, Any]) -> None:
    assert row["reward"] is None, row  # never a number
    assert (row["status"], row["outcome"], row["failure"]) == ("timeout", "grader", GRADER_TIMEOUT)


def test_library_timeout_is_no_reward() -> None:
    out = score_text(SLOW["response"], SLOW["answer"], timeout=TIMEOUT)
    assert (out.status, out.reward, out.correct) == ("timeout", None, False)
    assert out.outcome == "grader"
    assert out.outcome_fields()["failure"] == GRADER_TIMEOUT


def test_library_explicit_timeout_reward_is_paid_as_is() -> None:
    cfg = reward_config("binary", timeout_reward=0.5)
    out = score_text(SLOW["response"], SLOW["answer"], cfg, timeout=TIMEOUT)
    assert (out.status, out.reward, out.outcome) == ("timeout", 0.5, "grader")


def _cli(path: Path, *flags: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "scorer", "grade", str(path), "-j1", "--json", *flags],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    return lines[:-1], lines[-1]["summary"]


def test_cli_timeout_is_a_null_reward_counted_as_masked(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    wrong = {"id": "wrong", "response": "\\boxed{5}", "answer": "4"}
    traces.write_text(json.dumps({"id": "slow", **SLOW}) + "\n" + json.dumps(wrong) + "\n")
    (slow, incorrect), summary = _cli(traces, "--timeout", str(TIMEOUT))
    _masked(slow)
    assert (incorrect["status"], incorrect["reward"], incorrect["outcome"]) == (
        "incorrect",
        0.0,
        "code",
    )
    assert (summary["masked"], summary["status_counts"]["incorrect"]) == (1, 1)
    assert summary["failures"] == {"grader_timeout": 1}
    assert summary["mean_reward"] == 0.0  # over the one row with a reward
    assert summary["rewards"]["timeout_reward"] is None

    rows, summary = _cli(traces, "--timeout", str(TIMEOUT), "--timeout-reward", "0.5")
    paid = rows[0]
    assert (paid["reward"], paid["status"], paid["outcome"]) == (0.5, "timeout", "grader")
    assert (summary["masked"], summary["rewards"]["timeout_reward"]) == (0, 0.5)


@pytest.fixture(scope="module")
def service() -> Iterator[TestClient]:
    """The real app in-process, without a warm pool: grading needs no sandbox."""
    with TestClient(create_app(Settings(pool_size=0, instance="grader-timeout-test"))) as client:
        yield client


def test_score_route_timeout_is_null(service: TestClient) -> None:
    r = service.post("/score", json={**SLOW, "timeout": TIMEOUT})
    assert r.status_code == 200, r.text
    _masked(r.json())
    paid = service.post(
        "/score", json={**SLOW, "timeout": TIMEOUT, "rewards": {"timeout_reward": 0.5}}
    )
    assert paid.status_code == 200, paid.text
    assert (paid.json()["reward"], paid.json()["outcome"]) == (0.5, "grader")
    none = service.post(
        "/score", json={**SLOW, "timeout": TIMEOUT, "rewards": {"timeout_reward": None}}
    )
    assert none.status_code == 200, none.text
    _masked(none.json())


def test_score_batch_counts_masked_rows_apart_from_wrong_ones(service: TestClient) -> None:
    items = [
        SLOW,
        {"response": "\\boxed{5}", "answer": "4"},
        {"response": "\\boxed{4}", "answer": 4},
    ]
    r = service.post("/score/batch", json={"items": items, "timeout": TIMEOUT})
    assert r.status_code == 200, r.text
    slow, wrong, right = r.json()["results"]
    _masked(slow)
    assert [(x["reward"], x["outcome"], x["failure"]) for x in (wrong, right)] == [
        (0.0, "code", None),
        (1.0, "code", None),
    ]
    summary = r.json()["summary"]
    assert (summary["masked"], summary["status_counts"]["incorrect"]) == (1, 1)
    assert summary["rewards"]["timeout_reward"] is None


def _trl_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trl_reward", ROOT / "examples" / "trl_reward.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trl_reward_returns_none_for_a_grader_timeout() -> None:
    trl_reward = _trl_example()
    completions = [SLOW["response"], "\\boxed{4}", "\\boxed{5}"]
    golds = [SLOW["answer"], "4", "4"]
    assert trl_reward.make_reward(timeout=TIMEOUT)(completions, golds) == [None, 1.0, 0.0]
    # make_reward("binary", timeout_reward=None) is the default, not a hidden 0.0
    explicit_none = trl_reward.make_reward("binary", timeout=TIMEOUT, timeout_reward=None)
    assert explicit_none(completions[:1], golds[:1]) == [None]
    paid = trl_reward.make_reward("binary", timeout=TIMEOUT, timeout_reward=0.5)
    assert paid(completions[:1], golds[:1]) == [0.5]


def test_trl_versions_that_turn_none_into_zero_are_told_apart() -> None:
    trl_reward = _trl_example()
    assert trl_reward.trl_drops_none("1.5.1") is False  # None -> NaN -> nansum: 0.0
    assert trl_reward.trl_drops_none("1.6.0") is True  # huggingface/trl#5902


def test_masked_sum_keeps_a_grader_timeout_masked_beside_another_reward() -> None:
    trl_reward = _trl_example()

    def length_bonus(completions: list[str], **kwargs: Any) -> list[float]:
        return [0.25 for _ in completions]

    combined = trl_reward.masked_sum(trl_reward.make_reward(timeout=TIMEOUT), length_bonus)
    completions = [SLOW["response"], "\\boxed{4}", "\\boxed{5}"]
    got = combined(completions=completions, answer=[SLOW["answer"], "4", "4"])
    assert got == [None, 1.25, 0.25]
