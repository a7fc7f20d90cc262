"""Side-by-side benchmark: boxed's ``scorer.equivalence.verify`` vs Math-Verify.

Runs both graders on the same non-suspect pairs of ``tests/data/grader_cases.jsonl`` and prints
a markdown table: accuracy, precision and recall (positive class = "equal"), warm pairs per
second, and the one-time import / start-up cost.

    python bench/bench_grader.py [--cases PATH] [--repeat N] [--pair-timeout S]

Math-Verify is called the standard way, ``verify(parse(gold), parse(pred))``, with its default
extraction configs; a bare answer with no math delimiters and no prose is wrapped in ``$...$``
first, as its README asks for LaTeX. Its ``signal.alarm`` timeouts work here (main thread), but
some inputs still hang it (the power tower row: the tower is evaluated in C), so Math-Verify
runs in a child process and a pair that takes longer than ``--pair-timeout`` is killed, counted
as "not equal" and reported; the child restarts at the next pair.

Throughput is measured after a warm-up on *unrelated* pairs (imports done, boxed's sympy
workers started), over ``--repeat`` passes with cold caches (boxed: caller caches cleared and
workers restarted before each pass, untimed); each pair is timed on its own and the rate is
pairs / sum(times).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WARMUP_PAIRS = [
    ("\\frac{3}{4}", "0.75"),
    ("x^2-4", "(x-2)(x+2)"),
    ("\\{1, 2\\}", "\\{2, 1\\}"),
    ("y = 3x", "3x"),
    ("\\sqrt{12}", "2\\sqrt{3}"),
    ("[0, 2)", "[0, 2]"),
]


def load_pairs(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if not r.get("suspect_label")]


# --------------------------------------------------------------------------------------------
# Math-Verify (in a child process)

_PROSE = re.compile(r"[A-Za-z]{2,}\s+[A-Za-z]{2,}\s+[A-Za-z]{2,}")


def mv_wrap(s: str) -> str:
    """Math-Verify's LaTeX extraction needs delimiters; wrap bare answers (not prose)."""
    if any(t in s for t in ("$", "\\boxed", "\\(", "\\[")) or _PROSE.search(s):
        return s
    return f"${s}$"


def _mv_child(conn, pairs: list[tuple[str, str]], start: int, repeat: int) -> None:
    t0 = time.perf_counter()
    from math_verify import parse, verify

    conn.send(("import", time.perf_counter() - t0))
    for g, p in WARMUP_PAIRS:
        verify(parse(mv_wrap(g)), parse(mv_wrap(p)))
    for rep in range(repeat):
        for i in range(start if rep == 0 else 0, len(pairs)):
            gold, pred = pairs[i]
            t = time.perf_counter()
            try:
                ok = bool(verify(parse(mv_wrap(gold)), parse(mv_wrap(pred))))
            except BaseException:  # noqa: BLE001 - any failure counts as "not equal"
                ok = False
            conn.send(("pair", rep, i, ok, time.perf_counter() - t))
    conn.send(("done",))


def run_math_verify(pairs: list[tuple[str, str]], repeat: int, pair_timeout: float) -> dict:
    ctx = mp.get_context("spawn")
    results: dict[int, bool] = {}
    times: list[float] = []
    hung: list[int] = []
    import_time = None
    start = 0
    rep_seen = 0
    while True:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_mv_child, args=(child, pairs, start, repeat), daemon=True)
        proc.start()
        current = start
        finished = False
        while True:
            if not parent.poll(pair_timeout if import_time is not None else 120):
                break
            msg = parent.recv()
            if msg[0] == "import":
                if import_time is None:
                    import_time = msg[1]
                continue
            if msg[0] == "done":
                finished = True
                break
            _, rep, i, ok, dt = msg
            rep_seen = rep
            if rep == 0:
                results[i] = ok
            times.append(dt)
            current = i + 1
        proc.kill()
        proc.join()
        if finished:
            break
        hung.append(current)
        results[current] = False
        start = current + 1
        if rep_seen > 0 or start >= len(pairs):
            break
    return {
        "pred": [results.get(i, False) for i in range(len(pairs))],
        "times": times,
        "hung": hung,
        "import": import_time or 0.0,
    }


# --------------------------------------------------------------------------------------------
# boxed


def run_boxed(pairs: list[tuple[str, str]], repeat: int) -> dict:
    t0 = time.perf_counter()
    from scorer import answer, equivalence, parse, sympy_pool
    from scorer.equivalence import verify, warm_up

    import_time = time.perf_counter() - t0
    t1 = time.perf_counter()
    warm_up()
    startup = time.perf_counter() - t1
    for g, p in WARMUP_PAIRS:
        verify(p, g)
    preds: list[bool] = []
    reasons: list[str] = []
    times: list[float] = []
    for rep in range(repeat):
        # cold caches for every pass: fresh workers (their parse / sympy caches), and the
        # caller's gold caches cleared; the restart itself is not timed
        sympy_pool.get_pool().close()
        sympy_pool._POOL = None
        warm_up()
        for g, p in WARMUP_PAIRS:
            verify(p, g)
        equivalence._normalize_cached.cache_clear()
        answer._find_cached.cache_clear()
        equivalence._parsed.cache_clear()
        parse.parse_answer.cache_clear()
        for gold, pred in pairs:
            t = time.perf_counter()
            v = verify(pred, gold)
            times.append(time.perf_counter() - t)
            if rep == 0:
                preds.append(v.correct)
                reasons.append(v.reason)
    return {
        "pred": preds,
        "times": times,
        "import": import_time,
        "startup": startup,
        "reasons": reasons,
    }


# --------------------------------------------------------------------------------------------


def scores(pred: list[bool], gold: list[bool]) -> dict:
    tp = sum(p and g for p, g in zip(pred, gold, strict=True))
    fp = sum(p and not g for p, g in zip(pred, gold, strict=True))
    fn = sum(g and not p for p, g in zip(pred, gold, strict=True))
    correct = sum(p == g for p, g in zip(pred, gold, strict=True))
    return {
        "accuracy": correct / len(gold),
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "fp": fp,
        "fn": fn,
        "correct": correct,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=Path, default=ROOT / "tests" / "data" / "grader_cases.jsonl")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pair-timeout", type=float, default=10.0)
    args = ap.parse_args()

    rows = load_pairs(args.cases)
    pairs = [(str(r["gold"]), r["pred"]) for r in rows]
    labels = [bool(r["equal"]) for r in rows]

    boxed = run_boxed(pairs, args.repeat)
    mv = run_math_verify(pairs, args.repeat, args.pair_timeout)

    n = len(pairs)
    print(f"{n} non-suspect pairs from {args.cases.name}, {args.repeat} timed passes\n")
    print(
        "| grader | accuracy | precision | recall | FP | FN | pairs/s (warm) | import + start-up |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, res, extra in (
        ("boxed `verify`", boxed, f"{boxed['import']:.2f} s + {boxed['startup']:.2f} s workers"),
        ("Math-Verify 0.9", mv, f"{mv['import']:.2f} s"),
    ):
        s = scores(res["pred"], labels)
        rate = len(res["times"]) / sum(res["times"]) if res["times"] else 0.0
        print(
            f"| {name} | {s['accuracy']:.3f} ({s['correct']}/{n}) | {s['precision']:.3f} | "
            f"{s['recall']:.3f} | {s['fp']} | {s['fn']} | {rate:,.0f} | {extra} |"
        )
    b_rate = len(boxed["times"]) / sum(boxed["times"])
    m_rate = len(mv["times"]) / sum(mv["times"]) if mv["times"] else float("nan")
    print(f"\nspeed-up: {b_rate / m_rate:.1f}x pairs/s")
    if mv["hung"]:
        print(
            f"Math-Verify hung on row(s) {mv['hung']} (killed after {args.pair_timeout:g} s, "
            "counted as not equal, excluded from its pairs/s)"
        )
    slow = sorted(range(n), key=lambda i: -boxed["times"][i])[:3]
    print(
        "boxed slowest pairs: "
        + ", ".join(f"#{i} {boxed['times'][i] * 1000:.0f} ms ({boxed['reasons'][i]})" for i in slow)
    )


if __name__ == "__main__":
    main()
