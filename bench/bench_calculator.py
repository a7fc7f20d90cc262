"""Time per expression of the safe calculator over a realistic mix of calculator-tool calls.

Run: ``python bench/bench_calculator.py``. Each round evaluates every expression once (categories
interleaved, so machine noise spreads evenly); rounds repeat until ROUNDS or TIME_BUDGET_SECONDS.
Prints p50/p99/max per category: what a ``/calculate`` request spends inside the library.
"""

from __future__ import annotations

import math
import platform
import time

from exec_server.calculator import CalculationError, evaluate

ROUNDS = 1000
TIME_BUDGET_SECONDS = 20.0  # keeps the whole run under ~30 s even on a loaded machine
SLOWEST_SHOWN = 5

# What models send to the calculator tool in math environments.
BENIGN = [
    "2*(3+4)**2 - sqrt(16)/2",
    "sqrt(2)*pi",
    "math.sqrt(144) + math.log(100, 10)",
    "(3.5*12)/7",
    "1234*5678",
    "2**64",
    "7/2",
    "-7 % 3",
    "round(2.675, 2)",
    "round(100/3, 4)",
    "factorial(20)",
    "comb(52, 5)",
    "perm(10, 3)",
    "gcd(1071, 462)",
    "lcm(4, 6, 10)",
    "math.sin(math.pi/6)**2 + math.cos(math.pi/6)**2",
    "atan2(1, 1) * 180 / pi",
    "exp(-0.5) * 100",
    "log2(1024) + log10(1e6)",
    "hypot(3, 4)",
    "abs(-17.5) + min(3, 4, 1.5) + max(2, 9)",
    "1e-3 * 2.5e4",
    "1_000_000 / 7",
    "floor(17/3) * 3 + 17 % 3",
    "isqrt(10**12 + 1)",
    "0.1 + 0.2",
    "(1 + 0.05/12)**(12*30)",
    "degrees(acos(0.5))",
    "2*pi*6371*cos(radians(48.85))",
    "1**2 + 2**2 + 3**2 + 4**2 + 5**2 + 6**2 + 7**2 + 8**2 + 9**2 + 10**2",
]

# Accepted but as large as the caps allow: the worst legitimate work.
HEAVY = [
    "10**4299",
    "factorial(1500)",
    "2**14000 - 1",
    "comb(10**1000, 4)",
    "(10**4299) // 7 % 1000",
    "isqrt(10**4299)",
    "perm(1000, 500)",
    "lcm(2**7000 - 1, 3**4000)",
]

# Escapes, resource bombs and errors: all refused.
HOSTILE = [
    "().__class__.__bases__[0].__subclasses__()",
    "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]",
    "(lambda: 1)()",
    "__import__('os').system('id')",
    "__\uff49\uff4d\uff50\uff4f\uff52\uff54__('os').system('id')",
    "math.__loader__",
    "1; 2",
    "9**9**9",
    "9**9**9**9",
    "((10**10000)**10000)**10000",
    "'1'*10**10",
    "[0]*10**10",
    "factorial(10**7)",
    "comb(10**6, 5*10**5)",
    "9" * 5000,
    "-" * 100_000 + "1",
    "1" + "+1" * 100_000,
    "(" * 300 + "1" + ")" * 300,
    "-" * 999 + "1",
    "1+" * (10 * 1024 * 1024) + "1",
    "1e999999",
    "1/0",
    "sqrt(-1) + log(0)",
    "math.exp(1000)",
    "(-8)**(1/3)",
]

CATEGORIES = {"benign": BENIGN, "heavy (accepted)": HEAVY, "hostile (refused)": HOSTILE}


def percentile(sorted_values: list[int], percent: float) -> int:
    """Nearest-rank percentile."""
    rank = max(math.ceil(percent / 100 * len(sorted_values)), 1)
    return sorted_values[rank - 1]


def time_one(expr: str) -> int:
    started = time.perf_counter_ns()
    try:
        evaluate(expr)
    except CalculationError:
        pass
    return time.perf_counter_ns() - started


def check_categories() -> None:
    """The table is only meaningful if each category behaves as its name says."""
    for name, expressions in CATEGORIES.items():
        for expr in expressions:
            try:
                evaluate(expr)
                accepted = True
            except CalculationError:
                accepted = False
            if accepted != (name != "hostile (refused)"):
                raise SystemExit(f"{name}: unexpected outcome for {expr[:60]!r}")


def main() -> None:
    check_categories()
    timings: dict[str, list[int]] = {name: [] for name in CATEGORIES}
    per_expression: dict[str, list[int]] = {}
    rounds = 0
    started = time.perf_counter()
    while rounds < ROUNDS and time.perf_counter() - started < TIME_BUDGET_SECONDS:
        for name, expressions in CATEGORIES.items():
            for expr in expressions:
                elapsed_ns = time_one(expr)
                timings[name].append(elapsed_ns)
                per_expression.setdefault(expr, []).append(elapsed_ns)
        rounds += 1
    timings["all"] = [t for name in CATEGORIES for t in timings[name]]
    expression_counts = {name: len(expressions) for name, expressions in CATEGORIES.items()}
    expression_counts["all"] = sum(expression_counts.values())
    elapsed = time.perf_counter() - started

    print(f"python {platform.python_version()}, {rounds} rounds in {elapsed:.1f} s")
    print(f"{'category':<20} {'exprs':>5} {'calls':>7} {'p50 us':>8} {'p99 us':>8} {'max us':>8}")
    for name, values in timings.items():
        values.sort()
        p50, p99, worst = (percentile(values, 50), percentile(values, 99), values[-1])
        print(
            f"{name:<20} {expression_counts[name]:>5} {len(values):>7} "
            f"{p50 / 1000:>8.1f} {p99 / 1000:>8.1f} {worst / 1000:>8.1f}"
        )
    medians = {expr: percentile(sorted(values), 50) for expr, values in per_expression.items()}
    print("slowest expressions by p50:")
    for expr in sorted(medians, key=medians.get, reverse=True)[:SLOWEST_SHOWN]:
        shown = expr if len(expr) <= 50 else f"{expr[:40]}... ({len(expr)} chars)"
        print(f"  {medians[expr] / 1000:>8.1f} us  {shown!r}")


if __name__ == "__main__":
    main()
