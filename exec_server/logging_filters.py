"""A quiet access log: container healthchecks (every 5 s under compose) do not write a line each.

A probe that succeeds tells an operator nothing; a failing one (``/readyz`` answering 503 while
the sandbox image is missing, say) still gets its line, like every other request.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

PROBE_PATHS = frozenset({"/healthz", "/readyz"})


class QuietProbes(logging.Filter):
    """Drops uvicorn access-log records of ``/healthz`` and ``/readyz`` answered below 400.

    uvicorn logs each request as ``'%s - "%s %s HTTP/%s" %d'`` with the arguments (client,
    method, path with query string, HTTP version, status code); any other record passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        path, status = args[2], args[4]
        if not isinstance(path, str) or not isinstance(status, int):
            return True
        return not (path.partition("?")[0] in PROBE_PATHS and status < 400)


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration, with :class:`QuietProbes` on its access log."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["quiet_probes"] = {"()": QuietProbes}
    config["loggers"]["uvicorn.access"]["filters"] = ["quiet_probes"]
    return config
