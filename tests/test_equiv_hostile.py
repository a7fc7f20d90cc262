"""Hostile inputs, the hard wall-clock limit, and concurrent use of ``verify``.

The sympy work runs in worker processes that are SIGKILLed at the deadline; everything in the
calling process is size-capped pure Python. So every call below must come back within
``timeout`` plus a small slack (the slack covers waiting for a replacement worker to start).
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorer.equivalence import verify, warm_up
from scorer.sympy_pool import get_pool
from scorer.verdict import Reason

TIMEOUT = 1.0
SLACK = 1.0
NOT_CORRECT_REASONS = {
    Reason.TIMEOUT,
    Reason.NOT_EQUAL,
    Reason.TOO_LONG,
    Reason.TOO_DEEP,
    Reason.STRUCTURE_MISMATCH,
    Reason.PARSE_ERROR,
    Reason.EMPTY,
}

TOWER_6 = "2^{2^{2^{2^{2^{2}}}}}"  # 2^65536 is fine, 2^(2^65536) is not
HOSTILE = [
    pytest.param(TOWER_6, "3^{3^{3^3}}", id="towers-different-magnitude"),
    pytest.param(TOWER_6, TOWER_6 + "+1", id="towers-same-magnitude"),
    pytest.param("10^{10^{10^{10}}}", "10^{10^{10^{10}}}+1", id="googolplex-ish"),
    pytest.param("10^{10^{10^{10}}}", "1", id="googolplex-vs-1"),
    pytest.param("9^{9^{9^{9}}}", "x", id="tower-vs-symbol"),
    pytest.param(
        "\\boxed{\\dfrac{5^{\\left(5^{\\left(5^{\\left(5^5\\right)}\\right)} - 4\\right)}"
        " - 5}{16}}",
        "1",
        id="math-verify-hang-row-379",
    ),
    pytest.param("1000000!", "1", id="huge-factorial"),
    pytest.param("(10^{100})!", "x", id="astronomical-factorial"),
    pytest.param("x^{" + "9" * 3000 + "}", "x", id="huge-exponent-literal"),
    pytest.param("(x+1)^{100000}", "x", id="huge-expansion"),
    pytest.param("1" * 1_000_000, "1", id="megabyte-number"),
    pytest.param("\\frac{1}{2}" * 100_000, "1", id="megabyte-latex"),
    pytest.param("(" * 3000 + "1" + ")" * 3000, "1", id="deep-parens"),
    pytest.param("{" * 3000 + "1" + "}" * 3000, "1", id="deep-braces"),
    pytest.param("\\sqrt{" * 500 + "2" + "}" * 500, "2", id="deep-sqrt"),
    pytest.param("-" * 5000 + "1", "1", id="long-unary-chain"),
    pytest.param("x^{" * 300 + "2" + "}" * 300, "x", id="deep-exponents"),
    pytest.param("\\$" * 5000, "5", id="regex-backtracking-dollars"),
    pytest.param("\\(" * 9000, "5", id="unclosed-math-openers"),
    pytest.param("final answer" + " " * 15_000 + "is 5", "6", id="whitespace-run"),
    pytest.param("a, " * 3000, "5", id="long-list"),
    pytest.param(", ".join(str(i) for i in range(2000)), ", ".join(str(i) for i in range(1, 2001)),
                 id="two-long-lists"),
]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _workers() -> None:
    warm_up()


@pytest.mark.parametrize(("pred", "gold"), HOSTILE)
def test_hostile_input_returns_in_time(pred: str, gold: str) -> None:
    t0 = time.monotonic()
    v = verify(pred, gold, timeout=TIMEOUT)
    elapsed = time.monotonic() - t0
    assert elapsed < TIMEOUT + SLACK, f"took {elapsed:.2f}s: {v}"
    assert not v.correct
    assert v.reason in NOT_CORRECT_REASONS, v


def test_timeout_kills_the_worker_and_the_pool_recovers() -> None:
    before = set(get_pool().pids())
    t0 = time.monotonic()
    v = verify(TOWER_6, TOWER_6 + "+1", timeout=TIMEOUT)
    assert time.monotonic() - t0 < TIMEOUT + SLACK
    assert v.reason == Reason.TIMEOUT and v.timed_out and not v.correct
    after = set(get_pool().pids())
    assert before - after, "the late worker must have been killed and replaced"
    # usable right after: a fresh worker answers a symbolic pair
    v2 = verify("x^2+2x+1", "(x+1)^2", timeout=30)
    assert v2.correct, v2


def test_megabyte_answer_is_refused_fast() -> None:
    t0 = time.monotonic()
    v = verify("x+" * 500_000 + "1", "1")
    assert v.reason == Reason.TOO_LONG
    assert time.monotonic() - t0 < 0.5


PAIRS = [
    ("x^2+2x+1", "(x+1)^2", True),
    ("\\sin^2 x+\\cos^2 x", "1", True),
    ("\\frac{1}{2}", "0.5", True),
    ("\\sqrt{8}", "2\\sqrt2", True),
    ("x+1", "x+2", False),
    ("(1,2)", "(2,1)", False),
    ("\\{1,2\\}", "\\{2,1\\}", True),
    ("3+4i", "4i+3", True),
    ("0.333", "\\frac13", True),
    ("y = 2x+3", "y = 3+2x", True),
]


def test_concurrent_threads_get_correct_verdicts() -> None:
    errors: list[str] = []

    def worker(k: int) -> None:
        for _ in range(3):
            for j, (p, g, exp) in enumerate(PAIRS):
                # vary the strings so caches do not hide the concurrency
                pp, gg = (f"{p}+{k}{j}", f"{g}+{k}{j}") if exp and "," not in p else (p, g)
                if "=" in p or "\\{" in p or p.startswith("0.333"):
                    pp, gg = p, g
                v = verify(pp, gg, timeout=20)
                if v.correct is not exp:
                    errors.append(f"thread {k}: {pp!r} vs {gg!r}: {v}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[:5]


def test_timeout_in_one_thread_does_not_disturb_others() -> None:
    results: dict[str, object] = {}

    def slow() -> None:
        results["slow"] = verify(TOWER_6, TOWER_6 + "+2", timeout=TIMEOUT)

    def fast() -> None:
        results["fast"] = [verify(p, g, timeout=20).correct for p, g, _ in PAIRS]

    ts = [threading.Thread(target=slow), threading.Thread(target=fast)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert results["slow"].reason == Reason.TIMEOUT  # type: ignore[attr-defined]
    assert results["fast"] == [exp for _, _, exp in PAIRS]


def _verify_in_child(_: int) -> tuple[bool, str]:
    v = verify("\\frac{x^2-1}{x-1}", "x+1", timeout=20)
    return v.correct, v.reason


def test_forked_child_gets_its_own_workers() -> None:
    assert verify("x^3-x", "x(x-1)(x+1)", timeout=20).correct  # parent pool is live
    with mp.get_context("fork").Pool(2) as pool:
        results = pool.map(_verify_in_child, range(2))
    assert all(ok for ok, _ in results), results


TOKENS = [
    "x", "y", "2", "10", "0.5", "+", "-", "*", "/", "^", "(", ")", "{", "}", "[", "]", ",",
    "=", "<", "\\frac", "\\sqrt", "\\pi", "\\infty", "\\cdot", "\\{", "\\}", "\\pm", "!", "|",
    "\\begin{pmatrix}", "\\end{pmatrix}", "&", "\\\\", "\\text{cm}", "\\%", "^\\circ", "e", "i",
    "\\in", "\\cup", ":", ";", "$", "\\boxed{", "\\left(", "\\right)", " ", "and", "9^{9^{9}}",
]  # fmt: skip


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(TOKENS), min_size=1, max_size=25),
    st.lists(st.sampled_from(TOKENS), min_size=1, max_size=25),
)
def test_fuzz_never_raises_and_respects_the_deadline(a: list[str], b: list[str]) -> None:
    pred, gold = "".join(a), "".join(b)
    t0 = time.monotonic()
    v = verify(pred, gold, timeout=TIMEOUT)
    assert time.monotonic() - t0 < TIMEOUT + SLACK
    assert isinstance(v.correct, bool) and isinstance(v.reason, str)
    assert v.correct == (v.reason in Reason.CORRECT)
    assert v.reason != Reason.ERROR, v
