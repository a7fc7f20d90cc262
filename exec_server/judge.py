"""Judging a submission against its tests: compile once, run every test in a fresh process of
the same sandbox, compare outside the submission's reach, answer per-test verdicts.

Three kinds of tests (docs/judging.md):

* **stdin/stdout** (any language): each test's ``input`` is the program's stdin, its stdout is
  compared with ``expected_output`` on the host (``output_compare``) or by a *checker*, a
  Python program run in the sandbox as a separate process once the submission's run is gone
  and the sandbox proved clean: the submission can neither read nor alter it;
* **call-based** (Python, ``fn_name``, as LiveCodeBench): a driver calls the function (or
  ``Solution().fn_name``) with the test's ``args`` and prints the return value as JSON after a
  per-request random marker; the host compares it with ``expected``. The submission never sees
  the expected value, so anything it prints can only claim an answer, never forge a pass;
* **test script** (Python, HumanEval's ``check(candidate)``): the script runs in a process of
  its own, as another uid than the submission's, and reaches the submission's functions only
  through plain values (``guest/harness.py``); the verdict is that process's exit status, which
  the kernel reports: nothing the submission writes, returns or patches can forge a pass.
"""

from __future__ import annotations

import enum
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from . import metrics
from .answers import compile_info
from .backends.supervised import needs_preload
from .engine import Engine
from .files import encoded, fetch_share
from .guest.protocol import HARNESS_FAILED, HARNESS_PASSED
from .limits import resolve_limits
from .models import (
    Difference,
    ExecuteRequest,
    JudgeRequest,
    JudgeResponse,
    JudgeTest,
    JudgeTestResult,
)
from .output_compare import Comparison, compare, values_agree
from .request_errors import RequestError
from .runs import CompileFailed, Run, Runs
from .settings import Settings
from .verdict import RunLimits, SnippetResult, Status

EXCERPT = 1024  # characters of a test's stdout/stderr in the answer


class Verdict(enum.StrEnum):
    """A test's status, and the overall verdict (closed)."""

    ACCEPTED = "accepted"
    WRONG_ANSWER = "wrong_answer"
    RUNTIME_ERROR = "runtime_error"  # an /execute ``error``
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    COMPILE_ERROR = "compile_error"


# A test script's harness exits with these (guest/harness.py); anything else is a runtime error.
HARNESS_VERDICT = {HARNESS_PASSED: Verdict.ACCEPTED, HARNESS_FAILED: Verdict.WRONG_ANSWER}

RUN_VERDICT = {
    Status.ERROR: Verdict.RUNTIME_ERROR,
    Status.TIMEOUT: Verdict.TIMEOUT,
    Status.MEMORY_LIMIT: Verdict.MEMORY_LIMIT,
    Status.OUTPUT_LIMIT: Verdict.OUTPUT_LIMIT,
}

_PREAMBLE = """import json as _boxed_json, sys as _boxed_sys
_boxed_ns = {"__name__": "__main__", "__builtins__": __builtins__}
exec(compile(%(code)r, "<string>", "exec"), _boxed_ns)
"""
CALL_DRIVER = (
    _PREAMBLE
    + """_boxed_fn = _boxed_ns.get(%(name)r)
if _boxed_fn is None and isinstance(_boxed_ns.get("Solution"), type):
    _boxed_fn = getattr(_boxed_ns["Solution"](), %(name)r, None)
if not callable(_boxed_fn):
    raise NameError("the code defines no function %(name)s")
_boxed_text = _boxed_json.dumps(
    _boxed_fn(*_boxed_json.loads(%(args)r)),
    default=lambda o: list(o) if isinstance(o, (set, frozenset, tuple)) else repr(o),
)
_boxed_sys.stdout.flush()
_boxed_sys.stdout.write("\\n" + %(marker)r + _boxed_text + "\\n")
"""
)
CHECKER_DRIVER = """import json as _boxed_json, sys as _boxed_sys
_boxed_ns = {"__name__": "boxed_checker", "__builtins__": __builtins__}
exec(compile(%(checker)r, "<checker>", "exec"), _boxed_ns)
_boxed_sys.stdout.write("\\n" + %(marker)r + "loaded\\n")
_boxed_data = _boxed_json.loads(_boxed_sys.stdin.read())
_boxed_verdict = _boxed_ns["check"](
    _boxed_data["input"], _boxed_data["expected"], _boxed_data["actual"]
)
_boxed_ok, _boxed_note = (
    _boxed_verdict if isinstance(_boxed_verdict, tuple) else (_boxed_verdict, None)
)
_boxed_sys.stdout.flush()
_boxed_sys.stdout.write(
    "\\n" + %(marker)r
    + _boxed_json.dumps({"ok": bool(_boxed_ok), "note": None if _boxed_note is None else str(_boxed_note)})
    + "\\n"
)
"""  # noqa: E501 - a program's text


@dataclass(frozen=True)
class Case:
    """One test as it will run: stdin, the code to run (None: the submission), its limits."""

    index: int
    stdin: str
    code: str | None
    limits: RunLimits
    harness: bool = False  # stdin is a test script, judged apart from the submission
    expected_output: str | None = None
    expected: Any = None


def _size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    try:
        return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    except RecursionError:
        raise RequestError(422, "a test's args or expected value is nested too deeply") from None


def _kind(req: JudgeRequest) -> str:
    if req.test_script is not None:
        if req.tests:
            raise RequestError(422, "test_script runs alone: send no tests with it")
        kind = "script"
    elif req.fn_name is not None:
        if any(t.args is None for t in req.tests):
            raise RequestError(422, "call-based tests (fn_name) need args in every test")
        kind = "call"
    else:
        if any(t.expected_output is None for t in req.tests):
            raise RequestError(422, "stdin/stdout tests need expected_output in every test")
        kind = "stdio"
    if kind != "script" and not req.tests:
        raise RequestError(422, "no tests: send tests, or a test_script")
    if kind != "stdio" and req.language != "python":
        raise RequestError(422, f"{kind} tests are for python; {req.language} reads stdin")
    if req.comparison == "checker":
        if kind != "stdio" or not req.checker:
            raise RequestError(422, "comparison 'checker' needs stdin/stdout tests and a checker")
    elif req.checker is not None:
        raise RequestError(422, "a checker is used only with comparison 'checker'")
    return kind


def _driver(kind: str, req: JudgeRequest, test: JudgeTest, marker: str) -> str | None:
    """The Python program a test runs (None: the submission itself, on the test's stdin)."""
    if kind == "call":
        fields = {"name": req.fn_name, "args": json.dumps(test.args)}
        return CALL_DRIVER % {"code": req.code, "marker": marker, **fields}
    return None


def plan(req: JudgeRequest, settings: Settings, marker: str) -> tuple[str, list[Case]]:
    """The tests as they will run, with every cap enforced (413: too large, 422: too much)."""
    kind = _kind(req)
    tests = req.tests if kind != "script" else [JudgeTest()]  # a script is one test
    if len(tests) > settings.judge_max_tests:
        raise RequestError(422, f"{len(tests)} tests; the maximum is {settings.judge_max_tests}")
    cases, work = [], 0.0
    for index, test in enumerate(tests):
        parts = (test.input, test.expected_output, test.args, test.expected)
        size = sum(_size(v) for v in parts if v is not None)
        if size > settings.judge_max_test_bytes:
            raise RequestError(
                413,
                f"test {index} is {size} bytes; the maximum is {settings.judge_max_test_bytes}",
            )
        fields: dict[str, Any] = {"code": req.code, "language": req.language}
        for name in ("timeout", "cpu_timeout", "memory_mb"):
            own = getattr(test, name)
            fields[name] = own if own is not None else getattr(req, name)
        limits = resolve_limits(ExecuteRequest(**fields), settings)
        work += limits.wall_seconds * (2 if req.comparison == "checker" else 1)
        stdin = test.input if kind == "stdio" else ""
        if kind == "script":  # the harness's part of the body (guest/harness.py)
            stdin = json.dumps({"script": req.test_script, "entry": req.entry_point})
        code = _driver(kind, req, test, marker)
        own = {"expected_output": test.expected_output, "expected": test.expected}
        cases.append(Case(index, stdin, code, limits, harness=kind == "script", **own))
    if work > settings.judge_max_work_seconds:
        raise RequestError(
            422,
            f"the tests may take {work:g} s of time limits; the maximum is "
            f"{settings.judge_max_work_seconds:g} s (fewer tests or shorter timeouts)",
        )
    return kind, cases


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _split_marker(stdout: str, marker: str) -> tuple[str, str | None]:
    """The program's own output, and what the driver wrote after its last marker (None: the
    driver never got there)."""
    at = stdout.rfind("\n" + marker)
    if at < 0:
        return stdout, None
    tail = stdout[at + 1 + len(marker) :]
    return stdout[:at], tail.split("\n", 1)[0]


def _test_result(
    case: Case,
    result: SnippetResult,
    status: Verdict,
    stdout: str,
    difference: Difference | None = None,
    message: str | None = None,
) -> JudgeTestResult:
    stderr = _text(result.stderr)
    return JudgeTestResult(
        index=case.index,
        status=status,
        exit_code=result.exit_code,
        duration_ms=result.duration_ms,
        cpu_ms=result.cpu_ms,
        peak_memory_kb=result.max_rss_kb,
        stdout=stdout[:EXCERPT],
        stderr=stderr[-EXCERPT:],
        truncated=result.truncated_stdout
        or result.truncated_stderr
        or len(stdout) > EXCERPT
        or len(stderr) > EXCERPT,
        difference=difference,
        message=message if message is not None else result.reason,
        files=encoded(result.files),
        fetch_status=result.fetch_status,
    )


def _script_result(case: Case, result: SnippetResult, stdout: str) -> JudgeTestResult:
    """A test script's verdict: its harness's exit status, as the kernel reported it (the
    submission runs as another uid and cannot set it), or the limit that stopped the run."""
    if result.status not in (Status.OK, Status.ERROR):
        return _test_result(case, result, RUN_VERDICT[result.status], stdout)
    verdict = HARNESS_VERDICT.get(result.exit_code, Verdict.RUNTIME_ERROR)
    if verdict is Verdict.WRONG_ANSWER:
        return _test_result(case, result, verdict, stdout, message="assertion")
    if verdict is Verdict.RUNTIME_ERROR:
        note = "the test script failed: an exception, or the submission ended before it returned"
        return _test_result(case, result, verdict, stdout, message=result.reason or note)
    return _test_result(case, result, verdict, stdout)


class Judging:
    """One judge request on its ``Runs``."""

    def __init__(self, req: JudgeRequest, kind: str, runs: Runs, marker: str) -> None:
        self.req, self.kind, self.runs, self.marker = req, kind, runs, marker
        self.comparison = Comparison(req.comparison)
        self.tolerance = req.float_tolerance if self.comparison is Comparison.FLOAT else None
        self.heavy = kind != "stdio" and needs_preload(req.code)  # the drivers hold it as text

    async def test(self, case: Case, more: bool) -> JudgeTestResult:
        """Run one test and judge it (a checker runs after it, in a process of its own)."""
        checker = self.comparison is Comparison.CHECKER
        result = await self.runs.run(
            case.stdin,
            case.limits,
            more=more or checker,
            code=case.code,
            heavy=self.heavy,
            harness=case.harness,
        )
        if checker and result.status is Status.OK:
            return await self._checked(case, result, _text(result.stdout), more)
        return self.judged(case, result)

    async def all_tests(self, cases: list[Case]) -> list[JudgeTestResult]:
        """Run every test in batches (see ``Runs.run_all``) and judge each: for the tests of
        a request that wants them all and compares on the host (no checker)."""
        runs = [Run(case.stdin, case.limits, case.code, case.harness) for case in cases]
        results = await self.runs.run_all(runs, more=False, heavy=self.heavy)
        return [self.judged(case, result) for case, result in zip(cases, results, strict=True)]

    def judged(self, case: Case, result: SnippetResult) -> JudgeTestResult:
        """A test's result from its run, compared on the host (not with a checker)."""
        stdout = _text(result.stdout)
        if case.harness:
            return _script_result(case, result, stdout)
        own, tail = _split_marker(stdout, self.marker) if case.code else (stdout, None)
        if result.status is not Status.OK:
            return _test_result(case, result, RUN_VERDICT[result.status], own)
        if self.kind == "call":
            return self._call_result(case, result, own, tail)
        assert case.expected_output is not None
        found = compare(self.comparison, case.expected_output, stdout, self.req.float_tolerance)
        if found is None:
            return _test_result(case, result, Verdict.ACCEPTED, stdout)
        diff = Difference(**found.as_dict())
        return _test_result(case, result, Verdict.WRONG_ANSWER, stdout, diff)

    def _call_result(
        self, case: Case, result: SnippetResult, own: str, tail: str | None
    ) -> JudgeTestResult:
        if tail is None:
            note = "the code exited before the function returned"
            return _test_result(case, result, Verdict.RUNTIME_ERROR, own, message=note)
        try:
            value = json.loads(tail)
        except (ValueError, RecursionError):  # cut off at the output cap, or nested too deep
            note = "the return value cannot be read back (cut at the output limit, or too deep)"
            return _test_result(case, result, Verdict.WRONG_ANSWER, own, message=note)
        if values_agree(case.expected, value, self.tolerance):
            return _test_result(case, result, Verdict.ACCEPTED, own)
        shown = Difference(
            line=1,
            column=1,
            expected=json.dumps(case.expected)[:80],
            actual=tail[:80],
            note="the return value differs",
        )
        return _test_result(case, result, Verdict.WRONG_ANSWER, own, shown)

    async def _checked(
        self, case: Case, result: SnippetResult, stdout: str, more: bool
    ) -> JudgeTestResult:
        """Ask the checker, in a process of its own after the submission's run is gone."""
        assert self.req.checker is not None
        code = CHECKER_DRIVER % {"checker": self.req.checker, "marker": self.marker}
        data = {"input": case.stdin, "expected": case.expected_output, "actual": stdout}
        limits = case.limits
        heavy = needs_preload(self.req.checker)
        checked = await self.runs.run(
            json.dumps(data), limits, more=more, code=code, own=False, heavy=heavy
        )
        lines = _text(checked.stdout).split("\n")
        if f"{self.marker}loaded" not in lines:
            why = _text(checked.stderr)[-500:].strip() or checked.status
            raise RequestError(422, f"the checker cannot be loaded: {why}")
        _, tail = _split_marker(_text(checked.stdout), self.marker)
        try:
            answer = json.loads(tail or "")
            ok, note = bool(answer["ok"]), answer["note"]
        except (ValueError, KeyError, TypeError):
            why = _text(checked.stderr)[-300:].strip() or checked.reason or checked.status
            return _test_result(
                case, result, Verdict.WRONG_ANSWER, stdout, message=f"the checker failed: {why}"
            )
        verdict = Verdict.ACCEPTED if ok else Verdict.WRONG_ANSWER
        return _test_result(case, result, verdict, stdout, message=note)


async def _run_tests(
    req: JudgeRequest, kind: str, cases: list[Case], runs: Runs, marker: str
) -> list[JudgeTestResult]:
    """Every test's result, in order (up to the first failure with ``stop_on_first_failure``;
    one at a time with a checker: each may be the last)."""
    judging = Judging(req, kind, runs, marker)
    if not (req.stop_on_first_failure or judging.comparison is Comparison.CHECKER):
        return await judging.all_tests(cases)
    tests: list[JudgeTestResult] = []
    for case in cases:
        tests.append(await judging.test(case, more=case.index < len(cases) - 1))
        if tests[-1].status != Verdict.ACCEPTED and req.stop_on_first_failure:
            break
    return tests


async def judge(engine: Engine, req: JudgeRequest, request_id: str) -> JudgeResponse:
    """Run ``req``'s tests; the answer has the verdict, the counts and every test run."""
    marker = f"\x1eboxed-{secrets.token_hex(12)}:"  # per request: the code cannot guess it
    image = engine.image(req.image)
    kind, cases = plan(req, image.settings, marker)
    runs = engine.runs(
        req.isolation,
        req.language,
        req.code,
        req.compile_timeout,
        req.files,
        req.fetch_files,
        fetch_bytes=fetch_share(len(cases), engine.settings),
        image=image,
    )
    engine.check_available(image)
    started = time.monotonic()
    async with engine.admission.slot(), runs:
        try:
            compiled = await runs.prepare()
            tests = await _run_tests(req, kind, cases, runs, marker)
        except CompileFailed as failed:  # the first compile, or one again in a fresh sandbox
            return JudgeResponse(
                verdict=Verdict.COMPILE_ERROR,
                passed=0,
                total=len(cases),
                first_failure=None,
                compile=compile_info(failed.result),
                tests=[],
                duration_ms=round((time.monotonic() - started) * 1000, 2),
                request_id=request_id,
            )
    for test in tests:
        metrics.JUDGE_TESTS.labels(test.status).inc()
    failures = [t for t in tests if t.status != Verdict.ACCEPTED]
    return JudgeResponse(
        verdict=failures[0].status if failures else Verdict.ACCEPTED,
        passed=len(tests) - len(failures),
        total=len(cases),
        first_failure=failures[0].index if failures else None,
        compile=compile_info(compiled) if compiled is not None else None,
        tests=tests,
        duration_ms=round((time.monotonic() - started) * 1000, 2),
        request_id=request_id,
    )
