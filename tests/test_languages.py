"""C, C++ and bash through /execute and /run_code, against a real service and Docker engine:
compile once in the sandbox, the compiler's message as ``compile_error``, the program's own
verdicts, and a program the submission can run but not replace."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from exec_server.languages import LANGUAGES
from tests.conftest import running_service
from tests.runtimes import engine_for

pytestmark = pytest.mark.docker

SUM_CPP = (
    "#include <bits/stdc++.h>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}"
)
SUM_C = '#include <stdio.h>\nint main(){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a+b);}'


@pytest.fixture(scope="module", params=["runc", "runsc"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A service on each runtime (gVisor: a private engine, tests/runtimes.py)."""
    engine = engine_for(request, request.param)
    with running_service(engine, BOXED_POOL_SIZE="2", BOXED_QUEUE_TIMEOUT="60") as service:
        yield service.url


def run(url: str, code: str, language: str, **fields: object) -> dict:
    body = {"code": code, "language": language, **fields}
    r = httpx.post(f"{url}/execute", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("isolation", ["process", "container"])
@pytest.mark.parametrize(("language", "code"), [("cpp", SUM_CPP), ("c", SUM_C)])
def test_compiled_program_reads_stdin(url: str, language: str, code: str, isolation: str) -> None:
    data = run(url, code, language, stdin="40 2", isolation=isolation)
    assert data["status"] == "ok" and data["stdout"] == "42\n", data
    assert data["compile"]["status"] == "ok" and data["compile"]["duration_ms"] > 0
    assert data["cpu_ms"] is not None and data["peak_memory_kb"] > 0


def test_bash_script(url: str) -> None:
    data = run(url, "read a b; echo $((a*b)); echo note >&2; exit 3", "bash", stdin="6 7")
    assert (data["status"], data["exit_code"], data["stdout"]) == ("error", 3, "42\n")
    assert data["stderr"] == "note\n" and data["compile"] is None


def test_compile_error_is_its_own_status_with_the_message(url: str) -> None:
    data = run(url, "int main() { return missing; }", "c")
    assert data["status"] == "compile_error" and data["exit_code"] is None
    assert "'missing' undeclared" in data["error"].replace("‘", "'").replace("’", "'")
    assert data["stdout"] == "" and data["compile"]["status"] == "error"
    assert data["compile"]["exit_code"] == 1


def test_run_code_answers_sandbox_fusion_compile_shapes(url: str) -> None:
    bad = httpx.post(
        f"{url}/run_code", json={"code": "int main(){ x }", "language": "cpp"}, timeout=120
    ).json()
    assert bad["status"] == "Failed" and bad["message"] == "CompileError"
    assert bad["run_result"] is None and bad["compile_result"]["return_code"] == 1
    assert "error" in bad["compile_result"]["stderr"]
    good = httpx.post(
        f"{url}/run_code", json={"code": SUM_CPP, "language": "cpp", "stdin": "1 2"}, timeout=120
    ).json()
    assert good["status"] == "Success" and good["run_result"]["stdout"] == "3\n"
    assert good["compile_result"]["status"] == "Finished"
    assert good["compile_result"]["return_code"] == 0


def test_runtime_error_timeout_and_memory_of_a_program(url: str) -> None:
    crash = run(url, "int main(){ int *p = 0; return *p; }", "c")
    assert crash["status"] == "error" and crash["exit_code"] == 128 + 11
    loop = run(url, "int main(){ for(;;); }", "c", timeout=1)
    assert loop["status"] == "timeout" and loop["limit"] in ("wall", "cpu")
    hog = "#include <vector>\nint main(){ std::vector<long long> v; for(;;) v.push_back(1); }"
    oom = run(url, hog, "cpp", memory_mb=128)
    assert oom["status"] == "memory_limit" and "bad_alloc" in oom["stderr"]


def test_the_program_cannot_be_replaced_and_is_gone_after(url: str) -> None:
    code = (
        '#include <stdio.h>\nint main(){ FILE *f = fopen("/box/prog", "w");'
        ' printf("%s\\n", f ? "replaced" : "refused"); return 0; }'
    )
    assert run(url, code, "c")["stdout"] == "refused\n"
    # the next request (any language, same pool) finds no program of an earlier one
    # (Python's os.stat: gVisor's statx, which coreutils use, refuses a tmpfs mount point)
    probe = "import os\ns = os.stat('/box')\nprint(os.listdir('/box'), s.st_uid, oct(s.st_mode))"
    assert run(url, probe, "python")["stdout"] == "[] 0 0o40755\n"


def test_compile_time_limit(url: str) -> None:
    # template recursion that takes the compiler far longer than a second
    slow = (
        "template<int N> struct F { enum { v = F<N-1>::v + F<N-2>::v }; };"
        "template<> struct F<1> { enum { v = 1 }; }; template<> struct F<0> { enum { v = 0 }; };"
        "int main() { return F<40>::v + F<41>::v + F<42>::v; }"
    )
    data = run(url, slow + "\n#include <bits/stdc++.h>\n", "cpp", compile_timeout=0.3)
    assert data["status"] == "compile_error" and data["compile"]["status"] == "timeout"
    assert "compilation stopped" in data["error"]


def test_languages_route_lists_every_language(url: str) -> None:
    listed = httpx.get(f"{url}/languages", timeout=30).json()["languages"]
    assert [lang["name"] for lang in listed] == [lang.name for lang in LANGUAGES]
    cpp = next(lang for lang in listed if lang["name"] == "cpp")
    assert cpp["compile_command"].startswith("/usr/bin/g++ -std=c++17 -O2")
    assert cpp["version"].startswith("g++ 12.2.0")


FLOOD = (  # ten thousand errors, each with its context lines: far over the output cap
    "#define A x;x;x;x;x;x;x;x;x;x;\n#define B A A A A A A A A A A\n"
    "#define C B B B B B B B B B B\n#define D C C C C C C C C C C\nint main(){ D }\n"
)
HOSTILE_SOURCES = {
    "device zero": '#include "/dev/zero"\nint main(){}\n',
    "device urandom": '#include "/dev/urandom"\nint main(){}\n',
    "its own output pipe": '#include "/proc/self/fd/1"\nint main(){}\n',
    "itself": "#include __FILE__\nint main(){}\n",
    "a flood of diagnostics": FLOOD,
}


@pytest.mark.parametrize("isolation", ["process", "container"])
@pytest.mark.parametrize("source", list(HOSTILE_SOURCES))
def test_hostile_sources_end_as_compile_error_within_the_compile_limits(
    url: str, source: str, isolation: str
) -> None:
    """Device includes, a file including itself and floods of diagnostics are the code's
    compile error: never a 5xx, never longer than the compile limit, output capped."""
    started = time.monotonic()
    data = run(url, HOSTILE_SOURCES[source], "cpp", compile_timeout=3, isolation=isolation)
    assert time.monotonic() - started < 30
    assert data["status"] == "compile_error" and data["outcome"] == "code", data
    assert data["compile"]["status"] in {"error", "timeout", "memory_limit", "output_limit"}
    assert len(data["compile"]["stderr"].encode()) <= 64 * 1024  # the service's output cap


@pytest.mark.parametrize("source", ["itself", "a flood of diagnostics", "device zero"])
def test_hostile_sources_are_compile_errors_through_judge_and_run_code(
    url: str, source: str
) -> None:
    code = HOSTILE_SOURCES[source]
    judged = httpx.post(
        f"{url}/judge",
        json={"code": code, "language": "cpp", "compile_timeout": 3}
        | {"tests": [{"input": "", "expected_output": ""}]},
        timeout=120,
    )
    assert judged.status_code == 200, judged.text
    assert judged.json()["verdict"] == "compile_error" and judged.json()["outcome"] == "code"
    fusion = httpx.post(
        f"{url}/run_code",
        json={"code": code, "language": "cpp", "compile_timeout": 3},
        timeout=120,
    )
    assert fusion.status_code == 200, fusion.text
    assert fusion.json()["message"] == "CompileError"
