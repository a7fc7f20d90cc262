"""An OpenEnv environment whose code runs in boxed sessions (``pip install boxed[openenv]``).

``reset()`` opens a boxed session (optionally with a task: a prompt and a gold answer or
tests), ``step()`` runs the action's code in it, ``close()`` deletes it. The reward comes from
the scorer, for a final answer given in the action's own ``answer`` field, never from text
the code prints, and never for a failure that is not the code's (``reward=None``, with
``outcome`` and ``failure`` saying why). Served by ``openenv-core``'s own server app:
``python -m boxed_openenv``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .failures import EnvUnavailable
    from .models import CodeAction, CodeObservation, CodeState, Task

__all__ = ["CodeAction", "CodeObservation", "CodeState", "EnvUnavailable", "Task"]
_HOME = {
    "CodeAction": ".models",
    "CodeObservation": ".models",
    "CodeState": ".models",
    "Task": ".models",
    "EnvUnavailable": ".failures",
}
EXTRA_MISSING = (
    "boxed_openenv needs the openenv extra ({missing} is missing): pip install 'boxed[openenv]' "
    "(from a checkout: pip install -e '.[openenv]')"
)


def __getattr__(name: str) -> Any:
    """The public names, imported on first use: importing the package itself needs no
    ``openenv-core``, so ``python -m boxed_openenv`` can say which extra is missing."""
    if name not in _HOME:
        raise AttributeError(f"module 'boxed_openenv' has no attribute {name!r}")
    try:
        module = importlib.import_module(_HOME[name], __name__)
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("openenv"):
            raise
        raise ModuleNotFoundError(EXTRA_MISSING.format(missing=exc.name), name=exc.name) from exc
    return getattr(module, name)
