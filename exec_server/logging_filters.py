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


LOG_FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)-8s %(name)s %(message)s"
LOG_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"
"""Every line of the service's log, its own and uvicorn's: a UTC timestamp to the millisecond
(an outage is read against a trainer's own log), the level, the logger, the message."""


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration, with :class:`QuietProbes` on its access log
    and the service's timestamped line format on every handler."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["quiet_probes"] = {"()": QuietProbes}
    config["loggers"]["uvicorn.access"]["filters"] = ["quiet_probes"]
    for name, formatter in config["formatters"].items():
        access = name == "access"
        line = '%(client_addr)s - "%(request_line)s" %(status_code)s' if access else "%(message)s"
        formatter["fmt"] = LOG_FORMAT.replace("%(message)s", line)
        formatter["datefmt"] = LOG_DATE_FORMAT
        formatter["use_colors"] = False
    return config
