"""What operator images cost: the start-up check of an image, building a derived one, and the
first request of an image without a warm pool.

    python bench/bench_images.py [--scans N] [--calls N]

* scan: ``DockerBackend.examine_image`` of the default image and of a derived one, each ``N``
  times with an empty cache (the ``docker export`` and the tar headers read), then once from
  the cache (one ``docker image inspect``);
* derive: ``tools.derive_image.derive`` of one small wheel made here and a file;
* calls: a real service listing the derived image with ``pool_size`` 0: its first ``/execute``
  (a container started for it), the next ones (process mode: the container came back to the
  image's pool), its ``isolation: "container"`` ones (always cold), and the default image's.

The derived image is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from exec_server.backends.docker import DockerBackend  # noqa: E402
from exec_server.image_scan import ScanCache  # noqa: E402
from exec_server.settings import Settings  # noqa: E402
from tests.conftest import IMAGE, running_service  # noqa: E402
from tests.test_images import tiny_wheel  # noqa: E402
from tools.derive_image import Derivation, derive  # noqa: E402

TAG = "boxed-sandbox-bench:images"


async def scans(reference: str, times: int) -> None:
    backend = DockerBackend(Settings(sandbox_image=reference, instance="bench-images"), reuse=False)
    try:
        fresh = []
        for _ in range(times):
            report = await backend.examine_image(ScanCache(None))
            fresh.append(report.scan_seconds or 0.0)
        cache = ScanCache(None)
        await backend.examine_image(cache)
        started = time.monotonic()
        await backend.examine_image(cache)
        cached_ms = (time.monotonic() - started) * 1000
    finally:
        await backend.close()
    print(
        f"scan {reference}: {report.scan.entries} paths, fresh {min(fresh):.2f}-{max(fresh):.2f} s "
        f"(median {statistics.median(fresh):.2f} s), cached {cached_ms:.1f} ms"
    )


def calls(times: int) -> None:
    images = {"derived": TAG}
    with running_service(BOXED_POOL_SIZE="1", BOXED_IMAGES=json.dumps(images)) as service:
        time.sleep(2)  # the default pool warm

        def one(body: dict[str, object]) -> float:
            started = time.monotonic()
            answer = httpx.post(f"{service.url}/execute", json=body, timeout=60).json()
            assert answer["status"] == "ok", answer
            return (time.monotonic() - started) * 1000

        snippet = {"code": "print(1)"}
        first = one({**snippet, "image": "derived"})
        again = [one({**snippet, "image": "derived"}) for _ in range(times)]
        cold = [
            one({**snippet, "image": "derived", "isolation": "container"}) for _ in range(times)
        ]
        default = [one(snippet) for _ in range(times)]
    then = statistics.median(again)
    print(f"derived, pool_size 0: first call {first:.0f} ms, then p50 {then:.0f} ms")
    print(f"derived, isolation container (cold): p50 {statistics.median(cold):.0f} ms")
    print(f"default (warm pool): p50 {statistics.median(default):.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scans", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        note = Path(tmp) / "note.txt"
        note.write_text("bench\n")
        wheel = tiny_wheel(Path(tmp) / "boxed_probe-1.0-py3-none-any.whl")
        started = time.monotonic()
        derive(Derivation("bench", IMAGE, pip=[str(wheel)], files=[(note, "/opt/note.txt")]), TAG)
        built = time.monotonic() - started
    try:
        print(f"derive (a wheel and a file): {built:.1f} s")
        asyncio.run(scans(IMAGE, args.scans))
        asyncio.run(scans(TAG, args.scans))
        calls(args.calls)
    finally:
        subprocess.run(["docker", "rmi", TAG], capture_output=True)


if __name__ == "__main__":
    main()
