"""A dockerd of our own for tests: its own socket, data root, exec root and managed containerd.

Fault tests break it without touching the shared system daemon, and the gVisor tests register
``runsc`` in it without reconfiguring the system daemon. The sandbox image is copied in from
the system daemon (``docker save | docker load``): no registry needed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RUNSC = "/usr/bin/runsc"
# gVisor's own netstack cannot run in dockerd's root network namespace; the sandboxes have no
# network anyway (network_mode none), so runsc runs without one.
RUNSC_CONFIG: dict[str, Any] = {
    "runtimes": {"runsc": {"path": RUNSC, "runtimeArgs": ["--network=none"]}}
}


class PrivateDocker:
    """A dockerd of our own under one temporary directory; stopped and removed at the end.

    ``config`` is the daemon.json content (e.g. ``RUNSC_CONFIG``); the system daemon.json is
    never read.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        # short path: unix socket paths (containerd's too) must stay under 108 bytes
        self.root = Path(tempfile.mkdtemp(prefix="bxd-", dir="/tmp"))
        self.sock = self.root / "docker.sock"
        self.host = f"unix://{self.sock}"
        (self.root / "daemon.json").write_text(json.dumps(config or {}))
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.root / "dockerd.log"

    def cli(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(
            ["docker", "-H", self.host, *args], capture_output=True, text=True, timeout=120
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"docker {args}: {out.stderr}")
        return out.stdout

    def start(self, timeout: float = 60.0) -> None:
        """Start dockerd; once more after clearing a stale containerd if the first try fails.

        A SIGKILLed dockerd leaves its managed containerd behind; the next dockerd reuses it,
        which on a loaded machine can time out ("timeout waiting for containerd to start").
        """
        try:
            self._start_once(timeout)
        except AssertionError:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._stop_containerd()
            self._start_once(timeout)

    def _stop_containerd(self) -> None:
        pid = self.containerd_pid()
        if pid is not None:  # ours: containerd_pid checks its command line names our root
            os.kill(pid, signal.SIGKILL)
            time.sleep(1)
        (self.root / "exec" / "containerd" / "containerd.sock").unlink(missing_ok=True)

    def _start_once(self, timeout: float) -> None:
        self.proc = subprocess.Popen(
            [
                "dockerd",
                "--host",
                self.host,
                "--data-root",
                str(self.root / "data"),
                "--exec-root",
                str(self.root / "exec"),
                "--pidfile",
                str(self.root / "docker.pid"),
                "--config-file",
                str(self.root / "daemon.json"),
                "--bridge=none",
                "--iptables=false",
                "--ip-masq=false",
            ],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while subprocess.run(["docker", "-H", self.host, "info"], capture_output=True).returncode:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "private dockerd did not start"
            time.sleep(0.3)

    def load_image(self, image: str) -> None:
        """Copy ``image`` from the system daemon into this one."""
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(
            ["docker", "-H", self.host, "load"], stdin=save.stdout, capture_output=True
        )
        assert save.wait() == 0 and load.returncode == 0, load.stderr

    def signal(self, sig: signal.Signals, wait: float = 60.0) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(wait)

    def containerd_pid(self) -> int | None:
        """The managed containerd of this daemon, if it still runs."""
        pidfile = self.root / "exec" / "containerd" / "containerd.pid"
        try:
            pid = int(pidfile.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if str(self.root).encode() in cmdline else None

    def containers(self, instance: str, running_only: bool = False) -> list[str]:
        flags = [] if running_only else ["-a"]
        out = self.cli("ps", "-q", *flags, "--filter", f"label=boxed.instance={instance}")
        return out.split()

    def destroy(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stop_containerd()  # survived a SIGKILLed dockerd
        mounts = [m.split()[1] for m in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(str(self.root))), reverse=True):
            subprocess.run(["umount", "-l", mount], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def private_docker(image: str, config: dict[str, Any] | None = None) -> Iterator[PrivateDocker]:
    """A started private daemon with ``image`` loaded; destroyed at the end."""
    daemon = PrivateDocker(config)
    try:
        daemon.start()
        daemon.load_image(image)
        yield daemon
    finally:
        daemon.destroy()
