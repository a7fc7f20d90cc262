"""A typed ``openenv-core`` client of the environment (WebSocket: one episode per socket)."""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from .models import CodeAction, CodeObservation, CodeState


class BoxedEnvClient(EnvClient[CodeAction, CodeObservation, CodeState]):
    """``async with BoxedEnvClient(base_url=...) as env`` (or ``.sync()``), then
    ``reset(task={...})`` and ``step(CodeAction(...))``."""

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
