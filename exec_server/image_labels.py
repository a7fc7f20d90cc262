"""What the sandbox image's labels say about it: the Python and package versions it was built
with (written by ``tools/build_image.py`` through the Dockerfile, read back for ``/readyz``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

PYTHON_LABEL = "boxed.python"
PACKAGES_LABEL = "boxed.packages"


def sandbox_versions(labels: Mapping[str, str] | None) -> dict[str, Any]:
    """The sandbox's Python and package versions as its image's labels record them, e.g.
    ``{"python": "3.11.2", "packages": {"mpmath": "1.3.0", "numpy": "2.4.6", ...}}``, for the
    service to report. ``None`` for what the labels do not say (an image built before they
    existed, or by another Dockerfile): unknown, never guessed."""
    labels = labels or {}
    python = labels.get(PYTHON_LABEL) or None
    packages = None
    try:
        parsed = json.loads(labels.get(PACKAGES_LABEL) or "null")
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in parsed.items()
    ):
        packages = dict(sorted(parsed.items()))
    return {"python": python, "packages": packages}
