"""The outcome taxonomy: every failure code has one outcome, and the wire fields follow it."""

from scorer.outcome import KIND, RETRYABLE, Failure, FailureCode, OutcomeKind, outcome_fields


def test_the_codes_own_outcome_has_no_failure() -> None:
    assert outcome_fields(None) == {"outcome": "code", "failure": None}


def test_grader_codes_are_the_graders_and_the_rest_are_infrastructure() -> None:
    assert {c for c in FailureCode if KIND[c] is OutcomeKind.GRADER} == {
        FailureCode.GRADER_TIMEOUT,
        FailureCode.GRADER_ERROR,
        FailureCode.GRADER_BAD_INPUT,
    }
    assert all(kind is not OutcomeKind.CODE for kind in KIND.values())


def test_wire_fields_of_a_failure() -> None:
    lost = Failure.of("sandbox_lost")
    assert outcome_fields(lost) == {
        "outcome": "infrastructure",
        "failure": {"code": "sandbox_lost", "retryable": True},
    }
    assert Failure.of(FailureCode.GRADER_TIMEOUT).as_dict() == {
        "code": "grader_timeout",
        "retryable": False,
    }
    assert Failure.of("session_lost").retryable is False
    assert FailureCode.SESSION_LOST not in RETRYABLE


def test_docs_failures_table_lists_every_code() -> None:
    """docs/failures.md is the table of the codes: one row per code, no more."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "failures.md").read_text()
    section = doc.split("## Every failure code", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert sorted(rows) == sorted(code.value for code in FailureCode)
