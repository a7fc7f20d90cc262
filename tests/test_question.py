"""Question-aware grading (issue #29, item 4): the form a question asks for is enforced when
the question is given, on every path (verify, score_text, trajectory records, /score), and
nothing changes without it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from exec_server.app import create_app
from exec_server.settings import Settings
from scorer.equivalence import verify
from scorer.grading import grade_record
from scorer.question import demands
from scorer.rewards import reward_config, score_text

FRACTION = "What is the probability? Express your answer as a common fraction."
PI = "Find the area of the circle. Express your answer in terms of $\\pi$."
ORDER = "Find all roots and list them in increasing order, separated by commas."
INTEGER = "How many miles is that? Round to the nearest integer."
UNIT = "How long is the rope, in centimeters?"
BINOM = "Compute $\\dbinom{10}{3}$."
RADICAL = "Express your answer as a common fraction in simplest radical form."

# (pred, gold, question): right value, wrong form -> rejected with the question only
WRONG_FORM = [
    ("0.75", "\\frac34", FRACTION),
    ("\\frac{6}{8}", "\\frac34", FRACTION),
    ("12.566", "4\\pi", PI),
    ("\\frac{12}{4}", "3", INTEGER),
    ("37 \\text{ m}", "37", UNIT),
    ("\\binom{10}{3}", "120", BINOM),
    ("\\dbinom{10}{3}", "120", BINOM),
    ("1.299", "\\frac{3\\sqrt{3}}{4}", RADICAL),
]
RIGHT_FORM = [
    ("\\frac{3}{4}", "\\frac34", FRACTION),
    ("3/4", "0.75", FRACTION),
    ("\\frac 34", "0.75", FRACTION),  # a fraction without braces is a fraction
    ("-\\frac{3}{4}", "-0.75", FRACTION),
    ("\\frac{3\\sqrt{3}}{4}", "\\frac{3\\sqrt3}{4}", RADICAL),  # radicals asked for
    ("4\\pi", "4\\pi", PI),
    ("1, 2, 3", "1, 2, 3", ORDER),
    ("3", "3", INTEGER),
    ("37 \\text{ cm}", "37", UNIT),
    ("37", "37", UNIT),
    ("120", "120", BINOM),
    ("x + 1", "x + 1", "Simplify $\\frac{x^2-1}{x-1}$; the answer has the form $x + 1$."),
    ("1, 2", "1, 2", "In order to solve it, find both roots."),  # "in order to" asks no order
    # a list in another order than the gold's is paid only when the question asks for a set
    # (without a question it is compared in order: tests/test_list_order.py)
    ("8, 5", "5, 8", "Find all real solutions, separated by commas."),
]


@pytest.mark.parametrize(("pred", "gold", "question"), WRONG_FORM)
def test_the_form_the_question_asks_for_is_enforced(pred: str, gold: str, question: str) -> None:
    assert verify(pred, gold).correct, "without the question the value is right"
    v = verify(pred, gold, question=question)
    assert not v.correct and v.reason == "not_equal", v
    out = score_text(f"\\boxed{{{pred}}}", gold, reward_config("binary"), question=question)
    assert out.status == "incorrect"


@pytest.mark.parametrize(("pred", "gold", "question"), RIGHT_FORM)
def test_answers_in_the_asked_form_are_paid(pred: str, gold: str, question: str) -> None:
    assert verify(pred, gold, question=question).correct
    out = score_text(f"\\boxed{{{pred}}}", gold, reward_config("binary"), question=question)
    assert out.correct


def test_demands_read_from_the_question() -> None:
    d = demands(FRACTION + " " + ORDER)
    assert d.fraction and d.ordered and not d.pi and not d.integer
    assert demands(UNIT).unit == "cm"
    assert demands(None) == demands("")


def test_a_trajectory_record_carries_its_question() -> None:
    record = {"response": "\\boxed{0.75}", "answer": "\\frac34", "question": FRACTION}
    assert grade_record(record)[0]["status"] == "incorrect"
    del record["question"]
    assert grade_record(record)[0]["status"] == "correct"


@pytest.fixture(scope="module")
def app_client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(pool_size=0, instance="question-test"))) as client:
        yield client


def test_score_route_takes_a_question(app_client: TestClient) -> None:
    row = {"response": "\\boxed{0.75}", "answer": "\\frac34"}
    r = app_client.post("/score", json={**row, "question": FRACTION})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "incorrect"
    r = app_client.post("/score", json=row)
    assert r.json()["status"] == "correct"
    batch = {"items": [{**row, "question": FRACTION}, row]}
    rows = app_client.post("/score/batch", json=batch).json()["results"]
    assert [x["status"] for x in rows] == ["incorrect", "correct"]
