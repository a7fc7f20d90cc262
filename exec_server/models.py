"""Request and response schemas of the HTTP API (pydantic only, shared with the client)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .settings import Isolation
from .verdict import Limit, Status


class ExecuteRequest(BaseModel):
    """One snippet to run. Limits left unset take the server defaults; larger values are
    refused with 422 naming the server maximum."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    code: str = Field(min_length=1, description="Source code to run.")
    input: str = Field(default="", alias="stdin", description="Bytes fed to the program's stdin.")
    language: str = Field(default="python", description="Only 'python' is supported.")
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


class Truncated(BaseModel):
    stdout: bool = False
    stderr: bool = False


class ExecuteResponse(BaseModel):
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


class CalculateRequest(BaseModel):
    expr: str = Field(description="Arithmetic expression, e.g. 'sqrt(2)*pi'.")


class CalculateResponse(BaseModel):
    value: int | float | None
    error: str | None


class ErrorResponse(BaseModel):
    """Body of every 4xx/5xx answer."""

    detail: str | list


class ExecuteBatchRequest(BaseModel):
    """Several snippets at once; each item is validated on its own so one bad item fails
    only itself."""

    items: list[dict[str, Any]] = Field(description="ExecuteRequest objects.")


class ItemError(BaseModel):
    status_code: int = Field(description="The HTTP status this item would have had alone.")
    detail: Any


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
    memory_limit_MB: int | None = Field(default=None, description="-1 or absent: the default.")
    files: dict[str, Any] = Field(default_factory=dict, description="Not supported; must be empty.")


class RunResult(BaseModel):
    status: Literal["Finished", "TimeLimitExceeded", "Error"]
    execution_time: float | None
    return_code: int | None
    stdout: str
    stderr: str


class RunCodeResponse(BaseModel):
    status: Literal["Success", "Failed", "SandboxError"]
    message: str
    compile_result: None = None
    run_result: RunResult | None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    boxed_status: Status = Field(description="boxed's own verdict for the snippet.")
