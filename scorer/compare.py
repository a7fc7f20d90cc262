"""Comparison of two parsed answers: the equivalence rules, independent of sympy.

:class:`Comparer` walks the structure (sets, tuples, intervals, equations, matrices...) and
asks a *backend* about leaf values. :class:`ExactBackend` (pure Python, used in the calling
process) decides everything that exact rational arithmetic can decide and raises
:class:`Undecided` otherwise; ``scorer.symbolic.SympyBackend`` (in the worker process) extends it
with sympy and never raises it. Both run the very same rules, so the fast path can only ever
agree with the slow path.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import cast

from scorer.exact import (
    NotRational,
    TooBig,
    certainly_different_magnitude,
    decimal_literal,
    decimals_agree,
    exact_value,
    rounds_to,
)
from scorer.nodes import (
    NEG_OO,
    OO,
    Add,
    Answer,
    Ast,
    Based,
    Coll,
    Const,
    Dec,
    Deg,
    Det,
    Div,
    Dots,
    Expr,
    Fn,
    In,
    Int,
    Interval,
    Letter,
    Matrix,
    Mul,
    NamedSet,
    Neg,
    Pct,
    Ratio,
    Rel,
    RMinus,
    Sym,
    SympyValue,
    Text,
    Time,
    Union,
    rebuild,
)
from scorer.parse import canonical, contains, free_symbols, is_label
from scorer.verdict import Reason, Verdict

_MATRIX = (Matrix, Det)
_STRENGTH = {
    Reason.STRING_MATCH: 0,
    Reason.CHOICE_MATCH: 0,
    Reason.TEXT_MATCH: 0,
    Reason.NUMERIC_EQUAL: 1,
    Reason.SYMBOLIC_EQUAL: 2,
    Reason.APPROX_EQUAL: 3,
}
MAX_PAIRWISE = 40_000


class Undecided(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The pure-Python backend cannot decide; the pair goes to the sympy worker."""


def _equal(reason: str, detail: str = "") -> Verdict:
    return Verdict(True, reason, detail)


def _unequal(reason: str = Reason.NOT_EQUAL, detail: str = "") -> Verdict:
    return Verdict(False, reason, detail)


def weakest(outcomes: list[Verdict]) -> Verdict:
    """All equal -> the weakest evidence among them; else the first failure."""
    for o in outcomes:
        if not o.correct:
            return o
    if not outcomes:
        return _equal(Reason.SYMBOLIC_EQUAL)
    return max(outcomes, key=lambda o: _STRENGTH.get(o.reason, 0))


# --------------------------------------------------------------------------------------------
# backend


class ExactBackend:
    """Leaf decisions with exact rationals only (caller-side fast path)."""

    def values_equal(self, p: Ast, g: Ast) -> Verdict:
        vp = _try_exact(p)
        vg = _try_exact(g)
        if isinstance(vp, Fraction) and isinstance(vg, Fraction):
            return exact_numbers_equal(p, vp, g, vg)
        if canonical(p) == canonical(g):
            return _equal(Reason.SYMBOLIC_EQUAL)
        if (vp is TooBig or vg is TooBig) and certainly_different_magnitude(p, g):
            return _unequal(detail="magnitudes differ")
        raise Undecided

    def proportional(self, a: Ast, b: Ast, positive: bool) -> bool:
        ca, cb = canonical(a), canonical(b)
        if ca == cb:
            return True
        raise Undecided

    def same_family(self, p: Ast, g: Ast) -> bool:
        """Whether two families of values in the integer parameter ``k`` are the same set
        (:func:`_family_pair`); needs algebra, so only sympy decides."""
        if canonical(p) == canonical(g):
            return False  # equal as written: the ordinary rules say so
        raise Undecided

    def solve_relation(self, rel: Rel) -> Answer | None:
        raise Undecided

    def sets_equal(self, cp: list[Component], cg: list[Component]) -> Verdict:
        sp, sg = _exact_set(cp), _exact_set(cg)
        if sp is None or sg is None:
            raise Undecided
        return _equal(Reason.NUMERIC_EQUAL) if sp == sg else _unequal(detail="different sets")


def _try_exact(node: Ast) -> Fraction | type | None:
    try:
        return exact_value(node)
    except TooBig:
        return TooBig
    except NotRational:
        return None
    except (ZeroDivisionError, OverflowError, ValueError):
        return None


FLOAT_SIG_FIGS = 15  # a gold decimal this long is a float's rendering of a value, not a claim


def exact_numbers_equal(p: Ast, vp: Fraction, g: Ast, vg: Fraction) -> Verdict:
    """Two exact rationals (``p`` the answer, ``g`` the gold): equal, or a decimal standing for
    the other (see exact.rounds_to). An answer decimal coarser than a gold decimal written out
    to fewer than :data:`FLOAT_SIG_FIGS` figures (``0.356`` for ``.35625``) drops digits the
    gold states, and is refused; a gold that is a float's 16-17 digit rendering is not held
    to its last digit."""
    if vp == vg:
        return _equal(Reason.NUMERIC_EQUAL)
    dp, dg = decimal_literal(p), decimal_literal(g)
    if dp and dg and dp[1] > dg[1] and dg[2] < FLOAT_SIG_FIGS:
        ok = False  # coarser than a gold written out to its last digit: precision lost
    elif dp and dg:
        ok = decimals_agree(dp, dg)
    elif dp:
        ok = rounds_to(dp, vg)
    elif dg:
        ok = rounds_to(dg, vp)
    else:
        ok = False
    if ok:
        return _equal(Reason.APPROX_EQUAL, "decimal approximation")
    return _unequal()


# --------------------------------------------------------------------------------------------
# helpers on answers


def is_constant(ans: Answer) -> bool:
    return isinstance(ans, Expr) and not free_symbols(ans.node) and not contains(ans.node, _OPAQUE)


_OPAQUE = (Dots, Based, Matrix)


def _sub(a: Ast, b: Ast) -> Ast:
    return Add((a, Neg(b)))


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!=", "=": "="}


@dataclass(frozen=True)
class EqView:
    kind: str  # assign | value | equation
    lhs: Answer
    rhs: Answer


def eq_view(rel: Rel) -> EqView:
    """How an all-``=`` chain is read: ``x = 5`` assigns, ``1/2 = 10/9`` / ``x = 3+3 = 6``
    states a value (the last part), ``2x + 4y = 3`` is a genuine equation, and so is
    ``x = 3x + 5``: a bare unknown that occurs on the right is solved for, not named."""
    parts = rel.parts
    first, last = parts[0], parts[-1]
    if is_label(first) and not _defined_by_itself(first, parts[1:]):
        return EqView("assign", first, last)
    if is_constant(last) and (len(parts) >= 3 or is_constant(first)):
        return EqView("value", first, last)
    return EqView("equation", first, last)


def _defined_by_itself(label: Answer, rest: tuple[Answer, ...]) -> bool:
    if not (isinstance(label, Expr) and isinstance(label.node, Sym)):
        return False
    name = label.node.name
    return any(isinstance(part, Expr) and name in free_symbols(part.node) for part in rest)


def _is_region(a: Answer) -> bool:
    return isinstance(a, Interval | Union | RMinus | NamedSet)


def _pair_like(a: Answer) -> bool:
    return (
        isinstance(a, Coll)
        and a.kind in ("tuple", "blist")
        and len(a.elems) == 2
        and all(isinstance(e, Expr) for e in a.elems)
    )


@dataclass(frozen=True, slots=True)
class Span:
    """A set component: the interval from ``lo`` to ``hi``."""

    lo_open: bool
    lo: Ast
    hi: Ast
    hi_open: bool


@dataclass(frozen=True, slots=True)
class Point:
    """A set component: one element."""

    answer: Answer


@dataclass(frozen=True, slots=True)
class Named:
    """A set component: a named set other than R (``\\mathbb{N}``...)."""

    name: str


Component = Span | Point | Named


def _exact_set(components: list[Component]) -> list | None:
    """Canonical union of exact intervals/points: sorted, merged; None if not all exact."""
    ivs = []
    for c in components:
        if isinstance(c, Point):
            if not isinstance(c.answer, Expr):
                return None
            v = _bound(c.answer.node)
            if v is None:
                return None
            ivs.append((v, False, v, False))
        elif isinstance(c, Span):
            lopen, ropen = c.lo_open, c.hi_open
            a, b = _bound(c.lo), _bound(c.hi)
            if a is None or b is None:
                return None
            ivs.append((a, lopen and a != -INF, b, ropen and b != INF))
        else:
            return None
    ivs = [iv for iv in ivs if _nonempty(iv)]
    ivs.sort(key=lambda iv: (iv[0], iv[1]))
    merged: list = []
    for iv in ivs:
        if merged:
            a, lo_open, b, hi_open = merged[-1]
            if iv[0] < b or (iv[0] == b and not (hi_open and iv[1])):
                if iv[2] > b or (iv[2] == b and not iv[3]):
                    merged[-1] = (a, lo_open, iv[2], iv[3])
                continue
        merged.append(iv)
    return merged


INF = Fraction(10) ** 400  # stands for +oo among exact endpoints (compared, never computed)


def _bound(node: Ast) -> Fraction | None:
    if node == OO:
        return INF
    if node == NEG_OO:
        return -INF
    v = _try_exact(node)
    return v if isinstance(v, Fraction) and abs(v) < INF else None


def _reversed_interval(components: list[Component]) -> bool:
    """An interval written with lo > hi (``[52427, 6866)``), or lo = hi with an open end: no
    answer anyone means, so never "the same (empty) set" as another such interval."""
    for c in components:
        if isinstance(c, Span):
            a, b = _bound(c.lo), _bound(c.hi)
            if a is not None and b is not None and (a > b or (a == b and (c.lo_open or c.hi_open))):
                return True
    return False


def _punctured_line(points: tuple[Answer, ...]) -> list[Component] | None:
    """``R \\ {a, b}`` as open intervals between its exact points, sorted; None otherwise."""
    values = []
    for p in points:
        v = _bound(p.node) if isinstance(p, Expr) else None
        if v is None or abs(v) >= INF:
            return None
        values.append((v, p.node))
    values.sort(key=lambda t: t[0])
    ends = [NEG_OO] + [node for _, node in values] + [OO]
    return [Span(True, lo, hi, True) for lo, hi in zip(ends, ends[1:], strict=False)]


def _nonempty(iv: tuple) -> bool:
    a, lo_open, b, hi_open = iv
    return a < b or (a == b and not lo_open and not hi_open)


# --------------------------------------------------------------------------------------------
# the comparer


class Comparer:
    """Applies the equivalence rules (docs/scorer.md) with a given leaf backend."""

    def __init__(self, backend: ExactBackend) -> None:
        self.be = backend

    def compare(self, p: Answer, g: Answer) -> Verdict:
        if p == g and not isinstance(p, Text):
            return _equal(Reason.SYMBOLIC_EQUAL, "same structure")
        if isinstance(p, Text) or isinstance(g, Text):
            return self._text(p, g)
        if isinstance(p, Rel) or isinstance(g, Rel):
            return self._relation(p, g)
        if isinstance(p, Letter) or isinstance(g, Letter):
            return self._letter(p, g)
        if isinstance(p, Time) or isinstance(g, Time):
            return self._time(p, g)
        if isinstance(p, In) and isinstance(g, In):
            return self.compare(p.domain, g.domain)
        if isinstance(p, In):
            return self.compare(p.domain, g)
        if isinstance(g, In):
            return self.compare(p, g.domain)
        if isinstance(p, Ratio) or isinstance(g, Ratio):
            return self._ratio(p, g)
        if _is_region(p) or _is_region(g):
            return self._sets(p, g)
        if isinstance(p, Coll) or isinstance(g, Coll):
            return self._colls(p, g)
        if _family_pair(p, g) and self.be.same_family(cast(Expr, p).node, cast(Expr, g).node):
            return _equal(Reason.SYMBOLIC_EQUAL, "the same family of values")
        return self.values(cast(Expr, p).node, cast(Expr, g).node)

    # -- leaves
    def values(self, pa: Ast, ga: Ast) -> Verdict:
        pm, gm = isinstance(pa, Matrix), isinstance(ga, Matrix)
        if pm and gm:
            return self._matrices(pa, ga)
        if (pm or gm) and not (contains(pa, _MATRIX) and contains(ga, _MATRIX)):
            return _unequal(Reason.STRUCTURE_MISMATCH, "matrix vs scalar")
        last: Verdict | None = None
        undecided = False
        alts_p, alts_g = _alternatives(pa), _alternatives(ga)
        if isinstance(pa, Pct) and isinstance(ga, Pct):
            alts_p, alts_g = [pa.arg], [ga.arg]  # 0.37% is not 37%
        elif isinstance(pa, Pct):
            alts_p = _pred_percent(pa)
        for a in alts_p:
            for b in alts_g:
                try:
                    out = self.be.values_equal(a, b)
                except Undecided:
                    undecided = True
                    continue
                if out.correct:
                    return out
                last = out
        if undecided:
            raise Undecided
        return last or _unequal()

    def _matrices(self, pa: Matrix, ga: Matrix) -> Verdict:
        rp, rg = pa.rows, ga.rows
        if len(rp) != len(rg) or len(rp[0]) != len(rg[0]):
            return _unequal(Reason.STRUCTURE_MISMATCH, "matrix shapes differ")
        outs = []
        for row_p, row_g in zip(rp, rg, strict=True):
            for a, b in zip(row_p, row_g, strict=True):
                o = self.values(a, b)
                if not o.correct:
                    return o
                outs.append(o)
        return weakest(outs)

    # -- words
    def _text(self, p: Answer, g: Answer) -> Verdict:
        failed = (isinstance(p, Text) and p.parse_failed) or (
            isinstance(g, Text) and g.parse_failed
        )
        if isinstance(p, Text) and isinstance(g, Text):
            if p.words and p.words == g.words:
                return _equal(Reason.TEXT_MATCH)
            if _explained_yes_no(p.words, g.words) or _explained_yes_no(g.words, p.words):
                return _equal(Reason.TEXT_MATCH, "yes/no with an explanation")
            if _key_phrase(p.words, g.words):
                return _equal(Reason.TEXT_MATCH, "the gold is the answer's key phrase")
            return _unequal(Reason.PARSE_ERROR if failed else Reason.NOT_EQUAL)
        return _unequal(Reason.PARSE_ERROR if failed else Reason.STRUCTURE_MISMATCH, "text vs math")

    def _letter(self, p: Answer, g: Answer) -> Verdict:
        if isinstance(p, Letter) and isinstance(g, Letter):
            explicit = p.explicit or g.explicit
            if p.letter == g.letter:
                return _equal(Reason.CHOICE_MATCH if explicit else Reason.STRING_MATCH)
            # a bare lower-case letter is a variable (``$c$``), never option (C)
            bare_lower = any(x.letter.islower() and not x.explicit for x in (p, g))
            if explicit and not bare_lower and p.letter.lower() == g.letter.lower():
                return _equal(Reason.CHOICE_MATCH)
            return _unequal()
        letter, other = (p, g) if isinstance(p, Letter) else (cast(Letter, g), p)
        if isinstance(other, Expr) and not letter.explicit:
            return (
                self.values(Sym(letter.letter), other.node)
                if letter is p
                else self.values(other.node, Sym(letter.letter))
            )
        return _unequal(Reason.STRUCTURE_MISMATCH, "letter vs other")

    def _time(self, p: Answer, g: Answer) -> Verdict:
        if isinstance(p, Time) and isinstance(g, Time):
            return _equal(Reason.NUMERIC_EQUAL) if p.seconds == g.seconds else _unequal()
        t, other = (p, g) if isinstance(p, Time) else (cast(Time, g), p)
        if isinstance(other, Ratio) and len(other.parts) == 2 and t.second == 0:
            want = (Int(t.hour), Int(t.minute))
            if tuple(other.parts) == want:
                return _equal(Reason.STRING_MATCH)
        return _unequal(Reason.STRUCTURE_MISMATCH, "time vs other")

    def _ratio(self, p: Answer, g: Answer) -> Verdict:
        if isinstance(p, Ratio) and isinstance(g, Ratio):
            a, b = p.parts, g.parts
            if len(a) != len(b):
                return _unequal(Reason.STRUCTURE_MISMATCH, "ratio lengths differ")
            if any(isinstance(x, Dots) for x in a + b):
                outs = []
                for x, y in zip(a, b, strict=True):
                    o = _equal(Reason.STRING_MATCH) if x == y else self.values(x, y)
                    if not o.correct:
                        return o
                    outs.append(o)
                return weakest(outs)
            outs = []
            for i in range(1, len(a)):
                o = self.values(Div(a[i], a[0]), Div(b[i], b[0]))
                if not o.correct:
                    return o
                outs.append(o)
            return weakest(outs)
        r, other = (p, g) if isinstance(p, Ratio) else (cast(Ratio, g), p)
        if isinstance(other, Expr) and len(r.parts) == 2:
            q = Div(r.parts[0], r.parts[1])
            return self.values(q, other.node) if r is p else self.values(other.node, q)
        return _unequal(Reason.STRUCTURE_MISMATCH, "ratio vs other")

    # -- equations and inequalities
    def _relation(self, p: Answer, g: Answer) -> Verdict:
        if isinstance(p, Rel) and isinstance(g, Rel):
            return self._rel_rel(p, g)
        rel, other = (p, g) if isinstance(p, Rel) else (cast(Rel, g), p)
        if all(op == "=" for op in rel.ops):
            view = eq_view(rel)
            if view.kind == "equation":
                return _unequal(detail="equation vs value")
            return self.compare(view.rhs, other) if rel is p else self.compare(other, view.rhs)
        target = other.domain if isinstance(other, In) else other
        if (
            _is_region(target)
            or _pair_like(target)
            or (isinstance(target, Coll) and target.kind == "set")
        ):
            s = self._relation_set(rel)
            if s is None:
                return _unequal(Reason.STRUCTURE_MISMATCH, "inequality vs set")
            return self._sets(s, target) if rel is p else self._sets(target, s)
        return _unequal(Reason.STRUCTURE_MISMATCH, "inequality vs value")

    def _rel_rel(self, p: Rel, g: Rel) -> Verdict:
        pe = all(op == "=" for op in p.ops)
        ge = all(op == "=" for op in g.ops)
        if pe != ge:
            return _unequal(Reason.STRUCTURE_MISMATCH, "equation vs inequality")
        if pe:
            return self._equations(eq_view(p), eq_view(g))
        sp, sg = self._relation_set(p), self._relation_set(g)
        if sp is not None and sg is not None:
            vp, vg = _relation_var(p), _relation_var(g)
            if vp is not None and vg is not None and vp != vg:
                return _unequal(detail="different variables")
            return self._sets(sp, sg)
        return self._inequality_forms(p, g)

    def _equations(self, vp: EqView, vg: EqView) -> Verdict:
        if vp.kind == "value" or vg.kind == "value":
            if vp.kind == "equation" or vg.kind == "equation":
                return _unequal(detail="equation vs value")
            return self.compare(vp.rhs, vg.rhs)
        if vp.kind == vg.kind == "assign" and _same_label(vp.lhs, vg.lhs):
            return self.compare(vp.rhs, vg.rhs)
        bound = _bound_variables(vp.lhs, vg.lhs)
        if bound is not None and isinstance(vp.rhs, Expr) and isinstance(vg.rhs, Expr):
            # f(x) = x vs f(z) = z: the argument is a bound variable
            return self.compare(
                Expr(_rename(vp.rhs.node, bound[0])), Expr(_rename(vg.rhs.node, bound[1]))
            )
        res = None
        if (
            isinstance(vp.lhs, Expr)
            and isinstance(vp.rhs, Expr)
            and isinstance(vg.lhs, Expr)
            and isinstance(vg.rhs, Expr)
        ):
            dp = _sub(vp.lhs.node, vp.rhs.node)
            dg = _sub(vg.lhs.node, vg.rhs.node)
            if self.be.proportional(dp, dg, positive=False):
                return _equal(Reason.SYMBOLIC_EQUAL, "equations are proportional")
            if canonical(vp.lhs.node) == canonical(vg.lhs.node):
                res = self.compare(vp.rhs, vg.rhs)
                if res.correct:
                    return res
        if vp.kind == vg.kind == "assign":
            if _function_value(vp.lhs) or _function_value(vg.lhs):
                return _unequal(detail="values of different functions")  # sin x vs cos x
            return self.compare(vp.rhs, vg.rhs)
        return res or _unequal()

    def _inequality_forms(self, p: Rel, g: Rel) -> Verdict:
        fp, fg = _one_sided(p), _one_sided(g)
        if fp is None or fg is None or fp[1] != fg[1]:
            return _unequal(detail="different inequalities")
        positive = fp[1] != "!="
        if self.be.proportional(fp[0], fg[0], positive=positive):
            return _equal(Reason.SYMBOLIC_EQUAL, "inequalities are proportional")
        return _unequal()

    def _relation_set(self, rel: Rel) -> Answer | None:
        """A univariate inequality as a set: ``x > 2`` -> (2, oo); ``1 <= x < 3`` -> [1, 3)."""
        ops, parts = rel.ops, cast(tuple[Expr, ...], rel.parts)
        if any(not isinstance(a, Expr) for a in parts):
            return None
        if len(ops) >= 2 and not (is_constant(parts[0]) and is_constant(parts[-1])):
            return None  # an ordering (f(2) < f(1) < f(4)), not a range of one unknown
        if len(ops) == 1:
            left, right = parts
            op = ops[0]
            if not is_constant(left) and is_constant(right):
                var, c = left, right.node
            elif is_constant(left) and not is_constant(right):
                var, c, op = right, left.node, _FLIP[op]
            else:
                return self.be.solve_relation(rel)
            if not _simple_var(var):
                return self.be.solve_relation(rel)
            if op == "<":
                return Interval(True, NEG_OO, c, True)
            if op == "<=":
                return Interval(True, NEG_OO, c, False)
            if op == ">":
                return Interval(True, c, OO, True)
            if op == ">=":
                return Interval(False, c, OO, True)
            if op == "!=":
                return Union((Interval(True, NEG_OO, c, True), Interval(True, c, OO, True)))
            return None
        if len(ops) == 2 and is_constant(parts[0]) and is_constant(parts[2]):
            if not _simple_var(parts[1]):
                return self.be.solve_relation(rel)
            a, b = parts[0].node, parts[2].node
            if ops[0] in ("<", "<=") and ops[1] in ("<", "<="):
                return Interval(ops[0] == "<", a, b, ops[1] == "<")
            if ops[0] in (">", ">=") and ops[1] in (">", ">="):
                return Interval(ops[1] == ">", b, a, ops[0] == ">")
            return None
        return self.be.solve_relation(rel)

    # -- sets and intervals
    def _sets(self, p: Answer, g: Answer) -> Verdict:
        cp, cg = self._components(p), self._components(g)
        if cp is None or cg is None:
            return _unequal(Reason.STRUCTURE_MISMATCH, "set vs non-set")
        if _reversed_interval(cp) or _reversed_interval(cg):
            return _unequal(Reason.STRUCTURE_MISMATCH, "an interval with its ends reversed")
        if len(cp) == len(cg):
            outs = []
            remaining = list(cg)
            for c in cp:
                for j, d in enumerate(remaining):
                    o = self._component_equal(c, d)
                    if o.correct:
                        outs.append(o)
                        del remaining[j]
                        break
                else:
                    break
            else:
                return weakest(outs)
            exact_p, exact_g = _exact_set(cp), _exact_set(cg)
            if exact_p is not None and exact_g is not None and exact_p == exact_g:
                return _equal(Reason.NUMERIC_EQUAL, "same set after merging intervals")
            return _unequal(detail="set components differ")
        return self.be.sets_equal(cp, cg)

    def _components(self, a: Answer) -> list[Component] | None:
        if isinstance(a, Interval):
            return [Span(a.left_open, a.lo, a.hi, a.right_open)]
        if isinstance(a, Union):
            out: list[Component] = []
            for part in a.parts:
                c = self._components(part)
                if c is None:
                    return None
                out.extend(c)
            return out
        if isinstance(a, RMinus):
            return _punctured_line(a.points)
        if isinstance(a, NamedSet):
            if a.name == "R":
                return [Span(True, NEG_OO, OO, True)]
            return [Named(a.name)]
        if isinstance(a, Coll) and a.kind == "set":
            return [Point(e) for e in a.elems]
        if _pair_like(a):
            elems = cast(Coll, a).elems
            is_open = cast(Coll, a).kind == "tuple"
            lo, hi = cast(Expr, elems[0]).node, cast(Expr, elems[1]).node
            return [Span(is_open, lo, hi, is_open)]
        if isinstance(a, Rel) and not all(op == "=" for op in a.ops):
            s = self._relation_set(a)
            return None if s is None else self._components(s)
        if isinstance(a, In):
            return self._components(a.domain)
        if isinstance(a, Expr):
            return [Point(a)]
        return None

    def _component_equal(self, c: Component, d: Component) -> Verdict:
        if type(c) is not type(d):
            return _unequal(Reason.STRUCTURE_MISMATCH)
        if isinstance(c, Named):
            return _equal(Reason.STRING_MATCH) if c.name == cast(Named, d).name else _unequal()
        if isinstance(c, Point):
            return self.compare(c.answer, cast(Point, d).answer)
        d = cast(Span, d)
        lo_open, lo, hi, hi_open = c.lo_open, c.lo, c.hi, c.hi_open
        lo_open2, lo2, hi2, hi_open2 = d.lo_open, d.lo, d.hi, d.hi_open
        if (lo_open != lo_open2 and lo != NEG_OO) or (hi_open != hi_open2 and hi != OO):
            return _unequal(detail="bracket types differ")
        a = self.values(lo, lo2)
        if not a.correct:
            return a
        b = self.values(hi, hi2)
        if not b.correct:
            return b
        return weakest([a, b])

    # -- collections
    def _colls(self, p: Answer, g: Answer) -> Verdict:
        if isinstance(p, Coll) and isinstance(g, Coll):
            kp, kg = p.kind, g.kind
            if "seq" in (kp, kg):  # boxes of one run: whole, in the order the other side has
                if {kp, kg} & {"set", "list"}:
                    return self._unordered(p.elems, g.elems)
                return self._ordered(p.elems, g.elems)
            if {kp, kg} & {"set"} and {kp, kg} & {"tuple", "blist"}:
                return _unequal(Reason.STRUCTURE_MISMATCH, "set vs tuple")
            has_ellipsis = any(
                isinstance(e, Expr) and isinstance(e.node, Dots) for e in p.elems + g.elems
            )
            if kp in ("set", "list") and kg in ("set", "list") and not has_ellipsis:
                return self._unordered(p.elems, g.elems)
            if {kp, kg} == {"tuple", "blist"} and _pair_like(p) and _pair_like(g):
                return self._sets(p, g)
            return self._ordered(p.elems, g.elems)
        coll, other = (p, g) if isinstance(p, Coll) else (cast(Coll, g), p)
        items = coll.elems
        if len(items) == 1:
            return self.compare(items[0], other) if coll is p else self.compare(other, items[0])
        if isinstance(other, Expr) and isinstance(other.node, Matrix):
            flat = _vector(other.node)
            if flat is not None and len(flat) == len(items):
                vec = tuple(Expr(x) for x in flat)
                return self._ordered(items, vec) if coll is p else self._ordered(vec, items)
        return _unequal(Reason.STRUCTURE_MISMATCH, f"{len(items)} items vs one")

    def _ordered(self, ps: tuple[Answer, ...], gs: tuple[Answer, ...]) -> Verdict:
        if len(ps) != len(gs):
            return _unequal(Reason.STRUCTURE_MISMATCH, f"{len(ps)} items vs {len(gs)}")
        outs = []
        for a, b in zip(ps, gs, strict=True):
            o = self.compare(a, b)
            if not o.correct:
                return o
            outs.append(o)
        return weakest(outs)

    def _unordered(self, ps: tuple[Answer, ...], gs: tuple[Answer, ...]) -> Verdict:
        """Set semantics: every item on each side equals some item on the other side."""
        kp = [_exact_key(a) for a in ps]
        kg = [_exact_key(b) for b in gs]
        keys_g = {k for k in kg if k is not None}
        keys_p = {k for k in kp if k is not None}
        outs: list[Verdict] = []
        pending_p = [a for a, k in zip(ps, kp, strict=True) if k is None or k not in keys_g]
        pending_g = [b for b, k in zip(gs, kg, strict=True) if k is None or k not in keys_p]
        if len(pending_p) * len(gs) + len(pending_g) * len(ps) > MAX_PAIRWISE:
            return _unequal(Reason.STRUCTURE_MISMATCH, "too many items to match")
        undecided = False
        labelled = _distinct_labels(ps, gs)
        for side, pool, forward in ((pending_p, gs, True), (pending_g, ps, False)):
            for a in side:
                found = None
                for b in pool:
                    if labelled and _assigned_label(a) != _assigned_label(b):
                        continue  # x = 1, y = 2 is not y = 1, x = 2
                    try:
                        o = self.compare(a, b) if forward else self.compare(b, a)
                    except Undecided:
                        undecided = True
                        continue
                    if o.correct:
                        found = o
                        break
                if found is None:
                    if undecided:
                        raise Undecided
                    return _unequal(detail="an item has no match")
                outs.append(found)
        if len(kp) and len(outs) == 0:
            outs.append(_equal(Reason.NUMERIC_EQUAL))
        return weakest(outs)


_HEDGES = frozenset(
    """but only if unless except however sometimes maybe perhaps possibly depends depending
    when whenever provided providing assuming assume although though yet might may could
    probably likely unlikely usually generally typically often mostly partly partially
    conditionally otherwise either or guess unsure uncertain not sure sort kind somewhat
    almost nearly roughly approximately""".split()
)
_NEGATIONS = frozenset(
    """no not cannot can t never isn doesn don aren wasn weren won wouldn shouldn couldn
    hasn haven hadn didn ain impossible none nothing false wrong incorrect untrue neither
    nor nope nah""".split()
)


def _explained_yes_no(key: str, bare: str) -> bool:
    """``Yes, it is possible`` answers ``Yes``: the bare word, then words that neither hedge
    nor contradict it (``Yes, but only if n is even``, ``Yes, it is not`` and ``No, yes`` do
    not count; ``No, there is no such n`` does)."""
    if bare not in ("yes", "no"):
        return False
    words = key.split()
    if len(words) < 2 or words[0] != bare:
        return False
    rest = set(words[1:])
    against = _NEGATIONS if bare == "yes" else {"yes"}
    return not (rest & _HEDGES or rest & against)


_LEADS = ("the answer is ", "answer is ", "it is ", "it s ", "its ", "this is ", "that is ")
_REASONS = frozenset("because since as for due given".split())


def _key_phrase(key: str, gold: str) -> bool:
    """A text answer whose key phrase is the gold: ``It is Tuesday`` or ``Tuesday, because
    it rains`` answers ``Tuesday``. The lead-in is one of a few fixed phrases; what follows the
    gold must start with a reason word and neither hedge nor negate (``Tuesday or Monday``,
    ``Tuesday, but not always`` do not count)."""
    if not gold or gold in ("yes", "no") or len(gold.split()) > 4:
        return False
    for lead in _LEADS:
        if key.startswith(lead):
            key = key[len(lead) :]
            break
    if key == gold:
        return True
    if not key.startswith(gold + " "):
        return False
    rest = key[len(gold) + 1 :].split()
    if not rest or rest[0] not in _REASONS:
        return False
    words = set(rest)
    return not (words & _HEDGES or words & _NEGATIONS)


_BOUND = "\\boundvar"
_FUNCTION_NAMES = frozenset("f g h p q r u v w F G H P Q".split())


def _call(a: Answer) -> tuple[str, str] | None:
    """``f(x)`` (read as the product of two symbols): the function name and its argument."""
    if not isinstance(a, Expr) or not isinstance(a.node, Mul) or len(a.node.factors) != 2:
        return None
    fn, arg = a.node.factors
    if not (isinstance(fn, Sym) and isinstance(arg, Sym)):
        return None
    return fn.name, arg.name


def _bound_variables(a: Answer, b: Answer) -> tuple[str, str] | None:
    """The arguments of two one-variable definitions of the same function, ``f(x)`` and
    ``f(z)`` with ``x != z``; None for anything else."""
    ca, cb = _call(a), _call(b)
    if ca is None or cb is None:
        return None
    (fa, xa), (fb, xb) = ca, cb
    if fa != fb or xa == xb or fa not in _FUNCTION_NAMES:
        return None
    return xa, xb


def _rename(node: Ast, var: str) -> Ast:
    """``node`` with the symbol ``var`` replaced by one fresh bound-variable name."""
    if node == Sym(var):
        return Sym(_BOUND)
    if isinstance(node, SympyValue):
        return node
    return cast(Ast, rebuild(node, lambda c: _rename(cast(Ast, c), var)))


FAMILY_PARAMETER = "k"


def _family_pair(p: Answer, g: Answer) -> bool:
    """Two expressions in pi and the parameter ``k`` alone (``\\frac{\\pi}{6} + 2k\\pi``):
    families of values over the integers (normalization spells the parameter ``k``), equal as
    sets when one is the other shifted by a whole number of periods."""
    return (
        isinstance(p, Expr)
        and isinstance(g, Expr)
        and free_symbols(p.node) == free_symbols(g.node) == {FAMILY_PARAMETER}
        and contains(p.node, (Const,))
        and contains(g.node, (Const,))
    )


def _function_value(label: Answer) -> bool:
    """A label that names a function's value (``\\sin x``): two different ones never state
    the same thing, even with the same right-hand side."""
    return isinstance(label, Expr) and isinstance(label.node, Fn)


def _assigned_label(a: Answer) -> object:
    """The label of an assignment ``x = 5`` (comparison key), else None."""
    if not isinstance(a, Rel) or any(op != "=" for op in a.ops):
        return None
    view = eq_view(a)
    return _label_key(view.lhs) if view.kind == "assign" else None


def _distinct_labels(ps: tuple[Answer, ...], gs: tuple[Answer, ...]) -> bool:
    """Both sides assign the same several labels (``x = 1, y = 2`` vs ``y = 2, x = 1``): then
    items match by label, never across labels."""
    lp = {_assigned_label(a) for a in ps}
    lg = {_assigned_label(b) for b in gs}
    return None not in lp and lp == lg and len(lp) > 1


def _same_label(a: Answer, b: Answer) -> bool:
    return _label_key(a) == _label_key(b)


def _label_key(a: Answer) -> object:
    """What names a label: an expression's canonical form, any other answer itself."""
    return canonical(a.node) if isinstance(a, Expr) else a


def _simple_var(a: Answer) -> bool:
    """The unknown of a univariate inequality: ``x``, ``a_1``, ``f(x)`` (not ``|z|``)."""
    if not isinstance(a, Expr):
        return False
    node = a.node
    if isinstance(node, Sym):
        return True
    return isinstance(node, Mul) and all(isinstance(c, Sym) for c in node.factors)


def _relation_var(rel: Rel) -> frozenset[str] | None:
    """The variables of an inequality (``x > 2`` -> {x}, ``1 <= |z| <= 2`` -> {z})."""
    names: set[str] = set()
    for part in rel.parts:
        if isinstance(part, Expr) and not is_constant(part):
            names |= free_symbols(part.node)
    return frozenset(names) or None


def _one_sided(rel: Rel) -> tuple[Ast, str] | None:
    if len(rel.ops) != 1 or any(not isinstance(a, Expr) for a in rel.parts):
        return None
    op = rel.ops[0]
    left, right = cast(Expr, rel.parts[0]).node, cast(Expr, rel.parts[1]).node
    if op in (">", ">="):
        return _sub(right, left), "<" if op == ">" else "<="
    return _sub(left, right), op


def _vector(node: Matrix) -> list[Ast] | None:
    rows = node.rows
    if len(rows) == 1:
        return list(rows[0])
    if all(len(r) == 1 for r in rows):
        return [r[0] for r in rows]
    return None


def _alternatives(node: Ast) -> list[Ast]:
    """``28\\%`` may mean 28 or 0.28; ``30^\\circ`` may mean 30 or pi/6."""
    if isinstance(node, Pct):
        x = node.arg
        d = decimal_literal(x)
        if d is not None:
            return [x, Dec(d[0], d[1] - 2, d[2])]
        return [x, Div(x, Int(100))]
    if isinstance(node, Deg):
        x = node.arg
        return [x, Mul((x, Div(Const("pi"), Int(180))))]
    return [node]


def _pred_percent(node: Pct) -> list[Ast]:
    """A predicted ``x\\%`` against a plain gold: ``x/100`` always; ``x`` (the sign dropped, a
    gold that left out its percent sign) only for ``|x| >= 1``, so ``0.37\\%`` is never paid
    for the gold 0.37, which is 100 times more."""
    dropped, converted = _alternatives(node)
    v = _try_exact(node.arg)
    if isinstance(v, Fraction) and abs(v) >= 1:
        return [dropped, converted]
    return [converted]


def _exact_key(a: Answer) -> tuple | None:
    """Hashable exact value of an item (numbers and tuples of numbers), else None."""
    if isinstance(a, Expr):
        if isinstance(a.node, Pct | Deg):
            return None
        v = _try_exact(a.node)
        return ("q", v) if isinstance(v, Fraction) else None
    if isinstance(a, Coll) and a.kind == "tuple":
        keys = tuple(_exact_key(x) for x in a.elems)
        return None if any(k is None for k in keys) else ("t", keys)
    return None
