"""bench/bench_run_path.py's probes still fit the guest programs (no Docker: the copy only).

The bench adds its probes at fixed places of the guest modules' source; a guest change that
moves one of those places must fail here, in CI, rather than in the next person's profile.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import bench_run_path as bench  # noqa: E402


def test_every_probe_finds_its_place_and_the_probed_guest_compiles(tmp_path: Path) -> None:
    bench.probed_copy(ROOT, tmp_path)
    guest = tmp_path / "exec_server" / "guest"
    for module in {module for module, _, _ in bench.PROBES}:
        source = (guest / module).read_text()
        compile(source, module, "exec")  # a probe that broke the syntax fails here
        assert "_probe(" in source or "_mark(" in source, module
    # the original tree is untouched
    assert "_probe(" not in (ROOT / "exec_server" / "guest" / "zygote.py").read_text()


def test_a_moved_place_stops_the_copy_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = ("zygote.py", "    this line is in no guest module\n", "")
    monkeypatch.setattr(bench, "PROBES", [*bench.PROBES, gone])
    with pytest.raises(SystemExit, match="this line is in no guest module"):
        bench.probed_copy(ROOT, tmp_path)


def test_the_probe_line_parses_into_marks_and_the_childs_faults() -> None:
    children = " ".join(f"c{i}={1000 * (i + 1)},{10 * i}" for i in range(7))
    line = f"out\nBOXED-PATH previous=5 request=1 body=2 {children} reaped=9000\n"
    run = bench.Run.parse(line.encode())
    assert run.marks["request"] == 1 and run.marks["reaped"] == 9000
    assert run.marks["c6"] == 7000 and run.faults == [0, 10, 20, 30, 40, 50, 60]
