"""Exact rational arithmetic on parsed answers, and the decimal-approximation policy.

Runs in the calling process (no sympy): every number an answer can spell with integers,
decimals, fractions, mixed numbers, percent, powers with integer exponents, perfect roots,
factorials and binomials evaluates to a :class:`fractions.Fraction` — so ``1/2004!`` and
``1/2006!`` are compared exactly, never rounded. Sizes are capped so this can never hang; an
expression above the cap raises :class:`TooBig` and is judged by magnitude or by the worker.
"""

from __future__ import annotations

import math
from fractions import Fraction

from scorer.nodes import (
    Abs,
    Add,
    Ast,
    Binom,
    Ceil,
    Dec,
    Div,
    Fact,
    Floor,
    Int,
    Mul,
    Neg,
    Node,
    Pct,
    Pow,
    Root,
    Sqrt,
    SympyValue,
)

MAX_BITS = 200_000  # largest exact integer we build in the caller (~60k digits)
MAX_FACTORIAL = 5_000
MAX_ROOT_INDEX = 64
MIN_SIG_FIGS = 3  # a decimal needs this many significant figures to stand for an exact value


class NotRational(ValueError):
    """The value is not a rational number we can compute (symbols, pi, sqrt 2, ...)."""


class TooBig(NotRational):
    """The exact value is above :data:`MAX_BITS`; only its magnitude can be estimated."""


def _bits(q: Fraction) -> int:
    return q.numerator.bit_length() + q.denominator.bit_length()


def _check(q: Fraction) -> Fraction:
    if _bits(q) > MAX_BITS:
        raise TooBig("exact value too large")
    return q


def exact_value(node: Node) -> Fraction:
    """The exact rational value of an AST, or :class:`NotRational` / :class:`TooBig`."""
    if isinstance(node, Int):
        if node.value.bit_length() > MAX_BITS:
            raise TooBig("literal too large")
        return Fraction(node.value)
    if isinstance(node, Dec):
        e = node.exp10
        if abs(e) > 10_000:
            raise TooBig("exponent too large")
        return _check(Fraction(node.mantissa) * Fraction(10) ** e)
    if isinstance(node, Neg):
        return -exact_value(node.arg)
    if isinstance(node, Add):
        return _check(sum((exact_value(c) for c in node.terms), Fraction(0)))
    if isinstance(node, Mul):
        out = Fraction(1)
        for c in node.factors:
            out = _check(out * exact_value(c))
        return out
    if isinstance(node, Div):
        den = exact_value(node.den)
        if den == 0:
            raise NotRational("division by zero")
        return _check(exact_value(node.num) / den)
    if isinstance(node, Pow):
        return _power(exact_value(node.base), exact_value(node.exp))
    if isinstance(node, Pct):
        return exact_value(node.arg) / 100
    if isinstance(node, Sqrt):
        return _root(exact_value(node.arg), 2)
    if isinstance(node, Root):
        n = exact_value(node.index)
        if n.denominator != 1 or not 1 <= n.numerator <= MAX_ROOT_INDEX:
            raise NotRational("root index")
        return _root(exact_value(node.arg), n.numerator)
    if isinstance(node, Fact):
        n = exact_value(node.arg)
        if n.denominator != 1 or n < 0:
            raise NotRational("factorial of a non-natural")
        if n > MAX_FACTORIAL:
            raise TooBig("factorial too large")
        return Fraction(math.factorial(int(n)))
    if isinstance(node, Binom):
        n, k = exact_value(node.n), exact_value(node.k)
        if n.denominator != 1 or k.denominator != 1 or n < 0 or n > 100_000:
            raise NotRational("binomial")
        return _check(Fraction(math.comb(int(n), int(k)) if k >= 0 else 0))
    if isinstance(node, Abs):
        return abs(exact_value(node.arg))
    if isinstance(node, Floor):
        return Fraction(math.floor(exact_value(node.arg)))
    if isinstance(node, Ceil):
        return Fraction(math.ceil(exact_value(node.arg)))
    if isinstance(node, SympyValue):
        obj = node.value
        if getattr(obj, "is_Rational", False):
            return Fraction(int(obj.p), int(obj.q))
    raise NotRational(type(node).__name__)


def _power(base: Fraction, exp: Fraction) -> Fraction:
    if exp.denominator == 1:
        e = exp.numerator
        if base == 0:
            if e < 0:
                raise NotRational("0 to a negative power")
            return Fraction(1 if e == 0 else 0)
        if base in (1, -1):
            return base**e
        if abs(e) * max(_bits(base), 2) > MAX_BITS:
            raise TooBig("power too large")
        return base**e
    if base < 0:
        raise NotRational("fractional power of a negative")
    if exp.denominator > MAX_ROOT_INDEX:
        raise NotRational("root index too large")
    return _power(_root(base, exp.denominator), Fraction(exp.numerator))


def _iroot(n: int, k: int) -> int | None:
    if n < 0 or k > MAX_ROOT_INDEX:
        return None
    if n.bit_length() > MAX_BITS:
        raise TooBig("root argument too large")
    r = math.isqrt(n) if k == 2 else round(n ** (1.0 / k)) if n.bit_length() < 1000 else None
    if r is None:
        lo, hi = 0, 1 << (n.bit_length() // k + 1)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if mid**k <= n:
                lo = mid
            else:
                hi = mid - 1
        r = lo
    for cand in (r - 1, r, r + 1):
        if cand >= 0 and cand**k == n:
            return cand
    return None


def _root(x: Fraction, k: int) -> Fraction:
    """Exact k-th root when it is rational (``\\sqrt{4}`` = 2, ``\\sqrt[3]{1/8}`` = 1/2)."""
    if x < 0:
        if k % 2 == 1:
            return -_root(-x, k)
        raise NotRational("even root of a negative")
    a, b = _iroot(x.numerator, k), _iroot(x.denominator, k)
    if a is None or b is None:
        raise NotRational("irrational root")
    return Fraction(a, b)


# --------------------------------------------------------------------------------------------
# the decimal-approximation policy


def decimal_literal(node: Node) -> tuple[int, int, int] | None:
    """(mantissa, exp10, sig_figs) if the AST is a decimal literal, possibly negated."""
    if isinstance(node, Dec):
        return node.mantissa, node.exp10, node.sig_figs
    if isinstance(node, Neg) and isinstance(node.arg, Dec):
        return -node.arg.mantissa, node.arg.exp10, node.arg.sig_figs
    return None


def rounds_to(dec: tuple[int, int, int], value: Fraction) -> bool:
    """Whether the decimal ``dec`` is ``value`` rounded (either tie rule) or truncated to the
    decimal's last digit, and the decimal has at least :data:`MIN_SIG_FIGS` significant figures.

    ``0.333`` / ``0.3333`` for 1/3, ``0.667`` and ``0.666`` for 2/3, ``125.663`` for 40π
    (truncated); not ``0.33`` (2 figures), not ``0.334``, not ``5.001`` for 5.
    """
    m, e, sig = dec
    if sig < MIN_SIG_FIGS:
        return False
    q = value / (Fraction(10) ** e)
    half = Fraction(1, 2)
    candidates = {math.floor(q + half), math.ceil(q - half), math.trunc(q)}
    return m in candidates


def decimals_agree(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """Two different decimals: the coarser must be the finer one rounded / truncated."""
    coarse, fine = (a, b) if a[1] > b[1] else (b, a)
    if coarse[1] == fine[1]:
        return False
    fine_value = Fraction(fine[0]) * Fraction(10) ** fine[1]
    return rounds_to(coarse, fine_value)


# --------------------------------------------------------------------------------------------
# magnitudes of values too large to build


def log2_range(node: Ast, depth: int = 0) -> tuple[float, float] | None:
    """Bounds on log2|value| for towers like ``5^{5^{5^5}}``; None when unknown.

    Only forms without possible cancellation are estimated (products, powers of rationals,
    sums dominated by one term), so a disjoint range *proves* two values differ.
    """
    if depth > 50:
        return None
    try:
        v = exact_value(node)
    except TooBig:
        v = None
    except NotRational:
        return None
    if v is not None:
        if v == 0:
            return (-math.inf, -math.inf)
        lv = _log2_fraction(abs(v))
        return (lv, lv)
    if isinstance(node, Neg):
        return log2_range(node.arg, depth + 1)
    if isinstance(node, Mul):
        lo = hi = 0.0
        for c in node.factors:
            r = log2_range(c, depth + 1)
            if r is None:
                return None
            lo, hi = lo + r[0], hi + r[1]
        return (lo, hi) if not (math.isnan(lo) or math.isnan(hi)) else None
    if isinstance(node, Div):
        a, b = log2_range(node.num, depth + 1), log2_range(node.den, depth + 1)
        if a is None or b is None or math.isinf(b[0]) or math.isinf(b[1]):
            return None
        return (a[0] - b[1], a[1] - b[0])
    if isinstance(node, Add):
        ranges = [log2_range(c, depth + 1) for c in node.terms]
        if any(r is None for r in ranges):
            return None
        rs = sorted(ranges, key=lambda r: r[0])  # type: ignore[arg-type, return-value]
        top, others = rs[-1], rs[:-1]
        others_hi = max((r[1] for r in others), default=-math.inf)  # type: ignore[index]
        margin = math.log2(len(rs)) + 2
        if top[0] > others_hi + margin:  # type: ignore[index]
            return (top[0] - 1, top[1] + 1)  # type: ignore[index]
        return None
    if isinstance(node, Pow):
        try:
            b = exact_value(node.base)
        except NotRational:
            return None
        if b <= 0 or b == 1:
            return None
        lb = _log2_fraction(b)
        try:
            e = exact_value(node.exp)
            elo = ehi = _to_float(e)
        except TooBig:
            r = log2_range(node.exp, depth + 1)
            if r is None:
                return None
            elo, ehi = _exp2(r[0]), _exp2(r[1])  # exponent assumed positive here
            if _sign(node.exp) <= 0:
                return None
        except NotRational:
            return None
        vals = [elo * lb, ehi * lb]
        if any(math.isnan(x) for x in vals):
            return None
        return (min(vals), max(vals))
    return None


def _sign(node: Ast) -> int:
    """+1 for forms that are certainly positive (powers/products/sums of positive terms)."""
    if isinstance(node, Int | Dec):
        v = node.value if isinstance(node, Int) else node.mantissa
        return 1 if v > 0 else -1 if v < 0 else 0
    if isinstance(node, Neg):
        return -_sign(node.arg)
    if isinstance(node, Pow):
        return 1 if _sign(node.base) > 0 else 0
    if isinstance(node, Mul | Add):
        operands = node.terms if isinstance(node, Add) else node.factors
        signs = [_sign(c) for c in operands]
        if isinstance(node, Add):
            r = log2_range(node)
            if r is not None and all(s != 0 for s in signs):
                # dominated sum: the sign of the largest term
                ranges = [log2_range(c) or (-math.inf, -math.inf) for c in operands]
                top = max(range(len(ranges)), key=lambda i: ranges[i][0])
                return signs[top]
        return 1 if all(s > 0 for s in signs) else 0
    if isinstance(node, Div):
        return _sign(node.num) * _sign(node.den)
    return 0


def _to_float(q: Fraction) -> float:
    try:
        return float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def _exp2(x: float) -> float:
    return math.inf if x > 1023 else 2.0**x


def _log2_fraction(q: Fraction) -> float:
    return math.log2(q.numerator) - math.log2(q.denominator)


def certainly_different_magnitude(p: Ast, g: Ast) -> bool:
    """True when |p| and |g| differ by more than a factor 4 for sure (towers vs small)."""
    rp, rg = log2_range(p), log2_range(g)
    if rp is None or rg is None:
        return False
    if math.isinf(rp[0]) and math.isinf(rg[0]) and rp[0] == rg[0]:
        return False
    return rp[1] + 2 < rg[0] or rg[1] + 2 < rp[0]
