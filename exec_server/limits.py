"""A request's limits resolved against the settings: the server's defaults filled in, its maxima
enforced (a 413 or 422 ``RequestError`` names the field), before anything runs."""

from __future__ import annotations

from .models import ExecuteRequest
from .request_errors import RequestError
from .settings import MIN_MEMORY_MB, Settings
from .verdict import RunLimits


def resolve_limits(req: ExecuteRequest, settings: Settings) -> RunLimits:
    """The request's limits, with defaults applied and maxima enforced (the language was
    checked by the request model)."""
    code_bytes = len(req.code.encode("utf-8", "surrogatepass"))
    if code_bytes > settings.max_code_bytes:
        raise RequestError(
            413, f"code is {code_bytes} bytes; the maximum is {settings.max_code_bytes}", "code"
        )
    input_bytes = len(req.input.encode("utf-8", "surrogatepass"))
    if input_bytes > settings.max_input_bytes:
        raise RequestError(
            413,
            f"input is {input_bytes} bytes; the maximum is {settings.max_input_bytes}",
            "input",
        )
    timeout = req.timeout if req.timeout is not None else settings.timeout_default
    if timeout > settings.timeout_max:
        raise RequestError(
            422, f"timeout {timeout:g} s exceeds the maximum {settings.timeout_max:g} s", "timeout"
        )
    cpu = req.cpu_timeout if req.cpu_timeout is not None else settings.cpu_timeout_default
    cpu = timeout if cpu is None else cpu
    if cpu > settings.timeout_max:
        raise RequestError(
            422,
            f"cpu_timeout {cpu:g} s exceeds the maximum {settings.timeout_max:g} s",
            "cpu_timeout",
        )
    memory = req.memory_mb if req.memory_mb is not None else settings.memory_mb_default
    if memory > settings.memory_mb_max:
        maximum = settings.memory_mb_max
        raise RequestError(422, f"memory_mb {memory} exceeds the maximum {maximum}", "memory_mb")
    if memory < MIN_MEMORY_MB:
        raise RequestError(422, f"memory_mb must be at least {MIN_MEMORY_MB}", "memory_mb")
    return RunLimits(
        wall_seconds=timeout,
        cpu_seconds=cpu,
        memory_mb=memory,
        output_bytes=settings.output_max_bytes,
    )


def resolve_compile_limits(timeout: float | None, settings: Settings) -> RunLimits:
    """The compile step's limits: its own time (CPU as wall) and memory, the output cap."""
    seconds = timeout if timeout is not None else settings.compile_timeout_default
    if seconds > settings.compile_timeout_max:
        raise RequestError(
            422,
            f"compile_timeout {seconds:g} s exceeds the maximum {settings.compile_timeout_max:g} s",
            "compile_timeout",
        )
    return RunLimits(
        wall_seconds=seconds,
        cpu_seconds=seconds,
        memory_mb=settings.compile_memory_mb,
        output_bytes=settings.output_max_bytes,
    )
