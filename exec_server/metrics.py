"""Prometheus metrics of the service (process-wide, so several apps in one process share them)."""

from __future__ import annotations

from functools import lru_cache

from prometheus_client import Counter, Gauge, Histogram

from .verdict import Limit, SnippetResult, Status

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

REQUESTS = Counter(
    "boxed_requests_total", "Answered requests by route and outcome.", ["route", "status"]
)
QUEUE_SECONDS = Histogram(
    "boxed_queue_seconds",
    "Time a snippet waited for a slot and a sandbox.",
    buckets=_LATENCY_BUCKETS,
)
RUN_SECONDS = Histogram("boxed_run_seconds", "Time a snippet's code ran.", buckets=_LATENCY_BUCKETS)
TOTAL_SECONDS = Histogram(
    "boxed_request_seconds", "Whole request time of /execute.", buckets=_LATENCY_BUCKETS
)
IN_FLIGHT = Gauge("boxed_in_flight", "Snippets running now.")
QUEUED = Gauge("boxed_queued", "Requests waiting for a slot.")
POOL_READY = Gauge("boxed_pool_ready", "Warm sandboxes ready for code.", ["backend"])
SANDBOXES_CREATED = Counter("boxed_sandboxes_created_total", "Sandboxes made warm.", ["backend"])
SANDBOXES_REMOVED = Counter("boxed_sandboxes_removed_total", "Sandboxes removed.", ["backend"])
ORPHANS_REMOVED = Counter("boxed_orphans_removed_total", "Leftover sandboxes reaped.")
OOM_KILLS = Counter("boxed_oom_kills_total", "Snippets stopped by the memory limit.")
TIMEOUTS = Counter("boxed_timeouts_total", "Snippets stopped at a time limit, by limit.", ["limit"])
CPU_SECONDS = Histogram(
    "boxed_cpu_seconds", "CPU time a snippet's processes used.", buckets=_LATENCY_BUCKETS
)
SANDBOX_ERRORS = Counter("boxed_sandbox_errors_total", "Infrastructure failures while running.")
SANDBOX_RETRIES = Counter(
    "boxed_sandbox_retries_total", "Runs tried again on a fresh sandbox after theirs was lost."
)
BACKEND_UP = Gauge("boxed_backend_up", "1 when the backend's engine answers.", ["backend"])
SESSIONS_OPEN = Gauge("boxed_sessions_open", "Sessions open now (each holds its sandbox).")
SESSIONS_CREATED = Counter("boxed_sessions_created_total", "Sessions created.")
SESSIONS_EXPIRED = Counter(
    "boxed_sessions_expired_total", "Sessions removed at their idle or lifetime limit.", ["limit"]
)
SESSIONS_LOST = Counter(
    "boxed_sessions_lost_total",
    "Sessions whose interpreter a call ended or a limit killed, by verdict.",
    ["status"],
)
SESSION_POOL_READY = Gauge(
    "boxed_session_pool_ready", "Warm session sandboxes ready to hand out, by image.", ["image"]
)
SESSION_SANDBOXES = Counter(
    "boxed_session_sandboxes_total",
    "Sandboxes sessions were created with: warm (from the pool) or cold (started for it).",
    ["start"],
)
JUDGE_TESTS = Counter("boxed_judge_tests_total", "Tests judged, by status.", ["status"])
RESULT_CACHE = Counter(
    "boxed_result_cache_total",
    "Answers by how they were had: ran, hit (cache), joined (in flight), replayed (same id).",
    ["route", "outcome"],
)
COMPILE_CACHE = Counter(
    "boxed_compile_cache_total",
    "Compile cache look-ups and stores: hit, miss, rejected (its bytes changed), stored.",
    ["outcome"],
)
RESULT_CACHE_ENTRIES = Gauge("boxed_result_cache_entries", "Answers kept in the result cache.")


@lru_cache(maxsize=4096)
def counter(metric: Counter, *labels: str) -> Counter:
    """``metric.labels(*labels)``, looked up once: ``labels`` takes a lock and normalises its
    values on every call (labels are few: routes and verdicts)."""
    return metric.labels(*labels)


def count_request(route: str, status: str) -> None:
    """One answered request of ``route``, by its status (a verdict or an HTTP status)."""
    counter(REQUESTS, route, status).inc()


def count_compile_cache(outcome: str) -> None:
    """One compile cache look-up's or store's outcome."""
    counter(COMPILE_CACHE, outcome).inc()


def observe_run(result: SnippetResult) -> None:
    """Count one run's time, CPU and the limit that ended it (one-shot and session calls)."""
    RUN_SECONDS.observe(result.duration_ms / 1000)
    if result.cpu_ms is not None:
        CPU_SECONDS.observe(result.cpu_ms / 1000)
    if result.status is Status.TIMEOUT and result.limit is not None:
        TIMEOUTS.labels(result.limit.value).inc()
    elif result.limit is Limit.MEMORY:
        OOM_KILLS.inc()
