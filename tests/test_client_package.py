"""The client is its own package: importable with httpx and pydantic alone, and the one home
of the wire the server speaks (the server's models, outcome codes and statuses are its own).
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import boxed_client
import exec_server.client
import exec_server.models
import exec_server.settings
import exec_server.verdict
import scorer.outcome
import scorer.row
import scorer.verdict
from boxed_client import defaults, models, outcome, status
from tests.service import REPO

# What a trainer's machine must not need: the server's and the scorer's own dependencies.
SERVER_MODULES = ("fastapi", "docker", "sympy", "pydantic_settings", "exec_server", "scorer")
CLIENT_DISTRIBUTION = REPO / "packaging" / "boxed-client"


def requirement_closure(names: list[str]) -> set[str]:
    """The installed distributions ``names`` need, themselves included (markers evaluated for
    this interpreter, extras not followed)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in importlib.metadata.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def install_from_host(site_packages: Path, names: list[str]) -> None:
    """Install ``names`` and what they need into ``site_packages`` offline, by linking the
    files of this interpreter's own installed distributions (their RECORD says which)."""
    for name in requirement_closure(names):
        dist = importlib.metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        tops.discard("__pycache__")  # the host's shared byte-code folder, not the distribution's
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (site_packages / top).exists():
                (site_packages / top).symlink_to(source)


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding httpx, pydantic (and what they need) and a copy of boxed_client: no
    checkout on its path, none of the server's dependencies."""
    root = tmp_path_factory.mktemp("client-venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site_packages = Path(purelib)
    assert site_packages != Path(sysconfig.get_paths()["purelib"])
    install_from_host(site_packages, ["httpx", "pydantic"])
    shutil.copytree(REPO / "boxed_client", site_packages / "boxed_client")
    return python


def test_client_imports_with_httpx_and_pydantic_only(client_venv: Path, tmp_path: Path) -> None:
    code = f"""
import importlib.util, sys
missing = [m for m in {SERVER_MODULES!r} if importlib.util.find_spec(m) is not None]
assert not missing, f"the venv is not bare: {{missing}}"
import boxed_client
from boxed_client import AsyncClient, Client, ExecuteRequest, FailureCode, JudgeRequest
with Client("http://127.0.0.1:9", deadline=1.0) as client:
    assert client.urls == ["http://127.0.0.1:9"]
request = ExecuteRequest(code="print(1)", stdin="x", timeout=2)
assert request.model_dump(exclude_none=True)["input"] == "x"
assert JudgeRequest(code="x", tests=[{{"input": "", "expected_output": "1"}}]).tests[0].input == ""
assert FailureCode("sandbox_lost") is FailureCode.SANDBOX_LOST
assert AsyncClient.__module__ == "boxed_client.aio"
loaded = sorted(m for m in {SERVER_MODULES!r} if m in sys.modules)
print(boxed_client.__file__, loaded)
"""
    out = subprocess.run(
        [client_venv, "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    where, loaded = out.stdout.rsplit(" ", 1)
    assert where.startswith(str(client_venv.parent.parent)), where  # the venv's copy
    assert loaded.strip() == "[]"


def test_the_stdlib_wire_modules_do_not_import_httpx() -> None:
    """The scorer imports the outcome taxonomy from the client's package: a pure library must
    not pull an HTTP client with it."""
    code = (
        "import sys, scorer, scorer.outcome, scorer.row, scorer.verdict, boxed_client.outcome\n"
        "print(sorted({'httpx', 'boxed_client.sync', 'boxed_client.aio'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_server_speaks_the_clients_wire() -> None:
    """One home, not a copy: the server's names are the client's objects."""
    for name in models.__all__:
        server = getattr(exec_server.models, name, None)
        if name in ("ExecuteRequest", "JudgeRequest", "SessionCreateRequest"):
            # The server adds its own check (the languages it runs) and nothing else.
            assert server is not None and server.__bases__ == (getattr(models, name),)
            assert server.model_fields.keys() == getattr(models, name).model_fields.keys()
        elif server is not None:
            assert server is getattr(models, name), name
    assert exec_server.settings.Isolation is models.Isolation
    for name in ("OutcomeKind", "FailureCode", "Failure", "KIND", "RETRYABLE", "outcome_fields"):
        assert getattr(scorer.outcome, name) is getattr(outcome, name), name
    assert exec_server.verdict.Status is status.Status
    assert exec_server.verdict.Limit is status.Limit
    assert scorer.row.RowFailure is models.FailureInfo
    assert scorer.verdict.DEFAULT_TIMEOUT == defaults.SCORE_TIMEOUT
    fields = exec_server.settings.Settings.model_fields
    assert fields["timeout_default"].default == defaults.RUN_TIMEOUT
    assert fields["compile_timeout_default"].default == defaults.COMPILE_TIMEOUT
    assert exec_server.__version__ == boxed_client.__version__


def test_old_import_path_and_every_public_name() -> None:
    for name in boxed_client.__all__:
        value = getattr(boxed_client, name)
        assert getattr(exec_server.client, name) is value, name
    assert set(exec_server.client.__all__) == set(boxed_client.__all__)
    with pytest.raises(AttributeError):
        boxed_client.NoSuchName  # noqa: B018


def test_client_distribution_needs_only_httpx_and_pydantic() -> None:
    """``pip install ./packaging/boxed-client`` ships the repository's boxed_client (through
    its symlink) and asks for the client's two dependencies, at the versions the service's
    own distribution asks for."""
    project = tomllib.loads((CLIENT_DISTRIBUTION / "pyproject.toml").read_text())["project"]
    wanted = {Requirement(line).name: str(Requirement(line)) for line in project["dependencies"]}
    assert set(wanted) == {"httpx", "pydantic"}
    root = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    root_reqs = {Requirement(line).name: str(Requirement(line)) for line in root}
    assert all(root_reqs[name] == spec for name, spec in wanted.items())
    assert (CLIENT_DISTRIBUTION / "boxed_client").resolve() == REPO / "boxed_client"
