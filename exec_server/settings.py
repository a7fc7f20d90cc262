"""Service settings, read from ``BOXED_*`` environment variables.

Every per-request limit has a default (used when the request leaves it out) and a server-side
maximum (a request asking for more gets 422 naming the maximum).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from boxed_client.defaults import COMPILE_TIMEOUT, RUN_TIMEOUT
from boxed_client.models import Isolation

from .logging_filters import AccessLog

# A snippet's memory limit below this cannot even start the interpreter with its runner.
MIN_MEMORY_MB = 64
COMPILE_CACHE_MB_MAX = 4096  # the compile cache lives in the service's memory
# The sandbox uids: 0x70000000 + 64 Ki, above useradd's subordinate ids (SUB_UID_MAX
# 600100000) and systemd's container ranges (524288-1879048191), below 2**31 (docs/settings.md).
SANDBOX_UIDS = "1879048192-1879113727"
MAX_SANDBOX_UID = 2**31 - 2  # larger ids break tools that read them signed
MAX_SANDBOX_UIDS = 1 << 20  # uids in the range at most
SESSION_POOL_MAX = 16  # warm session sandboxes per image at most
SESSION_FILE_MAX_BYTES = 1 << 30  # the largest BOXED_SESSION_FILE_MAX_BYTES allowed
SESSION_LIST_MAX_ENTRIES = 100_000  # the largest BOXED_SESSION_LIST_MAX_ENTRIES allowed


@dataclass(frozen=True)
class UidRange:
    """An inclusive range of host uids (``BOXED_SANDBOX_UIDS``: ``first-last`` or one uid)."""

    first: int
    last: int

    @classmethod
    def parse(cls, text: str) -> UidRange:
        first, _, last = text.partition("-")
        return cls(int(first), int(last or first))

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"

    def __len__(self) -> int:
        return self.last - self.first + 1

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, int) and self.first <= uid <= self.last


def available_cores() -> int:
    """Cores this process may run on: the default number of snippets run at once, so that a
    CPU-bound snippet gets a whole core however loaded the service is."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return max(os.cpu_count() or 1, 1)


def _share(limit: int) -> int:
    """A tenant's default quota of a global limit: three quarters, rounded up, so one tenant
    alone loses little and a quarter stays for the others."""
    return -(-limit * 3 // 4)


class Settings(BaseSettings):
    # compose passes unset variables as "": those take the default
    model_config = SettingsConfigDict(env_prefix="BOXED_", extra="ignore", env_ignore_empty=True)

    # HTTP
    host: str = Field(default="127.0.0.1", description="Address the service listens on.")
    port: int = Field(default=5002, description="Port the service listens on.")
    access_log: AccessLog = Field(
        default="all",
        description="Which requests get an access-log line: 'all' (successful /healthz and "
        "/readyz probes excepted), 'errors' (answers of 400 and above only), or 'off'. Every "
        "request is counted in /metrics whatever this says; a line costs the service about "
        "0.1-0.2 ms of CPU (docs/benchmarks.md).",
    )
    api_key: str | None = Field(default=None, description="If set, required as a Bearer token.")
    tenant_keys: dict[str, str] | None = Field(
        default=None,
        description="Per-tenant API keys, a JSON object tenant -> key: a request sent with a "
        "tenant's key is that tenant's (an X-Boxed-Tenant naming another is 403), and a key is "
        "then required. Unset: tenants are self-declared (docs/api.md#tenants).",
    )
    tenant_keys_file: str | None = Field(
        default=None,
        description="File holding the BOXED_TENANT_KEYS JSON object (a mounted secret); its "
        "tenants join those of BOXED_TENANT_KEYS.",
    )
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024, description="Largest request body; more: 413, before it is read."
    )
    max_code_bytes: int = Field(default=256 * 1024, description="Largest `code` field; more: 413.")
    max_input_bytes: int = Field(
        default=1024 * 1024, description="Largest `input` field; more: 413."
    )
    max_batch_items: int = Field(
        default=256, description="Most items in one /execute/batch or /score/batch; more: 422."
    )

    grading_workers: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Worker processes that grade (/score, /score/batch) and evaluate "
        "/calculate, off the event loop (at most 64).",
    )
    score_deadline: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="Wall-clock seconds one /score item (parsing and every answer check of it) "
        "may take; past it the item is a grader_timeout row without reward (at most 600).",
    )
    calculate_deadline: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description="Wall-clock seconds one /calculate may take in a worker (at most 60).",
    )

    # The HTTP edge (exec_server/http_edge.py): applied before the app, and its key, see a byte.
    max_header_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        le=1024 * 1024,
        description="Largest request line and headers, bytes; more: 431 (at most 1 MiB).",
    )
    max_headers: int = Field(
        default=100, ge=8, le=1000, description="Most headers in a request; more: 431."
    )
    header_timeout: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="Seconds a connection may take to send a complete request head (from "
        "opening, or from the next request's first byte); then it is closed (at most 300).",
    )
    max_connections: int = Field(
        default=4096,
        ge=16,
        le=65536,
        description="Open connections; past it the one waiting longest for a request head is "
        "closed, so probes answer under a flood of idle sockets (at most 65536).",
    )
    keep_alive_timeout: float = Field(
        default=75.0,
        gt=0,
        le=3600,
        description="Seconds an idle keep-alive connection is kept; above common client pool "
        "idle times, so a client never reuses a connection the service closed.",
    )
    allowed_hosts: str | None = Field(
        default=None,
        description="Extra names (comma-separated) the Host header may carry. Bound to "
        "loopback, only localhost, 127.0.0.1 and [::1] (any port) and these are answered; "
        "others get 421 (DNS rebinding). Set elsewhere, it restricts Host to these names.",
    )

    # Per-snippet limits: default and maximum.
    timeout_default: float = Field(default=RUN_TIMEOUT, gt=0, description="Wall-clock limit.")
    timeout_max: float = Field(
        default=30.0, gt=0, description="Largest wall-clock (and CPU-time) limit a request may ask."
    )
    cpu_timeout_default: float | None = Field(
        default=None,
        gt=0,
        description="CPU-time limit of all a snippet's processes; unset: its wall-clock limit. "
        "At most BOXED_TIMEOUT_MAX.",
    )
    memory_mb_default: int = Field(
        default=256, ge=MIN_MEMORY_MB, description="Memory limit of a snippet."
    )
    memory_mb_max: int = Field(
        default=2048, ge=MIN_MEMORY_MB, description="Largest memory limit a request may ask."
    )
    output_max_bytes: int = Field(default=64 * 1024, ge=1024, description="Cap per stream.")
    compile_timeout_default: float = Field(
        default=COMPILE_TIMEOUT, gt=0, description="Wall-clock (and CPU) limit of a compile step."
    )
    compile_timeout_max: float = Field(
        default=60.0, gt=0, description="Largest compile limit a request may ask."
    )
    compile_memory_mb: int = Field(
        default=1024,
        ge=MIN_MEMORY_MB,
        description="Memory limit of each compiler process; at most BOXED_MEMORY_MB_MAX.",
    )
    cpp_pch: bool = Field(
        default=True,
        description="C++ compiles may use the image's precompiled bits/stdc++.h (built for "
        "exactly their flags; g++ falls back to the header when it does not apply).",
    )
    compile_cache_mb: int = Field(
        default=128,
        ge=0,
        le=COMPILE_CACHE_MB_MAX,
        description="Memory the service's cache of compiled C and C++ programs may take (least "
        f"recently used evicted first; at most {COMPILE_CACHE_MB_MAX}); 0 turns it off.",
    )
    judge_max_tests: int = Field(default=512, ge=1, description="Most tests in one /judge.")
    judge_max_test_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1024, description="Largest test (input and expected, bytes)."
    )
    judge_max_work_seconds: float = Field(
        default=600.0, gt=0, description="Most time limits one /judge may add up to."
    )
    max_files: int = Field(default=32, ge=0, description="Most files (and fetch_files).")
    max_files_bytes: int = Field(
        default=4 * 1024 * 1024, ge=0, description="Input files' bytes in all (decoded)."
    )
    max_fetch_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=0,
        description="Fetched files' bytes in all, per run (a file over what is left is refused).",
    )
    max_request_fetch_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=0,
        description="Fetched files' bytes in all, per request: a /judge's tests and an "
        "/execute/batch's items each get an equal share, at most BOXED_MAX_FETCH_BYTES.",
    )
    result_cache: bool = Field(
        default=True, description='Requests may ask for a cached answer ("cache": true).'
    )
    result_cache_entries: int = Field(default=4096, ge=1, description="Answers kept at most.")
    result_cache_mb: int = Field(default=256, ge=1, description="Memory the answers may take.")
    result_cache_ttl: float = Field(default=3600.0, gt=0, description="Seconds an answer is kept.")
    pids_limit: int = Field(default=64, ge=8, description="Processes and threads per sandbox.")
    cpus: float = Field(default=1.0, gt=0, description="CPU quota of one sandbox.")
    cpuset: str | None = Field(
        default=None,
        pattern=r"^\d+(-\d+)?(,\d+(-\d+)?)*$",
        description="CPUs every sandbox may run on (cpuset list, e.g. '0-3,8'); unset: any. "
        "On a GPU node it keeps snippets off the inference engine's cores (docs/ray.md).",
    )
    tmpfs_mb: int = Field(
        default=64, ge=1, description="Size of the sandbox's /tmp (and its fsize ulimit)."
    )
    nofile: int = Field(default=256, ge=16, description="Open files per sandbox process.")

    # Sandboxes
    sandbox_image: str = Field(
        default="boxed-sandbox:latest",
        description="Image of every sandbox (python -m tools.build_image builds it).",
    )
    images: dict[str, str | dict[str, Any]] | None = Field(
        default=None,
        description='Operator images a request may name ("image": NAME), a JSON object name '
        '-> image reference, or name -> {"image": ref, "memory_mb_max", "timeout_max", '
        '"pool_size" (0-8, default 0: made when asked for), "session_pool_size" (0-8, '
        "default 0: warm session sandboxes)}; 'default' is always "
        "BOXED_SANDBOX_IMAGE. Each is scanned at start and refused if it carries device nodes "
        "outside /dev (docs/sandbox-image.md#operator-images). Docker backends only.",
    )
    images_file: str | None = Field(
        default=None, description="File holding more BOXED_IMAGES entries (a JSON object)."
    )
    image_scan_dir: str | None = Field(
        default="/run/boxed/images",
        description="Directory keeping image scans by image id across restarts (a scan of "
        "the default image takes seconds); used only when the service's user owns it and "
        "nobody else may write to it. 'off': kept in memory only.",
    )

    @field_validator("image_scan_dir")
    @classmethod
    def _off_is_memory_only(cls, value: str | None) -> str | None:
        return None if value == "off" else value

    runtime: str | None = Field(default=None, description="OCI runtime, e.g. 'runsc' (gVisor).")
    supervisor_socket: bool = Field(
        default=True,
        description="Process mode and sessions on the Docker backends: speak to each sandbox's "
        "supervisor over a unix socket "
        "reached through /proc/<pid>/root instead of the engine's attach stream (a service "
        "running as root in the host's PID namespace, runc); otherwise, or when it cannot, "
        "the attach stream.",
    )
    sandbox_uids: str = Field(
        default=SANDBOX_UIDS,
        pattern=r"^\d+(-\d+)?$",
        description="Host uids the sandboxes run code as, 'first-last': each sandbox container "
        "gets one of its own for its life (its gid is the same number), unique across every "
        "boxed service of the host, so no per-user kernel limit (pipe buffers, inotify) is "
        "shared between sandboxes. Refused at start if it meets a user, group or /etc/subuid, "
        f"/etc/subgid range of the host; at most {MAX_SANDBOX_UIDS} uids, none above "
        f"{MAX_SANDBOX_UID}.",
    )
    sandbox_uid_dir: str = Field(
        default="/run/boxed/uids",
        description="Host directory recording which sandbox uids are held (a lock file per "
        "uid; a dead service's locks vanish with it): the same directory for every boxed "
        "service of the host (mounted into a service that runs in a container).",
    )
    sandbox_user: str | None = Field(
        default=None,
        description="Deprecated: one non-zero uid[:gid] every sandbox shares, so that one "
        "sandbox can shrink another's pipes (warned at start); set, it is used instead of "
        "BOXED_SANDBOX_UIDS.",
    )
    harness_user: str = Field(
        default="10002:10002",
        description="Non-zero uid:gid a /judge test script's harness runs as, in a process of its "
        "own apart from the submission's; outside BOXED_SANDBOX_UIDS, so that the submission "
        "can neither signal, trace nor read the harness.",
    )
    preload: str = Field(
        default="sympy,numpy",
        description="Modules the heavy zygote imports for the code that uses them (at container "
        "start while snippets that need them are recent, else at the first that does).",
    )
    isolation: Isolation = Field(
        default="process",
        description="'process': pooled containers whose supervisor forks a fresh unprivileged "
        "child per snippet (docs/process-mode.md). 'container': a fresh container per snippet.",
    )
    process_backend: str = Field(
        default="docker-process", description="Backend serving isolation='process'."
    )
    container_backend: str = Field(
        default="docker-container", description="Backend serving isolation='container'."
    )
    process_max_runs: int = Field(
        default=1000, ge=1, description="Snippets a process-mode container serves before renewal."
    )
    process_memory_overhead_mb: int = Field(
        default=160,
        ge=0,
        description="Added to a sandbox container's memory limit: the supervisor and its "
        "preloaded zygote; each snippet still gets its own memory_mb of address space.",
    )
    strict_pool_size: int = Field(
        default=1,
        ge=0,
        description="In process mode, warm containers kept for requests asking for "
        "isolation='container'.",
    )
    pod_namespace: str | None = Field(
        default=None,
        description="Namespace of the sandbox pods (backend 'kubernetes'); unset: the "
        "service's own (its service account's), else 'default'.",
    )
    pod_selector: str = Field(
        default="app.kubernetes.io/name=boxed-sandbox",
        description="Label selector of the sandbox pods (backend 'kubernetes').",
    )
    pod_port: int = Field(
        default=7000, ge=1, le=65535, description="Port the sandbox pods' listener serves."
    )
    pod_key_file: str | None = Field(
        default=None,
        description="File with the secret shared with the sandbox pods' listener (backends "
        "'kubernetes', 'docker-pods'); unset with 'docker-pods': a fresh one per service.",
    )
    instance: str | None = Field(
        default=None,
        description="Label that scopes orphan reaping; unset: derived from the port, so two "
        "services on a host never reap each other's sandboxes and a restarted one reaps its "
        "predecessor's.",
    )

    # Capacity
    pool_size: int = Field(default=4, ge=0, description="Warm containers kept ready.")
    max_concurrency: int = Field(
        default_factory=available_cores, ge=1, description="Snippets running at once."
    )
    max_queue: int = Field(default=256, ge=0, description="Requests waiting for a slot; more: 429.")
    max_work_per_tenant: int | None = Field(
        default=None,
        ge=1,
        description="Snippets one tenant may have running or waiting at once; more: 429. "
        "Unset: three quarters (rounded up) of BOXED_MAX_CONCURRENCY + BOXED_MAX_QUEUE, and "
        "at least BOXED_MAX_BATCH_ITEMS (a whole batch fits); at most that sum.",
    )
    queue_timeout: float = Field(
        default=10.0, gt=0, description="Longest wait for a slot; then 429."
    )
    sandbox_wait: float = Field(
        default=30.0, gt=0, description="Longest wait for a warm sandbox once admitted; then 503."
    )
    warmup_parallelism: int = Field(default=3, ge=1, description="Sandboxes started at once.")
    retry_after: int = Field(default=1, ge=1, description="Seconds in Retry-After answers.")
    reap_interval: float = Field(
        default=30.0, gt=0, description="How often orphaned sandboxes are looked for."
    )
    backend_check_interval: float = Field(
        default=2.0,
        gt=0,
        validation_alias=AliasChoices(
            "BOXED_BACKEND_CHECK_INTERVAL", "BOXED_DOCKER_CHECK_INTERVAL", "backend_check_interval"
        ),
        description="How often the backend (engine, image) is checked; while it is down, "
        "/execute answers 503 and warm-ups pause.",
    )

    # Sessions: one persistent interpreter in a sandbox of its own each (docs/sessions.md)
    max_sessions: int = Field(default=32, ge=0, description="Sessions open at once; more: 429.")
    max_sessions_per_tenant: int | None = Field(
        default=None,
        ge=1,
        description="Sessions one tenant may hold open; more: 429. Unset: three quarters "
        "(rounded up) of BOXED_MAX_SESSIONS; at most BOXED_MAX_SESSIONS.",
    )
    session_idle_timeout_default: float = Field(
        default=300.0, gt=0, description="A session idle this long (seconds) expires."
    )
    session_idle_timeout_max: float = Field(
        default=3600.0, gt=0, description="Longest idle timeout a session may ask."
    )
    session_lifetime_default: float = Field(
        default=3600.0, gt=0, description="A session expires this long (seconds) after creation."
    )
    session_lifetime_max: float = Field(
        default=6 * 3600.0, gt=0, description="Longest lifetime a session may ask."
    )
    session_call_wait: float = Field(
        default=0.0,
        ge=0,
        description="How long a call waits for the same session's call in progress; then 409.",
    )
    session_check_interval: float = Field(
        default=1.0, gt=0, description="How often (seconds) sessions are checked for expiry."
    )
    session_pool_size: int = Field(
        default=2,
        ge=0,
        le=SESSION_POOL_MAX,
        description="Warm session sandboxes of the default image kept ready, so that POST "
        "/sessions answers without starting one (an operator image sets its own "
        "session_pool_size in BOXED_IMAGES); each serves one session only, and counts against "
        f"no quota until handed out. At most {SESSION_POOL_MAX}, and at most "
        "BOXED_MAX_SESSIONS are kept over all images; 0: every session starts its own sandbox.",
    )
    session_file_max_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1,
        le=SESSION_FILE_MAX_BYTES,
        description="Largest file a session's file API writes or reads (PUT or GET "
        "/sessions/{id}/files/...); more: 413. At most 1 GiB (a session's /tmp holds "
        "BOXED_TMPFS_MB anyway).",
    )
    session_list_max_entries: int = Field(
        default=1000,
        ge=1,
        le=SESSION_LIST_MAX_ENTRIES,
        description="Most entries a listing of a session's directory answers (GET "
        "/sessions/{id}/files?dir=...); a directory holding more is answered truncated. At "
        "most 100000.",
    )
    session_forks_default: int = Field(
        default=0,
        ge=0,
        description="Forks a session may hold at once (POST /sessions/{id}/fork; a fork's "
        "forks count too) when it asks no max_forks. They live in its container, which gets "
        "one more host uid and one more memory limit per fork, and a seccomp profile that "
        "allows user namespaces (docs/sessions.md#forks); 0: such sessions cannot fork.",
    )
    session_forks_max: int = Field(
        default=8,
        ge=0,
        le=64,
        description="Largest max_forks a session may ask.",
    )

    @field_validator(
        "api_key",
        "allowed_hosts",
        "runtime",
        "instance",
        "cpuset",
        "pod_namespace",
        "pod_key_file",
        "tenant_keys",
        "tenant_keys_file",
        "sandbox_user",
        "images",
        "images_file",
        "image_scan_dir",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value  # compose passes unset variables as ""

    @model_validator(mode="after")
    def _defaults_within_maxima(self) -> Settings:
        if self.timeout_default > self.timeout_max:
            raise ValueError("BOXED_TIMEOUT_DEFAULT exceeds BOXED_TIMEOUT_MAX")
        if self.memory_mb_default > self.memory_mb_max:
            raise ValueError("BOXED_MEMORY_MB_DEFAULT exceeds BOXED_MEMORY_MB_MAX")
        if self.compile_timeout_default > self.compile_timeout_max:
            raise ValueError("BOXED_COMPILE_TIMEOUT_DEFAULT exceeds BOXED_COMPILE_TIMEOUT_MAX")
        if self.compile_memory_mb > self.memory_mb_max:
            raise ValueError("BOXED_COMPILE_MEMORY_MB exceeds BOXED_MEMORY_MB_MAX")
        if self.cpu_timeout_default is not None and self.cpu_timeout_default > self.timeout_max:
            raise ValueError("BOXED_CPU_TIMEOUT_DEFAULT exceeds BOXED_TIMEOUT_MAX")
        if self.session_idle_timeout_default > self.session_idle_timeout_max:
            raise ValueError(
                "BOXED_SESSION_IDLE_TIMEOUT_DEFAULT exceeds BOXED_SESSION_IDLE_TIMEOUT_MAX"
            )
        if self.session_lifetime_default > self.session_lifetime_max:
            raise ValueError("BOXED_SESSION_LIFETIME_DEFAULT exceeds BOXED_SESSION_LIFETIME_MAX")
        if self.session_forks_default > self.session_forks_max:
            raise ValueError("BOXED_SESSION_FORKS_DEFAULT exceeds BOXED_SESSION_FORKS_MAX")
        if (self.max_sessions_per_tenant or 0) > self.max_sessions:
            raise ValueError("BOXED_MAX_SESSIONS_PER_TENANT exceeds BOXED_MAX_SESSIONS")
        if (self.max_work_per_tenant or 0) > self.max_concurrency + self.max_queue:
            raise ValueError(
                "BOXED_MAX_WORK_PER_TENANT exceeds BOXED_MAX_CONCURRENCY + BOXED_MAX_QUEUE"
            )
        if self.sandbox_user is not None:
            ids = self.sandbox_user.split(":", 1)
            if not all(i.isdigit() and int(i) > 0 for i in ids):
                # the supervisor drops each child to it: root would keep capabilities
                raise ValueError("BOXED_SANDBOX_USER must be a non-zero uid[:gid], numeric")
            if "sandbox_uids" in self.model_fields_set:
                raise ValueError("set BOXED_SANDBOX_UIDS or the deprecated BOXED_SANDBOX_USER")
        uids = self.sandbox_uid_range
        if not 0 < uids.first <= uids.last <= MAX_SANDBOX_UID:
            raise ValueError(
                f"BOXED_SANDBOX_UIDS must be first-last with 0 < first <= last <= "
                f"{MAX_SANDBOX_UID} (root would keep capabilities)"
            )
        if len(uids) > MAX_SANDBOX_UIDS:
            raise ValueError(f"BOXED_SANDBOX_UIDS holds more than {MAX_SANDBOX_UIDS} uids")
        ids = self.harness_user.split(":", 1)
        if not all(i.isdigit() and int(i) > 0 for i in ids):
            # the harness drops to it: root would keep capabilities
            raise ValueError("BOXED_HARNESS_USER must be a non-zero uid[:gid], numeric")
        harness_uid = int(ids[0])
        if harness_uid in uids or (
            self.sandbox_user is not None and self.sandbox_user.split(":")[0] == ids[0]
        ):
            raise ValueError("BOXED_HARNESS_USER must be a uid outside the sandboxes' uids")
        return self

    @property
    def instance_label(self) -> str:
        return self.instance or f"port-{self.port}"

    @property
    def sessions_per_tenant(self) -> int:
        """One tenant's session quota: what it may hold while others keep room."""
        return self.max_sessions_per_tenant or _share(self.max_sessions)

    @property
    def work_per_tenant(self) -> int:
        """One tenant's quota of snippets running or waiting for a slot."""
        if self.max_work_per_tenant is not None:
            return self.max_work_per_tenant
        total = self.max_concurrency + self.max_queue
        # a whole /execute/batch of one tenant still fits when the service can hold it at all
        return min(total, max(_share(total), self.max_batch_items))

    @property
    def sandbox_uid_range(self) -> UidRange:
        return UidRange.parse(self.sandbox_uids)

    @property
    def preload_modules(self) -> list[str]:
        return [m.strip() for m in self.preload.split(",") if m.strip()]


@lru_cache
def get_settings() -> Settings:
    return Settings()
