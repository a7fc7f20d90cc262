"""An OpenEnv environment whose code runs in boxed sessions (``pip install boxed[openenv]``).

``reset()`` opens a boxed session (optionally with a task: a prompt and a gold answer or
tests), ``step()`` runs the action's code in it, ``close()`` deletes it. The reward comes from
the scorer, for a final answer given in the action's own ``answer`` field, never from text
the code prints, and never for a failure that is not the code's (``reward=None``, with
``outcome`` and ``failure`` saying why). Served by ``openenv-core``'s own server app:
``python -m boxed_openenv``.
"""

from __future__ import annotations

from .failures import EnvUnavailable
from .models import CodeAction, CodeObservation, CodeState, Task

__all__ = ["CodeAction", "CodeObservation", "CodeState", "EnvUnavailable", "Task"]
