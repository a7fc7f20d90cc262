"""verl's own SandboxFusion client against a real boxed: the file verl ships, loaded by path.

``verl/utils/reward_score/sandbox_fusion/utils.py`` needs only ``requests`` (``import verl``
would pull in torch), so it is taken from verl's wheel, which ``scripts/test`` downloads
(``pip download verl==0.9.1 --no-deps``). verl's ``call_sandbox_api`` retries only HTTP 504
(three attempts, 1 s then 2 s apart) and scores every other failure as a failed test: boxed's
``/run_code`` answers its retryable infrastructure failures with 504 so verl waits them out.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import logging
import time
import zipfile
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from tests.conftest import running_service

pytestmark = pytest.mark.docker

WHEELS = Path(__file__).resolve().parents[1] / ".cache" / "wheels"
INSIDE = "verl/utils/reward_score/sandbox_fusion/utils.py"
ADD = "a, b = map(int, input().split())\nprint(a + b)\n"


@pytest.fixture(scope="module")
def verl_client(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    wheels = sorted(WHEELS.glob("verl-*.whl"))
    assert wheels, f"no verl wheel in {WHEELS}: bash scripts/test downloads it"
    folder = tmp_path_factory.mktemp("verl")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        path = Path(wheel.extract(INSIDE, folder))
    spec = importlib.util.spec_from_file_location("verl_sandbox_fusion_utils", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_verl_scores_right_and_wrong_programs_through_run_code(verl_client: ModuleType) -> None:
    with running_service(BOXED_POOL_SIZE="1") as service:
        tests = {"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]}
        right, _ = verl_client.check_correctness(
            f"{service.url}/run_code", tests, ADD, timeout=10, memory_limit_mb=256
        )
        wrong, _ = verl_client.check_correctness(
            f"{service.url}/run_code", tests, "print(3)", timeout=10, memory_limit_mb=256
        )
    assert right == [True, True]
    assert wrong == [True, False]


def test_an_overloaded_boxed_is_waited_out_by_verl_never_scored_as_a_failure(
    verl_client: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """One slot, no queue: while a slow snippet holds the slot, verl's call is answered 504
    with Retry-After (not 429, which verl would score as a failed test); verl retries and gets
    the code's own answer once the slot is free."""
    with running_service(
        BOXED_POOL_SIZE="1", BOXED_MAX_CONCURRENCY="1", BOXED_MAX_QUEUE="0"
    ) as service:
        slow = "import time\ntime.sleep(1.5)\nprint('slow')"
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            holder = pool.submit(
                httpx.post, f"{service.url}/execute", json={"code": slow}, timeout=30
            )
            for _ in range(100):  # until the slow snippet holds the one slot
                if httpx.get(f"{service.url}/readyz").json()["running"] == 1:
                    break
            busy = httpx.post(f"{service.url}/run_code", json={"code": "print(1)"}, timeout=10)
            with caplog.at_level(logging.WARNING):
                answer, error = verl_client.call_sandbox_api(
                    f"{service.url}/run_code", ADD, "20 22\n", 10, 10, 256
                )
            assert holder.result().json()["stdout"] == "slow\n"
    assert busy.status_code == 504 and int(busy.headers["Retry-After"]) >= 1, busy.text
    assert busy.json()["failure"] == {"code": "overloaded", "retryable": True}
    assert error is None and answer is not None, error
    assert answer["status"] == "Success" and answer["run_result"]["stdout"] == "42\n", answer
    assert answer["outcome"] == "code"
    assert "Gateway Timeout (504)" in caplog.text  # verl did meet the 504 and retried


def test_the_custom_reward_over_judge_scores_the_code_and_never_pays_for_a_failure() -> None:
    """examples/verl_reward.py: a number only from the code's verdict; boxed unreachable past
    the client's deadline raises (verl cannot mask one sample: the step stops loudly)."""
    from examples.verl_reward import RewardUnavailable, compute_score
    from exec_server.client import Client
    from tests.service import free_port

    tests = json.dumps({"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]})
    with running_service(BOXED_POOL_SIZE="1") as service, Client(service.url) as client:
        right = compute_score("codecontests", f"```python\n{ADD}```", tests, client=client)
        wrong = compute_score("codecontests", "```python\nprint(3)\n```", tests, client=client)
    assert right == {"score": 1.0, "verdict": "accepted", "outcome": "code"}
    assert (wrong["score"], wrong["verdict"]) == (0.5, "wrong_answer")
    nobody = Client(f"http://127.0.0.1:{free_port()}", deadline=2, max_attempts=100)
    started = time.monotonic()
    with nobody, pytest.raises(RewardUnavailable):
        compute_score("codecontests", f"```python\n{ADD}```", tests, client=nobody)
    assert time.monotonic() - started < 10
