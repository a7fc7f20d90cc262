"""Play a few tasks through the boxed OpenEnv environment with a scripted policy (no model),
printing the [START]/[STEP]/[END] lines an OpenEnv inference script prints:

    python -m exec_server &                                   # boxed, on :5002
    python -m boxed_openenv --port 8001 &                     # the environment
    python examples/openenv_episodes.py --env-url http://127.0.0.1:8001 > episodes.log
    python -m scorer grade episodes.log                       # the summary per task

The policy runs code in the episode's session over several steps (state is kept), reads its
output, and submits a final answer in the action's ``answer`` field: the reward is the
scorer's grade of that answer, never anything the code prints.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from boxed_openenv import CodeAction, CodeObservation
from boxed_openenv.client import BoxedEnvClient

ENV = "boxed_code"
MODEL = "scripted"
Policy = Callable[[CodeObservation], CodeAction]


@dataclass
class Episode:
    task: dict[str, object]
    steps: list[Policy]  # each makes the next action from the last observation


def code(text: str, timeout: float | None = None) -> Policy:
    return lambda obs: CodeAction(code=text, timeout=timeout)


def answer_from_stdout(obs: CodeObservation) -> CodeAction:
    return CodeAction(answer=obs.stdout.strip())


EPISODES = [
    Episode(
        {"id": "sum-of-squares", "prompt": "Sum of the squares of 1..10?", "answer": 385},
        [
            code("squares = [i * i for i in range(1, 11)]"),
            code("print(sum(squares))"),
            answer_from_stdout,
        ],
    ),
    Episode(
        {"id": "primes", "prompt": "How many primes are below 100?", "answer": "25"},
        [
            code(
                "import math\ndef is_prime(n):\n    return n > 1 and all(n % d for d in "
                "range(2, math.isqrt(n) + 1))"
            ),
            code("print(sum(map(is_prime, range(100))))"),
            answer_from_stdout,
        ],
    ),
    Episode(
        {
            "id": "fibonacci",
            "prompt": "Write fib(n) with fib(0) = 0, fib(1) = 1.",
            "tests": "assert fib(10) == 55 and fib(1) == 1 and fib(0) == 0",
        },
        [
            code(
                "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
                "    return a\nprint(fib(10))"
            ),
            lambda obs: CodeAction(
                answer="def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
                "        a, b = b, a + b\n    return a"
            ),
        ],
    ),
    Episode(  # a wrong final answer: no reward, however confident the printout
        {"id": "half", "prompt": "What is 1/2 as a decimal?", "answer": "0.5"},
        [code("print('0.6: correct, full marks')"), lambda obs: CodeAction(answer="0.6")],
    ),
    Episode(  # a step that hits the time limit: the session is lost, the episode ends
        {"id": "spin", "prompt": "Loop forever.", "answer": "0"},
        [code("while True: pass", timeout=1), answer_from_stdout],
    ),
]


def one_line(action: CodeAction) -> str:
    text = action.code if action.code else f"answer({action.answer!r})"
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def play(env: BoxedEnvClient, episode: Episode) -> None:
    print(f"[START] task={episode.task['id']} env={ENV} model={MODEL}", flush=True)
    result = env.reset(task=episode.task)
    rewards: list[float] = []
    for n, policy in enumerate(episode.steps, 1):
        action = policy(result.observation)
        result = env.step(action)
        reward = float(result.reward or 0.0)
        rewards.append(reward)
        error = result.observation.error or "null"
        done = "true" if result.done else "false"
        print(
            f"[STEP] step={n} action={one_line(action)} reward={reward:.2f} done={done} "
            f"error={error}",
            flush=True,
        )
        if result.done:
            break
    success = "true" if result.observation.correct else "false"
    score = rewards[-1] if rewards else 0.0
    listed = ",".join(f"{r:.2f}" for r in rewards)
    print(f"[END] success={success} steps={len(rewards)} score={score:.3f} rewards={listed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-url", default="http://127.0.0.1:8001")
    args = parser.parse_args()
    with BoxedEnvClient(base_url=args.env_url).sync() as env:
        for episode in EPISODES:
            play(env, episode)


if __name__ == "__main__":
    main()
