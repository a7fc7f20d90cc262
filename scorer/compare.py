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

from scorer.exact import (
    NotRational,
    TooBig,
    certainly_different_magnitude,
    decimal_literal,
    decimals_agree,
    exact_value,
    rounds_to,
)
from scorer.parse import Answer, Ast, canonical, contains, free_symbols, is_label
from scorer.verdict import Reason

_MATRIX = frozenset({"matrix", "det"})
_STRENGTH = {
    Reason.STRING_MATCH: 0,
    Reason.CHOICE_MATCH: 0,
    Reason.TEXT_MATCH: 0,
    Reason.NUMERIC_EQUAL: 1,
    Reason.SYMBOLIC_EQUAL: 2,
    Reason.APPROX_EQUAL: 3,
}
MAX_PAIRWISE = 40_000


@dataclass(frozen=True)
class Outcome:
    equal: bool
    reason: str
    detail: str = ""


class Undecided(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The pure-Python backend cannot decide; the pair goes to the sympy worker."""


def _equal(reason: str, detail: str = "") -> Outcome:
    return Outcome(True, reason, detail)


def _unequal(reason: str = Reason.NOT_EQUAL, detail: str = "") -> Outcome:
    return Outcome(False, reason, detail)


def weakest(outcomes: list[Outcome]) -> Outcome:
    """All equal -> the weakest evidence among them; else the first failure."""
    for o in outcomes:
        if not o.equal:
            return o
    if not outcomes:
        return _equal(Reason.SYMBOLIC_EQUAL)
    return max(outcomes, key=lambda o: _STRENGTH.get(o.reason, 0))


# --------------------------------------------------------------------------------------------
# backend


class ExactBackend:
    """Leaf decisions with exact rationals only (caller-side fast path)."""

    def values_equal(self, p: Ast, g: Ast) -> Outcome:
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

    def solve_relation(self, rel: Answer) -> Answer | None:
        raise Undecided

    def sets_equal(self, cp: list, cg: list) -> Outcome:
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


def exact_numbers_equal(p: Ast, vp: Fraction, g: Ast, vg: Fraction) -> Outcome:
    """Two exact rationals: equal, or a decimal standing for the other (see exact.rounds_to)."""
    if vp == vg:
        return _equal(Reason.NUMERIC_EQUAL)
    dp, dg = decimal_literal(p), decimal_literal(g)
    if dp and dg:
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
    return ans[0] == "expr" and not free_symbols(ans[1]) and not contains(ans[1], _OPAQUE)


_OPAQUE = frozenset({"ellipsis", "based", "matrix"})


def _neg(a: Ast) -> Ast:
    return ("neg", a)


def _sub(a: Ast, b: Ast) -> Ast:
    return ("add", (a, ("neg", b)))


_OO = ("const", "oo")
_NEG_OO = ("neg", ("const", "oo"))
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!=", "=": "="}


@dataclass(frozen=True)
class EqView:
    kind: str  # assign | value | equation
    lhs: Answer
    rhs: Answer


def eq_view(rel: Answer) -> EqView:
    """How an all-``=`` chain is read: ``x = 5`` assigns, ``1/2 = 10/9`` / ``x = 3+3 = 6``
    states a value (the last part), ``2x + 4y = 3`` is a genuine equation, and so is
    ``x = 3x + 5``: a bare unknown that occurs on the right is solved for, not named."""
    parts = rel[2]
    first, last = parts[0], parts[-1]
    if is_label(first) and not _defined_by_itself(first, parts[1:]):
        return EqView("assign", first, last)
    if is_constant(last) and (len(parts) >= 3 or is_constant(first)):
        return EqView("value", first, last)
    return EqView("equation", first, last)


def _defined_by_itself(label: Answer, rest: tuple) -> bool:
    if label[0] != "expr" or label[1][0] != "sym":
        return False
    name = label[1][1]
    return any(part[0] == "expr" and name in free_symbols(part[1]) for part in rest)


def _is_region(a: Answer) -> bool:
    return a[0] in ("interval", "union", "namedset", "rminus")


def _pair_like(a: Answer) -> bool:
    return (
        a[0] == "coll"
        and a[1] in ("tuple", "blist")
        and len(a[2]) == 2
        and all(e[0] == "expr" for e in a[2])
    )


def _exact_set(components: list) -> list | None:
    """Canonical union of exact intervals/points: sorted, merged; None if not all exact."""
    ivs = []
    for c in components:
        if c[0] == "pt":
            if c[1][0] != "expr":
                return None
            v = _bound(c[1][1])
            if v is None:
                return None
            ivs.append((v, False, v, False))
        elif c[0] == "iv":
            _, lopen, lo, hi, ropen = c
            a, b = _bound(lo), _bound(hi)
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
    if node == _OO:
        return INF
    if node == _NEG_OO:
        return -INF
    v = _try_exact(node)
    return v if isinstance(v, Fraction) and abs(v) < INF else None


def _reversed_interval(components: list) -> bool:
    """An interval written with lo > hi (``[52427, 6866)``), or lo = hi with an open end: no
    answer anyone means, so never "the same (empty) set" as another such interval."""
    for c in components:
        if c[0] == "iv":
            a, b = _bound(c[2]), _bound(c[3])
            if a is not None and b is not None and (a > b or (a == b and (c[1] or c[4]))):
                return True
    return False


def _punctured_line(points: tuple) -> list | None:
    """``R \\ {a, b}`` as open intervals between its exact points, sorted; None otherwise."""
    values = []
    for p in points:
        v = _bound(p[1]) if p[0] == "expr" else None
        if v is None or abs(v) >= INF:
            return None
        values.append((v, p[1]))
    values.sort(key=lambda t: t[0])
    ends = [_NEG_OO] + [node for _, node in values] + [_OO]
    return [("iv", True, lo, hi, True) for lo, hi in zip(ends, ends[1:], strict=False)]


def _nonempty(iv: tuple) -> bool:
    a, lo_open, b, hi_open = iv
    return a < b or (a == b and not lo_open and not hi_open)


# --------------------------------------------------------------------------------------------
# the comparer


class Comparer:
    """Applies the equivalence rules (docs/scorer.md) with a given leaf backend."""

    def __init__(self, backend: ExactBackend) -> None:
        self.be = backend

    def compare(self, p: Answer, g: Answer) -> Outcome:
        kp, kg = p[0], g[0]
        if p == g and kp != "text":
            return _equal(Reason.SYMBOLIC_EQUAL, "same structure")
        if kp == "text" or kg == "text":
            return self._text(p, g)
        if kp == "rel" or kg == "rel":
            return self._relation(p, g)
        if kp == "letter" or kg == "letter":
            return self._letter(p, g)
        if kp == "time" or kg == "time":
            return self._time(p, g)
        if kp == "in" and kg == "in":
            return self.compare(p[2], g[2])
        if kp == "in":
            return self.compare(p[2], g)
        if kg == "in":
            return self.compare(p, g[2])
        if kp == "ratio" or kg == "ratio":
            return self._ratio(p, g)
        if _is_region(p) or _is_region(g):
            return self._sets(p, g)
        if kp == "coll" or kg == "coll":
            return self._colls(p, g)
        return self.values(p[1], g[1])

    # -- leaves
    def values(self, pa: Ast, ga: Ast) -> Outcome:
        pm, gm = pa[0] == "matrix", ga[0] == "matrix"
        if pm and gm:
            return self._matrices(pa, ga)
        if (pm or gm) and not (contains(pa, _MATRIX) and contains(ga, _MATRIX)):
            return _unequal(Reason.STRUCTURE_MISMATCH, "matrix vs scalar")
        last: Outcome | None = None
        undecided = False
        for a in _alternatives(pa):
            for b in _alternatives(ga):
                try:
                    out = self.be.values_equal(a, b)
                except Undecided:
                    undecided = True
                    continue
                if out.equal:
                    return out
                last = out
        if undecided:
            raise Undecided
        return last or _unequal()

    def _matrices(self, pa: Ast, ga: Ast) -> Outcome:
        rp, rg = pa[1], ga[1]
        if len(rp) != len(rg) or len(rp[0]) != len(rg[0]):
            return _unequal(Reason.STRUCTURE_MISMATCH, "matrix shapes differ")
        outs = []
        for row_p, row_g in zip(rp, rg, strict=True):
            for a, b in zip(row_p, row_g, strict=True):
                o = self.values(a, b)
                if not o.equal:
                    return o
                outs.append(o)
        return weakest(outs)

    # -- words
    def _text(self, p: Answer, g: Answer) -> Outcome:
        failed = (p[0] == "text" and p[2]) or (g[0] == "text" and g[2])
        if p[0] == "text" and g[0] == "text":
            if p[1] and p[1] == g[1]:
                return _equal(Reason.TEXT_MATCH)
            if _explained_yes_no(p[1], g[1]) or _explained_yes_no(g[1], p[1]):
                return _equal(Reason.TEXT_MATCH, "yes/no with an explanation")
            return _unequal(Reason.PARSE_ERROR if failed else Reason.NOT_EQUAL)
        return _unequal(Reason.PARSE_ERROR if failed else Reason.STRUCTURE_MISMATCH, "text vs math")

    def _letter(self, p: Answer, g: Answer) -> Outcome:
        if p[0] == "letter" and g[0] == "letter":
            explicit = p[2] or g[2]
            if p[1] == g[1]:
                return _equal(Reason.CHOICE_MATCH if explicit else Reason.STRING_MATCH)
            if explicit and p[1].lower() == g[1].lower():
                return _equal(Reason.CHOICE_MATCH)
            return _unequal()
        other = g if p[0] == "letter" else p
        letter = p if p[0] == "letter" else g
        if other[0] == "expr" and not letter[2]:
            return (
                self.values(("sym", letter[1]), other[1])
                if letter is p
                else self.values(other[1], ("sym", letter[1]))
            )
        return _unequal(Reason.STRUCTURE_MISMATCH, "letter vs other")

    def _time(self, p: Answer, g: Answer) -> Outcome:
        if p[0] == "time" and g[0] == "time":
            return _equal(Reason.NUMERIC_EQUAL) if p[1] == g[1] else _unequal()
        t, other = (p, g) if p[0] == "time" else (g, p)
        if other[0] == "ratio" and len(other[1]) == 2 and t[2][2] == 0:
            want = (("int", t[2][0]), ("int", t[2][1]))
            if tuple(other[1]) == want:
                return _equal(Reason.STRING_MATCH)
        return _unequal(Reason.STRUCTURE_MISMATCH, "time vs other")

    def _ratio(self, p: Answer, g: Answer) -> Outcome:
        if p[0] == "ratio" and g[0] == "ratio":
            a, b = p[1], g[1]
            if len(a) != len(b):
                return _unequal(Reason.STRUCTURE_MISMATCH, "ratio lengths differ")
            if any(x[0] == "ellipsis" for x in a + b):
                outs = []
                for x, y in zip(a, b, strict=True):
                    o = _equal(Reason.STRING_MATCH) if x == y else self.values(x, y)
                    if not o.equal:
                        return o
                    outs.append(o)
                return weakest(outs)
            outs = []
            for i in range(1, len(a)):
                o = self.values(("div", a[i], a[0]), ("div", b[i], b[0]))
                if not o.equal:
                    return o
                outs.append(o)
            return weakest(outs)
        r, other = (p, g) if p[0] == "ratio" else (g, p)
        if other[0] == "expr" and len(r[1]) == 2:
            q = ("div", r[1][0], r[1][1])
            return self.values(q, other[1]) if r is p else self.values(other[1], q)
        return _unequal(Reason.STRUCTURE_MISMATCH, "ratio vs other")

    # -- equations and inequalities
    def _relation(self, p: Answer, g: Answer) -> Outcome:
        if p[0] == "rel" and g[0] == "rel":
            return self._rel_rel(p, g)
        rel, other = (p, g) if p[0] == "rel" else (g, p)
        if all(op == "=" for op in rel[1]):
            view = eq_view(rel)
            if view.kind == "equation":
                return _unequal(detail="equation vs value")
            return self.compare(view.rhs, other) if rel is p else self.compare(other, view.rhs)
        target = other[2] if other[0] == "in" else other
        if _is_region(target) or _pair_like(target) or (target[0] == "coll" and target[1] == "set"):
            s = self._relation_set(rel)
            if s is None:
                return _unequal(Reason.STRUCTURE_MISMATCH, "inequality vs set")
            return self._sets(s, target) if rel is p else self._sets(target, s)
        return _unequal(Reason.STRUCTURE_MISMATCH, "inequality vs value")

    def _rel_rel(self, p: Answer, g: Answer) -> Outcome:
        pe = all(op == "=" for op in p[1])
        ge = all(op == "=" for op in g[1])
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

    def _equations(self, vp: EqView, vg: EqView) -> Outcome:
        if vp.kind == "value" or vg.kind == "value":
            if vp.kind == "equation" or vg.kind == "equation":
                return _unequal(detail="equation vs value")
            return self.compare(vp.rhs, vg.rhs)
        if vp.kind == vg.kind == "assign" and _same_label(vp.lhs, vg.lhs):
            return self.compare(vp.rhs, vg.rhs)
        bound = _bound_variables(vp.lhs, vg.lhs)
        if bound is not None:  # f(x) = x vs f(z) = z: the argument is a bound variable
            return self.compare(
                ("expr", _rename(vp.rhs[1], bound[0])), ("expr", _rename(vg.rhs[1], bound[1]))
            )
        res = None
        if all(a[0] == "expr" for a in (vp.lhs, vp.rhs, vg.lhs, vg.rhs)):
            dp = _sub(vp.lhs[1], vp.rhs[1])
            dg = _sub(vg.lhs[1], vg.rhs[1])
            if self.be.proportional(dp, dg, positive=False):
                return _equal(Reason.SYMBOLIC_EQUAL, "equations are proportional")
            if canonical(vp.lhs[1]) == canonical(vg.lhs[1]):
                res = self.compare(vp.rhs, vg.rhs)
                if res.equal:
                    return res
        if vp.kind == vg.kind == "assign":
            return self.compare(vp.rhs, vg.rhs)
        return res or _unequal()

    def _inequality_forms(self, p: Answer, g: Answer) -> Outcome:
        fp, fg = _one_sided(p), _one_sided(g)
        if fp is None or fg is None or fp[1] != fg[1]:
            return _unequal(detail="different inequalities")
        positive = fp[1] != "!="
        if self.be.proportional(fp[0], fg[0], positive=positive):
            return _equal(Reason.SYMBOLIC_EQUAL, "inequalities are proportional")
        return _unequal()

    def _relation_set(self, rel: Answer) -> Answer | None:
        """A univariate inequality as a set: ``x > 2`` -> (2, oo); ``1 <= x < 3`` -> [1, 3)."""
        ops, parts = rel[1], rel[2]
        if any(a[0] != "expr" for a in parts):
            return None
        if len(ops) >= 2 and not (is_constant(parts[0]) and is_constant(parts[-1])):
            return None  # an ordering (f(2) < f(1) < f(4)), not a range of one unknown
        if len(ops) == 1:
            left, right = parts
            op = ops[0]
            if not is_constant(left) and is_constant(right):
                var, c = left, right[1]
            elif is_constant(left) and not is_constant(right):
                var, c, op = right, left[1], _FLIP[op]
            else:
                return self.be.solve_relation(rel)
            if not _simple_var(var):
                return self.be.solve_relation(rel)
            if op == "<":
                return ("interval", True, _NEG_OO, c, True)
            if op == "<=":
                return ("interval", True, _NEG_OO, c, False)
            if op == ">":
                return ("interval", True, c, _OO, True)
            if op == ">=":
                return ("interval", False, c, _OO, True)
            if op == "!=":
                return (
                    "union",
                    (("interval", True, _NEG_OO, c, True), ("interval", True, c, _OO, True)),
                )
            return None
        if len(ops) == 2 and is_constant(parts[0]) and is_constant(parts[2]):
            if not _simple_var(parts[1]):
                return self.be.solve_relation(rel)
            a, b = parts[0][1], parts[2][1]
            if ops[0] in ("<", "<=") and ops[1] in ("<", "<="):
                return ("interval", ops[0] == "<", a, b, ops[1] == "<")
            if ops[0] in (">", ">=") and ops[1] in (">", ">="):
                return ("interval", ops[1] == ">", b, a, ops[0] == ">")
            return None
        return self.be.solve_relation(rel)

    # -- sets and intervals
    def _sets(self, p: Answer, g: Answer) -> Outcome:
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
                    if o.equal:
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

    def _components(self, a: Answer) -> list | None:
        k = a[0]
        if k == "interval":
            return [("iv", a[1], a[2], a[3], a[4])]
        if k == "union":
            out: list = []
            for part in a[1]:
                c = self._components(part)
                if c is None:
                    return None
                out.extend(c)
            return out
        if k == "rminus":
            return _punctured_line(a[1])
        if k == "namedset":
            if a[1] == "R":
                return [("iv", True, _NEG_OO, _OO, True)]
            return [("named", a[1])]
        if k == "coll" and a[1] == "set":
            return [("pt", e) for e in a[2]]
        if _pair_like(a):
            is_open = a[1] == "tuple"
            return [("iv", is_open, a[2][0][1], a[2][1][1], is_open)]
        if k == "rel" and not all(op == "=" for op in a[1]):
            s = self._relation_set(a)
            return None if s is None else self._components(s)
        if k == "in":
            return self._components(a[2])
        if k == "expr":
            return [("pt", a)]
        return None

    def _component_equal(self, c: tuple, d: tuple) -> Outcome:
        if c[0] != d[0]:
            return _unequal(Reason.STRUCTURE_MISMATCH)
        if c[0] == "named":
            return _equal(Reason.STRING_MATCH) if c[1] == d[1] else _unequal()
        if c[0] == "pt":
            return self.compare(c[1], d[1])
        _, lo_open, lo, hi, hi_open = c
        _, lo_open2, lo2, hi2, hi_open2 = d
        if (lo_open != lo_open2 and lo != _NEG_OO) or (hi_open != hi_open2 and hi != _OO):
            return _unequal(detail="bracket types differ")
        a = self.values(lo, lo2)
        if not a.equal:
            return a
        b = self.values(hi, hi2)
        if not b.equal:
            return b
        return weakest([a, b])

    # -- collections
    def _colls(self, p: Answer, g: Answer) -> Outcome:
        if p[0] == "coll" and g[0] == "coll":
            kp, kg = p[1], g[1]
            if {kp, kg} & {"set"} and {kp, kg} & {"tuple", "blist"}:
                return _unequal(Reason.STRUCTURE_MISMATCH, "set vs tuple")
            has_ellipsis = any(e[0] == "expr" and e[1] == ("ellipsis",) for e in p[2] + g[2])
            if kp in ("set", "list") and kg in ("set", "list") and not has_ellipsis:
                return self._unordered(p[2], g[2])
            if {kp, kg} == {"tuple", "blist"} and _pair_like(p) and _pair_like(g):
                return self._sets(p, g)
            return self._ordered(p[2], g[2])
        coll, other = (p, g) if p[0] == "coll" else (g, p)
        if len(coll[2]) == 1:
            return self.compare(coll[2][0], other) if coll is p else self.compare(other, coll[2][0])
        if other[0] == "expr" and other[1][0] == "matrix":
            flat = _vector(other[1])
            if flat is not None and len(flat) == len(coll[2]):
                vec = ("coll", "tuple", tuple(("expr", x) for x in flat))
                return (
                    self._ordered(coll[2], vec[2]) if coll is p else self._ordered(vec[2], coll[2])
                )
        return _unequal(Reason.STRUCTURE_MISMATCH, f"{len(coll[2])} items vs one")

    def _ordered(self, ps: tuple, gs: tuple) -> Outcome:
        if len(ps) != len(gs):
            return _unequal(Reason.STRUCTURE_MISMATCH, f"{len(ps)} items vs {len(gs)}")
        outs = []
        for a, b in zip(ps, gs, strict=True):
            o = self.compare(a, b)
            if not o.equal:
                return o
            outs.append(o)
        return weakest(outs)

    def _unordered(self, ps: tuple, gs: tuple) -> Outcome:
        """Set semantics: every item on each side equals some item on the other side."""
        kp = [_exact_key(a) for a in ps]
        kg = [_exact_key(b) for b in gs]
        keys_g = {k for k in kg if k is not None}
        keys_p = {k for k in kp if k is not None}
        outs: list[Outcome] = []
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
                    if o.equal:
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
    "but only if unless except however sometimes maybe perhaps possibly depends when".split()
)
_NEGATIONS = frozenset(
    "no not cannot can t never isn doesn don aren impossible none nothing".split()
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


_BOUND = "\\boundvar"
_FUNCTION_NAMES = frozenset("f g h p q r u v w F G H P Q".split())


def _bound_variables(a: Answer, b: Answer) -> tuple[str, str] | None:
    """The arguments of two one-variable definitions of the same function, ``f(x)`` and
    ``f(z)`` with ``x != z``; None for anything else."""
    if a[0] != "expr" or b[0] != "expr":
        return None
    na, nb = a[1], b[1]
    for n in (na, nb):
        if n[0] != "mul" or len(n[1]) != 2 or any(c[0] != "sym" for c in n[1]):
            return None
    if na[1][0] != nb[1][0] or na[1][1] == nb[1][1] or na[1][0][1] not in _FUNCTION_NAMES:
        return None
    return na[1][1][1], nb[1][1][1]


def _rename(node: Ast, var: str) -> Ast:
    """``node`` with the symbol ``var`` replaced by one fresh bound-variable name."""
    if node == ("sym", var):
        return ("sym", _BOUND)
    if node[0] == "sx":
        return node
    return tuple(_rename(c, var) if isinstance(c, tuple) and c else c for c in node)


def _assigned_label(a: Answer):
    """The label of an assignment ``x = 5`` (comparison key), else None."""
    if a[0] != "rel" or any(op != "=" for op in a[1]):
        return None
    view = eq_view(a)
    return _label_key(view.lhs) if view.kind == "assign" else None


def _distinct_labels(ps: tuple, gs: tuple) -> bool:
    """Both sides assign the same several labels (``x = 1, y = 2`` vs ``y = 2, x = 1``): then
    items match by label, never across labels."""
    lp = {_assigned_label(a) for a in ps}
    lg = {_assigned_label(b) for b in gs}
    return None not in lp and lp == lg and len(lp) > 1


def _same_label(a: Answer, b: Answer) -> bool:
    return _label_key(a) == _label_key(b)


def _label_key(a: Answer):
    if a[0] == "expr":
        return canonical(a[1])
    return tuple(
        _label_key(x) if isinstance(x, tuple) and x and x[0] in ("expr", "coll") else x for x in a
    )


def _simple_var(a: Answer) -> bool:
    """The unknown of a univariate inequality: ``x``, ``a_1``, ``f(x)`` (not ``|z|``)."""
    if a[0] != "expr":
        return False
    node = a[1]
    if node[0] == "sym":
        return True
    return node[0] == "mul" and all(c[0] == "sym" for c in node[1])


def _relation_var(rel: Answer):
    """The variables of an inequality (``x > 2`` -> {x}, ``1 <= |z| <= 2`` -> {z})."""
    names: set[str] = set()
    for part in rel[2]:
        if part[0] == "expr" and not is_constant(part):
            names |= free_symbols(part[1])
    return frozenset(names) or None


def _one_sided(rel: Answer) -> tuple[Ast, str] | None:
    if len(rel[1]) != 1 or any(a[0] != "expr" for a in rel[2]):
        return None
    op = rel[1][0]
    left, right = rel[2][0][1], rel[2][1][1]
    if op in (">", ">="):
        return _sub(right, left), "<" if op == ">" else "<="
    return _sub(left, right), op


def _vector(node: Ast) -> list | None:
    rows = node[1]
    if len(rows) == 1:
        return list(rows[0])
    if all(len(r) == 1 for r in rows):
        return [r[0] for r in rows]
    return None


def _alternatives(node: Ast) -> list[Ast]:
    """``28\\%`` may mean 28 or 0.28; ``30^\\circ`` may mean 30 or pi/6."""
    if node[0] == "pct":
        x = node[1]
        d = decimal_literal(x)
        if d is not None:
            return [x, ("dec", d[0], d[1] - 2, d[2])]
        return [x, ("div", x, ("int", 100))]
    if node[0] == "deg":
        x = node[1]
        return [x, ("mul", (x, ("div", ("const", "pi"), ("int", 180))))]
    return [node]


def _exact_key(a: Answer):
    """Hashable exact value of an item (numbers and tuples of numbers), else None."""
    if a[0] == "expr":
        if a[1][0] in ("pct", "deg"):
            return None
        v = _try_exact(a[1])
        return ("q", v) if isinstance(v, Fraction) else None
    if a[0] == "coll" and a[1] == "tuple":
        keys = tuple(_exact_key(x) for x in a[2])
        return None if any(k is None for k in keys) else ("t", keys)
    return None
