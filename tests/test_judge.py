"""POST /judge against a real service and Docker engine: every status, every comparison mode,
checkers, call-based and script tests, per-test limits, stop_on_first_failure and the caps.

Problems are small stdin/stdout tasks written here in C, C++ and Python; HumanEval (the real
data set) has its own file, tests/test_humaneval.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator

import httpx
import pytest

from exec_server.client import AsyncClient, Client
from tests.conftest import free_port, running_service
from tests.runtimes import engine_for

pytestmark = pytest.mark.docker

SUM_CPP = """#include <bits/stdc++.h>
int main() { long long a, b; std::cin >> a >> b; std::cout << a + b << "\\n"; }
"""
SUM_C = (
    '#include <stdio.h>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);}'
)
SUM_PY = "a, b = map(int, input().split())\nprint(a + b)"
SUM_TESTS = [
    {"input": "1 2\n", "expected_output": "3\n"},
    {"input": "40 2\n", "expected_output": "42\n"},
    {"input": "-5 5\n", "expected_output": "0\n"},
]


@pytest.fixture(scope="module", params=["runc", "runsc"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A service on each runtime (gVisor: a private engine, tests/runtimes.py)."""
    engine = engine_for(request, request.param)
    with running_service(engine, BOXED_POOL_SIZE="2", BOXED_QUEUE_TIMEOUT="60") as service:
        yield service.url


def judge(url: str, code: str, language: str = "python", **fields: object) -> dict:
    r = httpx.post(f"{url}/judge", json={"code": code, "language": language, **fields}, timeout=180)
    assert r.status_code == 200, r.text
    return r.json()


def statuses(answer: dict) -> list[str]:
    return [t["status"] for t in answer["tests"]]


@pytest.mark.parametrize(("language", "code"), [("cpp", SUM_CPP), ("c", SUM_C), ("python", SUM_PY)])
def test_accepted_in_every_language(url: str, language: str, code: str) -> None:
    answer = judge(url, code, language, tests=SUM_TESTS)
    assert answer["verdict"] == "accepted", answer
    assert (answer["passed"], answer["total"], answer["first_failure"]) == (3, 3, None)
    assert [t["stdout"] for t in answer["tests"]] == ["3\n", "42\n", "0\n"]
    for test in answer["tests"]:
        assert test["duration_ms"] > 0 and test["cpu_ms"] is not None
        assert test["peak_memory_kb"] > 0
    assert (answer["compile"] is not None) is (language != "python")


def test_container_isolation_and_bash(url: str) -> None:
    answer = judge(url, SUM_CPP, "cpp", tests=SUM_TESTS, isolation="container")
    assert answer["verdict"] == "accepted" and answer["passed"] == 3
    bash = judge(url, "read a b; echo $((a + b))", "bash", tests=SUM_TESTS)
    assert bash["verdict"] == "accepted" and bash["passed"] == 3


def test_wrong_answer_says_where(url: str) -> None:
    code = "a, b = map(int, input().split())\nprint(a + b if a != 40 else 41)"
    answer = judge(url, code, tests=SUM_TESTS)
    assert answer["verdict"] == "wrong_answer" and statuses(answer)[1] == "wrong_answer"
    assert (answer["passed"], answer["first_failure"]) == (2, 1)
    diff = answer["tests"][1]["difference"]
    assert (diff["line"], diff["column"], diff["expected"], diff["actual"]) == (1, 1, "42", "41")


def test_every_failure_status_and_the_run_goes_on(url: str) -> None:
    # test 1 loops (timeout retires the sandbox: later tests recompile in a fresh one), test 2
    # allocates without end, test 3 crashes, test 4 floods stdout, the rest pass
    code = r"""#include <bits/stdc++.h>
int main() {
    int k; std::cin >> k;
    if (k == 1) for (;;) {}
    if (k == 2) { std::vector<long long> v; for (;;) v.push_back(k); }
    if (k == 3) { int *p = nullptr; return *p; }
    if (k == 4) for (;;) std::cout << "spam spam spam spam\n";
    std::cout << k * 10 << "\n";
}"""
    tests = [{"input": f"{k}\n", "expected_output": f"{k * 10}\n"} for k in range(7)]
    answer = judge(url, code, "cpp", tests=tests, timeout=1, memory_mb=128)
    assert statuses(answer) == [
        "accepted",
        "timeout",
        "memory_limit",
        "runtime_error",
        "output_limit",
        "accepted",
        "accepted",
    ]
    assert answer["verdict"] == "timeout" and answer["first_failure"] == 1
    assert answer["passed"] == 3 and answer["total"] == 7
    assert answer["tests"][3]["exit_code"] == 128 + 11
    assert answer["tests"][4]["truncated"] is True
    assert "limit" in answer["tests"][1]["message"]


def test_stop_on_first_failure(url: str) -> None:
    code = "k = int(input())\nprint(k if k != 1 else -1)"
    tests = [{"input": f"{k}\n", "expected_output": f"{k}\n"} for k in range(5)]
    answer = judge(url, code, tests=tests, stop_on_first_failure=True)
    assert statuses(answer) == ["accepted", "wrong_answer"]
    assert (answer["passed"], answer["total"], answer["verdict"]) == (1, 5, "wrong_answer")


def test_python_runtime_error_and_per_test_limits(url: str) -> None:
    code = "import time\nk = int(input())\nif k == 2: time.sleep(0.6)\nprint(1 // (k - 1))"
    tests = [
        {"input": "3", "expected_output": "0"},
        {"input": "1", "expected_output": "0"},  # ZeroDivisionError
        {"input": "2", "expected_output": "1", "timeout": 0.3},  # its own, shorter limit
    ]
    answer = judge(url, code, tests=tests, timeout=5)
    assert statuses(answer) == ["accepted", "runtime_error", "timeout"]
    assert "ZeroDivisionError" in answer["tests"][1]["stderr"]
    assert answer["tests"][2]["message"] == "wall-clock limit of 0.3 s reached"


def test_compile_error(url: str) -> None:
    answer = judge(url, "int main() { return nope; }", "cpp", tests=SUM_TESTS)
    assert answer["verdict"] == "compile_error" and answer["tests"] == []
    assert (answer["passed"], answer["total"]) == (0, 3)
    assert "nope" in answer["compile"]["message"] and answer["compile"]["exit_code"] == 1


@pytest.mark.parametrize(
    ("comparison", "printed", "agrees"),
    [
        ("exact", "1 2\n3\n", True),
        ("exact", "1 2 \n3", False),
        ("whitespace", "1   2\n\n3", True),
        ("whitespace", "1 2 3 4", False),
        ("lines", "3\n1 2\n", True),
        ("lines", "3\n1  2\n", False),
        ("float", "1.0000001 2\n3", True),
        ("float", "1.1 2\n3", False),
    ],
)
def test_comparison_modes(url: str, comparison: str, printed: str, agrees: bool) -> None:
    tests = [{"input": "", "expected_output": "1 2\n3\n"}]
    answer = judge(url, f"print({printed!r}, end='')", tests=tests, comparison=comparison)
    assert answer["verdict"] == ("accepted" if agrees else "wrong_answer"), answer


CHECKER = """
def check(input, expected, actual):
    import os
    if os.path.exists("/tmp/forged"):
        return False, "the submission reached the checker's files"
    got = sorted(int(x) for x in actual.split())
    return got == sorted(int(x) for x in expected.split()), f"{len(got)} numbers"
"""


def test_checker_program(url: str) -> None:
    # any order of the numbers is right; the submission plants a file that a checker running
    # in its reach would see
    code = (
        "open('/tmp/forged', 'w').write('x')\n"
        "n = int(input())\nprint(*reversed(range(n if n != 3 else 2)))"
    )
    tests = [
        {"input": f"{n}\n", "expected_output": " ".join(map(str, range(n)))} for n in (1, 3, 5)
    ]
    answer = judge(url, code, tests=tests, comparison="checker", checker=CHECKER)
    assert statuses(answer) == ["accepted", "wrong_answer", "accepted"], answer
    assert answer["tests"][0]["message"] == "1 numbers"
    assert answer["tests"][1]["message"] == "2 numbers"


def test_a_checker_that_cannot_load_is_the_request_s_fault(url: str) -> None:
    r = httpx.post(
        f"{url}/judge",
        json={"code": "print(1)", "tests": [{"expected_output": "1"}], "comparison": "checker",
              "checker": "def check(:"},
        timeout=60,
    )  # fmt: skip
    assert r.status_code == 422 and "the checker cannot be loaded" in r.json()["detail"]


def test_call_based(url: str) -> None:
    code = "class Solution:\n    def twoSum(self, nums, target):\n" + (
        "        seen = {}\n        for i, x in enumerate(nums):\n"
        "            if target - x in seen: return [seen[target - x], i]\n"
        "            seen[x] = i\n"
    )
    tests = [
        {"args": [[2, 7, 11, 15], 9], "expected": [0, 1]},
        {"args": [[3, 2, 4], 6], "expected": [1, 2]},
        {"args": [[3, 3], 6], "expected": [0, 1]},
    ]
    answer = judge(url, code, fn_name="twoSum", tests=tests)
    assert answer["verdict"] == "accepted" and answer["passed"] == 3
    plain = "def add(a, b):\n    print('noise')\n    return a + b if a else -1"
    tests = [{"args": [1, 2], "expected": 3}, {"args": [0, 5], "expected": 5}]
    answer = judge(url, plain, fn_name="add", tests=tests)
    assert statuses(answer) == ["accepted", "wrong_answer"]
    assert answer["tests"][0]["stdout"] == "noise\n"
    assert answer["tests"][1]["difference"]["actual"] == "-1"


def test_call_based_with_a_preloaded_module(url: str) -> None:
    code = "import numpy as np\ndef total(xs):\n    return int(np.sum(np.array(xs)))"
    answer = judge(url, code, fn_name="total", tests=[{"args": [[1, 2, 3]], "expected": 6}])
    assert answer["verdict"] == "accepted", answer


def test_call_based_cannot_be_forged_by_printing(url: str) -> None:
    # without the per-request marker a printed "answer" is just output; exiting before the
    # function returns is no pass
    code = "import os, sys\ndef f(x):\n    print('\\x1eboxed-0:' + '4')\n    os._exit(0)"
    answer = judge(url, code, fn_name="f", tests=[{"args": [2], "expected": 4}])
    assert answer["verdict"] == "runtime_error", answer


def test_test_script(url: str) -> None:
    code = "def inc(x):\n    return x + 1\n"
    script = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n"
    answer = judge(url, code, test_script=script, entry_point="inc")
    assert answer["verdict"] == "accepted" and (answer["passed"], answer["total"]) == (1, 1)
    wrong = judge(url, "def inc(x):\n    return x + 2\n", test_script=script, entry_point="inc")
    assert wrong["verdict"] == "wrong_answer"
    # leaving before the check runs is never a pass
    early = judge(url, code + "import sys\nsys.exit(0)\n", test_script=script, entry_point="inc")
    assert early["verdict"] == "runtime_error"


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"tests": [{"input": "x" * (5 * 1024 * 1024), "expected_output": ""}]}, 413, "bytes"),
        ({"tests": [{"expected_output": "1"}] * 600}, 422, "600 tests"),
        ({"tests": [{"expected_output": "1"}] * 300, "timeout": 30}, 422, "time limits"),
        ({"tests": []}, 422, "no tests"),
        ({"tests": [{"args": [1]}]}, 422, "expected_output"),
        ({"tests": [{"expected_output": "1", "timeout": 99}]}, 422, "timeout"),
        ({"tests": [{"expected_output": "1"}], "comparison": "checker"}, 422, "checker"),
    ],
)
def test_caps_and_bad_requests(url: str, body: dict, status: int, says: str) -> None:
    r = httpx.post(f"{url}/judge", json={"code": "print(1)", **body}, timeout=60)
    assert r.status_code == status, r.text
    assert says in r.json()["detail"]


def test_cache_and_idempotent_retries(url: str) -> None:
    body = {"code": SUM_CPP, "language": "cpp", "tests": SUM_TESTS, "cache": True}
    first = httpx.post(f"{url}/judge", json=body, timeout=120).json()
    hit = httpx.post(f"{url}/judge", json=body, timeout=120).json()
    assert not first["cached"] and hit["cached"] and hit["verdict"] == "accepted"
    assert hit["tests"] == first["tests"] and hit["request_id"] != first["request_id"]
    # a timeout is never kept
    slow = {"code": "while True: pass", "tests": [{"expected_output": ""}], "timeout": 0.3}
    for _ in range(2):
        answer = httpx.post(f"{url}/judge", json={**slow, "cache": True}, timeout=60).json()
        assert answer["verdict"] == "timeout" and not answer["cached"]
    # the same X-Request-ID sent twice at once: one run, two identical answers
    sleepy = {"code": "import time; time.sleep(1); print(7)", "tests": [{"expected_output": "7"}]}
    headers = {"X-Request-ID": "judge-retry-" + str(id(body))}
    with httpx.Client(base_url=url, timeout=60) as client:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(
                pool.map(
                    lambda _: client.post("/judge", json=sleepy, headers=headers).json(), [0, 1]
                )
            )
    assert answers[0]["tests"] == answers[1]["tests"] and answers[0]["verdict"] == "accepted"


def test_the_clients_judge(url: str) -> None:
    with Client(url) as client:
        tests = [*SUM_TESTS[:2], {"input": "1 1", "expected_output": "3"}]
        result = client.judge(SUM_CPP, tests, language="cpp", stop_on_first_failure=None)
        assert (result.passed, result.total, result.accepted) == (2, 3, False)
        assert result.pass_rate == pytest.approx(2 / 3) and result.first_failure == 2
        assert client.execute("print(7)", language="python").stdout == "7\n"

    async def judge_async() -> float:
        async with AsyncClient(url) as client:
            code = "def f(x):\n    return x * 2"
            answer = await client.judge(code, [{"args": [3], "expected": 6}], fn_name="f")
            return answer.pass_rate

    assert asyncio.run(judge_async()) == 1.0


def test_code_reward_example(url: str) -> None:
    from examples.code_reward import make_code_reward

    reward = make_code_reward("python", url=url)
    tests = [
        {"input": "2 3\n", "expected_output": "5\n"},
        {"input": "7 8", "expected_output": "15"},
    ]
    completions = [
        "Here:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```",
        "```python\na, b = map(int, input().split())\nprint(a * b if a == 7 else a + b)\n```",
        [{"role": "assistant", "content": "```python\nprint(undefined)\n```"}],
    ]
    assert reward(completions=completions, tests=[tests] * 3) == [1.0, 0.5, 0.0]
    calls = {"fn_name": "f", "tests": [{"args": [2], "expected": 4}]}
    assert reward(completions=["def f(x):\n    return x * x"], tests=[calls]) == [1.0]
    # a service that is not there: no reward, not a zero
    down = Client(f"http://127.0.0.1:{free_port()}", max_attempts=1)
    assert make_code_reward(client=down)(completions=completions[:1], tests=[tests]) == [None]
