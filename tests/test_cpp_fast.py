"""C++ that does not wait for g++: the image's precompiled bits/stdc++.h and the compile cache.

The cache's rules are checked on the engine's runs with the fake backend (what is stored, when,
and that a changed, foreign or other-flags entry is never installed); the Docker tests check the
real boundary: g++ in the sandbox opens the precompiled header for the judge's own flags and
falls back to the header when a macro comes first, the service's cache hits for an identical
program and never for another, a compile error is never kept, and every verdict is the same
with both on as with both off, in both isolation modes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from exec_server import languages
from exec_server.backends.base import Job
from exec_server.backends.fake import FakeBackend, observed
from exec_server.compile_cache import CachedProgram, CompileCache, program_key
from exec_server.pool import WarmPool
from exec_server.runs import NO_OP, CompileFailed, Runs
from exec_server.settings import COMPILE_CACHE_MB_MAX, Settings
from exec_server.verdict import Observation, RunLimits
from tests.conftest import REPO, ServiceProcess, running_service

LIMITS = RunLimits(wall_seconds=10, cpu_seconds=10, memory_mb=1024, output_bytes=65536)
CPP = languages.get("cpp")
BINARY = b"\x7fELF compiled"


# -- the cache itself ----------------------------------------------------------------------------
def _key(**changes: Any) -> str:
    parts: dict[str, Any] = {
        "argv": CPP.compile_argv(True),
        "version": CPP.version,
        "image": "sha256:aaa",
        "limits": LIMITS,
        "source": "int main() {}",
        "files": (("a.h", b"#define A 1"),),
    }
    return program_key(**{**parts, **changes})


@pytest.mark.parametrize(
    "changes",
    [
        {"argv": CPP.compile_argv(False)},  # other flags: without the precompiled headers
        {"argv": (*CPP.compile_argv(True)[:-1], "-O0", "main.cpp")},
        {"version": "g++ 13.1.0 (C++17)"},
        {"image": "sha256:bbb"},
        {"limits": replace(LIMITS, memory_mb=512)},
        {"source": "int main() { }"},
        {"files": (("a.h", b"#define A 2"),)},
        {"files": ()},
    ],
)
def test_every_part_of_a_compile_is_in_its_key(changes: dict[str, Any]) -> None:
    assert _key() == _key()
    assert _key(**changes) != _key()


def test_a_changed_entry_is_dropped_never_handed_out() -> None:
    cache = CompileCache(1 << 20)
    assert cache.put("k", CachedProgram.of(BINARY, b"", b"warning"))
    assert cache.get("k") == CachedProgram.of(BINARY, b"", b"warning")
    cache.entries["k"] = replace(cache.entries["k"], binary=BINARY + b"\x90")  # tampered
    assert cache.get("k") is None
    assert len(cache) == 0 and cache.bytes_used == 0


def test_the_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    cache = CompileCache(1000)
    for name in "abc":
        assert cache.put(name, CachedProgram.of(name.encode() * 300, b"", b""))
    assert cache.get("b") is not None  # b is now the most recently used
    assert cache.put("d", CachedProgram.of(b"d" * 300, b"", b""))
    assert list(cache.entries) == ["c", "b", "d"] and cache.bytes_used == 900
    assert not cache.put("big", CachedProgram.of(b"x" * 1001, b"", b""))
    assert not cache.put("empty", CachedProgram.of(b"", b"", b""))
    assert not cache.put("forged", CachedProgram(b"x", "0" * 64, b"", b""))  # hash disagrees
    assert "big" not in cache.entries and cache.bytes_used <= 1000


def test_the_cache_size_setting_has_a_maximum_and_zero_turns_it_off() -> None:
    assert Settings().compile_cache_mb > 0 and Settings().cpp_pch
    assert Settings(compile_cache_mb=COMPILE_CACHE_MB_MAX).compile_cache_mb == COMPILE_CACHE_MB_MAX
    with pytest.raises(ValidationError):
        Settings(compile_cache_mb=COMPILE_CACHE_MB_MAX + 1)
    assert not CompileCache(0).enabled


def test_the_dockerfile_builds_the_header_for_exactly_the_cpp_flags() -> None:
    text = (REPO / "docker" / "sandbox" / "Dockerfile").read_text()
    args = dict(re.findall(r'^ARG (CPP_PCH_\w+)="?([^"\n]*)"?$', text, re.MULTILINE))
    assert args["CPP_PCH_FLAGS"].split() == list(languages.CPP_PCH_FLAGS)
    assert args["CPP_PCH_DIR"] == languages.CPP_PCH_DIR == CPP.pch_dir
    assert CPP.compile is not None and CPP.compile[1:3] == languages.CPP_PCH_FLAGS
    assert CPP.compile_argv(True) == (CPP.compile[0], "-I", languages.CPP_PCH_DIR, *CPP.compile[1:])
    assert CPP.compile_argv(False) == CPP.compile
    c = languages.get("c")
    assert c.compile_argv(True) == c.compile  # no precompiled header for C


# -- the cache on a request's runs (fake backend) ------------------------------------------------
def _backend(compile_exit: int = 0) -> FakeBackend:
    """A compile (the compiler's argv) prints a warning and leaves BINARY, read back when the
    job fetches it; an install of a cached program (NO_OP) installs; a run echoes."""

    def behaviour(job: Job) -> Observation:
        if job.install and job.argv != NO_OP:
            ok = compile_exit == 0
            files = {"prog": BINARY} if ok and job.fetch == ("prog",) else {}
            return observed(stderr=b"warning", exit_code=compile_exit, installed=ok, files=files)
        if job.install:
            return observed(installed=True)
        return observed(stdout=job.stdin.encode())

    return FakeBackend(behaviour)


async def _request(
    backend: FakeBackend, cache: CompileCache, image: str = "sha256:aaa", pch: bool = True
) -> tuple[str, bytes]:
    """One request's compile step and run: (the run's stdout, the compile's stderr)."""
    pool = WarmPool(backend, size=1, memory_mb=256)
    pool.start()
    runs = Runs(
        pool,
        set(),
        language=CPP,
        code="int main() {}",
        compile_limits=LIMITS,
        sandbox_wait=5,
        pch=pch,
        compile_cache=cache,
        image=image,
    )
    try:
        async with runs:
            compiled = await runs.prepare()
            result = await runs.run("in", LIMITS, more=False)
    finally:
        await pool.stop()
    assert compiled is not None
    return result.stdout.decode(), compiled.stderr


def _steps(backend: FakeBackend) -> list[str]:
    return [
        "install" if j.argv == NO_OP else "compile" if j.install else "run" for j in backend.jobs
    ]


def test_an_identical_program_compiles_once_and_its_hit_installs_the_stored_bytes() -> None:
    async def scenario() -> None:
        backend, cache = _backend(), CompileCache(1 << 20)
        assert await _request(backend, cache) == ("in", b"warning")
        assert await _request(backend, cache) == ("in", b"warning")  # the compiler's words too
        assert _steps(backend) == ["compile", "run", "install", "run"]
        compile_job, install_job = backend.jobs[0], backend.jobs[2]
        assert compile_job.argv == CPP.compile_argv(True) and compile_job.fetch == ("prog",)
        assert install_job.files == (("prog", BINARY),) and install_job.install == "prog"

    asyncio.run(scenario())


@pytest.mark.parametrize("other", [{"image": "sha256:bbb"}, {"pch": False}])
def test_an_entry_of_another_image_or_other_flags_is_never_used(other: dict[str, Any]) -> None:
    async def scenario() -> None:
        backend, cache = _backend(), CompileCache(1 << 20)
        await _request(backend, cache)
        await _request(backend, cache, **other)
        assert _steps(backend) == ["compile", "run", "compile", "run"]

    asyncio.run(scenario())


def test_a_tampered_entry_is_compiled_again_not_installed() -> None:
    async def scenario() -> None:
        backend, cache = _backend(), CompileCache(1 << 20)
        await _request(backend, cache)
        (key,) = cache.entries
        cache.entries[key] = replace(cache.entries[key], binary=b"\x7fELF forged")
        assert await _request(backend, cache) == ("in", b"warning")
        assert _steps(backend) == ["compile", "run", "compile", "run"]
        assert cache.entries[key].binary == BINARY  # the fresh compile's, stored again

    asyncio.run(scenario())


def test_a_compile_whose_sandbox_fails_the_clean_up_after_it_is_never_stored() -> None:
    async def scenario() -> None:
        compiles = []

        def behaviour(job: Job) -> Observation:
            if job.install:  # each compile leaves its own bytes; the first, an unclean sandbox
                compiles.append(BINARY + bytes([len(compiles)]))
                backend.settle_clean = len(compiles) > 1
                return observed(installed=True, files={"prog": compiles[-1]})
            return observed(stdout=job.stdin.encode())

        backend, cache = FakeBackend(behaviour), CompileCache(1 << 20)
        assert (await _request(backend, cache))[0] == "in"  # compiled again in another sandbox
        assert len(compiles) == 2
        assert [entry.binary for entry in cache.entries.values()] == [compiles[1]]

    asyncio.run(scenario())


def test_a_compile_error_is_never_stored() -> None:
    async def scenario() -> None:
        backend, cache = _backend(compile_exit=1), CompileCache(1 << 20)
        for _ in range(2):
            with pytest.raises(CompileFailed):
                await _request(backend, cache)
        assert len(cache) == 0 and _steps(backend) == ["compile", "compile"]

    asyncio.run(scenario())


# -- the real sandbox ----------------------------------------------------------------------------
SUM = """#include <bits/stdc++.h>
using namespace std;
int main() { long long s = 0, x; while (cin >> x) s += x; cout << s << "\\n"; }
"""
# Debug mode's containers check their indexes: the header must not come from the precompiled
# one (built without the macro), or the out-of-range read would go unnoticed.
DEBUG_MACRO = """#define _GLIBCXX_DEBUG
#include <bits/stdc++.h>
int main() { std::vector<int> v(3); std::cout << v[5] << std::endl; }
"""
PROGRAMS = {
    "sum": SUM,
    "debug_macro": DEBUG_MACRO,
    "int_macro": "#include <bits/stdc++.h>\n#define int long long\n"
    "signed main() { int x = 1LL << 40; std::cout << x << '\\n'; }\n",
    "compile_error": "#include <bits/stdc++.h>\nint main() { return undefined_name; }\n",
    "exit_code": '#include <cstdio>\nint main() { std::puts("bye"); return 3; }\n',
}


@pytest.fixture(scope="module")
def services() -> Iterator[dict[str, ServiceProcess]]:
    """Two services: both features on (the defaults) and both off."""
    pool = {"BOXED_POOL_SIZE": "2", "BOXED_STRICT_POOL_SIZE": "1"}
    with (
        running_service(**pool) as on,
        running_service(**pool, BOXED_CPP_PCH="0", BOXED_COMPILE_CACHE_MB="0") as off,
    ):
        yield {"on": on, "off": off}


def _execute(url: str, code: str, **fields: Any) -> dict[str, Any]:
    body = {"code": code, "language": "cpp", "input": "1 2 3", "compile_timeout": 60, **fields}
    answer = httpx.post(f"{url}/execute", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _cache_counts(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.findall(r'^boxed_compile_cache_total\{outcome="(\w+)"\} (\S+)$', text, re.M)
    return {outcome: float(value) for outcome, value in found}


def _grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def _pch_report(url: str, source: str) -> str:
    """g++'s own account (-H, -Winvalid-pch) of compiling ``source`` in a sandbox with the
    service's C++ command, the precompiled headers searched."""
    argv = [*CPP.compile_argv(True)[:-3], "-H", "-Winvalid-pch", "-fsyntax-only", "main.cpp"]
    script = f"cat > main.cpp <<'EOF'\n{source}EOF\n{' '.join(argv)}\n"
    body = {"code": script, "language": "bash", "timeout": 30, "memory_mb": 1024}  # a compile's
    answer = httpx.post(f"{url}/execute", json=body, timeout=120).json()
    assert answer["status"] == "ok", answer
    return answer["stderr"]


@pytest.mark.docker
def test_g_plus_plus_opens_the_precompiled_header_for_the_judges_flags(
    services: dict[str, ServiceProcess],
) -> None:
    used = f"! {languages.CPP_PCH_DIR}/bits/stdc++.h.gch"
    report = _pch_report(services["on"].url, SUM)
    assert used in report.splitlines() and "not used" not in report
    report = _pch_report(services["on"].url, DEBUG_MACRO)
    assert used not in report.splitlines()
    assert "stdc++.h.gch: not used because `_GLIBCXX_DEBUG' is defined" in report


@pytest.mark.docker
def test_the_cache_hits_for_identical_source_only(services: dict[str, ServiceProcess]) -> None:
    url = services["on"].url
    code = SUM.replace("int main", "// hits\nint main")
    before = _cache_counts(url)
    first, second = _execute(url, code), _execute(url, code)
    assert first["stdout"] == second["stdout"] == "6\n"
    assert _grown(before, _cache_counts(url)) == {"miss": 1, "stored": 1, "hit": 1}
    before = _cache_counts(url)
    assert _execute(url, code, compile_timeout=9)["stdout"] == "6\n"  # other compile limits
    assert _execute(url, code, files={"x.h": "aGk="})["stdout"] == "6\n"  # other files
    assert _execute(url, code + " ")["stdout"] == "6\n"  # other source
    assert _grown(before, _cache_counts(url)) == {"miss": 3, "stored": 3}


@pytest.mark.docker
def test_a_compile_error_is_never_cached(services: dict[str, ServiceProcess]) -> None:
    url = services["on"].url
    before = _cache_counts(url)
    for _ in range(2):
        answer = _execute(url, PROGRAMS["compile_error"])
        assert answer["status"] == "compile_error" and "undefined_name" in answer["error"]
    assert _grown(before, _cache_counts(url)) == {"miss": 2}


def _verdict(answer: dict[str, Any]) -> tuple[Any, ...]:
    compiled = answer.get("compile") or {}
    return (answer["status"], answer["exit_code"], answer["stdout"], compiled.get("status"))


@pytest.mark.docker
@pytest.mark.parametrize("isolation", ["process", "container"])
def test_verdicts_are_the_same_with_both_on_and_both_off(
    services: dict[str, ServiceProcess], isolation: str
) -> None:
    def both_off() -> dict[str, dict[str, Any]]:
        return {
            name: _execute(services["off"].url, code, isolation=isolation)
            for name, code in PROGRAMS.items()
        }

    with ThreadPoolExecutor(1) as other:  # the two services side by side: two cores
        offs = other.submit(both_off)
        ons = {  # a compile, then (but for a compile error) the cached program
            name: [_execute(services["on"].url, code, isolation=isolation) for _ in range(2)]
            for name, code in PROGRAMS.items()
        }
        off = offs.result()
    for name in PROGRAMS:
        assert [_verdict(answer) for answer in ons[name]] == [_verdict(off[name])] * 2, name
    assert off["debug_macro"]["status"] == "error"
    assert "out-of-bounds" in off["debug_macro"]["stderr"]
    assert off["int_macro"]["stdout"] == f"{1 << 40}\n"
    assert off["exit_code"]["exit_code"] == 3
