"""``python -m scorer``: grade trajectory files offline, or summarise OpenEnv episode logs.

stdout carries only JSON lines (one row per trajectory, then with ``--json`` one
``{"summary": ...}`` line), so it can be piped; everything for humans (the summary table,
malformed-line reports, the progress bar) goes to stderr. Exit codes: 0 when the run finished
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
from collections.abc import Iterator, Sequence
from typing import IO, Any, TextIO

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
_SUMMARY_KEYS = ("status", "reward", "tool_calls", "format", "index", "file", "line", "group")
_SNIFF = 50


class CliError(Exception):
    """A problem that ends the run with exit code 2 (bad file, bad option)."""


class Progress:
    """A hand-written progress bar on stderr, shown only on a TTY and only once a run has
    lasted half a second (short runs stay quiet)."""

    def __init__(self, stream: TextIO, total: int | None, enabled: bool) -> None:
        self.stream = stream
        self.total = total
        self.enabled = enabled
        self.done = 0
        self.start = time.monotonic()
        self.last_draw = 0.0
        self.drawn = False

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if not self.enabled or now - self.start < 0.5 or now - self.last_draw < 0.1:
            return
        self.last_draw = now
        rate = self.done / max(now - self.start, 1e-9)
        if self.total:
            frac = min(self.done / self.total, 1.0)
            bar = "#" * int(frac * 30)
            text = f"[{bar:<30}] {self.done}/{self.total} {frac:6.1%} {rate:7.1f} lines/s"
        else:
            text = f"{self.done} lines {rate:7.1f} lines/s"
        self.stream.write("\r" + text)
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False

    def message(self, text: str) -> None:
        """Print a line on stderr without tearing the bar."""
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()


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
        ("--timeout-reward", "an answer check that timed out (default: the wrong reward)"),
    ):
        grade.add_argument(flag, type=float, default=None, metavar="X", help=f"reward for {what}")

    openenv = sub.add_parser("openenv", help="summarise OpenEnv episode logs per task")
    _add_io_args(openenv)
    return parser


def _add_io_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="input files; '-' reads stdin")
    p.add_argument("-o", "--output", metavar="OUT", help="write result lines here, not stdout")
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


def format_summary(summary: dict[str, Any]) -> str:
    """The human-readable summary table of a grading run."""
    rw = summary.get("rewards", {})
    verdicts = summary["graded"] - summary["timeouts"]
    lines = [
        f"preset {rw.get('preset', '?')}: {summary['count']} trajectories",
        f"  accuracy        {_fmt(summary['accuracy'], pct=True)}"
        f"  ({summary['correct']}/{verdicts} with a verdict)",
        f"  mean reward     {_fmt(summary['mean_reward'])}",
        f"  no answer       {_fmt(summary['no_answer_rate'], pct=True)}",
        f"  format error    {_fmt(summary['format_error_rate'], pct=True)}",
        f"  tool use        {_fmt(summary['tool_use_rate'], pct=True)}",
        f"  timeouts        {summary['timeouts']}",
        f"  errors          {summary['errors']}",
    ]
    if "pass_at_k" in summary:
        ks = "  ".join(f"pass@{k} {v:.4f}" for k, v in summary["pass_at_k"].items())
        lines.append(f"  groups          {summary['groups']}: {ks}")
    return "\n".join(lines)


def format_openenv_summary(summary: dict[str, Any]) -> str:
    """The human-readable per-task table of OpenEnv episodes."""
    header = f"{'task':<24} {'episodes':>8} {'success':>8} {'score':>8} {'steps':>7} {'errors':>7}"
    lines = [header]

    def line(name: str, s: dict[str, Any]) -> str:
        return (
            f"{name[:24]:<24} {s['episodes']:>8} {_fmt(s['success_rate'], pct=True):>8} "
            f"{_fmt(s['mean_score']):>8} {_fmt(s['mean_steps']):>7} {s['errors']:>7}"
            + (f"  ({s['incomplete']} incomplete)" if s["incomplete"] else "")
        )

    for task, s in summary["tasks"].items():
        lines.append(line(task, s))
    lines.append(line("all", summary))
    return "\n".join(lines)


def _open_output(path: str | None, stdout: TextIO) -> tuple[TextIO, bool]:
    if path is None:
        return stdout, False
    try:
        return open(path, "w", encoding="utf-8"), True  # noqa: SIM115
    except OSError as e:
        raise CliError(f"cannot write {path}: {e.strerror or e}") from None


def _write(out: IO[str], obj: Any) -> None:
    out.write(json.dumps(obj, ensure_ascii=False) + "\n")


def _run_grade(
    args: argparse.Namespace, sources: list[Source], stdout: TextIO, stderr: TextIO
) -> int:
    overrides = {
        "correct_reward": args.correct_reward,
        "wrong_reward": args.wrong_reward,
        "format_reward": args.format_reward,
        "tool_bonus": args.tool_bonus,
        "timeout_reward": args.timeout_reward,
    }
    try:
        rewards = reward_config(args.preset, **overrides)
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
    show = not args.no_progress and stderr.isatty()
    total = None
    if show:
        counts = [s.count_lines() for s in sources]
        total = None if None in counts else sum(c for c in counts if c is not None)
    progress = Progress(stderr, total, show)

    def tasks() -> Iterator[Task]:
        for src in sources:
            for n, text in enumerate(src.lines(), 1):
                if text.strip():
                    yield (src.name, n, text)
                else:
                    progress.advance(1)

    out, close_out = _open_output(args.output, stdout)
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
                _write(out, row)
                kept.append({k: row[k] for k in _SUMMARY_KEYS} | {"correct": row["correct"]})
                if row["status"] == "error":
                    where = f"{row['file']}:{row['line']}"
                    progress.message(f"scorer: {where}: {row['error']}")
        progress.clear()
        summary = summarize(kept, rewards)
        summary["files"] = [s.name for s in sources]
        if args.json:
            _write(stdout, {"summary": summary})
        else:
            stderr.write(format_summary(summary) + "\n")
    finally:
        progress.clear()
        if close_out:
            out.close()
    return EXIT_OK


def _run_openenv(
    args: argparse.Namespace, sources: list[Source], stdout: TextIO, stderr: TextIO
) -> int:
    out, close_out = _open_output(args.output, stdout)
    episodes = []
    try:
        for src in sources:
            eps, problems = parse_log(src.lines())
            for line, problem in problems:
                stderr.write(f"scorer: {src.name}:{line}: {problem}\n")
            for ep in eps:
                _write(out, {"file": src.name, **ep.to_row()})
            episodes.extend(eps)
    finally:
        if close_out:
            out.close()
    summary = summarize_episodes(episodes)
    summary["files"] = [s.name for s in sources]
    if args.json:
        _write(stdout, {"summary": summary})
    else:
        stderr.write(format_openenv_summary(summary) + "\n")
    return EXIT_OK


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
    try:
        if args.files.count("-") > 1:
            raise CliError("'-' (stdin) may be given once")
        sources = [Source(name, stdin) for name in args.files]
        if args.command == "openenv":
            return _run_openenv(args, sources, stdout, stderr)
        kinds = {s.openenv for s in sources}
        if kinds == {True}:
            return _run_openenv(args, sources, stdout, stderr)
        if len(kinds) > 1:
            logs = ", ".join(s.name for s in sources if s.openenv)
            raise CliError(f"cannot grade OpenEnv logs ({logs}) together with JSONL files")
        return _run_grade(args, sources, stdout, stderr)
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
