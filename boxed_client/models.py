"""The wire: request and answer models of /execute, /judge, /score, /calculate and sessions.

Their one home is here, in the client's package: the server imports them (``exec_server.models``)
and adds only what depends on its own configuration (which languages it runs), so a client and
a server cannot disagree on a field. Pydantic only. Requests refuse unknown fields (a typo such
as ``timout`` must not run with the default); ``/score``'s record keys are free.
"""

from __future__ import annotations

import keyword
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from boxed_client.outcome import FailureCode, OutcomeKind
from boxed_client.status import Limit, Status

Isolation = Literal["container", "process"]
"""How a run is isolated: a fresh container of its own, or a fresh child process forked in a
pooled container (docs/process-mode.md)."""


IMAGE_DOC = (
    "The name of one of the server's images (GET /images); unset: 'default'. A name the "
    "server does not list is a 422."
)


class ExecuteRequest(BaseModel):
    """One snippet to run. Limits left unset take the server defaults; larger values are
    refused with 422 naming the server maximum."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    code: str = Field(min_length=1, description="Source code to run.")
    input: str = Field(default="", alias="stdin", description="Bytes fed to the program's stdin.")
    language: str = Field(
        default="python",
        description="'python', 'c', 'cpp' or 'bash' (aliases in GET /languages, any case).",
    )
    timeout: float | None = Field(default=None, gt=0, description="Wall-clock limit in seconds.")
    cpu_timeout: float | None = Field(
        default=None,
        gt=0,
        description="CPU-time limit of the snippet's processes in seconds (default: timeout).",
    )
    memory_mb: int | None = Field(default=None, gt=0, description="Memory limit in MiB.")
    isolation: Isolation | None = Field(
        default=None, description="Ask for 'container' (stricter) when the server runs 'process'."
    )
    image: str | None = Field(default=None, max_length=63, description=IMAGE_DOC)
    cache: bool = Field(
        default=False, description="Answer a stored result of the same request (docs/judging.md)."
    )
    files: dict[str, str] = Field(
        default_factory=dict, description="Input files: relative name -> base64 content."
    )
    fetch_files: list[str] = Field(
        default_factory=list, description="Files of the working directory to return after."
    )
    compile_timeout: float | None = Field(
        default=None, gt=0, description="Seconds for the compile step (c, cpp)."
    )

    @field_validator("input", mode="before")
    @classmethod
    def _null_input_is_empty(cls, value: Any) -> Any:
        """``"input": null`` is no input, as the server boxed replaces took it."""
        return "" if value is None else value

    @model_validator(mode="before")
    @classmethod
    def _input_or_stdin(cls, data: Any) -> Any:
        """Both spellings at once is ambiguous: say so, rather than call one unknown."""
        if isinstance(data, dict) and "input" in data and "stdin" in data:
            raise PydanticCustomError(
                "input_and_stdin", "give input or stdin (the same field), not both"
            )
        return data


class Truncated(BaseModel):
    stdout: bool = False
    stderr: bool = False


class CompileResult(BaseModel):
    """The compile step of a compiled language (its output stays in the sandbox)."""

    status: Status = Field(description="'ok', or how the compiler ended (error, timeout...).")
    exit_code: int | None
    stdout: str
    stderr: str
    message: str = Field(description="The compiler's output, with the limit's reason if any.")
    duration_ms: float
    cpu_ms: float | None = None
    peak_memory_kb: int | None = None
    reason: str | None = None


class FailureInfo(BaseModel):
    """Why an answer is not the code's verdict (docs/failures.md lists every code)."""

    code: FailureCode
    retryable: bool = Field(description="The same request sent again may succeed.")


OUTCOME_DOC = (
    "Whose result this is: 'code' (a reward may be paid from it), 'infrastructure' or "
    "'grader' (no reward: mask the sample)."
)


FETCH_STATUS = (
    "Every fetch_files name: ok (its content is in files), missing, or refused: why (a link, "
    "not a regular file, another file system, over the fetch cap); see docs/api.md."
)


class Attributed(BaseModel):
    """An answer that can feed a reward: whose result it is (docs/failures.md)."""

    outcome: OutcomeKind = Field(default=OutcomeKind.CODE, description=OUTCOME_DOC)
    failure: FailureInfo | None = Field(
        default=None, description="Why it is not the code's verdict; null when it is."
    )


class ExecuteResponse(Attributed):
    """What the code did. ``output``/``error`` mirror stdout/stderr for callers of the
    server this one replaces."""

    status: Status
    exit_code: int | None
    stdout: str
    stderr: str
    output: str
    error: str
    truncated: Truncated
    duration_ms: float
    request_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    limit: Limit | None = Field(default=None, description="The limit that ended the run.")
    reason: str | None = Field(default=None, description="Why, in one human line.")
    cpu_ms: float | None = Field(default=None, description="CPU time of its processes.")
    peak_memory_kb: int | None = Field(
        default=None, description="Peak resident memory of its main process."
    )
    compile: CompileResult | None = Field(
        default=None, description="The compile step (c, cpp); status compile_error if it failed."
    )
    cached: bool = Field(default=False, description="A stored answer: the code did not run now.")
    files: dict[str, str] = Field(
        default_factory=dict, description="The fetch_files found: name -> base64 content."
    )
    fetch_status: dict[str, str] = Field(default_factory=dict, description=FETCH_STATUS)


class SessionCreateRequest(BaseModel):
    """``POST /sessions``: the session's own limits, fixed for its life. Unset ones take the
    server defaults; larger ones are refused with 422 naming the server maximum."""

    model_config = ConfigDict(extra="forbid")

    language: str = Field(
        default="python",
        description="'python' (one persistent interpreter) or 'bash' (a shell: each call a "
        "fresh bash in the working directory and environment the call before left; also "
        "written 'sh' or 'shell', any case).",
    )
    memory_mb: int | None = Field(
        default=None, gt=0, description="Memory limit of the session's interpreter in MiB."
    )
    timeout: float | None = Field(
        default=None, gt=0, description="Default wall-clock limit of each call in seconds."
    )
    cpu_timeout: float | None = Field(
        default=None, gt=0, description="Default CPU-time limit of each call (default: timeout)."
    )
    idle_timeout: float | None = Field(
        default=None, gt=0, description="The session expires after this many idle seconds."
    )
    max_lifetime: float | None = Field(
        default=None, gt=0, description="The session expires this many seconds after creation."
    )
    image: str | None = Field(
        default=None, max_length=63, description=IMAGE_DOC + " Fixed for the session's life."
    )
    max_forks: int | None = Field(
        default=None,
        ge=0,
        description="Forks it may hold at once (POST /sessions/{id}/fork), its forks' included.",
    )


class SessionInfo(BaseModel):
    """An open session: its limits and the time it has left."""

    session_id: str
    language: str = Field(default="python", description="'python' or 'bash'.")
    state: Literal["idle", "busy"] = Field(description="'busy' while a call runs.")
    image: str = Field(default="default", description="The name of the session's image.")
    memory_mb: int
    timeout: float = Field(description="Default wall-clock limit of each call.")
    cpu_timeout: float | None = Field(description="Default CPU-time limit of each call.")
    idle_timeout: float
    max_lifetime: float
    calls: int = Field(description="Calls answered so far.")
    created_at: float = Field(description="Unix time of creation.")
    expires_in: float = Field(
        description="Seconds until it expires if no call comes: the idle time or the "
        "lifetime left, whichever is shorter."
    )
    lifetime_left: float = Field(description="Seconds until its maximum lifetime is reached.")
    forked_from: str | None = Field(
        default=None, description="The session this one is a fork of (POST .../fork)."
    )


class SessionExecuteResponse(ExecuteResponse):
    """``POST /sessions/{id}/execute``: what ``/execute`` answers, plus the session's time."""

    session_id: str
    expires_in: float = Field(description="As in SessionInfo, after this call.")
    lifetime_left: float
    session_lost: str | None = Field(
        default=None,
        description="Set when this call ended the session's interpreter (a limit, sys.exit, "
        "a crash): why. Every later call of the session answers 410 with it.",
    )


class SessionFileEntry(BaseModel):
    """One entry of a session's directory, as it is (a link is listed, never followed)."""

    name: str
    kind: Literal["file", "dir", "link", "other"]
    size: int = Field(description="A regular file's bytes; 0 for the other kinds.")


class SessionFileListing(BaseModel):
    """``GET /sessions/{id}/files?dir=...``: a directory of the session's working directory."""

    dir: str = Field(description="The directory listed, relative to the working directory.")
    entries: list[SessionFileEntry] = Field(description="In name order.")
    truncated: bool = Field(
        description="The directory holds more than BOXED_SESSION_LIST_MAX_ENTRIES entries: "
        "only that many are listed (which ones is not specified)."
    )


class CalculateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expr: str = Field(description="Arithmetic expression, e.g. 'sqrt(2)*pi'.")


class CalculateResponse(BaseModel):
    value: int | float | None
    error: str | None


class FieldError(BaseModel):
    """One problem of a request body, for programs (``detail`` says it all for people)."""

    loc: list[str | int] = Field(description="Where: 'body', then keys and list indices.")
    msg: str
    type: str = Field(description="Stable code, e.g. 'missing', 'extra_forbidden'.")


class ErrorResponse(BaseModel):
    """Body of every 4xx/5xx answer: one shape for all of them."""

    detail: str = Field(description="What went wrong, in one line for people.")
    errors: list[FieldError] = Field(
        default_factory=list, description="Each problem of the body; empty for other errors."
    )
    outcome: OutcomeKind | None = Field(
        default=None, description=OUTCOME_DOC + " Null for the caller's own mistake (4xx)."
    )
    failure: FailureInfo | None = Field(
        default=None, description="Why: the failure code and whether a retry may succeed."
    )


class ScoreRequest(BaseModel):
    """Body of ``POST /score``: one trajectory record in any supported format, with its gold
    (e.g. ``{"response": "...\\boxed{4}", "answer": 4}``), plus the grading options below.
    The record's own keys are free, so they are not checked here."""

    model_config = ConfigDict(extra="allow")

    preset: str | None = Field(default=None, description="'binary' (default) or 'interleaved'.")
    timeout: float | None = Field(default=None, description="Seconds per answer check.")
    question: str | None = Field(
        default=None,
        description="The question, optional: the form it asks for (a reduced fraction, in "
        "terms of pi, an order, an integer, a unit, a value not its own expression) is enforced.",
    )
    rewards: dict[str, float | None] | list[Any] | None = Field(
        default=None,
        description="Overrides: correct_reward, wrong_reward, format_reward, tool_bonus, "
        "timeout_reward (null or absent: a grader timeout has no reward; a list is a trace's "
        "own per-step rewards, not settings).",
    )


class ScoreBatchRequest(BaseModel):
    """Body of ``POST /score/batch``. Items are checked one by one: a bad item becomes an
    ``error`` row and does not fail the others."""

    model_config = ConfigDict(extra="forbid")

    items: list[Any] = Field(description="Trajectory records, each as ScoreRequest.")
    preset: str | None = Field(default=None, description="'binary' (default) or 'interleaved'.")
    timeout: float | None = Field(default=None, description="Seconds per answer check.")
    rewards: dict[str, float | None] | None = Field(
        default=None,
        description="Overrides: correct_reward, wrong_reward, format_reward, tool_bonus, "
        "timeout_reward (null or absent: a grader timeout has no reward).",
    )


class JudgeTest(BaseModel):
    """One test: ``input``/``expected_output`` (stdin/stdout) or ``args``/``expected`` (a call
    of ``fn_name``), with optional limits of its own."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(default="", description="The program's stdin.")
    expected_output: str | None = Field(default=None, description="Its expected stdout.")
    args: list[Any] | None = Field(default=None, description="Arguments of fn_name (JSON).")
    expected: Any = Field(default=None, description="fn_name's expected return value (JSON).")
    timeout: float | None = Field(default=None, gt=0, description="This test's wall limit.")
    cpu_timeout: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)


class JudgeRequest(BaseModel):
    """A submission and its tests (docs/judging.md): stdin/stdout tests, call-based tests
    (``fn_name``, Python), or one ``test_script`` run after the code in its interpreter."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(min_length=1)
    language: str = "python"
    tests: list[JudgeTest] = Field(default_factory=list)
    fn_name: str | None = Field(
        default=None,
        max_length=200,
        description="Call-based tests: the function (a Python identifier, not a keyword or a "
        "__dunder__ name).",
    )
    test_script: str | None = Field(
        default=None, description="Python run after the code (HumanEval's check); passes on exit 0."
    )
    entry_point: str | None = Field(
        default=None,
        max_length=200,
        description="With test_script: call check(<entry_point>) after it (an identifier, as "
        "fn_name).",
    )
    comparison: Literal["exact", "whitespace", "float", "lines", "checker"] = "whitespace"
    float_tolerance: float = Field(default=1e-6, ge=0)
    checker: str | None = Field(
        default=None,
        description="comparison 'checker': Python defining check(input, expected, actual) "
        "-> bool or (bool, message); run in the sandbox apart from the submission.",
    )
    timeout: float | None = Field(default=None, gt=0, description="Per-test wall limit.")
    cpu_timeout: float | None = Field(default=None, gt=0, description="Per-test CPU limit.")
    memory_mb: int | None = Field(default=None, gt=0, description="Per-test memory limit.")
    compile_timeout: float | None = Field(default=None, gt=0)
    stop_on_first_failure: bool = False
    files: dict[str, str] = Field(
        default_factory=dict, description="Input files of every test: name -> base64."
    )
    fetch_files: list[str] = Field(
        default_factory=list, description="Files returned after each test's run."
    )
    isolation: Isolation | None = None
    image: str | None = Field(default=None, max_length=63, description=IMAGE_DOC)
    cache: bool = Field(default=False, description="Answer a stored result of the same request.")

    @field_validator("fn_name", "entry_point")
    @classmethod
    def _a_function_name(cls, name: str | None) -> str | None:
        """The name is pasted into the test driver and looked up in the submission's
        namespace: only a plain identifier can be, and a dunder would reach the interpreter's
        own machinery (``__import__``, ``__class__``) instead of the submission's function."""
        if name is None:
            return None
        if not name.isidentifier() or not name.isascii():
            raise ValueError(f"{name[:40]!r} is not a Python identifier (letters, digits, _)")
        if keyword.iskeyword(name):
            raise ValueError(f"{name!r} is a Python keyword, not a function name")
        if name.startswith("__") and name.endswith("__"):
            raise ValueError(f"{name!r} is a __dunder__ name, not the submission's function")
        return name


class Difference(BaseModel):
    line: int = Field(description="1-based line of the actual output.")
    column: int
    expected: str
    actual: str
    note: str | None = None


class JudgeTestResult(BaseModel):
    index: int
    status: str = Field(
        description="accepted, wrong_answer, runtime_error, timeout, memory_limit, output_limit."
    )
    exit_code: int | None
    duration_ms: float
    cpu_ms: float | None
    peak_memory_kb: int | None
    stdout: str = Field(description="The program's output, cut to a short excerpt.")
    stderr: str = Field(description="Its stderr, cut to a short excerpt.")
    truncated: bool = Field(description="stdout or stderr was cut (here or by the output cap).")
    difference: Difference | None = None
    message: str | None = Field(default=None, description="A limit's reason, a checker's note.")
    files: dict[str, str] = Field(default_factory=dict, description="fetch_files found (base64).")
    fetch_status: dict[str, str] = Field(default_factory=dict, description=FETCH_STATUS)


class JudgeResponse(Attributed):
    verdict: str = Field(
        description="accepted, or the first failing test's status, or compile_error."
    )
    passed: int
    total: int
    first_failure: int | None = Field(description="Index of the first failing test.")
    compile: CompileResult | None = None
    tests: list[JudgeTestResult] = Field(description="The tests run, in order.")
    duration_ms: float
    request_id: str
    cached: bool = False


__all__ = [
    "Attributed",
    "CalculateRequest",
    "CalculateResponse",
    "CompileResult",
    "Difference",
    "ErrorResponse",
    "ExecuteRequest",
    "ExecuteResponse",
    "FETCH_STATUS",
    "FailureInfo",
    "FieldError",
    "Isolation",
    "JudgeRequest",
    "JudgeResponse",
    "JudgeTest",
    "JudgeTestResult",
    "OUTCOME_DOC",
    "ScoreBatchRequest",
    "ScoreRequest",
    "SessionCreateRequest",
    "SessionExecuteResponse",
    "SessionFileEntry",
    "SessionFileListing",
    "SessionInfo",
    "Truncated",
]
