"""Reward presets (one test per rule), reward overrides, pass@k and the run summary.

These unit tests fake ``verify`` with exact string comparison so a rule is tested alone; the
CLI tests grade with the real equivalence engine.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from scorer.grading import GradeOptions, grade_record, pass_at_k, summarize
from scorer.rewards import describe, reward_config, score_binary, score_interleaved
from scorer.verdict import Verdict

BINARY = reward_config("binary")
INTERLEAVED = reward_config("interleaved")
CALL = '<tool_call>{"name": "calculator", "arguments": {"expr": "3*4"}}</tool_call>'
RESPONSE = '<tool_response>{"value": 12}</tool_response>'


def exact(pred: str, gold: object, *, timeout: float = 5.0) -> Verdict:
    return Verdict(pred == str(gold), "string_match" if pred == str(gold) else "not_equal")


def timing_out(pred: str, gold: object, *, timeout: float = 5.0) -> Verdict:
    return Verdict(False, "timeout", f"gave up after {timeout}s")


def binary(text: str, gold: object = "12", cfg=BINARY, verify=exact):
    return score_binary(text, gold, cfg, verify=verify)


def interleaved(text: str, gold: object = "12", cfg=INTERLEAVED, verify=exact):
    return score_interleaved(text, gold, cfg, verify=verify)


# --- binary -------------------------------------------------------------------------------


def test_binary_right_answer_pays_one() -> None:
    out = binary("<think>3*4</think> \\boxed{12}")
    assert (out.reward, out.status, out.correct, out.pred) == (1.0, "correct", True, "12")


def test_binary_wrong_answer_pays_zero() -> None:
    out = binary("<think>3*4</think> \\boxed{13}")
    assert (out.reward, out.status, out.correct) == (0.0, "incorrect", False)


def test_binary_no_box_is_no_answer_when_the_fallback_is_off() -> None:
    cfg = replace(BINARY, answer_fallback=False)
    out = binary("<think>3*4</think> so it is $12$", cfg=cfg)
    assert (out.reward, out.status, out.pred) == (0.0, "no_answer", None)
    assert binary("<think>3*4</think> no number here at all, sorry.").status == "incorrect"


def test_binary_without_a_box_reads_the_answer_phrase_or_last_expression() -> None:
    assert binary("<think>3*4</think> The final answer is 12.").status == "correct"
    assert binary("<think>3*4</think> So the product is $12$.").status == "correct"
    assert binary("<think>x</think> The answer is not $12$.").status == "no_answer"


def test_binary_takes_last_box_after_last_think_close() -> None:
    text = "<think>\\boxed{11}</think> so \\boxed{12}"
    assert binary(text).status == "correct"
    assert binary(text, gold="11").status == "incorrect"


def test_binary_a_second_different_box_is_a_hedge() -> None:
    out = binary("<think>x</think> \\boxed{13} no wait \\boxed{12}")
    assert (out.status, out.reasons) == ("incorrect", ["hedged"])


def test_binary_without_think_reads_whole_text() -> None:
    assert binary("just \\boxed{12}").status == "correct"


def test_binary_has_no_format_rules() -> None:
    out = binary(f"<think>x</think> {CALL} \\boxed{{12}}")
    assert (out.reward, out.status) == (1.0, "correct")


def test_binary_tool_bonus_only_when_set() -> None:
    text = f"<think>{CALL}{RESPONSE}</think> \\boxed{{12}}"
    assert binary(text).reward == 1.0
    assert binary(text, cfg=reward_config("binary", tool_bonus=0.5)).reward == 1.5


def test_timeout_is_its_own_status_and_no_reward() -> None:
    out = binary("\\boxed{12}", verify=timing_out)
    assert (out.status, out.correct, out.reward) == ("timeout", False, None)
    assert out.reasons == ["timeout"]
    assert out.outcome_fields() == {
        "outcome": "grader",
        "failure": {"code": "grader_timeout", "retryable": False},
    }
    # A number given explicitly is paid as is; the row still says the grader timed out.
    paid = binary(
        "\\boxed{12}", cfg=reward_config("binary", timeout_reward=-0.5), verify=timing_out
    )
    assert (paid.reward, paid.status, paid.outcome) == (-0.5, "timeout", "grader")


def test_timeout_reward_none_is_the_default_not_zero() -> None:
    for preset in ("binary", "interleaved"):
        assert reward_config(preset).timeout_reward is None
        assert reward_config(preset, timeout_reward=None).timeout_reward is None
        assert describe(reward_config(preset))["timeout_reward"] is None
    assert describe(reward_config("binary", timeout_reward=0.5))["timeout_reward"] == 0.5


def test_a_verdict_of_the_answer_is_the_codes_outcome() -> None:
    for out in (binary("\\boxed{12}"), binary("\\boxed{13}"), binary("no box")):
        assert out.outcome_fields() == {"outcome": "code", "failure": None}
        assert out.reward is not None


def test_checker_failure_is_an_error_not_a_wrong_answer() -> None:
    def crashed(pred: str, gold: object, *, timeout: float = 5.0) -> Verdict:
        return Verdict(False, "error", "worker died")

    for score in (binary, interleaved):
        out = score("<think>x</think> \\boxed{12}", verify=crashed)
        assert (out.status, out.reward, out.correct, out.error) == (
            "error",
            None,
            False,
            "worker died",
        )
        assert out.outcome_fields() == {
            "outcome": "grader",
            "failure": {"code": "grader_error", "retryable": True},
        }


def test_box_empty_after_normalisation_is_no_answer() -> None:
    def empty(pred: str, gold: object, *, timeout: float = 5.0) -> Verdict:
        return Verdict(False, "empty", "no answer")

    out = interleaved("<think>x</think> \\boxed{\\quad}", verify=empty)
    assert (out.status, out.reward, out.pred) == ("no_answer", -1.0, "\\quad")


def test_any_of_several_golds() -> None:
    assert binary("\\boxed{b}", gold=["a", "b"]).status == "correct"
    assert binary("\\boxed{c}", gold=["a", "b"]).status == "incorrect"


# --- interleaved: one test per seed rule --------------------------------------------------


def test_rule_missing_think_close_is_format_error() -> None:
    out = interleaved(f"<think>{CALL}{RESPONSE} so \\boxed{{12}}")
    assert (out.reward, out.status) == (-1.0, "format_error")
    assert out.reasons == ["missing_think_close"]


def test_rule_tool_call_after_think_is_format_error() -> None:
    out = interleaved(f"<think>ok</think> {CALL} \\boxed{{12}}")
    assert (out.reward, out.status, out.reasons) == (-1.0, "format_error", ["tool_tag_after_think"])


def test_rule_tool_response_after_think_is_format_error() -> None:
    out = interleaved(f"<think>ok</think> {RESPONSE} \\boxed{{12}}")
    assert (out.reward, out.status, out.reasons) == (-1.0, "format_error", ["tool_tag_after_think"])


def test_rule_unclosed_tool_call_tag_after_think_is_format_error() -> None:
    out = interleaved("<think>ok</think> \\boxed{12} <tool_call>{")
    assert out.status == "format_error"


def test_rule_answer_is_first_box_after_think() -> None:
    text = "<think>\\boxed{12}</think> \\boxed{13}. Indeed, \\boxed{13}."
    out = interleaved(text)
    assert (out.pred, out.status, out.reward) == ("13", "incorrect", -1.0)
    assert interleaved(text, gold="13").reward == 1.0


def test_rule_a_box_in_a_reopened_think_is_a_draft() -> None:
    out = interleaved("<think>a</think> \\boxed{12} <think>b \\boxed{13}")
    assert (out.pred, out.status) == ("12", "correct")
    out = interleaved("<think>a</think> \\boxed{13} <think>b</think> \\boxed{12}")
    assert (out.pred, out.status) == ("12", "correct")  # the answer follows the last close


def test_rule_no_box_after_think_is_minus_one() -> None:
    out = interleaved("<think>\\boxed{12}</think> I am not sure.")
    assert (out.reward, out.status) == (-1.0, "no_answer")


def test_rule_right_answer_pays_one() -> None:
    out = interleaved("<think>3*4</think> \\boxed{12}")
    assert (out.reward, out.status, out.reasons) == (1.0, "correct", ["string_match"])


def test_rule_bonus_for_answered_tool_call_in_think() -> None:
    out = interleaved(f"<think>{CALL}\n{RESPONSE}\nso 12</think> \\boxed{{12}}")
    assert out.reward == pytest.approx(1.2)
    assert out.reasons == ["string_match", "tool_bonus"]


def test_rule_no_bonus_for_unanswered_tool_call() -> None:
    assert interleaved(f"<think>{CALL} so 12</think> \\boxed{{12}}").reward == 1.0


def test_rule_no_bonus_when_response_precedes_call() -> None:
    assert interleaved(f"<think>{RESPONSE} {CALL}</think> \\boxed{{12}}").reward == 1.0


def test_rule_no_bonus_on_wrong_answer() -> None:
    out = interleaved(f"<think>{CALL}{RESPONSE}</think> \\boxed{{13}}")
    assert (out.reward, out.status) == (-1.0, "incorrect")


def test_rule_think_close_inside_tool_output_does_not_close_think() -> None:
    text = "<think><tool_call>{}</tool_call><tool_response></think></tool_response> \\boxed{12}"
    assert interleaved(text).status == "format_error"


def test_interleaved_overrides() -> None:
    cfg = reward_config(
        "interleaved", correct_reward=2.0, wrong_reward=0.0, format_reward=-0.5, tool_bonus=0.5
    )
    assert interleaved(f"<think>{CALL}{RESPONSE}</think>\\boxed{{12}}", cfg=cfg).reward == 2.5
    assert interleaved("<think>x</think>\\boxed{13}", cfg=cfg).reward == 0.0
    assert interleaved("<think>x</think>", cfg=cfg).reward == 0.0
    assert interleaved("no think \\boxed{12}", cfg=cfg).reward == -0.5


def test_interleaved_timeout_is_reported_not_wrong() -> None:
    out = interleaved("<think>x</think>\\boxed{12}", verify=timing_out)
    assert (out.status, out.reward, out.correct, out.outcome) == ("timeout", None, False, "grader")


# --- configuration ------------------------------------------------------------------------


def test_preset_defaults() -> None:
    assert (BINARY.correct_reward, BINARY.wrong_reward, BINARY.tool_bonus) == (1.0, 0.0, 0.0)
    assert (INTERLEAVED.correct_reward, INTERLEAVED.wrong_reward) == (1.0, -1.0)
    assert (INTERLEAVED.format_reward, INTERLEAVED.tool_bonus) == (-1.0, 0.2)


@pytest.mark.parametrize(
    ("preset", "overrides", "message"),
    [
        ("nope", {}, "unknown preset"),
        ("binary", {"bonus": 1.0}, "unknown reward setting"),
        ("binary", {"correct_reward": math.nan}, "finite"),
        ("binary", {"wrong_reward": math.inf}, "finite"),
        ("binary", {"tool_bonus": "1"}, "finite"),
    ],
)
def test_reward_config_rejects(preset: str, overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reward_config(preset, **overrides)


def test_grader_crash_costs_one_error_row() -> None:
    def broken(pred: str, gold: object, *, timeout: float = 5.0) -> Verdict:
        raise RuntimeError("boom")

    rows = grade_record({"id": 7, "response": "\\boxed{1}", "answer": "1"}, verify=broken)
    assert [(r["id"], r["status"], r["reward"]) for r in rows] == [(7, "error", None)]
    assert "boom" in rows[0]["error"]
    assert (rows[0]["outcome"], rows[0]["failure"]) == (
        "grader",
        {"code": "grader_error", "retryable": False},  # the same record would raise again
    )


def test_a_record_without_gold_is_a_masked_bad_input_row() -> None:
    (row,) = grade_record({"id": 8, "response": "\\boxed{1}"}, verify=exact)
    assert (row["status"], row["reward"], row["outcome"]) == ("error", None, "grader")
    assert row["failure"] == {"code": "grader_bad_input", "retryable": False}


def test_rows_carry_the_outcome_of_their_verdict() -> None:
    (right,) = grade_record({"response": "\\boxed{1}", "answer": "1"}, verify=exact)
    (late,) = grade_record({"response": "\\boxed{1}", "answer": "1"}, verify=timing_out)
    assert (right["outcome"], right["failure"], right["reward"]) == ("code", None, 1.0)
    assert (late["outcome"], late["reward"], late["status"]) == ("grader", None, "timeout")
    assert late["failure"] == {"code": "grader_timeout", "retryable": False}


def test_grade_record_passes_the_timeout_to_verify() -> None:
    seen: list[float] = []

    def spy(pred: str, gold: object, *, timeout: float = 5.0) -> Verdict:
        seen.append(timeout)
        return Verdict(True, "string_match")

    grade_record({"response": "\\boxed{1}", "answer": 1}, GradeOptions(timeout=1.5), verify=spy)
    assert seen == [1.5]


# --- pass@k and summary -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 2, 1, 0.5),
        (4, 2, 2, 1 - 1 / 6),  # 1 - C(2,2)/C(4,2)
        (4, 2, 3, 1.0),  # fewer wrong rollouts than draws
        (5, 0, 3, 0.0),
        (5, 5, 1, 1.0),
        (10, 3, 4, 1 - 35 / 210),  # 1 - C(7,4)/C(10,4)
    ],
)
def test_pass_at_k(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_k_above_n() -> None:
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


TIMED_OUT = {"code": "grader_timeout", "retryable": False}
CRASHED = {"code": "grader_error", "retryable": True}


def _row(status: str, reward: float | None, **extra: object) -> dict:
    return {"status": status, "reward": reward, "correct": status == "correct", **extra}


def test_summary_rates_and_denominators() -> None:
    rows = [
        _row("correct", 1.2, tool_calls=1, format="flat"),
        _row("incorrect", -1.0, tool_calls=0, format="flat"),
        _row("no_answer", -1.0, tool_calls=2, format="flat"),
        _row("format_error", -1.0, tool_calls=0, format="chat"),
        _row("timeout", None, tool_calls=0, format="chat", failure=TIMED_OUT),
        _row("error", None, tool_calls=0, failure=CRASHED),
    ]
    s = summarize(rows)
    assert (s["count"], s["graded"], s["correct"], s["errors"], s["timeouts"]) == (6, 5, 1, 1, 1)
    assert s["accuracy"] == pytest.approx(1 / 4)  # timeouts and errors have no verdict
    # the masked rows are counted apart from the one wrong answer, and earn nothing
    assert (s["masked"], s["status_counts"]["incorrect"]) == (2, 1)
    assert s["failures"] == {"grader_error": 1, "grader_timeout": 1}
    assert s["mean_reward"] == pytest.approx((1.2 - 3.0) / 4)
    assert s["no_answer_rate"] == pytest.approx(1 / 5)
    assert s["format_error_rate"] == pytest.approx(1 / 5)
    assert s["tool_use_rate"] == pytest.approx(2 / 5)
    assert s["formats"] == {"flat": 3, "chat": 2}
    assert "pass_at_k" not in s


def test_summary_pass_at_k_over_groups() -> None:
    a = [
        _row(st, None, index=i, line=1, group=1)
        for i, st in enumerate(["correct"] * 2 + ["incorrect"])
    ]
    b = [
        _row(st, None, index=i, line=2, group="g")
        for i, st in enumerate(["correct", "no_answer", "incorrect", "correct"])
    ]
    s = summarize(a + b)
    assert s["groups"] == 2
    # group a: n=3 c=2; group b: n=4 c=2; k up to the smallest group (3)
    assert s["pass_at_k"]["1"] == pytest.approx((2 / 3 + 2 / 4) / 2)
    assert s["pass_at_k"]["2"] == pytest.approx((1.0 + 5 / 6) / 2)
    assert s["pass_at_k"]["3"] == pytest.approx(1.0)
    assert list(s["pass_at_k"]) == ["1", "2", "3"]
