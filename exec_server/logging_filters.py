"""A quiet access log: container healthchecks (every 5 s under compose) do not write a line each.

A probe that succeeds tells an operator nothing; a failing one (``/readyz`` answering 503 while
the sandbox image is missing, say) still gets its line, like every other request.
``BOXED_ACCESS_LOG`` says which others do: ``all`` (the default), ``errors`` (answers of 400 and
above: what the caller or the service got wrong; an RL step's thousands of snippets answered
200 are counted in ``/metrics`` instead) or ``off`` (uvicorn then makes no record at all).
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Literal

AccessLog = Literal["all", "errors", "off"]

PROBE_PATHS = frozenset({"/healthz", "/readyz"})


class QuietProbes(logging.Filter):
    """Drops uvicorn access-log records of ``/healthz`` and ``/readyz`` answered below 400, and
    with ``errors_only`` those of every request answered below 400.

    uvicorn logs each request as ``'%s - "%s %s HTTP/%s" %d'`` with the arguments (client,
    method, path with query string, HTTP version, status code); any other record passes.
    """

    def __init__(self, errors_only: bool = False) -> None:
        super().__init__()
        self.errors_only = errors_only

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        path, status = args[2], args[4]
        if not isinstance(path, str) or not isinstance(status, int) or status >= 400:
            return True
        return not (self.errors_only or path.partition("?")[0] in PROBE_PATHS)


LOG_FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)-8s %(name)s %(message)s"
LOG_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"
"""Every line of the service's log, its own and uvicorn's: a UTC timestamp to the millisecond
(an outage is read against a trainer's own log), the level, the logger, the message."""


def uvicorn_log_config(access: AccessLog = "all") -> dict[str, Any]:
    """uvicorn's default logging configuration, with :class:`QuietProbes` on its access log
    (``access``: ``BOXED_ACCESS_LOG``; ``off`` is uvicorn's own ``access_log=False``) and the
    service's timestamped line format on every handler."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    quiet = {"()": QuietProbes, "errors_only": access == "errors"}
    config.setdefault("filters", {})["quiet_probes"] = quiet
    config["loggers"]["uvicorn.access"]["filters"] = ["quiet_probes"]
    for name, formatter in config["formatters"].items():
        request = '%(client_addr)s - "%(request_line)s" %(status_code)s'
        line = request if name == "access" else "%(message)s"
        formatter["fmt"] = LOG_FORMAT.replace("%(message)s", line)
        formatter["datefmt"] = LOG_DATE_FORMAT
        formatter["use_colors"] = False
    return config
