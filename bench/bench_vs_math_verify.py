"""boxed's grader vs Math-Verify, side by side, on public graded-answer sets (issue #29 item 5).

Reads the normalized rows that ``bench/mv_convert.py`` writes to the git-ignored
``bench/data/rows.jsonl`` and grades every row with both graders in one run:

- ``pair`` rows (gold, the model's final answer, label): boxed ``scorer.equivalence.verify``;
  Math-Verify ``verify(parse(gold), parse(answer))``, bare answers wrapped in ``$...$`` as
  ``bench/bench_grader.py`` does (its README asks for LaTeX delimiters).
- ``solution`` rows (gold, the whole model solution, label): boxed's reward path
  ``scorer.rewards.score_text`` with the ``binary`` preset (accepted = status ``correct``);
  Math-Verify ``verify(parse(gold), parse(solution))`` with its default extraction configs.

Rows the converter's label audit marked ``suspect`` (a label its own gold contradicts) are
left out of the headline figures and counted in their own column.

Math-Verify runs in a child process with a per-row kill switch (some inputs hang it); a killed
row is counted as not accepted and reported as undecided. boxed's timeouts and worker errors
(no reward on the reward path) are counted the same way. Rates are decided rows / their summed
per-row time, warm (imports done, workers started), one pass.

    python bench/mv_convert.py --from-mirrors /work/.mirror   # once: raw files -> rows.jsonl
    python bench/bench_vs_math_verify.py [--limit N] [--misses PATH] [--question]

``--question`` adds a third row per set whose data ships the problem text: boxed given the
question (``verify(..., question=...)``), which Math-Verify cannot use; the headline rows stay
question-free, as a caller without the question grades.

Prints a ``rich`` table per set and kind, and writes boxed's misclassified rows, grouped by a
rough class (``mv_metrics.miss_class``), to ``--misses`` (outside the repository: the measured
rows stay out of the project).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_grader import WARMUP_PAIRS, mv_wrap  # noqa: E402
from mv_metrics import Confusion, miss_class  # noqa: E402

ROWS = ROOT / "bench" / "data" / "rows.jsonl"
MISSES = Path("/work/briefs/mvbench-misses.md")


@dataclass
class Graded:
    """One grader's verdicts on a list of rows, in order."""

    accepted: list[bool] = field(default_factory=list)
    decided: list[bool] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    detail: list[str] = field(default_factory=list)  # boxed: status/reason and what it compared
    extracted: list[str | None] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Math-Verify (in a child process)


def _mv_one(
    parse: Callable[..., Any], verify: Callable[..., Any], gold: str, answer: str, kind: str
) -> bool:
    g = parse(mv_wrap(gold))
    a = parse(mv_wrap(answer) if kind == "pair" else answer)
    return bool(verify(g, a))


def _mv_child(conn, rows: list[tuple[str, str, str]], start: int) -> None:
    from math_verify import parse, verify

    for g, p in WARMUP_PAIRS:
        _mv_one(parse, verify, g, p, "pair")
    conn.send(("ready",))
    for i in range(start, len(rows)):
        gold, answer, kind = rows[i]
        t = time.perf_counter()
        try:
            ok = _mv_one(parse, verify, gold, answer, kind)
        except BaseException:  # noqa: BLE001 - any failure of the grader counts as "not equal"
            ok = False
        conn.send(("row", i, ok, time.perf_counter() - t))
    conn.send(("done",))


def run_math_verify(rows: list[tuple[str, str, str]], row_timeout: float) -> Graded:
    """Math-Verify on every row; a row taking longer than ``row_timeout`` is killed."""
    ctx = mp.get_context("spawn")
    out = Graded(accepted=[False] * len(rows), decided=[True] * len(rows), times=[0.0] * len(rows))
    start = 0
    while start < len(rows):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_mv_child, args=(child, rows, start), daemon=True)
        proc.start()
        current, ready, finished = start, False, False
        while parent.poll(row_timeout if ready else 120):
            msg = parent.recv()
            if msg[0] == "ready":
                ready = True
            elif msg[0] == "done":
                finished = True
                break
            else:
                _, i, ok, dt = msg
                out.accepted[i], out.times[i] = ok, dt
                current = i + 1
        proc.kill()
        proc.join()
        if finished:
            break
        if not ready:
            raise RuntimeError("Math-Verify did not start (is math-verify installed?)")
        out.decided[current] = False
        out.times[current] = row_timeout
        start = current + 1
    return out


# --------------------------------------------------------------------------------------------
# boxed


def run_boxed(
    rows: list[tuple[str, str, str]], questions: list[str | None] | None = None
) -> Graded:
    """boxed on every row: ``verify`` for pairs, the ``binary`` reward path for solutions;
    with ``questions`` (one per row, ``None`` for none), question-aware grading."""
    from scorer.equivalence import verify, warm_up
    from scorer.rewards import reward_config, score_text
    from scorer.verdict import Reason

    warm_up()
    for g, p in WARMUP_PAIRS:
        verify(p, g)
    cfg = reward_config("binary")
    out = Graded()
    for n, (gold, answer, kind) in enumerate(rows):
        question = questions[n] if questions is not None else None
        t = time.perf_counter()
        if kind == "pair":
            v = verify(answer, gold, question=question)
            dt = time.perf_counter() - t
            out.accepted.append(v.correct)
            out.decided.append(v.reason not in (Reason.TIMEOUT, Reason.ERROR))
            out.detail.append(v.reason)
            out.extracted.append(answer)
        else:
            o = score_text(answer, gold, cfg, question=question)
            dt = time.perf_counter() - t
            out.accepted.append(o.status == "correct")
            out.decided.append(o.status not in ("timeout", "error"))
            out.detail.append(f"{o.status} ({', '.join(o.reasons)})")
            out.extracted.append(o.pred)
        out.times.append(dt)
    return out


# --------------------------------------------------------------------------------------------
# Report


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _rate(times: list[float], decided: list[bool]) -> str:
    """Rows per second over the decided rows (a killed or timed-out row has no real time)."""
    kept = [t for t, d in zip(times, decided, strict=True) if d]
    total = sum(kept)
    return f"{len(kept) / total:,.0f}" if total else "n/a"


def pairs_per_second(res: Graded, rows: list[int]) -> float:
    """Decided rows among ``rows`` per second of their summed time (0 when there are none)."""
    kept = [res.times[j] for j in rows if res.decided[j]]
    return len(kept) / sum(kept) if sum(kept) else 0.0


def headline(
    accepted: list[bool], decided: list[bool], rows: list[dict]
) -> tuple[Confusion, Confusion]:
    """One grader's counts on the rows the label audit kept, and apart on the ``suspect``
    rows it set aside (labels their own gold contradicts: counted, never in the headline)."""
    kept, aside = Confusion(), Confusion()
    for acc, dec, r in zip(accepted, decided, rows, strict=True):
        (aside if r.get("suspect") else kept).add(acc, bool(r["label"]), decided=dec)
    return kept, aside


def load_rows(path: Path, limit: int | None, seed: int) -> dict[tuple[str, str], list[dict]]:
    """Rows grouped by (set, kind); with ``limit``, a seeded sample of at most that many."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            groups[(r["set"], r["kind"])].append(r)
    if limit:
        rng = random.Random(seed)
        for key, rows in groups.items():
            if len(rows) > limit:
                groups[key] = rng.sample(rows, limit)
    return dict(sorted(groups.items()))


def write_misses(path: Path, misses: list[dict], header: str, per_class: int = 60) -> None:
    """boxed's misclassified rows, grouped by rough class, largest class first; at most
    ``per_class`` rows of each class and set are listed (the counts are all of them)."""
    by_class: dict[str, list[dict]] = defaultdict(list)
    for m in misses:
        by_class[m["class"]].append(m)
    lines = [header, ""]
    lines.append("| class | rows | Math-Verify right on |")
    lines.append("|---|---|---|")
    ordered = sorted(by_class.items(), key=lambda kv: -len(kv[1]))
    for cls, ms in ordered:
        lines.append(f"| {cls} | {len(ms)} | {sum(m['mv_right'] for m in ms)} |")
    for cls, ms in ordered:
        lines += ["", f"## {cls} ({len(ms)})", ""]
        listed: dict[str, int] = defaultdict(int)
        for m in ms:
            listed[m["set"]] += 1
            if listed[m["set"]] > per_class:
                continue
            answer = m["answer"]
            if m["kind"] == "solution" and len(answer) > 400:
                answer = "..." + answer[-400:]
            lines.append(
                f"- `{m['set']}` {m['kind']} `{m['id']}` label={'right' if m['label'] else 'wrong'}"
                f" boxed={m['boxed']} MV={'right' if m['mv_right'] else 'wrong'}"
            )
            lines.append(f"  - gold: `{m['gold']}`")
            if m["kind"] == "solution":
                lines.append(f"  - boxed compared: `{m['extracted']}`")
                lines.append("  - solution (tail):")
                lines.append("    ```")
                lines += [f"    {s}" for s in answer.splitlines()]
                lines.append("    ```")
            else:
                lines.append(f"  - answer: `{answer}`")
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=Path, default=ROWS)
    ap.add_argument("--limit", type=int, default=0, help="at most N rows per set and kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--row-timeout", type=float, default=10.0)
    ap.add_argument("--misses", type=Path, default=MISSES)
    ap.add_argument("--markdown", action="store_true", help="also print the table as markdown")
    ap.add_argument("--per-class", type=int, default=60, help="rows listed per class and set")
    ap.add_argument(
        "--question",
        action="store_true",
        help="also grade with each row's question (boxed only; a third row per set that has them)",
    )
    args = ap.parse_args()

    from rich.console import Console
    from rich.table import Table

    groups = load_rows(args.rows, args.limit or None, args.seed)
    flat = [(str(r["gold"]), r["answer"], r["kind"]) for rows in groups.values() for r in rows]
    t0 = time.perf_counter()
    boxed = run_boxed(flat)
    t1 = time.perf_counter()
    questions = [r.get("question") for rows in groups.values() for r in rows]
    boxed_q = run_boxed(flat, questions) if args.question else None
    mv = run_math_verify(flat, args.row_timeout)
    t2 = time.perf_counter()

    table = Table(title=f"boxed vs Math-Verify on {len(flat)} public rows")
    for col in ("set", "kind", "rows (right)", "grader", "accuracy", "precision", "recall"):
        table.add_column(col, justify="left" if col in ("set", "kind", "grader") else "right")
    for col in ("wrong accepts", "missed accepts", "undecided", "suspect set aside", "rows/s"):
        table.add_column(col, justify="right")
    markdown = [
        "| " + " | ".join(str(col.header) for col in table.columns) + " |",
        "|" + "---|" * len(table.columns),
    ]
    misses: list[dict] = []
    i = 0
    for (name, kind), rows in groups.items():
        n = len(rows)
        sl = slice(i, i + n)
        kept = [r for r in rows if not r.get("suspect")]
        graders = [("boxed", boxed), ("Math-Verify", mv)]
        if boxed_q is not None and any(r.get("question") for r in rows):
            graders.append(("boxed + question", boxed_q))
        for grader, res in graders:
            c, aside = headline(res.accepted[sl], res.decided[sl], rows)
            pos = sum(bool(r["label"]) for r in kept)
            cells = [
                name if grader == "boxed" else "",
                kind if grader == "boxed" else "",
                f"{len(kept)} ({pos})" if grader == "boxed" else "",
                grader,
                _fmt(c.accuracy),
                _fmt(c.precision),
                _fmt(c.recall),
                str(c.fp),
                str(c.fn),
                str(c.undecided),
                f"{aside.rows} ({aside.tp + aside.tn} agree)",
                _rate(res.times[sl], res.decided[sl]),
            ]
            table.add_row(*cells, end_section=grader == graders[-1][0])
            markdown.append("| " + " | ".join(cells) + " |")
        for k, r in enumerate(rows):
            j = i + k
            label = bool(r["label"])
            if boxed.accepted[j] == label:
                continue
            extracted = boxed.extracted[j]
            cls = miss_class(
                str(r["gold"]),
                extracted,
                accepted=boxed.accepted[j],
                solution=r["answer"] if kind == "solution" else None,
            )
            if r.get("suspect"):
                cls = f"suspect label, set aside: {r['suspect']}"
            misses.append(
                {
                    **r,
                    "boxed": boxed.detail[j],
                    "extracted": extracted,
                    "mv_right": mv.accepted[j] == label,
                    "class": cls,
                }
            )
        i += n
    console = Console(width=160)
    console.print(table)
    if args.markdown:
        console.print("\n".join(markdown), markup=False, highlight=False, soft_wrap=True)
    pair_idx = [j for j, (_, _, kind) in enumerate(flat) if kind == "pair"]
    b_rate, m_rate = (pairs_per_second(res, pair_idx) for res in (boxed, mv))
    console.print(
        f"pairs/s (all decided pair rows, warm): boxed {b_rate:,.0f}, Math-Verify {m_rate:,.0f}"
        + (f" ({b_rate / m_rate:.1f}x)" if m_rate else "")
        + f"; wall time boxed {t1 - t0:.0f} s, Math-Verify {t2 - t1:.0f} s"
    )
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    header = (
        f"# boxed misses against public labelled sets ({stamp})\n\n"
        f"Written by `bench/bench_vs_math_verify.py` ({len(misses)} of {len(flat)} rows "
        "misclassified by boxed; `MV` = whether Math-Verify got the same row right). "
        "Rows from public repositories; never commit this file."
    )
    write_misses(args.misses, misses, header, args.per_class)
    console.print(f"{len(misses)} boxed misses -> {args.misses}")


if __name__ == "__main__":
    main()
