"""Package-level promises: a light import, settings validation, admission control."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from pydantic import ValidationError

from exec_server.admission import Admission, Overloaded
from exec_server.settings import Settings


def test_import_exec_server_is_light() -> None:
    code = (
        "import sys, exec_server, exec_server.models, exec_server.client\n"
        "heavy = {'docker', 'fastapi', 'sympy', 'uvicorn'} & set(sys.modules)\n"
        "print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOXED_TIMEOUT_MAX", "12")
    monkeypatch.setenv("BOXED_API_KEY", "")  # compose passes unset variables as ""
    monkeypatch.setenv("BOXED_PRELOAD", "sympy, numpy ,,")
    settings = Settings()
    assert settings.timeout_max == 12.0 and settings.api_key is None
    assert settings.preload_modules == ["sympy", "numpy"]


def test_defaults_must_fit_maxima() -> None:
    with pytest.raises(ValidationError, match="TIMEOUT_DEFAULT"):
        Settings(timeout_default=40, timeout_max=30)
    with pytest.raises(ValidationError, match="MEMORY_MB_DEFAULT"):
        Settings(memory_mb_default=4096, memory_mb_max=2048)


def test_admission_bounds_running_and_queue() -> None:
    async def scenario() -> tuple[int, list[str]]:
        admission = Admission(max_running=2, max_queue=1, queue_timeout=0.2)
        peak = 0
        outcomes: list[str] = []

        async def job() -> None:
            nonlocal peak
            try:
                async with admission.slot():
                    peak = max(peak, admission.running)
                    await asyncio.sleep(0.5)
                outcomes.append("ran")
            except Overloaded as exc:
                outcomes.append("queue full" if "full" in str(exc) else "waited too long")

        await asyncio.gather(*(job() for _ in range(5)))
        return peak, sorted(outcomes)

    peak, outcomes = asyncio.run(scenario())
    # 2 run, 1 waits and times out after 0.2 s, 2 are refused at once: the queue holds 1.
    assert peak == 2
    assert outcomes == ["queue full", "queue full", "ran", "ran", "waited too long"]


def test_installed_commands_answer_help() -> None:
    """`boxed --help`, `boxed-scorer --help` and `boxed-openenv --help`: each
    [project.scripts] target, run as the installed script runs it (this checkout's code,
    whatever is installed)."""
    import tomllib

    from tests.service import REPO

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"boxed", "boxed-scorer", "boxed-openenv"}
    expected = {
        "boxed": ["serve", "healthcheck"],
        "boxed-scorer": ["grade"],
        "boxed-openenv": ["--boxed-url", "--max-envs"],
    }
    for name, target in scripts.items():
        module, func = target.split(":")
        code = (
            f"import sys; sys.argv[0] = {name!r}; from {module} import {func}; sys.exit({func}())"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, "--help"], capture_output=True, text=True, cwd=REPO
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("usage: ")
        assert all(word in out.stdout for word in expected[name]), out.stdout


def test_shipped_packages_need_no_checkout(tmp_path) -> None:
    """What the wheel ships (boxed_client, exec_server, scorer) imports and runs from a copy with
    no checkout around it; tools that need the checkout (tools/build_image.py) live outside the
    packages."""
    import shutil

    from tests.service import REPO

    for package in ("boxed_client", "exec_server", "scorer"):
        shutil.copytree(REPO / package, tmp_path / package)
    code = (
        "import importlib, pkgutil, sys, boxed_client, exec_server, scorer\n"
        "for pkg in (boxed_client, exec_server, scorer):\n"
        "    assert pkg.__file__.startswith(sys.path[1]), pkg.__file__\n"
        "    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        # __main__ and the guest's bootstrap are scripts that read their argv when imported
        "        if info.name.rpartition('.')[2] not in ('__main__', 'bootstrap'):\n"
        "            importlib.import_module(info.name)\n"
        "print('ok')\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    main = subprocess.run(
        [sys.executable, "-m", "exec_server", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert main.returncode == 0 and "healthcheck" in main.stdout, main.stderr
