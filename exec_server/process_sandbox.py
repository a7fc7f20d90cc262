"""Process isolation: pooled containers whose resident supervisor forks one child per snippet.

The container is hardened exactly as in container mode (``DockerSandboxes``) and additionally
runs its supervisor (``supervisor.py``) as root with only CAP_SETUID, CAP_SETGID and CAP_KILL,
with System V IPC and POSIX message queues switched off by namespaced sysctls (they would
outlive a snippet). The supervisor drops each child to the sandbox uid, kills everything the
snippet left at the end of the run and proves the container clean before it serves again; see
``docs/process-mode.md`` for the threat model.

Host side of the protocol (framing described in ``supervisor.py``): send a limits header and
the runner frame, read child output frames into capped ``Streams`` until the result frame,
answer; then, outside the request's latency, read the clean-up frame (``settle``) before the
pool hands the container out again.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from pathlib import Path
from typing import Any

from .sandbox import (
    RUNNER_SOURCE,
    TRAILER_ROOM,
    DockerSandboxes,
    RunResult,
    SandboxError,
    Streams,
    WarmContainer,
    pop_frames,
    runner_frame,
    take_trailer,
    verdict,
)

log = logging.getLogger("boxed.process")
SUPERVISOR_SOURCE = (Path(__file__).parent / "supervisor.py").read_text()
SUPERVISOR_CAPS = ["SETUID", "SETGID", "KILL"]
# Objects in these namespaces outlive the processes that made them: allow none at all.
IPC_SYSCTLS = {
    "kernel.shmmax": "0",
    "kernel.shmall": "0",
    "kernel.shm_rmid_forced": "1",
    "kernel.msgmni": "0",
    "kernel.sem": "0 0 0 0",
    "fs.mqueue.queues_max": "0",
}
OUTPUT, ERRORS, RESULT, CLEANUP = 1, 2, 3, 4
REPORT_GRACE = 10.0  # the supervisor kills at the limit itself (a bomb's sweep can take a
# few seconds on saturated CPUs); past this it is broken
SETTLE_TIMEOUT = 10.0
SUPERVISOR_STDERR_KEPT = 2000
REUSABLE_STATUSES = ("ok", "error")


class ProcessSandboxes(DockerSandboxes):
    """Warm containers that serve many snippets, one at a time, each in a forked child."""

    reuses_containers = True

    def _command(self) -> list[str]:
        uid, _, gid = self.settings.sandbox_user.partition(":")
        config = {
            "preload": self.settings.preload_modules,
            "runner": RUNNER_SOURCE,
            "uid": int(uid),
            "gid": int(gid or uid),
            "output_cap": self.settings.output_max_bytes + TRAILER_ROOM,
            "nofile": self.settings.nofile,
            "fsize": self.settings.tmpfs_mb * 1024 * 1024,  # as container mode's ulimit
        }
        return ["python3", "-I", "-u", "-c", SUPERVISOR_SOURCE, json.dumps(config)]

    def _user(self) -> str:
        return "0:0"  # only root can hold capabilities under Docker 20.10 (no ambient caps)

    def container_memory_mb(self, memory_mb: int) -> int:
        return memory_mb + self.settings.process_memory_overhead_mb

    def _host_options(self, memory_mb: int) -> dict[str, Any]:
        options = super()._host_options(memory_mb)
        options.update(cap_add=SUPERVISOR_CAPS, sysctls=IPC_SYSCTLS)
        return options

    # -- one run -------------------------------------------------------------------------
    def run(self, warm: WarmContainer, code: str, stdin: str, timeout: float) -> RunResult:
        """Hand the snippet to the supervisor and collect its output and verdict.

        The supervisor enforces the wall limit itself and reports even on timeout; the host
        only gives up (and removes the container) when no report comes ``REPORT_GRACE``
        seconds after the limit: that is an infrastructure failure, never a verdict.
        """
        nonce = secrets.token_hex(16)
        body = runner_frame(code, stdin, nonce)
        header = json.dumps({"timeout": timeout, "memory_mb": warm.memory_mb, "size": len(body)})
        self._send(warm, len(header).to_bytes(4, "big") + header.encode() + body)
        warm.runs += 1
        limit = self.settings.output_max_bytes
        streams = Streams(cap=limit + TRAILER_ROOM)
        report = self._read_until(warm, RESULT, time.monotonic() + timeout + REPORT_GRACE, streams)
        if report.get("anomaly"):
            raise SandboxError(f"process sandbox failed: {report['anomaly']}")
        if report.get("strays"):
            log.info("container %s: killed %d leftover processes", warm.id[:12], report["strays"])
        killed_for = report["killed_for"]
        exit_code = report["exit_code"]
        trailers = [take_trailer(streams.out[kind], nonce) for kind in (OUTPUT, ERRORS)]
        trailer = trailers[0] or trailers[1]
        if streams.clip(limit) and not killed_for:
            killed_for = "output_limit"
        if killed_for or trailer is None:
            # no trailer: the runner itself died (e.g. out of memory before the code ran)
            status = self._status(killed_for, exit_code, report["oom_killed"], streams.out[ERRORS])
        else:
            status = verdict(exit_code, memory=report["oom_killed"] or trailer[1])
        return streams.result(status, None if killed_for else exit_code, report["duration_ms"])

    def can_reuse(self, warm: WarmContainer, result: RunResult) -> bool:
        """Reuse after a normal end only: a timeout, memory or output kill retires it."""
        return result.status in REUSABLE_STATUSES and warm.runs < self.settings.process_max_runs

    def settle(self, warm: WarmContainer) -> bool:
        """Wait for the supervisor's clean-up verdict: True when the container is clean."""
        try:
            verdict = self._read_until(warm, CLEANUP, time.monotonic() + SETTLE_TIMEOUT)
        except SandboxError as exc:
            log.warning("container %s retired: %s", warm.id[:12], exc)
            return False
        if not verdict.get("clean"):
            log.warning("container %s retired: %s", warm.id[:12], verdict.get("problems"))
            return False
        return True

    def _read_until(
        self, warm: WarmContainer, wanted: int, deadline: float, streams: Streams | None = None
    ) -> dict[str, Any]:
        """Read supervisor frames until one of kind ``wanted``; output frames go to ``streams``.

        Frames after the wanted one stay buffered on ``warm`` for the next call.
        """
        diagnostics = bytearray()
        while True:
            for kind, data in pop_frames(warm._buffer):  # Docker's multiplexing
                if kind == OUTPUT:
                    warm._stdout.extend(data)
                else:
                    diagnostics = (diagnostics + data)[-SUPERVISOR_STDERR_KEPT:]
            for kind, data in pop_frames(warm._stdout):  # the supervisor's own framing
                if kind == wanted:
                    return json.loads(data)
                if streams is None or kind not in (OUTPUT, ERRORS):
                    self._abandon(warm)
                    raise SandboxError(f"unexpected supervisor frame of kind {kind}")
                streams.add(kind, data)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._abandon(warm)
                raise SandboxError("the supervisor did not report in time")
            warm.sock.settimeout(remaining)
            try:
                chunk = warm.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError as exc:
                raise SandboxError(f"lost the supervisor's stream: {exc}") from exc
            if not chunk:
                detail = diagnostics.decode(errors="replace").strip()
                raise SandboxError(f"the supervisor exited: {detail or 'no message'}")
            warm._buffer.extend(chunk)

    def _abandon(self, warm: WarmContainer) -> None:
        """Stop a supervisor that broke protocol (closing the stream first, as ``run`` does)."""
        self._close(warm)
        self.kill(warm.id)
