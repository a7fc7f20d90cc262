"""The recall classes of issue #29, one named normalization step each, with their near misses.

Each step accepts one class of answers graders miss; the second list of each class holds
pairs the step must not make equal, so a step that accepts too much fails here.
"""

from __future__ import annotations

import pytest

from scorer import normalize as N
from scorer.equivalence import verify
from scorer.rewards import reward_config, score_text

CLASSES: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]] = {
    "labelled-answers": (
        [
            ("x = 5", "5"),
            ("f(2) = 7", "7"),
            ("\\sin x = \\frac{1}{2}", "\\frac12"),
            ("\\cos \\theta = \\frac{3}{5}", "\\frac35"),
            ("a: 1, b: 2", "a = 1, b = 2"),
            ("b: 2, a: 1", "a = 1, b = 2"),  # matched by label, not position
        ],
        [
            ("\\sin x = \\frac{1}{2}", "\\frac13"),
            ("b: 1, a: 2", "a = 1, b = 2"),
            ("1:2", "a:b"),  # a ratio is no label list
        ],
    ),
    "domain-qualifiers-and-families": (
        [
            ("f(x) = 2x \\text{ for } x > 0", "2x"),
            ("2x, \\text{ where } x > 0", "2x"),
            ("x = k\\pi, k \\in \\mathbb{Z}", "x = n\\pi"),
            ("\\frac{\\pi}{2} + 2k\\pi", "\\frac{\\pi}{2} + 2n\\pi"),
            (
                "\\frac{\\pi}{4} + k\\pi, \\text{ where } k \\text{ is an integer}",
                "\\frac{\\pi}{4} + n\\pi",
            ),
        ],
        [
            ("f(x) = 3x \\text{ for } x > 0", "2x"),
            ("\\frac{\\pi}{2} + k\\pi", "\\frac{\\pi}{2} + 2n\\pi"),
            ("x = k\\pi + n", "x = m\\pi + n"),  # two letters: no parameter renamed
        ],
    ),
    "families-with-other-representatives": (
        [
            ("\\frac{\\pi}{6} + 2k\\pi", "\\frac{13\\pi}{6} + 2k\\pi"),
            ("x = \\frac{\\pi}{6} + 2n\\pi", "x = \\frac{13\\pi}{6} + 2k\\pi"),
            ("\\frac{\\pi}{6} - 2k\\pi", "\\frac{\\pi}{6} + 2k\\pi"),
            ("\\frac{\\pi}{6} + k\\pi", "\\frac{7\\pi}{6} + k\\pi"),
            (
                "\\pm\\frac{\\pi}{3} + 2k\\pi",
                "\\frac{\\pi}{3} + 2k\\pi, \\frac{5\\pi}{3} + 2k\\pi",
            ),
        ],
        [
            ("\\frac{\\pi}{6} + 2k\\pi", "\\frac{7\\pi}{6} + 2k\\pi"),  # half a period
            ("\\frac{\\pi}{6} + 2k\\pi", "\\frac{\\pi}{6} + k\\pi"),  # another step
            ("k^2 + \\pi", "k^2 + 2\\pi"),  # not linear in k
            ("k + 1", "k"),  # no pi: k is no family parameter
        ],
    ),
    "degrees-minutes-seconds": (
        [
            ("30^\\circ 15'", "30.25^\\circ"),
            ("30\u00b015'", "30.25"),
            ("10^\\circ 30' 36''", "10.51^\\circ"),
        ],
        [("30^\\circ 15'", "30.15^\\circ"), ("30^\\circ 15'", "45")],
    ),
    "lost-escapes": (
        [
            ("\x0crac{1}{2}", "0.5"),
            ("3 \times 4", "12"),
            ("\x08oxed{7}", "7"),
            ("\x07lpha + 1", "\\alpha + 1"),
        ],
        [("\x0crac{1}{3}", "0.5"), ("3 \times 5", "12")],
    ),
    "unicode-enumerations": (
        [("\u2460 3 \u2461 5", "3, 5"), ("\u2776 1 \u2777 2 \u2778 3", "1, 2, 3")],
        [("\u2460 3 \u2461 5", "3, 6"), ("\u2460 3 \u2461 5", "3")],
    ),
    "text-function-names": (
        [("\\text{sin} x", "\\sin x"), ("\\mathrm{log}(x)", "\\log x")],
        [("\\text{sin} x", "\\cos x")],
    ),
    "text-key-phrase": (
        [("It is Tuesday", "\\text{Tuesday}"), ("The answer is Devon", "\\text{Devon}")],
        [("Tuesday or Monday", "Tuesday"), ("It is not Tuesday", "Tuesday")],
    ),
    "infinitely-many": (
        [("infinitely many", "\\infty"), ("\\infty", "\\text{infinitely many}")],
        [("finitely many", "\\infty"), ("infinitely many", "0")],
    ),
    "repeating-decimals": (
        [("0.\\overline{3}", "\\frac13"), ("0.1\\overline{6}", "\\frac16"), ("0.(3)", "1/3")],
        [("0.\\overline{3}", "0.3"), ("0.\\overline{3}", "\\frac{3}{10}")],
    ),
}
ACCEPT = [
    pytest.param(p, g, id=f"{name}-{i}")
    for name, (yes, _no) in CLASSES.items()
    for i, (p, g) in enumerate(yes)
]
REJECT = [
    pytest.param(p, g, id=f"{name}-{i}")
    for name, (_yes, no) in CLASSES.items()
    for i, (p, g) in enumerate(no)
]


@pytest.mark.parametrize(("pred", "gold"), ACCEPT)
def test_recall_class_is_accepted(pred: str, gold: str) -> None:
    v = verify(pred, gold)
    assert v.correct, v
    assert score_text(f"\\boxed{{{pred}}}", gold, reward_config("binary")).correct


@pytest.mark.parametrize(("pred", "gold"), REJECT)
def test_recall_class_near_miss_is_rejected(pred: str, gold: str) -> None:
    v = verify(pred, gold)
    assert not v.correct, v


@pytest.mark.parametrize(
    ("step", "text", "out"),
    [
        (N.restore_lost_escapes, "\x0crac{1}{2}", "\\frac{1}{2}"),
        (N.drop_unicode_enumerators, "\u2460 3 \u2461 5", "3 , 5"),
        (N.colon_labels, "a: 1, b_2: 3", "a = 1, b_2 = 3"),
        (N.colon_labels, "1:2", "1:2"),
        (N.degrees_minutes_seconds, "30^\\circ 15'", "(30 + \\frac{15}{60})^\\circ"),
        (N.drop_domain_qualifier, "2x \\text{ for } x > 0", "2x"),
        (N.drop_domain_qualifier, "x > 0", "x > 0"),  # the whole answer is no qualifier
        (N.rename_family_parameter, "2n\\pi", "2k\\pi"),
        (N.rename_family_parameter, "2n", "2n"),  # no pi: n may be anything
        (N.infinitely_many, "infinitely many solutions", "\\infty"),
        (N.repeating_decimals, "0.1\\overline{6}", "\\frac{15}{90}"),
        (N.expand_multiplier_words, "3.7 \\text{ million}", "3.7 \\times 10^{6}"),
    ],
)
def test_each_recall_step(step, text: str, out: str) -> None:
    assert N.restore_lost_escapes("a\tb") == "a\tb"  # a real tab stays
    assert step(text).split() == out.split()
