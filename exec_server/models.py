"""Request and response schemas of the HTTP API (pydantic only).

The wire models a client reads (/execute, /judge, /score, /calculate, sessions, errors) live in
:mod:`boxed_client.models` and are imported from there, one home for both sides; this module
adds the server's own checks (the language must be one this server runs) as subclasses, and the
schemas of the routes only the server speaks (batches, SandboxFusion's /run_code, /languages,
health). Every schema of every route is reachable here, so ``/openapi.json`` reads one
definition.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from boxed_client import models as wire
from boxed_client.models import (
    FETCH_STATUS,
    OUTCOME_DOC,
    Attributed,
    CalculateRequest,
    CalculateResponse,
    CompileResult,
    Difference,
    ErrorResponse,
    ExecuteResponse,
    FailureInfo,
    FieldError,
    JudgeResponse,
    JudgeTest,
    JudgeTestResult,
    ScoreBatchRequest,
    ScoreRequest,
    SessionExecuteResponse,
    SessionFileEntry,
    SessionFileListing,
    SessionInfo,
    Truncated,
)

# The scorer owns the graded row; the HTTP layer re-exports it (one home, one line to change).
from scorer.api import ScoreBatchResponse
from scorer.outcome import OutcomeKind
from scorer.row import GradedRow as ScoreRow

from .languages import SPELLINGS as LANGUAGES
from .languages import normalize
from .verdict import Status


def language_name(value: str) -> str:
    """The one name of a language spelling; a clear error naming the supported ones."""
    name = normalize(value)
    if name is None:
        supported = ", ".join(sorted(set(LANGUAGES.values())))
        aliases = ", ".join(a for a in LANGUAGES if a not in LANGUAGES.values())
        raise PydanticCustomError(
            "language",
            "{language} is not supported; supported: {supported} "
            "(also written {aliases}, any case)",
            {"language": repr(value), "supported": supported, "aliases": aliases},
        )
    return name


class ExecuteRequest(wire.ExecuteRequest):
    """One snippet to run. Limits left unset take the server defaults; larger values are
    refused with 422 naming the server maximum."""

    @field_validator("language")
    @classmethod
    def _one_name_per_language(cls, value: str) -> str:
        """Normalize the aliases here, so the engine only ever sees a supported name."""
        return language_name(value)


SESSION_LANGUAGES = ("python", "bash")


class SessionCreateRequest(wire.SessionCreateRequest):
    """``POST /sessions``: the session's language and its own limits, fixed for its life."""

    @field_validator("language")
    @classmethod
    def _a_session_language(cls, value: str) -> str:
        """One name per language, and only those a session can run."""
        name = language_name(value)
        if name not in SESSION_LANGUAGES:
            raise PydanticCustomError(
                "language",
                "sessions run {supported}, not {language}",
                {"supported": " or ".join(SESSION_LANGUAGES), "language": repr(value)},
            )
        return name


class JudgeRequest(wire.JudgeRequest):
    """A submission and its tests (docs/judging.md): stdin/stdout tests, call-based tests
    (``fn_name``, Python), or one ``test_script`` run after the code in its interpreter."""

    @field_validator("language")
    @classmethod
    def _one_name_per_language(cls, value: str) -> str:
        return language_name(value)


class ExecuteBatchRequest(BaseModel):
    """Several snippets at once; each item is validated on its own so one bad item fails
    only itself."""

    model_config = ConfigDict(extra="forbid")

    # dict[Any, Any]: an item's keys are checked with the item, so one bad key fails only it
    items: list[dict[Any, Any]] = Field(description="ExecuteRequest objects.")


class ItemError(BaseModel):
    """Why one item of a batch has no result: the body ``/execute`` would have answered."""

    status_code: int = Field(description="The HTTP status this item would have had alone.")
    detail: str
    errors: list[FieldError] = Field(default_factory=list)
    outcome: OutcomeKind | None = Field(default=None, description=OUTCOME_DOC)
    failure: FailureInfo | None = None


class ExecuteBatchItemError(BaseModel):
    error: ItemError


class ExecuteBatchResponse(BaseModel):
    results: list[ExecuteResponse | ExecuteBatchItemError]


class RunCodeRequest(BaseModel):
    """The subset of SandboxFusion's ``POST /run_code`` that verl and SkyRL send."""

    model_config = ConfigDict(extra="ignore")

    code: str = Field(min_length=1)
    language: str = "python"
    stdin: str | None = ""
    run_timeout: float | None = Field(default=None, gt=0, description="Seconds.")
    compile_timeout: float | None = Field(default=None, gt=0, description="Seconds (c, cpp).")
    memory_limit_MB: int | None = Field(default=None, description="-1 or absent: the default.")
    files: dict[str, Any] = Field(default_factory=dict, description="name -> base64 content.")
    fetch_files: list[str] = Field(default_factory=list, description="Files to return after.")
    cache: bool = Field(default=False, description="boxed's own: answer a stored result.")
    image: str | None = Field(default=None, max_length=63, description=wire.IMAGE_DOC)


class RunResult(BaseModel):
    status: Literal["Finished", "TimeLimitExceeded", "Error"]
    execution_time: float | None
    return_code: int | None
    stdout: str
    stderr: str


class RunCodeResponse(Attributed):
    status: Literal["Success", "Failed", "SandboxError"]
    message: str
    compile_result: RunResult | None = None
    run_result: RunResult | None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    fetch_status: dict[str, str] = Field(default_factory=dict, description=FETCH_STATUS)
    boxed_status: Status = Field(description="boxed's own verdict for the snippet.")
    cached: bool = Field(default=False, description="boxed's own: a stored answer.")


class LanguageInfo(BaseModel):
    """One language of ``GET /languages``."""

    name: str
    aliases: list[str]
    version: str
    source_file: str | None = Field(description="The file the code is written to, if any.")
    compile_command: str | None = Field(description="Run in the sandbox; None: not compiled.")
    run_command: str


class LanguagesResponse(BaseModel):
    languages: list[LanguageInfo]


class ImageLimits(BaseModel):
    memory_mb_max: int
    timeout_max: float


class ImageInfo(BaseModel):
    """One image of ``GET /images``."""

    name: str = Field(description="What a request gives as `image`.")
    default: bool = Field(description="The image of requests that name none.")
    reference: str = Field(description="The image the operator listed (tag or id).")
    image_id: str | None = Field(description="The id its sandboxes are made from (checked).")
    available: bool = Field(description="It serves sandboxes now.")
    problem: str | None = Field(description="Why it does not (not checked yet, refused...).")
    versions: dict[str, Any] = Field(
        description="Python and package versions its labels record (null: not recorded)."
    )
    adds: dict[str, Any] | None = Field(
        description="What a derived image adds to its base (apt, pip, files), from its label."
    )
    limits: ImageLimits
    pool_size: int = Field(description="Warm sandboxes kept for it (0: made when asked for).")
    session_pool_size: int = Field(
        description="Warm session sandboxes it asks for (0: each session starts its own)."
    )
    setuid_files: int | None = Field(
        description="Set-uid/set-gid files found by its check, inert under no-new-privileges."
    )


class ImagesResponse(BaseModel):
    images: list[ImageInfo]


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    """``GET /readyz``: ``ready`` and what it is made of (the engine may report more)."""

    model_config = ConfigDict(extra="allow")

    ready: bool


__all__ = [
    "CalculateRequest",
    "CalculateResponse",
    "CompileResult",
    "Difference",
    "ErrorResponse",
    "ExecuteBatchItemError",
    "ExecuteBatchRequest",
    "ExecuteBatchResponse",
    "ExecuteRequest",
    "ExecuteResponse",
    "FieldError",
    "Health",
    "ImageInfo",
    "ImageLimits",
    "ImagesResponse",
    "ItemError",
    "JudgeRequest",
    "JudgeResponse",
    "JudgeTest",
    "JudgeTestResult",
    "LanguageInfo",
    "LanguagesResponse",
    "Readiness",
    "RunCodeRequest",
    "RunCodeResponse",
    "RunResult",
    "ScoreBatchRequest",
    "ScoreBatchResponse",
    "ScoreRequest",
    "ScoreRow",
    "SessionCreateRequest",
    "SessionExecuteResponse",
    "SessionFileEntry",
    "SessionFileListing",
    "SessionInfo",
    "Truncated",
]
