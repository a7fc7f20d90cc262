"""The sympy leaf backend. Imported only inside the worker process (``scorer.sympy_worker``).

Sympy objects are built from the parser's AST node by node — never from strings, so nothing
is ``eval``-ed. Equality of two values, cheapest first:

1. the exact pure-Python rules (``ExactBackend``);
2. identical sympy structure after auto-evaluation -> ``symbolic_equal``;
3. a decimal against an exact constant (``0.577`` vs ``\\sqrt3/3``): rounding policy;
4. constants: the difference evaluated by sympy's adaptive ``evalf`` (up to 1000 digits of
   cancellation, so ``2^{2^{-1000}}`` and 1 are told apart) -> ``numeric_equal``;
5. expressions: evaluate at seeded random points with 30 significant digits; one clear
   difference proves inequality, agreement at every point -> ``numeric_equal``; when points
   cannot be evaluated (undefined functions, symbolic sums) ``simplify(a - b) == 0``.
"""

from __future__ import annotations

import random
from fractions import Fraction
from functools import lru_cache
from typing import cast

import sympy as sp
from sympy.core.function import AppliedUndef

from scorer import nodes
from scorer.compare import (
    FAMILY_PARAMETER,
    Component,
    ExactBackend,
    Named,
    Point,
    Span,
    Undecided,
)
from scorer.exact import MIN_SIG_FIGS, decimal_literal, rounds_to
from scorer.parse import contains
from scorer.verdict import Reason, Verdict

DIGITS = 30
EXACT_RTOL = sp.Float("1e-20")
MAX_CANCEL_DIGITS = 1000
N_POINTS = 5


class ConvertError(ValueError):
    """An AST node sympy cannot represent (should be rare: the parser is strict)."""


_FUNCS = {
    "sin": sp.sin,
    "cos": sp.cos,
    "tan": sp.tan,
    "cot": sp.cot,
    "sec": sp.sec,
    "csc": sp.csc,
    "arcsin": sp.asin,
    "arccos": sp.acos,
    "arctan": sp.atan,
    "arccot": sp.acot,
    "arcsec": sp.asec,
    "arccsc": sp.acsc,
    "sinh": sp.sinh,
    "cosh": sp.cosh,
    "tanh": sp.tanh,
    "coth": sp.coth,
    "sech": sp.sech,
    "csch": sp.csch,
    "arsinh": sp.asinh,
    "arcosh": sp.acosh,
    "artanh": sp.atanh,
    "ln": sp.log,
    "exp": sp.exp,
}


@lru_cache(maxsize=4096)
def to_sympy(node: nodes.Ast):
    """AST -> sympy object (cached: the same gold is converted once per worker)."""
    if isinstance(node, nodes.Int):
        return sp.Integer(node.value)
    if isinstance(node, nodes.Dec):
        return sp.Rational(node.mantissa) * sp.Rational(10) ** node.exp10
    if isinstance(node, nodes.Sym):
        name = node.name
        if name == "e":
            return sp.E
        if name in ("i", "I"):
            return sp.I
        return sp.Symbol(name)
    if isinstance(node, nodes.Const):
        return sp.pi if node.name == "pi" else sp.oo
    if isinstance(node, nodes.Neg):
        return -to_sympy(node.arg)
    if isinstance(node, nodes.Add):
        return sp.Add(*[to_sympy(c) for c in node.terms])
    if isinstance(node, nodes.Mul):
        out = to_sympy(node.factors[0])
        for c in node.factors[1:]:
            out = out * to_sympy(c)
        return out
    if isinstance(node, nodes.Div):
        return to_sympy(node.num) / to_sympy(node.den)
    if isinstance(node, nodes.Pow):
        base, exp = to_sympy(node.base), to_sympy(node.exp)
        if isinstance(base, sp.MatrixBase):
            return base ** int(exp)
        return sp.Pow(base, exp)
    if isinstance(node, nodes.Fact):
        return sp.factorial(to_sympy(node.arg))
    if isinstance(node, nodes.Abs):
        return sp.Abs(to_sympy(node.arg))
    if isinstance(node, nodes.Sqrt):
        return sp.sqrt(to_sympy(node.arg))
    if isinstance(node, nodes.Root):
        return sp.root(to_sympy(node.arg), to_sympy(node.index))
    if isinstance(node, nodes.Binom):
        return sp.binomial(to_sympy(node.n), to_sympy(node.k))
    if isinstance(node, nodes.Fn):
        return _FUNCS[node.name](to_sympy(node.arg))
    if isinstance(node, nodes.Log):
        arg = to_sympy(node.arg)
        return sp.log(arg) if node.base == nodes.Int(0) else sp.log(arg, to_sympy(node.base))
    if isinstance(node, nodes.Floor):
        return sp.floor(to_sympy(node.arg))
    if isinstance(node, nodes.Ceil):
        return sp.ceiling(to_sympy(node.arg))
    if isinstance(node, nodes.Pct):
        return to_sympy(node.arg) / 100
    if isinstance(node, nodes.Deg):
        return to_sympy(node.arg) * sp.pi / 180
    if isinstance(node, nodes.Matrix):
        return sp.Matrix([[to_sympy(c) for c in row] for row in node.rows])
    if isinstance(node, nodes.Det):
        return to_sympy(node.matrix).det()
    if isinstance(node, nodes.BigOp):
        var = sp.Symbol(node.var)
        body = to_sympy(node.body)
        cls = sp.Sum if node.kind == "sum" else sp.Product
        return cls(body, (var, to_sympy(node.lo), to_sympy(node.hi)))
    if isinstance(node, nodes.Based):
        return sp.Symbol(f"{node.digits}_{node.base}")
    if isinstance(node, nodes.Dots):
        return sp.Symbol("...")
    if isinstance(node, nodes.SympyValue):
        return node.value
    raise ConvertError(type(node).__name__)


def _is_number(x) -> bool:
    return isinstance(x, sp.Expr) and x.is_number and x.is_finite is not False


def _finite(v) -> bool:
    return v.is_number and not v.has(sp.nan, sp.zoo, sp.oo, -sp.oo)


def _precise_zero(d) -> bool:
    """evalf of an exact zero returns a zero-with-error-bound (low ``_prec``), not 0."""
    if d == 0:
        return True
    re_part, im_part = d.as_real_imag()
    for part in (re_part, im_part):
        if part == 0:
            continue
        if isinstance(part, sp.Float) and part._prec < 20:
            continue
        return False
    return True


def _magnitude(v) -> sp.Float:
    return sp.Float(abs(sp.N(v, 15)))


def _high_precision(value, digits: int) -> Fraction | None:
    """A real constant as an exact Fraction carrying ``digits`` correct significant digits."""
    v = sp.N(value, digits, maxn=MAX_CANCEL_DIGITS)
    if not v.is_real or not isinstance(v, sp.Float):
        return None
    mpf = v._mpf_
    sign, man, exp, _bc = mpf
    if man == 0:
        return Fraction(0)
    q = Fraction(int(man)) * (Fraction(2) ** exp)
    return -q if sign else q


def _decimal_sig(node: nodes.Ast) -> int | None:
    """Fewest significant figures among non-integer decimal literals in an AST."""
    out: list[int] = []
    _walk_decimals(node, out)
    return min(out) if out else None


def _walk_decimals(node: nodes.Node, out: list[int]) -> None:
    if isinstance(node, nodes.Dec):
        m, e = node.mantissa, node.exp10
        if not (e >= 0 or m % (10 ** (-e)) == 0):
            out.append(node.sig_figs)
        return
    for c in nodes.children(node):
        _walk_decimals(c, out)


INTEGER_NAMES = frozenset("n m k j l N M K".split())
_INTEGERS = (0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 97, 100, 1001, 65537, 10**6 + 3, 10**12 + 39)


def _stepped(expr) -> bool:
    """Whether ``expr`` holds a step function or a parity: floor, ceiling, mod, sign, or a
    power of -1."""
    if expr.has(sp.floor, sp.ceiling, sp.Mod, sp.frac, sp.sign, sp.Heaviside, sp.Piecewise):
        return True
    return any(p.base == -1 for p in expr.atoms(sp.Pow))


def step_points(syms: list) -> tuple[list[dict], list[dict]]:
    """Sample points for step functions: (integer points, real points), deterministic.

    Integers: every variable at small, negative and large integers, one variable at a time
    varied against a second pattern. Reals: just below and above integers (``k ± 1/1999``),
    halves, large rationals and the small rationals of ordinary sampling.
    """
    rng = random.Random(20261203)
    ints = [*_INTEGERS, *(-v for v in _INTEGERS[1:8])]
    integer_points = [{s: sp.Integer(v) for s in syms} for v in ints]
    for _ in range(12):
        integer_points.append({s: sp.Integer(rng.choice(ints)) for s in syms})
    reals: list = []
    for k in (1, 2, 3, 5, 10, 12, 100, -1, -3):
        reals += [sp.Integer(k) - sp.Rational(1, 1999), sp.Integer(k) + sp.Rational(1, 1999)]
        reals.append(sp.Integer(k) + sp.Rational(1, 2))
    reals += [sp.Rational(rng.randint(10**5, 10**9), rng.randint(7, 97)) for _ in range(6)]
    reals += [sp.Rational(rng.randint(3, 40), rng.randint(7, 17)) for _ in range(6)]
    real_points = [{s: v for s in syms} for v in reals]
    for _ in range(12):
        real_points.append({s: rng.choice(reals) for s in syms})
    return integer_points, real_points


def _agree_at(a, b, point: dict) -> bool | None:
    """Whether ``a`` and ``b`` take the same value at ``point`` (exactly: both are evaluated
    with exact rationals first); ``None`` when either is undefined there."""
    try:
        av, bv = a.subs(point), b.subs(point)
        if av.is_Rational and bv.is_Rational:
            return bool(av == bv)
        d = sp.N(av - bv, DIGITS, maxn=300)
        if not (_finite(sp.N(av, DIGITS)) and _finite(sp.N(bv, DIGITS)) and _finite(d)):
            return None
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        return None
    return _precise_zero(d)


def _branchy(expr) -> bool:
    """Fractional powers, roots and logs take principal branches, so forms that agree for
    positive variables (``\\sqrt{x^2}`` and ``x``) may differ for negative ones; such pairs are
    compared on positive values only. ``|x|`` is not branchy: ``|x|`` vs ``x`` must differ."""
    for p in sp.preorder_traversal(expr):
        if isinstance(p, sp.Pow) and not p.exp.is_integer:
            return True
        if isinstance(p, (sp.log, sp.arg)):
            return True
    return False


class SympyBackend(ExactBackend):
    """Leaf decisions with sympy; never raises :class:`Undecided`."""

    def same_family(self, p: nodes.Ast, g: nodes.Ast) -> bool:
        """``a(k)`` and ``b(k)``, both linear in the integer ``k`` with the same step up to
        sign, and ``a(k) - b(±k)`` a whole number of steps: the same set of values
        (``\\frac{\\pi}{6} + 2k\\pi`` = ``\\frac{13\\pi}{6} + 2k\\pi`` =
        ``\\frac{\\pi}{6} - 2k\\pi``)."""
        k = sp.Symbol(FAMILY_PARAMETER)
        try:
            a, b = to_sympy(p), to_sympy(g)
            if not (a.has(sp.pi) and b.has(sp.pi)):
                return False
            step, other = sp.diff(a, k), sp.diff(b, k)
            if step.free_symbols or other.free_symbols or step == 0:
                return False
            for sign in (1, -1):
                if sp.simplify(step - sign * other) != 0:
                    continue
                shift = sp.simplify((a - b.subs(k, sign * k)) / step)
                if not shift.free_symbols and shift.is_integer:
                    return True
        except (TypeError, ValueError, ArithmeticError, RecursionError, NotImplementedError):
            return False
        return False

    def values_equal(self, p: nodes.Ast, g: nodes.Ast) -> Verdict:
        try:
            return super().values_equal(p, g)
        except Undecided:
            pass
        try:
            a, b = to_sympy(p), to_sympy(g)
        except (ConvertError, TypeError, ValueError, ZeroDivisionError) as exc:
            return Verdict(False, Reason.PARSE_ERROR, f"cannot build: {exc}")
        if isinstance(a, sp.MatrixBase) or isinstance(b, sp.MatrixBase):
            return self._matrices(a, b, p, g)
        return self._expr_equal(a, b, p, g)

    # -- matrices (products / sums of literal matrices)
    def _matrices(self, a, b, p: nodes.Ast, g: nodes.Ast) -> Verdict:
        if not (isinstance(a, sp.MatrixBase) and isinstance(b, sp.MatrixBase)):
            return Verdict(False, Reason.STRUCTURE_MISMATCH, "matrix vs scalar")
        if a.shape != b.shape:
            return Verdict(False, Reason.STRUCTURE_MISMATCH, "matrix shapes differ")
        worst = Verdict(True, Reason.SYMBOLIC_EQUAL)
        for x, y in zip(a, b, strict=True):
            o = self._expr_equal(sp.sympify(x), sp.sympify(y), None, None)
            if not o.correct:
                return o
            if o.reason == Reason.APPROX_EQUAL or worst.reason == Reason.SYMBOLIC_EQUAL:
                worst = o
        return worst

    # -- scalars
    def _expr_equal(self, a, b, p: nodes.Ast | None, g: nodes.Ast | None) -> Verdict:
        if a == b:
            return Verdict(True, Reason.SYMBOLIC_EQUAL)
        if any(x.has(sp.nan, sp.zoo) for x in (a, b)):
            return Verdict(False, Reason.NOT_EQUAL, "undefined value")
        if p is not None and g is not None:
            approx = self._decimal_vs_exact(a, b, p, g)
            if approx is not None:
                return approx
        tol = EXACT_RTOL
        reason = Reason.NUMERIC_EQUAL
        if p is not None and g is not None:
            sig_p, sig_g = _decimal_sig(p), _decimal_sig(g)
            if (sig_p is None) != (sig_g is None):
                sig = sig_p if sig_p is not None else sig_g
                if sig is not None and sig >= MIN_SIG_FIGS:
                    tol = sp.Float(10) ** (1 - sig)
                    reason = Reason.APPROX_EQUAL
        syms = a.free_symbols | b.free_symbols
        if not syms:
            return self._constants_equal(a, b, tol, reason)
        return self._sampled_equal(a, b, sorted(syms, key=str), tol, reason)

    def _decimal_vs_exact(self, a, b, p: nodes.Ast, g: nodes.Ast) -> Verdict | None:
        """A decimal literal against an exact real constant: the rounding policy."""
        for dec_node, exact_obj in ((p, b), (g, a)):
            dec = decimal_literal(dec_node)
            if dec is None or not _is_number(exact_obj) or exact_obj.free_symbols:
                continue
            if exact_obj.is_real is False:
                return Verdict(False, Reason.NOT_EQUAL, "decimal vs complex")
            m, e, _sig = dec
            mag = abs(sp.N(exact_obj, 15))
            extra = 0 if mag == 0 else int(abs(sp.log(mag, 10).evalf(5))) + 1
            value = _high_precision(exact_obj, abs(e) + extra + 25)
            if value is None:
                return None
            if rounds_to(dec, value):
                return Verdict(True, Reason.APPROX_EQUAL, "decimal approximation")
            return Verdict(False, Reason.NOT_EQUAL)
        return None

    def _constants_equal(self, a, b, tol, reason: str) -> Verdict:
        try:
            d = sp.N(a - b, DIGITS, maxn=MAX_CANCEL_DIGITS)
            scale = max(_magnitude(a), _magnitude(b))
        except (TypeError, ValueError, ArithmeticError):
            d = None
        if d is not None and _finite(d):
            if _precise_zero(d):
                return Verdict(True, reason if tol != EXACT_RTOL else Reason.NUMERIC_EQUAL)
            if abs(d) <= tol * scale and tol != EXACT_RTOL:
                return Verdict(True, reason, "within the decimal's precision")
            return Verdict(False, Reason.NOT_EQUAL)
        return self._simplify_equal(a, b)

    def _sampled_equal(self, a, b, syms: list, tol, reason: str) -> Verdict:
        rng = random.Random(20240917)
        branchy = _branchy(a) or _branchy(b)
        diff = a - b
        if diff == 0:
            return Verdict(True, Reason.SYMBOLIC_EQUAL)
        if _stepped(diff):
            return self._stepped_equal(a, b, syms)
        agreed = 0
        tried = 0
        while tried < 4 * N_POINTS and agreed < N_POINTS:
            tried += 1
            mixed = not branchy and tried % 2 == 0
            point = {
                s: sp.Rational(rng.randint(3, 40), rng.randint(7, 17))
                * (-1 if mixed and rng.random() < 0.5 else 1)
                for s in syms
            }
            try:
                av = sp.N(a.subs(point), DIGITS)
                bv = sp.N(b.subs(point), DIGITS)
                if not (_finite(av) and _finite(bv)):
                    continue
                d = sp.N(diff.subs(point), DIGITS, maxn=300)
            except (TypeError, ValueError, ArithmeticError, RecursionError):
                continue
            if not _finite(d):
                continue
            scale = max(_magnitude(av), _magnitude(bv), sp.Float("1e-300"))
            if _precise_zero(d) or (tol != EXACT_RTOL and abs(d) <= tol * scale):
                agreed += 1
                continue
            return Verdict(False, Reason.NOT_EQUAL, "differ at a sample point")
        if agreed >= 3:
            detail = f"agree at {agreed} random points"
            return Verdict(True, reason if tol != EXACT_RTOL else Reason.NUMERIC_EQUAL, detail)
        return self._simplify_equal(a, b)

    def _stepped_equal(self, a, b, syms: list) -> Verdict:
        """Floor, ceiling, mod and parity forms: equal only if they agree at every point of
        :func:`step_points` (integers small, negative and large; just either side of integer
        boundaries; rationals large and small), so two forms that coincide on a narrow band
        of small rationals (``\\lfloor n/10 \\rfloor`` and ``\\lfloor n/12 \\rfloor``)
        differ. Forms that agree at every integer but not between them are equal only when
        every variable is named like an integer (``n``, ``m``, ``k``...)."""
        integer_points, real_points = step_points(syms)
        for points, integer in ((integer_points, True), (real_points, False)):
            for point in points:
                same = _agree_at(a, b, point)
                if same is False:
                    if not integer and all(str(s) in INTEGER_NAMES for s in syms):
                        return Verdict(True, Reason.NUMERIC_EQUAL, "agree at every integer point")
                    return Verdict(False, Reason.NOT_EQUAL, "differ at a sample point")
        return Verdict(True, Reason.NUMERIC_EQUAL, "agree at integer, boundary and large points")

    def _simplify_equal(self, a, b) -> Verdict:
        try:
            d = sp.simplify(a - b)
        except (TypeError, ValueError, ArithmeticError, RecursionError, NotImplementedError):
            return Verdict(False, Reason.NOT_EQUAL, "could not compare")
        if d == 0:
            return Verdict(True, Reason.SYMBOLIC_EQUAL)
        return Verdict(False, Reason.NOT_EQUAL)

    # -- equations
    def proportional(self, a: nodes.Ast, b: nodes.Ast, positive: bool) -> bool:
        try:
            return super().proportional(a, b, positive)
        except Undecided:
            pass
        x, y = to_sympy(a), to_sympy(b)
        if x == 0 or y == 0:
            return x == y
        syms = sorted(x.free_symbols | y.free_symbols, key=str)
        try:
            ratio = sp.cancel(sp.together(x / y))
        except (TypeError, ValueError, ArithmeticError, NotImplementedError):
            ratio = None
        if ratio is not None and not ratio.free_symbols and ratio.is_number:
            if ratio == 0 or not ratio.is_finite:
                return False
            if positive:
                return bool(ratio.is_real and ratio > 0)
            return True
        # numeric: the ratio takes the same value at every sample point (compared exactly:
        # the difference of two ratio values must evaluate to a true zero)
        rng = random.Random(7)
        ratio_expr = x / y
        values = []
        for _ in range(4 * N_POINTS):
            point = {s: sp.Rational(rng.randint(3, 40), rng.randint(7, 17)) for s in syms}
            try:
                r = ratio_expr.subs(point)
                rv = sp.N(r, DIGITS)
            except (TypeError, ValueError, ArithmeticError, ZeroDivisionError):
                continue
            if not _finite(rv) or _precise_zero(rv):
                continue
            values.append((r, rv))
            if len(values) >= N_POINTS:
                break
        if len(values) < 3:
            return False
        r0, r0v = values[0]
        for r, _rv in values[1:]:
            try:
                d = sp.N(r - r0, DIGITS, maxn=300)
            except (TypeError, ValueError, ArithmeticError):
                return False
            if not _precise_zero(d):
                return False
        return not positive or bool(sp.re(r0v) > 0)

    # -- inequalities with a non-trivial left side, e.g. 1 <= |z| <= 3/2
    def solve_relation(self, rel: nodes.Rel) -> nodes.Answer | None:
        exprs = [to_sympy(cast(nodes.Expr, part).node) for part in rel.parts]
        syms = set().union(*(e.free_symbols for e in exprs))
        if len(syms) != 1 or any(e.has(AppliedUndef) for e in exprs):
            return None
        (x,) = syms
        xr = sp.Symbol(x.name, real=True)
        exprs = [e.subs(x, xr) for e in exprs]
        ops = {"<": sp.Lt, "<=": sp.Le, ">": sp.Gt, ">=": sp.Ge, "!=": sp.Ne}
        region = sp.S.Reals
        for i, op in enumerate(rel.ops):
            if op not in ops:
                return None
            cond = ops[op](exprs[i], exprs[i + 1])
            region = region.intersect(sp.solveset(cond, xr, sp.S.Reals))
        return _set_to_answer(region)

    def sets_equal(self, cp: list[Component], cg: list[Component]) -> Verdict:
        try:
            return super().sets_equal(cp, cg)
        except Undecided:
            pass
        sa, sb = _components_to_set(cp), _components_to_set(cg)
        if sa is None or sb is None:
            return Verdict(False, Reason.STRUCTURE_MISMATCH, "not comparable as sets")
        try:
            same = bool(sa == sb)
        except (TypeError, ValueError, NotImplementedError):
            same = False
        return Verdict(same, Reason.SYMBOLIC_EQUAL if same else Reason.NOT_EQUAL)


def _set_to_answer(s) -> nodes.Answer | None:
    if isinstance(s, sp.Interval):
        return nodes.Interval(bool(s.left_open), _sx(s.start), _sx(s.end), bool(s.right_open))
    if isinstance(s, sp.Union):
        parts = [_set_to_answer(a) for a in s.args]
        return None if any(p is None for p in parts) else nodes.Union(tuple(parts))  # type: ignore[arg-type]
    if isinstance(s, sp.FiniteSet):
        return nodes.Coll("set", tuple(nodes.Expr(_sx(e)) for e in s.args))
    if s == sp.S.Reals:
        return nodes.NamedSet("R")
    if s == sp.S.EmptySet:
        return nodes.Coll("set", ())
    return None


def _sx(obj) -> nodes.Ast:
    if obj == sp.oo:
        return nodes.OO
    if obj == -sp.oo:
        return nodes.NEG_OO
    if isinstance(obj, sp.Integer):
        return nodes.Int(int(obj))
    return nodes.SympyValue(obj)


def _components_to_set(components: list[Component]):
    parts = []
    for c in components:
        if isinstance(c, Span):
            parts.append(sp.Interval(to_sympy(c.lo), to_sympy(c.hi), c.lo_open, c.hi_open))
        elif isinstance(c, Point):
            if not isinstance(c.answer, nodes.Expr) or contains(c.answer.node, (nodes.Matrix,)):
                return None
            parts.append(sp.FiniteSet(to_sympy(c.answer.node)))
        elif isinstance(c, Named) and c.name == "R":
            parts.append(sp.S.Reals)
        else:
            return None
    return sp.Union(*parts) if parts else sp.S.EmptySet
