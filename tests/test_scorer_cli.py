"""End to end: ``python -m scorer`` in a subprocess, and the HTTP scoring functions, both with
the real equivalence engine. Expected rows come from the preset rules applied by hand to the
fixtures in tests/data/traces/ (each fixture line says what it tests)."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any

import pyte
import pytest
from rich.console import Console

from scorer import api, cli
from scorer.cli import ProgressBar, progress_columns

TRACES = Path(__file__).parent / "data" / "traces"
ROOT = Path(__file__).resolve().parents[1]

# flat.jsonl, line by line: (id, binary status, binary reward, interleaved status, reward)
FLAT = [
    ("flat-1", "correct", 1.0, "correct", 1.2),  # answered tool call in think
    ("flat-2", "correct", 1.0, "correct", 1.2),  # \tfrac{1}{3} vs solution's \frac13
    ("flat-3", "no_answer", 0.0, "format_error", -1.0),  # box only in an unclosed <think>
    ("flat-4", "correct", 1.0, "format_error", -1.0),  # tool call after </think>
    ("flat-5", "incorrect", 0.0, "incorrect", -1.0),  # right value only in tool output
    ("flat-6", "no_answer", 0.0, "no_answer", -1.0),  # box only inside think
    ("flat-7", "incorrect", 0.0, "incorrect", -1.0),  # boxes 3 and 4: a hedge
    (8, "correct", 1.0, "format_error", -1.0),  # verl record without id, no </think>
    ("flat-9", "correct", 1.0, "correct", 1.0),  # GSM8K "#### 72" gold
]


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    # cwd is the fixtures folder: PYTHONPATH makes it this checkout's scorer that runs, not
    # whichever one is pip-installed.
    return subprocess.run(
        [sys.executable, "-m", "scorer", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=TRACES,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


def split(stdout: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Result rows and the ``{"summary": ...}`` line (every stdout line must be JSON)."""
    objs = [json.loads(line) for line in stdout.splitlines()]
    summary = [o["summary"] for o in objs if "summary" in o]
    rows = [o for o in objs if "summary" not in o]
    assert len(summary) <= 1
    return rows, summary[0] if summary else None


def test_grade_binary_rows_and_summary() -> None:
    proc = run("grade", "flat.jsonl", "--preset", "binary", "-j", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    rows, s = split(proc.stdout)
    assert [(r["id"], r["status"], r["reward"]) for r in rows] == [
        (i, st, rw) for i, st, rw, _, _ in FLAT
    ]
    assert [r["line"] for r in rows] == list(range(1, 10))
    assert rows[0]["pred"] == "20" and rows[0]["gold"] == "20" and rows[0]["correct"] is True
    assert [r["tool_calls"] for r in rows] == [1, 1, 0, 1, 1, 0, 0, 0, 0]
    assert s is not None
    assert (s["count"], s["correct"], s["errors"], s["timeouts"]) == (9, 5, 0, 0)
    assert s["accuracy"] == pytest.approx(5 / 9)
    assert s["mean_reward"] == pytest.approx(5 / 9)
    assert s["no_answer_rate"] == pytest.approx(2 / 9)
    assert s["format_error_rate"] == 0.0
    assert s["tool_use_rate"] == pytest.approx(4 / 9)
    assert s["rewards"]["preset"] == "binary"
    assert proc.stderr == ""  # --json: nothing for humans to say


def test_grade_interleaved_rows() -> None:
    proc = run("grade", "flat.jsonl", "--preset", "interleaved", "-j", "1", "--json")
    rows, s = split(proc.stdout)
    assert [(r["status"], r["reward"]) for r in rows] == [
        (st, pytest.approx(rw)) for _, _, _, st, rw in FLAT
    ]
    assert rows[0]["reasons"][-1] == "tool_bonus"
    assert s is not None
    assert s["mean_reward"] == pytest.approx((1.2 + 1.2 + 1.0 - 6) / 9)
    assert s["format_error_rate"] == pytest.approx(3 / 9)


def test_reward_flags_override_preset_values() -> None:
    proc = run(
        "grade",
        "flat.jsonl",
        "--preset=interleaved",
        "--correct-reward=2",
        "--wrong-reward=0",
        "--format-reward=-0.5",
        "--tool-bonus=0.5",
        "-j1",
    )
    rows, _ = split(proc.stdout)
    assert [r["reward"] for r in rows] == [2.5, 2.5, -0.5, -0.5, 0.0, 0.0, 0.0, -0.5, 2.0]


def table_row(text: str, first: str) -> list[str]:
    """The cells (words) of the summary-table line that starts with ``first``."""
    [line] = [ln for ln in text.splitlines() if ln.strip().startswith(first)]
    return line.split()


def test_table_summary_goes_to_stderr() -> None:
    proc = run("grade", "flat.jsonl", "-j", "1")
    rows, s = split(proc.stdout)
    assert len(rows) == 9 and s is None  # stdout is a pipe: the rows, as ever
    assert proc.stderr.splitlines()[0].rstrip() == "preset binary: 9 trajectories"
    assert table_row(proc.stderr, "accuracy") == "accuracy 55.6% 5/9 with a verdict".split()
    assert table_row(proc.stderr, "tool use") == ["tool", "use", "44.4%"]
    assert table_row(proc.stderr, "errors") == ["errors", "0"]
    assert "\x1b" not in proc.stderr  # not a terminal: no colours, no cursor moves


def test_jobs_2_keeps_input_order() -> None:
    files = ["flat.jsonl", "chat.jsonl", "sharegpt.jsonl", "verifiers.jsonl"]
    one = run("grade", *files, "--preset", "interleaved", "-j", "1")
    two = run("grade", *files, "--preset", "interleaved", "-j", "2", "--chunk-size", "1")
    assert two.returncode == 0, two.stderr
    assert two.stdout == one.stdout
    rows, _ = split(two.stdout)
    assert [r["id"] for r in rows][-9:] == [
        "chat-1",
        "chat-2",
        "chat-3",
        "chat-4",
        "hermes-1",
        "hermes-2",
        0,
        1,
        2,
    ]
    assert [r["status"] for r in rows][-9:] == [
        "correct",
        "no_answer",
        "format_error",
        "correct",
        "correct",
        "incorrect",
        "correct",
        "correct",
        "incorrect",
    ]


def test_stdin_dash() -> None:
    proc = run("grade", "-", "-j", "1", "--json", stdin=(TRACES / "chat.jsonl").read_text())
    rows, s = split(proc.stdout)
    assert [(r["file"], r["id"], r["status"]) for r in rows] == [
        ("-", "chat-1", "correct"),
        ("-", "chat-2", "no_answer"),
        ("-", "chat-3", "correct"),
        ("-", "chat-4", "correct"),
    ]
    assert s is not None and s["count"] == 4


def test_malformed_lines_are_error_rows_not_the_end() -> None:
    proc = run("grade", "malformed.jsonl", "-j", "1", "--json")
    assert proc.returncode == 0
    rows, s = split(proc.stdout)
    assert [(r["id"], r["line"], r["status"]) for r in rows] == [
        ("ok-1", 1, "correct"),
        (2, 2, "error"),
        ("no-format", 3, "error"),
        ("no-gold", 4, "error"),
        ("ok-2", 6, "incorrect"),  # line 5 is blank
    ]
    assert "not JSON" in rows[1]["error"]
    assert "unknown trace format" in rows[2]["error"]
    assert "no gold" in rows[3]["error"]
    for line in (2, 3, 4):
        assert f"malformed.jsonl:{line}:" in proc.stderr
    assert s is not None
    assert (s["count"], s["errors"], s["accuracy"]) == (5, 3, 0.5)


@pytest.mark.parametrize("bad", ["missing.jsonl", "."])
def test_unreadable_file_exits_2(bad: str) -> None:
    proc = run("grade", "flat.jsonl", bad, "-j", "1")
    assert proc.returncode == 2
    assert f"cannot read {bad}" in proc.stderr
    assert proc.stdout == ""  # files are opened before any grading


def test_bad_answers_file_exits_2() -> None:
    proc = run("grade", "atropos_group.jsonl", "--answers", "malformed.jsonl")
    assert proc.returncode == 2
    assert "malformed.jsonl:1: no 'id'" not in proc.stderr  # it has ids...
    assert "malformed.jsonl:2: not JSON" in proc.stderr  # ...but line 2 is broken


def test_atropos_groups_pass_at_k_with_answers_file() -> None:
    proc = run("grade", "atropos_group.jsonl", "--answers", "answers.jsonl", "-j", "1", "--json")
    rows, s = split(proc.stdout)
    assert [(r["group"], r["index"], r["status"]) for r in rows] == [
        (1, 0, "correct"),
        (1, 1, "incorrect"),
        (1, 2, "correct"),
        ("grp-2", 0, "correct"),
        ("grp-2", 1, "no_answer"),
        ("grp-2", 2, "incorrect"),
        ("grp-2", 3, "correct"),
    ]
    assert [r["env_reward"] for r in rows[:3]] == [1.2, -1.0, 1.0]
    assert s is not None and s["groups"] == 2
    # n=3,c=2 and n=4,c=2: pass@1 = mean(2/3, 1/2); pass@2 = mean(1, 1 - C(2,2)/C(4,2))
    assert s["pass_at_k"] == {
        "1": pytest.approx((2 / 3 + 1 / 2) / 2),
        "2": pytest.approx((1 + 5 / 6) / 2),
        "3": pytest.approx(1.0),
    }


def test_output_file_keeps_stdout_for_the_summary(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    proc = run("grade", "sharegpt.jsonl", "-o", str(out), "-j", "1", "--json")
    rows, s = split(proc.stdout)
    assert rows == [] and s is not None and s["count"] == 2
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in written] == [
        ("hermes-1", "correct"),
        ("hermes-2", "incorrect"),
    ]


def test_openenv_log_is_summarised_per_task() -> None:
    proc = run("grade", "openenv.log", "--json")
    assert proc.returncode == 0
    rows, s = split(proc.stdout)
    assert [(r["task"], r["success"], r["complete"]) for r in rows] == [
        ("easy", True, True),
        ("easy", False, True),
        ("hard", False, True),
        ("hard", True, True),
        ("hard", None, False),
    ]
    assert s is not None and s["format"] == "openenv"
    assert s["tasks"]["easy"]["success_rate"] == 0.5
    assert s["tasks"]["hard"]["mean_score"] == pytest.approx(0.6)
    assert "openenv.log:19: episode has no [END] line" in proc.stderr
    table = run("openenv", "openenv.log").stderr
    assert "hard" in table and "(1 incomplete)" in table


def test_mixing_logs_and_jsonl_is_refused() -> None:
    proc = run("grade", "openenv.log", "flat.jsonl")
    assert proc.returncode == 2 and "OpenEnv" in proc.stderr


# --- the HTTP scoring functions -----------------------------------------------------------

SEED_STYLE = (
    '<think>\n<tool_call>{"name": "calculator", "arguments": {"expr": "(2+3)*4"}}'
    '</tool_call>\n<tool_response>{"value": 20}</tool_response>\n</think>\n\\boxed{20}'
)


def test_api_score_response_and_answer() -> None:
    row = api.score({"response": SEED_STYLE, "answer": 20, "preset": "interleaved"})
    assert (row["status"], row["reward"], row["pred"], row["tool_calls"]) == (
        "correct",
        pytest.approx(1.2),
        "20",
        1,
    )
    assert set(row) == set(split(run("grade", "sharegpt.jsonl", "-j1").stdout)[0][0])
    assert api.score({"response": "\\boxed{21}", "answer": "20"})["reward"] == 0.0


def test_api_score_any_record_format() -> None:
    record = json.loads((TRACES / "chat.jsonl").read_text().splitlines()[0])
    row = api.score({**record, "preset": "interleaved"})
    assert (row["id"], row["format"], row["reward"]) == ("chat-1", "chat", pytest.approx(1.2))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "JSON object"),
        ({"response": "\\boxed{1}"}, "no gold"),
        ({"response": "\\boxed{1}", "answer": "1", "preset": "strict"}, "unknown preset"),
        ({"response": "\\boxed{1}", "answer": "1", "timeout": 0}, "timeout"),
        ({"response": "\\boxed{1}", "answer": "1", "rewards": {"bonus": 1}}, "reward setting"),
        ({"text": "\\boxed{1}", "answer": "1"}, "unknown trace format"),
        ({"messages": [[{"role": "assistant", "content": "x"}]], "answer": "1"}, "batch"),
    ],
)
def test_api_score_caller_mistakes_raise_value_error(body: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        api.score(body)


def test_api_score_batch_isolates_bad_items() -> None:
    group = json.loads((TRACES / "atropos_group.jsonl").read_text().splitlines()[0])
    out = api.score_batch(
        {
            "preset": "interleaved",
            "items": [
                {"id": "a", "response": SEED_STYLE, "answer": "20"},
                {"id": "b", "response": "\\boxed{1}"},
                "not an object",
                {"id": "c", "response": "\\boxed{20}", "answer": "20", "preset": "binary"},
                {"id": "d", "response": "\\boxed{20}", "answer": "20", "preset": "bogus"},
                group,
            ],
        }
    )
    got = [(r["id"], r["line"], r["status"], r["reward"]) for r in out["results"]]
    assert got == [
        ("a", 1, "correct", pytest.approx(1.2)),
        ("b", 2, "error", None),
        (3, 3, "error", None),
        ("c", 4, "correct", 1.0),  # per-item preset: binary needs no </think>
        ("d", 5, "error", None),
        (6, 6, "correct", pytest.approx(1.2)),
        (6, 6, "incorrect", -1.0),
        (6, 6, "correct", 1.0),
    ]
    assert "unknown preset" in out["results"][4]["error"]
    s = out["summary"]
    assert (s["count"], s["errors"], s["correct"], s["groups"]) == (8, 3, 4, 1)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"items": "x"}, "must be a list"),
        ({"items": [], "extra": 1}, "unknown keys"),
        ({"items": [], "preset": "nope"}, "unknown preset"),
        ({"items": [{}] * (api.MAX_BATCH_ITEMS + 1)}, "at most"),
    ],
)
def test_api_score_batch_envelope_mistakes(body: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        api.score_batch(body)


def test_api_models_accept_the_contract() -> None:
    req = api.ScoreBatchRequest.model_validate({"items": [{"response": "x"}], "preset": "binary"})
    assert req.items == [{"response": "x"}]
    row = api.score({"response": "\\boxed{7}", "answer": 7})
    assert api.ScoreRow.model_validate(row).status == "correct"


def test_trl_reward_example_runs_as_written() -> None:
    """`python examples/trl_reward.py`, as its docs say: a right answer without </think> earns
    1.0 with binary and -1.0 (a format error) with interleaved."""
    proc = subprocess.run(
        [sys.executable, "examples/trl_reward.py"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "binary       with </think>: +1.0   without: +1.0",
        "interleaved  with </think>: +1.0   without: -1.0",
    ]


def test_one_row_schema_for_grader_api_and_docs() -> None:
    import re

    from scorer.grading import error_row, grade_record
    from scorer.row import ROW_KEYS, GradedRow

    assert ROW_KEYS == tuple(GradedRow.model_fields)
    rows = [
        *grade_record({"response": "\\boxed{7}", "answer": 7}),
        *grade_record({"messages": [[{"role": "assistant", "content": "1"}]], "answer": 1}),
        error_row("bad"),
    ]
    for row in rows:
        assert tuple(row) == ROW_KEYS
        assert GradedRow.model_validate(row).model_dump() == row
    assert api.ScoreBatchResponse.model_fields["results"].annotation == list[GradedRow]
    doc = (ROOT / "docs" / "scorer-cli.md").read_text()
    section = doc.split("## Output rows", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    documented = re.findall(r"`(\w+)`", " ".join(line.split("|")[1] for line in table))
    assert tuple(documented) == ROW_KEYS


# --- what a terminal shows -----------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def visible_segments(raw: str) -> list[str]:
    """What each write between line feeds and carriage returns puts on a line, without the
    escape sequences: none may be wider than the terminal, or it wraps (the old staircase)."""
    return re.split(r"[\r\n]", ANSI.sub("", raw))


def screen_of(raw: str, width: int, height: int = 30) -> list[str]:
    """The terminal's final screen after ``raw``, trailing blanks stripped."""
    screen = pyte.Screen(width, height)
    pyte.Stream(screen).feed(raw.replace("\n", "\r\n"))  # a tty's newline translation
    return [line.rstrip() for line in screen.display]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def narrow_console(width: int = 50) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=width, color_system=None), buf


def test_progress_bar_fits_a_narrow_terminal_and_leaves_it_clean() -> None:
    console, raw = narrow_console(50)
    clock = FakeClock()
    bar = ProgressBar(console, total=1000, enabled=True, clock=clock)
    bar.advance(10)
    assert raw.getvalue() == ""  # the first half second draws nothing
    for _ in range(40):
        clock.now += 0.25
        bar.advance(10)
    drawn = screen_of(raw.getvalue(), 50)
    [line] = [ln for ln in drawn if ln]
    # 410 of 1000 after 10.25 s: 41 %, elapsed 0:00:10, about 15 s to go
    assert "41%" in line and "0:00:10" in line and "eta 0:00:1" in line, line
    bar.message("scorer: x.jsonl:3: not JSON [1]")  # brackets are text, not rich markup
    bar.clear()
    assert all(len(seg) <= 50 for seg in visible_segments(raw.getvalue()))
    assert [ln for ln in screen_of(raw.getvalue(), 50) if ln] == [
        "scorer: x.jsonl:3: not JSON [1]"
    ]  # the message stays, the bar is gone


def test_progress_columns_follow_the_width() -> None:
    wide = [type(c).__name__ for c in progress_columns(120, 10)]
    narrow = [type(c).__name__ for c in progress_columns(50, 10)]
    assert "MofNCompleteColumn" in wide and "_RateColumn" in wide
    assert "MofNCompleteColumn" not in narrow and "_RateColumn" not in narrow
    assert "TimeRemainingColumn" in narrow and "TimeElapsedColumn" in narrow
    assert "TimeRemainingColumn" not in [type(c).__name__ for c in progress_columns(50, None)]


def test_progress_bar_disabled_draws_nothing() -> None:
    console, raw = narrow_console(50)
    clock = FakeClock()
    bar = ProgressBar(console, total=10, enabled=False, clock=clock)
    clock.now += 5
    bar.advance(10)
    bar.message("scorer: x.jsonl:3: not JSON")
    bar.clear()
    assert raw.getvalue() == "scorer: x.jsonl:3: not JSON\n"


class TtyIO(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_rows_reach_a_terminal_only_with_rows_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TRACES)
    out, err = TtyIO(), io.StringIO()
    assert cli.main(["grade", "flat.jsonl", "-j1"], stdout=out, stderr=err) == 0
    assert out.getvalue() == ""
    assert "scorer: 9 rows not printed to the terminal (--rows or -o FILE)\n" in err.getvalue()
    assert table_row(err.getvalue(), "accuracy")[1] == "55.6%"

    out, err = TtyIO(), io.StringIO()
    assert cli.main(["grade", "flat.jsonl", "-j1", "--rows"], stdout=out, stderr=err) == 0
    rows, _ = split(out.getvalue())
    assert [r["id"] for r in rows] == [i for i, *_ in FLAT]
    assert "not printed" not in err.getvalue()


def test_rows_and_output_are_exclusive() -> None:
    proc = run("grade", "flat.jsonl", "--rows", "-o", "x.jsonl")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def test_real_terminal_50_columns_wide(tmp_path: Path) -> None:
    """The CLI on a real pseudo-terminal 50 columns wide (stdout and stderr), stdin fed in two
    parts, the second one once the first has been graded and the bar's half second is over, so
    that the bar is drawn: nothing wider than the terminal, and the final screen holds just the
    error line, the note and the summary, no bar, no rows."""
    lines = (TRACES / "flat.jsonl").read_text().splitlines(keepends=True) * 10
    lines.insert(45, "not json\n")
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 50, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "scorer", "grade", "-", "-j1"],
        stdin=subprocess.PIPE,
        stdout=terminal,
        stderr=terminal,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT), "TERM": "xterm"},
    )
    os.close(terminal)
    chunks: list[bytes] = []
    first_part_graded = threading.Event()

    def read() -> None:
        while True:
            try:
                data = os.read(controller, 4096)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)
            if b"not JSON" in b"".join(chunks):
                first_part_graded.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert proc.stdin is not None
    proc.stdin.write("".join(lines[:50]).encode())  # the CLI reads 50 lines, then grades
    proc.stdin.flush()
    assert first_part_graded.wait(timeout=60)  # line 46 is reported as it is graded
    time.sleep(ProgressBar.DELAY + 0.2)
    proc.stdin.write("".join(lines[50:]).encode())
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    reader.join(timeout=10)
    os.close(controller)
    raw = b"".join(chunks).decode()
    assert "lines" in ANSI.sub("", raw)  # the stdin bar ("N lines") was drawn
    assert all(len(seg) <= 50 for seg in visible_segments(raw))
    final = [ln for ln in screen_of(raw.replace("\r\n", "\n"), 50) if ln]
    assert final[0].startswith("scorer: -:46: not JSON")
    assert final[1] == "scorer: 91 rows not printed to the terminal"
    assert final[2] == "(--rows or -o FILE)"  # wrapped by rich at a word, not by the terminal
    assert "preset binary: 91 trajectories" in final
    assert ["errors", "1"] in [ln.split() for ln in final]
    assert final[-1].split() == ["masked", "1", "no", "reward"]  # the bad line has no reward
    assert not any("{" in ln or "lines" in ln for ln in final)  # no row, no bar left


def test_answer_fallback_flag() -> None:
    """Without a box, binary reads the final-answer phrase; --no-answer-fallback turns it off,
    --answer-fallback turns it on for interleaved."""
    record = '{"id": 1, "response": "<think>x</think> The final answer is 12.", "answer": "12"}\n'
    statuses = {}
    for flags in ((), ("--no-answer-fallback",), ("--preset", "interleaved", "--answer-fallback")):
        proc = run("grade", "-", "-j", "1", "--json", *flags, stdin=record)
        rows, s = split(proc.stdout)
        statuses[flags] = rows[0]["status"]
        assert s is not None and s["rewards"]["answer_fallback"] is (
            "--no-answer-fallback" not in flags
        )
    assert list(statuses.values()) == ["correct", "no_answer", "correct"]
