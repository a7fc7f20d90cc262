"""Approximations written after an exact answer must not contradict it (issue #29 item 3).

``\\frac{1}{3} \\approx 0.333`` is read as its exact part, the approximation being commentary
(docs/scorer.md). But a solution that ends ``\\sin^2 18^\\circ(\\sin 18^\\circ + 1) \\approx
0.124`` claims 0.124, not 1/8, and ``\\sqrt{53} \\approx 7.5 - 0.08 = 7.423077`` claims a
number that is not \\sqrt{53}: public labels call both wrong (RewardBench's math subset). The
step: every plain decimal with at least 3 significant figures that stands after an
``\\approx`` (alone, or as the last part of an ``=`` chain) is graded against the gold too, and
an answer whose own approximation is not the gold is not the gold. Coarser decimals (``\\approx
0.6``) and integers (``\\approx 11``) claim too little to contradict anything.
"""

from __future__ import annotations

import re

_APPROX = re.compile(r"\\approx|≈")
_DECIMAL = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+)")
MIN_SIG_FIGS = 3


def _sig_figs(decimal: str) -> int:
    return len(decimal.lstrip("+-").replace(".", "").lstrip("0"))


def stated_approximations(norm: str) -> list[str]:
    """The decimals ``norm`` (a normalized answer) states after an ``\\approx``, each the
    whole of its part of the chain, with at least :data:`MIN_SIG_FIGS` significant figures."""
    parts = _APPROX.split(norm)
    out = []
    for part in parts[1:]:
        last = part.rsplit("=", 1)[-1].strip().rstrip(".").strip()
        if _DECIMAL.fullmatch(last) and _sig_figs(last) >= MIN_SIG_FIGS:
            out.append(last)
    return out
