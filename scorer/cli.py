"""``python -m scorer``: grade trajectory files offline, or summarise OpenEnv episode logs.

stdout carries only JSON lines (one row per trajectory, then with ``--json`` one
``{"summary": ...}`` line), so it can be piped; rows go to a terminal only with ``--rows``.
Everything for humans (the summary table, malformed-line reports, the progress bar, drawn with
rich only when stderr is a terminal) goes to stderr. Exit codes: 0 when the run finished
(even if some lines were bad: they are ``error`` rows), 2 for a usage error or a file that
cannot be read or written, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, TextIO

from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Task as ProgressTask
from rich.table import Table
from rich.text import Text

from scorer.grading import (
    GradeOptions,
    Task,
    default_jobs,
    grade_lines,
    summarize,
)
from scorer.openenv import looks_like_openenv, parse_log, summarize_episodes
from scorer.rewards import PRESETS, reward_config
from scorer.trajectories import load_answers_file
from scorer.verdict import DEFAULT_TIMEOUT

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
_SUMMARY_KEYS = (
    "status",
    "reward",
    "failure",
    "tool_calls",
    "format",
    "index",
    "file",
    "line",
    "group",
)
_SNIFF = 50


class CliError(Exception):
    """A problem that ends the run with exit code 2 (bad file, bad option)."""


class ProgressBar:
    """Grading progress on stderr, drawn with rich: it fits the terminal's width (columns are
    dropped before anything wraps), shows elapsed time and an ETA, is drawn only when enabled
    (stderr is a terminal) and only once a run has lasted half a second, and is erased when
    the run ends, so the summary lands on a clean screen."""

    DELAY = 0.5

    def __init__(
        self,
        console: Console,
        total: int | None,
        enabled: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.enabled = enabled
        self.clock = clock
        self.start = clock()
        self.last_draw = 0.0
        self.live = False
        self.progress = Progress(
            *progress_columns(console.width, total),
            console=console,
            transient=True,
            refresh_per_second=4,  # elapsed time ticks even while one slow check runs
            redirect_stdout=False,  # rows go to stdout: never through the bar
            redirect_stderr=False,
            get_time=clock,
        )
        self.task = self.progress.add_task("grading", total=total)

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)
        if not self.enabled:
            return
        now = self.clock()
        if not self.live and now - self.start >= self.DELAY:
            self.progress.start()
            self.live = True
        if self.live and now - self.last_draw >= 0.1:
            self.last_draw = now
            self.progress.refresh()

    def clear(self) -> None:
        """Erase the bar (for good: the run is over)."""
        if self.live:
            self.progress.stop()
            self.live = False

    def message(self, text: str) -> None:
        """Print a line on stderr above the bar, without tearing it."""
        if self.live:
            self.console.print(text, markup=False, highlight=False)
        else:
            say(self.console, text)


def say(console: Console, text: str) -> None:
    """One line for humans on stderr: wrapped at word boundaries to fit a terminal; written
    as it is elsewhere, so a log keeps one line per message."""
    if console.file.isatty():
        console.print(text, markup=False, highlight=False)
    else:
        console.file.write(text + "\n")
        console.file.flush()


class _RateColumn(ProgressColumn):
    """Lines graded per second (rich's own speed column counts bytes)."""

    def render(self, task: ProgressTask) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.0f} lines/s")


def progress_columns(width: int, total: int | None) -> list[ProgressColumn]:
    """The bar's columns for a terminal ``width`` wide: the bar, percentage, elapsed and ETA
    always (about 40 columns with a short bar); the line count and the rate when they fit."""
    if total is None:  # stdin: no total, so no percentage and no ETA
        columns: list[ProgressColumn] = [
            BarColumn(bar_width=None),
            TextColumn("{task.completed} lines"),
            TimeElapsedColumn(),
        ]
        return columns + ([_RateColumn()] if width >= 60 else [])
    columns = [BarColumn(bar_width=None), TaskProgressColumn()]
    if width >= 70:
        columns.append(MofNCompleteColumn())
    columns += [TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn()]
    if width >= 90:
        columns.append(_RateColumn())
    return columns


class Source:
    """One input (a path or ``-``), opened up front so an unreadable file fails the run before
    any grading. Its first lines are buffered to tell a JSONL file from an OpenEnv log."""

    def __init__(self, name: str, stdin: TextIO) -> None:
        self.name = name
        if name == "-":
            self.handle: TextIO = stdin
            self.close_after = False
        else:
            try:
                self.handle = open(name, encoding="utf-8", errors="replace")  # noqa: SIM115
            except OSError as e:
                raise CliError(f"cannot read {name}: {e.strerror or e}") from None
            self.close_after = True
        try:
            self.head = list(itertools.islice(self.handle, _SNIFF))
        except OSError as e:
            raise CliError(f"cannot read {name}: {e.strerror or e}") from None
        self.openenv = looks_like_openenv(self.head)

    def lines(self) -> Iterator[str]:
        yield from self.head
        try:
            yield from self.handle
        except OSError as e:
            raise CliError(f"cannot read {self.name}: {e.strerror or e}") from None
        finally:
            if self.close_after:
                self.handle.close()

    def count_lines(self) -> int | None:
        """Line count of a regular file (for the progress bar); ``None`` for stdin."""
        if self.name == "-":
            return None
        try:
            with open(self.name, "rb") as f:
                return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        except OSError:
            return None


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scorer",
        description="Grade RL trajectories (JSONL) with boxed's answer checker, "
        "or summarise OpenEnv episode logs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    grade = sub.add_parser(
        "grade",
        help="grade trajectory files (OpenEnv logs are detected and summarised)",
        description="Grade trajectory JSONL files: one output line per trajectory (per rollout "
        "for Atropos groups), a summary on stderr. A file whose first lines are OpenEnv "
        "[START]/[STEP]/[END] logs is summarised per task instead.",
    )
    _add_io_args(grade)
    grade.add_argument("--preset", choices=PRESETS, default="binary", help="reward rules")
    grade.add_argument("--answers", metavar="FILE", help='JSONL of {"id": .., "answer": ..}')
    grade.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="worker processes (default: all cores)",
    )
    grade.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"time limit of one answer check, seconds (default {DEFAULT_TIMEOUT})",
    )
    grade.add_argument("--chunk-size", type=int, default=32, help=argparse.SUPPRESS)
    for flag, what in (
        ("--correct-reward", "a right answer"),
        ("--wrong-reward", "a wrong or missing answer"),
        ("--format-reward", "a format error (interleaved)"),
        ("--tool-bonus", "added to a right answer after an answered tool call"),
        (
            "--timeout-reward",
            "an answer check that timed out (default: none, the row is masked: the grader "
            "failed, not the model)",
        ),
    ):
        grade.add_argument(flag, type=float, default=None, metavar="X", help=f"reward for {what}")
    grade.add_argument(
        "--answer-fallback",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="without a box, read a final-answer phrase or the last expression "
        "(default: on for binary, off for interleaved)",
    )

    openenv = sub.add_parser("openenv", help="summarise OpenEnv episode logs per task")
    _add_io_args(openenv)
    return parser


def _add_io_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="input files; '-' reads stdin")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", metavar="OUT", help="write result lines here, not stdout")
    where.add_argument(
        "--rows",
        action="store_true",
        help="print result lines on stdout even when it is a terminal (a pipe or a file "
        "always gets them)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print the summary as one {"summary": ...} JSON line on stdout, not a table',
    )
    p.add_argument("--no-progress", action="store_true", help="never draw the progress bar")


def _fmt(value: Any, *, pct: bool = False) -> str:
    if value is None:
        return "-"
    if pct:
        return f"{value:.1%}"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def summary_table(summary: dict[str, Any]) -> Table:
    """The human-readable summary of a grading run, as a rich table."""
    rw = summary.get("rewards", {})
    verdicts = summary["graded"] - summary["timeouts"]
    table = Table(
        title=f"preset {rw.get('preset', '?')}: {summary['count']} trajectories",
        show_header=False,
        show_edge=False,
        box=box.SIMPLE,
        title_justify="left",
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("detail")
    table.add_row(
        "accuracy",
        _fmt(summary["accuracy"], pct=True),
        f"{summary['correct']}/{verdicts} with a verdict",
    )
    table.add_row("mean reward", _fmt(summary["mean_reward"]), "")
    table.add_row("no answer", _fmt(summary["no_answer_rate"], pct=True), "")
    table.add_row("format error", _fmt(summary["format_error_rate"], pct=True), "")
    table.add_row("tool use", _fmt(summary["tool_use_rate"], pct=True), "")
    table.add_row("timeouts", str(summary["timeouts"]), "")
    table.add_row("errors", str(summary["errors"]), "")
    table.add_row("wrong answers", str(summary["status_counts"]["incorrect"]), "")
    table.add_row("masked", str(summary["masked"]), "no reward")
    if "pass_at_k" in summary:
        ks = "  ".join(f"pass@{k} {v:.4f}" for k, v in summary["pass_at_k"].items())
        table.add_row("groups", str(summary["groups"]), ks)
    return table


def _episode_notes(stats: dict[str, Any]) -> str:
    """Incomplete and masked (no reward: not the code's result) episodes, when there are."""
    notes = [f"{stats[k]} {k}" for k in ("incomplete", "masked") if stats.get(k)]
    return f"({', '.join(notes)})" if notes else ""


def openenv_table(summary: dict[str, Any]) -> Table:
    """The human-readable per-task table of OpenEnv episodes."""
    table = Table(box=box.SIMPLE, show_edge=False)
    for name, justify in (
        ("task", "left"),
        ("episodes", "right"),
        ("success", "right"),
        ("score", "right"),
        ("steps", "right"),
        ("errors", "right"),
        ("", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]

    def row(name: str, s: dict[str, Any]) -> None:
        table.add_row(
            Text(name),  # a task name is data: never rich markup
            str(s["episodes"]),
            _fmt(s["success_rate"], pct=True),
            _fmt(s["mean_score"]),
            _fmt(s["mean_steps"]),
            str(s["errors"]),
            _episode_notes(s),
        )

    for task, s in summary["tasks"].items():
        row(task, s)
    table.add_section()
    row("all", summary)
    return table


class Rows:
    """Where result lines go: the ``-o`` file; else stdout, unless stdout is a terminal and
    ``--rows`` was not given (wide JSON would flood it; a pipe or a file always gets them)."""

    def __init__(self, args: argparse.Namespace, stdout: TextIO) -> None:
        self.count = 0
        self.close_after = args.output is not None
        self.to_terminal = False
        self.out: IO[str] | None
        if args.output is not None:
            try:
                self.out = open(args.output, "w", encoding="utf-8")  # noqa: SIM115
            except OSError as e:
                raise CliError(f"cannot write {args.output}: {e.strerror or e}") from None
        elif args.rows or not stdout.isatty():
            self.out = stdout
            self.to_terminal = stdout.isatty()
        else:
            self.out = None

    def write(self, row: dict[str, Any]) -> None:
        self.count += 1
        if self.out is not None:
            _write(self.out, row)

    def close(self) -> None:
        if self.close_after and self.out is not None:
            self.out.close()

    def note(self) -> str | None:
        """What to tell the user when rows were held back from the terminal."""
        if self.out is not None or not self.count:
            return None
        return f"scorer: {self.count} rows not printed to the terminal (--rows or -o FILE)"


def _write(out: IO[str], obj: Any) -> None:
    out.write(json.dumps(obj, ensure_ascii=False) + "\n")


def _run_grade(
    args: argparse.Namespace, sources: list[Source], stdout: TextIO, console: Console
) -> int:
    overrides = {
        "correct_reward": args.correct_reward,
        "wrong_reward": args.wrong_reward,
        "format_reward": args.format_reward,
        "tool_bonus": args.tool_bonus,
        "timeout_reward": args.timeout_reward,
    }
    try:
        rewards = reward_config(args.preset, answer_fallback=args.answer_fallback, **overrides)
    except ValueError as e:
        raise CliError(str(e)) from None
    if not args.timeout > 0:
        raise CliError("--timeout must be positive")
    jobs = default_jobs() if args.jobs is None else args.jobs
    if jobs < 1:
        raise CliError("-j must be at least 1")
    answers = None
    if args.answers:
        try:
            answers = load_answers_file(args.answers)
        except OSError as e:
            raise CliError(f"cannot read {args.answers}: {e.strerror or e}") from None
        except ValueError as e:
            raise CliError(str(e)) from None
    options = GradeOptions(rewards=rewards, timeout=args.timeout)
    rows_out = Rows(args, stdout)
    # Rows printed to the terminal show progress themselves (and a bar would tear them).
    show = not args.no_progress and console.file.isatty() and not rows_out.to_terminal
    total = None
    if show:
        counts = [s.count_lines() for s in sources]
        total = None if None in counts else sum(c for c in counts if c is not None)
    progress = ProgressBar(console, total, show)

    def tasks() -> Iterator[Task]:
        for src in sources:
            for n, text in enumerate(src.lines(), 1):
                if text.strip():
                    yield (src.name, n, text)
                else:
                    progress.advance(1)

    kept: list[dict[str, Any]] = []
    try:
        for rows in grade_lines(
            tasks(),
            options,
            answers=answers,
            jobs=jobs,
            chunk_size=args.chunk_size,
            on_line=progress.advance,
        ):
            for row in rows:
                rows_out.write(row)
                kept.append({k: row[k] for k in _SUMMARY_KEYS} | {"correct": row["correct"]})
                if row["status"] == "error":
                    where = f"{row['file']}:{row['line']}"
                    progress.message(f"scorer: {where}: {row['error']}")
    finally:
        progress.clear()
        rows_out.close()
    summary = summarize(kept, rewards)
    summary["files"] = [s.name for s in sources]
    _report(args, rows_out, summary_table(summary), summary, stdout, console)
    return EXIT_OK


def _run_openenv(
    args: argparse.Namespace, sources: list[Source], stdout: TextIO, console: Console
) -> int:
    rows_out = Rows(args, stdout)
    episodes = []
    try:
        for src in sources:
            eps, problems = parse_log(src.lines())
            for line, problem in problems:
                say(console, f"scorer: {src.name}:{line}: {problem}")
            for ep in eps:
                rows_out.write({"file": src.name, **ep.to_row()})
            episodes.extend(eps)
    finally:
        rows_out.close()
    summary = summarize_episodes(episodes)
    summary["files"] = [s.name for s in sources]
    _report(args, rows_out, openenv_table(summary), summary, stdout, console)
    return EXIT_OK


def _report(
    args: argparse.Namespace,
    rows_out: Rows,
    table: Table,
    summary: dict[str, Any],
    stdout: TextIO,
    console: Console,
) -> None:
    """The end of a run: the held-back-rows note and the summary (JSON line or table)."""
    note = rows_out.note()
    if note:
        say(console, note)
    if args.json:
        _write(stdout, {"summary": summary})
    else:
        console.print(table)


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the CLI; returns the exit code (see module doc)."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    args = _build_parser().parse_args(argv)
    console = Console(file=stderr, highlight=False)
    try:
        if args.files.count("-") > 1:
            raise CliError("'-' (stdin) may be given once")
        sources = [Source(name, stdin) for name in args.files]
        if args.command == "openenv":
            return _run_openenv(args, sources, stdout, console)
        kinds = {s.openenv for s in sources}
        if kinds == {True}:
            return _run_openenv(args, sources, stdout, console)
        if len(kinds) > 1:
            logs = ", ".join(s.name for s in sources if s.openenv)
            raise CliError(f"cannot grade OpenEnv logs ({logs}) together with JSONL files")
        return _run_grade(args, sources, stdout, console)
    except CliError as e:
        stderr.write(f"scorer: error: {e}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        stderr.write("scorer: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader (``| head``) left: stop quietly, and keep Python's exit-time flush of
        # stdout from failing again.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_OK
