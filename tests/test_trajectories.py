"""Trace formats: each fixture under tests/data/traces/ is read into the assistant text, tool
calls and gold; expected values come from the format rules, written by hand. OpenEnv logs too.

Grading here fakes ``verify`` with exact string comparison (the fixtures' right answers are
written exactly like their golds, except flat-2, which is checked in the CLI tests).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scorer.grading import GradeOptions, grade_record
from scorer.openenv import looks_like_openenv, parse_fields, parse_log, summarize_episodes
from scorer.rewards import reward_config
from scorer.trajectories import (
    TOOL_CALL_TAG,
    TOOL_RESPONSE_TAG,
    clean_gold,
    detect_format,
    find_gold,
    load_answers,
    parse_record,
)
from scorer.verdict import Verdict

TRACES = Path(__file__).parent / "data" / "traces"


def records(name: str) -> list[dict]:
    lines = (TRACES / name).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def exact(pred: str, gold: object, *, timeout: float = 5.0) -> Verdict:
    return Verdict(pred == str(gold), "string_match" if pred == str(gold) else "not_equal")


def grade(record: dict, preset: str, **kw) -> list[tuple]:
    opts = GradeOptions(rewards=reward_config(preset))
    rows = grade_record(record, opts, verify=exact, **kw)
    return [(r["status"], r["reward"]) for r in rows]


# --- format detection and assistant text --------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("flat.jsonl", "flat"),
        ("chat.jsonl", "chat"),
        ("sharegpt.jsonl", "sharegpt"),
        ("atropos_group.jsonl", "atropos_group"),
        ("verifiers.jsonl", "verifiers"),
    ],
)
def test_every_fixture_line_is_detected(name: str, fmt: str) -> None:
    assert {detect_format(r) for r in records(name)} == {fmt}


def test_unknown_format_names_the_keys() -> None:
    with pytest.raises(ValueError, match=r"unknown trace format.*keys: answer, text"):
        detect_format({"text": "\\boxed{1}", "answer": "1"})


def test_flat_keeps_spliced_tool_blocks_and_counts_calls() -> None:
    traj = parse_record(records("flat.jsonl")[0])
    assert (traj.id, traj.format, traj.gold) == ("flat-1", "flat", "20")
    (rollout,) = traj.rollouts
    assert rollout.text.startswith("<think>\nI need (2+3)*4")
    assert '<tool_response>{"value": 20}</tool_response>' in rollout.text
    assert rollout.tool_calls == 1


def test_chat_final_turn_with_structured_tool_call() -> None:
    traj = parse_record(records("chat.jsonl")[0])
    assert traj.rollouts[0].text == (
        "<think>\nLet me compute 17*23 with Python."
        + TOOL_CALL_TAG
        + "\n"
        + TOOL_RESPONSE_TAG
        + "\nThe interpreter printed 391.\n</think>\n\nThe product is \\boxed{391}."
    )
    assert traj.rollouts[0].tool_calls == 1
    assert "391\n" not in traj.rollouts[0].text.replace("391.", "")  # tool output is not kept


def test_chat_only_turns_after_last_user_message_count() -> None:
    traj = parse_record(records("chat.jsonl")[1])
    assert traj.rollouts[0].text == "<think>\nexplain\n</think>\nTwo plus eight makes ten."


def test_chat_content_parts_are_joined() -> None:
    traj = parse_record(records("chat.jsonl")[3])
    assert traj.rollouts[0].text == "<think>\n1/4 + 1/4 = 2/4\n</think>\n\\boxed{\\frac{1}{2}}"


def test_chat_reasoning_content_becomes_a_think_block() -> None:
    record = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "reasoning_content": "draft \\boxed{1}", "content": "\\boxed{2}"},
        ],
        "answer": "2",
    }
    assert parse_record(record).rollouts[0].text == "<think>draft \\boxed{1}</think>\\boxed{2}"


def test_sharegpt_tool_turns_are_placeholders() -> None:
    traj = parse_record(records("sharegpt.jsonl")[0])
    text = traj.rollouts[0].text
    assert text.endswith(TOOL_RESPONSE_TAG + "\n2^10 = 1024.\n</think>\n\\boxed{1024}")
    assert "tool_response>\n{" not in text  # the tool turn's value is not assistant text
    assert traj.rollouts[0].tool_calls == 1


def test_atropos_group_has_one_rollout_per_conversation() -> None:
    traj = parse_record(records("atropos_group.jsonl")[0], default_id=1)
    assert (traj.id, traj.group, traj.gold) == (1, True, 12)
    assert [r.index for r in traj.rollouts] == [0, 1, 2]
    assert [r.env_reward for r in traj.rollouts] == [1.2, -1.0, 1.0]
    assert [r.tool_calls for r in traj.rollouts] == [1, 0, 0]
    assert traj.rollouts[1].text == "<think>\nhmm\n</think>\n\\boxed{13}"


def test_verifiers_completion_messages() -> None:
    traj = parse_record(records("verifiers.jsonl")[1])
    assert (traj.id, traj.format, traj.gold) == (1, "verifiers", "49")
    assert traj.rollouts[0].env_reward == 1.0
    assert traj.rollouts[0].tool_calls == 1
    assert traj.rollouts[0].text.endswith("It printed 49.\n</think>\n\\boxed{49}")


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ([1, 2], "JSON object"),
        ({"messages": [], "answer": "1"}, "messages is empty"),
        ({"messages": [{"content": "hi"}], "answer": "1"}, "string 'role'"),
        ({"conversations": "hi", "answer": "1"}, "must be a list"),
    ],
)
def test_malformed_records_raise(record: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_record(record)


# --- gold ---------------------------------------------------------------------------------


def test_gold_key_precedence() -> None:
    assert find_gold({"answer": "1", "solution": "\\boxed{2}"}) == "1"
    assert find_gold({"answer": None, "expected_answer": "", "gold": "3"}) == "3"
    assert find_gold({"solution": "so $\\boxed{\\frac13}$, and \\boxed{4}"}) == "4"
    assert find_gold({"label": 5}) == 5
    assert find_gold({"reward_model": {"style": "rule", "ground_truth": "72"}}) == "72"
    assert find_gold({"prompt": "no gold"}) is None


def test_gold_cleaning() -> None:
    assert clean_gold("The answer is \\boxed{7}.") == "7"
    assert clean_gold("48/2 = 24 clips.\n#### 72") == "72"
    assert clean_gold(2.5) == 2.5
    assert clean_gold(["1", 2, ""]) == ["1", 2]
    assert clean_gold("   ") is None
    for bad in (True, {"x": 1}, float("nan")):
        with pytest.raises(ValueError):
            clean_gold(bad)


def test_answers_file_overrides_record_gold_by_id() -> None:
    answers = load_answers(['{"id": "a", "answer": "9"}', "", '{"id": 3, "gold": 4}'])
    assert answers == {"a": "9", "3": 4}
    assert parse_record({"id": "a", "response": "x", "answer": "1"}, answers=answers).gold == "9"
    assert parse_record({"response": "x"}, answers=answers, default_id=3).gold == 4


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{bad"], "answers:1: not JSON"),
        (['{"answer": "1"}'], "answers:1: no 'id'"),
        (['{"id": 1}'], "no answer for id 1"),
        (['{"id": 1, "answer": "1"}', '{"id": 1, "answer": "2"}'], "two different answers"),
    ],
)
def test_bad_answers_file(lines: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_answers(lines)


# --- grading each fixture (rules applied by hand) -----------------------------------------


def test_grade_chat_fixture() -> None:
    recs = records("chat.jsonl")
    assert [grade(r, "binary")[0] for r in recs] == [
        ("correct", 1.0),
        ("no_answer", 0.0),  # the right box is in an earlier turn
        ("correct", 1.0),
        ("correct", 1.0),
    ]
    assert [grade(r, "interleaved")[0] for r in recs] == [
        ("correct", pytest.approx(1.2)),  # structured call answered inside the think block
        ("no_answer", -1.0),
        ("format_error", -1.0),  # tool call made after </think>
        ("correct", 1.0),
    ]


def test_grade_sharegpt_fixture() -> None:
    recs = records("sharegpt.jsonl")
    assert [grade(r, "interleaved")[0] for r in recs] == [
        ("correct", pytest.approx(1.2)),
        ("incorrect", -1.0),
    ]


def test_grade_verifiers_fixture() -> None:
    recs = records("verifiers.jsonl")
    assert [grade(r, "interleaved")[0] for r in recs] == [
        ("correct", 1.0),
        ("correct", pytest.approx(1.2)),
        ("incorrect", -1.0),
    ]


def test_grade_atropos_groups_with_answers() -> None:
    recs = records("atropos_group.jsonl")
    assert grade(recs[0], "interleaved", line=1) == [
        ("correct", pytest.approx(1.2)),
        ("incorrect", -1.0),
        ("correct", 1.0),
    ]
    assert grade(recs[1], "binary", line=2) == [("error", None)]  # its gold is in answers.jsonl
    answers = load_answers((TRACES / "answers.jsonl").read_text().splitlines())
    assert grade(recs[1], "binary", line=2, answers=answers) == [
        ("correct", 1.0),
        ("no_answer", 0.0),  # \boxed{} is no answer
        ("incorrect", 0.0),
        ("correct", 1.0),  # binary needs no </think>
    ]
    rows = grade_record(recs[1], answers=answers, line=2, verify=exact)
    assert [(r["id"], r["group"], r["index"]) for r in rows] == [
        ("grp-2", "grp-2", i) for i in range(4)
    ]


# --- OpenEnv logs -------------------------------------------------------------------------


def test_openenv_log_is_detected() -> None:
    assert looks_like_openenv((TRACES / "openenv.log").read_text().splitlines())
    assert not looks_like_openenv((TRACES / "flat.jsonl").read_text().splitlines())


def test_openenv_fields_split_only_at_known_keys() -> None:
    fields = parse_fields("STEP", 'step=2 action=comment(line=12, text="a b") reward=0.50 done=x')
    assert fields == {
        "step": "2",
        "action": 'comment(line=12, text="a b")',
        "reward": "0.50",
        "done": "x",
    }


def test_openenv_episodes() -> None:
    episodes, problems = parse_log((TRACES / "openenv.log").read_text().splitlines())
    assert [(e.task, e.success, e.steps, e.score, e.errors, e.complete) for e in episodes] == [
        ("easy", True, 3, 0.9, 0, True),
        ("easy", False, 1, 0.1, 0, True),
        ("hard", False, 3, 0.2, 1, True),
        ("hard", True, 1, 1.0, 0, True),
        ("hard", None, 1, None, 0, False),
    ]
    assert episodes[0].rewards == [0.0, 0.5, 0.4]
    assert episodes[2].error_messages == ["timeout after 30s"]
    assert problems == [(19, "episode has no [END] line")]  # its [START] line


def test_openenv_summary() -> None:
    episodes, _ = parse_log((TRACES / "openenv.log").read_text().splitlines())
    s = summarize_episodes(episodes)
    assert s["episodes"] == 5
    assert s["success_rate"] == pytest.approx(2 / 4)  # over complete episodes
    assert s["mean_score"] == pytest.approx((0.9 + 0.1 + 0.2 + 1.0) / 4)
    assert s["mean_steps"] == pytest.approx((3 + 1 + 3 + 1 + 1) / 5)
    assert (s["errors"], s["incomplete"]) == (1, 1)
    easy, hard = s["tasks"]["easy"], s["tasks"]["hard"]
    assert (easy["episodes"], easy["success_rate"], easy["mean_score"]) == (2, 0.5, 0.5)
    assert easy["mean_steps"] == 2.0
    assert (hard["episodes"], hard["success_rate"], hard["errors"], hard["incomplete"]) == (
        3,
        0.5,
        1,
        1,
    )
    assert hard["mean_score"] == pytest.approx(0.6)


def test_openenv_stray_lines_are_problems() -> None:
    _, problems = parse_log(
        ["[STEP] step=1 action=a reward=0 done=true error=null", "[START] task=t env=e model=m"]
        + ["[STEP] step=1 action=a reward=oops done=true error=null", "[END] success=maybe"]
    )
    assert [n for n, _ in problems] == [1, 3, 4]


def test_openenv_masked_episodes_are_neither_successes_nor_failures() -> None:
    lines = [
        "[START] task=t env=boxed_code model=m",
        "[STEP] step=1 action=x = 1 reward=0.00 done=false outcome=code failure=null error=null",
        "[STEP] step=2 action=print(x) reward=null done=true outcome=infrastructure "
        "failure=session_lost error=session abc is lost: its sandbox failed",
        "[END] success=null steps=2 score=null rewards=0.00,null outcome=infrastructure",
        "[START] task=t env=boxed_code model=m",
        "[STEP] step=1 action=answer('2') reward=0.00 done=true outcome=code failure=null "
        "error=null",
        "[END] success=false steps=1 score=0.000 rewards=0.00 outcome=code",
    ]
    episodes, problems = parse_log(lines)
    assert problems == []
    lost, wrong = episodes
    assert (lost.masked, lost.outcome, lost.failure, lost.success, lost.score) == (
        True,
        "infrastructure",
        "session_lost",
        None,
        None,
    )
    assert lost.rewards == [0.0, None] and lost.error_messages == [
        "session abc is lost: its sandbox failed"
    ]
    assert not wrong.masked and wrong.success is False
    s = summarize_episodes(episodes)
    assert (s["masked"], s["success_rate"], s["mean_score"]) == (1, 0.0, 0.0)
    _, problems = parse_log(["[START] task=t", "[END] success=null outcome=code"])
    assert problems == [(2, "[END] success is not true/false: 'null'")]  # the code's: a grade
