"""Answer shaping: a run's ``SnippetResult`` (bytes, the verdict) as the ``ExecuteResponse`` and
``CompileResult`` callers read (text, the reason line, the files out), the same for every use
case that answers a run."""

from __future__ import annotations

from .files import encoded
from .models import CompileResult, ExecuteResponse, Truncated
from .verdict import SnippetResult, Status


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def compile_info(result: SnippetResult) -> CompileResult:
    """The compile step as answered (its status: ``ok``, or how the compiler failed)."""
    message = _text(result.stdout) + _text(result.stderr)
    if result.reason:
        message += f"{'' if not message or message.endswith(chr(10)) else chr(10)}"
        message += f"boxed: compilation stopped: {result.reason}"
    return CompileResult(
        status=result.status,
        exit_code=result.exit_code,
        stdout=_text(result.stdout),
        stderr=_text(result.stderr),
        message=message,
        duration_ms=result.duration_ms,
        cpu_ms=result.cpu_ms,
        peak_memory_kb=result.max_rss_kb,
        reason=result.reason,
    )


def compile_error_response(compiled: SnippetResult, request_id: str) -> ExecuteResponse:
    """``compile_error``: the program never ran; ``error`` holds the compiler's message."""
    info = compile_info(compiled)
    return ExecuteResponse(
        status=Status.COMPILE_ERROR,
        exit_code=None,
        stdout="",
        stderr="",
        output="",
        error=info.message,
        truncated=Truncated(),
        duration_ms=0.0,
        request_id=request_id,
        reason="compilation failed",
        compile=info,
    )


def to_response(result: SnippetResult, request_id: str) -> ExecuteResponse:
    """The HTTP answer. ``error`` (what callers of the old server show the model) ends with the
    reason line when a limit ended the run; ``stderr`` is exactly what the program wrote."""
    stdout, stderr = _text(result.stdout), _text(result.stderr)
    error = stderr
    if result.reason:
        error = f"{stderr}{'' if not stderr or stderr.endswith(chr(10)) else chr(10)}"
        error += f"boxed: {result.reason}"
    return ExecuteResponse(
        status=result.status,
        exit_code=result.exit_code,
        stdout=stdout,
        stderr=stderr,
        output=stdout,
        error=error,
        truncated=Truncated(stdout=result.truncated_stdout, stderr=result.truncated_stderr),
        duration_ms=result.duration_ms,
        request_id=request_id,
        limit=result.limit,
        reason=result.reason,
        cpu_ms=result.cpu_ms,
        peak_memory_kb=result.max_rss_kb,
        files=encoded(result.files),
        fetch_status=result.fetch_status,
    )
