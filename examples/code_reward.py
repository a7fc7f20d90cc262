"""A code-RL reward: the share of a problem's tests a completion's program passes, judged by
boxed's ``POST /judge`` (compile once, every test in a fresh process, per-test verdicts).

    from examples.code_reward import make_code_reward

    reward = make_code_reward(language="cpp")  # or "python", "c", "bash"
    trainer = GRPOTrainer(..., reward_funcs=[reward])  # dataset column "tests"

``tests`` is the dataset's column of stdin/stdout cases, ``[{"input", "expected_output"}]``
per problem (``{"fn_name": ..., "tests": [{"args", "expected"}]}`` for LiveCodeBench's
call-based problems). The code is the last fenced block of the completion (the whole text when
there is none). A completion gets ``passed / total``; a compile error is 0.0. When the
*service* fails (down, overloaded past the client's retries), or answers with an ``outcome``
other than ``"code"`` (the verdict is not the program's, docs/failures.md), the completion
gets ``None``: no reward, never a zero that would teach the model that its right program was
wrong. docs/trl.md says which TRL versions honour that ``None``.

Within a GRPO group many completions are byte-identical: ``cache=True`` (the default here)
judges each distinct program once. Only sound for deterministic programs (docs/judging.md).
``python examples/code_reward.py`` judges three completions against a running service.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from boxed_client import BoxedError, BoxedHTTPError, Client

RewardFunc = Callable[..., list[float | None]]
FENCE = re.compile(r"```[\w+#-]*[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(completion: str | list[dict[str, Any]]) -> str:
    """The last fenced code block of the completion (a chat completion: its last message)."""
    text = completion if isinstance(completion, str) else str(completion[-1].get("content", ""))
    blocks = FENCE.findall(text)
    return (blocks[-1] if blocks else text).strip() or "\n"


def _request(tests: Any) -> tuple[list[Mapping[str, Any]], dict[str, Any]]:
    """The tests and the call-based options of one problem."""
    if isinstance(tests, Mapping):
        return list(tests.get("tests", [])), {"fn_name": tests.get("fn_name")}
    return list(tests), {}


def make_code_reward(
    language: str = "python",
    *,
    url: str | None = None,
    client: Client | None = None,
    timeout: float | None = None,
    cache: bool = True,
    max_concurrency: int = 16,
    **judge_options: Any,
) -> RewardFunc:
    """A reward function judging each completion with ``language``'s toolchain; ``timeout``
    is each test's wall limit, ``client`` a configured one (else one for ``url`` or
    ``$BOXED_URL``), ``judge_options`` go to ``POST /judge`` (``comparison``,
    ``float_tolerance``, ``memory_mb``...)."""
    client = client or Client(url or os.environ.get("BOXED_URL"), max_concurrency=max_concurrency)

    def one(completion: Any, tests: Any) -> float | None:
        cases, options = _request(tests)
        try:
            result = client.judge(
                extract_code(completion),
                cases,
                language=language,
                timeout=timeout,
                cache=cache,
                **options,
                **judge_options,
            )
        except BoxedHTTPError as exc:
            if exc.status_code < 500 and exc.status_code != 429:
                raise  # the request is wrong (a cap, a bad test): fix the data, not the model
            return None
        except BoxedError:
            return None  # the service failed: no reward rather than a wrong one
        if result.outcome != "code":
            return None  # an answer, but not the program's verdict: no reward either
        return result.pass_rate

    def code_reward(
        completions: Sequence[Any], tests: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        with ThreadPoolExecutor(max_concurrency) as pool:
            return list(pool.map(one, completions, tests))

    code_reward.__name__ = f"code_reward_{language}"
    return code_reward


if __name__ == "__main__":
    reward = make_code_reward("python")
    problem = [
        {"input": "2 3\n", "expected_output": "5\n"},
        {"input": "7 8", "expected_output": "15"},
    ]
    completions = [
        "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
        "```python\na, b = map(int, input().split())\nprint(a * b if a == 7 else a + b)\n```",
        "```python\nprint(undefined)\n```",
    ]
    print(reward(completions=completions, tests=[problem] * 3))  # [1.0, 0.5, 0.0]
