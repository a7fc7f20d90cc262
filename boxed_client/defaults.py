"""The service's default limits, as the client plans its waits around them.

One home for the numbers both sides use: the server's settings and the scorer take their
defaults from here, so the client's read timeouts cannot drift from what the server applies.
Stdlib only.
"""

from __future__ import annotations

RUN_TIMEOUT = 5.0
"""Seconds of wall-clock time a snippet (or a judged test) gets when its request states none."""

COMPILE_TIMEOUT = 15.0
"""Seconds a compile step (c, cpp) gets when its request states none."""

SCORE_TIMEOUT = 5.0
"""Seconds one answer check may spend in sympy unless told otherwise (CLI, API, rewards)."""

RETRY_MARGIN = 5.0
"""Seconds the server's one retry of a run whose sandbox was lost may take beyond the run's own
wall limit: one ``/execute`` answer may take ``2 * timeout + RETRY_MARGIN``."""

__all__ = ["COMPILE_TIMEOUT", "RETRY_MARGIN", "RUN_TIMEOUT", "SCORE_TIMEOUT"]
