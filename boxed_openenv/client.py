"""A typed ``openenv-core`` client of the environment (WebSocket: one episode per socket)."""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from scorer.outcome import Failure

from .failures import DEFAULT_RETRY_AFTER, EnvUnavailable
from .models import CodeAction, CodeObservation, CodeState


class EnvServerError(RuntimeError):
    """The environment server answered an error message that carries no failure of boxed's:
    ``code`` is openenv-core's (``VALIDATION_ERROR``, ``CAPACITY_REACHED``...)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(f"{message} (code: {code})")
        self.message = message
        self.code = code


def error_of(data: dict[str, Any]) -> RuntimeError:
    """The exception for an error message's ``data``: :class:`EnvUnavailable` when it carries
    a failure (``frames.py``), else :class:`EnvServerError`."""
    message = str(data.get("message", "unknown error"))
    failure = data.get("failure")
    if isinstance(failure, dict) and "code" in failure:
        retry_after = data.get("retry_after")
        return EnvUnavailable(
            message,
            Failure.of(failure["code"]),
            retry_after if isinstance(retry_after, int | float) else DEFAULT_RETRY_AFTER,
        )
    return EnvServerError(message, str(data.get("code", "UNKNOWN")))


class BoxedEnvClient(EnvClient[CodeAction, CodeObservation, CodeState]):
    """``async with BoxedEnvClient(base_url=...) as env`` (or ``.sync()``), then
    ``reset(task={...})`` and ``step(CodeAction(...))``. A server error raises
    :class:`EnvUnavailable` (boxed unreachable or overloaded: no reward, ``failure`` says
    why) or :class:`EnvServerError`, never a bare ``RuntimeError``."""

    def _step_payload(self, action: CodeAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[CodeObservation]:
        obs = CodeObservation(
            **payload.get("observation", {}),
            reward=payload.get("reward"),
            done=payload.get("done", False),
        )
        return StepResult(observation=obs, reward=payload.get("reward"), done=obs.done)

    def _parse_state(self, payload: dict[str, Any]) -> CodeState:
        return CodeState(**payload)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        await self._send(message)
        response = await self._receive()
        if response.get("type") == "error":
            data = response.get("data")
            raise error_of(data if isinstance(data, dict) else {})
        return response
