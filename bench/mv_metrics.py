"""Confusion counts of one grader on one labelled set, and a rough class for each miss.

Positive class = "the answer matches the gold" (the grader accepts, a reward is paid). A row the
grader could not decide (boxed: a timeout or a crashed worker, which reach a trainer as "no
reward"; Math-Verify: killed after hanging) is counted as *not accepted* and also reported on its
own, so an undecided row never hides inside the wrong-answer counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Confusion:
    """Counts of a grader's verdicts against the labels."""

    tp: int = 0  # accepted, labelled right
    fp: int = 0  # accepted, labelled wrong: a wrong accept (a reward paid for a wrong answer)
    fn: int = 0  # rejected, labelled right: a missed accept
    tn: int = 0  # rejected, labelled wrong
    undecided: int = 0  # no verdict (also counted as rejected in fn/tn)

    def add(self, accepted: bool, label: bool, *, decided: bool = True) -> None:
        if not decided:
            self.undecided += 1
        if accepted and label:
            self.tp += 1
        elif accepted:
            self.fp += 1
        elif label:
            self.fn += 1
        else:
            self.tn += 1

    @property
    def rows(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / self.rows if self.rows else 0.0

    @property
    def precision(self) -> float | None:
        """``None`` when the grader accepted nothing (precision is undefined, not 0 or 1)."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        """``None`` when no row is labelled right."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)$")
_LETTERS = re.compile(r"[A-Za-z]{2,}")


def _plain(s: str) -> str:
    return re.sub(r"\s+", "", s).strip("$.")


_FINAL_MARKERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^\s*####", re.MULTILINE), "a GSM8K '#### X' line"),
    (re.compile(r"^\s*A:", re.MULTILINE), "an 'A: X' line"),
    (re.compile(r"^# Answer", re.MULTILINE), "a PRM800K '# Answer' section"),
    (re.compile(r"answer is", re.IGNORECASE), "an 'the answer is X' phrase"),
)


def no_answer_class(solution: str) -> str:
    """How a solution in which boxed found no answer marks its final answer instead."""
    tail = solution[-600:]
    for marker, name in _FINAL_MARKERS:
        if marker.search(tail):
            return f"whole solution, no \\boxed{{}}: final answer in {name}"
    return "whole solution, no \\boxed{}: final answer only in prose or math"


def miss_class(
    gold: str, answer: str | None, *, accepted: bool, solution: str | None = None
) -> str:
    """A rough class of one boxed miss, for the people improving the rules (not a verdict).

    ``answer`` is what boxed compared (the pair's answer, or the answer it extracted from
    ``solution``); ``None`` with a ``solution`` means it found no answer in it at all.
    """
    if answer is None:
        return no_answer_class(solution or "")
    g, a = _plain(gold), _plain(answer)
    if accepted:
        if g == a:
            return "wrong accept: identical to the gold (label noise?)"
        if "," in g and g.count(",") == a.count(","):
            return "wrong accept: a list or tuple (in another order?)"
        return "wrong accept"
    if g == a:
        return "missed: identical to the gold after spacing (label or extraction?)"
    if "=" in answer and "=" not in gold:
        return "missed: labelled answer or equation (name = value)"
    if "\\boxed" in answer or "\n" in answer:
        return "missed: several answers or a box inside the answer"
    if any(c in answer for c in "$%") or "\\$" in answer or "\\%" in answer:
        return "missed: currency or percent"
    if _LETTERS.search(re.sub(r"\\[A-Za-z]+", "", answer)):
        return "missed: words or units around the value"
    if _NUMBER.match(g) and _NUMBER.match(a.replace(",", "")):
        if "." in g or "." in a:
            return "missed: decimal vs integer (rounding or a trailing .0)"
        return "missed: different numbers (label noise?)"
    if "," in answer or "," in gold:
        return "missed: list, tuple or thousands separators"
    return "missed: other notation"
