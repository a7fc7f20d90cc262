"""The Math-Verify bench's converters and metric arithmetic, on hand-written rows.

No fetched data and no Math-Verify needed: the bench itself reads the public rows from the
git-ignored ``bench/data/``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import bench_vs_math_verify as bench  # noqa: E402
import mv_convert  # noqa: E402
from mv_metrics import Confusion, miss_class  # noqa: E402


def test_confusion_counts_and_ratios() -> None:
    c = Confusion()
    for accepted, label in [(True, True)] * 6 + [(True, False)] + [(False, True)] * 2:
        c.add(accepted, label)
    c.add(False, False)
    c.add(False, True, decided=False)  # an undecided row is a rejection, and counted apart
    assert (c.tp, c.fp, c.fn, c.tn, c.undecided) == (6, 1, 3, 1, 1)
    assert c.rows == 11
    assert c.accuracy == pytest.approx(7 / 11)
    assert c.precision == pytest.approx(6 / 7)
    assert c.recall == pytest.approx(6 / 9)


def test_confusion_undefined_ratios_are_none_not_zero() -> None:
    c = Confusion()
    c.add(False, False)
    assert c.accuracy == 1.0
    assert c.precision is None  # nothing accepted
    assert c.recall is None  # nothing labelled right


def test_gsm8k_samples_yield_a_solution_and_a_pair_per_model() -> None:
    rec = {
        "question": "q",
        "ground_truth": "3 + 4 = <<3+4=7>>7\nA: 7",
        "6b_finetuning": {"is_correct": True, "solution": "3 + 4 = 7\nA: 7"},
        "175b_verification": {"is_correct": False, "solution": "I think it is eight."},
    }
    rows = list(mv_convert.convert_gsm8k_samples([json.dumps(rec), ""], "src"))
    assert [(r.kind, r.id, r.gold, r.answer, r.label) for r in rows] == [
        ("solution", "0:6b_finetuning", "7", "3 + 4 = 7\nA: 7", True),
        ("pair", "0:6b_finetuning", "7", "7", True),
        # no "A:" line: no pair (the converter never guesses the answer), the solution stays
        ("solution", "0:175b_verification", "7", "I think it is eight.", False),
    ]
    assert {r.label_by for r in rows} == {"auto"}


def test_mr_gsm8k_keeps_each_uuid_once_and_skips_programs_and_broken_golds() -> None:
    def rec(uuid: str, qtype: str, steps: list[str], correctness: str) -> dict:
        return {
            "uuid": uuid,
            "question_type": qtype,
            "ground_truth_answer": 5,
            "model_output_steps": steps,
            "model_output_answer_correctness": correctness,
        }

    a = rec("u1", "original", ["Step 1: 75 / 15 = 5", "Step 2: #### 5"], "correct")
    b = rec("u2", "POT", ["Step 1: x = 75 / 15", "Step 2: print(x)"], "wrong")
    c = {**rec("u3", "reversed", ["Step 1: #### 5"], "correct"), "ground_truth_answer": "Let's"}
    docs = [json.dumps([a, b, c]), json.dumps([a])]
    rows = list(mv_convert.convert_mr_gsm8k(docs, "src"))
    assert [(r.kind, r.id, r.gold, r.answer, r.label) for r in rows] == [
        ("solution", "u1", "5", "75 / 15 = 5\n#### 5", True),
        ("pair", "u1", "5", "5", True),
    ]


def test_mr_math_reads_both_label_forms() -> None:
    invalid = {
        "id": 3,
        "ground_truth_answer": "\\frac{1}{2}",
        "model_output": "So it is $\\boxed{0.5}$. #### 0.5 ",
        "model_output_answer_correctness": "wrong",
    }
    rated = {
        "id": 4,
        "ground_truth_answer": "12",
        "model_output_step_format": [["2 + 10 = 12."], ["# Answer\n\n12"]],
        "rating": [1, 1],
    }
    neutral = {**rated, "id": 5, "rating": [1, 0]}  # a neutral answer step: no label
    lines = [json.dumps(invalid), json.dumps(rated), json.dumps(neutral)]
    rows = list(mv_convert.convert_mr_math(lines, "x/mr-math_invalid_errors.json"))
    assert [(r.kind, r.answer, r.label) for r in rows] == [
        ("solution", "So it is $\\boxed{0.5}$. #### 0.5 ", False),
        ("pair", "0.5", False),
        ("solution", "2 + 10 = 12.\n\n# Answer\n\n12", True),
        ("pair", "12", True),
    ]


def test_unittest_equivalence_is_read_with_ast_not_run() -> None:
    doc = """
class T(unittest.TestCase):
    def test_half(self):
        test_in = "1/2"
        test_out = "\\\\frac{1}{2}"
        self.assertTrue(is_equiv(test_in, test_out))

    def test_order(self):
        test_in = "10, 4"
        test_out = "4, 10"
        self.assertFalse(is_equiv(test_in, test_out))

    def test_other_shape(self):
        self.assertTrue(is_equiv("1", "1"))

    def helper(self):
        test_in, test_out = "1", "2"
"""
    rows = list(mv_convert.convert_unittest_equivalence([doc], "src"))
    assert [(r.id, r.gold, r.answer, r.label) for r in rows] == [
        ("test_half#0", "1/2", "\\frac{1}{2}", True),
        ("test_order#0", "10, 4", "4, 10", False),
    ]


def test_unittest_equivalence_reads_helpers_sequences_and_pair_loops() -> None:
    doc = """
class T(unittest.TestCase):
    def test_many(self):
        test_in = "1, 2"
        test_out = "2, 1"
        self.assertTrue(_test_is_equiv(test_in, test_out, verbose=False))
        test_in = "[-3,2]"
        test_out = "(-3,2)"
        self.assertFalse(_test_is_not_equiv(test_in, test_out, verbose=False))
        test_pairs = [("10 cm", "10"), ("10 weeks", "10")]
        for test_in, test_out in test_pairs:
            self.assertTrue(_test_is_equiv(test_in, test_out))
"""
    rows = list(mv_convert.convert_unittest_equivalence([doc], "src", set_name="mario-tests"))
    assert [(r.set, r.id, r.gold, r.answer, r.label) for r in rows] == [
        ("mario-tests", "test_many#0", "1, 2", "2, 1", True),
        ("mario-tests", "test_many#1", "[-3,2]", "(-3,2)", False),
        ("mario-tests", "test_many#2", "10 cm", "10", True),
        ("mario-tests", "test_many#3", "10 weeks", "10", True),
    ]


def test_rewardbench_math_joins_the_gold_by_problem_and_pairs_only_boxed_steps() -> None:
    answers = json.dumps([{"problem": "p1", "answer": "12"}, {"problem": "p2", "answer": "3"}])
    sols = [
        {"problem": "p1", "problem_id": 0, "solution_type": "chosen",
         "eval_solution": ["5 + 7", "so $\\boxed{12}$."]},
        {"problem": "p1", "problem_id": 0, "solution_type": "rejected",
         "eval_solution": ["5 + 6", "So the answer is 11."]},
        {"problem": "p2", "problem_id": 1, "solution_type": "rejected",
         "eval_solution": ["1 + 1 = 3 (a wrong step)", "Therefore $x = 3$."]},
        {"problem": "p2", "problem_id": 1, "solution_type": "rejected",
         "eval_solution": ["2 + 2 = 5 (a wrong step)", "It rose by $3\\%$."]},
        {"problem": "unknown", "problem_id": 2, "solution_type": "chosen", "eval_solution": ["1"]},
    ]  # fmt: skip
    rows = mv_convert.audit(
        list(mv_convert.convert_rewardbench_math([answers, json.dumps(sols)], "s"))
    )
    assert [(r.kind, r.gold, r.label, r.suspect is not None) for r in rows] == [
        ("solution", "12", True, False),
        ("pair", "12", True, False),
        ("solution", "12", False, False),
        # rejected for a step, yet it states the gold: its label is not about the answer
        ("solution", "3", False, True),
        ("solution", "3", False, True),  # the gold's value in another notation
    ]
    assert rows[1].answer == "12"
    assert {r.question for r in rows} == {"p1", "p2"}  # the problem text rides along


@pytest.mark.parametrize(
    ("gold", "answer", "label", "suspect"),
    [
        ("4", "4", False, "identical"),
        ("\\left( 3, \\dfrac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2}).", False, "identical"),
        ("10{,}000", "10000", False, "the gold's number"),
        ("\\$18.90", "18.90", False, "identical"),  # a currency sign is not a difference
        ("20", "8", True, "a different number"),
        ("1,000", "1000", True, None),  # thousands separators: the same number
        ("3, 5, 7", "3, 7, 5", True, None),  # a list is not a number: no opinion
        ("\\frac{1}{2}", "0.5", True, None),  # equal forms are the grader's business
        ("5", "6", False, None),
        ("5", None, False, None),
        ("\\text{Maria}", "41.5", True, "in words"),  # a number is not a name
        ("\\text{Maria}", "41.5", False, None),
        ("\\text{Maria}", "\\text{Maria}", True, None),
        ("x", "2", True, None),  # a one-letter gold is a variable, maybe an expression's
    ],
)
def test_suspect_reason_is_decided_by_the_data_alone(
    gold: str, answer: str | None, label: bool, suspect: str | None
) -> None:
    reason = mv_convert.suspect_reason(gold, answer, label)
    assert (reason is None) == (suspect is None)
    assert suspect is None or suspect in (reason or "")


@pytest.mark.parametrize(
    ("step", "stated"),
    [
        ("Therefore, $x=83$ is the correct solution.", "83"),
        ("This gives me $a+b = 121 + 909 = 1030$.", "1030"),
        ("So $\\frac{13}{15}$ as a percentage is 86.67%.", "86.67"),  # prose after the math
        ("Simplifying, I get \\[CD=-5.\\]", "-5"),
        ("The radius is r = 1/3 units.", "1/3"),
        ("The third side can be either 2 or 3.", None),  # alternatives: no single value
        ("I could not finish.", None),
    ],
)
def test_stated_value_reads_the_last_value_a_step_states(step: str, stated: str | None) -> None:
    assert mv_convert.stated_value(step) == stated


@pytest.mark.parametrize(
    ("stated", "gold", "same"),
    [
        (
            "\\begin{pmatrix} \\frac{2}{7} \\\\ 1 \\end{pmatrix}",
            "\\begin{pmatrix} 2/7 \\\\ 1 \\end{pmatrix}",
            True,
        ),
        ("\\frac{5}{7} \\approx 0.714", "\\frac{5}{7}", True),  # the exact value, then its rounding
        ("25\\%", "25", True),
        ("96", "96 \\mbox{ feet}^2", True),
        ("[0, 4)", "t \\in [0,4)", True),
        ("\\frac{5}{7}", "\\frac{7}{5}", False),
        ("96", "960", False),
        ("[0, 4]", "t \\in [0,4)", False),
        ("x^2", "x^2 + 1", False),
    ],
)
def test_stated_form_reads_past_notation_only(stated: str, gold: str, same: bool) -> None:
    assert (mv_convert.stated_form(stated) == mv_convert.stated_form(gold)) is same


def test_last_box_balances_braces() -> None:
    assert mv_convert.last_box("$\\boxed{1}$ then $\\boxed{\\frac{1}{2}}$.") == "\\frac{1}{2}"
    assert mv_convert.last_box("no box") is None


def test_convert_all_reads_the_raw_layout(tmp_path: Path) -> None:
    rec = {"ground_truth": "A: 2", "m": {"is_correct": True, "solution": "1+1=2\nA: 2"}}
    src = mv_convert.SOURCES[0]
    path = mv_convert.raw_path(src.repo, src.paths[0], tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rec) + "\n")
    rows = mv_convert.convert_all(tmp_path)  # the other sources are missing: skipped
    assert [(r.set, r.kind, r.answer, r.suspect) for r in rows] == [
        ("gsm8k-samples", "solution", "1+1=2\nA: 2", None),
        ("gsm8k-samples", "pair", "2", None),
    ]


@pytest.mark.parametrize(
    ("gold", "answer", "accepted", "expected"),
    [
        ("5", "6", True, "wrong accept"),
        ("5", "5", True, "identical to the gold (label noise?)"),
        ("10, 4, -2", "4, 10, -2", True, "a list or tuple"),
        ("18", "x = 18", False, "labelled answer"),
        ("18", "18 dollars", False, "words or units"),
        ("18", "\\$18", False, "currency or percent"),
        ("6.5", "6", False, "decimal vs integer"),
        ("(1,2)", "(2,1)", False, "list, tuple"),
    ],
)
def test_miss_class(gold: str, answer: str, accepted: bool, expected: str) -> None:
    assert expected in miss_class(gold, answer, accepted=accepted)


@pytest.mark.parametrize(
    ("solution", "expected"),
    [
        ("2 + 3 = 5\n#### 5", "GSM8K '#### X' line"),
        ("2 + 3 = 5\nA: 5", "'A: X' line"),
        ("2 + 3 = 5\n\n# Answer\n\n5", "PRM800K '# Answer' section"),
        ("So the answer is 5.", "'the answer is X' phrase"),
        ("Adding them gives $5$.", "only in prose or math"),
    ],
)
def test_miss_class_of_a_solution_without_an_answer(solution: str, expected: str) -> None:
    assert expected in miss_class("5", None, accepted=False, solution=solution)


def test_load_rows_groups_and_limits(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    rows = [{"set": "s", "kind": "pair", "id": str(i), "label": True} for i in range(5)]
    rows.append({"set": "a", "kind": "solution", "id": "x", "label": False})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    groups = bench.load_rows(path, limit=2, seed=0)
    assert list(groups) == [("a", "solution"), ("s", "pair")]  # sorted
    assert len(groups[("s", "pair")]) == 2
    assert groups == bench.load_rows(path, limit=2, seed=0)  # the sample is seeded


ROWS = [
    ("\\frac{1}{2}", "0.5", "pair"),
    ("7", "8", "pair"),
    ("7", "3 + 4 is $\\boxed{7}$.", "solution"),
    ("7", "3 + 4 = 7\nA: 7", "solution"),  # no box: the binary preset's final-answer phrase
    ("7", "I could not finish this one.", "solution"),  # nothing that reads as an answer
]


def test_boxed_grades_pairs_with_verify_and_solutions_through_the_reward_path() -> None:
    out = bench.run_boxed(ROWS)
    assert out.accepted == [True, False, True, True, False]
    assert out.decided == [True] * 5
    assert out.extracted == ["0.5", "8", "7", "7", None]
    assert out.detail[4].startswith("no_answer")
    assert all(t > 0 for t in out.times)


def test_boxed_grades_with_the_question_when_given() -> None:
    rows = [("2, 9", "9, 2", "pair"), ("2, 9", "So $x = \\boxed{9}$ or $\\boxed{2}$.", "solution")]
    assert bench.run_boxed(rows).accepted == [False, False]  # in order without the question
    questions = ["Find all real roots of $p$.", None]
    assert bench.run_boxed(rows, questions).accepted == [True, False]  # "or" stays a hedge


def test_math_verify_runs_in_a_child_on_the_same_rows() -> None:
    pytest.importorskip("math_verify")
    out = bench.run_math_verify(ROWS, row_timeout=30.0)
    assert out.accepted == [True, False, True, True, False]  # its extraction reads "A: 7"
    assert out.decided == [True] * 5


def test_headline_leaves_suspect_rows_out_and_counts_them_apart() -> None:
    rows = [
        {"label": True},
        {"label": False},
        {"label": False, "suspect": "labelled wrong, identical to the gold"},
    ]
    kept, aside = bench.headline([True, False, True], [True, True, True], rows)
    assert (kept.tp, kept.fp, kept.fn, kept.tn) == (1, 0, 0, 1)
    assert (aside.rows, aside.fp) == (1, 1)  # the accepted suspect row is no wrong accept
