"""The README is a front door: short, what boxed is first, then exactly two set-up commands (the
service, the tests) with the virtual environment and the offline route beside them; the test
command is the one CI runs, and the service command builds the sandbox image offline."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_LINES = 230
SERVICE, TESTS = "bash scripts/serve", "bash scripts/test"


def tokens() -> list[Token]:
    return MarkdownIt("commonmark").parse(README.read_text())


def commands(block: str) -> list[str]:
    """The block's commands, comments and blank lines left out (the blocks here quote no #)."""
    lines = (line.split(" #", 1)[0].strip() for line in block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_the_readme_fits_in_230_lines() -> None:
    assert len(README.read_text().splitlines()) <= MAX_LINES


def test_it_says_what_boxed_is_then_opens_with_the_two_commands() -> None:
    found = tokens()
    first = next(i for i, t in enumerate(found) if t.type in ("fence", "code_block", "table_open"))
    assert found[first].type == "fence" and found[first].info.strip() == "bash", found[first]
    assert commands(found[first].content) == [SERVICE, TESTS]
    before = " ".join(t.content for t in found[:first] if t.type == "inline")
    assert "boxed runs" in before, "the opening paragraph says what boxed is"
    assert not re.search(r"\d", before), f"a number before what boxed is: {before!r}"


def test_the_venv_and_the_offline_route_are_beside_the_commands() -> None:
    found = tokens()
    fences = [i for i, t in enumerate(found) if t.type == "fence"]
    beside = " ".join(t.content for t in found[fences[0] : fences[1]] if t.type == "inline")
    for needed in ("python3 -m venv", "externally-managed-environment", "--offline"):
        assert needed in beside, needed


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    steps = [line.strip() for line in ci if line.strip() and not line.lstrip().startswith("#")]
    assert steps[-1] == TESTS


def test_the_service_command_builds_the_image_offline_then_serves(tmp_path: Path) -> None:
    """``scripts/serve`` with a stand-in ``python`` that records its arguments: install, the
    offline build (no registry) only when stale, then the service with the options given."""
    calls = tmp_path / "calls"
    stand_in = tmp_path / "python"
    stand_in.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    stand_in.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    env.pop("BOXED_SANDBOX_IMAGE", None)
    script = REPO / SERVICE.split()[1]
    subprocess.run(["bash", str(script), "--port", "5999"], env=env, check=True, timeout=30)
    assert calls.read_text().splitlines() == [
        "-m pip install -q -e .",
        "-m tools.build_image --offline --if-stale --tag boxed-sandbox:latest",
        "-m exec_server --port 5999",
    ]
