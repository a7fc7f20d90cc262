"""Prometheus metrics of the service (process-wide, so several apps in one process share them)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
POOL_READY = Gauge("boxed_pool_ready", "Warm sandboxes ready for code.")
CONTAINERS_CREATED = Counter("boxed_containers_created_total", "Sandbox containers started.")
CONTAINERS_REMOVED = Counter("boxed_containers_removed_total", "Sandbox containers removed.")
ORPHANS_REMOVED = Counter("boxed_orphans_removed_total", "Leftover containers reaped.")
OOM_KILLS = Counter("boxed_oom_kills_total", "Snippets stopped by the memory limit.")
TIMEOUTS = Counter("boxed_timeouts_total", "Snippets stopped at the wall-clock limit.")
SANDBOX_ERRORS = Counter("boxed_sandbox_errors_total", "Infrastructure failures while running.")
DOCKER_UP = Gauge("boxed_docker_up", "1 when the Docker engine answers.")
