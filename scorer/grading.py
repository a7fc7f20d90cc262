"""Grade trajectory records into result rows, in parallel, and summarise the rows.

The CLI and the HTTP routes (``scorer.api``) share this module, so a row means the same thing
wherever it was produced; its keys are those of ``scorer.row.GradedRow``. A record that cannot
be graded (bad JSON, unknown format, no gold, grader crash) becomes one ``error`` row with a
message; it never stops a run. Every row says whose result it is (``outcome``/``failure``, see
:mod:`scorer.outcome`): a row the grader could not decide has no reward, and summaries count
those masked rows apart from wrong answers.
"""

from __future__ import annotations

import json
import math
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scorer.outcome import Failure, FailureCode, outcome_fields
from scorer.rewards import STATUSES, RewardConfig, VerifyFn, describe, reward_config, score_text
from scorer.trajectories import Trajectory, parse_record
from scorer.verdict import DEFAULT_TIMEOUT, Reason

if TYPE_CHECKING:
    from concurrent.futures import Future


@dataclass(frozen=True)
class GradeOptions:
    """How to grade: the reward preset and values, and the per-answer verify time limit."""

    rewards: RewardConfig = field(default_factory=reward_config)
    timeout: float = DEFAULT_TIMEOUT


def _row(**values: Any) -> dict[str, Any]:
    # The schema is a pydantic model: imported with the first row, so `import scorer` stays light.
    from scorer.row import ROW_KEYS

    row: dict[str, Any] = dict.fromkeys(ROW_KEYS)
    row.update(values)
    return row


BAD_INPUT = Failure.of(FailureCode.GRADER_BAD_INPUT)
"""A record that holds nothing to grade (bad JSON, unknown format, no gold): fix the data."""

GRADER_BUG = Failure(FailureCode.GRADER_ERROR, retryable=False)
"""An exception out of the grader's own code: the same record would raise it again."""


def error_row(
    message: str,
    *,
    id: str | int | None = None,
    file: str | None = None,
    line: int | None = None,
    format: str | None = None,
    failure: Failure = BAD_INPUT,
) -> dict[str, Any]:
    """The row for a record (or rollout) that could not be graded: status ``error``, no reward,
    and ``failure`` saying why (by default: the record itself)."""
    return _row(
        id=id,
        file=file,
        line=line,
        format=format,
        correct=False,
        status="error",
        reasons=[Reason.ERROR],
        tool_calls=0,
        error=message,
        **outcome_fields(failure),
    )


def grade_trajectory(
    traj: Trajectory,
    options: GradeOptions,
    *,
    file: str | None = None,
    line: int | None = None,
    verify: VerifyFn | None = None,
) -> list[dict[str, Any]]:
    """One row per rollout (``group``/``index`` set for an Atropos group)."""
    if traj.gold is None:
        return [
            error_row(
                "no gold answer: give 'answer' (or expected_answer, gold, ground_truth, "
                "solution, label, reward_model.ground_truth) or an --answers file entry",
                id=traj.id,
                file=file,
                line=line,
                format=traj.format,
            )
        ]
    rows: list[dict[str, Any]] = []
    for rollout in traj.rollouts:
        base = {
            "id": traj.id,
            "group": traj.id if traj.group else None,
            "index": rollout.index,
            "file": file,
            "line": line,
            "format": traj.format,
            "gold": traj.gold,
            "tool_calls": rollout.tool_calls,
            "env_reward": rollout.env_reward,
        }
        try:
            outcome = score_text(
                rollout.text,
                traj.gold,
                options.rewards,
                verify=verify,
                timeout=options.timeout,
                question=traj.question,
            )
        except Exception as e:  # a grader bug must cost one row, not the run
            message = f"grader error: {type(e).__name__}: {e}"
            row = error_row(message, file=file, line=line, failure=GRADER_BUG)
            row.update(base)
            rows.append(row)
            continue
        rows.append(
            _row(
                **base,
                reward=outcome.reward,
                correct=outcome.correct,
                pred=outcome.pred,
                status=outcome.status,
                reasons=outcome.reasons,
                error=outcome.error,
                **outcome.outcome_fields(),
            )
        )
    return rows


def grade_record(
    record: Any,
    options: GradeOptions | None = None,
    *,
    answers: Mapping[str, Any] | None = None,
    file: str | None = None,
    line: int | None = None,
    verify: VerifyFn | None = None,
) -> list[dict[str, Any]]:
    """Grade one decoded record (any supported format) into its rows. Never raises for bad
    input: a record that is no trajectory or has no gold becomes one ``error`` row."""
    options = options or GradeOptions()
    try:
        traj = parse_record(record, answers=answers, default_id=line)
    except ValueError as e:
        rid = record.get("id") if isinstance(record, dict) else None
        rid = rid if isinstance(rid, str | int) and not isinstance(rid, bool) else line
        return [error_row(str(e), id=rid, file=file, line=line)]
    return grade_trajectory(traj, options, file=file, line=line, verify=verify)


def grade_line(
    text: str,
    options: GradeOptions,
    *,
    answers: Mapping[str, Any] | None = None,
    file: str | None = None,
    line: int | None = None,
    verify: VerifyFn | None = None,
) -> list[dict[str, Any]]:
    """Grade one JSONL line; bad JSON becomes an ``error`` row."""
    try:
        record = json.loads(text.strip())
    except json.JSONDecodeError as e:
        return [error_row(f"not JSON: {e.msg} (column {e.colno})", id=line, file=file, line=line)]
    return grade_record(record, options, answers=answers, file=file, line=line, verify=verify)


# --- parallel grading --------------------------------------------------------------------

Task = tuple[str | None, int, str]  # (file, line number, line text)

_worker_state: dict[str, Any] = {}


def _init_worker(options: GradeOptions, answers: Mapping[str, Any] | None) -> None:
    # Ctrl-C is the parent's to handle: it cancels the pool instead of every worker printing
    # a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_state["options"] = options
    _worker_state["answers"] = answers


def _grade_chunk(chunk: list[Task]) -> list[list[dict[str, Any]]]:
    options = _worker_state["options"]
    answers = _worker_state["answers"]
    return [
        grade_line(text, options, answers=answers, file=file, line=line)
        for file, line, text in chunk
    ]


def _chunks(tasks: Iterable[Task], size: int) -> Iterator[list[Task]]:
    chunk: list[Task] = []
    for task in tasks:
        chunk.append(task)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def default_jobs() -> int:
    """All cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def grade_lines(
    tasks: Iterable[Task],
    options: GradeOptions,
    *,
    answers: Mapping[str, Any] | None = None,
    jobs: int = 1,
    chunk_size: int = 32,
    on_line: Callable[[int], None] | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Grade JSONL lines, yielding each line's rows in input order.

    With ``jobs > 1`` the lines go to ``jobs`` worker processes in chunks of ``chunk_size``; at
    most ``2 * jobs`` chunks are in flight, so memory stays flat on huge files. ``on_line`` is
    called with the number of lines just finished (for a progress bar).
    """
    if jobs <= 1:
        for file, line, text in tasks:
            yield grade_line(text, options, answers=answers, file=file, line=line)
            if on_line:
                on_line(1)
        return
    from concurrent.futures import ProcessPoolExecutor  # only a parallel run needs it

    pool = ProcessPoolExecutor(
        max_workers=jobs, initializer=_init_worker, initargs=(options, answers)
    )
    pending: list[Future[list[list[dict[str, Any]]]]] = []
    finished = False
    try:
        for chunk in _chunks(tasks, max(1, chunk_size)):
            pending.append(pool.submit(_grade_chunk, chunk))
            while len(pending) >= 2 * jobs:
                yield from _drain(pending.pop(0), on_line)
        while pending:
            yield from _drain(pending.pop(0), on_line)
        finished = True
    finally:
        # On an error or interrupt, drop queued chunks and do not wait for running ones.
        pool.shutdown(wait=finished, cancel_futures=True)


def _drain(
    fut: Future[list[list[dict[str, Any]]]], on_line: Callable[[int], None] | None
) -> Iterator[list[dict[str, Any]]]:
    results = fut.result()
    if on_line:
        on_line(len(results))
    yield from results


# --- summary -----------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al., 2021): the chance that at least one of ``k`` rollouts drawn
    without replacement from ``n``, ``c`` of them correct, is correct: 1 - C(n-c, k) / C(n, k)."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _ks(max_k: int) -> list[int]:
    ks = [1]
    while ks[-1] * 2 <= max_k:
        ks.append(ks[-1] * 2)
    if ks[-1] != max_k:
        ks.append(max_k)
    return ks


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def summarize(rows: Sequence[Mapping[str, Any]], rewards: RewardConfig | None = None) -> dict:
    """Totals over result rows.

    ``accuracy`` is correct / rows that got a verdict (not ``error``, not ``timeout``): a
    timeout is the grader's failure, not the model's, and is counted under ``timeouts``.
    ``masked`` counts rows without a reward (a trainer drops them; they are never wrong answers,
    which ``status_counts["incorrect"]`` counts), ``failures`` the rows per failure code.
    Rates (no answer, format error, tool use) are over rows that are not ``error``.
    ``mean_reward`` is over rows that have a reward. For Atropos groups, ``pass_at_k`` is the
    unbiased estimator averaged over groups, with n = the group's non-error rollouts and c =
    its correct ones; k runs over powers of two up to the smallest group, and that size.
    """
    count = len(rows)
    status = Counter(str(r.get("status")) for r in rows)
    errors = status["error"]
    timeouts = status["timeout"]
    graded = count - errors
    with_verdict = graded - timeouts
    correct = status["correct"]
    rewards_seen = [float(r["reward"]) for r in rows if r.get("reward") is not None]
    tool_users = sum(1 for r in rows if r.get("status") != "error" and (r.get("tool_calls") or 0))
    failures = Counter(str(r["failure"]["code"]) for r in rows if r.get("failure"))
    summary: dict[str, Any] = {
        "count": count,
        "graded": graded,
        "correct": correct,
        "accuracy": _rate(correct, with_verdict),
        "mean_reward": sum(rewards_seen) / len(rewards_seen) if rewards_seen else None,
        "no_answer_rate": _rate(status["no_answer"], graded),
        "format_error_rate": _rate(status["format_error"], graded),
        "tool_use_rate": _rate(tool_users, graded),
        "timeouts": timeouts,
        "errors": errors,
        "masked": sum(1 for r in rows if r.get("reward") is None),
        "failures": dict(sorted(failures.items())),
        "status_counts": {s: status[s] for s in STATUSES},
        "formats": dict(Counter(str(r["format"]) for r in rows if r.get("format"))),
    }
    groups: dict[tuple[Any, Any, Any], list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("index") is not None:
            groups.setdefault((r.get("file"), r.get("line"), r.get("group")), []).append(r)
    sizes = {
        key: (sum(1 for r in g if r.get("status") != "error"), sum(1 for r in g if r["correct"]))
        for key, g in groups.items()
    }
    sizes = {key: nc for key, nc in sizes.items() if nc[0] > 0}
    if sizes:
        min_n = min(n for n, _ in sizes.values())
        summary["groups"] = len(sizes)
        summary["pass_at_k"] = {
            str(k): sum(pass_at_k(n, c, k) for n, c in sizes.values()) / len(sizes)
            for k in _ks(min_n)
        }
    if rewards is not None:
        summary["rewards"] = describe(rewards)
    return summary
