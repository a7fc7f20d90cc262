"""Play a few tasks through the boxed OpenEnv environment with a scripted policy (no model),
printing the [START]/[STEP]/[END] lines an OpenEnv inference script prints:

    python -m exec_server &                                   # boxed, on :5002
    python -m boxed_openenv --port 8001 &                     # the environment
    python examples/openenv_episodes.py --env-url http://127.0.0.1:8001 > episodes.log
    python -m scorer grade episodes.log                       # the summary per task

The policy runs code in the episode's session over several steps (state is kept), reads its
output, and submits a final answer in the action's ``answer`` field: the reward is the
scorer's grade of that answer, never anything the code prints.

Each ``[STEP]`` line carries the step's ``outcome`` (and ``failure`` code). A step that is not
the code's result (a lost sandbox, boxed unreachable, a grader that could not decide) logs
``reward=null`` and ends its episode with ``success=null score=null``: a trainer masks it,
it never pays 0 for it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from boxed_openenv import CodeAction, CodeObservation, EnvUnavailable
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


def number(value: float | None, digits: int = 2) -> str:
    """A reward as logged: ``null`` for no reward."""
    return "null" if value is None else f"{value:.{digits}f}"


def step_line(n: int, action: CodeAction, obs: CodeObservation) -> str:
    failure = obs.failure.code.value if obs.failure is not None else "null"
    done = "true" if obs.done else "false"
    return (
        f"[STEP] step={n} action={one_line(action)} reward={number(obs.reward)} done={done} "
        f"outcome={obs.outcome.value} failure={failure} error={obs.error or 'null'}"
    )


def unavailable(exc: EnvUnavailable) -> CodeObservation:
    """The step boxed could not take, as the log shows it: no reward, the episode over."""
    return CodeObservation(
        status="lost",
        error=exc.detail.replace("\n", " "),
        done=True,
        reward=None,
        outcome=exc.outcome,
        failure={"code": exc.failure.code, "retryable": exc.failure.retryable},
    )


def play(env: BoxedEnvClient, episode: Episode) -> None:
    print(f"[START] task={episode.task['id']} env={ENV} model={MODEL}", flush=True)
    rewards: list[float | None] = []
    try:
        obs = env.reset(task=episode.task).observation
    except EnvUnavailable as exc:  # no session: the episode never started, nothing to pay
        obs = unavailable(exc)
    for n, policy in enumerate(episode.steps, 1):
        if obs.done:
            break
        action = policy(obs)
        try:
            obs = env.step(action).observation
        except EnvUnavailable as exc:
            obs = unavailable(exc)
        rewards.append(obs.reward)
        print(step_line(n, action, obs), flush=True)
    masked = obs.outcome.value != "code"
    success = "null" if masked else ("true" if obs.correct else "false")
    score = None if masked else (rewards[-1] if rewards else 0.0)
    listed = ",".join(number(r) for r in rewards)
    print(
        f"[END] success={success} steps={len(rewards)} score={number(score, 3)} "
        f"rewards={listed} outcome={obs.outcome.value}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " ").rstrip(":") + ".",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--env-url",
        default="http://127.0.0.1:8001",
        help="the boxed OpenEnv server (python -m boxed_openenv --port 8001)",
    )
    args = parser.parse_args()
    with BoxedEnvClient(base_url=args.env_url).sync() as env:
        for episode in EPISODES:
            play(env, episode)


if __name__ == "__main__":
    main()
