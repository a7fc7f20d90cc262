"""Every shell command the README and the docs show works as pasted (issue #34's general guard).

Each fenced ``bash``/``sh``/``shell`` block of README.md, examples/README.md and docs/*.md runs
with ``bash -euo pipefail`` in a scratch directory that looks like a checkout (the repository's
top-level entries linked in, the files a block names created from tests/data: FIXTURES), with
the checkout first on PYTHONPATH and this interpreter first on PATH, against one real service
for the module. ``localhost:5002`` in a block becomes that service's address (and BOXED_URL
names it, for commands whose default is :5002); every other port a block names
(``--port 8001``, ``127.0.0.1:8001``) becomes a free one. A page whose block starts a service
of its own (``python -m exec_server &``) gets that one instead, on a free port (BOXED_PORT);
the next block runs once what the block started in the background answers, as a person waits.
The blocks of a page run in order in one directory, like one terminal; what they started in
the background is stopped after the page, and must leave no container behind.

A block passes when it exits 0, every request it sent was answered below 400 (``curl -s``
exits 0 on an error answer: the services' access logs say), and each comment that states an
output (``# 3.142``, ``# {"status":"ok",...}``, ``# "stdout": "42\\n"``) holds for the command
it ends (or, on a line of its own, the command before it). What cannot run here is in EXEMPT,
with why; an exemption that matches no block fails, so the table cannot go stale. Every other
block runs: the pages are parametrised from the blocks found, so a new block is picked up
without editing this file, and fails until it works or is exempted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from markdown_it import MarkdownIt

from tests.conftest import (
    IMAGE,
    REPO,
    ServiceProcess,
    free_port,
    instance_containers,
    running_service,
)

PAGES = (
    "README.md",
    "examples/README.md",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")),
)
SHELLS = frozenset({"bash", "sh", "shell"})
SERVICE_PORT = "5002"  # what the docs call the service
BLOCK_TIMEOUT = 90.0  # seconds; the whole module stays well under two minutes
MARK = "@@docs-as-pasted"
# bash's DEBUG trap runs before each command of the block (not inside $(...) or functions):
# it marks where each command's output starts, with the line the command is on.
PRELUDE = f'trap \'printf "\\n{MARK} %d\\n" "$((LINENO - 1))"\' DEBUG\n'
ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')
PROBES = frozenset({"/healthz", "/readyz", "/health"})


@dataclass(frozen=True)
class Exempt:
    """A block (or, with ``lines``, only its lines holding ``snippet``) that does not run here."""

    page: str
    snippet: str
    reason: str
    lines: bool = False


NO_CLUSTER = (
    "no Kubernetes cluster here: tests/test_deploy.py renders and validates the manifests, "
    "tests/test_kubernetes.py tests the pod backend against the API's wire format"
)
BENCH = "a benchmark: minutes of a loaded machine, run by hand outside the suite"
EXEMPT = (
    Exempt(
        "docs/sandbox-image.md",
        "python -m tools.build_image --derive geo --pip shapely==2.0.6 --apt bc",
        "example builds of operator images: they download from the package index and take "
        "minutes; tests/test_images.py builds a derived image offline from a wheel it makes",
    ),
    Exempt(
        "README.md",
        "bash scripts/serve       # run the service",
        "the set-up commands install into this environment and run in the foreground until "
        "stopped: tests/test_readme.py checks what `bash scripts/serve` runs, tests/service.py "
        "starts exactly its last step for this module; `bash scripts/test` is the suite this "
        "test is part of",
    ),
    Exempt(
        "docs/deploy.md",
        "docker compose up        # run the service",
        "compose: tests/test_compose.py runs `docker compose up` end to end",
    ),
    Exempt(
        "docs/deploy.md",
        "pip install -e .                                # the service",
        "pip install: the scratch environment is the test environment itself; the image build "
        "takes minutes (tests/test_image.py builds one offline); `python -m exec_server` runs in "
        "the foreground until stopped: tests/service.py starts exactly it for this module, and "
        "docs/openenv.md's block starts it as pasted",
    ),
    Exempt(
        "docs/openenv.md",
        "pip install 'boxed[openenv]'",
        "pip install: the scratch environment is the test environment itself (scripts/test "
        "installs '.[dev,openenv]')",
        lines=True,
    ),
    Exempt(
        "docs/process-mode.md",
        "BOXED_ISOLATION=container python -m exec_server",
        "both lines run a service in the foreground until stopped: tests/service.py starts "
        "exactly it for this module, and tests/test_execute.py runs it in both isolation modes",
    ),
    Exempt(
        "docs/sandbox-image.md",
        "python -m tools.build_image --offline    # no registry",
        "image builds take minutes (tests/test_image.py builds one offline); `docker compose up` "
        "is tests/test_compose.py's",
    ),
    Exempt(
        "docs/sandbox-image.md",
        "-d /tmp/w NAME",
        "a template: NAME stands for the package one adds, downloaded from a package index",
    ),
    Exempt(
        "docs/deploy.md",
        "docker build -f docker/server/Dockerfile",
        "image builds take minutes: tests/test_image.py builds the sandbox image offline, "
        "tests/test_compose.py the service image",
    ),
    Exempt("docs/deploy.md", "kubectl create namespace boxed", NO_CLUSTER),
    Exempt("docs/deploy.md", "kind create cluster", NO_CLUSTER),
    Exempt("docs/deploy.md", "sudo k3s ctr images import", NO_CLUSTER),
    Exempt("docs/deploy.md", "kubectl -n boxed rollout status", NO_CLUSTER),
    Exempt("docs/deploy.md", "kubernetes.default.svc", NO_CLUSTER),
    Exempt(
        "docs/ray.md",
        "pip install 'boxed[ray]'",
        "pip install: the scratch environment is the test environment itself (scripts/test "
        "installs '.[dev,openenv,ray]')",
    ),
    Exempt(
        "docs/ray.md",
        "python -m exec_server.ray --address 10.0.0.5:6379 deploy",
        "needs a Ray cluster at that address: tests/test_ray.py runs `status` as pasted, and "
        "deploy, reconcile and stop through the API, against a real three-node cluster",
    ),
    Exempt("docs/ray.md", "python bench/bench_ray.py", BENCH),
    Exempt("docs/bench-old-server.md", "python bench/bench_vs_old_server.py --quick", BENCH),
    Exempt("docs/scorer.md", "python bench/bench_grader.py", BENCH),
    Exempt("docs/failures.md", "python bench/bench_chaos.py", BENCH),
    Exempt(
        "docs/scorer.md",
        "python bench/mv_convert.py --from-mirrors DIR",
        f"{BENCH}; it also needs five repositories fetched by hand (DIR)",
    ),
)

# The files a page's blocks read, made from tests/data (paths relative to it): each scratch
# file is the concatenation of its sources.
FIXTURES: dict[str, dict[str, tuple[str, ...]]] = {
    "docs/scorer-cli.md": {
        "rollouts.jsonl": ("traces/flat.jsonl", "traces/chat.jsonl"),
        "run/flat.jsonl": ("traces/flat.jsonl",),
        "run/verifiers.jsonl": ("traces/verifiers.jsonl",),
        "groups.jsonl": ("traces/atropos_group.jsonl",),
        "gold.jsonl": ("traces/answers.jsonl",),
        "episodes.log": ("traces/openenv.log",),
    },
}


@dataclass(frozen=True)
class Block:
    """One fenced shell block of a page."""

    page: str
    line: int  # of the opening fence, 1-based
    text: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Command:
    """One logical command line of a block: backslash continuations and quotes that span lines
    joined; ``comment`` is the comment ending its last line ("" when none)."""

    first: int  # 1-based, in the block
    last: int
    code: str
    comment: str


def shell_blocks() -> list[Block]:
    """Every fenced shell block of the pages, in page order."""
    parser = MarkdownIt("commonmark")
    blocks = []
    for page in PAGES:
        for token in parser.parse((REPO / page).read_text()):
            language = token.info.split()[0] if token.info.strip() else ""
            if token.type == "fence" and language in SHELLS and token.map is not None:
                blocks.append(Block(page, token.map[0] + 1, token.content))
    return blocks


def commands(text: str) -> list[Command]:
    """Split a shell block into logical commands, finding comments outside quotes."""
    found: list[Command] = []
    quote: str | None = None
    first, code, comment = 1, "", ""
    for number, line in enumerate(text.splitlines(), start=1):
        end, comment, i = len(line), "", 0
        while i < len(line):
            char = line[i]
            if quote == "'":
                quote = None if char == "'" else quote
            elif char == "\\":
                i += 1  # escapes the next character (outside quotes and inside double quotes)
            elif quote == '"':
                quote = None if char == '"' else quote
            elif char in "'\"":
                quote = char
            elif char == "#" and (i == 0 or line[i - 1].isspace()):
                end, comment = i, line[i + 1 :].strip()
                break
            i += 1
        code += line[:end] + "\n"
        if quote is None and not line[:end].rstrip().endswith("\\"):
            found.append(Command(first, number, code.strip(), comment))
            first, code = number + 1, ""
    return found


def stated_output(comment: str) -> str | None:
    """The output a comment states (a JSON value or fragment, or a number), else None: most
    comments say what a command does, not what it prints."""
    if comment.startswith(("{", "[", '"')) or re.fullmatch(r"-?\d[\d_.]*", comment):
        return comment
    return None


def json_values(output: str) -> list[Any]:
    """The JSON values in a command's output: the whole of it, or one per line."""
    values = []
    for candidate in (output, *output.splitlines()):
        try:
            values.append(json.loads(candidate))
        except ValueError:
            pass
    return values


def parse_stated(text: str) -> Any:
    """A stated JSON value, or a bare ``"key": value`` member as a one-member object."""
    for candidate in (text, "{" + text + "}"):
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    raise AssertionError(f"a comment states {text!r}: not JSON, nor a JSON member")


def holds(stated: str, output: str) -> bool:
    """Whether ``output`` holds what a comment states. JSON is compared as values, ``...``
    standing for whatever else the answer holds and a bare ``"key": value`` for one member;
    anything else must appear in the output as written."""
    if not stated.startswith(("{", "[", '"')):
        return stated in output
    text = re.sub(r",\s*\.\.\.|\.\.\.\s*,?", "", stated)
    expected = parse_stated(text)
    for actual in json_values(output):
        if isinstance(expected, dict) and isinstance(actual, dict):
            if all(actual.get(key, object()) == value for key, value in expected.items()):
                return True
        elif actual == expected:
            return True
    return False


def exemption_for(block: Block) -> Exempt | None:
    """The whole-block exemption that matches ``block``, if any."""
    matches = [
        e for e in EXEMPT if not e.lines and e.page == block.page and e.snippet in block.text
    ]
    assert len(matches) <= 1, f"{block}: several exemptions match: {matches}"
    return matches[0] if matches else None


def runnable(block: Block) -> str:
    """The block's text without the lines an exemption leaves out (the rest stays as pasted)."""
    left_out = [e.snippet for e in EXEMPT if e.lines and e.page == block.page]
    kept = [line for line in block.text.splitlines() if not any(s in line for s in left_out)]
    return "\n".join(kept) + "\n"


def outputs(stdout: str) -> dict[int, str]:
    """Each command's output, by the block line its DEBUG mark names (several commands on one
    line, or a pipeline's parts, share it)."""
    by_line: dict[int, str] = {}
    pieces = re.split(rf"\n{MARK} (-?\d+)\n", "\n" + stdout)
    for number, text in zip(pieces[1::2], pieces[2::2], strict=True):
        by_line[int(number)] = by_line.get(int(number), "") + text
    return by_line


def output_of(command: Command, by_line: dict[int, str]) -> str:
    """The output of the command spanning those lines (a multi-line one is marked on one)."""
    return "".join(text for n, text in by_line.items() if command.first <= n <= command.last)


def stated_outputs_problems(text: str, stdout: str) -> list[str]:
    """Each comment stating an output that the output of its command does not hold."""
    problems = []
    by_line = outputs(stdout)
    last_code: Command | None = None
    for command in commands(text):
        stated = stated_output(command.comment)
        target = command if command.code else last_code
        if stated is not None and target is not None:
            got = output_of(target, by_line)
            if not holds(stated, got):
                problems.append(f"line {command.last}: states {stated!r}, the output was {got!r}")
        if command.code:
            last_code = command
    return problems


# ------------------------------------------------------------------------------ running a page


@dataclass
class Terminal:
    """One page's blocks run in order in one scratch directory, like one terminal session."""

    page: str
    scratch: Path
    ports: dict[str, str]  # documented port -> this run's
    env: dict[str, str]
    groups: list[int] = field(default_factory=list)  # the blocks' process groups
    instance: str | None = None  # of a service a block started
    logs: list[Path] = field(default_factory=list)

    @classmethod
    def open(cls, page: str, scratch: Path, service: ServiceProcess) -> Terminal:
        """A terminal for ``page`` in ``scratch`` (a checkout lookalike), reaching ``service``
        as :5002, or a service of its own when one of its blocks starts one."""
        scratch_checkout(scratch, page)
        terminal = cls(page, scratch, {SERVICE_PORT: str(service.port)}, dict(os.environ))
        terminal.env |= {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))),
            "BOXED_URL": service.url,
        }
        if any(starts_a_service(runnable(b)) for b in BLOCKS if b.page == page):
            own = str(free_port())
            terminal.instance = f"test-{uuid.uuid4().hex[:8]}"
            terminal.ports[SERVICE_PORT] = own
            terminal.env |= {
                "BOXED_PORT": own,
                "BOXED_INSTANCE": terminal.instance,
                "BOXED_POOL_SIZE": "2",
                "BOXED_SANDBOX_IMAGE": IMAGE,
                "BOXED_URL": f"http://127.0.0.1:{own}",
            }
        return terminal

    def rewrite(self, text: str) -> str:
        """Ports to this run's: :5002 to the service's, every other port to a free one."""

        def port(number: str) -> str:
            if number not in self.ports:
                self.ports[number] = str(free_port())
            return self.ports[number]

        text = re.sub(r"(localhost|127\.0\.0\.1):(\d+)", lambda m: f"{m[1]}:{port(m[2])}", text)
        return re.sub(r"(--port[ =])(\d+)", lambda m: f"{m[1]}{port(m[2])}", text)

    def run(self, block: Block) -> subprocess.CompletedProcess[str]:
        """Run one block; returns its exit status and output, its background jobs ready."""
        text = self.rewrite(runnable(block))
        script = self.scratch / f".block-{block.line}.sh"
        script.write_text(PRELUDE + text)
        out, err = (self.scratch / f".block-{block.line}.{s}" for s in ("out", "err"))
        self.logs += [out, err]
        with out.open("w") as stdout, err.open("w") as stderr:
            proc = subprocess.Popen(
                ["bash", "-euo", "pipefail", str(script)],
                cwd=self.scratch,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,  # its background jobs stay in its process group
            )
            self.groups.append(proc.pid)
            try:
                code = proc.wait(BLOCK_TIMEOUT)
            except subprocess.TimeoutExpired:
                stop_group(proc.pid)
                code = proc.wait()
        background = [c.code for c in commands(text) if c.code.endswith("&")]
        if code == 0:
            for line in background:
                self.wait_ready(line, proc.pid)
        return subprocess.CompletedProcess(script, code, out.read_text(), err.read_text())

    def wait_ready(self, line: str, group: int, timeout: float = 90.0) -> None:
        """Wait until what ``line`` started in the background (in ``group``) answers its
        health probe; fail at once when nothing of the group is left."""
        found = re.search(r"--port[ =](\d+)", line)
        port = found[1] if found else self.env.get("BOXED_PORT")
        assert port, f"{self.page}: cannot tell which port `{line}` serves on"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                raise AssertionError(f"`{line}` exited:\n{self.tail()}") from None
            for probe in ("/readyz", "/health"):
                try:
                    if httpx.get(f"http://127.0.0.1:{port}{probe}", timeout=2).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
            time.sleep(0.3)
        raise AssertionError(f"`{line}` did not answer on :{port} in {timeout} s:\n{self.tail()}")

    def tail(self) -> str:
        """The end of each block's output so far, for failure messages."""
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in self.logs if p.exists())

    def stop(self) -> None:
        """Stop what the blocks left running (SIGTERM: a service removes its sandboxes)."""
        for group in self.groups:
            stop_group(group)
        if self.instance is not None:
            left = instance_containers(self.instance)
            if left:  # removed before failing: a failed run must not leak sandboxes
                subprocess.run(["docker", "rm", "-f", *left], capture_output=True, check=False)
            assert left == [], f"a block's service left containers:\n{self.tail()}"


def stop_group(group: int, timeout: float = 60.0) -> None:
    """SIGTERM a process group, SIGKILL it if it outlives ``timeout``."""
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(group, signal.SIGKILL)


def scratch_checkout(scratch: Path, page: str) -> None:
    """Link the checkout's top-level entries into ``scratch`` and create the page's fixtures:
    reads find the repository, writes stay in the scratch directory."""
    fixtures = FIXTURES.get(page, {})
    for name, sources in fixtures.items():
        target = scratch / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join((REPO / "tests/data" / s).read_text() for s in sources))
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and not (scratch / entry.name).exists():
            (scratch / entry.name).symlink_to(entry)


def starts_a_service(text: str) -> bool:
    """Whether a block starts the service in the background (``python -m exec_server &``)."""
    return re.search(r"^\s*(python -m exec_server|boxed)(?=\s)[^\n#]*&", text, re.M) is not None


# ------------------------------------------------------------------------------------- tests


BLOCKS = shell_blocks()
RUN_PAGES = sorted({b.page for b in BLOCKS if exemption_for(b) is None}, key=PAGES.index)


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    """The one real service the module's blocks reach as localhost:5002."""
    with running_service(BOXED_POOL_SIZE="2") as started:
        yield started


def access_problems(log: str) -> list[str]:
    """Requests in an access log answered 400 or above (health probes aside: waiting for a
    service to come up polls them)."""
    return [
        m[0]
        for m in ACCESS.finditer(log)
        if int(m["status"]) >= 400 and m["path"].partition("?")[0] not in PROBES
    ]


@pytest.mark.docker
@pytest.mark.parametrize("page", RUN_PAGES)
def test_every_block_of_the_page_works_as_pasted(
    page: str, service: ServiceProcess, tmp_path: Path
) -> None:
    terminal = Terminal.open(page, tmp_path, service)
    log_start = service.log.stat().st_size
    try:
        for block in (b for b in BLOCKS if b.page == page and exemption_for(b) is None):
            result = terminal.run(block)
            text = terminal.rewrite(runnable(block))
            shown = f"{block} as run:\n{text}\n{terminal.tail()}"
            assert result.returncode == 0, f"exit {result.returncode}: {shown}"
            problems = stated_outputs_problems(text, result.stdout)
            assert problems == [], f"{problems}: {shown}"
    finally:
        terminal.stop()
    with service.log.open() as log:
        log.seek(log_start)
        answered = log.read() + "".join(p.read_text() for p in terminal.logs)
    refused = access_problems(answered)
    assert refused == [], f"requests answered with an error: {refused}\n{terminal.tail()}"


def test_every_exemption_matches_one_block() -> None:
    """An exemption whose block was edited away fails, instead of silently exempting nothing."""
    for exempt in EXEMPT:
        assert exempt.page in PAGES and exempt.reason, exempt
        matched = [b for b in BLOCKS if b.page == exempt.page and exempt.snippet in b.text]
        assert len(matched) == 1, f"{exempt.page}: {exempt.snippet!r} matches {len(matched)} blocks"
        if exempt.lines:
            assert commands(runnable(matched[0])), f"{exempt}: nothing of the block is left to run"


def test_no_command_hides_in_an_unlabelled_block() -> None:
    """A command in a fence without a language would never be run here: label it ``bash``
    (or ``text`` when it is output)."""
    command = re.compile(
        r"^\s*(\$ )?(python3? (-m |\S+\.py)|pip3? install |curl |docker |kubectl |bash |"
        r"boxed(-[a-z]+)?(\s|$))",
        re.M,
    )
    parser = MarkdownIt("commonmark")
    hidden = [
        f"{page}:{token.map[0] + 1 if token.map else '?'}"
        for page in PAGES
        for token in parser.parse((REPO / page).read_text())
        if token.type == "fence" and not token.info.strip() and command.search(token.content)
    ]
    assert hidden == []


@pytest.mark.parametrize(
    ("stated", "output", "expected"),
    [
        (
            '{"status":"ok",...,"stdout":"42\\n",...}',
            '{"status":"ok","stdout":"42\\n","x":1}',
            True,
        ),
        ('{"status":"ok",...}', '{"status":"error"}', False),
        ('"stdout": "42\\n"', '{"stdout":"42\\n","stderr":""}', True),
        ('"stdout": "42\\n"', '{"stdout":"41\\n"}', False),
        ("3.142", '{"stdout":"3.142\\n"}', True),
        ("3.142", '{"stdout":"3.14\\n"}', False),
        ('"a:b"', '"a:b"', True),
    ],
)
def test_a_stated_output_is_compared_as_written(stated: str, output: str, expected: bool) -> None:
    assert holds(stated, output) is expected


def test_each_stated_output_is_checked_against_its_own_command() -> None:
    """The DEBUG marks attribute output to lines: a comment on its own line states the output
    of the command before it, a trailing one the output of the command it ends."""
    text = 'echo 1   # 1\necho \'{"a":\n 2}\'\n# {"a": 2}\necho 3   # 4\n'
    stdout = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", PRELUDE + text], capture_output=True, text=True
    ).stdout
    assert stated_outputs_problems(text, stdout) == ["line 5: states '4', the output was '3\\n'"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("""curl -d '{"a": "#x"}' u   # 1\n""", [(1, 1, "1")]),
        ('echo "a # b" \\\n  c   # d\n# e\n', [(1, 2, "d"), (3, 3, "e")]),
        ("""echo 'x\ny'  # z\necho 2\n""", [(1, 2, "z"), (3, 3, "")]),
    ],
)
def test_commands_join_continued_lines_and_ignore_quoted_hashes(
    text: str, expected: list[tuple[int, int, str]]
) -> None:
    assert [(c.first, c.last, c.comment) for c in commands(text)] == expected
