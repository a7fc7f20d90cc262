"""Safe arithmetic for the model-facing ``calculator`` tool.

Environments used to run ``eval(expr, {"__builtins__": {}}, {"math": math})``, which is escapable
(``().__class__.__bases__[0].__subclasses__()``) and hangs on ``9**9**9**9``. Here the expression
is parsed with ``ast.parse``, checked against an allow-list, and run by a small tree-walking
interpreter that bounds the size of every result *before* computing it. The value is exactly what
Python gives for the same expression; anything else is a :class:`CalculationError` whose message
is meant to be shown to the model.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import time
from collections.abc import Callable

__all__ = [
    "DEADLINE_SECONDS",
    "MAX_COMBINATORIAL_BITS",
    "MAX_DEPTH",
    "MAX_EXPR_CHARS",
    "MAX_INT_BITS",
    "MAX_INT_DIGITS",
    "MAX_NODES",
    "CalculationError",
    "evaluate",
]

# Real calculator calls are under 200 characters. The cap is checked before ast.parse: CPython's
# parser recurses on long unary/operator chains ('+0' * 200000 overflows the C stack, bpo-32758).
MAX_EXPR_CHARS = 1000

# Nesting of expression nodes (parentheses alone add none). The interpreter recurses once per
# level, so 100 stays far below Python's default recursion limit (1000) even when called from deep
# inside a web framework; a left-nested sum of 100 terms is still accepted.
MAX_DEPTH = 100

# Numbers, operations, names and calls (a 100-term sum is ~200). Every node does at most one
# operation of bounded size (below), so this bounds the total work; it is a second line behind
# MAX_EXPR_CHARS, which alone would allow ~500.
MAX_NODES = 300

# Integers (results and intermediates) stay below 10**MAX_INT_DIGITS. 4300 is CPython's default
# int<->str limit (sys.int_info.default_max_str_digits): every accepted value can be written by
# json.dumps and read back by json.loads, and each operation works on numbers of at most ~14,300
# bits: well under a millisecond, ~3 ms for the slowest (comb(14280, 7140), k near n/2).
MAX_INT_DIGITS = 4300
_INT_LIMIT = 10**MAX_INT_DIGITS
# Every accepted integer has at most this many bits; 2**MAX_INT_BITS is already too large.
MAX_INT_BITS = _INT_LIMIT.bit_length()

# comb, perm and factorial are the operations whose cost is not bounded well by the size of their
# result: comb(14280, 7140), just under the cap, takes 3-8 ms where a product of the same size takes
# 0.06 ms. Their integer results may total this many bits per expression (four cap-sized results):
# an expression of them costs at most ~35 ms, and the same expression always gets the same answer.
MAX_COMBINATORIAL_BITS = 4 * MAX_INT_BITS

# Backstop only, for costs nobody foresaw: the caps above bound every operation we know (the
# costliest expression we could build within them takes ~25 ms of CPU). Checked between nodes, in
# this thread's CPU time and not the wall clock, and ten times what the caps allow: a loaded host
# that preempts the service, or a garbage collection (65 ms in a test process), must never turn a
# correct expression into an error.
DEADLINE_SECONDS = 0.5

# Names quoted in error messages are cut to this length, so a message stays one short line.
_MAX_QUOTED_CHARS = 40

_MATH_FUNCTION_NAMES = (
    "acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees erf erfc "
    "exp exp2 expm1 fabs factorial floor fmod gamma gcd hypot isqrt lcm ldexp lgamma log log10 "
    "log1p log2 nextafter perm pow radians remainder sin sinh sqrt tan tanh trunc ulp"
).split()
# inf and nan are left out on purpose: every result must be finite.
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


class CalculationError(ValueError):
    """The expression was refused or could not be evaluated; ``str(err)`` says why, in words
    meant for the model that wrote it."""


def evaluate(expr: str) -> int | float:
    """Return Python's own value for ``expr``, or raise :class:`CalculationError`.

    Never raises anything else and never runs long: sizes are bounded before anything is parsed
    or computed, so hostile input costs microseconds.
    """
    deadline = _Deadline(DEADLINE_SECONDS)
    try:
        source = _checked_source(expr)
        tree = _parse(source)
        _check_tree(tree, source)
        return _Interpreter(deadline).run(tree.body)
    except CalculationError:
        raise
    except Exception as exc:  # Python's own arithmetic errors, plus anything unforeseen.
        raise CalculationError(_describe_python_error(exc)) from exc


# --- Input text ---------------------------------------------------------------------------------


def _checked_source(expr: object) -> str:
    """Cheap checks on the raw text, done before the parser ever sees it."""
    if not isinstance(expr, str):
        raise CalculationError("expression must be a string")
    if len(expr) > MAX_EXPR_CHARS:
        raise CalculationError(f"expression too long (max {MAX_EXPR_CHARS} characters)")
    if not expr.isascii():
        # Python NFKC-normalises identifiers: '__import__' spelt in fullwidth letters (U+FF49...)
        # reaches the parser as '__import__'. ASCII only makes what we check what Python reads.
        position, char = next((i, c) for i, c in enumerate(expr) if not c.isascii())
        raise CalculationError(
            f"only ASCII characters are allowed (found {ascii(char)} at position {position})"
        )
    for position, char in enumerate(expr):
        if char < " " and char not in "\t\n\r":
            raise CalculationError(f"character {ascii(char)} at position {position} is not allowed")
    # Python reads '\r\n' and '\r' as '\n'; doing it here keeps line/column offsets in step.
    source = expr.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not source:
        raise CalculationError("empty expression")
    return source


def _parse(source: str) -> ast.Expression:
    try:
        return ast.parse(source, mode="eval")
    except SyntaxError as exc:
        where = f"column {exc.offset}"
        if exc.lineno and exc.lineno > 1:
            where = f"line {exc.lineno}, {where}"
        raise CalculationError(f"syntax error at {where}: {exc.msg}") from exc
    except (RecursionError, MemoryError) as exc:
        raise CalculationError("expression too complex") from exc


# --- Allow-list check ---------------------------------------------------------------------------

_BINARY_OPERATORS: dict[type[ast.operator], Callable[[object, object], object]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY_OPERATORS: dict[type[ast.unaryop], Callable[[object], object]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
# Decimal int/float/scientific literals only: hex, octal and binary are outside the language.
_DECIMAL_LITERAL = re.compile(r"[0-9_.eE+-]+")
# Friendly names for the refused syntax, shown to the model.
_REFUSED_SYNTAX: dict[type[ast.AST], str] = {
    ast.Subscript: "subscripts",
    ast.Slice: "subscripts",
    ast.List: "lists",
    ast.Tuple: "tuples",
    ast.Set: "sets",
    ast.Dict: "dicts",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.Lambda: "lambdas",
    ast.NamedExpr: "assignment expressions (:=)",
    ast.IfExp: "conditional expressions",
    ast.Compare: "comparisons",
    ast.BoolOp: "boolean operators (and, or)",
    ast.JoinedStr: "strings",
    ast.FormattedValue: "strings",
    ast.Starred: "argument unpacking (*)",
}


def _check_tree(tree: ast.Expression, source: str) -> None:
    """Refuse anything outside the language, and trees too deep or too big to evaluate safely.

    Iterative (an explicit stack), so a deep tree cannot exhaust the Python stack here.
    """
    line_starts = [0]
    for line in source.split("\n")[:-1]:
        line_starts.append(line_starts[-1] + len(line) + 1)
    pending: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    seen = 0
    while pending:
        node, depth = pending.pop()
        seen += 1
        if seen > MAX_NODES:
            raise CalculationError(
                f"expression too large (max {MAX_NODES} numbers, names and operations)"
            )
        if depth > MAX_DEPTH:
            raise CalculationError(f"expression too deeply nested (max depth {MAX_DEPTH})")
        children = _allowed_children(node, source, line_starts)
        pending.extend((child, depth + 1) for child in children)


def _allowed_children(node: ast.AST, source: str, line_starts: list[int]) -> list[ast.expr]:
    """Check one node against the allow-list and return the sub-expressions still to check."""
    if isinstance(node, ast.Constant):
        _check_literal(node, source, line_starts)
        return []
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY_OPERATORS:
            raise CalculationError(_refused_operator(node.op))
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY_OPERATORS:
            raise CalculationError(_refused_operator(node.op))
        return [node.operand]
    if isinstance(node, ast.Call):
        _function_for(node.func)
        if node.keywords:
            raise CalculationError("keyword arguments are not allowed")
        return list(node.args)
    if isinstance(node, ast.Name | ast.Attribute):
        _constant_for(node)
        return []
    syntax = _REFUSED_SYNTAX.get(type(node), f"{type(node).__name__} expressions")
    raise CalculationError(f"{syntax} are not allowed")


def _check_literal(node: ast.Constant, source: str, line_starts: list[int]) -> None:
    value = node.value
    if isinstance(value, bool) or value is None or value is Ellipsis:
        raise CalculationError(f"{value!r} is not allowed (numbers only)")
    if isinstance(value, str | bytes):
        raise CalculationError("strings are not allowed")
    if isinstance(value, complex):
        raise CalculationError("complex numbers are not allowed")
    # ASCII source, so the parser's UTF-8 byte offsets are character offsets.
    start = line_starts[node.lineno - 1] + node.col_offset
    end = line_starts[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
    text = source[start:end]
    if not _DECIMAL_LITERAL.fullmatch(text):
        raise CalculationError(f"only decimal numbers are allowed (got {_quoted(text)})")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculationError(f"non-finite result: {_quoted(text)} is beyond the float range")


def _refused_operator(op: ast.AST) -> str:
    if isinstance(op, ast.Not):
        return "boolean operators (not) are not allowed"
    if isinstance(op, ast.MatMult):
        return "operator '@' is not allowed"
    return "bitwise operators are not allowed"


def _quoted(text: str) -> str:
    if len(text) > _MAX_QUOTED_CHARS:
        text = text[: _MAX_QUOTED_CHARS - 3] + "..."
    return f"'{text}'"


def _is_math_module(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "math"


def _function_for(func: ast.expr) -> Callable[..., object]:
    """The callable a call node names: a bare allowed name or ``math.<allowed name>``."""
    if isinstance(func, ast.Name) and func.id in _FUNCTIONS:
        return _FUNCTIONS[func.id]
    if isinstance(func, ast.Attribute) and _is_math_module(func.value):
        if func.attr in _MATH_FUNCTIONS:
            return _MATH_FUNCTIONS[func.attr]
        if func.attr in _CONSTANTS:
            raise CalculationError(f"'math.{func.attr}' is a number, not a function")
        raise CalculationError(f"name {_quoted('math.' + func.attr)} is not allowed")
    if isinstance(func, ast.Name):
        if func.id in _CONSTANTS:
            raise CalculationError(f"'{func.id}' is a number, not a function")
        raise CalculationError(f"name {_quoted(func.id)} is not allowed")
    if isinstance(func, ast.Attribute):
        raise CalculationError("attribute access is not allowed (only math.<name>)")
    raise CalculationError("only named functions can be called, e.g. sqrt(2) or math.sqrt(2)")


def _constant_for(node: ast.Name | ast.Attribute) -> float:
    """The value a name used as a number stands for: pi, e, tau (bare or ``math.``-prefixed)."""
    if isinstance(node, ast.Name):
        name = node.id
    elif _is_math_module(node.value):
        name = node.attr
        if name not in _CONSTANTS and name not in _MATH_FUNCTIONS:
            raise CalculationError(f"name {_quoted('math.' + name)} is not allowed")
    else:
        raise CalculationError("attribute access is not allowed (only math.<name>)")
    if name in _CONSTANTS:
        return _CONSTANTS[name]
    if name in _FUNCTIONS:
        raise CalculationError(f"'{name}' is a function: call it, e.g. {name}(2)")
    if name == "math":
        raise CalculationError("'math' is not a number: use e.g. math.sqrt(2) or math.pi")
    if name in ("inf", "nan"):
        raise CalculationError(f"name '{name}' is not allowed (results must be finite)")
    raise CalculationError(f"name {_quoted(name)} is not allowed")


# --- Size checks, done before computing ---------------------------------------------------------


def _too_large() -> CalculationError:
    return CalculationError(f"result too large (integers are limited to {MAX_INT_DIGITS} digits)")


def _check_multiply(left: object, right: object) -> None:
    # A product of a b-bit and a c-bit integer is at least 2**(b + c - 2).
    if type(left) is int and type(right) is int:
        if left.bit_length() + right.bit_length() - 2 >= MAX_INT_BITS:
            raise _too_large()


def _check_power(base: object, exponent: object) -> None:
    # |base| ** exponent == 2 ** (exponent * log2|base|); refuse when that is certainly past the
    # cap (one bit of slack covers float rounding), so what is computed has at most ~cap bits.
    # ((10**10000)**10000)**10000 is refused at its first step, 10**10000.
    if type(base) is int and type(exponent) is int and exponent > 0 and abs(base) > 1:
        if exponent.bit_length() > 32 or exponent * math.log2(abs(base)) > MAX_INT_BITS + 1:
            raise _too_large()


def _log2_factorial(n: int) -> float:
    return math.lgamma(n + 1) / math.log(2)


def _check_factorial(n: object) -> None:
    if type(n) is int and n > 0:
        # n! >= 2**n for n >= 4, so a larger n is past the cap without computing lgamma.
        if n > MAX_INT_BITS or _log2_factorial(n) > MAX_INT_BITS + 1:
            raise _too_large()


def _check_comb(n: object, k: object) -> None:
    if type(n) is int and type(k) is int and 0 <= k <= n:
        k = min(k, n - k)
        # comb(n, k) >= (n/k)**k, and at most (e*n/k)**k: what is computed is bounded too.
        if k > 0 and k * (math.log2(n) - math.log2(k)) > MAX_INT_BITS + 1:
            raise _too_large()


def _check_perm(n: object, k: object) -> None:
    if type(n) is int and type(k) is int and 0 < k <= n:
        _check_factorial(k)  # perm(n, k) >= k!
        # perm(n, k) >= (n - k + 1)**k, and at most n**k.
        if k * math.log2(n - k + 1) > MAX_INT_BITS + 1:
            raise _too_large()


def _factorial(*args: object) -> object:
    if len(args) == 1:
        _check_factorial(args[0])
    return math.factorial(*args)


def _comb(*args: object) -> object:
    if len(args) == 2:
        _check_comb(*args)
    return math.comb(*args)


def _perm(*args: object) -> object:
    if len(args) == 1:
        _check_factorial(args[0])
    elif len(args) == 2:
        _check_perm(*args)
    return math.perm(*args)


def _lcm(*args: object) -> object:
    # math.lcm folds pairwise; doing the same here checks every partial result, so no step works
    # on numbers past the cap (hundreds of coprime arguments would otherwise multiply up).
    if len(args) < 2:
        return math.lcm(*args)
    result = args[0]
    for arg in args[1:]:
        # Each step multiplies two numbers under the cap: cheap, then checked.
        result = math.lcm(result, arg)
        _check_result(result)
    return result


def _round(*args: object) -> object:
    # int.__round__ computes 10**-ndigits: round(1, -10**9) would never finish. Every accepted
    # int is below 10**MAX_INT_DIGITS, so past that many digits Python's answer is exactly 0.
    if len(args) == 2 and type(args[0]) is int and type(args[1]) is int:
        if args[1] < -MAX_INT_DIGITS:
            return 0
    return round(*args)


_MATH_FUNCTIONS: dict[str, Callable[..., object]] = {
    name: getattr(math, name) for name in _MATH_FUNCTION_NAMES if hasattr(math, name)
}
_MATH_FUNCTIONS.update(factorial=_factorial, comb=_comb, perm=_perm, lcm=_lcm)
_COMBINATORIAL = frozenset((_factorial, _comb, _perm))
_FUNCTIONS: dict[str, Callable[..., object]] = {
    **_MATH_FUNCTIONS,
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
}


def _check_result(value: object) -> None:
    """Every intermediate result must be a finite float or an int within the cap."""
    if type(value) is int:
        if not -_INT_LIMIT < value < _INT_LIMIT:
            raise _too_large()
    elif type(value) is float:
        if not math.isfinite(value):
            raise CalculationError("non-finite result (overflow to infinity or not a number)")
    elif isinstance(value, complex):
        raise CalculationError(
            "math domain error: the result would be a complex number "
            "(negative number to a fractional power)"
        )
    else:
        raise CalculationError(f"unexpected result type {type(value).__name__}")


# --- Evaluation ---------------------------------------------------------------------------------


class _Deadline:
    """``seconds`` of this thread's CPU time from now.

    The thread's CPU clock is a system call (~0.4 us) and the wall clock is not (~0.1 us), so the
    wall clock is read first: a thread cannot have used more CPU than the time that has passed.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.wall_started = time.perf_counter()
        self.cpu_started = time.thread_time()

    def passed(self) -> bool:
        return (
            time.perf_counter() - self.wall_started > self.seconds
            and time.thread_time() - self.cpu_started > self.seconds
        )


class _Interpreter:
    """Walks a checked tree; recursion depth is bounded by MAX_DEPTH."""

    def __init__(self, deadline: _Deadline) -> None:
        self.deadline = deadline
        self.combinatorial_bits = 0

    def run(self, node: ast.expr) -> int | float:
        if self.deadline.passed():
            raise CalculationError(
                f"evaluation took too long (max {self.deadline.seconds} s of CPU time)"
            )
        value = self._compute(node)
        _check_result(value)
        return value  # type: ignore[return-value]  # _check_result proved int | float

    def _compute(self, node: ast.expr) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            left, right = self.run(node.left), self.run(node.right)
            if isinstance(node.op, ast.Mult):
                _check_multiply(left, right)
            elif isinstance(node.op, ast.Pow):
                _check_power(left, right)
            return _BINARY_OPERATORS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp):
            return _UNARY_OPERATORS[type(node.op)](self.run(node.operand))
        if isinstance(node, ast.Call):
            function = _function_for(node.func)
            value = function(*[self.run(arg) for arg in node.args])
            if function in _COMBINATORIAL and type(value) is int:
                self._charge_combinatorial(value)
            return value
        if isinstance(node, ast.Name | ast.Attribute):
            return _constant_for(node)
        raise CalculationError(f"{type(node).__name__} expressions are not allowed")

    def _charge_combinatorial(self, value: int) -> None:
        # Charged after the call, so one call (a few ms at most) can go past the budget.
        self.combinatorial_bits += value.bit_length()
        if self.combinatorial_bits > MAX_COMBINATORIAL_BITS:
            raise CalculationError(
                "too much combinatorial work: the results of comb, perm and factorial in one "
                f"expression may total at most {MAX_COMBINATORIAL_BITS} bits "
                f"(about {int(MAX_COMBINATORIAL_BITS * math.log10(2))} digits)"
            )


def _describe_python_error(exc: Exception) -> str:
    """Python's own exception, in words for the model."""
    if isinstance(exc, ZeroDivisionError):
        return "division by zero"
    if isinstance(exc, OverflowError):
        return "result too large (beyond the float range, about 1.8e308)"
    if isinstance(exc, ValueError):
        message = str(exc)
        return message if message == "math domain error" else f"math domain error: {message}"
    if isinstance(exc, TypeError):
        return f"invalid argument: {exc}"
    if isinstance(exc, RecursionError | MemoryError):
        return "expression too complex"
    return f"cannot evaluate expression ({type(exc).__name__})"
